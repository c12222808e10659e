package file

import (
	"encoding/binary"
	"io"
	"math/bits"
	"sync/atomic"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// pcapng layout (https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-02.html).
const (
	blockSHB        = 0x0a0d0d0a // section header
	blockIDB        = 1          // interface description
	blockPB         = 2          // obsolete packet block
	blockSPB        = 3          // simple packet
	blockNRB        = 4          // name resolution
	blockISB        = 5          // interface statistics
	blockEPB        = 6          // enhanced packet
	blockJournal    = 9          // systemd journal export
	blockDSB        = 0x0a       // decryption secrets
	blockCustom     = 0x00000bad // custom, may be copied
	blockCustomKeep = 0x40000bad // custom, must not be copied
	byteOrderMagic  = 0x1a2b3c4d
	pcapngMajor     = 1

	blockMinLen   = 12 // type, length, trailing length
	shbMinLen     = 28
	idbMinLen     = 20
	epbMinLen     = 32
	spbMinLen     = 16
	isbMinLen     = 24
	blockOverhead = 64 << 10 // room for headers and options beyond the snap limit

	optEnd      = 0
	optTSResol  = 9  // IDB if_tsresol
	optTSOffset = 14 // IDB if_tsoffset
	optIfDrop   = 5  // ISB isb_ifdrop
	optOSDrop   = 7  // ISB isb_osdrop

	// maxInterfaces bounds the interfaces of a section, and so the memory
	// their descriptions take (about 64 bytes each, 64 MiB in all).
	// Wireshark sets no bound; a real capture has a few interfaces.
	maxInterfaces = 1 << 20
	// maxPort is the largest Frame.Port: interfaces from 65535 on share it.
	maxPort = 1<<16 - 1
)

// port returns the Frame.Port of interface id: id itself, or maxPort for
// the interfaces that a 16-bit port cannot number.
func port(id uint32) uint16 { return uint16(min(id, maxPort)) }

// get16, get32 and get64 read a field in little-endian order, or big-endian
// when swapped.
func get16(b []byte, swapped bool) uint16 {
	if swapped {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func get32(b []byte, swapped bool) uint32 {
	v := binary.LittleEndian.Uint32(b)
	if swapped {
		v = bits.ReverseBytes32(v)
	}
	return v
}

func get64(b []byte, swapped bool) uint64 {
	v := binary.LittleEndian.Uint64(b)
	if swapped {
		v = bits.ReverseBytes64(v)
	}
	return v
}

// iface is what a section says about one of its interfaces.
type iface struct {
	link decode.LinkType
	snap uint32 // snap length, which cuts simple packet blocks; 0: none
	// A timestamp t converts to t*mul/div ns for a resolution of 10^-k s,
	// or to t*1e9 >> shift ns for a resolution of 2^-shift s.
	mul, div uint64
	shift    uint
	binary   bool
	offset   int64     // if_tsoffset, in ns
	drops    [2]uint64 // last isb_ifdrop and isb_osdrop seen
}

// ns converts a timestamp in the interface's units to ns since the epoch.
func (f *iface) ns(t uint64) int64 {
	switch {
	case !f.binary && f.div == 1:
		return int64(t*f.mul) + f.offset
	case !f.binary:
		return int64(t/f.div) + f.offset
	}
	hi, lo := bits.Mul64(t, 1e9)
	var v uint64
	switch {
	case f.shift == 0:
		v = lo
	case f.shift < 64:
		v = hi<<(64-f.shift) | lo>>f.shift
	default:
		v = hi >> (f.shift - 64)
	}
	return int64(v) + f.offset
}

// setResolution applies an if_tsresol value.
func (f *iface) setResolution(v byte) bool {
	if v&0x80 != 0 {
		f.binary, f.shift = true, uint(v&0x7f)
		return true
	}
	f.binary = false
	switch k := uint64(v); {
	case k <= 9:
		f.mul, f.div = pow10(9-k), 1
	case k <= 19:
		f.mul, f.div = 1, pow10(k-9)
	default:
		return false
	}
	return true
}

// pow10 returns 10^k for k <= 19.
func pow10(k uint64) uint64 {
	v := uint64(1)
	for range k {
		v *= 10
	}
	return v
}

// pcapngReader reads the packets of a pcapng file out of the window.
type pcapngReader struct {
	w        *window
	path     string
	limit    uint32 // Options.SnapLimit
	maxBlock uint32 // longest block accepted

	swapped   bool    // the current section is big-endian
	inSection bool    // a section header has been read
	ifaces    []iface // interfaces of the current section
	lastTime  int64   // time of the last packet, for simple packet blocks

	blk      int64          // blocks read so far, damaged ones included
	dropped  *atomic.Uint64 // drops the statistics blocks report, summed
	drop     dropping
	resume   int64 // window offset to go on from after damage; -1: none
	scanAll  bool  // after damage, search for a plausible block from resume
	scanning bool  // searching for a plausible block
}

// dropping is the state of skipping a block too long to buffer.
type dropping struct {
	on      bool
	left    int64  // bytes before the trailing length
	length  uint32 // the block's total length
	swapped bool   // byte order of the trailing length
	at      position
}

// newPcapngReader returns a reader whose packets may be at most limit
// bytes. It adds the drops that interface statistics blocks report to
// dropped.
func newPcapngReader(w *window, path string, limit int, dropped *atomic.Uint64) *pcapngReader {
	return &pcapngReader{w: w, path: path, limit: uint32(limit), maxBlock: uint32(limit + blockOverhead), dropped: dropped, resume: -1}
}

// blockHeader decodes the type and total length at the start of h, which
// holds at least blockMinLen bytes. The length is read in the current
// section's byte order, or for a section header block in the order its
// byte-order magic gives, which swapped returns. ok is false when that
// magic is invalid.
func (r *pcapngReader) blockHeader(h []byte) (typ, length uint32, swapped, ok bool) {
	if binary.LittleEndian.Uint32(h) == blockSHB {
		switch binary.LittleEndian.Uint32(h[8:]) {
		case byteOrderMagic:
			swapped = false
		case bits.ReverseBytes32(byteOrderMagic):
			swapped = true
		default:
			return blockSHB, 0, false, false
		}
		return blockSHB, get32(h[4:], swapped), swapped, true
	}
	return get32(h, r.swapped), get32(h[4:], r.swapped), r.swapped, true
}

// badLength reports whether a block's total length is impossible.
func (r *pcapngReader) badLength(length uint32) bool {
	return length < blockMinLen || length%4 != 0 || length > r.maxBlock
}

// read appends packets to b until it is full. It returns nil when b is
// full, io.EOF at the end of the file, errFull, or an error.
func (r *pcapngReader) read(b *capture.Batch) error {
	if r.scanning {
		if err := r.scan(); err != nil {
			return err
		}
	}
	if r.drop.on {
		if err := r.skip(); err != nil {
			return err
		}
	}
	for len(b.Frames) < cap(b.Frames) {
		if r.fast(b) {
			continue
		}
		if err := r.block(b); err != nil {
			return err
		}
	}
	return nil
}

// fast appends the packets of the enhanced packet blocks at the read
// position that are whole in the window and sound, and reports whether it
// took any. Anything else is left to block, which also reports damage.
func (r *pcapngReader) fast(b *capture.Batch) bool {
	w, sw := r.w, r.swapped
	ifaces, limit, maxBlock := r.ifaces, r.limit, r.maxBlock
	frames := b.Frames
	first := len(frames)
	data, pos := w.data, w.pos
	for len(frames) < cap(frames) && len(data)-pos >= epbMinLen {
		h := data[pos : pos+epbMinLen]
		length := get32(h[4:], sw)
		end := pos + int(length)
		if get32(h, sw) != blockEPB || length%4 != 0 || length < epbMinLen || length > maxBlock || end > len(data) || get32(data[end-4:], sw) != length {
			break
		}
		id, capLen := get32(h[8:], sw), get32(h[20:], sw)
		if int64(id) >= int64(len(ifaces)) || capLen > length-epbMinLen || capLen > limit {
			break
		}
		f := &ifaces[id]
		ts := uint64(get32(h[12:], sw))<<32 | uint64(get32(h[16:], sw))
		t := int64(ts*f.mul) + f.offset // the usual µs or ns; ns does not inline
		if f.binary || f.div != 1 {
			t = f.ns(ts)
		}
		frames = capture.AppendFrame(frames, data[pos+28:pos+28+int(capLen):pos+28+int(capLen)],
			t, get32(h[24:], sw), f.link, port(id))
		pos = end
	}
	n := len(frames) - first
	if n == 0 {
		return false
	}
	b.Frames = frames
	w.pos = pos
	w.lent[w.cur] = true
	r.blk += int64(n)
	r.lastTime = frames[len(frames)-1].Time
	return true
}

// block reads the block at the read position, of any type, appending its
// packet to b if it has one. It returns io.EOF at the end of the file,
// errFull, or the error describing the damage.
func (r *pcapngReader) block(b *capture.Batch) error {
	w := r.w
	if err := w.ensure(blockMinLen); err != nil {
		if err == io.EOF && len(w.data) == w.pos {
			return io.EOF
		}
		return r.at().short(err, len(w.data)-w.pos, blockMinLen)
	}
	typ, length, swapped, ok := r.blockHeader(w.data[w.pos:])
	if !ok {
		r.damaged(0, true)
		return r.at().damage(ErrBadMagic, "section header byte-order magic % x", w.data[w.pos+8:w.pos+12])
	}
	if r.badLength(length) {
		if length%4 == 0 && length >= blockMinLen && !parsedBlock(typ) {
			r.drop = dropping{on: true, left: int64(length) - 4, length: length, swapped: swapped, at: r.at()}
			return r.skip()
		}
		r.damaged(0, true)
		return r.at().damage(ErrBadBlock, "block type %#x has total length %d (want a multiple of 4 from %d to %d)", typ, length, blockMinLen, r.maxBlock)
	}
	if err := w.ensure(int(length)); err != nil {
		if err == io.EOF {
			// A wrong length may point past the end: look for blocks
			// after the header.
			r.damaged(0, true)
		}
		return r.at().short(err, len(w.data)-w.pos, int(length))
	}
	blk := w.data[w.pos : w.pos+int(length) : w.pos+int(length)]
	if trail := get32(blk[length-4:], swapped); trail != length {
		r.damaged(0, true)
		return r.at().damage(ErrBadBlock, "block type %#x has total length %d but trailing length %d", typ, length, trail)
	}
	var err error
	switch typ {
	case blockSHB:
		err = r.section(blk, swapped)
	case blockIDB:
		err = r.iface(blk)
	case blockEPB, blockPB:
		err = r.packet(b, blk, typ)
	case blockSPB:
		err = r.simple(b, blk)
	case blockISB:
		err = r.statistics(blk)
	}
	if err != nil {
		r.damaged(int64(length), false)
		return err
	}
	r.blk++
	w.pos += int(length)
	return nil
}

// parsedBlock reports whether the reader needs the contents of blocks of
// type typ, which must then fit in the window.
func parsedBlock(typ uint32) bool {
	switch typ {
	case blockSHB, blockIDB, blockEPB, blockPB, blockSPB, blockISB:
		return true
	}
	return false
}

// skip goes on dropping a block too long to buffer, then checks its
// trailing length. It returns errFull when the window has no free buffer:
// the next read goes on from there.
func (r *pcapngReader) skip() error {
	w, d := r.w, &r.drop
	for d.left > 0 {
		if avail := int64(len(w.data) - w.pos); avail > 0 {
			k := min(avail, d.left)
			w.pos += int(k)
			d.left -= k
			continue
		}
		if err := w.fill(1); err != nil {
			if err != errFull {
				d.on = false
			}
			return d.at.short(err, int(int64(d.length)-4-d.left), int(d.length))
		}
	}
	if err := w.ensure(4); err != nil {
		if err != errFull {
			d.on = false
		}
		return d.at.short(err, int(d.length)-4+len(w.data)-w.pos, int(d.length))
	}
	d.on = false
	if trail := get32(w.data[w.pos:], d.swapped); trail != d.length {
		r.damaged(0, true)
		return d.at.damage(ErrBadBlock, "block of %d bytes has trailing length %d", d.length, trail)
	}
	w.pos += 4
	r.blk++
	return nil
}

// at returns the position of the block at the read position.
func (r *pcapngReader) at() position {
	return position{path: r.path, what: "block", n: r.blk + 1, off: r.w.offset()}
}

// damaged notes a bad block at the read position: reading may go on skip
// bytes further on, searching for a plausible block when scan is set. A
// file whose first section header is bad is not read further.
func (r *pcapngReader) damaged(skip int64, scan bool) {
	r.resume = -1
	if r.inSection {
		r.resume, r.scanAll = r.w.offset()+max(skip, 4), scan
	}
}

// resync prepares reading to go on after damage. It reports false when the
// rest of the file must be skipped.
func (r *pcapngReader) resync() bool {
	if r.resume < 0 {
		return false
	}
	r.blk++ // the damaged block
	r.w.pos = int(r.resume - r.w.base)
	r.resume = -1
	r.scanning = r.scanAll
	return true
}

// scan advances the read position in steps of 4 bytes to a block whose
// type is known and whose two lengths agree.
func (r *pcapngReader) scan() error {
	w := r.w
	for {
		if err := w.ensure(blockMinLen); err != nil {
			if err == io.EOF {
				w.pos = len(w.data)
			}
			return err
		}
		typ, length, swapped, ok := r.blockHeader(w.data[w.pos:])
		if ok && knownBlock(typ) && !r.badLength(length) {
			err := w.ensure(int(length))
			if err == nil && get32(w.data[w.pos+int(length)-4:], swapped) == length {
				r.scanning = false
				return nil
			}
			if err != nil && err != io.EOF {
				return err
			}
		}
		w.pos += 4
	}
}

// knownBlock reports whether typ is a block type of the pcapng
// specification.
func knownBlock(typ uint32) bool {
	switch typ {
	case blockSHB, blockIDB, blockPB, blockSPB, blockNRB, blockISB, blockEPB, blockJournal, blockDSB, blockCustom, blockCustomKeep:
		return true
	}
	return false
}

// section starts a new section from its header block.
func (r *pcapngReader) section(blk []byte, swapped bool) error {
	if len(blk) < shbMinLen {
		return r.at().damage(ErrBadBlock, "section header of %d bytes, want at least %d", len(blk), shbMinLen)
	}
	if major := get16(blk[12:], swapped); major != pcapngMajor {
		return r.at().damage(ErrBadMagic, "pcapng version %d, want %d", major, pcapngMajor)
	}
	r.swapped, r.inSection = swapped, true
	r.ifaces = r.ifaces[:0]
	return nil
}

// iface adds an interface from its description block.
func (r *pcapngReader) iface(blk []byte) error {
	if len(blk) < idbMinLen {
		return r.at().damage(ErrBadBlock, "interface description of %d bytes, want at least %d", len(blk), idbMinLen)
	}
	if len(r.ifaces) == maxInterfaces {
		return r.at().damage(ErrBadBlock, "more than %d interfaces in a section", maxInterfaces)
	}
	f := iface{
		link: decode.LinkType(get16(blk[8:], r.swapped)),
		snap: get32(blk[12:], r.swapped),
		mul:  1000, // default resolution: microseconds
		div:  1,
	}
	for opts := blk[16 : len(blk)-4]; ; {
		code, v, rest, err := r.option(opts, "interface")
		if err != nil {
			return err
		}
		if v == nil {
			break
		}
		n := len(v)
		switch code {
		case optTSResol:
			if n != 1 || !f.setResolution(v[0]) {
				return r.at().damage(ErrBadBlock, "bad if_tsresol option (% x)", v)
			}
		case optTSOffset:
			if n != 8 {
				return r.at().damage(ErrBadBlock, "if_tsoffset option of %d bytes, want 8", n)
			}
			f.offset = int64(get64(v, r.swapped)) * 1e9
		}
		opts = rest
	}
	r.ifaces = append(r.ifaces, f)
	return nil
}

// option splits the first option off opts, the options of a block of the
// kind what ("interface", "statistics"): its code, value and the options
// after it. v is nil, with a nil error, at the end of the options (the
// end-of-options code or fewer than 4 bytes left); else it is non-nil,
// even when empty.
func (r *pcapngReader) option(opts []byte, what string) (code uint16, v, rest []byte, err error) {
	if len(opts) < 4 {
		return 0, nil, nil, nil
	}
	code, n := get16(opts, r.swapped), int(get16(opts[2:], r.swapped))
	if code == optEnd {
		return 0, nil, nil, nil
	}
	padded := (n + 3) &^ 3
	if 4+padded > len(opts) {
		return 0, nil, nil, r.at().damage(ErrBadBlock, "%s option %d of %d bytes overruns the block", what, code, n)
	}
	return code, opts[4 : 4+n : 4+n], opts[4+padded:], nil
}

// statistics adds the increase of an interface statistics block's drop
// counters (isb_ifdrop and isb_osdrop, cumulative per interface) to the
// reader's drops. A counter smaller than the last one of its interface
// was restarted: all of it counts.
func (r *pcapngReader) statistics(blk []byte) error {
	if len(blk) < isbMinLen {
		return r.at().damage(ErrBadBlock, "interface statistics of %d bytes, want at least %d", len(blk), isbMinLen)
	}
	id := get32(blk[8:], r.swapped)
	if int64(id) >= int64(len(r.ifaces)) {
		return r.at().damage(ErrBadBlock, "statistics of interface %d not described (section has %d)", id, len(r.ifaces))
	}
	var seen [2]bool
	var now [2]uint64
	for opts := blk[20 : len(blk)-4]; ; {
		code, v, rest, err := r.option(opts, "statistics")
		if err != nil {
			return err
		}
		if v == nil {
			break
		}
		if k := dropOption(code); k >= 0 {
			if len(v) != 8 {
				return r.at().damage(ErrBadBlock, "statistics option %d of %d bytes, want 8", code, len(v))
			}
			seen[k], now[k] = true, get64(v, r.swapped)
		}
		opts = rest
	}
	f := &r.ifaces[id]
	for k := range now {
		if !seen[k] {
			continue
		}
		inc := now[k]
		if inc >= f.drops[k] {
			inc -= f.drops[k]
		}
		f.drops[k] = now[k]
		r.dropped.Add(inc)
	}
	return nil
}

// dropOption returns the index in iface.drops of a statistics option
// code, or -1 for other options.
func dropOption(code uint16) int {
	switch code {
	case optIfDrop:
		return 0
	case optOSDrop:
		return 1
	}
	return -1
}

// packet appends the packet of an enhanced or obsolete packet block. Both
// have the same layout but for the interface ID, 32 bits in the enhanced
// block and 16 (followed by a drop count) in the obsolete one.
func (r *pcapngReader) packet(b *capture.Batch, blk []byte, typ uint32) error {
	if len(blk) < epbMinLen {
		return r.at().damage(ErrBadBlock, "packet block of %d bytes, want at least %d", len(blk), epbMinLen)
	}
	id := get32(blk[8:], r.swapped)
	if typ == blockPB {
		id = uint32(get16(blk[8:], r.swapped))
	}
	capLen, origLen := get32(blk[20:], r.swapped), get32(blk[24:], r.swapped)
	if room := len(blk) - epbMinLen; int64(capLen) > int64(room) {
		return r.at().damage(ErrBadBlock, "captured length %d overruns the %d bytes of packet data", capLen, room)
	}
	data := blk[28 : 28+capLen : 28+capLen]
	f, err := r.lookup(id, data)
	if err != nil {
		return err
	}
	t := f.ns(uint64(get32(blk[12:], r.swapped))<<32 | uint64(get32(blk[16:], r.swapped)))
	r.lastTime = t
	r.w.lent[r.w.cur] = true
	b.Frames = capture.AppendFrame(b.Frames, data, t, origLen, f.link, port(id))
	return nil
}

// simple appends the packet of a simple packet block. Its captured length
// is the original length, cut to the snap length of interface 0. It has no
// timestamp: the frame gets the time of the section's previous packet.
func (r *pcapngReader) simple(b *capture.Batch, blk []byte) error {
	if len(blk) < spbMinLen {
		return r.at().damage(ErrBadBlock, "simple packet block of %d bytes, want at least %d", len(blk), spbMinLen)
	}
	origLen := get32(blk[8:], r.swapped)
	capLen := origLen
	if len(r.ifaces) > 0 && r.ifaces[0].snap != 0 {
		capLen = min(capLen, r.ifaces[0].snap)
	}
	if room := len(blk) - spbMinLen; int64(capLen) > int64(room) {
		return r.at().damage(ErrBadBlock, "captured length %d overruns the %d bytes of packet data", capLen, room)
	}
	data := blk[12 : 12+capLen : 12+capLen]
	f, err := r.lookup(0, data)
	if err != nil {
		return err
	}
	r.w.lent[r.w.cur] = true
	b.Frames = capture.AppendFrame(b.Frames, data, r.lastTime, origLen, f.link, 0)
	return nil
}

// lookup returns interface id after checking a packet's length. Like
// libpcap and Wireshark, it accepts a packet longer than the interface's
// snap length or than its own original length; only the reader's limit
// (Options.SnapLimit) bounds it.
func (r *pcapngReader) lookup(id uint32, data []byte) (*iface, error) {
	if int64(id) >= int64(len(r.ifaces)) {
		return nil, r.at().damage(ErrBadBlock, "interface %d not described (section has %d)", id, len(r.ifaces))
	}
	if len(data) > int(r.limit) {
		return nil, r.at().damage(ErrRecordTooLarge, "captured length %d exceeds the limit %d", len(data), r.limit)
	}
	return &r.ifaces[id], nil
}
