package state

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/rocescope/rocescope/metrics"
)

// ErrOrder is wrapped by [Files.Next] (and so by [MergeFiles]) for a file
// whose states are not in window order.
var ErrOrder = errors.New("states out of window order")

// orderHint follows ErrOrder: the one way a Writer makes such a file.
const orderHint = " (after a clock step back a capture writes windows again, in a new segment: into a directory, each state gets a file of its own, and those merge)"

// MergeFiles merges the states of the state files paths window by window
// and calls emit with each merged window in time order as soon as no file
// can add to it: once every file delivered a state of a later window or
// ended. It reads the files with [Files.Drain], in window order, so that
// it holds one window being merged and a few spare ones to decode into,
// however many windows and files there are. The window given to emit is
// lent until emit returns. An error names the file and offset; the windows
// before it were emitted. An empty file is an error, and ctx stops every
// read. `rocescope merge` drains a Files in the same way into a merger of
// its own, which also follows directories and Kafka topics.
func MergeFiles(ctx context.Context, paths []string, opts *ReadOptions, emit func(*metrics.Window) error) error {
	fs := NewFiles(opts)
	for _, p := range paths {
		if err := fs.Add(ctx, p, 0); err == io.EOF {
			return fmt.Errorf("state: %s: no window state in the file: %w", p, metrics.ErrState)
		} else if err != nil {
			return err
		}
	}
	return fs.Drain(ctx, &emitter{Merger: NewMerger(), emit: emit})
}

// Draining is what [Files.Drain] hands the states it reads to, in window
// order.
type Draining interface {
	// Spare returns a window to decode the next state into.
	Spare() *metrics.Window
	// Recycle takes back a window from Spare that no state was decoded
	// into.
	Recycle(w *metrics.Window)
	// Add takes the state w, read from path; off is where the next state
	// of path begins. It owns w afterwards.
	Add(path string, off int64, w *metrics.Window) error
	// Settled says that no state still to be read is of a window that
	// starts before before (math.MaxInt64 once every file ended): those
	// windows are complete as far as the files go.
	Settled(before int64) error
}

// Drain reads the states of every file added, in window order, and hands
// them to d: each state to d.Add, then the window start no later state can
// be before to d.Settled. It returns nil once every file ended (with
// ReadOptions.Growing, or reached a state not complete yet), and the
// first error of a read or of d.
func (fs *Files) Drain(ctx context.Context, d Draining) error {
	for {
		w := d.Spare()
		path, off, err := fs.Next(ctx, w)
		if err == io.EOF {
			d.Recycle(w)
			return d.Settled(math.MaxInt64)
		}
		if err != nil {
			return err
		}
		if err := d.Add(path, off, w); err != nil {
			return err
		}
		before, more := fs.Head()
		if !more {
			before = math.MaxInt64
		}
		if err := d.Settled(before); err != nil {
			return err
		}
	}
}

// emitter is the Draining of MergeFiles: a Merger that emits each window
// once it is settled.
type emitter struct {
	*Merger
	emit func(*metrics.Window) error
}

var _ Draining = (*emitter)(nil)

// Add adds w to the Merger.
func (e *emitter) Add(path string, _ int64, w *metrics.Window) error { return e.Merger.Add(path, w) }

// Settled emits and recycles the pending windows that start before before.
func (e *emitter) Settled(before int64) error {
	for {
		oldest, ok := e.Oldest()
		if !ok || oldest >= before {
			return nil
		}
		w := e.Take()
		if err := e.emit(w); err != nil {
			return err
		}
		e.Recycle(w)
	}
}

// Files reads the states of several state files in window order, as a
// k-way merge: each file must hold its states in window order, as a
// [Writer] writes them ([ErrOrder] otherwise). Between calls it keeps no
// file open, only each file's name and the offset and window of its next
// state, so that it can read any number of files. The zero value is not
// usable; call [NewFiles].
type Files struct {
	opts  ReadOptions
	q     inputs
	added int
	buf   bytes.Buffer // the Readers' state buffer, reused
}

// NewFiles returns a Files without files. With opts.Growing, a file that
// ends inside a state (being written) counts as ending before it.
func NewFiles(opts *ReadOptions) *Files {
	fs := &Files{}
	if opts != nil {
		fs.opts = *opts
	}
	return fs
}

// Add adds the state file path, from offset off, which must be where a
// state begins. It returns io.EOF, and adds nothing, when the file holds no
// state from there; it refuses a file that does not begin like a state
// file before reading more of it.
func (fs *Files) Add(ctx context.Context, path string, off int64) error {
	in := &input{path: path, order: fs.added, off: off}
	if err := fs.advance(ctx, in, nil); err != nil {
		return err
	}
	fs.added++
	heap.Push(&fs.q, in)
	return nil
}

// Head returns the window start of the next state Next decodes, and false
// when no file is left: no state Next returns later is of an earlier
// window.
func (fs *Files) Head() (int64, bool) {
	if len(fs.q) == 0 {
		return 0, false
	}
	return fs.q[0].next, true
}

// Next decodes the state of the earliest window into w and returns its
// file and the offset after that state. It returns io.EOF when every file
// ended. An error names the file and offset; that file is dropped. With
// ReadOptions.Growing, a file whose next state is not complete yet is
// dropped without an error: add it again later from the offset after its
// last state.
func (fs *Files) Next(ctx context.Context, w *metrics.Window) (path string, off int64, err error) {
	for len(fs.q) > 0 {
		in := fs.q[0]
		switch err := fs.advance(ctx, in, w); {
		case err == nil:
			heap.Fix(&fs.q, 0)
			return in.path, in.off, nil
		case err == io.EOF:
			heap.Pop(&fs.q)
			return in.path, in.off, nil
		case fs.opts.Growing && errors.Is(err, io.ErrUnexpectedEOF):
			heap.Pop(&fs.q) // still being written
		default:
			heap.Pop(&fs.q)
			return "", 0, err
		}
	}
	return "", 0, io.EOF
}

// input is one file of a Files: where its next state begins and the
// window it holds.
type input struct {
	path  string
	order int   // position among the files added, to break ties
	off   int64 // offset of the next state
	next  int64 // window start of the next state
}

// advance decodes the next state of in into w (with w nil, it only finds
// it) and peeks at the one after, which must be of a later window. It
// returns io.EOF, with w decoded, when that was the last state.
func (fs *Files) advance(ctx context.Context, in *input, w *metrics.Window) error {
	sr, err := Open(ctx, in.path, in.off, &fs.opts)
	if err != nil {
		return err
	}
	defer sr.Close()
	sr.buf = &fs.buf
	if w != nil {
		if err := sr.Next(w); err != nil {
			return err
		}
		in.off = sr.Offset()
	}
	next, err := sr.Peek()
	if fs.opts.Growing && errors.Is(err, io.ErrUnexpectedEOF) {
		return io.EOF // the rest is still being written
	}
	if err != nil {
		return err
	}
	if w != nil && next <= w.Start {
		return sr.errorf("window %d after window %d: %w%s: %w", next, w.Start, ErrOrder, orderHint, metrics.ErrState)
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
