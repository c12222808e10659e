package file

import (
	"encoding/binary"
	"io"
	"math/bits"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// Classic pcap layout (https://www.ietf.org/archive/id/draft-ietf-opsawg-pcap-04.html).
const (
	pcapFileHeaderLen   = 24
	pcapRecordHeaderLen = 16
	pcapMagicMicro      = 0xa1b2c3d4
	pcapMagicNano       = 0xa1b23c4d
	pcapVersionMajor    = 2
	pcapVersionMinor    = 4
	pcapLinkTypeMask    = 0xffff // the upper bits of the link type field carry FCS information
	secondsMaxDrift     = 7 * 24 * 3600
)

// pcapReader reads the records of a classic pcap file out of the window.
type pcapReader struct {
	w    *window
	path string

	header  bool            // file header read
	swapped bool            // file is in the other byte order
	mul     int64           // ns per timestamp fraction unit
	fracMax uint32          // fraction units per second
	link    decode.LinkType // link type of every record
	limit   uint32          // largest caplen accepted

	rec      int64  // records read so far, damaged ones included
	lastSec  uint32 // seconds of the last good record, for resynchronisation
	scanning bool   // looking for the next plausible record after damage
	resume   int64  // window offset to scan from after damage; -1: none
}

// newPcapReader returns a reader whose records may be at most limit bytes.
func newPcapReader(w *window, path string, limit int) *pcapReader {
	return &pcapReader{w: w, path: path, limit: uint32(limit), resume: -1}
}

// u32 reads a header field in the file's byte order.
func (r *pcapReader) u32(b []byte) uint32 {
	v := binary.LittleEndian.Uint32(b)
	if r.swapped {
		v = bits.ReverseBytes32(v)
	}
	return v
}

// readHeader reads and checks the file header.
func (r *pcapReader) readHeader() error {
	w := r.w
	at := position{path: r.path, what: "file header", off: 0}
	if err := w.ensure(pcapFileHeaderLen); err != nil {
		return at.short(err, len(w.data)-w.pos, pcapFileHeaderLen)
	}
	h := w.data[w.pos : w.pos+pcapFileHeaderLen]
	switch binary.LittleEndian.Uint32(h) {
	case pcapMagicMicro:
		r.mul, r.fracMax = 1000, 1e6
	case pcapMagicNano:
		r.mul, r.fracMax = 1, 1e9
	case bits.ReverseBytes32(pcapMagicMicro):
		r.mul, r.fracMax, r.swapped = 1000, 1e6, true
	case bits.ReverseBytes32(pcapMagicNano):
		r.mul, r.fracMax, r.swapped = 1, 1e9, true
	default:
		return at.damage(ErrBadMagic, "magic % x", h[:4])
	}
	major := binary.LittleEndian.Uint16(h[4:])
	if r.swapped {
		major = binary.BigEndian.Uint16(h[4:])
	}
	if major != pcapVersionMajor {
		return at.damage(ErrBadMagic, "pcap version %d, want %d", major, pcapVersionMajor)
	}
	// The header's snap length is not a limit: libpcap and Wireshark read
	// records longer than it, up to 262144 bytes (DefaultSnapLimit).
	r.link = decode.LinkType(r.u32(h[20:]) & pcapLinkTypeMask)
	w.pos += pcapFileHeaderLen
	r.header = true
	return nil
}

// read appends records to b until it is full. It returns nil when b is
// full, io.EOF at the end of the file, errFull, or an error.
func (r *pcapReader) read(b *capture.Batch) error {
	if !r.header {
		if err := r.readHeader(); err != nil {
			return err
		}
	}
	if r.scanning {
		if err := r.scan(); err != nil {
			return err
		}
	}
	w := r.w
	frames := b.Frames
	first := len(frames)
	data, pos := w.data, w.pos
	for len(frames) < cap(frames) {
		// Fast path: a whole, sound record is buffered.
		if len(data)-pos >= pcapRecordHeaderLen {
			h := data[pos : pos+pcapRecordHeaderLen]
			capLen := r.u32(h[8:])
			end := pos + pcapRecordHeaderLen + int(capLen)
			if capLen <= r.limit && end <= len(data) {
				frames = append(frames, capture.Frame{
					Data:    data[pos+pcapRecordHeaderLen : end : end],
					Time:    int64(r.u32(h[0:]))*1e9 + int64(r.u32(h[4:]))*r.mul,
					OrigLen: r.u32(h[12:]),
					Link:    r.link,
				})
				pos = end
				continue
			}
		}
		// Slow path: refill, or report damage.
		r.sync(b, frames, first, pos)
		first = len(frames)
		if err := r.slow(); err != nil {
			return err
		}
		data, pos = w.data, w.pos
	}
	r.sync(b, frames, first, pos)
	return nil
}

// sync stores the state the fast path keeps in locals.
func (r *pcapReader) sync(b *capture.Batch, frames []capture.Frame, first, pos int) {
	b.Frames = frames
	r.w.pos = pos
	if n := len(frames) - first; n > 0 {
		r.w.lent[r.w.cur] = true
		r.rec += int64(n)
		r.lastSec = uint32(frames[len(frames)-1].Time / 1e9)
	}
}

// slow makes the next record available in the window, or returns io.EOF at
// a clean end of file, errFull, or the error describing the damage.
func (r *pcapReader) slow() error {
	w := r.w
	at := position{path: r.path, what: "record", n: r.rec + 1, off: w.offset()}
	if err := w.ensure(pcapRecordHeaderLen); err != nil {
		if err == io.EOF && len(w.data) == w.pos {
			return io.EOF
		}
		return at.short(err, len(w.data)-w.pos, pcapRecordHeaderLen)
	}
	h := w.data[w.pos:]
	capLen := r.u32(h[8:])
	if capLen > r.limit {
		r.damaged()
		return at.damage(ErrRecordTooLarge, "captured length %d exceeds the limit %d", capLen, r.limit)
	}
	need := pcapRecordHeaderLen + int(capLen)
	if err := w.ensure(need); err != nil {
		if err == io.EOF {
			// A wrong length may point past the end: look for records
			// after the header.
			r.damaged()
		}
		return at.short(err, len(w.data)-w.pos, need)
	}
	return nil
}

// damaged notes that the record at the read position is bad and where a
// resynchronisation would start.
func (r *pcapReader) damaged() {
	r.rec++
	r.resume = r.w.offset() + 1
}

// resync prepares reading to go on after damage. It reports false when the
// rest of the file must be skipped.
func (r *pcapReader) resync() bool {
	if r.resume < 0 {
		return false
	}
	r.w.pos = int(r.resume - r.w.base)
	r.resume = -1
	r.scanning = true
	return true
}

// plausible reports whether h starts with a record header that could be
// real: a sound length and a timestamp near the last good record's.
func (r *pcapReader) plausible(h []byte) bool {
	capLen, origLen := r.u32(h[8:]), r.u32(h[12:])
	if capLen > r.limit || capLen > origLen || r.u32(h[4:]) >= r.fracMax {
		return false
	}
	if r.rec == 0 || r.lastSec == 0 {
		return true
	}
	d := int64(r.u32(h[0:])) - int64(r.lastSec)
	return d > -secondsMaxDrift && d < secondsMaxDrift
}

// scan advances the read position byte by byte to a record that is
// plausible and followed by another plausible record or the end of file.
func (r *pcapReader) scan() error {
	w := r.w
	for {
		if err := w.ensure(pcapRecordHeaderLen); err != nil {
			if err == io.EOF {
				w.pos = len(w.data)
			}
			return err
		}
		if r.plausible(w.data[w.pos:]) {
			next := pcapRecordHeaderLen + int(r.u32(w.data[w.pos+8:]))
			err := w.ensure(next + pcapRecordHeaderLen)
			switch {
			case err == nil && r.plausible(w.data[w.pos+next:]),
				err == io.EOF && len(w.data)-w.pos == next:
				r.scanning = false
				return nil
			case err != nil && err != io.EOF:
				return err
			}
		}
		w.pos++
	}
}
