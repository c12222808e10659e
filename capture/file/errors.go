package file

import (
	"errors"
	"fmt"
	"io"
)

// Sentinel errors wrapped by the errors of damaged input.
var (
	// ErrTruncated means the input ends inside a file header, a record or a
	// block, or holds nothing at all.
	ErrTruncated = errors.New("truncated input")
	// ErrBadMagic means the input is not in a format the reader knows, or
	// in a version of it that it does not read.
	ErrBadMagic = errors.New("unknown file format")
	// ErrRecordTooLarge means a record's captured length exceeds
	// Options.SnapLimit (by default 262144 bytes, the largest record
	// libpcap and Wireshark read). A record longer than its file's or
	// interface's snap length, or than its own original length, is read,
	// as libpcap and Wireshark read it.
	ErrRecordTooLarge = errors.New("record too large")
	// ErrBadBlock means a pcapng block is inconsistent: its lengths do not
	// agree, its body overruns it, or it refers to an unknown interface.
	ErrBadBlock = errors.New("bad pcapng block")
	// ErrBadGzip means a gzip stream is corrupt: a bad header, checksum or
	// compressed data. A cut gzip stream is ErrTruncated.
	ErrBadGzip = errors.New("corrupt gzip stream")
)

// ErrNotCapture means a file's first bytes start no format the reader
// knows (a classic pcap magic, a pcapng section header, or gzip, inside
// which one of the others must start): it is not a capture file at all.
// Options.KeepGoing does not skip such a file, as it resynchronises only
// within a known format. errors.Is(err, ErrBadMagic) holds for it too.
var ErrNotCapture error = notCapture{}

// notCapture is the type of ErrNotCapture.
type notCapture struct{}

// Error says what the file is not.
func (notCapture) Error() string {
	return "not a capture file (pcap, pcapng or gzip of one)"
}

// Is makes ErrNotCapture match ErrBadMagic.
func (notCapture) Is(target error) bool { return target == ErrBadMagic }

// errImplausible marks a classic pcap record that KeepGoing treats as
// damage although its lengths are sound: its header, or the one after it,
// fails the resynchronisation checks. It is only ever counted.
var errImplausible = errors.New("implausible record")

// errFull tells Source.Next that the window cannot hold more input without
// overwriting frames already handed out in this call.
var errFull = errors.New("capture: read buffers hold lent frames")

// position names a record or block in an input file for error messages.
type position struct {
	path string
	what string // "record" or "block"
	n    int64  // 1-based number of the record or block
	off  int64  // byte offset of its first byte
}

// String returns "path: record n at offset off", leaving out n when it is 0.
func (p position) String() string {
	if p.n == 0 {
		return fmt.Sprintf("%s: %s at offset %d", p.path, p.what, p.off)
	}
	return fmt.Sprintf("%s: %s %d at offset %d", p.path, p.what, p.n, p.off)
}

// damage returns the error for a damaged record or block.
func (p position) damage(sentinel error, format string, args ...any) error {
	return fmt.Errorf("capture: %v: %w: %s", p, sentinel, fmt.Sprintf(format, args...))
}

// short returns the error for a failed attempt to read want bytes of the
// record or block of which have bytes were available. errFull is passed
// through.
func (p position) short(err error, have, want int) error {
	switch {
	case err == errFull:
		return err
	case err == io.EOF:
		return p.damage(ErrTruncated, "input ends after %d of %d bytes", have, want)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("capture: %v: %w: %w", p, ErrTruncated, err)
	default:
		return fmt.Errorf("capture: %v: %w", p, err)
	}
}
