package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/sketch"
)

// State encoding of a Window, version 4; versions 2 (no segment) and 3 (a
// segment, when not 0) are still read, as windows without the diagnoses'
// state. A state is self-describing and carries a checksum:
//
//	magic "RSCOPEWS" | version u8 | body | crc32c(magic..body) u32
//
// body, integers big-endian unless marked uvarint (varint: zigzag), strings
// as uvarint length and bytes:
//
//	start i64 | length i64 | covered part: uvarint from, uvarint to (ns after start)
//	segment: uvarint (version 3: only there, and not 0)
//	hosts: uvarint n, n strings
//	sketch config: seed u64 | distinct bits, cm depth, cm width, top-k size: uvarint
//	burst interval: uvarint ns, 0 for none (version 4)
//	counters: uvarint n, n × (name string | uvarint value), non-zero only;
//	          section counters are named "opcode/<i>", "pfc_frames/<i>", ...
//	flow counter names: uvarint n, n strings (the column order below)
//	flows: uvarint n, n × (key 38 bytes | sqp u32 | flags u8 | sport u16 |
//	       one uvarint per flow counter name | uvarint k, k × (op u8 | uvarint n) | uvarint other |
//	       activity (version 4): uvarint r, r × uvarint (start slot | slots | bytes | ecn-ce | cnp))
//	cm: uvarint n, n × (src 17 | dst 17 | attr u16 | local comm u32 | remote comm u32 | qpn u32)
//	pauses (version 4): uvarint n, n × (mac 6 | priority u8 | uvarint frames |
//	       uvarint r, r × (varint start (ns from the window start) | uvarint ns, paused ns, frames))
//	retransmissions (version 4): uvarint n, n × (key 38 | varint trouble, first, last (ns from the
//	       window start) | uvarint first psn | uvarint resent | cause u8 | nak code u8 | flags u8)
//	sketches: uvarint n, n × (name string | uvarint len | sketch encoding)
//
// Counters are written by name so that a reader can tell a state from a
// newer rocescope with counters it does not know (an error) from a damaged
// one. The encoding of a normalized window is canonical: equal windows
// encode to equal bytes.
const (
	stateMagic   = "RSCOPEWS"
	stateVersion = 4 // 2: the covered part of the window; 3: the segment, when not 0; 4: the diagnoses' state
	// oldestVersion is the oldest state version decoded.
	oldestVersion = 2
)

// ErrState is wrapped by every error decoding a state.
var ErrState = errors.New("invalid window state")

// ErrNotState is wrapped, besides [ErrState], by the error for bytes that
// do not begin with a state's magic.
var ErrNotState = errors.New("not a rocescope window state")

// ErrStateSize is wrapped, besides [ErrState], by the error for a state
// whose sketches would take more memory than the decoder's limit.
var ErrStateSize = errors.New("state too large")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// counterName returns the state name of counter i.
func counterName(i int) string {
	switch {
	case i < int(numScalar):
		return counterNames[i]
	case i < pfcFrameBase:
		return fmt.Sprintf("opcode/%d", i-opcodeBase)
	case i < pfcQuantaBase:
		return fmt.Sprintf("pfc_frames/%d", i-pfcFrameBase)
	case i < nakCodeBase:
		return fmt.Sprintf("pfc_quanta/%d", i-pfcQuantaBase)
	case i < errorBase:
		return fmt.Sprintf("nak_code/%d", i-nakCodeBase)
	}
	return fmt.Sprintf("decode_error/%d", i-errorBase)
}

// counterIndex maps state names to counter positions.
var counterIndex = func() map[string]int {
	m := make(map[string]int, numCounters)
	for i := range numCounters {
		m[counterName(i)] = i
	}
	return m
}()

// AppendBinary appends the state encoding of w. Normalize w first for a
// canonical encoding.
func (w *Window) AppendBinary(b []byte) ([]byte, error) {
	start := len(b)
	b = append(b, stateMagic...)
	b = append(b, stateVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(w.Start))
	b = binary.BigEndian.AppendUint64(b, uint64(w.Length))
	from, to := w.covered()
	b = binary.AppendUvarint(b, uint64(from-w.Start))
	b = binary.AppendUvarint(b, uint64(to-w.Start))
	b = binary.AppendUvarint(b, uint64(w.Segment))
	b = binary.AppendUvarint(b, uint64(len(w.Hosts)))
	for _, h := range w.Hosts {
		b = appendString(b, h)
	}
	sc := w.sketchConfig
	b = binary.BigEndian.AppendUint64(b, sc.Seed)
	for _, v := range []int{sc.DistinctBits, sc.CMDepth, sc.CMWidth, sc.TopKSize} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = binary.AppendUvarint(b, uint64(w.Burst))

	n := 0
	for _, v := range w.Counters {
		if v != 0 {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for i, v := range w.Counters {
		if v != 0 {
			b = appendString(b, counterName(i))
			b = binary.AppendUvarint(b, v)
		}
	}

	b = binary.AppendUvarint(b, uint64(numFlowCounters))
	for c := range numFlowCounters {
		b = appendString(b, FlowCounter(c).String())
	}
	b = binary.AppendUvarint(b, uint64(len(w.Flows)))
	for i := range w.Flows {
		f := &w.Flows[i]
		b = f.Key.appendBinary(b)
		b = binary.BigEndian.AppendUint32(b, f.SQP)
		var flags byte
		if f.SQPKnown {
			flags = 1
		}
		b = append(b, flags)
		b = binary.BigEndian.AppendUint16(b, f.Sport)
		for _, v := range f.C {
			b = binary.AppendUvarint(b, v)
		}
		k := 0
		for k < maxFlowOps && f.Ops.N[k] != 0 {
			k++
		}
		b = binary.AppendUvarint(b, uint64(k))
		for j := range k {
			b = append(b, f.Ops.Op[j])
			b = binary.AppendUvarint(b, f.Ops.N[j])
		}
		b = binary.AppendUvarint(b, f.Ops.Other)
		runs := f.Act.Runs()
		b = binary.AppendUvarint(b, uint64(len(runs)))
		for _, r := range runs {
			for _, v := range [...]uint64{uint64(r.Start), uint64(r.End - r.Start), r.Bytes, uint64(r.ECNCE), uint64(r.CNP)} {
				b = binary.AppendUvarint(b, v)
			}
		}
	}

	b = binary.AppendUvarint(b, uint64(len(w.CM)))
	for _, m := range w.CM {
		b = appendAddr(b, m.Src)
		b = appendAddr(b, m.Dst)
		b = binary.BigEndian.AppendUint16(b, m.AttrID)
		b = binary.BigEndian.AppendUint32(b, m.LocalCommID)
		b = binary.BigEndian.AppendUint32(b, m.RemoteCommID)
		b = binary.BigEndian.AppendUint32(b, m.LocalQPN)
	}
	b = w.appendPauses(b)
	b = w.appendRetrans(b)

	sketches := w.sketches()
	b = binary.AppendUvarint(b, uint64(len(sketches)))
	for _, s := range sketches {
		b = appendString(b, s.name)
		enc, err := s.append(nil)
		if err != nil {
			return b[:start], fmt.Errorf("metrics: encode %s sketch: %w", s.name, err)
		}
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli)), nil
}

// appendPauses appends the pause records of w.
func (w *Window) appendPauses(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(w.Pauses)))
	for i := range w.Pauses {
		p := &w.Pauses[i]
		b = append(append(b, p.MAC[:]...), p.Priority)
		b = binary.AppendUvarint(b, p.Frames)
		runs := p.RunList()
		b = binary.AppendUvarint(b, uint64(len(runs)))
		for _, r := range runs {
			b = binary.AppendVarint(b, r.Start)
			for _, v := range [...]uint64{uint64(r.End - r.Start), uint64(r.Paused), r.Frames} {
				b = binary.AppendUvarint(b, v)
			}
		}
	}
	return b
}

// Flags of a retransmission record in a state.
const (
	retransOngoing = 1 << iota
	retransMerged
)

// appendRetrans appends the retransmission records of w.
func (w *Window) appendRetrans(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(w.Retrans)))
	for i := range w.Retrans {
		r := &w.Retrans[i]
		b = r.Key.appendBinary(b)
		for _, t := range [...]int64{r.Trouble, r.First, r.Last} {
			b = binary.AppendVarint(b, t)
		}
		b = binary.AppendUvarint(b, uint64(r.FirstPSN))
		b = binary.AppendUvarint(b, uint64(r.Resent))
		var flags byte
		if r.Ongoing {
			flags |= retransOngoing
		}
		if r.Merged {
			flags |= retransMerged
		}
		b = append(b, byte(r.Cause), r.NAKCode, flags)
	}
	return b
}

// namedSketch is one sketch of a window, for encoding.
type namedSketch struct {
	name      string
	append    func([]byte) ([]byte, error)
	unmarshal func([]byte) error
	bytes     func() int // MemoryBytes
}

func (w *Window) sketches() []namedSketch {
	return []namedSketch{
		{"distinct", w.Distinct.AppendBinary, w.Distinct.UnmarshalBinary, w.Distinct.MemoryBytes},
		{"flow_bytes", w.FlowBytes.AppendBinary, w.FlowBytes.UnmarshalBinary, w.FlowBytes.MemoryBytes},
		{"flow_packets", w.FlowPackets.AppendBinary, w.FlowPackets.UnmarshalBinary, w.FlowPackets.MemoryBytes},
		{"top", func(b []byte) ([]byte, error) { return w.Top.AppendBinary(b, FlowKey.appendBinary) },
			func(d []byte) error { return w.Top.UnmarshalBinary(d, flowKeyLen, flowKeyFromBinary) }, w.Top.MemoryBytes},
		{"read_latency", w.ReadLatency.AppendBinary, w.ReadLatency.UnmarshalBinary, w.ReadLatency.MemoryBytes},
		{"ack_latency", w.AckLatency.AppendBinary, w.AckLatency.UnmarshalBinary, w.AckLatency.MemoryBytes},
	}
}

// StateHeaderLen is the length of a state's header: its magic and version.
const StateHeaderLen = len(stateMagic) + 1

// CheckStateHeader checks the magic and version that begin a state: of a
// state, or of its first StateHeaderLen bytes, so that a reader can refuse
// something that is not a state before reading all of it.
func CheckStateHeader(data []byte) error {
	n := min(len(data), len(stateMagic))
	if string(data[:n]) != stateMagic[:n] {
		return fmt.Errorf("%w (bad magic): %w", ErrNotState, ErrState)
	}
	if len(data) > len(stateMagic) {
		if v := data[len(stateMagic)]; v < oldestVersion || v > stateVersion {
			return fmt.Errorf("state version %d, this rocescope reads versions %d to %d: %w", v, oldestVersion, stateVersion, ErrState)
		}
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendAddr(b []byte, a decode.Addr) []byte {
	x := a.As16()
	return append(append(b, byte(a.Kind())), x[:]...)
}

// stateReader reads the fields of a state, remembering the first error.
type stateReader struct {
	b   []byte
	off int
	err error
}

func (r *stateReader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("byte %d: %w: %w", r.off, fmt.Errorf(format, a...), ErrState)
	}
}

func (r *stateReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail("need %d bytes, %d left", n, len(r.b)-r.off)
		return nil
	}
	x := r.b[r.off : r.off+n]
	r.off += n
	return x
}

func (r *stateReader) u8() uint8 {
	if x := r.bytes(1); x != nil {
		return x[0]
	}
	return 0
}

func (r *stateReader) u16() uint16 {
	if x := r.bytes(2); x != nil {
		return binary.BigEndian.Uint16(x)
	}
	return 0
}

func (r *stateReader) u32() uint32 {
	if x := r.bytes(4); x != nil {
		return binary.BigEndian.Uint32(x)
	}
	return 0
}

func (r *stateReader) u64() uint64 {
	if x := r.bytes(8); x != nil {
		return binary.BigEndian.Uint64(x)
	}
	return 0
}

func (r *stateReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.off += n
	return v
}

// count reads an element count and bounds it by the bytes left, each
// element taking at least min bytes, so that a damaged count cannot make
// the reader allocate.
func (r *stateReader) count(min int) int {
	v := r.uvarint()
	if r.err == nil && v > uint64((len(r.b)-r.off)/min) {
		r.fail("count %d exceeds the %d bytes left", v, len(r.b)-r.off)
		return 0
	}
	return int(v)
}

// varint reads a zig-zag signed varint, as binary.AppendVarint writes it.
func (r *stateReader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *stateReader) string() string { return string(r.bytes(r.count(1))) }

func (r *stateReader) addr() decode.Addr {
	kind := decode.AddrKind(r.u8())
	x := r.bytes(16)
	if x == nil {
		return decode.Addr{}
	}
	if kind > decode.AddrLID {
		r.fail("address kind %d", kind)
	}
	return addrFrom(kind, [16]byte(x))
}

// activity reads an activity profile of a window of slots burst slots.
func (r *stateReader) activity(a *Activity, slots uint64) {
	n := r.count(5)
	if n > ActivityRuns {
		r.fail("%d activity runs, at most %d", n, ActivityRuns)
		return
	}
	next := uint64(0) // the earliest slot the next run may start at
	for i := range n {
		start, length, bytes, ce, cnp := r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
		if r.err != nil {
			return
		}
		if start < next || length == 0 || start > slots || length > slots-start || ce > math.MaxUint16 || cnp > math.MaxUint16 {
			r.fail("activity run %d: slots %d+%d after slot %d of %d, marks %d, %d", i, start, length, next, slots, ce, cnp)
			return
		}
		a[i] = Run{Start: uint16(start), End: uint16(start + length), Bytes: bytes, ECNCE: uint16(ce), CNP: uint16(cnp)}
		next = start + length + 1 // runs that touch are one
	}
}

// pauses reads the pause records of a window.
func (r *stateReader) pauses(ps []PauseRecord) []PauseRecord {
	for i := range r.count(9) {
		var p PauseRecord
		copy(p.MAC[:], r.bytes(6))
		p.Priority = r.u8()
		p.Frames = r.uvarint()
		n := r.count(4)
		if r.err == nil && (p.Priority > 7 || n > PauseRuns || i > 0 && comparePause(&ps[len(ps)-1], &p) >= 0) {
			r.fail("pause record %d: priority %d, %d runs, or out of order", i, p.Priority, n)
		}
		for j := range n {
			from, span, paused, frames := r.varint(), r.uvarint(), r.uvarint(), r.uvarint()
			if r.err != nil {
				break
			}
			if span == 0 || span > math.MaxInt64 || from > math.MaxInt64-int64(span) || paused > span || j > 0 && from <= p.Runs[j-1].End {
				r.fail("pause run %d of record %d: %d+%d ns after the window start, paused %d", j, i, from, span, paused)
				break
			}
			p.Runs[j] = PauseRun{Start: from, End: from + int64(span), Paused: int64(paused), Frames: frames}
		}
		if r.err != nil {
			break
		}
		ps = append(ps, p)
	}
	return ps
}

// retrans reads the retransmission records of a window.
func (r *stateReader) retrans(rs []Retransmission) []Retransmission {
	for i := range r.count(flowKeyLen + 8) {
		var x Retransmission
		if kb := r.bytes(flowKeyLen); kb != nil {
			x.Key = flowKeyFromBinary(kb)
		}
		x.Trouble, x.First, x.Last = r.varint(), r.varint(), r.varint()
		psn, resent := r.uvarint(), r.uvarint()
		cause, code, flags := r.u8(), r.u8(), r.u8()
		if r.err != nil {
			break
		}
		if x.Key.Src.Kind() > decode.AddrLID || x.Key.Dst.Kind() > decode.AddrLID || psn > psnMask || resent == 0 ||
			resent > math.MaxUint32 || cause == 0 || cause >= byte(numCauses) || code > 31 || flags > retransOngoing|retransMerged {
			r.fail("retransmission %d: psn %d, resent %d, cause %d, code %d, flags %d", i, psn, resent, cause, code, flags)
			break
		}
		x.FirstPSN, x.Resent, x.Cause, x.NAKCode = uint32(psn), uint32(resent), Cause(cause), code
		x.Ongoing, x.Merged = flags&retransOngoing != 0, flags&retransMerged != 0
		rs = append(rs, x)
	}
	return rs
}

// UnmarshalBinary decodes a state written by [Window.AppendBinary] into w,
// which gets sketches of the state's configuration. It checks the magic,
// version and checksum before anything else, bounds every count by the
// bytes left, rejects unknown counters, unsorted or repeated hosts,
// sketches of another shape than the state declares and trailing bytes,
// and on any error returns one wrapping [ErrState] and leaves w unchanged.
// A state may declare sketches up to the sketch package's maxima (some
// 325 MiB); decode states from untrusted sources with UnmarshalReusing and
// a limit.
func (w *Window) UnmarshalBinary(data []byte) error { return w.decode(data, false, 0) }

// UnmarshalReusing is UnmarshalBinary decoding into the sketches and lists
// w already holds when they have the state's shape, instead of allocating
// new ones (megabytes per window); w is undefined after an error. A state
// whose sketches would take more than maxSketchBytes bytes (see
// [Config.SketchBytes]) is refused with [ErrStateSize] before they are
// allocated; 0 means no limit but the sketch package's maxima.
func (w *Window) UnmarshalReusing(data []byte, maxSketchBytes int64) error {
	return w.decode(data, true, maxSketchBytes)
}

// SketchBytes returns the memory the sketches of one window of c take,
// computed from their dimensions without allocating them: what decoding a
// state of this configuration allocates at least.
func (c *Config) SketchBytes() (int64, error) {
	d, err := c.WithDefaults()
	if err != nil {
		return 0, err
	}
	return d.sketchConfig().bytes(), nil
}

// bytes returns the memory of the sketches of a window shaped by c, as
// their MemoryBytes methods count it (TestSketchBytes holds the two
// together), in int64 so that any dimensions a state declares fit.
func (c sketchConfig) bytes() int64 {
	lc := int64(c.DistinctBits)
	if lc == 0 {
		lc = sketch.DefaultLinearCountingBits
	}
	distinct := lc/8 + 1<<sketch.DefaultHLLPrecision
	countMin := 8 * int64(c.CMDepth) * int64(c.CMWidth)
	// A top-k holds at least 4 entries per flow it reports, in a
	// power-of-two capacity; each entry is a hash, a count, an error and a
	// key.
	k := max(int64(c.TopKSize), 1)
	capacity := max(sketch.DefaultTopKCapacity, int64(1)<<bits.Len64(uint64(4*k-1)))
	topK := capacity * int64(3*8+unsafe.Sizeof(FlowKey{}))
	return distinct + 2*countMin + topK + 2*int64(latencySketchBytes)
}

// latencySketchBytes is the memory of a latency sketch, whose shape is
// fixed.
var latencySketchBytes = func() int {
	q, err := sketch.NewQuantile(sketch.QuantileConfig{})
	if err != nil {
		panic(fmt.Sprintf("metrics: default quantile sketch: %v", err))
	}
	return q.MemoryBytes()
}()

// decode is UnmarshalBinary. With reuse, it decodes into the sketches and
// lists w already holds when they have the state's shape, instead of
// allocating new ones (megabytes per window), and w is undefined after an
// error. Its errors name no package: they read after the context of the
// caller, which names the input ("state: FILE: state at offset N: ...").
func (w *Window) decode(data []byte, reuse bool, maxSketchBytes int64) error {
	if err := CheckStateHeader(data); err != nil {
		return err
	}
	if len(data) < StateHeaderLen+4 {
		return fmt.Errorf("%d bytes, too short for a state: %w", len(data), ErrState)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return fmt.Errorf("checksum %08x, want %08x: %w", got, sum, ErrState)
	}
	r := &stateReader{b: body, off: StateHeaderLen}
	var x Window
	if reuse {
		x.Hosts, x.Flows, x.CM, x.order = w.Hosts[:0], w.Flows[:0], w.CM[:0], w.order
		x.Pauses, x.Retrans = w.Pauses[:0], w.Retrans[:0]
	}
	x.Start = int64(r.u64())
	x.Length = int64(r.u64())
	if r.err == nil && (x.Length <= 0 || x.Start%x.Length != 0) {
		r.fail("window start %d is not a multiple of the length %d", x.Start, x.Length)
	}
	from, to := r.uvarint(), r.uvarint()
	if r.err == nil && (from > to || to > uint64(x.Length)) {
		r.fail("covered part %d-%d of a window of %d", from, to, x.Length)
	}
	x.From, x.To = x.Start+int64(from), x.Start+int64(to)
	version := body[len(stateMagic)]
	if version >= 3 {
		seg := r.uvarint()
		if r.err == nil && (seg == 0 && version == 3 || seg > math.MaxUint32) {
			r.fail("segment %d in a version %d state", seg, version)
		}
		x.Segment = uint32(seg)
	}
	for range r.count(1) {
		x.Hosts = append(x.Hosts, r.string())
	}
	for i := 1; i < len(x.Hosts); i++ {
		if x.Hosts[i-1] >= x.Hosts[i] {
			r.fail("hosts are not sorted and distinct")
			break
		}
	}
	x.sketchConfig.Seed = r.u64()
	for _, p := range []*int{&x.sketchConfig.DistinctBits, &x.sketchConfig.CMDepth, &x.sketchConfig.CMWidth, &x.sketchConfig.TopKSize} {
		if v := r.uvarint(); v > math.MaxInt32 {
			r.fail("sketch dimension %d", v)
		} else {
			*p = int(v)
		}
	}
	var slots uint64 // burst slots in the window
	if version >= 4 {
		// 0 for a window merged from states without activity profiles.
		x.Burst = int64(r.uvarint())
		if r.err == nil && x.Burst != 0 && (x.Burst < 0 || x.Length%x.Burst != 0 || x.Length/x.Burst > MaxSlots) {
			r.fail("burst interval %d ns in a window of %d ns", x.Burst, x.Length)
		}
		if r.err == nil && x.Burst > 0 {
			slots = uint64(x.Length / x.Burst)
		}
	}
	for range r.count(2) {
		name, v := r.string(), r.uvarint()
		i, ok := counterIndex[name]
		if !ok && r.err == nil {
			r.fail("unknown counter %q (state from a newer rocescope?)", name)
		}
		x.Counters[i] += v
	}
	names := make([]FlowCounter, r.count(1))
	for i := range names {
		name := r.string()
		c := slices.Index(flowCounterNames[:], name)
		if c < 0 && r.err == nil {
			r.fail("unknown flow counter %q (state from a newer rocescope?)", name)
		}
		names[i] = FlowCounter(max(c, 0))
	}
	nflows := r.count(flowKeyLen + 7)
	x.Flows = slices.Grow(x.Flows, nflows)
	for range nflows {
		var f FlowRecord
		if kb := r.bytes(flowKeyLen); kb != nil {
			f.Key = flowKeyFromBinary(kb)
			if f.Key.Src.Kind() > decode.AddrLID || f.Key.Dst.Kind() > decode.AddrLID {
				r.fail("flow address kind")
			}
		}
		f.SQP = r.u32()
		f.SQPKnown = r.u8()&1 != 0
		f.Sport = r.u16()
		for _, c := range names {
			f.C[c] = r.uvarint()
		}
		k := r.count(2)
		if k > maxFlowOps {
			r.fail("%d opcodes in a flow, at most %d", k, maxFlowOps)
			k = 0
		}
		for j := range k {
			op, n := r.u8(), r.uvarint()
			switch {
			case n == 0:
				r.fail("opcode with no packets")
			case slices.Contains(f.Ops.Op[:j], op):
				// Add would merge them; the encoder writes each once.
				r.fail("opcode %d twice in a flow", op)
			}
			f.Ops.Add(op, n) // in order, whatever the file's
		}
		f.Ops.Other = r.uvarint()
		if version >= 4 {
			r.activity(&f.Act, slots)
		}
		if r.err != nil {
			break
		}
		f.hash = f.Key.Hash(x.sketchConfig.Seed)
		x.Flows = append(x.Flows, f)
	}
	for range r.count(17 + 17 + 14) {
		x.CM = append(x.CM, CMMessage{Src: r.addr(), Dst: r.addr(), AttrID: r.u16(), LocalCommID: r.u32(), RemoteCommID: r.u32(), LocalQPN: r.u32()})
	}
	if version >= 4 {
		x.Pauses = r.pauses(x.Pauses)
		x.Retrans = r.retrans(x.Retrans)
	}
	if size := x.sketchConfig.bytes(); r.err == nil && maxSketchBytes > 0 && size > maxSketchBytes {
		r.fail("sketches of %d bytes (%d distinct bits, count-min %d×%d, top-k %d), the limit is %d: %w",
			size, x.sketchConfig.DistinctBits, x.sketchConfig.CMDepth, x.sketchConfig.CMWidth, x.sketchConfig.TopKSize, maxSketchBytes, ErrStateSize)
	}
	if r.err != nil {
		return r.err
	}
	if reuse && w.Distinct != nil && w.sketchConfig == x.sketchConfig {
		x.Distinct, x.FlowBytes, x.FlowPackets, x.Top, x.ReadLatency, x.AckLatency =
			w.Distinct, w.FlowBytes, w.FlowPackets, w.Top, w.ReadLatency, w.AckLatency
	} else {
		cfg := Config{Seed: x.sketchConfig.Seed, DistinctBits: x.sketchConfig.DistinctBits, CMDepth: x.sketchConfig.CMDepth,
			CMWidth: x.sketchConfig.CMWidth, TopKSize: x.sketchConfig.TopKSize}
		fresh, err := newWindow(&cfg)
		if err != nil {
			return fmt.Errorf("sketch configuration: %w: %w", err, ErrState)
		}
		x.Distinct, x.FlowBytes, x.FlowPackets, x.Top, x.ReadLatency, x.AckLatency =
			fresh.Distinct, fresh.FlowBytes, fresh.FlowPackets, fresh.Top, fresh.ReadLatency, fresh.AckLatency
	}
	want := x.sketches()
	if n := r.count(2); n != len(want) && r.err == nil {
		r.fail("%d sketches, want %d", n, len(want))
	}
	for _, s := range want {
		if name := r.string(); name != s.name && r.err == nil {
			r.fail("sketch %q where %q belongs", name, s.name)
		}
		enc := r.bytes(r.count(1))
		if r.err != nil {
			break
		}
		declared := s.bytes()
		if err := s.unmarshal(enc); err != nil {
			r.fail("%s: %v", s.name, err)
		} else if s.bytes() != declared {
			r.fail("%s: sketch of another shape than the configuration declares", s.name)
		}
	}
	// The latency sketches' shape is not part of the sketch
	// configuration: a state whose quantiles would not merge with the
	// engine's is refused here, so that Merge never fails half-way.
	for _, q := range []*sketch.Quantile{x.ReadLatency, x.AckLatency} {
		if probe, err := sketch.NewQuantile(sketch.QuantileConfig{}); r.err == nil && (err != nil || probe.Merge(q) != nil) {
			r.fail("latency sketch of another shape")
		}
	}
	if r.err == nil && r.off != len(body) {
		r.fail("%d trailing bytes", len(body)-r.off)
	}
	if r.err != nil {
		return r.err
	}
	*w = x
	return nil
}
