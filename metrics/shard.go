package metrics

import (
	"math"
	"math/bits"

	"github.com/rocescope/rocescope/decode"
)

// event is what the reader stage hands a worker for one RoCE frame: the
// decoded facts the per-flow state needs, without the frame (96 bytes).
type event struct {
	key     FlowKey
	hash    uint64 // flow hash
	time    int64  // capture time, ns
	win     int64  // window index (start / length), already adjusted for lateness
	wire    uint32 // on-wire length
	payload uint32 // RDMA payload length
	psn     uint32
	dmaLen  uint32 // RETH DMA length of a READ request
	sqp     uint32 // DETH source QP when evSQP
	slot    uint32 // burst slot of time in window win
	sport   uint16 // UDP source port, 0 for RoCEv1 and IB
	flags   uint16
	opcode  decode.Opcode
	aeth    uint8 // AETH syndrome when evNAK or evRNR
}

// Event flags, computed once by the reader stage.
const (
	evCE           uint16 = 1 << iota // IP ECN = CE
	evFECN                            // BTH FECN
	evBECN                            // BTH BECN
	evAckReq                          // BTH AckReq
	evRequest                         // request opcode: consumes a PSN
	evReadReq                         // RDMA READ request
	evReadRespHead                    // READ response First or Only: answers a READ request
	evAck                             // AETH ACK
	evNAK                             // AETH NAK
	evRNR                             // AETH RNR NAK
	evCNP                             // congestion notification packet
	evEndsMessage                     // LAST or ONLY opcode
	evSQP                             // sqp holds the DETH source QP
	evFullMTU                         // First or Middle packet: payload is exactly the path MTU
	evReadResp                        // any READ response
	evOnly                            // ONLY opcode: the payload is at most the path MTU
)

const (
	psnMask  = 1<<24 - 1
	psnHalf  = 1 << 23
	minPMTU  = 256  // smallest InfiniBand path MTU
	maxPMTU  = 4096 // largest InfiniBand path MTU
	pendSize = 8    // outstanding requests remembered per flow for latency
)

// Pending request kinds.
const (
	pendNone uint8 = iota
	pendRead
	pendAck
)

// pending is a request waiting for its answer, for latency at the mirror.
type pending struct {
	t    int64
	psn  uint32
	kind uint8
}

// Entry flags.
const (
	entSQPKnown uint8 = 1 << iota
	entPSNValid
	entGap        // a gap left PSNs [gapLo, gapHi) missing
	entNAKed      // the responder NAKed since the last gap: what follows is resent
	entEpisode    // a retransmission episode is going on
	entEpRecorded // the episode has its record at epAt in window win's list
)

// entry is the state of one flow in a worker's QP table: the flow's
// counters in the window it last sent in, and what persists across windows
// (PSN tracking, pairing, pending requests). The counters live here, not in
// a record per flow and window, so that a frame touches one place; they are
// copied into the window's flow list once, when the flow moves on to a newer
// window or the window closes.
//
// An entry is 640 bytes, a multiple of the cache line, and the slab is
// page-aligned, so each field sits at a known line. A frame touches three
// pairs of lines, 128 bytes each, which the processors fetch together:
// lines 0-1 (hash, key; the activity profile rec.Act, touched when the
// flow's burst slot changes), 2-3 (opcode mix; bytes, payload, packets)
// and 6-7 (the slot accumulator, PSN tracking, pairing, the path MTU), and
// handleBatch fetches them ahead. Lines 4-5 hold the rarer counters, line
// 7 also what only a new window, PSN gaps and retransmissions touch; lines
// 8-9 are for latency.
type entry struct {
	hash uint64
	win  int64      // window whose counters rec holds, noWindow when it holds none
	rec  FlowRecord // counters in window win; rec.Key is the flow's key
	_    [16]byte

	// The burst slot accumulator: the slot of window win the flow sends
	// in now, rec's bytes when the slot began (mod 2^32, so a slot holds
	// less than 4 GiB: the burst interval is at most 10ms), and its CE
	// marks and CNPs (saturating). When the flow moves on to another slot
	// the slot joins the last of up to two runs kept here, or starts a
	// new one; the runs go into rec.Act (on another line) two at a time,
	// or when the window closes, so that a flow that sends now and then
	// touches the profile on every other run.
	slot      uint16 // the slot + 1; 0 for none
	slotCE    uint16
	slotCNP   uint16
	nruns     uint8 // runs in runs
	_         uint8
	slotBytes uint32 // FlowBytes
	runs      [2]slotRun

	epsn    uint32 // expected PSN of the next request
	slack   uint32 // PSNs the next request may skip without a gap
	peer    int32  // slab position of the reverse direction, -1 if unknown
	flags   uint8
	pendAt  uint8 // next pending slot to overwrite
	sport   uint16
	pmtu    uint16 // path MTU learned from full-size packets, 0 if unknown
	pmtuMin uint16 // lower bound of the path MTU from ONLY packets, 0 if none
	lastReq int64  // time of the last request frame

	lastWin int64 // last window with a packet; freeEntry when the slab entry is free
	prevWin int64 // window of the record at prevRec, noWindow for none
	prevRec int32 // position of the flow's record in window prevWin's flow list
	sqp     uint32
	gapLo   uint32 // first PSN the last gap skipped
	gapHi   uint32 // PSN that ended the last gap

	// Retransmission episodes (Retransmission): the NAK the next one is
	// caused by, and the one going on.
	nakAt     int64 // time of a NAK or RNR NAK since the last episode, 0 for none
	epTrouble int64
	epPSN     uint32 // first PSN sent again
	epAt      int32  // position of the flow's last record in window win's list, -1 for none
	epStall   uint32 // ns from the trouble to the first frame sent again (saturates at 2^32-1)
	nakSyn    uint8  // AETH syndrome of the NAK at nakAt
	epCause   Cause
	epCode    uint8
	epN       uint8 // records of the flow in window win's list

	pend [pendSize]pending
}

// entrySize is the size of an entry (TestEntryLayout checks it).
const entrySize = 640

func (e *entry) init(key FlowKey, h uint64) {
	*e = entry{hash: h, win: noWindow, lastWin: noWindow, prevWin: noWindow, peer: -1, epAt: -1}
	e.rec.Key = key
}

// shard is one worker's state: its slice of the QP table and its part of
// the open windows. Exactly one goroutine uses a shard.
type shard struct {
	cfg    *Config
	tab    *table
	conns  map[connKey]int32 // (src, dst, sport) → first flow seen with them, for pairing directions
	open   ring[*Window]     // the open windows
	late   []*Window         // late parts of windows the ring closed, for a lagging reader (lateWindow)
	high   int64             // newest window index opened
	active [2][]int32        // slab positions of the flows whose counters are in the open window of each parity
	warm   uint64            // sink of handleBatch's prefetching loads, so they are not optimized away
	home   [batchSize]uint32 // scratch of handleBatch: the home slot's entry of each event
	pool   *windowPool       // where open windows come from
	closed []*Window         // windows closed since the last drain
	flows  int               // flows of the last window closed: what a new one is made room for
}

// connKey finds the reverse direction of a RoCEv2 connection.
type connKey struct {
	src, dst decode.Addr
	sport    uint16
}

func newShard(cfg *Config, capacity int, pool *windowPool) *shard {
	return &shard{
		cfg:   cfg,
		tab:   newTable(capacity),
		conns: make(map[connKey]int32),
		high:  noWindow,
		pool:  pool,
	}
}

// reset makes s as new for another run, keeping its memory.
func (s *shard) reset() {
	s.tab.reset()
	clear(s.conns)
	s.open = ring[*Window]{}
	clear(s.late)
	s.late = s.late[:0]
	s.high = noWindow
	s.active[0], s.active[1] = s.active[0][:0], s.active[1][:0]
	s.closed = s.closed[:0]
}

// window returns the open window for index w, opening it (and closing the
// windows too old to stay open beside it when w is new) when it is the
// newest or the one before. With one reader the reader's close marks keep
// at most two windows open and this only opens; with several readers it is
// what bounds the ring to two windows, and a frame of a reader that lags
// the others by more than a window counts in a late part of its window
// (lateWindow): every figure of a frame is in the window its reader
// counted it in.
func (s *shard) window(w int64) *Window {
	if w > s.high {
		s.closeThrough(w - 2)
		s.high = w
		return s.openWindow(w)
	}
	if win := s.open.get(w); win != nil {
		return win
	}
	if s.open.free(w) && w == s.high-1 {
		// The window before the newest, which had no frame here yet: the
		// readers have not closed it (their events come before their
		// marks), so it opens, as in the reader.
		return s.openWindow(w)
	}
	return s.lateWindow(w)
}

// lateWindow returns the late part of window w, which the ring closed
// already for the frames of faster readers, opening it if need be. The
// collector has not emitted w: it waits for the lagging reader's mark,
// which follows the reader's frames of w, and for this shard's, which
// follows the late part. It merges the part into w as one that may hold
// the flows of the first part again. Late parts close with the ring
// (closeThrough); their flows count in their flow lists directly, never
// in the table's entries, whose counters are those of a ring window.
func (s *shard) lateWindow(w int64) *Window {
	for _, win := range s.late {
		if win.Index() == w {
			return win
		}
	}
	win := s.pool.get(w)
	win.late = true
	s.late = append(s.late, win)
	return win
}

// openWindow opens window w in the slot of its parity, with room for as many
// flows as the last window had, at once instead of by doubling: a
// million-flow window is 300 MB of records.
func (s *shard) openWindow(w int64) *Window {
	win := s.pool.get(w)
	win.Flows = growFlows(win.Flows, s.flows)
	s.open.put(win)
	return win
}

// closeThrough closes every open window with index ≤ w, oldest first,
// after the late parts with index ≤ w.
func (s *shard) closeThrough(w int64) {
	late := s.late[:0]
	for _, win := range s.late {
		if win.Index() > w {
			late = append(late, win)
			continue
		}
		s.flush(-1, win)
	}
	clear(s.late[len(late):])
	s.late = late
	for {
		win := s.open.oldest()
		if win == nil || win.Index() > w {
			return
		}
		s.flush(win.Index()&1, win)
		s.open.remove(win)
	}
}

// flush copies into the window of parity p the counters of the flows still
// counting in it, feeds every flow record of the window to its sketches,
// and hands win over. A late part (p < 0) has every record in its list.
func (s *shard) flush(p int64, win *Window) {
	w := win.Index()
	if p >= 0 {
		for _, idx := range s.active[p] {
			if e := s.tab.at(idx); e.win == w {
				s.materialize(e, win)
			}
		}
		s.active[p] = s.active[p][:0]
	}
	for i := range win.Flows {
		f := &win.Flows[i]
		win.Distinct.Insert(f.hash)
		win.FlowBytes.Add(f.hash, f.C[FlowBytes])
		win.FlowPackets.Add(f.hash, f.C[FlowPackets])
	}
	s.flows = len(win.Flows)
	if 8*s.tab.used > 7*s.tab.max {
		win.Counters[Evictions] += uint64(s.sweep(w))
	}
	s.closed = append(s.closed, win)
}

// drain returns the windows closed since the last drain, oldest first, for
// the collector. The slice is valid until the next call that closes a
// window.
func (s *shard) drain() []*Window {
	w := s.closed
	s.closed = s.closed[:0]
	return w
}

// materialize appends the counters e holds to the flow list of win, the
// open window they belong to, and empties e's current window: it folds the
// burst slot e accumulates into the flow's activity profile, and marks the
// record of a retransmission episode still going on.
func (s *shard) materialize(e *entry, win *Window) {
	e.endSlot()
	e.flushRuns()
	e.endEpisode(win)
	e.epAt, e.epN = -1, 0
	e.prevWin, e.prevRec = e.win, int32(len(win.Flows))
	e.win = noWindow
	e.stamp(addFlow(win, &e.rec))
}

// slotRun is a run of consecutive burst slots of a flow on its way into
// its activity profile: Run in 12 bytes.
type slotRun struct {
	bytes               uint32
	start, end, ce, cnp uint16
}

// startSlot ends the burst slot e accumulates, if any, and starts slot
// (of window e.win) with rec's bytes before the frame that is in it.
func (e *entry) startSlot(slot uint32) {
	e.endSlot()
	e.slot, e.slotBytes, e.slotCE, e.slotCNP = uint16(slot+1), uint32(e.rec.C[FlowBytes]), 0, 0
}

// endSlot ends the burst slot e accumulates: it joins the last run when it
// follows it (and the run's bytes stay below 4 GiB), else it starts a run,
// after the runs went into the activity profile when there were two.
func (e *entry) endSlot() {
	if e.slot == 0 {
		return
	}
	s := slotRun{bytes: uint32(e.rec.C[FlowBytes]) - e.slotBytes, start: e.slot - 1, end: e.slot, ce: e.slotCE, cnp: e.slotCNP}
	e.slot = 0
	if n := e.nruns; n > 0 {
		if last := &e.runs[n-1]; last.end == s.start && last.bytes <= math.MaxUint32-s.bytes {
			last.end, last.bytes = s.end, last.bytes+s.bytes
			last.ce, last.cnp = satAdd16(last.ce, s.ce), satAdd16(last.cnp, s.cnp)
			return
		}
		if int(n) == len(e.runs) {
			e.flushRuns()
		}
	}
	e.runs[e.nruns] = s
	e.nruns++
}

// flushRuns moves the runs e keeps into the activity profile.
func (e *entry) flushRuns() {
	for _, r := range e.runs[:e.nruns] {
		e.rec.Act.add(Run{Start: r.start, End: r.end, Bytes: uint64(r.bytes), ECNCE: r.ce, CNP: r.cnp})
	}
	e.nruns = 0
}

// addFlow appends a copy of r to the flow list of win and returns it. The
// list grows by doubling (growFlows).
func addFlow(win *Window, r *FlowRecord) *FlowRecord {
	if len(win.Flows) == cap(win.Flows) {
		win.Flows = growFlows(win.Flows, max(len(win.Flows), 64))
	}
	win.Flows = append(win.Flows, *r)
	return &win.Flows[len(win.Flows)-1]
}

// growFlows returns flows with room for n more records. Where append and
// slices.Grow clear the room they add, so that every page of it is touched
// (on this VM a fresh page costs 14 µs on first touch), a large make of
// fresh memory touches nothing: only the records copied and those appended
// later touch pages.
func growFlows(flows []FlowRecord, n int) []FlowRecord {
	if cap(flows)-len(flows) >= n {
		return flows
	}
	grown := make([]FlowRecord, len(flows), len(flows)+n)
	copy(grown, flows)
	return grown
}

// stamp sets what a flow record takes from the entry rather than from its
// frames: the source QP, the UDP source port and the flow hash.
func (e *entry) stamp(f *FlowRecord) {
	f.SQP, f.SQPKnown, f.Sport, f.hash = e.sqp, e.flags&entSQPKnown != 0, e.sport, e.hash
}

// sweep evicts every flow that sent nothing in window w or later, and
// returns how many it evicted. It runs when window w closes with the table
// nearly full, so that new flows find room.
func (s *shard) sweep(oldest int64) int {
	n := 0
	for i := range int32(s.tab.n) {
		if e := s.tab.at(i); e.lastWin != freeEntry && e.lastWin < oldest {
			s.evict(i)
			n++
		}
	}
	return n
}

// handleBatch accounts a batch of RoCE frames. It first reads the home
// table slot of every event, then the entry each names, then the activity
// profile of those that may need it: passes of loads that do not depend on
// each other within the pass and so miss the cache in parallel, then
// handles the events in order with their entries in the cache.
func (s *shard) handleBatch(evs []event) {
	t := s.tab
	home := s.home[:len(evs)]
	for i := range evs {
		home[i] = t.slots[evs[i].hash&t.mask].idx
	}
	var sum uint64
	for _, idx := range home {
		if idx != 0 {
			e := t.at(int32(idx - 1))
			// Lines 0, 3 and 6, and 2 beside 3.
			sum += e.hash + e.rec.C[FlowPackets] + uint64(e.epsn)
		}
	}
	// Line 1, the activity profile, of the flows whose next burst slot
	// may move their runs into it.
	for _, idx := range home {
		if idx != 0 {
			if e := t.at(int32(idx - 1)); e.nruns == uint8(len(e.runs)) {
				sum += e.rec.Act[0].Bytes
			}
		}
	}
	s.warm += sum
	for i := range evs {
		s.handle(&evs[i])
	}
}

// handle accounts one RoCE frame.
func (s *shard) handle(ev *event) {
	win := s.window(ev.win)
	idx := s.tab.lookup(&ev.key, ev.hash)
	if idx < 0 {
		if idx = s.admit(ev); idx < 0 {
			s.untracked(win, ev)
			return
		}
	}
	e := s.tab.at(idx)
	r := s.counters(idx, e, win)
	if r == &e.rec {
		if uint32(e.slot) != ev.slot+1 {
			e.startSlot(s.slotIn(win, ev))
		}
	} else {
		r.Act.add(frameRun(s.slotIn(win, ev), ev))
	}
	r.C[FlowBytes] += uint64(ev.wire)
	r.C[FlowPayloadBytes] += uint64(ev.payload)
	r.C[FlowPackets]++
	r.Ops.Add(uint8(ev.opcode), 1)
	f := ev.flags
	if f&(evCE|evFECN|evBECN|evEndsMessage|evAck|evNAK|evRNR|evCNP) != 0 {
		countFlags(r, f)
		if f&(evCE|evCNP) != 0 && r == &e.rec {
			e.slotCE = satAdd16(e.slotCE, f&evCE)
			e.slotCNP = satAdd16(e.slotCNP, f&evCNP/evCNP)
		}
	}
	if f&evSQP != 0 {
		e.sqp, e.flags = ev.sqp, e.flags|entSQPKnown
	}
	if f&(evNAK|evRNR) != 0 && e.peer >= 0 {
		// The NAK asks the requester, on the reverse direction, to
		// send again: the cause of its next retransmission episode.
		req := s.tab.at(e.peer)
		req.flags |= entNAKed
		req.nakAt, req.nakSyn = ev.time, ev.aeth
	}
	if f&(evFullMTU|evOnly) != 0 {
		s.learnMTU(e, ev)
	}
	if f&evRequest != 0 {
		s.trackPSN(e, r, win, ev)
		e.lastReq = ev.time
	}
	if f&(evReadRespHead|evAck) != 0 && e.peer >= 0 {
		s.matchLatency(e, win, ev)
	}
}

// slotIn returns the burst slot of ev in win, the window it counts in: its
// own slot, or for a frame counted in another window than its own (late),
// the first or last slot of win.
func (s *shard) slotIn(win *Window, ev *event) uint32 {
	switch w := win.Index(); {
	case ev.win == w:
		return ev.slot
	case ev.win < w:
		return 0
	}
	return uint32(win.Length/win.Burst - 1)
}

// frameRun returns the run of one frame in slot.
func frameRun(slot uint32, ev *event) Run {
	r := Run{Start: uint16(slot), End: uint16(slot + 1), Bytes: uint64(ev.wire)}
	if ev.flags&evCE != 0 {
		r.ECNCE = 1
	}
	if ev.flags&evCNP != 0 {
		r.CNP = 1
	}
	return r
}

// countFlags counts the rarer per-frame facts.
func countFlags(r *FlowRecord, f uint16) {
	for _, x := range [...]struct {
		flag uint16
		c    FlowCounter
	}{
		{evCE, FlowECNCE}, {evFECN, FlowFECN}, {evBECN, FlowBECN}, {evEndsMessage, FlowMessages},
		{evAck, FlowAcks}, {evNAK, FlowNAKs}, {evRNR, FlowRNRNAKs}, {evCNP, FlowCNPCarried},
	} {
		if f&x.flag != 0 {
			r.C[x.c]++
		}
	}
}

// counters returns where the frame of entry e (at slab position idx) in the
// open window win counts: e's own counters when they are win's, else e's
// record in win's flow list (a late frame of a flow that moved on), which
// is made when the flow has none there yet; in a late part, always the
// record. A flow's first frame in a newer window moves the counters of its
// previous window into that window's flow list first. The pointer is valid
// until the next call.
func (s *shard) counters(idx int32, e *entry, win *Window) *FlowRecord {
	w := win.Index()
	switch {
	case e.win == w:
		return &e.rec
	case e.win < w && !win.late:
		if e.win != noWindow {
			s.materialize(e, s.open.get(e.win))
		}
		e.rec = FlowRecord{Key: e.rec.Key}
		e.win, e.slot, e.nruns = w, 0, 0
		e.lastWin = max(e.lastWin, w)
		s.active[w&1] = append(s.active[w&1], idx)
		return &e.rec
	}
	if e.prevWin != w {
		e.prevWin, e.prevRec = w, int32(len(win.Flows))
		e.stamp(addFlow(win, &FlowRecord{Key: e.rec.Key}))
	}
	return &win.Flows[e.prevRec]
}

// record returns the counters of entry idx in window win when the flow sent
// a frame there, or nil.
func (s *shard) record(idx int32, win *Window) *FlowRecord {
	e := s.tab.at(idx)
	switch w := win.Index(); w {
	case e.win:
		return &e.rec
	case e.prevWin:
		return &win.Flows[e.prevRec]
	}
	return nil
}

// admit adds the flow of ev to the table, evicting an idle flow when the
// table is full, and pairs it with its reverse direction. It returns -1 when
// the flow cannot be held.
func (s *shard) admit(ev *event) int32 {
	if s.tab.full() {
		win := s.open.oldest() // one is open whenever a frame is handled
		v := s.tab.victim(win.Index())
		if v < 0 {
			return -1
		}
		s.evict(v)
		win.Counters[Evictions]++
	}
	idx := s.tab.insert(&ev.key, ev.hash)
	e := s.tab.at(idx)
	e.sport = ev.sport
	if ev.sport == 0 {
		return idx
	}
	ck := connKey{src: ev.key.Src, dst: ev.key.Dst, sport: ev.sport}
	if _, ok := s.conns[ck]; !ok {
		s.conns[ck] = idx
	}
	if j, ok := s.conns[connKey{src: ev.key.Dst, dst: ev.key.Src, sport: ev.sport}]; ok {
		if r := s.tab.at(j); r.peer < 0 {
			e.peer, r.peer = j, idx
			e.sqp, r.sqp = r.rec.Key.DQP, e.rec.Key.DQP
			e.flags |= entSQPKnown
			r.flags |= entSQPKnown
		}
	}
	return idx
}

// evict removes the idle entry at v.
func (s *shard) evict(v int32) {
	e := s.tab.at(v)
	if e.peer >= 0 {
		s.tab.at(e.peer).peer = -1
	}
	ck := connKey{src: e.rec.Key.Src, dst: e.rec.Key.Dst, sport: e.sport}
	if j, ok := s.conns[ck]; ok && j == v {
		delete(s.conns, ck)
	}
	s.tab.remove(v)
}

// untracked accounts a frame of a flow the table cannot hold: only the
// sketches see it.
func (s *shard) untracked(win *Window, ev *event) {
	win.Counters[UntrackedPackets]++
	win.Distinct.Insert(ev.hash)
	win.FlowBytes.Add(ev.hash, uint64(ev.wire))
	win.FlowPackets.Add(ev.hash, 1)
	win.Top.Update(ev.hash, ev.key, uint64(ev.wire))
}

// learnMTU records what a packet tells about the path MTU, on the flow
// itself for requests and on the requester's flow for READ responses: a
// full-size First or Middle packet shows it exactly, an ONLY packet bounds
// it from below (the path MTU is a power of two from 256 to 4096).
func (s *shard) learnMTU(e *entry, ev *event) {
	req := e
	switch {
	case ev.flags&evRequest != 0:
	case ev.flags&evReadResp != 0 && e.peer >= 0:
		req = s.tab.at(e.peer)
	default:
		return
	}
	if ev.flags&evFullMTU != 0 {
		req.pmtu = uint16(ev.payload) // at most 4096 in a valid trace, under 2^16 in any frame
		return
	}
	if lo := min(maxPMTU, uint32(1)<<bits.Len32(max(ev.payload, minPMTU)-1)); lo > uint32(req.pmtuMin) {
		req.pmtuMin = uint16(lo)
	}
}

// trackPSN follows the request PSNs of a flow (24-bit arithmetic): a PSN
// ahead of the expected one is a gap; one behind it is out of order when it
// is one the last gap skipped and the responder has not NAKed since, else a
// retransmission.
func (s *shard) trackPSN(e *entry, r *FlowRecord, win *Window, ev *event) {
	if e.flags&entPSNValid != 0 {
		d := (ev.psn - e.epsn) & psnMask
		switch {
		case d == 0:
		case d < psnHalf:
			if d > e.slack {
				r.C[FlowPSNGaps]++
				win.Counters[PSNGaps]++
				e.gapLo, e.gapHi = e.epsn, ev.psn
				e.flags = e.flags&^entNAKed | entGap
			}
		default:
			// Behind the expected PSN: a PSN the last gap skipped that
			// comes before the responder complained arrives out of
			// order; anything else is sent again.
			if e.flags&(entGap|entNAKed) == entGap && (ev.psn-e.gapLo)&psnMask < (e.gapHi-e.gapLo)&psnMask {
				r.C[FlowOutOfOrder]++
				win.Counters[OutOfOrder]++
				if ev.psn == e.gapLo {
					e.gapLo = (e.gapLo + 1) & psnMask
				}
				return
			}
			r.C[FlowRetransmits]++
			win.Counters[Retransmits]++
			s.resent(e, win, ev)
			if ev.flags&(evReadReq|evAckReq) != 0 {
				e.await(win, ev, true)
			}
			return
		}
	}
	if e.flags&entEpisode != 0 {
		// A new PSN ends the episode.
		e.flags &^= entEpisode
		if e.win != noWindow {
			e.endEpisode(s.open.get(e.win))
		}
	}
	e.flags |= entPSNValid
	n, slack := uint32(1), uint32(0)
	if ev.flags&evReadReq != 0 {
		// A READ request consumes one PSN per response packet: exactly
		// known with the path MTU, else between the counts the largest
		// MTU and the smallest possible one give.
		packets := func(mtu uint32) uint32 { return max(1, (ev.dmaLen+mtu-1)/mtu) }
		if e.pmtu >= minPMTU {
			n = packets(uint32(e.pmtu))
		} else {
			n = packets(maxPMTU)
			slack = packets(max(minPMTU, uint32(e.pmtuMin))) - n
		}
	}
	e.epsn, e.slack = (ev.psn+n)&psnMask, slack
	if ev.flags&(evReadReq|evAckReq) != 0 {
		e.await(win, ev, false)
	}
}

// await remembers request ev as waiting for its answer. A request sent
// again (resent) is waited for from this, its latest transmission: it
// replaces the earlier transmission's wait when that is still remembered,
// so that an answer to the resend is not timed from a lost first copy.
func (e *entry) await(win *Window, ev *event, resent bool) {
	kind := pendAck
	if ev.flags&evReadReq != 0 {
		kind = pendRead
	}
	if resent {
		for i := range e.pend {
			if p := &e.pend[i]; p.kind == kind && p.psn == ev.psn {
				p.t = ev.time
				return
			}
		}
	}
	p := &e.pend[e.pendAt]
	if p.kind == pendRead {
		win.Counters[ReadLatencyUnmatched]++
	}
	*p = pending{t: ev.time, psn: ev.psn, kind: kind}
	e.pendAt = (e.pendAt + 1) % pendSize
}

// resent accounts a request frame of e sent again: the first of an episode
// takes its cause from the NAK or RNR NAK the responder sent since the last
// episode, else it is a timeout, stalled since the flow's last request. The
// frame counts in the episode's record in win's list, which it makes when
// the episode has none there yet; a flow has at most maxEpisodes records
// in a window, and later episodes count into its last one. A late frame
// (win is not the flow's current window) counts in the retransmits only.
func (s *shard) resent(e *entry, win *Window, ev *event) {
	if e.flags&entEpisode == 0 {
		e.flags = e.flags&^entEpRecorded | entEpisode
		e.epTrouble, e.epCause, e.epCode = e.lastReq, CauseTimeout, 0
		if e.nakAt != 0 {
			e.epTrouble, e.epCause, e.epCode = e.nakAt, CauseNAK, e.nakSyn&31
			if e.nakSyn>>5 == 1 {
				e.epCause = CauseRNR
			}
		}
		e.nakAt = 0
		e.epPSN = ev.psn
		e.epStall = uint32(min(max(ev.time-e.epTrouble, 0), math.MaxUint32))
	}
	if e.win != win.Index() || e.flags&entEpRecorded != 0 {
		return
	}
	// The record's Resent holds the flow's retransmits before the
	// episode's first frame in the window until endEpisode, so that a
	// frame touches nothing but the entry.
	e.flags |= entEpRecorded
	base := uint32(e.rec.C[FlowRetransmits]) - 1
	if e.epN < maxEpisodes {
		e.epAt, e.epN = int32(len(win.Retrans)), e.epN+1
		trouble := e.epTrouble - win.Start
		win.Retrans = append(win.Retrans, Retransmission{Key: e.rec.Key, Trouble: trouble,
			First: trouble + int64(e.epStall), FirstPSN: e.epPSN, Cause: e.epCause, NAKCode: e.epCode, Resent: base})
		return
	}
	rec := &win.Retrans[e.epAt]
	rec.Merged, rec.Resent = true, base-rec.Resent
}

// endEpisode completes the record of the flow's retransmission episode in
// win, the flow's current window, if it has one there: its frames resent,
// and its last, the flow's last request.
func (e *entry) endEpisode(win *Window) {
	if e.flags&entEpRecorded == 0 {
		return
	}
	e.flags &^= entEpRecorded
	rec := &win.Retrans[e.epAt]
	rec.Resent = uint32(e.rec.C[FlowRetransmits]) - rec.Resent
	rec.Last = e.lastReq - win.Start
	rec.Ongoing = e.flags&entEpisode != 0
}

// matchLatency pairs a READ response head or an ACK on e with the pending
// requests of its peer, and records the latency on the requester's flow.
func (s *shard) matchLatency(e *entry, win *Window, ev *event) {
	req := s.tab.at(e.peer)
	for i := range req.pend {
		p := &req.pend[i]
		var c FlowCounter
		switch {
		case p.kind == pendRead && ev.flags&evReadRespHead != 0 && p.psn == ev.psn:
			c = FlowReadLatencyCount
		case p.kind == pendAck && ev.flags&evAck != 0 && (ev.psn-p.psn)&psnMask < psnHalf:
			c = FlowAckLatencyCount
		default:
			continue
		}
		lat := ev.time - p.t
		p.kind = pendNone
		if lat < 0 {
			continue
		}
		// The window's quantiles count every match; the requester's
		// flow counts it when it sent in this window too, so that a
		// flow with no frame in a window is never part of it.
		sum := FlowAckLatencySum
		if c == FlowReadLatencyCount {
			sum = FlowReadLatencySum
			win.ReadLatency.Add(float64(lat))
		} else {
			win.AckLatency.Add(float64(lat))
		}
		if r := s.record(e.peer, win); r != nil {
			r.C[c]++
			r.C[sum] += uint64(lat)
		}
	}
}
