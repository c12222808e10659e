package state

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rocescope/rocescope/metrics"
)

// ErrOrder is wrapped by [MergeFiles] for a file whose states are not in
// window order.
var ErrOrder = errors.New("states out of window order")

// MergeFiles merges the states of the state files paths window by window,
// as `rocescope merge` does, and calls emit with each merged window in
// time order as soon as no file can add to it: once every file delivered a
// state of a later window or ended. Each file must hold its states in
// window order, as a [Writer] writes them ([ErrOrder] otherwise). So it
// reads the files as a k-way merge and holds one window being merged and a
// few spare ones to decode into, however many windows and files there
// are; between states it keeps no file open, only each file's name, the
// offset and window of its next state. The window given to emit is lent
// until emit returns. An error names the file and offset; the windows
// before it were emitted. An empty file is an error, a file that does not
// begin like a state file is refused before more of it is read, and ctx
// stops every read.
func MergeFiles(ctx context.Context, paths []string, opts *ReadOptions, emit func(*metrics.Window) error) error {
	var q inputs
	for i, p := range paths {
		in := &input{path: p, order: i}
		if err := in.advance(ctx, opts, nil); err == io.EOF {
			return fmt.Errorf("state: %s: no window state in the file: %w", p, metrics.ErrState)
		} else if err != nil {
			return err
		}
		q = append(q, in)
	}
	heap.Init(&q)
	m := NewMerger()
	for len(q) > 0 {
		in := q[0]
		w := m.Spare()
		switch err := in.advance(ctx, opts, w); {
		case err == io.EOF:
			heap.Pop(&q)
		case err != nil:
			return err
		default:
			heap.Fix(&q, 0)
		}
		start := w.Start
		if err := m.Add(in.path, w); err != nil {
			return err
		}
		for len(q) == 0 || q[0].next > start {
			done := m.Take()
			if done == nil {
				break
			}
			if err := emit(done); err != nil {
				return err
			}
			m.Recycle(done)
		}
	}
	return nil
}

// input is one file of a MergeFiles: where its next state begins and the
// window it holds.
type input struct {
	path  string
	order int   // position among the paths, to break ties
	off   int64 // offset of the next state
	next  int64 // window start of the next state
}

// advance decodes the next state of the file into w (with w nil, it only
// finds it) and peeks at the one after, which must be of a later window. It
// returns io.EOF, with w decoded, when that was the last state.
func (in *input) advance(ctx context.Context, opts *ReadOptions, w *metrics.Window) error {
	sr, err := Open(ctx, in.path, in.off, opts)
	if err != nil {
		return err
	}
	defer sr.Close()
	if w != nil {
		if err := sr.Next(w); err != nil {
			return err
		}
		in.off = sr.Offset()
	}
	next, err := sr.Peek()
	if err != nil {
		return err
	}
	if w != nil && next <= w.Start {
		return sr.errorf("window %d after window %d: %w: %w", next, w.Start, ErrOrder, metrics.ErrState)
	}
	in.next = next
	return nil
}

// inputs is a heap of files by the window of their next state.
type inputs []*input

func (q inputs) Len() int { return len(q) }
func (q inputs) Less(i, j int) bool {
	return q[i].next < q[j].next || q[i].next == q[j].next && q[i].order < q[j].order
}
func (q inputs) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *inputs) Push(x any)   { *q = append(*q, x.(*input)) }
func (q *inputs) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
