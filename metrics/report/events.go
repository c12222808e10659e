package report

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
)

// EventKind names a kind of event. It is the one place kinds are named:
// the report key of each is its String.
type EventKind uint8

// Kinds of events.
const (
	EventNone           EventKind = iota // not an event (the zero value)
	EventIncast                          // many sources burst into one destination
	EventPFCStorm                        // a priority kept paused by one source MAC
	EventRetransmission                  // a flow sent PSNs again, with the cause
	EventCEWithoutCNP                    // a flow got CE marks and its receiver sent no CNP back
	numEventKinds
)

// NumEventKinds is the number of event kinds: EventKind(1) up to
// EventKind(NumEventKinds-1) are the kinds.
const NumEventKinds = int(numEventKinds)

var eventKindNames = [numEventKinds]string{"", "incast", "pfc_storm", "retransmission", "ce_without_cnp"}

// String returns the report key of k: "incast", "pfc_storm",
// "retransmission" or "ce_without_cnp".
func (k EventKind) String() string {
	if k < numEventKinds {
		return eventKindNames[k]
	}
	return "event"
}

// EventID identifies an event across windows: an event that goes on into
// the next window has the same ID there, so that a reader summing events
// by ID counts each once. It is a hash of the kind, what the event is about
// (the destination, MAC and priority, or flow) and its start, so hosts and
// mergers that see the same trouble give it the same ID.
type EventID uint64

// AppendText appends the ID as 16 hex digits.
func (id EventID) AppendText(b []byte) []byte {
	const hex = "0123456789abcdef"
	for s := 60; s >= 0; s -= 4 {
		b = append(b, hex[id>>s&15])
	}
	return b
}

// String returns the ID as 16 hex digits.
func (id EventID) String() string { return string(id.AppendText(nil)) }

// Event is one trouble a window's report names. Start and End bound the
// trouble itself, in ns since the Unix epoch: an event that began in an
// earlier window starts there, and one that goes on ends at the window's
// end (Ongoing). The figures of an event are those of the part of it no
// earlier report gave: an event reported in the window before gives this
// window's part, so that summing by ID counts nothing twice. Exactly one of
// the kind's fields is set.
type Event struct {
	Kind       EventKind
	ID         EventID
	Start, End int64
	Ongoing    bool // the trouble lasted to the end of the window, and may go on

	Incast         *Incast
	PFCStorm       *PFCStorm
	Retransmission *Retransmission
	CEWithoutCNP   *CEWithoutCNP

	flows []int32 // positions in the window of the flows it names
}

// Flow is a flow an event names: its key and the source QP when known.
type Flow struct {
	Key      metrics.FlowKey
	SQP      uint32
	SQPKnown bool
}

// Incast is many sources bursting into one destination within a burst
// interval: at least Rules.IncastSources source addresses whose flows to
// Dst together reach Rules.IncastLoad of the link rate over a burst
// interval (see [metrics.Activity] for what is exact and what estimated).
type Incast struct {
	Dst         decode.Addr
	Senders     []Sender // the flows into Dst in the burst, most bytes first (at most maxSenders)
	SenderCount int      // flows into Dst in the burst
	Sources     int      // distinct source addresses among them
	PeakBPS     float64  // the highest aggregate rate over a burst interval
	Bytes       uint64   // bytes of the senders in the burst
	ECNCE       uint64   // CE-marked frames of the senders in the burst
	CNP         uint64   // CNPs the senders received, to one burst interval after it
}

// Sender is a flow of an incast: its bytes in the burst and its share of
// all senders' bytes.
type Sender struct {
	Flow
	Bytes uint64
	Share float64
}

// PFCStorm is a priority kept paused by the PFC frames of one source MAC
// for at least Rules.StormPaused of at least Rules.StormInterval.
type PFCStorm struct {
	MAC            [6]byte
	Priority       uint8
	PausedNS       int64   // paused time of the part reported
	PausedFraction float64 // PausedNS over that part's length
	Frames         uint64  // PFC frames of the part reported
}

// Retransmission is a retransmission episode of a flow (see
// [metrics.Retransmission]); Start is its trouble, End its last frame
// sent again.
type Retransmission struct {
	Flow
	Cause    metrics.Cause
	FirstPSN uint32
	Resent   uint64 // frames sent again (in the part reported)
	StallNS  int64  // from the trouble (the NAK, or the last frame before the silence) to the first frame sent again
	NAKCode  uint8  // the NAK's code (Cause nak), or the RNR NAK's timer (Cause rnr)
	// Merged says that the flow's later episodes in the window are
	// counted into this one (the engine keeps a few per flow and window).
	Merged bool
}

// CEWithoutCNP is a flow that received at least Rules.CEMarks CE-marked
// frames in the window while its receiver, whose direction the capture
// shows, sent no CNP back for it.
type CEWithoutCNP struct {
	Flow
	ECNCE          uint64 // CE-marked frames
	Packets        uint64 // frames of the flow
	ReversePackets uint64 // frames of the reverse direction (its receiver's)
}

// maxSenders bounds the senders an incast lists.
const maxSenders = 256

// eventKey is what an event is about: its kind and identity, to find it
// again in the next window.
type eventKey struct {
	kind EventKind
	flow metrics.FlowKey // incast: the destination in Dst; retransmission, ce_without_cnp: the flow
	mac  [6]byte
	prio uint8
	at   int64 // retransmission: the trouble
}

// openEvent is an event, or a storm not yet long enough, that reached the
// end of its window: the next window continues it.
type openEvent struct {
	start    int64
	id       EventID
	reported bool   // an earlier report listed it
	paused   int64  // storms: paused ns so far
	frames   uint64 // storms: frames so far
	resent   uint64 // retransmissions: frames resent so far
}

// id returns the ID of an event about k starting at start.
func (k *eventKey) id(start int64) EventID {
	var b [64]byte
	s := k.flow.Src.As16()
	d := k.flow.Dst.As16()
	n := copy(b[:], s[:])
	n += copy(b[n:], d[:])
	b[n], b[n+1], b[n+2] = byte(k.kind), byte(k.flow.Src.Kind()), byte(k.flow.Dst.Kind())
	n += 3
	n += copy(b[n:], k.mac[:])
	b[n] = k.prio
	n++
	n += len(binary.BigEndian.AppendUint32(b[n:n], k.flow.DQP))
	n += len(binary.BigEndian.AppendUint64(b[n:n], uint64(k.at)))
	n += len(binary.BigEndian.AppendUint64(b[n:n], uint64(start)))
	// FNV-1a, 64 bits.
	h := uint64(14695981039346656037)
	for _, c := range b[:n] {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return EventID(h)
}

// events finds the events of w, whose flows' CNPs rp.cnp holds, into r.
func (rp *Reporter) events(w *metrics.Window, r *Report, hasPrev bool) {
	if !hasPrev {
		clear(rp.open)
	}
	clear(rp.next)
	var evs []Event
	evs = rp.incasts(w, evs)
	evs = rp.storms(w, evs)
	evs = rp.retransmissions(w, evs)
	evs = rp.ceWithoutCNP(w, evs)
	rp.open, rp.next = rp.next, rp.open
	slices.SortFunc(evs, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Start, b.Start), cmp.Compare(a.ID, b.ID))
	})
	// At most MaxEvents of each kind, the earliest.
	out := evs[:0]
	for i, e := range evs {
		if max := rp.cfg.Rules.MaxEvents; i >= max && evs[i-max].Kind == e.Kind {
			r.EventsOmitted[e.Kind]++
			continue
		}
		out = append(out, e)
	}
	r.Events = out
}

// continued returns the open event of the window before about k, or nil.
func (rp *Reporter) continued(k eventKey) *openEvent {
	if o, ok := rp.open[k]; ok {
		return &o
	}
	return nil
}

// emit returns evs with e appended. An event that continues cont, the
// open event of the window before, takes its start and ID; an event with
// next goes on into the next window, with next's figures.
func (rp *Reporter) emit(evs []Event, k eventKey, e Event, cont, next *openEvent) []Event {
	if cont != nil {
		e.Start, e.ID = cont.start, cont.id
	} else {
		e.ID = k.id(e.Start)
	}
	if next != nil {
		o := *next
		o.start, o.id, o.reported = e.Start, e.ID, true
		rp.next[k] = o
	}
	return append(evs, e)
}

// flow returns the Flow of record f, with the source QP the learned pairs
// give when the engine did not know it.
func (rp *Reporter) flow(f *metrics.FlowRecord) Flow {
	fl := Flow{Key: f.Key, SQP: f.SQP, SQPKnown: f.SQPKnown}
	if !fl.SQPKnown {
		if p, ok := rp.pairs[end(f.Key.Dst, f.Key.DQP)]; ok && end(f.Key.Src, p.peer.qpn()) == p.peer {
			fl.SQP, fl.SQPKnown = p.peer.qpn(), true
		}
	}
	return fl
}

// reverse returns the position in w of the flow that answers f (its
// receiver's direction, whose destination QP is f's source QP), or -1.
func (rp *Reporter) reverse(w *metrics.Window, f *metrics.FlowRecord) int32 {
	fl := rp.flow(f)
	if !fl.SQPKnown {
		return -1
	}
	return rp.index.find(w, metrics.FlowKey{Src: f.Key.Dst, Dst: f.Key.Src, DQP: fl.SQP})
}

// densityShift is the fixed point of the incast sums: bytes per slot
// times 2^16, so that they are exact integers whatever the order of
// addition.
const densityShift = 16

// density returns the bytes per slot of run r, in fixed point.
func density(r *metrics.Run) uint64 {
	return r.Bytes << densityShift / uint64(r.End-r.Start)
}

// densityBound returns a bound of the density of run r, without a
// division: its bytes over the largest power of two not above its length,
// in fixed point, at least its density and less than twice it plus one.
// The bound before, a run's bytes over one slot, let a third of the
// destinations of a gen trace through to reaches, whose walk of their
// flows' records in list order then took 2.7 % of a replay's CPU at 1 M
// connections, waiting on the records; this one lets none.
func densityBound(r *metrics.Run) uint64 {
	return r.Bytes << densityShift >> (bits.Len16(r.End-r.Start) - 1)
}

// part returns the part of n (spread evenly over run r) that falls into
// slots [from, to).
func part(n uint64, r *metrics.Run, from, to uint32) uint64 {
	lo, hi := max(uint32(r.Start), from), min(uint32(r.End), to)
	if lo >= hi {
		return 0
	}
	if lo == uint32(r.Start) && hi == uint32(r.End) {
		return n
	}
	h, l := bits.Mul64(n, uint64(hi-lo))
	q, _ := bits.Div64(h, l, uint64(r.End-r.Start))
	return q
}

// dstAgg is a destination's flows in the incast search: a bound of their
// aggregate in a slot, and a list of them through rp.nextFlow.
type dstAgg struct {
	addr  decode.Addr
	peak  uint64 // the sum of bounds of the flows' densest slots, fixed point: at least their aggregate in any slot
	head  int32  // first flow, -1 for none
	flows int
}

// slotPoint is where a run of a flow into a destination starts or ends:
// the slot, the edge (runEnd or runStart), the flow's position in the
// window's list and the run's in the flow's profile, packed so that
// points sort as integers in the order the incast sweep takes them: by
// slot, ends before starts, then by flow.
type slotPoint uint64

// Edges of a run, in the order the incast sweep takes them at one slot.
const (
	runEnd uint8 = iota
	runStart
)

func newSlotPoint(slot uint32, edge uint8, flow int32, run int) slotPoint {
	return slotPoint(uint64(slot)<<35 | uint64(edge)<<34 | uint64(uint32(flow))<<2 | uint64(run))
}

func (p slotPoint) slot() uint32 { return uint32(p >> 35) }
func (p slotPoint) edge() uint8  { return uint8(p>>34) & 1 }
func (p slotPoint) flow() int32  { return int32(uint32(p >> 2)) }
func (p slotPoint) run() int     { return int(p & 3) }

// incasts appends the incasts of w: per destination, the burst slots in
// which flows from at least Rules.IncastSources source addresses send it
// together at least Rules.IncastLoad of the link rate, joined when they
// follow each other. It searches the destinations Build gathered
// (addDst).
func (rp *Reporter) incasts(w *metrics.Window, evs []Event) []Event {
	if w.Burst <= 0 {
		return evs
	}
	rules := &rp.cfg.Rules
	thr := uint64(rules.IncastLoad * rp.cfg.LinkRate * float64(w.Burst) / 8e9 * (1 << densityShift))
	slots := uint32(w.Length / w.Burst)
	for di := range rp.dsts {
		if a := &rp.dsts[di]; a.peak >= thr && a.flows >= rules.IncastSources && rp.reaches(w, a, thr) {
			evs = rp.incastsInto(w, evs, a, thr, slots)
		}
	}
	return evs
}

// resetDsts readies the destinations of the incast search for a window
// of n flows.
func (rp *Reporter) resetDsts(n int) {
	rp.dsts = rp.dsts[:0]
	rp.dstAt.reset()
	rp.nextFlow = rp.nextMem.Resize(n)
}

// addDst adds f, the flow at position i of the window's list, to the
// destinations of the incast search when it sent in some burst slot. Build
// calls it from its pass over the flows, so that the search reads no
// record again but those of the destinations it sweeps.
func (rp *Reporter) addDst(i int32, f *metrics.FlowRecord) {
	// A bound of the flow's densest slot: destinations it lets through
	// are swept exactly.
	var peak uint64
	for _, r := range f.Act.Runs() {
		peak = max(peak, densityBound(&r))
	}
	if peak == 0 {
		return
	}
	d, slot := rp.dstAt.find(rp.dsts, &f.Key.Dst)
	if d < 0 {
		d = int32(len(rp.dsts))
		rp.dsts = append(rp.dsts, dstAgg{addr: f.Key.Dst, head: -1})
		rp.dstAt.add(rp.dsts, d, slot)
	}
	a := &rp.dsts[d]
	a.peak += peak
	rp.nextFlow[i], a.head = a.head, i
	a.flows++
}

// reaches reports whether the flows into the destination of a send it at
// least thr (fixed point bytes per slot) together in some burst slot: the
// aggregate incastsInto sweeps, summed from its changes at the runs' edges
// (a difference array over the slots) without sorting them, so that the
// destinations whose flows never add up are not swept. It counts in
// wrapping integers: the differences cancel exactly.
func (rp *Reporter) reaches(w *metrics.Window, a *dstAgg, thr uint64) bool {
	if rp.load == nil {
		rp.load = make([]uint64, math.MaxUint16+1) // Run.End is a uint16
	}
	load, flows := rp.load, w.Flows
	lo, hi := uint16(math.MaxUint16), uint16(0)
	for i := a.head; i >= 0; i = rp.nextFlow[i] {
		for _, r := range flows[i].Act.Runs() {
			d := density(&r)
			load[r.Start] += d
			load[r.End] -= d
			lo, hi = min(lo, r.Start), max(hi, r.End)
		}
	}
	if lo > hi {
		return false // no runs
	}
	var agg uint64
	found := false
	for _, d := range load[lo:hi] {
		if agg += d; agg >= thr {
			found = true
			break
		}
	}
	clear(load[lo : int(hi)+1])
	return found
}

// incastsInto appends the incasts into the destination of a, sweeping its
// flows' runs in slot order.
func (rp *Reporter) incastsInto(w *metrics.Window, evs []Event, a *dstAgg, thr uint64, slots uint32) []Event {
	flows := w.Flows
	pts := rp.points[:0]
	for i := a.head; i >= 0; i = rp.nextFlow[i] {
		for k, r := range flows[i].Act.Runs() {
			pts = append(pts, newSlotPoint(uint32(r.Start), runStart, i, k), newSlotPoint(uint32(r.End), runEnd, i, k))
		}
	}
	// The same order whatever order the flows came in.
	slices.Sort(pts)
	rp.points = pts
	clear(rp.active)
	var agg, peak uint64
	firing, from := false, uint32(0)
	for k := 0; k < len(pts); {
		s := pts[k].slot()
		for ; k < len(pts) && pts[k].slot() == s; k++ {
			p := pts[k]
			f := &flows[p.flow()]
			src, dens := f.Key.Src, density(&f.Act[p.run()])
			if p.edge() == runStart {
				agg += dens
				rp.active[src]++
				continue
			}
			agg -= dens
			if rp.active[src]--; rp.active[src] == 0 {
				delete(rp.active, src)
			}
		}
		// The slots from s to the next point have this aggregate.
		fire := agg >= thr && len(rp.active) >= rp.cfg.Rules.IncastSources
		switch {
		case fire && !firing:
			firing, from, peak = true, s, agg
		case fire:
			peak = max(peak, agg)
		case firing:
			firing = false
			evs = rp.incast(w, evs, a, from, s, peak, slots)
		}
	}
	return evs
}

// incast appends the incast into a's destination over slots [from, to),
// whose peak aggregate is peak (fixed point bytes per slot).
func (rp *Reporter) incast(w *metrics.Window, evs []Event, a *dstAgg, from, to uint32, peak uint64, slots uint32) []Event {
	flows := w.Flows
	in := &Incast{Dst: a.addr, PeakBPS: float64(peak) / (1 << densityShift) * 8 / (float64(w.Burst) / 1e9)}
	srcs := make(map[decode.Addr]bool)
	var named []int32
	for i := a.head; i >= 0; i = rp.nextFlow[i] {
		f := &flows[i]
		var bytes, ce uint64
		for _, r := range f.Act.Runs() {
			bytes += part(r.Bytes, &r, from, to)
			ce += part(uint64(r.ECNCE), &r, from, to)
		}
		if bytes == 0 {
			continue
		}
		srcs[f.Key.Src] = true
		in.Senders = append(in.Senders, Sender{Flow: rp.flow(f), Bytes: bytes})
		in.Bytes += bytes
		in.ECNCE += ce
		if j := rp.reverse(w, f); j >= 0 {
			for _, r := range flows[j].Act.Runs() {
				in.CNP += part(uint64(r.CNP), &r, from, min(to+1, slots))
			}
		}
		named = append(named, i)
	}
	in.SenderCount, in.Sources = len(in.Senders), len(srcs)
	for i := range in.Senders {
		in.Senders[i].Share = float64(in.Senders[i].Bytes) / float64(in.Bytes)
	}
	slices.SortFunc(in.Senders, func(x, y Sender) int { return cmp.Or(cmp.Compare(y.Bytes, x.Bytes), x.Key.Compare(y.Key)) })
	in.Senders = in.Senders[:min(len(in.Senders), maxSenders)]
	burst := w.Burst
	e := Event{Kind: EventIncast, Start: w.Start + int64(from)*burst, End: w.Start + int64(to)*burst, Ongoing: to == slots, Incast: in, flows: named}
	k := eventKey{kind: EventIncast, flow: metrics.FlowKey{Dst: a.addr}}
	var cont, next *openEvent
	if from == 0 {
		cont = rp.continued(k) // an incast that reached the end of the window before
	}
	if e.Ongoing {
		next = &openEvent{}
	}
	return rp.emit(evs, k, e, cont, next)
}

// storms appends the PFC storms of w: per source MAC and priority, spans
// of at least Rules.StormInterval paused at least Rules.StormPaused of the
// time. Runs of paused time join into a span while the span stays paused
// that much; a span that reached the window's end goes on in the next.
func (rp *Reporter) storms(w *metrics.Window, evs []Event) []Event {
	rules := &rp.cfg.Rules
	frac := rules.StormPaused
	for i := range w.Pauses {
		p := &w.Pauses[i]
		k := eventKey{kind: EventPFCStorm, mac: p.MAC, prio: p.Priority}
		var c pauseSpan
		if o := rp.continued(k); o != nil {
			c = pauseSpan{a: o.start - w.Start, paused: o.paused, frames: o.frames, cont: o, on: true}
		}
		for _, r := range p.RunList() {
			if c.on && float64(c.paused+r.Paused) >= frac*float64(r.End-c.a) {
				c.b, c.paused, c.frames = r.End, c.paused+r.Paused, c.frames+r.Frames
				continue
			}
			evs = rp.storm(w, evs, k, &c, false)
			// A run joined from runs apart may be paused too little
			// of its span to begin one.
			c = pauseSpan{a: r.Start, b: r.End, paused: r.Paused, frames: r.Frames, on: float64(r.Paused) >= frac*float64(r.End-r.Start)}
		}
		// The span goes on into the next window if it stays paused
		// enough up to the window's end.
		evs = rp.storm(w, evs, k, &c, c.on && c.b > 0 && float64(c.paused) >= frac*float64(w.Length-c.a))
	}
	return evs
}

// pauseSpan is a span of paused time of one source MAC and priority, in
// the storm search.
type pauseSpan struct {
	a, b   int64 // ns from the window start
	paused int64
	frames uint64
	cont   *openEvent // the span of the window before it continues, nil for none
	on     bool       // the span holds paused time
}

// storm appends the storm of span c, if it is one; ongoing says that it
// reached the window's end.
func (rp *Reporter) storm(w *metrics.Window, evs []Event, k eventKey, c *pauseSpan, ongoing bool) []Event {
	var next *openEvent
	if ongoing {
		next = &openEvent{paused: c.paused, frames: c.frames}
	}
	if !c.on || c.b-c.a < int64(rp.cfg.Rules.StormInterval) {
		if next != nil { // too short yet: perhaps a storm with the next window
			rp.next[k] = openEvent{start: w.Start + c.a, paused: c.paused, frames: c.frames}
		}
		return evs
	}
	st := &PFCStorm{MAC: k.mac, Priority: k.prio, PausedNS: c.paused, Frames: c.frames}
	from, cont := c.a, c.cont
	switch {
	case cont != nil && cont.reported:
		// Reported up to the window's start: this window's part.
		st.PausedNS, st.Frames, from = c.paused-cont.paused, c.frames-cont.frames, 0
		if c.b <= 0 {
			return evs // it ended with the window before
		}
	case cont != nil:
		cont = nil // a span not reported before: a new event
	}
	st.PausedFraction = float64(st.PausedNS) / float64(c.b-from)
	e := Event{Kind: EventPFCStorm, Start: w.Start + c.a, End: w.Start + c.b, Ongoing: ongoing, PFCStorm: st}
	return rp.emit(evs, k, e, cont, next)
}

// retransmissions appends the retransmission episodes of w that resent at
// least Rules.RetransResent frames (counted from the episode's start)
// after a stall of at least Rules.RetransStall.
func (rp *Reporter) retransmissions(w *metrics.Window, evs []Event) []Event {
	rules := &rp.cfg.Rules
	for i := range w.Retrans {
		x := &w.Retrans[i]
		k := eventKey{kind: EventRetransmission, flow: x.Key, at: w.Start + x.Trouble}
		cont := rp.continued(k)
		resent := uint64(x.Resent)
		total := resent
		if cont != nil {
			total += cont.resent
		}
		if total < uint64(rules.RetransResent) || x.Stall() < int64(rules.RetransStall) {
			if x.Ongoing {
				rp.next[k] = openEvent{start: w.Start + x.Trouble, resent: total}
			}
			continue
		}
		if cont == nil || !cont.reported {
			resent, cont = total, nil // the frames no earlier report gave
		}
		var next *openEvent
		if x.Ongoing {
			next = &openEvent{resent: total}
		}
		j := rp.index.find(w, x.Key)
		fl := Flow{Key: x.Key}
		if j >= 0 {
			fl = rp.flow(&w.Flows[j])
		}
		rt := &Retransmission{Flow: fl, Cause: x.Cause, FirstPSN: x.FirstPSN, Resent: resent, StallNS: x.Stall(), Merged: x.Merged}
		if x.Cause != metrics.CauseTimeout {
			rt.NAKCode = x.NAKCode
		}
		e := Event{Kind: EventRetransmission, Start: w.Start + x.Trouble, End: w.Start + x.Last, Ongoing: x.Ongoing, Retransmission: rt}
		if j >= 0 {
			e.flows = []int32{j}
		}
		evs = rp.emit(evs, k, e, cont, next)
	}
	return evs
}

// ceWithoutCNP appends the flows of w that received at least Rules.CEMarks
// CE-marked frames while their receiver, whose direction w holds, sent no
// CNP back for them. The event spans the runs of the flow's activity with
// CE marks; a flow with such an event in the window before continues it.
func (rp *Reporter) ceWithoutCNP(w *metrics.Window, evs []Event) []Event {
	flows := w.Flows
	for i := range flows {
		f := &flows[i]
		if f.C[metrics.FlowECNCE] < uint64(rp.cfg.Rules.CEMarks) {
			continue
		}
		j := rp.reverse(w, f)
		if j < 0 || flows[j].C[metrics.FlowCNPCarried] > 0 {
			continue
		}
		from, to := w.From, w.To
		first, last := -1, -1
		for k, r := range f.Act.Runs() {
			if r.ECNCE > 0 {
				last = k
				if first < 0 {
					first = k
				}
			}
		}
		if first >= 0 && w.Burst > 0 {
			from, to = w.Start+int64(f.Act[first].Start)*w.Burst, w.Start+int64(f.Act[last].End)*w.Burst
		}
		k := eventKey{kind: EventCEWithoutCNP, flow: f.Key}
		ce := &CEWithoutCNP{Flow: rp.flow(f), ECNCE: f.C[metrics.FlowECNCE], Packets: f.C[metrics.FlowPackets], ReversePackets: flows[j].C[metrics.FlowPackets]}
		e := Event{Kind: EventCEWithoutCNP, Start: from, End: to, Ongoing: to >= w.Start+w.Length, CEWithoutCNP: ce, flows: []int32{int32(i)}}
		// The judgement is per window: the event goes on into the next
		// window when it holds there too, whether or not it reached
		// this one's end.
		evs = rp.emit(evs, k, e, rp.continued(k), &openEvent{})
	}
	return evs
}

// AppendText appends a one-line description of e, as a terminal shows it.
func (e *Event) AppendText(b []byte) []byte {
	b = append(b, e.Kind.String()...)
	switch {
	case e.Incast != nil:
		in := e.Incast
		b = append(b, " → "...)
		b = in.Dst.AppendTo(b)
		b = append(b, "  "...)
		b = strconv.AppendInt(b, int64(in.SenderCount), 10)
		b = append(b, " senders from "...)
		b = strconv.AppendInt(b, int64(in.Sources), 10)
		b = append(b, " sources  peak "...)
		b = appendRate(b, in.PeakBPS)
		b = append(b, " over "...)
		b = appendDuration(b, e.End-e.Start)
		b = append(b, "  CE "...)
		b = strconv.AppendUint(b, in.ECNCE, 10)
		b = append(b, "  CNP "...)
		b = strconv.AppendUint(b, in.CNP, 10)
	case e.PFCStorm != nil:
		st := e.PFCStorm
		b = append(b, ' ')
		b = appendMAC(b, st.MAC)
		b = append(b, " priority "...)
		b = strconv.AppendUint(b, uint64(st.Priority), 10)
		b = append(b, " paused "...)
		b = strconv.AppendFloat(b, 100*st.PausedFraction, 'f', 1, 64)
		b = append(b, "% of "...)
		b = appendDuration(b, e.End-e.Start)
		b = append(b, "  frames "...)
		b = strconv.AppendUint(b, st.Frames, 10)
	case e.Retransmission != nil:
		rt := e.Retransmission
		b = appendFlowText(append(b, ' '), &rt.Flow)
		b = append(b, "  "...)
		b = append(b, rt.Cause.String()...)
		b = append(b, "  stalled "...)
		b = appendDuration(b, rt.StallNS)
		b = append(b, "  resent "...)
		b = strconv.AppendUint(b, rt.Resent, 10)
		b = append(b, " from PSN "...)
		b = strconv.AppendUint(b, uint64(rt.FirstPSN), 10)
	case e.CEWithoutCNP != nil:
		ce := e.CEWithoutCNP
		b = appendFlowText(append(b, ' '), &ce.Flow)
		b = append(b, "  CE "...)
		b = strconv.AppendUint(b, ce.ECNCE, 10)
		b = append(b, " of "...)
		b = strconv.AppendUint(b, ce.Packets, 10)
		b = append(b, " frames, no CNP back"...)
	}
	return b
}

// String returns the one-line description of e.
func (e *Event) String() string { return string(e.AppendText(nil)) }

// appendFlowText appends "src → dst qp 0xDQP (from 0xSQP)".
func appendFlowText(b []byte, f *Flow) []byte {
	b = f.Key.Src.AppendTo(b)
	b = append(b, " → "...)
	b = f.Key.Dst.AppendTo(b)
	b = append(b, " qp 0x"...)
	b = strconv.AppendUint(b, uint64(f.Key.DQP), 16)
	if f.SQPKnown {
		b = append(b, " from 0x"...)
		b = strconv.AppendUint(b, uint64(f.SQP), 16)
	}
	return b
}

// AppendMAC appends mac as six lowercase hex bytes joined by colons, as
// the report writes MAC addresses.
func AppendMAC(b []byte, mac [6]byte) []byte { return appendMAC(b, mac) }

func appendMAC(b []byte, mac [6]byte) []byte {
	const hex = "0123456789abcdef"
	for i, c := range mac {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[c>>4], hex[c&15])
	}
	return b
}

// appendRate appends bits/s with an SI prefix: "300 Gb/s", "2.5 Mb/s".
func appendRate(b []byte, bps float64) []byte {
	unit := "b/s"
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e12, "Tb/s"}, {1e9, "Gb/s"}, {1e6, "Mb/s"}, {1e3, "kb/s"}} {
		if bps >= u.div {
			bps, unit = bps/u.div, u.unit
			break
		}
	}
	b = strconv.AppendFloat(b, bps, 'g', 3, 64)
	return append(append(b, ' '), unit...)
}

// appendDuration appends ns as ms or µs with three significant digits.
func appendDuration(b []byte, ns int64) []byte {
	switch {
	case ns >= 1e6:
		return append(strconv.AppendFloat(b, float64(ns)/1e6, 'g', 3, 64), " ms"...)
	case ns >= 1e3:
		return append(strconv.AppendFloat(b, float64(ns)/1e3, 'g', 3, 64), " µs"...)
	}
	return append(strconv.AppendInt(b, ns, 10), " ns"...)
}
