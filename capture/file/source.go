package file

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/rocescope/rocescope/capture"
)

// DefaultSnapLimit is the default of Options.SnapLimit.
const DefaultSnapLimit = 256 << 10

// maxSnapLimit bounds Options.SnapLimit.
const maxSnapLimit = 64 << 20

// Read buffer sizes for input that is not mapped.
const (
	bufferSize  = 4 << 20
	fileMinFill = 1 << 20 // regular files (gzip) are read in chunks of at least this
)

// Options configure a [Source]. The zero value and nil mean the defaults.
type Options struct {
	// KeepGoing counts damaged records in Stats().Errors and skips them
	// instead of failing.
	//
	// A classic pcap record header is plausible when caplen <= orig_len,
	// 0 < orig_len <= 262144 (or SnapLimit, if larger), caplen is within
	// SnapLimit, the fraction is below a second, and its time is within a
	// week of the previous good record's. With KeepGoing every record must
	// be plausible and followed by a plausible header (or the end of the
	// file); a record followed by an implausible one is damaged too if a
	// chain of plausible records starts inside its bytes (it was cut
	// short). After damage, reading goes on at the first offset, searched
	// byte by byte, that starts a chain of three plausible records, each
	// within a week of the one before (or fewer reaching the exact end of
	// the file): payload bytes are not taken for records. A record with
	// sound lengths but bad contents (ErrBadRecord) is skipped alone.
	//
	// For pcapng, reading goes on at the next block, found in steps of 4
	// bytes, of a known type whose two lengths agree (a block with sound
	// lengths but bad contents is skipped alone). Where nothing is found,
	// or the damage leaves nothing to search (a bad file header or first
	// section header, a read error, a corrupt gzip stream, a file that
	// cannot be opened), reading goes on with the next file.
	//
	// Stats().Errors counts the records skipped: one per damaged record,
	// and one per damaged region (bytes skipped in one search), whose
	// number of records cannot be known; so at least one for each.
	KeepGoing bool
	// SnapLimit is the largest captured length accepted for a record, in
	// bytes (default DefaultSnapLimit, at most 64 MiB). pcapng section,
	// interface and packet blocks may be up to 64 KiB longer, for their
	// headers and options; other blocks may be of any length.
	SnapLimit int
}

// Progress tells how far a [Source] has come.
type Progress struct {
	File  int   // 1-based number of the file being read; 0 before the first Next
	Files int   // number of files
	Done  int64 // bytes of the current file read (compressed bytes for gzip)
	Total int64 // size of the current file, 0 when unknown (stdin)
}

// Source reads capture files one after another. Make it with [Open].
type Source struct {
	paths []string
	opts  Options
	stdin io.Reader

	mu     sync.Mutex // guards busy, closed and open
	busy   bool       // Next is running
	closed bool
	open   *os.File // file being read, for Close to interrupt Next

	next  int      // index in paths of the next file to open
	in    *input   // current file; nil between files
	win   window   // unread bytes of the current file
	spent [][]byte // mappings of finished files, released at the next Next
	err   error    // error that ended reading, returned by every later Next

	received, errors  atomic.Uint64
	dropped           atomic.Uint64 // drops reported by pcapng interface statistics blocks
	file, done, total atomic.Int64
}

var _ capture.Source = (*Source)(nil)

// input is one open file.
type input struct {
	path   string
	file   *os.File       // nil for standard input
	mapped []byte         // the mapping of a regular file, or nil
	count  *countedReader // compressed bytes read, for gzip input
	rd     reader
}

// reader reads one file format out of the window.
type reader interface {
	// read appends frames to b until it is full. It returns nil when b is
	// full, io.EOF at the end of the file, errFull when the window has no
	// free buffer, or an error naming the file and offset.
	read(b *capture.Batch) error
	// resync prepares reading to go on after an error from read. It
	// reports false when the rest of the file must be skipped.
	resync() bool
}

// countedReader counts the bytes read through it.
type countedReader struct {
	r io.Reader
	n int64
}

// Read reads from the underlying reader and counts the bytes.
func (c *countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Open returns a source that reads the named files in order; "-" is
// standard input, which may be named once. Open checks every other path
// (a regular file by opening and closing it, a pipe or device by finding
// it), so that a missing or unreadable file fails Open with the os error
// naming it. The files are opened one at a time as Next comes to them.
// opts may be nil.
func Open(paths []string, opts *Options) (*Source, error) {
	return open(paths, opts, os.Stdin)
}

// open is Open reading "-" from stdin.
func open(paths []string, opts *Options, stdin io.Reader) (*Source, error) {
	if len(paths) == 0 {
		return nil, errors.New("capture: no input files")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.SnapLimit == 0 {
		o.SnapLimit = DefaultSnapLimit
	}
	if o.SnapLimit < 0 || o.SnapLimit > maxSnapLimit {
		return nil, fmt.Errorf("capture: snap limit %d out of range 1..%d", o.SnapLimit, maxSnapLimit)
	}
	dashes := 0
	for _, p := range paths {
		if p == "-" {
			if dashes++; dashes > 1 {
				return nil, errors.New(`capture: standard input ("-") named more than once`)
			}
			continue
		}
		if err := check(p); err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
	}
	s := &Source{paths: append([]string(nil), paths...), opts: o, stdin: stdin}
	s.win.size = max(bufferSize, o.SnapLimit+blockOverhead)
	return s, nil
}

// check returns the os error that opening path for reading would give, if
// path is a regular file, or that finding it gives: opening a named pipe
// and closing it again would cut off its writer.
func check(path string) error {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// Next fills b with the next frames, as [capture.Source] describes. It
// goes on from one file to the next within a call, and returns fewer
// frames than b has room for only at the end of the input, before an error,
// or when unmapped input has filled both read buffers. The frames' bytes
// stay valid until the next call to Next or Close.
func (s *Source) Next(b *capture.Batch) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		b.Frames = b.Frames[:0]
		return os.ErrClosed
	}
	s.busy = true
	s.mu.Unlock()

	err := s.fill(b)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = false
	if s.closed {
		s.release()
		b.Frames = b.Frames[:0]
		return os.ErrClosed
	}
	return err
}

// fill is Next without the guard against Close.
func (s *Source) fill(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	if cap(b.Frames) == 0 {
		return capture.ErrNoRoom
	}
	if s.err != nil {
		return s.err
	}
	for _, m := range s.spent {
		unmapFile(m)
	}
	s.spent = s.spent[:0]
	s.win.lent = [2]bool{}

	for len(b.Frames) < cap(b.Frames) {
		if s.in == nil {
			if s.next == len(s.paths) {
				break
			}
			if err := s.openNext(); err != nil {
				if s.opts.KeepGoing {
					s.errors.Add(1)
					s.finish()
					continue
				}
				return s.stop(b, err)
			}
		}
		err := s.in.rd.read(b)
		if err == nil {
			continue
		}
		if err == errFull {
			break
		}
		if err == io.EOF {
			s.finish()
			continue
		}
		if !s.opts.KeepGoing {
			return s.stop(b, err)
		}
		s.errors.Add(1)
		if !s.in.rd.resync() {
			s.finish()
		}
	}
	s.account(b)
	if len(b.Frames) == 0 {
		return io.EOF
	}
	return nil
}

// account adds the frames in b to the totals and records the progress.
func (s *Source) account(b *capture.Batch) {
	s.received.Add(uint64(len(b.Frames)))
	switch {
	case s.in == nil:
	case s.in.count != nil:
		s.done.Store(s.in.count.n)
	default:
		s.done.Store(s.win.offset())
	}
}

// stop ends reading with err. Frames already in b are delivered first and
// err comes with the next call.
func (s *Source) stop(b *capture.Batch, err error) error {
	s.err = err
	s.account(b)
	if len(b.Frames) > 0 {
		return nil
	}
	return err
}

// openNext opens the next file and finds its format.
func (s *Source) openNext() error {
	path := s.paths[s.next]
	s.next++
	s.file.Store(int64(s.next))
	s.done.Store(0)
	s.total.Store(0)
	in := &input{path: path}
	s.in = in

	var raw io.Reader = s.stdin
	minFill := 0 // a pipe delivers what it has, without waiting for a chunk
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		in.file, raw = f, f
		s.setOpen(f)
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			minFill = fileMinFill
			s.total.Store(fi.Size())
			if fi.Size() == 0 {
				return fmt.Errorf("capture: %s: empty file: %w", path, ErrTruncated)
			}
			if m, ok := mapFile(f, fi.Size()); ok {
				if !isGzip(m) {
					in.mapped = m
					s.win.startMapped(m)
					return s.pick(m)
				}
				unmapFile(m)
			}
		}
	}
	magic, raw, err := peek(raw)
	if err != nil {
		return fmt.Errorf("capture: %s: %w", path, err)
	}
	if isGzip(magic) {
		in.count = &countedReader{r: raw}
		gz, err := gzip.NewReader(in.count)
		if err != nil {
			return fmt.Errorf("capture: %s: gzip header: %w", path, gzipError(err))
		}
		if magic, raw, err = peek(gzipReader{gz}); err != nil {
			return fmt.Errorf("capture: %s: in gzip: %w", path, err)
		}
	}
	s.win.startStream(raw, minFill)
	return s.pick(magic)
}

// gzipError returns err, from reading gzip input, wrapping ErrTruncated
// when the stream was cut or ErrBadGzip when it is corrupt.
func gzipError(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return fmt.Errorf("%w: %w", ErrBadGzip, err)
}

// gzipReader reads decompressed input and makes its errors wrap the
// sentinels.
type gzipReader struct{ z *gzip.Reader }

// Read reads decompressed bytes; io.EOF passes unchanged.
func (g gzipReader) Read(p []byte) (int, error) {
	n, err := g.z.Read(p)
	if err != nil && err != io.EOF {
		err = gzipError(err)
	}
	return n, err
}

// peek reads the first bytes of r, for the format, and returns r with them
// put back.
func peek(r io.Reader) ([]byte, io.Reader, error) {
	var m [4]byte
	n, err := io.ReadFull(r, m[:])
	switch {
	case n == 0 && err == io.EOF:
		return nil, nil, fmt.Errorf("empty file: %w", ErrTruncated)
	case err != nil && err != io.ErrUnexpectedEOF:
		return nil, nil, err
	}
	return m[:n], io.MultiReader(bytes.NewReader(m[:n]), r), nil
}

// isGzip reports whether b starts with the gzip magic.
func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// magics are the first bytes of the formats read: pcapng, classic pcap in
// both resolutions and byte orders, and gzip.
var magics = [][]byte{
	{0x0a, 0x0d, 0x0d, 0x0a},
	{0xd4, 0xc3, 0xb2, 0xa1}, {0xa1, 0xb2, 0xc3, 0xd4},
	{0x4d, 0x3c, 0xb2, 0xa1}, {0xa1, 0xb2, 0x3c, 0x4d},
	{0x1f, 0x8b},
}

// pick sets the reader of the current file from its first bytes.
func (s *Source) pick(magic []byte) error {
	path := s.in.path
	if len(magic) >= 4 {
		switch {
		case bytes.Equal(magic[:4], magics[0]):
			s.in.rd = newPcapngReader(&s.win, path, s.opts.SnapLimit, &s.dropped)
			return nil
		case isPcapMagic(magic):
			s.in.rd = newPcapReader(&s.win, path, s.opts.SnapLimit, s.opts.KeepGoing)
			return nil
		}
	}
	for _, m := range magics {
		if len(magic) < len(m) && bytes.HasPrefix(m, magic) {
			return fmt.Errorf("capture: %s: %w: file of %d bytes ends inside the magic % x", path, ErrTruncated, len(magic), m)
		}
	}
	return fmt.Errorf("capture: %s: %w: first bytes % x are neither pcap, pcapng nor gzip", path, ErrBadMagic, magic[:min(len(magic), 4)])
}

// isPcapMagic reports whether b starts with a classic pcap magic, in
// either byte order.
func isPcapMagic(b []byte) bool {
	le := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	be := uint32(b[3]) | uint32(b[2])<<8 | uint32(b[1])<<16 | uint32(b[0])<<24
	return le == pcapMagicMicro || le == pcapMagicNano || be == pcapMagicMicro || be == pcapMagicNano
}

// finish closes the current file. Its mapping stays until the next Next,
// as frames of this call may point into it.
func (s *Source) finish() {
	if s.in == nil {
		return
	}
	if t := s.total.Load(); t > 0 {
		s.done.Store(t)
	}
	s.setOpen(nil)
	s.drop()
}

// drop closes the current file and queues its mapping for release.
func (s *Source) drop() {
	if s.in.mapped != nil {
		s.spent = append(s.spent, s.in.mapped)
	}
	if s.in.file != nil {
		s.in.file.Close()
	}
	s.in = nil
}

// release frees everything; the caller holds s.mu and Next is not running.
func (s *Source) release() {
	s.open = nil
	if s.in != nil {
		s.drop()
	}
	for _, m := range s.spent {
		unmapFile(m)
	}
	s.spent = nil
	s.win = window{}
}

// setOpen records the file being read, for Close.
func (s *Source) setOpen(f *os.File) {
	s.mu.Lock()
	s.open = f
	s.mu.Unlock()
}

// Stats returns the frames delivered, the drops the capture itself
// recorded, and the damaged records skipped with KeepGoing (at least one
// per damaged region, see Options.KeepGoing). Dropped sums, over the
// pcapng interface statistics blocks read so far, the increase of each
// interface's isb_ifdrop and isb_osdrop counters (cumulative per
// interface; a counter that goes down restarted, and counts whole); it
// stays 0 for classic pcap, which records no drops. Stats is safe to call
// concurrently with Next.
func (s *Source) Stats() capture.Stats {
	return capture.Stats{Received: s.received.Load(), Dropped: s.dropped.Load(), Errors: s.errors.Load()}
}

// Progress returns which file is being read and how far. It is safe to
// call concurrently with Next; Done is updated once per Next call.
func (s *Source) Progress() Progress {
	return Progress{
		File:  int(s.file.Load()),
		Files: len(s.paths),
		Done:  s.done.Load(),
		Total: s.total.Load(),
	}
}

// Close releases the files and memory of the source. It is idempotent and
// safe to call from any goroutine. If Next is running, the file it reads is
// closed at once (which ends a blocked read of a pipe where the platform
// allows) and the rest is released when Next returns os.ErrClosed.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.busy {
		s.release()
		return nil
	}
	if s.open != nil {
		s.open.Close()
	}
	return nil
}
