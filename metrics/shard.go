package metrics

import (
	"math"
	"math/bits"
	"unsafe"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/mapped"
	"github.com/rocescope/rocescope/internal/scratch"
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
	slot    uint32 // burst slot of time in window win, clamped to it (reader.slot): the slot the frame counts in
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

// shard is one worker's state: its slice of the QP table and its part of
// the open windows. Exactly one goroutine uses a shard.
type shard struct {
	cfg    *Config
	tab    *table
	open   ring[*Window]            // the open windows
	late   []*Window                // late parts of windows the ring closed, for a lagging reader (lateWindow)
	high   int64                    // newest window index opened
	active [2]*scratch.Array[int32] // slab positions of the flows whose counters are in the open window of each parity
	lines  lines                    // scratch of handleChunk and flush: the lines to prefetch
	ahead  [handleChunk]uint32      // scratch of handleChunk: the entry each event's lookup will compare first (table.probe)
	pairs  [handleChunk]connHashes  // scratch of handleChunk: the connection hashes of the events whose ahead is 0
	pool   *windowPool              // where open windows come from
	closed []*Window                // windows closed since the last drain
	flows  int                      // flows of the last window closed: what a new one is made room for
	lists  int64                    // flow lists numbered so far (newList)
	order  flowOrder                // scratch of the sort of a closing window's flow list
	spare  *Window                  // never handed over: sortList writes a closing window's list into its list
}

func newShard(cfg *Config, capacity int, pool *windowPool) *shard {
	return &shard{
		cfg:    cfg,
		tab:    newTable(capacity),
		high:   noWindow,
		pool:   pool,
		lines:  make(lines, 0, 6*handleChunk), // what handleChunk's third pass may ask for at most
		active: [2]*scratch.Array[int32]{scratch.NewArray[int32](), scratch.NewArray[int32]()},
		spare:  new(Window),
	}
}

// reset makes s as new for another run, keeping its memory.
func (s *shard) reset() {
	s.tab.reset()
	s.open = ring[*Window]{}
	clear(s.late)
	s.late = s.late[:0]
	s.high = noWindow
	s.active[0].Resize(0)
	s.active[1].Resize(0)
	s.closed = s.closed[:0]
}

// release returns the memory only s uses to the kernel, its table and its
// spare list, once its last window went to the collector; a reset maps
// them anew.
func (s *shard) release() {
	s.tab.release()
	s.spare.releaseFlows()
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
	win := s.newList(w)
	win.late = true
	s.late = append(s.late, win)
	return win
}

// openWindow opens window w in the slot of its parity, with room for a
// quarter more flows than the last window had, or than the table holds
// when no window closed yet, at once instead of by doubling: a
// million-flow window is 350 MB of records, and a window with a few more
// flows than the last would otherwise copy them all, or grow through
// sizes below a huge page, whose pages fault 4 KiB at a time. Room not
// used costs no memory (see growFlows).
func (s *shard) openWindow(w int64) *Window {
	win := s.newList(w)
	if prev := s.open.get(w - 1); prev != nil {
		prev.swapFlowMem(win)
	}
	n := s.flows
	if n == 0 {
		n = s.tab.used
	}
	growFlows(win, n+n/4)
	s.open.put(win)
	return win
}

// newList returns an empty window for index w whose flow list has a number
// of its own (Window.list): an entry names the list that holds its flow's
// last record by it, which tells a ring window from a late part of the
// same index, and from an earlier late part.
func (s *shard) newList(w int64) *Window {
	win := s.pool.get(w)
	s.lists++
	win.list = s.lists
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
		s.flush(-1, win, false)
	}
	clear(s.late[len(late):])
	s.late = late
	for {
		win := s.open.oldest()
		if win == nil || win.Index() > w {
			return
		}
		s.flush(win.Index()&1, win, w == allWindows && win.Index() == s.high)
		s.open.remove(win)
	}
}

// flush copies into the window of parity p the counters of the flows still
// counting in it, puts its flow list in canonical order and hands win over
// (the collector feeds the host's list to the flow sketches: countFlows).
// A late part (p < 0) has every record in its list. The last window of a
// run (last) counts the idle flows a nearly full table would evict without
// evicting them, one index removal each: the table is reset before it
// serves again.
func (s *shard) flush(p int64, win *Window, last bool) {
	w := win.Index()
	// Sorted here, on the worker, a window's lists from several shards
	// merge in one pass on the collector.
	if p >= 0 {
		// Most of a window's records are made as it closes, and sortList
		// writes them in order; where most of its flows moved on before,
		// their records are listed already, and sorting the list moves
		// fewer records than sortList would copy.
		if act := s.active[p].Slice(); 2*len(win.Flows) <= len(act) {
			s.sortList(act, win)
		} else {
			s.materializeAll(act, win)
			win.Flows = s.order.normalize(win.Flows)
		}
		s.active[p].Resize(0)
	} else {
		win.Flows = s.order.normalize(win.Flows)
	}
	s.flows = len(win.Flows)
	if 8*s.tab.used > 7*s.tab.max {
		if last {
			win.Counters[Evictions] += uint64(s.tab.idle(w))
		} else {
			win.Counters[Evictions] += uint64(s.sweep(w))
		}
	}
	s.closed = append(s.closed, win)
}

// materializeAll appends to the flow list of win the counts of the flows
// still counting in it, the entries at act whose window is win's, in the
// memory of a free list written more (windowPool.lendFlowMem).
func (s *shard) materializeAll(act []int32, win *Window) {
	s.pool.lendFlowMem(win)
	for len(act) > 0 {
		n := min(len(act), flushAhead)
		s.entriesAhead(act[:n])
		s.recordsAhead(act[:n], win)
		for _, idx := range act[:n] {
			if h := &s.tab.hot[idx]; h.win == win.Index() {
				s.materialize(h, &s.tab.cold[idx], win)
			}
		}
		act = act[n:]
	}
}

// sortList completes the flow list of win, closing, with the counts of the
// flows still counting in it, the entries at act whose window is win's,
// and puts it in canonical order, writing each record once. The entries
// with a tally complete it in place; the records listed (those tallies,
// and the records of flows that moved on) and the entries that have none
// are sorted by flow hash as 16-byte items; then the records are written
// in that order into the shard's spare list, a listed one copied and an
// entry's made from its counts, and the spare and win's list swap. Making
// every entry's record at the end of the list and sorting the list then
// (materializeAll, normalize) moved each 352-byte record a second time, at
// random: 3 % more of the replay's CPU with 100 k and 1 M connections on
// the KVM VM.
func (s *shard) sortList(act []int32, win *Window) {
	w := win.Index()
	t, o := s.tab, &s.order
	items := o.items(len(act) + len(win.Flows))
	s.hotAhead(act[:min(len(act), flushAhead)])
	for len(act) > 0 {
		n := min(len(act), flushAhead)
		s.hotAhead(act[n:min(len(act), 2*flushAhead)])
		for _, idx := range act[:n] {
			h := &t.hot[idx]
			switch {
			case h.win != w: // it moved on: its record is listed
			case h.flags&entTally != 0:
				s.materialize(h, &t.cold[idx], win)
			default:
				h.win = noWindow
				items = append(items, sortItem{h.hash, entryItem | uint32(idx)})
			}
		}
		act = act[n:]
	}
	// The list is written into the memory in which the most records have
	// been written: the spare's, a free list's, or win's own, whose
	// records move into the spare's first.
	spare := s.spare
	s.pool.lendFlowMem(spare)
	if win.flowsWritten() > spare.flowsWritten() {
		roomFlows(spare, len(win.Flows))
		win.moveFlows(spare)
	}
	listed := win.Flows
	for i := range listed {
		items = append(items, sortItem{listed[i].hash, uint32(i)})
	}
	items = o.radix(items, o.b.Resize(len(items)))
	repeated := false
	for i := 1; i < len(items) && !repeated; i++ {
		repeated = items[i].hash == items[i-1].hash
	}
	roomFlows(spare, len(items))
	out := spare.Flows[:len(items)]
	group := func(i int) []sortItem { return items[min(len(items), i):min(len(items), i+flushAhead)] }
	s.itemsAhead(group(0), listed)
	s.itemsAhead(group(flushAhead), listed)
	s.coldAhead(group(0))
	for i := 0; i < len(items); i += flushAhead {
		s.itemsAhead(group(i+2*flushAhead), listed)
		s.coldAhead(group(i + flushAhead))
		for k, it := range group(i) {
			f := &out[i+k]
			if it.pos&entryItem == 0 {
				*f = listed[it.pos]
				continue
			}
			// An entry without a tally had no retransmission episode
			// in the window (resent makes the tally), and its list is
			// closing: no late frame will look for its record there.
			// Only its hot part, its runs and its latencies are read.
			idx := it.pos &^ entryItem
			h := &t.hot[idx]
			*f = FlowRecord{}
			f.Key = h.key
			h.record(&t.cold[idx], f)
		}
	}
	spare.Flows = out
	win.takeFlows(spare)
	if repeated {
		// Two flows with one hash, whose order the keys decide, or a
		// flow listed twice: what sort is for.
		win.Flows = o.normalize(win.Flows)
	}
}

// entryItem marks a sort item of sortList that stands for the entry at a
// slab position, not for a listed record.
const entryItem = 1 << 31

// flushAhead is how many entries or records flush asks for at a time:
// enough for their misses to overlap, few enough that the processor keeps
// track of all the lines asked for (four of an entry and six of a record
// each; see handleChunk): with 8, a 1 M-connection replay took 2.4 % less
// CPU than with 32 on the KVM VM (when materializeAll made every record).
const flushAhead = 8

// entriesAhead prefetches the lines of the entries at idxs that materialize
// reads: both hot lines, the cold line of the window bookkeeping and the
// one of the matched latencies.
func (s *shard) entriesAhead(idxs []int32) {
	t, l := s.tab, &s.lines
	for _, idx := range idxs {
		h, c := &t.hot[idx], &t.cold[idx]
		l.hot(h)
		l.add(unsafe.Pointer(&c.lastWin))
		l.add(unsafe.Pointer(&c.latN))
	}
	l.fetch()
}

// recordsAhead prefetches the records materialize will write for the
// entries at idxs that count in win, an entry's tally, when it has one,
// else the room at the end of win's flow list where its record goes, and
// the runs of their activity profiles in the cold part.
func (s *shard) recordsAhead(idxs []int32, win *Window) {
	t, l := s.tab, &s.lines
	w, n, room := win.Index(), len(win.Flows), win.Flows[:cap(win.Flows)]
	for _, idx := range idxs {
		h := &t.hot[idx]
		if h.win == w && h.coldRuns() {
			l.add(unsafe.Pointer(&t.cold[idx].act))
		}
		switch {
		case h.win != w:
		case h.flags&entTally != 0:
			l.span(unsafe.Pointer(&win.Flows[t.cold[idx].rec]), unsafe.Sizeof(FlowRecord{}))
		case n < len(room):
			l.span(unsafe.Pointer(&room[n]), unsafe.Sizeof(FlowRecord{}))
			n++
		}
	}
	l.fetch()
}

// hotAhead prefetches the hot lines of the entries at idxs.
func (s *shard) hotAhead(idxs []int32) {
	t, l := s.tab, &s.lines
	for _, idx := range idxs {
		l.hot(&t.hot[idx])
	}
	l.fetch()
}

// itemsAhead prefetches what sortList reads for items, two groups ahead: a
// listed record's lines, or an entry's hot lines.
func (s *shard) itemsAhead(items []sortItem, listed []FlowRecord) {
	t, l := s.tab, &s.lines
	for _, it := range items {
		if it.pos&entryItem == 0 {
			l.span(unsafe.Pointer(&listed[it.pos]), unsafe.Sizeof(FlowRecord{}))
			continue
		}
		l.hot(&t.hot[it.pos&^entryItem])
	}
	l.fetch()
}

// coldAhead prefetches the cold lines that the entries among items have
// counts of their window in, a group ahead: the runs of their activity
// profiles and their matched latencies. Their hot parts, which tell, were
// asked for a group before (reading them right after asking waited on
// every one).
func (s *shard) coldAhead(items []sortItem) {
	t, l := s.tab, &s.lines
	for _, it := range items {
		if it.pos&entryItem == 0 {
			continue
		}
		h, c := &t.hot[it.pos&^entryItem], &t.cold[it.pos&^entryItem]
		if h.coldRuns() {
			l.add(unsafe.Pointer(&c.act))
		}
		if h.flags&entLat != 0 {
			l.add(unsafe.Pointer(&c.latN))
		}
	}
	l.fetch()
}

// drain returns the windows closed since the last drain, oldest first, for
// the collector. The slice is valid until the next call that closes a
// window.
func (s *shard) drain() []*Window {
	w := s.closed
	s.closed = s.closed[:0]
	return w
}

// materialize appends the counts the entry (h, c) holds to the flow list of
// win, the open window they belong to, and empties the entry's current
// window; it marks the record of a retransmission episode still going on.
func (s *shard) materialize(h *hot, c *cold, win *Window) {
	f := s.tally(h, c)
	if c.epRecord {
		s.endEpisode(h, c, win, f)
	}
	c.epAt, c.epN = -1, 0
	c.prevList, c.prevRec = win.list, c.rec
	h.win = noWindow
	h.record(c, f)
}

// tally returns the flow's record in the flow list of the open window
// its entry (h, c) counts in, making it when the flow has none yet: the
// entry's counts go there when the narrow ones fold, and what is rare
// counts there directly. The pointer is valid until the list next grows.
func (s *shard) tally(h *hot, c *cold) *FlowRecord {
	win := s.open.get(h.win)
	if h.flags&entTally == 0 {
		h.flags |= entTally
		c.rec = int32(len(win.Flows))
		return newFlow(win, &h.key)
	}
	return &win.Flows[c.rec]
}

// newFlow appends a record of the flow with key to the flow list of win
// and returns it, to be filled. The list grows by doubling (growFlows).
func newFlow(win *Window, key *FlowKey) *FlowRecord {
	n := len(win.Flows)
	if n == cap(win.Flows) {
		growFlows(win, max(n, 1024))
	}
	win.Flows = win.Flows[:n+1]
	f := &win.Flows[n]
	// Zeroed, then the key: *f = FlowRecord{Key: *key} stages the
	// record on the stack and copies it.
	*f = FlowRecord{}
	f.Key = *key
	return f
}

// growFlows gives the flow list of win room for n more records: a shard's
// list as it fills, or a merge's. The list lives in a region of its own
// that grows in place or moves with mremap, so that growing copies no
// record and touches no page, and first touches cost a fault per 2 MiB
// where huge pages are on; a list that is not in the window's region (it
// came from elsewhere: a state, a merge) moves into a new one. The region
// is freed with the window.
func growFlows(win *Window, n int) {
	flows := win.Flows
	if cap(flows)-len(flows) >= n {
		return
	}
	win.Flows = mapped.Grow(&win.flowRegion().mem, flows, len(flows)+n)[:len(flows)]
}

// roomFlows is growFlows for a caller about to write the n records after
// the list's in order: it also commits their pages that no record was
// written in before (Window.commitFlows).
func roomFlows(win *Window, n int) {
	growFlows(win, n)
	win.commitFlows(len(win.Flows) + n)
}

// sweep evicts every flow that sent nothing in window w or later, and
// returns how many it evicted. It runs when window w closes with the table
// nearly full, so that new flows find room.
func (s *shard) sweep(oldest int64) int {
	var idle [sweepAhead]int32
	n, k := 0, 0
	for i := range int32(s.tab.n) {
		if s.tab.idleBefore(i, oldest) {
			idle[k] = i
			if k++; k == len(idle) {
				s.evictAll(idle[:])
				n, k = n+k, 0
			}
		}
	}
	s.evictAll(idle[:k])
	return n + k
}

// sweepAhead is how many idle entries sweep evicts at a time, asking for
// the lines they need together first.
const sweepAhead = 32

// evictAll evicts the idle entries at idxs, at most sweepAhead. It first
// asks for what evict reads at random: each entry's slot in the index and
// in the connection index, and its peer's line, so that those misses
// overlap; the hashes that find the slots serve evict too.
func (s *shard) evictAll(idxs []int32) {
	t, l := s.tab, &s.lines
	var hs [sweepAhead]entryHashes
	for k, v := range idxs {
		hs[k] = t.hashesOf(v)
		l.add(unsafe.Pointer(&t.slots[t.home(hs[k].flow)]))
		h := &t.hot[v]
		if h.sport != 0 {
			l.add(unsafe.Pointer(&t.conns.slots[t.conns.home(hs[k].conn)]))
		}
		if h.peer >= 0 {
			l.add(unsafe.Pointer(&t.hot[h.peer].peer))
		}
	}
	l.fetch()
	for k, v := range idxs {
		s.evict(v, hs[k])
	}
}

// handleBatch accounts a batch of RoCE frames, handleChunk events at a time.
// streamed says that a reader on another goroutine streamed the events into
// memory (poolOutput.event): each chunk then asks for the next one's lines
// ahead.
func (s *shard) handleBatch(evs []event, streamed bool) {
	for len(evs) > 0 {
		n := min(len(evs), handleChunk)
		var next []event
		if streamed {
			next = evs[n:min(len(evs), 2*handleChunk)]
		}
		s.handleChunk(evs[:n], next)
		evs = evs[n:]
	}
}

// handleChunk is how many events handleBatch prefetches for at a time:
// enough for the misses of a pass to overlap, few enough that the
// prefetches of a pass (two lines an event for the hot parts) find the
// processor's miss buffers free. Passes over a whole batch of 1024 read
// the events back from the second level and found some of the lines
// gone; passes of 128 still left the loads after them waiting on lines
// asked for long before (perf, on the KVM VM: the load of the slot and of
// the hot part's run count took half of the passes' samples, also with
// the passes a whole chunk ahead of the handling), and random reads of a
// 64 MiB array there cost 7.7 ns each prefetched 32 at a time, 10.4 ns
// 128 at a time, 8.0 ns not prefetched at all. That was with prefetches
// into the first level; into the second (prefetch), passes of 48 took
// 0.2-2.8 % less CPU than passes of 32 at 100 k and 1 M connections, 64 and
// 96 no less than 48, and stages a chunk apart (the cold lines of the
// next chunk, the hot lines of the one after, the slots of the third,
// asked for while handling a chunk) no less than passes.
const handleChunk = 48

// handleChunk accounts RoCE frames. It first prefetches the home index
// slot of every event, then the hot lines of the entry whose tag matches
// there or after it (table.probe), or for a flow the table does not hold
// the connection index slots admit reads, then the cold lines the frame
// will touch: the activity profile's runs when the frame starts one, the
// window bookkeeping (and the profile, when it has runs there) when it is
// the flow's first frame in a window, the requests waiting for answers
// when it waits for one or answers the peer's; for a new flow, the entry
// of the reverse direction admit pairs it with. Each pass asks for lines
// that do not depend on each other, so that their misses overlap; then it
// handles the events in order with their entries in the cache, comparing
// first the entry the second pass found. Before that it asks for the lines
// of next, the events of the chunk after, when there are any: events a
// reader streamed are in memory, where the processor's own stream
// prefetcher finds each 4 KiB page anew (with two workers, the first
// pass's load of each event's hash held a quarter of handleChunk's samples,
// against 2 % with one; asked for with the other passes' lines, they
// delayed those).
func (s *shard) handleChunk(evs, next []event) {
	t := s.tab
	l := &s.lines
	for i := range evs {
		l.add(unsafe.Pointer(&t.slots[t.home(evs[i].hash)]))
	}
	l.fetch()
	ahead := s.ahead[:len(evs)]
	for i := range evs {
		// The entry the lookup will compare, not the home slot's: a
		// flow displaced by a collision is loaded ahead too.
		idx := t.probe(evs[i].hash)
		ahead[i] = idx
		switch {
		case idx != 0:
			l.hot(&t.hot[idx-1])
		case evs[i].sport != 0:
			// A new flow: admit pairs it.
			s.pairs[i] = newConnHashes(&evs[i].key, evs[i].sport)
			t.connLines(&s.pairs[i], l)
		}
	}
	l.fetch()
	for i, idx := range ahead {
		ev := &evs[i]
		if idx == 0 {
			if ev.sport != 0 {
				// A new flow: admit reads the reverse direction's
				// entry when it pairs them.
				if j := t.conns.probe(s.pairs[i].rev); j != 0 {
					l.hot(&t.hot[j-1])
				}
			}
			continue
		}
		h, c := &t.hot[idx-1], &t.cold[idx-1]
		switch {
		case h.win != ev.win:
			l.add(unsafe.Pointer(&c.lastWin)) // the window changes: materialize
			if h.coldRuns() {
				l.add(unsafe.Pointer(&c.act))
			}
		case h.acts != 0 && !h.extends(uint16(ev.slot), ev.wire):
			l.add(unsafe.Pointer(&c.act)) // a new run of the profile
		}
		if ev.flags&(evReadReq|evAckReq) != 0 {
			c.pendLines(l) // await
		}
		if ev.flags&(evReadRespHead|evAck) != 0 && h.peer >= 0 {
			t.cold[h.peer].pendLines(l) // matchLatency
		}
	}
	l.fetch()
	if len(next) > 0 {
		l.span(unsafe.Pointer(&next[0]), uintptr(len(next))*unsafe.Sizeof(event{}))
		l.fetch()
	}
	for i := range evs {
		s.handle(&evs[i], ahead[i], &s.pairs[i])
	}
}

// handle accounts one RoCE frame. hint is table.probe's answer for it, 0
// for none: the entry to compare first.
func (s *shard) handle(ev *event, hint uint32, p *connHashes) {
	win := s.window(ev.win)
	t := s.tab
	idx := t.lookupAt(hint, &ev.key, ev.hash)
	if idx < 0 {
		if hint != 0 && ev.sport != 0 {
			*p = newConnHashes(&ev.key, ev.sport) // handleChunk expected the flow
		}
		if idx = s.admit(ev, p); idx < 0 {
			s.untracked(win, ev)
			return
		}
	}
	h, c := &t.hot[idx], &t.cold[idx]
	late := s.counters(idx, h, c, win, ev.win)
	f := ev.flags
	if late == nil {
		h.count(s, c, ev, ev.slot)
		if f&evEndsMessage != 0 {
			h.msgs++
		}
		if f&evAck != 0 {
			h.acks++
		}
		if f&(evCE|evFECN|evBECN|evNAK|evRNR|evCNP) != 0 {
			countFlags(&s.tally(h, c).C, f&^(evEndsMessage|evAck))
		}
	} else {
		late.Act.add(frameRun(ev.slot, ev))
		late.C[FlowBytes] += uint64(ev.wire)
		late.C[FlowPayloadBytes] += uint64(ev.payload)
		late.C[FlowPackets]++
		late.Ops.Add(uint8(ev.opcode), 1)
		countFlags(&late.C, f)
	}
	if f&evSQP != 0 {
		h.sqp, h.flags = ev.sqp, h.flags|entSQPKnown
	}
	if f&(evNAK|evRNR) != 0 && h.peer >= 0 {
		// The NAK asks the requester, on the reverse direction, to
		// send again: the cause of its next retransmission episode.
		t.hot[h.peer].flags |= entNAKed
		req := &t.cold[h.peer]
		req.nakAt, req.nakSyn = ev.time, ev.aeth
	}
	if f&(evFullMTU|evOnly) != 0 {
		s.learnMTU(h, ev)
	}
	if f&evRequest != 0 {
		s.trackPSN(h, c, late, win, ev)
		h.lastReq = ev.time
	}
	if f&(evReadRespHead|evAck) != 0 && h.peer >= 0 {
		s.matchLatency(h, win, ev)
	}
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

// countFlags counts the rarer per-frame facts into the counters c.
func countFlags(c *[numFlowCounters]uint64, f uint16) {
	for _, x := range [...]struct {
		flag uint16
		c    FlowCounter
	}{
		{evCE, FlowECNCE}, {evFECN, FlowFECN}, {evBECN, FlowBECN}, {evEndsMessage, FlowMessages},
		{evAck, FlowAcks}, {evNAK, FlowNAKs}, {evRNR, FlowRNRNAKs}, {evCNP, FlowCNPCarried},
	} {
		if f&x.flag != 0 {
			c[x.c]++
		}
	}
}

// counters returns nil when the frame of the entry (h, c) at slab position
// idx counts in the entry itself, its counts being those of the open window
// win, whose index is w (the event's: no division per frame);
// else (a late frame of a flow that moved on) the flow's record in win's
// flow list, which is made when the flow has none there yet; in a late
// part, always the record. A flow's first
// frame in a newer window moves the counts of its previous window into that
// window's flow list first. The pointer is valid until the next call.
func (s *shard) counters(idx int32, h *hot, c *cold, win *Window, w int64) *FlowRecord {
	switch {
	case h.win == w:
		return nil
	case h.win < w && !win.late:
		if h.win != noWindow {
			s.materialize(h, c, s.open.get(h.win))
		}
		h.win = w // the profile is empty: materialize took it, or the entry is new
		c.lastWin = max(c.lastWin, w)
		s.active[w&1].Append(idx)
		return nil
	}
	if c.prevList != win.list {
		c.prevList, c.prevRec = win.list, int32(len(win.Flows))
		h.stamp(newFlow(win, &h.key))
	}
	return &win.Flows[c.prevRec]
}

// latency counts a latency of kind (latRead or latAck) matched in window
// win, whose index is w, on the flow at slab position idx, the requester,
// when the flow sent a frame there: in its entry when it counts in win,
// else in its record.
func (s *shard) latency(idx int32, win *Window, w int64, kind int, lat uint64) {
	h, c := &s.tab.hot[idx], &s.tab.cold[idx]
	switch {
	case w == h.win:
		if c.latN[kind] == math.MaxUint32 {
			c.foldLatency(&s.tally(h, c).C)
		}
		c.latN[kind]++
		c.latSum[kind] += lat
		h.flags |= entLat
	case c.prevList == win.list:
		r := &win.Flows[c.prevRec].C
		r[latCounters[kind][0]]++
		r[latCounters[kind][1]] += lat
	}
}

// admit adds the flow of ev to the table, evicting an idle flow when the
// table is full, and pairs it with its reverse direction. It returns -1 when
// the flow cannot be held.
func (s *shard) admit(ev *event, p *connHashes) int32 {
	t := s.tab
	if t.full() {
		win := s.open.oldest() // one is open whenever a frame is handled
		v := t.victim(win.Index())
		if v < 0 {
			return -1
		}
		s.evict(v, t.hashesOf(v))
		win.Counters[Evictions]++
	}
	idx := t.insert(&ev.key, ev.hash)
	h := &t.hot[idx]
	h.sport = ev.sport
	if ev.sport == 0 {
		return idx
	}
	t.addConn(idx, p.own)
	if j := t.connHashed(&ev.key.Dst, &ev.key.Src, ev.sport, p.rev); j >= 0 {
		if r := &t.hot[j]; r.peer < 0 {
			h.peer, r.peer = j, idx
			h.sqp, r.sqp = r.key.DQP, h.key.DQP
			h.flags |= entSQPKnown
			r.flags |= entSQPKnown
		}
	}
	return idx
}

// evict removes the idle entry at v, whose hashes are hs.
func (s *shard) evict(v int32, hs entryHashes) {
	t := s.tab
	if h := &t.hot[v]; h.peer >= 0 {
		t.hot[h.peer].peer = -1
	}
	t.removeConn(v, hs.conn)
	t.remove(v, hs.flow)
}

// untracked accounts a frame of a flow the table cannot hold: only the
// sketches see it.
func (s *shard) untracked(win *Window, ev *event) {
	win.Counters[UntrackedPackets]++
	s.pool.sketches(win)
	win.Distinct.Insert(ev.hash)
	win.FlowBytes.Add(ev.hash, uint64(ev.wire))
	win.FlowPackets.Add(ev.hash, 1)
	win.Top.UpdateRef(ev.hash, &ev.key, uint64(ev.wire))
}

// learnMTU records what a packet tells about the path MTU, on the flow
// itself for requests and on the requester's flow for READ responses: a
// full-size First or Middle packet shows it exactly, an ONLY packet bounds
// it from below (the path MTU is a power of two from 256 to 4096).
func (s *shard) learnMTU(h *hot, ev *event) {
	req := h
	switch {
	case ev.flags&evRequest != 0:
	case ev.flags&evReadResp != 0 && h.peer >= 0:
		req = &s.tab.hot[h.peer]
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

// counts returns the counters a rare fact of a frame counts in: late's
// when the frame is late, else the entry's tally.
func (s *shard) counts(h *hot, c *cold, late *FlowRecord) *[numFlowCounters]uint64 {
	if late != nil {
		return &late.C
	}
	return &s.tally(h, c).C
}

// trackPSN follows the request PSNs of a flow (24-bit arithmetic): a PSN
// ahead of the expected one is a gap; one behind it is out of order when it
// is one the last gap skipped and the responder has not NAKed since, else a
// retransmission. late is the record of a late frame, nil for one counted
// in the entry.
func (s *shard) trackPSN(h *hot, c *cold, late *FlowRecord, win *Window, ev *event) {
	if h.flags&entPSNValid != 0 {
		d := (ev.psn - h.epsn) & psnMask
		switch {
		case d == 0:
		case d < psnHalf:
			if h.flags&entSlack == 0 || d > c.slack {
				s.counts(h, c, late)[FlowPSNGaps]++
				win.Counters[PSNGaps]++
				c.gapLo, c.gapHi = h.epsn, ev.psn
				h.flags = h.flags&^entNAKed | entGap
			}
		default:
			// Behind the expected PSN: a PSN the last gap skipped that
			// comes before the responder complained arrives out of
			// order; anything else is sent again.
			if h.flags&(entGap|entNAKed) == entGap && (ev.psn-c.gapLo)&psnMask < (c.gapHi-c.gapLo)&psnMask {
				s.counts(h, c, late)[FlowOutOfOrder]++
				win.Counters[OutOfOrder]++
				if ev.psn == c.gapLo {
					c.gapLo = (c.gapLo + 1) & psnMask
				}
				return
			}
			s.counts(h, c, late)[FlowRetransmits]++
			win.Counters[Retransmits]++
			s.resent(h, c, win, ev)
			if ev.flags&(evReadReq|evAckReq) != 0 {
				c.await(win, ev, true)
			}
			return
		}
	}
	if h.flags&entEpisode != 0 {
		// A new PSN ends the episode.
		h.flags &^= entEpisode
		if h.win != noWindow && c.epRecord {
			s.endEpisode(h, c, s.open.get(h.win), s.tally(h, c))
		}
	}
	h.flags = h.flags&^entSlack | entPSNValid
	n := uint32(1)
	if ev.flags&evReadReq != 0 {
		// A READ request consumes one PSN per response packet: exactly
		// known with the path MTU, else between the counts the largest
		// MTU and the smallest possible one give.
		packets := func(mtu uint32) uint32 { return max(1, (ev.dmaLen+mtu-1)/mtu) }
		if h.pmtu >= minPMTU {
			n = packets(uint32(h.pmtu))
		} else {
			n = packets(maxPMTU)
			if slack := packets(max(minPMTU, uint32(h.pmtuMin))) - n; slack != 0 {
				c.slack = slack
				h.flags |= entSlack
			}
		}
	}
	h.epsn = (ev.psn + n) & psnMask
	if ev.flags&(evReadReq|evAckReq) != 0 {
		c.await(win, ev, false)
	}
}

// await remembers request ev as waiting for its answer. A request sent
// again (resent) is waited for from this, its latest transmission: it
// replaces the earlier transmission's wait when that is still remembered,
// so that an answer to the resend is not timed from a lost first copy.
func (c *cold) await(win *Window, ev *event, resent bool) {
	kind := pendAck
	if ev.flags&evReadReq != 0 {
		kind = pendRead
	}
	key := pendKey(kind, ev.psn)
	if resent {
		for i, k := range c.pendKey {
			if k == key {
				c.pendT[i] = ev.time
				return
			}
		}
	}
	i := c.pendAt
	if uint8(c.pendKey[i]>>24) == pendRead {
		win.Counters[ReadLatencyUnmatched]++
	}
	c.pendKey[i], c.pendT[i] = key, ev.time
	c.pendAt = (c.pendAt + 1) % pendSize
}

// resent accounts a request frame of the entry (h, c) sent again: the first
// of an episode takes its cause from the NAK or RNR NAK the responder sent
// since the last episode, else it is a timeout, stalled since the flow's
// last request. The frame counts in the episode's record in win's list,
// which it makes when the episode has none there yet; a flow has at most
// maxEpisodes records in a window, and later episodes count into its last
// one. A late frame (win is not the flow's current window) counts in the
// retransmits only.
func (s *shard) resent(h *hot, c *cold, win *Window, ev *event) {
	if h.flags&entEpisode == 0 {
		h.flags |= entEpisode
		c.epRecord = false
		c.epTrouble, c.epCause, c.epCode = h.lastReq, CauseTimeout, 0
		if c.nakAt != 0 {
			c.epTrouble, c.epCause, c.epCode = c.nakAt, CauseNAK, c.nakSyn&31
			if c.nakSyn>>5 == 1 {
				c.epCause = CauseRNR
			}
		}
		c.nakAt = 0
		c.epPSN = ev.psn
		c.epStall = uint32(min(max(ev.time-c.epTrouble, 0), math.MaxUint32))
	}
	if h.win != win.Index() || c.epRecord {
		return
	}
	// The record's Resent holds the flow's retransmits before the
	// episode's first frame in the window until endEpisode, so that a
	// frame touches nothing but the entry.
	c.epRecord = true
	base := uint32(s.tally(h, c).C[FlowRetransmits]) - 1
	if c.epN < maxEpisodes {
		c.epAt, c.epN = int32(len(win.Retrans)), c.epN+1
		trouble := c.epTrouble - win.Start
		win.Retrans = append(win.Retrans, Retransmission{Key: h.key, Trouble: trouble,
			First: trouble + int64(c.epStall), FirstPSN: c.epPSN, Cause: c.epCause, NAKCode: c.epCode, Resent: base})
		return
	}
	rec := &win.Retrans[c.epAt]
	rec.Merged, rec.Resent = true, base-rec.Resent
}

// endEpisode completes the record of the flow's retransmission episode in
// win, the flow's current window, which has one there (cold.epRecord): its
// frames resent, counted in f, the flow's record there, and its last, the
// flow's last request.
func (s *shard) endEpisode(h *hot, c *cold, win *Window, f *FlowRecord) {
	c.epRecord = false
	rec := &win.Retrans[c.epAt]
	rec.Resent = uint32(f.C[FlowRetransmits]) - rec.Resent
	rec.Last = h.lastReq - win.Start
	rec.Ongoing = h.flags&entEpisode != 0
}

// matchLatency pairs a READ response head or an ACK of the flow h with the
// pending requests of its peer, and records the latency on the requester's
// flow.
func (s *shard) matchLatency(h *hot, win *Window, ev *event) {
	req := &s.tab.cold[h.peer]
	for i, k := range req.pendKey {
		kind, psn := uint8(k>>24), k&psnMask
		lk, q := latAck, win.AckLatency
		switch {
		case kind == pendRead && ev.flags&evReadRespHead != 0 && psn == ev.psn:
			lk, q = latRead, win.ReadLatency
		case kind == pendAck && ev.flags&evAck != 0 && (ev.psn-psn)&psnMask < psnHalf:
		default:
			continue
		}
		lat := ev.time - req.pendT[i]
		req.pendKey[i] = pendKey(pendNone, psn)
		if lat < 0 {
			continue
		}
		// The window's quantiles count every match; the requester's
		// flow counts it when it sent in this window too, so that a
		// flow with no frame in a window is never part of it.
		q.Add(float64(lat))
		s.latency(h.peer, win, ev.win, lk, uint64(lat))
	}
}
