package file

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// DefaultWriterSnapLen is the default of WriterOptions.SnapLen.
const DefaultWriterSnapLen = 262144

// writerBufferSize is the size of a Writer's buffer.
const writerBufferSize = 1 << 20

// WriterOptions configure a [Writer]. The zero value and nil mean the
// defaults.
type WriterOptions struct {
	// LinkType is the link type of every frame; 0 means Ethernet (so a
	// Writer cannot write BSD loopback, link type 0).
	LinkType decode.LinkType
	// SnapLen is the longest captured length written, and the snapshot
	// length in the file header (default DefaultWriterSnapLen).
	SnapLen int
}

// Writer writes frames as a classic pcap file with nanosecond timestamps,
// in little-endian byte order. It buffers: call Flush at the end. A frame it
// refuses (bad time or lengths) writes nothing; after an error of the
// underlying writer every later call returns that error.
type Writer struct {
	w    *bufio.Writer
	link decode.LinkType
	snap int
	hdr  [pcapRecordHeaderLen]byte
	err  error
}

// NewWriter returns a Writer that writes to w, after buffering the file
// header. opts may be nil.
func NewWriter(w io.Writer, opts *WriterOptions) (*Writer, error) {
	var o WriterOptions
	if opts != nil {
		o = *opts
	}
	if o.LinkType == 0 {
		o.LinkType = decode.LinkEthernet
	}
	if o.SnapLen == 0 {
		o.SnapLen = DefaultWriterSnapLen
	}
	if o.SnapLen < 0 || int64(o.SnapLen) > math.MaxUint32 {
		return nil, fmt.Errorf("capture: pcap writer: snap length %d out of range", o.SnapLen)
	}
	pw := &Writer{w: bufio.NewWriterSize(w, writerBufferSize), link: o.LinkType, snap: o.SnapLen}
	var h [pcapFileHeaderLen]byte
	binary.LittleEndian.PutUint32(h[0:], pcapMagicNano)
	binary.LittleEndian.PutUint16(h[4:], pcapVersionMajor)
	binary.LittleEndian.PutUint16(h[6:], pcapVersionMinor)
	binary.LittleEndian.PutUint32(h[16:], uint32(o.SnapLen))
	binary.LittleEndian.PutUint32(h[20:], uint32(o.LinkType))
	if _, err := pw.w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("capture: pcap writer: %w", err)
	}
	return pw, nil
}

// errTimeRange is the cause of the error for a time pcap cannot hold.
var errTimeRange = errors.New("time outside 1970..2106")

// WriteFrame writes one frame captured at t (ns since the Unix epoch) that
// was origLen bytes long on the wire. Data beyond the snap length is left
// out; origLen is written as given and must not be less than len(data).
func (w *Writer) WriteFrame(t int64, data []byte, origLen int) error {
	if w.err != nil {
		return w.err
	}
	if t < 0 || t/1e9 > math.MaxUint32 {
		return fmt.Errorf("capture: pcap writer: frame time %d ns: %w", t, errTimeRange)
	}
	if origLen < len(data) || int64(origLen) > math.MaxUint32 {
		return fmt.Errorf("capture: pcap writer: original length %d with %d bytes of data: %w", origLen, len(data), ErrRecordTooLarge)
	}
	data = data[:min(len(data), w.snap)]
	binary.LittleEndian.PutUint32(w.hdr[0:], uint32(t/1e9))
	binary.LittleEndian.PutUint32(w.hdr[4:], uint32(t%1e9))
	binary.LittleEndian.PutUint32(w.hdr[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(w.hdr[12:], uint32(origLen))
	if _, err := w.w.Write(w.hdr[:]); err != nil {
		return w.fail(err)
	}
	if _, err := w.w.Write(data); err != nil {
		return w.fail(err)
	}
	return nil
}

// WriteBatch writes the frames of b in order. Every frame must have the
// link type of the file.
func (w *Writer) WriteBatch(b *capture.Batch) error {
	for i := range b.Frames {
		f := &b.Frames[i]
		if f.Link != w.link {
			return fmt.Errorf("capture: pcap writer: frame %d of the batch has link type %d, the file %d", i, f.Link, w.link)
		}
		if err := w.WriteFrame(f.Time, f.Data, int(f.OrigLen)); err != nil {
			return err
		}
	}
	return nil
}

// Flush writes the buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		return w.fail(err)
	}
	return nil
}

// fail makes err sticky.
func (w *Writer) fail(err error) error {
	w.err = fmt.Errorf("capture: pcap writer: %w", err)
	return w.err
}
