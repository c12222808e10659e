package state

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/rocescope/rocescope/metrics"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// State files hold window states, each framed as a 4-byte big-endian
// length and the state encoding (see [Window.AppendBinary]). A file written
// with --state-out FILE holds every window of a run in order; with
// --state-out DIR each window goes to DIR/<host>-<start ns>.rsstate (with
// '%', '/', '\' and NUL in the host name escaped as %XX), written to a
// temporary name and renamed, so that a reader following the directory
// never sees half a file.

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
	buf  []byte
}

// NewWriter writes states to path: into that directory when it is
// one or ends with a slash (it is then created if need be), else into the
// file path (created or truncated).
func NewWriter(path string, cfg *metrics.Config) (*Writer, error) {
	sw := &Writer{host: cfg.Host}
	if strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(os.PathSeparator)) {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, fmt.Errorf("state: state output: %w", err)
		}
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		sw.dir = path
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
	name := filepath.Join(sw.dir, fmt.Sprintf("%s-%d%s", fileNameEscaper.Replace(sw.host), w.Start, Ext))
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("state: write state: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("state: write state: %w", err)
	}
	return nil
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

// Reader reads the window states of one state file in order.
type Reader struct {
	name string
	r    io.Reader
	off  int64
	buf  bytes.Buffer // the current state, reused
}

// NewReader reads states from r; name is used in errors. It reads no
// further than the states it returns and keeps no buffer but the current
// state's (merge opens one reader per state file, where a read buffer would
// cost more than it saves); wrap r in a bufio.Reader to read many small
// states from a slow source.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{name: name, r: r}
}

// Next decodes the next state into w. It returns io.EOF after the last one,
// and an error naming the file and offset for a damaged one. Next reuses
// the sketches and lists w holds when they have the state's shape, so that
// decoding state after state into spare windows allocates little; after an
// error w is undefined.
func (sr *Reader) Next(w *metrics.Window) error {
	var hdr [4]byte
	n, err := io.ReadFull(sr.r, hdr[:])
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		return fmt.Errorf("state: %s: state at offset %d: length cut after %d bytes: %w: %w", sr.name, sr.off, n, metrics.ErrState, err)
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > maxState {
		return fmt.Errorf("state: %s: state at offset %d: length %d is too large: %w", sr.name, sr.off, size, metrics.ErrState)
	}
	// Grow the buffer with the bytes that actually arrive, not with what a
	// possibly damaged length announces.
	sr.buf.Reset()
	if n, err := io.CopyN(&sr.buf, sr.r, int64(size)); err != nil {
		return fmt.Errorf("state: %s: state at offset %d: %d of %d bytes: %w: %w", sr.name, sr.off, n, size, metrics.ErrState, err)
	}
	if err := w.UnmarshalReusing(sr.buf.Bytes(), 0); err != nil {
		return fmt.Errorf("state: %s: state at offset %d: %w", sr.name, sr.off, err)
	}
	sr.off += 4 + int64(size)
	return nil
}
