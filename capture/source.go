package capture

import (
	"errors"

	"github.com/rocescope/rocescope/decode"
)

// Frame is one captured frame. Data is borrowed from the source: it stays
// valid until the next call to the source's Next or Close, and must not be
// written to.
type Frame struct {
	Data    []byte          // captured bytes (len(Data) is the capture length)
	Time    int64           // capture time in ns since the Unix epoch
	OrigLen uint32          // length of the frame on the wire, as the source says (a file may say less than len(Data))
	Link    decode.LinkType // how to decode Data
	Port    uint16          // interface: live queue index, or pcapng interface ID (65535 for IDs from 65535 on)
}

// AppendFrame appends to frames a frame of the given fields and returns the
// extended slice, as append(frames, Frame{...}) would, but it sets the
// fields in the slice's new element: a composite literal is staged on the
// stack and copied with 16-byte loads that wait for its stores (store
// forwarding fails; 40 % of a pcap reader's samples in perf). Every source
// appends its frames with it.
func AppendFrame(frames []Frame, data []byte, t int64, origLen uint32, link decode.LinkType, port uint16) []Frame {
	if len(frames) < cap(frames) {
		frames = frames[:len(frames)+1]
	} else {
		frames = append(frames, Frame{})
	}
	f := &frames[len(frames)-1]
	f.Data, f.Time, f.OrigLen, f.Link, f.Port = data, t, origLen, link, port
	return frames
}

// Batch is a caller-owned set of frames that a [Source] fills. Frames holds
// the filled frames; its capacity is how many the source may fill at once.
// The zero Batch has no room: make it with [NewBatch].
type Batch struct {
	Frames []Frame
}

// NewBatch returns a batch with room for n frames.
func NewBatch(n int) *Batch { return &Batch{Frames: make([]Frame, 0, n)} }

// ErrNoRoom is returned by a source's Next for a batch without capacity:
// make batches with [NewBatch].
var ErrNoRoom = errors.New("capture: batch has no room for frames (make it with capture.NewBatch)")

// Stats are a source's running totals since it was opened.
type Stats struct {
	Received uint64 // frames delivered to the caller
	Dropped  uint64 // frames lost before delivery (kernel, ring, XDP), all reasons
	Errors   uint64 // records or frames skipped as damaged (file records with --keep-going, bad ring entries), or failed statistics reads
}

// Source delivers captured frames in batches.
//
// A Source is owned by one goroutine: Next is not safe for concurrent use.
// Close may be called from any goroutine, is idempotent, and makes a
// blocked Next return os.ErrClosed.
type Source interface {
	// Next resets b.Frames to length zero and fills it with at least one
	// and at most cap(b.Frames) frames. A live source may instead return an
	// empty batch and a nil error when nothing arrived for a while (about
	// 100 ms at most), so that the caller can look at the clock. Next
	// returns io.EOF when a finite source is exhausted, os.ErrClosed after
	// Close, or an error naming the input and offset.
	Next(b *Batch) error
	// Stats returns the totals so far. It is safe to call concurrently
	// with Next.
	Stats() Stats
	// Close releases the source's resources.
	Close() error
}

// Errors about a live source's interface as a whole. Sources return them
// inside an [InterfaceError] that names the interface; test for them with
// errors.Is.
var (
	// ErrInterfaceNotFound means that no interface of the name exists in
	// the network namespace the source was opened in.
	ErrInterfaceNotFound = errors.New("capture: interface not found")
	// ErrInterfaceGone is returned by a live source's Next once its
	// interface has been deleted (or moved to another network namespace):
	// no frame can arrive any more, and the source should be closed.
	ErrInterfaceGone = errors.New("capture: interface disappeared")
)

// InterfaceError is an error about the interface a live source captures
// on, such as "capture: interface eth1 disappeared".
type InterfaceError struct {
	Iface string // the interface's name
	Err   error  // ErrInterfaceNotFound, ErrInterfaceGone, or what else went wrong
}

// Error says what happened to the interface.
func (e *InterfaceError) Error() string {
	switch e.Err {
	case ErrInterfaceNotFound:
		return "capture: interface " + e.Iface + " not found"
	case ErrInterfaceGone:
		return "capture: interface " + e.Iface + " disappeared"
	}
	return "capture: interface " + e.Iface + ": " + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *InterfaceError) Unwrap() error { return e.Err }
