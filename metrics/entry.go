package metrics

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"
)

// Entry flags (hot.flags).
const (
	entSQPKnown uint8 = 1 << iota
	entPSNValid
	entGap     // a gap left PSNs [gapLo, gapHi) missing
	entNAKed   // the responder NAKed since the last gap: what follows is resent
	entEpisode // a retransmission episode is going on
	entTally   // the flow's record in window win's list (at cold.rec) holds counts: its tally
	entSlack   // the next request may skip cold.slack PSNs without a gap
	entLat     // the cold part holds latencies matched in window win (cold.latN)
)

// hotOps is how many opcodes the hot part of an entry counts apart: the
// requester of a mix of SENDs, WRITEs and READs with and without immediate
// data sends up to 13, and a fold costs a miss on the tally, so as many as
// the line has room for, with 8-bit counts.
const hotOps = 7

// hot is the part of a flow's table entry that a data packet or an ACK of
// the flow reads and writes: two cache lines, 128 bytes, at a 128-byte
// boundary, which the processors fetch together. Line 0 holds the key and
// what every frame counts, line 1 the PSN tracking, the last run of the
// activity profile, the opcode mix and the flow hash, which the flow's
// record takes when the window closes and an eviction finds the index
// slot by, without hashing the key again.
//
// Its counters are the flow's counts in window win since the last fold, in
// narrow fields: a fold adds them to the flow's tally, its record in the
// window's flow list, before the next frame could overflow one (at most
// every 255 frames of one opcode), and when the window closes they are
// added to that record, made then when the flow has no tally
// (materialize). What else a
// frame counts (marks, NAKs, PSN trouble, latencies) goes to the tally
// directly; the runs of burst slots go into the activity profile in the
// cold part when they overflow.
type hot struct {
	key     FlowKey
	win     int64  // window whose counts the entry holds, noWindow when it holds none
	bytes   uint32 // FlowBytes since the last fold
	payload uint32 // FlowPayloadBytes since the last fold
	packets uint16 // FlowPackets since the last fold
	msgs    uint16 // FlowMessages since the last fold
	acks    uint16 // FlowAcks since the last fold
	flags   uint8
	acts    uint8 // the state of the activity profile in window win (see addSlot)

	lastReq int64 // time of the last request frame
	// The last run of the flow's activity profile in window win, which
	// its frames extend while they come in time order (addSlot), and,
	// when the profile has ActivityRuns runs, the shortest gap between
	// them: a run that starts closer than that after cur joins it.
	cur     slotRun
	minGap  uint16
	epsn    uint32 // expected PSN of the next request
	peer    int32  // slab position of the reverse direction, -1 if unknown
	sqp     uint32
	pmtu    uint16 // path MTU learned from full-size packets, 0 if unknown
	pmtuMin uint16 // lower bound of the path MTU from ONLY packets, 0 if none
	sport   uint16
	ops     opCounts // opcodes since the last fold
	hash    uint64   // the flow hash of key (FlowKey.Hash), which the index files it by
}

// cold is the rest of a flow's table entry, 256 bytes, four lines: the
// runs of the activity profile in window win before hot's; what a new
// window and an eviction need, where the flow's tally is, the PSN gap and
// the retransmission episode; the kinds and PSNs of the requests waiting
// for their answers and the latencies matched in window win; the times of
// those requests. A frame touches it only for what is rare or for the
// pairing of requests and answers: a NAK, a PSN out of line, a request
// that waits for an answer, an answer, a new run of the activity profile,
// and the flow's first frame in a window.
type cold struct {
	act Activity // the runs of the activity profile in window win before hot.cur (see addSlot)

	lastWin   int64 // last window with a packet; freeEntry when the slab entry is free
	prevList  int64 // the flow list holding the record at prevRec (Window.list), 0 for none
	nakAt     int64 // time of a NAK or RNR NAK since the last episode, 0 for none
	epTrouble int64 // time of the trouble that caused the episode going on
	prevRec   int32 // position of the flow's record in flow list prevList
	rec       int32 // position of the flow's tally in window win's flow list, when entTally
	slack     uint32
	gapLo     uint32 // first PSN the last gap skipped
	gapHi     uint32 // PSN that ended the last gap
	epPSN     uint32 // first PSN sent again

	epAt     int32  // position of the flow's last record in window win's list, -1 for none
	epStall  uint32 // ns from the trouble to the first frame sent again (saturates at 2^32-1)
	epRecord bool   // the episode has its record at epAt in window win's list
	nakSyn   uint8  // AETH syndrome of the NAK at nakAt
	epCause  Cause
	epCode   uint8
	epN      uint8 // records of the flow in window win's list
	pendAt   uint8 // next pending slot to overwrite
	// Requests waiting for their answers, for latency at the mirror: the
	// kind and PSN of each (pendKey), and when it was sent.
	pendKey [pendSize]uint32
	// Latencies matched in window win on this flow as the requester: the
	// count and sum of READ (0) and ACK (1) latencies, beyond the tally's.
	latN   [2]uint32
	latSum [2]uint64
	pendT  [pendSize]int64
}

// pendLines adds the lines of the requests waiting for their answers to l.
func (c *cold) pendLines(l *lines) {
	l.add(unsafe.Pointer(&c.pendKey))
	l.add(unsafe.Pointer(&c.pendT))
}

// pendKey packs the kind and PSN of a request waiting for its answer.
func pendKey(kind uint8, psn uint32) uint32 { return uint32(kind)<<24 | psn }

// tallier gives the tally of a flow: its record in the flow list of the
// window its entry counts in (the shard; a test's record).
type tallier interface {
	tally(h *hot, c *cold) *FlowRecord
}

// Sizes of the two parts (TestEntryLayout checks them).
const (
	hotSize  = 128
	coldSize = 256
)

// slotRun is the last run of a flow's activity profile, or one on its way
// into it: Run in 12 bytes.
type slotRun struct {
	bytes               uint32
	start, end, ce, cnp uint16
}

// count counts a frame of the flow in window win, in burst slot slot, and
// its opcode: what every frame updates. t gives the tally when the narrow
// counters fold into it.
func (h *hot) count(t tallier, c *cold, ev *event, slot uint32) {
	if h.packets == math.MaxUint16 || h.bytes > math.MaxUint32-ev.wire || h.payload > math.MaxUint32-ev.payload {
		h.fold(t.tally(h, c))
	}
	h.bytes += ev.wire
	h.payload += ev.payload
	h.packets++
	h.addSlot(c, slot, ev)
	if !h.ops.add(uint8(ev.opcode)) {
		// An eighth opcode since the last fold, or a count that would
		// overflow.
		h.fold(t.tally(h, c))
		h.ops.add(uint8(ev.opcode))
	}
}

// opCounts counts packets per opcode for up to hotOps opcodes, in order of
// first sight, with 8-bit counts.
type opCounts struct {
	op [hotOps]uint8
	n  [hotOps]uint8 // packets of op[i]; 0 ends the list
}

// Masks of the low hotOps bytes of a word, one per opcode of opCounts: all
// their bits, and 0x01, 0x7f and 0x80 in each.
const (
	opBytes   = 1<<(8*hotOps) - 1
	byteOnes  = opBytes / 0xff
	byteLows  = byteOnes * 0x7f
	byteHighs = byteOnes * 0x80
)

// opCounts.add reads the opcodes and the counts a word each: it takes 4 to
// 7 of them (the constant overflows otherwise).
const _ = uint8(7-hotOps) + uint8(hotOps-4)

// add counts a packet of opcode op and reports true; false, with nothing
// counted, when op would need a slot beyond hotOps or its count would pass
// 255. It compares op with the opcodes at once, in a word: a scan, one
// byte after another, mispredicts its exit as the opcodes of a flow vary.
func (c *opCounts) add(op uint8) bool {
	b := (*[2 * hotOps]byte)(unsafe.Pointer(c))
	ops := binary.LittleEndian.Uint64(b[0:8]) & opBytes
	ns := binary.LittleEndian.Uint64(b[2*hotOps-8:]) >> (8 * (8 - hotOps))
	x := ops ^ uint64(op)*byteOnes
	equal := ^((x&byteLows + byteLows) | x | byteLows) & byteHighs // the high bit of each byte of x that is 0
	used := ((ns&byteLows + byteLows) | ns) & byteHighs            // of each count that is not
	if m := equal & used; m != 0 {
		i := bits.TrailingZeros64(m) >> 3
		if c.n[i] == math.MaxUint8 {
			return false
		}
		c.n[i]++
		return true
	}
	free := ^used & byteHighs // slots fill in order: the lowest is the next
	if free == 0 {
		return false
	}
	i := bits.TrailingZeros64(free) >> 3
	c.op[i], c.n[i] = op, 1
	return true
}

// The activity profile of an entry in window win has two modes. In the
// first, hot.acts is the number of its runs, 0 to ActivityRuns, the last
// of which is hot.cur and the others cold.act[:acts-1]; as frames come in
// time order, a frame from cur's first slot to the slot after its last
// extends cur, and so does one further on when the profile is full and
// the gap is shorter than minGap, its shortest: Activity.add would join a
// run there with cur. A frame only reads the cold part's runs when it
// starts a run of the profile. A frame before cur (out of time order), or
// one that would take cur past 4 GiB, hands the profile over to the
// second mode, actCold, for the rest of the window: the profile is in
// cold.act whole, and cur is a run of the flow's consecutive slots on its
// way into it, added when the next frame does not extend it (runs split
// at 4 GiB join again there). Both give the profile that adding the runs
// of consecutive slots one after the other gives (TestSlotRuns).
const actCold uint8 = 1 << 7

// extends reports whether a frame in slot s of wire bytes extends cur
// without a look at the cold part (addSlot).
func (h *hot) extends(s uint16, wire uint32) bool {
	r, n := &h.cur, h.acts
	switch {
	case n == 0 || r.bytes > math.MaxUint32-wire:
		return false
	case n&actCold != 0:
		return r.end-1 == s || r.end == s
	}
	return s >= r.start && (s <= r.end || n == ActivityRuns && s-r.end < h.minGap)
}

// coldRuns reports whether the profile has runs in the cold part: more
// than cur in the first mode, or any in the second.
func (h *hot) coldRuns() bool { return h.acts > 1 }

// addSlot counts a frame in slot into the flow's activity profile.
func (h *hot) addSlot(c *cold, slot uint32, ev *event) {
	s := uint16(slot)
	var ce, cnp uint16
	if ev.flags&evCE != 0 {
		ce = 1
	}
	if ev.flags&evCNP != 0 {
		cnp = 1
	}
	r := &h.cur
	if h.extends(s, ev.wire) {
		r.end, r.bytes = max(r.end, s+1), r.bytes+ev.wire
		r.ce, r.cnp = satAdd16(r.ce, ce), satAdd16(r.cnp, cnp)
		return
	}
	h.newRun(c, s, ev.wire)
	// Field by field: a composite literal is staged on the stack, and the
	// copy's load of ce and cnp waits for their two stores.
	r.bytes, r.start, r.end, r.ce, r.cnp = ev.wire, s, s+1, ce, cnp
}

// newRun makes room in the profile for a frame in slot s of wire bytes
// that cur cannot take, which starts a new cur.
func (h *hot) newRun(c *cold, s uint16, wire uint32) {
	r := &h.cur
	switch n := h.acts; {
	case n == 0:
		h.acts = 1
	case n&actCold != 0:
		c.act.add(r.run())
	case s < r.start || r.bytes > math.MaxUint32-wire:
		c.act[n-1] = r.run()
		h.acts = actCold
	case n < ActivityRuns:
		c.act[n-1] = r.run()
		if h.acts++; h.acts == ActivityRuns {
			h.minGap = c.act.minGap(s)
		}
	default:
		// Full, and the gap after cur is not shorter than the
		// shortest: add joins the closest runs, and the new one is
		// the last.
		c.act[n-1] = r.run()
		c.act.add(Run{Start: s, End: s + 1})
		h.minGap = c.act.minGap(s)
	}
}

// takeActivity moves the flow's activity profile into a, which holds
// none, and empties the entry's.
func (h *hot) takeActivity(c *cold, a *Activity) {
	switch n := h.acts; {
	case n&actCold != 0:
		c.act.add(h.cur.run())
		*a, c.act = c.act, Activity{}
	case h.coldRuns():
		*a, c.act = c.act, Activity{}
		a[n-1] = h.cur.run()
	case n == 1:
		a[0] = h.cur.run()
	}
	h.acts = 0
}

// run returns r as a Run.
func (r *slotRun) run() Run {
	return Run{Start: r.start, End: r.end, Bytes: uint64(r.bytes), ECNCE: r.ce, CNP: r.cnp}
}

// fold adds the counts h holds since the last fold to the counters and
// the opcode mix of f, and zeroes them.
func (h *hot) fold(f *FlowRecord) {
	c, ops := &f.C, &f.Ops
	c[FlowBytes] += uint64(h.bytes)
	c[FlowPayloadBytes] += uint64(h.payload)
	c[FlowPackets] += uint64(h.packets)
	c[FlowMessages] += uint64(h.msgs)
	c[FlowAcks] += uint64(h.acks)
	for i, n := range h.ops.n {
		if n == 0 {
			break
		}
		ops.Add(h.ops.op[i], uint64(n))
	}
	h.bytes, h.payload, h.packets, h.msgs, h.acks = 0, 0, 0, 0, 0
	h.ops.n = [hotOps]uint8{}
}

// record completes f, the flow's record of window win (its tally, or a
// new one holding the key alone), with the counts the entry holds since
// the last fold and its activity, and empties the entry's.
func (h *hot) record(c *cold, f *FlowRecord) {
	h.takeActivity(c, &f.Act)
	if h.flags&entLat != 0 {
		c.foldLatency(&f.C)
	}
	h.flags &^= entTally | entLat
	h.fold(f)
	h.stamp(f)
}

// Kinds of matched latency, indexes of cold.latN and cold.latSum.
const (
	latRead = iota // READ request → first response
	latAck         // AckReq request → ACK
)

// latCounters are the flow counters of each kind of latency: its count and
// its sum.
var latCounters = [2][2]FlowCounter{
	latRead: {FlowReadLatencyCount, FlowReadLatencySum},
	latAck:  {FlowAckLatencyCount, FlowAckLatencySum},
}

// foldLatency adds the latencies the entry holds to the counters c and
// zeroes them.
func (c *cold) foldLatency(to *[numFlowCounters]uint64) {
	for k, fc := range latCounters {
		to[fc[0]] += uint64(c.latN[k])
		to[fc[1]] += c.latSum[k]
	}
	c.latN, c.latSum = [2]uint32{}, [2]uint64{}
}

// stamp sets what a flow record takes from the entry rather than from its
// frames: the source QP, the UDP source port and the flow hash.
func (h *hot) stamp(f *FlowRecord) {
	f.SQP, f.SQPKnown, f.Sport, f.hash = h.sqp, h.flags&entSQPKnown != 0, h.sport, h.hash
}
