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
	pcapLinkTypeMask    = 0xffff        // the upper bits of the link type field carry FCS information
	secondsMaxDrift     = 7 * 24 * 3600 // largest time step between plausible records, in s
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
	strict  bool            // KeepGoing: every record must be plausible

	rec      int64  // records read so far, damaged ones included
	lastSec  uint32 // seconds of the last good record, for resynchronisation
	seen     bool   // a good record has been read: lastSec is set
	scanning bool   // looking for the next plausible record after damage
	resume   int64  // window offset to search for a plausible record from after damage; -1: none
	vouched  int64  // offset of a record the slow path found sound although the header after it is not
}

// newPcapReader returns a reader whose records may be at most limit bytes.
// A strict reader (for KeepGoing) treats a record as damaged unless it and
// the header after it are plausible.
func newPcapReader(w *window, path string, limit int, strict bool) *pcapReader {
	return &pcapReader{w: w, path: path, limit: uint32(limit), strict: strict, resume: -1, vouched: -1}
}

// prev returns the seconds of the last good record, or resyncNoTime.
func (r *pcapReader) prev() int64 {
	if !r.seen {
		return resyncNoTime
	}
	return int64(r.lastSec)
}

// sound reports whether the record at the start of b, of n bytes with its
// header, is plausible after a record of prev seconds, and followed by a
// plausible header or by the end of the input: its end, or a read error
// (a cut gzip stream), which belongs to the bytes after the record. It
// reports false when the follower is not buffered yet, for the slow path to
// refill.
func (r *pcapReader) sound(b []byte, n int, prev int64) bool {
	if !r.plausible(b, prev) {
		return false
	}
	if len(b)-n < pcapRecordHeaderLen {
		return r.w.eof || r.w.err != nil
	}
	return r.plausible(b[n:], int64(r.u32(b)))
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
	prev := r.prev()
	for len(frames) < cap(frames) {
		// Fast path: a whole, sound record is buffered.
		if len(data)-pos >= pcapRecordHeaderLen {
			h := data[pos : pos+pcapRecordHeaderLen]
			capLen := r.u32(h[8:])
			end := pos + pcapRecordHeaderLen + int(capLen)
			if capLen <= r.limit && end <= len(data) &&
				(!r.strict || r.sound(data[pos:], end-pos, prev) || w.base+int64(pos) == r.vouched) {
				if r.strict {
					prev = int64(r.u32(h[0:]))
				}
				frames = capture.AppendFrame(frames, data[pos+pcapRecordHeaderLen:end:end],
					int64(r.u32(h[0:]))*1e9+int64(r.u32(h[4:]))*r.mul, r.u32(h[12:]), r.link, 0)
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
		r.seen = true
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
	if !r.strict {
		return nil
	}
	// The header after the record vouches for it; a read error there (a
	// cut gzip stream) is reported at that header, as the end of the
	// input would be.
	if err := w.ensure(need + pcapRecordHeaderLen); err != nil && err != io.EOF && err != w.err {
		return at.short(err, len(w.data)-w.pos, need+pcapRecordHeaderLen)
	}
	switch b := w.data[w.pos:]; {
	case r.sound(b, need, r.prev()):
	case !r.plausible(b, r.prev()):
		r.damaged()
		return at.damage(errImplausible, "implausible record header")
	default:
		// The header after the record is implausible. If a chain of
		// records starts inside the record's bytes, they were cut short
		// and the record is damaged; otherwise the damage lies after it.
		for rel := 1; rel < need; rel++ {
			ok, err := r.chain(rel)
			if err != nil {
				return at.short(err, len(w.data)-w.pos, need+rel)
			}
			if ok {
				r.damaged()
				return at.damage(errImplausible, "record cut short: a record starts %d bytes into it", rel)
			}
		}
		r.vouched = w.offset()
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

// Resynchronisation: a candidate record header must be followed by
// resyncChain-1 more plausible headers (or by the end of the file).
const (
	resyncChain  = 3
	maxOrigLen   = DefaultSnapLimit // largest original length of a candidate, unless the limit is larger
	resyncNoTime = -1               // plausible's prev: no time to compare with
)

// plausible reports whether h starts with a record header that could be
// real: caplen <= orig_len, 0 < orig_len <= max(262144, limit), caplen
// within the limit, a timestamp fraction below one second, and, unless
// prev is resyncNoTime, a time within a week of prev (seconds).
func (r *pcapReader) plausible(h []byte, prev int64) bool {
	capLen, origLen := r.u32(h[8:]), r.u32(h[12:])
	if capLen > r.limit || capLen > origLen || origLen == 0 || origLen > max(maxOrigLen, r.limit) || r.u32(h[4:]) >= r.fracMax {
		return false
	}
	if prev == resyncNoTime {
		return true
	}
	d := int64(r.u32(h[0:])) - prev
	return d > -secondsMaxDrift && d < secondsMaxDrift
}

// scan advances the read position byte by byte to a plausible record
// header, near in time to the last good record if there was one, that
// starts a chain of resyncChain plausible records, each near in time to
// the one before, or of fewer that ends exactly at the end of the file.
// Payload bytes rarely pass: zeros have no length, and a header read at
// the wrong offset has an original length beyond 262144 or a follower
// that does not fit.
func (r *pcapReader) scan() error {
	w := r.w
	for {
		if err := w.ensure(pcapRecordHeaderLen); err != nil {
			if err == io.EOF {
				w.pos = len(w.data)
			}
			return err
		}
		ok, err := r.chain(0)
		if err != nil {
			return err
		}
		if ok {
			r.scanning = false
			return nil
		}
		w.pos++
	}
}

// chain reports whether rel bytes after the read position starts a chain
// of plausible records, as scan describes. It returns errFull or a read
// error when the window cannot show the records.
func (r *pcapReader) chain(rel int) (bool, error) {
	w := r.w
	prev := r.prev()
	off := rel
	for k := 0; k < resyncChain; k++ {
		switch err := w.ensure(off + pcapRecordHeaderLen); {
		case err == io.EOF:
			return k > 0 && len(w.data)-w.pos == off, nil
		case err == io.ErrShortBuffer:
			return k > 1, nil // the window holds no more: take two
		case err != nil:
			return false, err
		}
		h := w.data[w.pos+off:]
		if !r.plausible(h, prev) {
			return false, nil
		}
		prev = int64(r.u32(h[0:]))
		off += pcapRecordHeaderLen + int(r.u32(h[8:]))
	}
	return true, nil
}
