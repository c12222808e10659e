package state

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"io"

	"github.com/rocescope/rocescope/metrics"
)

// ErrOrder is wrapped by [Files.Next] for a file whose states are not in
// window order.
var ErrOrder = errors.New("states out of window order")

// orderHint follows ErrOrder: the one way a Writer makes such a file.
const orderHint = " (after a clock step back a capture writes windows again, in a new segment: into a directory, each state gets a file of its own, and those merge)"

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
// ended. An error names the file and offset; that file is dropped, and
// Next returns its name with the error. With ReadOptions.Growing, a file
// whose next state is not complete yet is dropped without an error: add it
// again later from the offset after its last state.
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
			return in.path, 0, err
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
