package state

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rocescope/rocescope/metrics"
)

// State files hold window states, each framed as a 4-byte big-endian
// length and the state encoding (see [Window.AppendBinary]). A file written
// with --state-out FILE holds every window of a run in the order they
// closed (in window order but after a clock step back); with
// --state-out DIR each window goes to DIR/<host>-<start ns>.rsstate, with
// '%', '/', '\' and NUL in the host name escaped as %XX, written to a
// temporary name and linked into place, so that a reader following the
// directory never sees half a file. The windows of segment n > 0 of a
// capture whose clock stepped back, which may start where windows of an
// earlier segment did, go to DIR/<host>-<start ns>.s<n>.rsstate. A file is
// never replaced: a run that finds its window's name taken (a capture
// restarted within the window) names its file after itself,
// DIR/<host>-<start ns>[.s<n>].r<run>.rsstate, the run being the time the
// Writer was made (ns since the Unix epoch).

// Ext is the extension of per-window state files.
const Ext = ".rsstate"

// maxState bounds the length of one framed state (a window with tens of
// millions of flows), so that a damaged length cannot make a reader
// allocate without limit.
const maxState = 1 << 31

// Writer writes window states to a file or a directory.
type Writer struct {
	dir  string // per-window files, when set
	f    *os.File
	w    *bufio.Writer
	host string
	run  int64 // names the files of windows whose name an earlier run took
	buf  []byte
}

// NewWriter writes states to path: into that directory when it is
// one or ends with a slash (it is then created if need be), else into the
// file path (created or truncated). Into a directory, it creates and
// removes a file with the longest name a window's state can get, so that a
// host name too long for a file name or a directory it may not write into
// fails here, before a run, not at its first window.
func NewWriter(path string, cfg *metrics.Config) (*Writer, error) {
	sw := &Writer{host: cfg.Host, run: time.Now().UnixNano()}
	if strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(os.PathSeparator)) {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, fmt.Errorf("state: state output: %w", err)
		}
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		sw.dir = path
		probe := sw.fileName(math.MinInt64, math.MaxUint32, sw.run) + ".tmp"
		f, err := os.OpenFile(probe, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("state: state output: %w", err)
		}
		if err := errors.Join(f.Close(), os.Remove(probe)); err != nil {
			return nil, fmt.Errorf("state: state output: %w", err)
		}
		return sw, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("state: state output: %w", err)
	}
	sw.f, sw.w = f, bufio.NewWriterSize(f, 1<<20)
	return sw, nil
}

// Write writes the state of w.
func (sw *Writer) Write(w *metrics.Window) error {
	b, err := w.AppendBinary(append(sw.buf[:0], 0, 0, 0, 0))
	if err != nil {
		return err
	}
	if len(b)-4 > maxState {
		return fmt.Errorf("state: state of window %d is %d bytes, more than a state file frames (%d): %w", w.Start, len(b)-4, maxState, metrics.ErrState)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	sw.buf = b
	if sw.dir == "" {
		if _, err := sw.w.Write(b); err != nil {
			return fmt.Errorf("state: write state: %w", err)
		}
		return nil
	}
	name := sw.fileName(w.Start, w.Segment, 0)
	tmp := sw.fileName(w.Start, w.Segment, sw.run) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("state: write state: %w", err)
	}
	err = placeFile(tmp, name)
	if errors.Is(err, fs.ErrExist) {
		err = placeFile(tmp, sw.fileName(w.Start, w.Segment, sw.run))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("state: write state: %w", err)
	}
	return nil
}

// placeFile gives the file tmp the name name, unless a file has it
// (fs.ErrExist): a hard link, then tmp's removal, so that a file a merger
// may have read is never replaced. Where the file system has no hard
// links, a rename where no file is seen.
func placeFile(tmp, name string) error {
	err := os.Link(tmp, name)
	switch {
	case err == nil:
		return os.Remove(tmp)
	case errors.Is(err, fs.ErrExist):
		return err
	}
	if _, err := os.Lstat(name); err == nil {
		return fs.ErrExist
	}
	return os.Rename(tmp, name)
}

// fileName returns the name of the state file of the window at start of
// a segment, of the run run if it is not 0.
func (sw *Writer) fileName(start int64, segment uint32, run int64) string {
	var suffix string
	if segment > 0 {
		suffix = fmt.Sprintf(".s%d", segment)
	}
	if run != 0 {
		suffix += fmt.Sprintf(".r%d", run)
	}
	return filepath.Join(sw.dir, fmt.Sprintf("%s-%d%s%s", fileNameEscaper.Replace(sw.host), start, suffix, Ext))
}

// fileNameEscaper makes a host name usable in a file name. It is
// injective, so that hosts with different names never write the same file
// into a shared directory ("a/b" and "a_b" stay apart), and it keeps '-':
// the start after the last '-' is all digits.
var fileNameEscaper = strings.NewReplacer("%", "%25", "/", "%2F", "\\", "%5C", "\x00", "%00")

// Close flushes and closes the state file.
func (sw *Writer) Close() error {
	if sw.f == nil {
		return nil
	}
	err := errors.Join(sw.w.Flush(), sw.f.Close())
	sw.f = nil
	return err
}

// ErrNotRegular is wrapped by [Open] for a path that is not a regular
// file: a FIFO or a device named like a state file would block the open or
// the read.
var ErrNotRegular = errors.New("not a regular file")

// ReadOptions tune a [Reader]; nil means the defaults.
type ReadOptions struct {
	// MaxSketchBytes refuses a state whose sketches would take more
	// memory (see metrics.Window.UnmarshalReusing and
	// metrics.Config.SketchBytes); 0 means the sketch package's maxima,
	// some 325 MiB per state.
	MaxSketchBytes int64
	// Growing says that the files are still being written: [Files] takes
	// a file that ends inside a state as ending before it, for now.
	Growing bool
}

// Reader reads the window states of one state file in order. After an
// error other than io.EOF it reads nothing more that makes sense: to read
// again, open the file anew at Offset.
type Reader struct {
	name  string
	r     io.Reader
	f     *os.File // opened by Open, closed by Close
	off   int64    // offset of the next state
	opts  ReadOptions
	head  [headLen]byte // the next state's length and header, read by Peek
	nhead int           // bytes of head read
	buf   *bytes.Buffer // the current state, reused
}

// headLen is what Peek reads of a state: the length, the magic and
// version, and the window start.
const headLen = 4 + metrics.StateHeaderLen + 8

// NewReader reads states from r; name is used in errors. It reads no
// further than the states it returns and keeps no buffer but the current
// state's (merge opens one reader per state file, where a read buffer would
// cost more than it saves); wrap r in a bufio.Reader to read many small
// states from a slow source.
func NewReader(r io.Reader, name string, opts *ReadOptions) *Reader {
	sr := &Reader{name: name, r: r, buf: new(bytes.Buffer)}
	if opts != nil {
		sr.opts = *opts
	}
	return sr
}

// Reset makes sr read the states of r from its start, as a new Reader
// would, keeping its state buffer: a reader of many small streams (one
// record each) reuses one Reader, also after an error.
func (sr *Reader) Reset(r io.Reader) {
	sr.r, sr.off, sr.nhead = r, 0, 0
}

// Open reads the state file path from offset off, which must be where a
// state begins (0, or the Offset of an earlier Reader of the file). It
// opens regular files only, without blocking: anything else is refused
// with [ErrNotRegular]. Every read stops with ctx's error once ctx is done.
// Close the Reader to close the file.
func Open(ctx context.Context, path string, off int64, opts *ReadOptions) (_ *Reader, err error) {
	// Stat first, so that a FIFO is refused without being opened, and
	// open non-blocking besides, so that one that replaced the file
	// since cannot block either.
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("state: %s: %w (%v)", path, ErrNotRegular, st.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("state: %s: %w (%v)", path, ErrNotRegular, st.Mode().Type())
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	sr := NewReader(contextReader{ctx, f}, path, opts)
	sr.f, sr.off = f, off
	return sr, nil
}

// contextReader is a reader that stops once its context is done.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Close closes the file of a Reader made by Open; it does nothing for one
// made by NewReader. It may be called more than once.
func (sr *Reader) Close() error {
	if sr.f == nil {
		return nil
	}
	err := sr.f.Close()
	sr.f = nil
	return err
}

// Offset returns where the next state begins: after the last state Next
// returned, also when a later one failed.
func (sr *Reader) Offset() int64 { return sr.off }

// Peek returns the window start of the next state without decoding it, or
// io.EOF at the end of the file. It reads the state's first bytes only,
// and checks its magic, so that a file that is no state file is refused
// before more of it is read. A file that ends inside the state's length or
// header is an error wrapping io.ErrUnexpectedEOF and metrics.ErrState: a
// state being written, or a cut one.
func (sr *Reader) Peek() (int64, error) {
	if sr.nhead < headLen {
		n, err := io.ReadFull(sr.r, sr.head[sr.nhead:])
		sr.nhead += n
		switch {
		case err == io.EOF && sr.nhead == 0:
			return 0, io.EOF
		case err != nil && err != io.ErrUnexpectedEOF && err != io.EOF:
			return 0, sr.errorf("%w", err)
		}
		if sr.nhead > 4 {
			if err := metrics.CheckStateHeader(sr.head[4:sr.nhead]); err != nil {
				if sr.off == 0 && errors.Is(err, metrics.ErrNotState) {
					return 0, fmt.Errorf("state: %s: not a rocescope state file: %w", sr.name, metrics.ErrState)
				}
				return 0, sr.errorf("%w", err)
			}
		}
		if sr.nhead < headLen {
			return 0, sr.errorf("cut after %d bytes: %w: %w", sr.nhead, io.ErrUnexpectedEOF, metrics.ErrState)
		}
	}
	if size := binary.BigEndian.Uint32(sr.head[:]); size < uint32(headLen-4) || size > maxState {
		return 0, sr.errorf("length %d is not that of a state (%d to %d bytes): %w", size, headLen-4, maxState, metrics.ErrState)
	}
	return int64(binary.BigEndian.Uint64(sr.head[4+metrics.StateHeaderLen:])), nil
}

// errorf returns an error about the state at the reader's offset.
func (sr *Reader) errorf(format string, a ...any) error {
	return fmt.Errorf("state: %s: state at offset %d: %w", sr.name, sr.off, fmt.Errorf(format, a...))
}

// Next decodes the next state into w. It returns io.EOF after the last one,
// and an error naming the file and offset for a damaged one, wrapping
// io.ErrUnexpectedEOF as well when the file ends inside the state (which
// may still be being written: a Reader opened at Offset reads it again).
// Next reuses the sketches and lists w holds when they have the state's
// shape, so that decoding state after state into spare windows allocates
// little; after an error w is undefined.
func (sr *Reader) Next(w *metrics.Window) error {
	if _, err := sr.Peek(); err != nil {
		return err
	}
	size := int64(binary.BigEndian.Uint32(sr.head[:]))
	// Grow the buffer with the bytes that actually arrive, not with what a
	// possibly damaged length announces.
	sr.buf.Reset()
	sr.buf.Write(sr.head[4:])
	if n, err := io.CopyN(sr.buf, sr.r, size-int64(headLen-4)); err == io.EOF {
		return sr.errorf("cut after %d of %d bytes: %w: %w", int64(headLen)+n, 4+size, io.ErrUnexpectedEOF, metrics.ErrState)
	} else if err != nil {
		return sr.errorf("%w", err)
	}
	if err := w.UnmarshalReusing(sr.buf.Bytes(), sr.opts.MaxSketchBytes); err != nil {
		return sr.errorf("%w", err)
	}
	sr.off += 4 + size
	sr.nhead = 0
	return nil
}
