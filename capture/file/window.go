package file

import (
	"io"
)

// window holds the unread input of the current file, read into two buffers
// used in turn: a refill compacts the unread tail into the current buffer, or into
// the other one when frames handed out during this Next call still point
// into the current one. When both hold lent frames the refill fails with
// errFull and Next returns the frames it has.
type window struct {
	data []byte    // buffered input; data[pos:] is unread
	pos  int       // read position in data
	base int64     // file offset of data[0]
	r    io.Reader // the input
	eof  bool      // r has returned io.EOF
	err  error     // read error, returned once the data before it is used

	minFill int       // bytes a refill tries to buffer before it returns
	size    int       // size of each buffer
	bufs    [2][]byte // read buffers, allocated on first use
	cur     int       // index of the buffer data lives in
	lent    [2]bool   // the buffer holds frames handed out in this Next call
	zero    int       // consecutive reads that returned nothing
}

// maxZeroReads bounds consecutive empty reads before a refill gives up.
const maxZeroReads = 100

// startStream makes the window read a new input from r. A refill buffers at
// least minFill bytes unless r ends first.
func (w *window) startStream(r io.Reader, minFill int) {
	w.data, w.pos, w.base, w.r, w.eof, w.err = nil, 0, 0, r, false, nil
	w.minFill, w.zero = minFill, 0
}

// offset returns the file offset of the read position.
func (w *window) offset() int64 { return w.base + int64(w.pos) }

// ensure makes data[pos:pos+n] available. It returns io.EOF if the input
// ends first (data[pos:] then holds what is left), errFull, or a read error.
func (w *window) ensure(n int) error {
	if len(w.data)-w.pos >= n {
		return nil
	}
	return w.fill(n)
}

// fill is the slow path of ensure.
func (w *window) fill(n int) error {
	if w.err != nil {
		return w.err
	}
	if w.eof {
		return io.EOF
	}
	if n > w.size {
		// Callers bound n by the record and block limits, which the buffer
		// size covers; this keeps a wrong bound from reading out of range.
		return io.ErrShortBuffer
	}
	dst := w.cur
	if w.lent[dst] {
		dst = 1 - dst
		if w.lent[dst] {
			return errFull
		}
	}
	if w.bufs[dst] == nil {
		w.bufs[dst] = make([]byte, w.size)
	}
	buf := w.bufs[dst]
	k := copy(buf, w.data[w.pos:])
	w.base += int64(w.pos)
	w.cur, w.data, w.pos = dst, buf[:k], 0
	want := min(max(n, w.minFill), len(buf))
	for k < want {
		m, err := w.r.Read(buf[k:])
		k += m
		w.data = buf[:k]
		if err == io.EOF {
			w.eof = true
			break
		}
		if err != nil {
			w.err = err
			break
		}
		if m > 0 {
			w.zero = 0
		} else if w.zero++; w.zero > maxZeroReads {
			w.err = io.ErrNoProgress
			break
		}
	}
	switch {
	case k >= n:
		return nil
	case w.err != nil:
		return w.err
	}
	return io.EOF
}
