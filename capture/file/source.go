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

// Read buffer sizes.
const (
	bufferSize  = 512 << 10
	fileMinFill = 256 << 10 // regular files are read in chunks of at least this
	// mergeMinFill and mergeBufferSize replace fileMinFill and bufferSize
	// when files are merged: every file is open from the start, with its
	// own buffers (a rotated capture of 1000 files holds 320 MiB of
	// them with the default snap limit).
	mergeMinFill    = 64 << 10
	mergeBufferSize = 4 * mergeMinFill
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
	// the file): payload bytes are not taken for records.
	//
	// For pcapng, reading goes on at the next block, found in steps of 4
	// bytes, of a known type whose two lengths agree (a block with sound
	// lengths but bad contents is skipped alone). Where nothing is found,
	// or the damage leaves nothing to search (a bad file header or first
	// section header, a read error, a corrupt gzip stream, a file that
	// cannot be opened), reading goes on with the next file. A file whose
	// first bytes start no known format (ErrNotCapture) is an error all
	// the same.
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
	// Concat reads the files one after another, in the order given, as
	// they are (a frame of the second file comes after every frame of the
	// first). By default several files are merged by frame time instead,
	// as mergecap merges them: see "Several files" in the package doc.
	Concat bool
}

// Progress tells how far a [Source] has come, over all of its files.
type Progress struct {
	File  int   // number of files opened so far (reading them one after another: the 1-based number of the file being read); 0 before the first Next
	Files int   // number of files
	Done  int64 // bytes read so far over all files (compressed bytes for gzip); a finished or skipped file counts whole
	Total int64 // size of all files, 0 when unknown (standard input or a pipe among them)
}

// headFrames is how many frames of each file a merge reads ahead.
const headFrames = 256

// Source reads capture files, merged by frame time or one after another.
// Make it with [Open].
type Source struct {
	paths []string
	opts  Options
	stdin io.Reader
	sizes []int64 // size of each file, -1 when unknown (not a regular file)

	mu     sync.Mutex // guards busy, closed and open
	busy   bool       // Next is running
	closed bool
	open   []*os.File // files being read, for Close to interrupt Next

	next     int      // index in paths of the next file to open
	ins      []*input // the files open and not finished, in the order of paths
	win      window   // reading one after another: the window the files share
	merging  bool     // several files merged by time: each has its own window
	finished int64    // bytes of the files finished, for Progress
	err      error    // error that ended reading, returned by every later Next

	received, errors  atomic.Uint64
	dropped           atomic.Uint64 // drops reported by pcapng interface statistics blocks
	file, done, total atomic.Int64
}

var _ capture.Source = (*Source)(nil)

// input is one open file.
type input struct {
	path  string
	index int            // position in Source.paths
	file  *os.File       // nil for standard input
	count *countedReader // compressed bytes read, for gzip input
	win   *window        // unread bytes: Source.win, or the file's own when merging
	rd    reader
	ended bool // the reader has nothing more to give

	// Frames read ahead, when merging: head.Frames[next:] are not delivered
	// yet, and err came after them.
	head capture.Batch
	next int
	err  error
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

// Open returns a source that reads the named files; "-" is standard input,
// which may be named once. Several files are merged by frame time unless
// opts.Concat is set (see the package doc). Open checks every other path (a
// regular file by opening and closing it, a pipe or device by finding it),
// so that a missing or unreadable file fails Open with the os error naming
// it. Files are opened as Next comes to them: when merging, all of them at
// the first Next. opts may be nil.
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
	sizes := make([]int64, len(paths))
	var total int64
	for i, p := range paths {
		sizes[i] = -1
		if p == "-" {
			if dashes++; dashes > 1 {
				return nil, errors.New(`capture: standard input ("-") named more than once`)
			}
			total = -1
			continue
		}
		size, err := check(p)
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		sizes[i] = size
		if size < 0 || total < 0 {
			total = -1
		} else {
			total += size
		}
	}
	s := &Source{paths: append([]string(nil), paths...), opts: o, stdin: stdin, sizes: sizes}
	s.merging = !o.Concat && len(paths) > 1
	s.win.size = s.windowSize()
	s.total.Store(max(total, 0))
	return s, nil
}

// windowSize returns the size of each read buffer of a window: of the
// one window, or of each file's when merging.
func (s *Source) windowSize() int {
	size := bufferSize
	if s.merging {
		size = mergeBufferSize
	}
	return max(size, s.opts.SnapLimit+blockOverhead)
}

// check returns the size of path if it is a regular file (-1 if not), and
// the os error that opening it for reading would give, if it is a regular
// file, or that finding it gives: opening a named pipe and closing it
// again would cut off its writer.
func check(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return -1, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), f.Close()
}

// Next fills b with the next frames, as [capture.Source] describes. It
// goes on from one file to the next within a call, and returns fewer
// frames than b has room for only at the end of the input, before an error,
// or when the input has filled both read buffers. The frames' bytes
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
//
// It keeps the files being read in s.ins, in the order of paths: all of
// them from the first call when merging, else one at a time. Over and
// over, it finds the file whose next frame is the earliest (the first such
// file in the order of paths on a tie) and moves that file's frames, up to
// the next frame of any other file, into b. Each file's frames are read
// ahead into its head batch, where they point into the file's own window,
// whose buffers stay lent until the frames have been delivered and the
// following Next has begun. A file alone, with nothing read ahead, is read
// straight into b.
func (s *Source) fill(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	if cap(b.Frames) == 0 {
		return capture.ErrNoRoom
	}
	if s.err != nil {
		return s.err
	}
	s.win.lent = [2]bool{}
	for _, in := range s.ins {
		if in.next == len(in.head.Frames) {
			in.win.lent = [2]bool{}
		}
	}
	for len(b.Frames) < cap(b.Frames) {
		if err := s.openFiles(); err != nil {
			return s.stop(b, err)
		}
		if len(s.ins) == 0 {
			break
		}
		if in := s.ins[0]; len(s.ins) == 1 && in.next == len(in.head.Frames) && in.err == nil {
			if err := s.advance(in, b); err != nil {
				if err == errFull {
					break
				}
				return s.stop(b, err)
			}
			if in.ended {
				s.finish(in)
				s.ins = s.ins[:0]
			}
			continue
		}
		// Every file needs a frame read ahead, or to be finished.
		for i := 0; i < len(s.ins); {
			in := s.ins[i]
			if in.next < len(in.head.Frames) {
				i++
				continue
			}
			if err := s.ahead(in); err != nil {
				if err == errFull {
					s.account(b)
					return nil // b holds frames: see ahead
				}
				return s.stop(b, err)
			}
			if in.next == len(in.head.Frames) {
				s.finish(in)
				s.ins = append(s.ins[:i], s.ins[i+1:]...)
				continue
			}
			i++
		}
		if len(s.ins) > 0 {
			s.take(b)
		}
	}
	s.account(b)
	if len(b.Frames) == 0 {
		return io.EOF
	}
	return nil
}

// openFiles opens the files to read: when merging, every file at the first
// call; else the next file when none is open. A file that fails to open is
// skipped with KeepGoing, else its error is returned.
func (s *Source) openFiles() error {
	for s.next < len(s.paths) && (s.merging || len(s.ins) == 0) {
		win := &s.win // one after another, the files share the window and its buffers
		if s.merging {
			win = &window{size: s.windowSize()}
		}
		in, err := s.openNext(win)
		if err != nil {
			s.finish(in)
			if s.skippable(err) {
				s.errors.Add(1)
				continue
			}
			return err
		}
		s.ins = append(s.ins, in)
	}
	return nil
}

// skippable reports whether err, from opening a file, lets reading go on
// with the next file: with KeepGoing, unless the file is no capture at all
// or the source was closed.
func (s *Source) skippable(err error) bool {
	return s.opts.KeepGoing && !errors.Is(err, ErrNotCapture) && !errors.Is(err, os.ErrClosed)
}

// take moves into b the frames read ahead of the file whose next frame is
// the earliest, up to the next frame of any other file. Every file in
// s.ins has a frame read ahead.
func (s *Source) take(b *capture.Batch) {
	m := 0
	for i := 1; i < len(s.ins); i++ {
		if s.ins[i].head.Frames[s.ins[i].next].Time < s.ins[m].head.Frames[s.ins[m].next].Time {
			m = i
		}
	}
	in := s.ins[m]
	lo := in.next
	hi := min(len(in.head.Frames), lo+cap(b.Frames)-len(b.Frames))
	bound, after := int64(0), -1 // the earliest next frame of the others, and its file
	for i, o := range s.ins {
		if t := o.head.Frames[o.next].Time; i != m && (after < 0 || t < bound) {
			bound, after = t, i
		}
	}
	if after >= 0 {
		// A frame of in goes before one of another file at the same time
		// when in comes first in paths.
		first := m < after
		n := lo
		for n < hi {
			if t := in.head.Frames[n].Time; t > bound || t == bound && !first {
				break
			}
			n++
		}
		hi = n
	}
	b.Frames = append(b.Frames, in.head.Frames[lo:hi]...)
	in.next = hi
}

// ahead reads the next frames of in into its head. It returns nil with
// frames in the head, or with none when in has ended; the error after the
// frames of a damaged file, once they have been delivered; or errFull when
// the window holds frames lent in this Next call, which happens only after
// some of them went into the batch.
func (s *Source) ahead(in *input) error {
	if in.head.Frames == nil {
		in.head.Frames = make([]capture.Frame, 0, headFrames)
	}
	in.head.Frames, in.next = in.head.Frames[:0], 0
	if in.err != nil {
		return in.err
	}
	err := s.advance(in, &in.head)
	if err != nil && len(in.head.Frames) > 0 {
		if err != errFull {
			in.err = err
		}
		return nil
	}
	return err
}

// advance reads frames of in into b until b is full or in has ended. It
// counts and skips damage with KeepGoing, and returns errFull or the error
// of damaged input.
func (s *Source) advance(in *input, b *capture.Batch) error {
	for !in.ended && len(b.Frames) < cap(b.Frames) {
		switch err := in.rd.read(b); {
		case err == nil:
		case err == errFull:
			return err
		case err == io.EOF:
			in.ended = true
		case !s.opts.KeepGoing:
			return err
		default:
			s.errors.Add(1)
			if !in.rd.resync() {
				in.ended = true
			}
		}
	}
	return nil
}

// account adds the frames in b to the totals and records the progress.
func (s *Source) account(b *capture.Batch) {
	s.received.Add(uint64(len(b.Frames)))
	done := s.finished
	for _, in := range s.ins {
		done += in.offset()
	}
	s.done.Store(done)
}

// offset returns the bytes of in read so far.
func (in *input) offset() int64 {
	if in.count != nil {
		return in.count.n
	}
	if in.win == nil {
		return 0
	}
	return in.win.offset()
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

// openNext opens the next file with the window win and finds its format.
// It returns the input also with an error, for finish.
func (s *Source) openNext(win *window) (*input, error) {
	index := s.next
	path := s.paths[index]
	s.next++
	s.file.Store(int64(s.next))
	in := &input{path: path, index: index, win: win}

	var raw io.Reader = s.stdin
	minFill := 0 // a pipe delivers what it has, without waiting for a chunk
	name := path // what to open: a file, or the pipe on standard input
	if path == "-" {
		name = stdinPipe(s.stdin)
	}
	if name != "" {
		f, err := openInput(name)
		if err != nil {
			return in, fmt.Errorf("capture: %w", err)
		}
		in.file, raw = f, f
		if err := s.track(f); err != nil {
			return in, fmt.Errorf("capture: %s: %w", path, err)
		}
		if err := waitInput(f); err != nil {
			return in, fmt.Errorf("capture: %s: %w", path, err)
		}
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			minFill = fileMinFill
			if s.merging {
				minFill = mergeMinFill
			}
			if known := s.sizes[index]; known >= 0 && known != fi.Size() {
				s.total.Add(fi.Size() - known) // the file changed since Open
				s.sizes[index] = fi.Size()
			}
			if fi.Size() == 0 {
				return in, fmt.Errorf("capture: %s: empty file: %w", path, ErrTruncated)
			}
		}
	}
	magic, raw, err := peek(raw)
	if err != nil {
		return in, fmt.Errorf("capture: %s: %w", path, err)
	}
	if isGzip(magic) {
		in.count = &countedReader{r: raw}
		gz, err := gzip.NewReader(in.count)
		if err != nil {
			return in, fmt.Errorf("capture: %s: gzip header: %w", path, gzipError(err))
		}
		if magic, raw, err = peek(gzipReader{gz}); err != nil {
			return in, fmt.Errorf("capture: %s: in gzip: %w", path, err)
		}
	}
	win.startStream(raw, minFill)
	return in, s.pick(in, magic)
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

// pick sets the reader of in from its first bytes.
func (s *Source) pick(in *input, magic []byte) error {
	path := in.path
	if len(magic) >= 4 {
		switch {
		case bytes.Equal(magic[:4], magics[0]):
			in.rd = newPcapngReader(in.win, path, s.opts.SnapLimit, &s.dropped)
			return nil
		case isPcapMagic(magic):
			in.rd = newPcapReader(in.win, path, s.opts.SnapLimit, s.opts.KeepGoing)
			return nil
		}
	}
	for _, m := range magics {
		if len(magic) < len(m) && bytes.HasPrefix(m, magic) {
			return fmt.Errorf("capture: %s: %w: file of %d bytes ends inside the magic % x", path, ErrTruncated, len(magic), m)
		}
	}
	where := ""
	if in.count != nil {
		where = " in gzip"
	}
	return fmt.Errorf("capture: %s: %w: first bytes % x%s", path, ErrNotCapture, magic[:min(len(magic), 4)], where)
}

// isPcapMagic reports whether b starts with a classic pcap magic, in
// either byte order.
func isPcapMagic(b []byte) bool {
	le := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	be := uint32(b[3]) | uint32(b[2])<<8 | uint32(b[1])<<16 | uint32(b[0])<<24
	return le == pcapMagicMicro || le == pcapMagicNano || be == pcapMagicMicro || be == pcapMagicNano
}

// finish closes in, which may be nil, and counts it as read for Progress.
// Its mapping stays until the next Next, as frames of this call may point
// into it.
func (s *Source) finish(in *input) {
	if in == nil {
		return
	}
	if size := s.sizes[in.index]; size >= 0 {
		s.finished += size
	} else {
		s.finished += in.offset()
	}
	s.drop(in)
}

// drop closes in.
func (s *Source) drop(in *input) {
	if in.file != nil {
		s.untrack(in.file)
		in.file.Close()
		in.file = nil
	}
}

// release frees everything; the caller holds s.mu and Next is not running.
func (s *Source) release() {
	s.open = nil
	for _, in := range s.ins {
		s.drop(in)
	}
	s.ins = nil
	s.win = window{}
}

// track records f as being read, for Close to interrupt. It returns
// os.ErrClosed, and f is not recorded, if the source has been closed.
func (s *Source) track(f *os.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return os.ErrClosed
	}
	s.open = append(s.open, f)
	return nil
}

// untrack forgets f, which is about to be closed. The caller may hold
// s.mu only when Next is not running (release clears s.open first).
func (s *Source) untrack(f *os.File) {
	if s.open == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, g := range s.open {
		if g == f {
			s.open = append(s.open[:i], s.open[i+1:]...)
			break
		}
	}
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

// Progress returns how many files have been opened and how many bytes of
// all files have been read. It is safe to call concurrently with Next;
// Done is updated once per Next call.
func (s *Source) Progress() Progress {
	return Progress{
		File:  int(s.file.Load()),
		Files: len(s.paths),
		Done:  s.done.Load(),
		Total: s.total.Load(),
	}
}

// Close releases the files and memory of the source. It is idempotent and
// safe to call from any goroutine. If Next is running, the files it reads
// are closed at once (which ends a blocked read of a pipe where the
// platform allows) and the rest is released when Next returns os.ErrClosed.
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
	for _, f := range s.open {
		f.Close()
	}
	return nil
}
