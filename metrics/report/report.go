package report

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/scratch"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/sketch"
)

// Report is what rocescope says about one window: the window's exact
// counters, its flow estimates and the flows worth naming. It is built from
// a merged [metrics.Window] by a [Reporter] and written by the exporters.
type Report struct {
	Window    *metrics.Window // the state the report was built from
	Flows     sketch.Estimate // distinct flows, estimated
	Exact     bool            // every flow was held by the QP tables: per-flow figures are exact
	Top       []FlowReport    // largest flows by bytes, largest first
	Elephants []FlowReport    // flows with rate ≥ the elephant rate, fastest first
	Jitter    []FlowReport    // elephants of this or the previous window whose rate changed by ≥ the jitter rate
	All       []FlowReport    // every flow, by key (with metrics.Config.Exact)

	// Events are the window's trouble (diagnoses), by kind, then start;
	// at most Rules.MaxEvents of each kind, the earliest, and
	// EventsOmitted counts the others by kind.
	Events        []Event
	EventsOmitted [NumEventKinds]uint64
	// EventFlows are the flows the events name, in canonical order;
	// TopCNP the flows that received the most CNPs, and TopRetransmits
	// those that sent the most frames again (at most Top each, most
	// first, none with zero): congestion's victims, listed also when
	// they are not among the top flows by bytes.
	EventFlows     []FlowReport
	TopCNP         []FlowReport
	TopRetransmits []FlowReport

	// CNPUnattributed counts CNPs whose throttled flow is unknown (its
	// source QP was never learned, or it sent nothing in this window).
	CNPUnattributed uint64
	// ReadLatency and AckLatency summarize the latencies seen at the
	// mirror point, in ns.
	ReadLatency, AckLatency LatencySummary
	// SketchError holds the sketches' measured error against the exact
	// flow records (with Config.Exact and an exact window).
	SketchError *SketchError
	// Summary is, for the report of a [Summary], how many windows it adds
	// up; 0 for the report of one window.
	Summary int
	// MissingHosts are the hosts a merge expected (merge --hosts) that
	// delivered no state of the window, sorted.
	MissingHosts []string

	cnp map[int32]uint64 // CNPs attributed to the window's flows, by position
}

// FlowCNP returns the CNPs attributed to flow i of r.Window.Flows, those
// that throttle it: the flow records of a window count the CNPs a flow
// carried, and a report attributes them to the flows they throttle.
func (r *Report) FlowCNP(i int) uint64 { return r.cnp[int32(i)] }

// FlowReport is one flow of a report.
type FlowReport struct {
	metrics.FlowRecord
	Rate      float64 // bits/s over the window
	PrevRate  float64 // bits/s over the previous window
	Elephant  bool
	Jitter    bool
	Estimated bool // from the sketches only: the QP table could not hold the flow
	// BytesMin is, for an estimated flow, the bytes it sent at least; its
	// bytes and packets counters are then upper bounds.
	BytesMin uint64
}

// LatencySummary is a latency distribution in ns.
type LatencySummary struct {
	Count                    uint64
	P50, P90, P99, P999, Max float64
}

// SketchError is the sketches' error measured against the exact records.
type SketchError struct {
	FlowsRelErr        float64 // |estimate − exact| / exact distinct flows
	CountMinARE        float64 // average relative error of Count-Min byte estimates over all flows
	TopRecall, TopPrec float64 // top-k sketch vs the exact top list of the report's length
}

// Reporter builds reports window after window. It keeps what crosses
// windows: the rates of the previous window for jitter, and the QP pairs
// learned from CM exchanges and from pairing the directions of a
// connection. A Reporter is not safe for concurrent use.
//
// Building a report costs a few passes over the window's flow records
// without copying them: only the flows a report names (top, elephants,
// jitter; all of them with Config.Exact) become [FlowReport]s.
type Reporter struct {
	cfg     metrics.Config
	prevIdx int64 // index of the last window built, when built
	built   bool
	prev    []flowRate // previous window's flows, in canonical order
	cur     []flowRate
	// The memory of prev and cur, which swap with them.
	prevMem, curMem *scratch.Array[flowRate]
	pairs           map[qpEnd]pairing
	cmReq           map[cmReqKey]pairing
	cnp             map[int32]uint64 // CNPs attributed to a flow of the window being built, by position
	maxPairs        int
	now             int64 // index of the window being built
	// summing says that the windows are a Summary's: their flows carry
	// the CNPs attributed to them already.
	summing bool

	// Events: those of the previous window that went on to its end, and
	// of the window being built; scratch space of the incast search.
	open, next map[eventKey]openEvent
	dstAt      dstIndex // positions in dsts
	dsts       []dstAgg
	nextFlow   []int32               // per flow: the next flow into its destination, -1 for none
	nextMem    *scratch.Array[int32] // nextFlow's memory
	points     []slotPoint
	active     map[decode.Addr]int // runs going on per source address
	load       []uint64            // per burst slot: the change of a destination's aggregate (reaches)
	index      flowIndex           // the window's flows by key
	carriers   []int32             // positions of the window's flows that carried CNPs
}

// flowRate is a flow's rate in a window.
type flowRate struct {
	hash uint64
	key  metrics.FlowKey
	rate float64
}

// qpEnd is one end of a connection: an address and a QPN, packed into
// three words without padding so that maps hash and compare it as plain
// memory (it is looked up for every flow of every window).
type qpEnd struct {
	lo, hi uint64 // the address's 16 bytes
	kq     uint64 // the address kind << 32 | the QPN
}

// end returns the end of a connection at addr with QPN qpn.
func end(addr decode.Addr, qpn uint32) qpEnd {
	lo, hi := addr.Words()
	return qpEnd{lo, hi, uint64(addr.Kind())<<32 | uint64(qpn)}
}

// qpn returns the QPN of e.
func (e qpEnd) qpn() uint32 { return uint32(e.kq) }

// pairing is a learned QP end and the last window that showed it, so that
// pairs of connections long gone can be forgotten.
type pairing struct {
	peer qpEnd
	seen int64
}

// pairTTL is how long, in ns, a learned pair stays when the tables are
// full and nothing has shown it since.
const pairTTL = int64(10 * time.Minute)

// cmReqKey finds the REQ a REP answers.
type cmReqKey struct {
	requester decode.Addr
	commID    uint32
}

// NewReporter returns a reporter for windows made with cfg.
func NewReporter(cfg *metrics.Config) (*Reporter, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return &Reporter{
		cfg:      c,
		pairs:    make(map[qpEnd]pairing),
		cmReq:    make(map[cmReqKey]pairing),
		cnp:      make(map[int32]uint64),
		maxPairs: 4 * c.TableSize,
		open:     make(map[eventKey]openEvent),
		next:     make(map[eventKey]openEvent),
		active:   make(map[decode.Addr]int),
		prevMem:  scratch.NewArray[flowRate](),
		curMem:   scratch.NewArray[flowRate](),
		nextMem:  scratch.NewArray[int32](),
	}, nil
}

// CM attribute IDs of the messages that pair QPs.
const (
	cmConnectRequest = 0x0010
	cmConnectReply   = 0x0013
)

// learn records the QP pairs a window shows: from CM REQ/REP exchanges, and,
// in a window merged from several hosts, from flows whose source QP a host
// learned, so that a flow another host saw without its reverse direction
// gets it too. In one host's window that would be a map lookup per flow and
// window for nothing: the engine pairs the two directions of a connection
// on one worker, and its QP table keeps them paired across windows.
func (rp *Reporter) learn(w *metrics.Window) {
	for _, m := range w.CM {
		switch m.AttrID {
		case cmConnectRequest:
			if len(rp.cmReq) >= rp.maxPairs {
				forget(rp.cmReq, rp.now-pairTTL/w.Length)
			}
			if len(rp.cmReq) < rp.maxPairs {
				rp.cmReq[cmReqKey{m.Src, m.LocalCommID}] = pairing{end(m.Src, m.LocalQPN), rp.now}
			}
		case cmConnectReply:
			k := cmReqKey{m.Dst, m.RemoteCommID}
			if req, ok := rp.cmReq[k]; ok {
				delete(rp.cmReq, k)
				rp.pair(req.peer, end(m.Src, m.LocalQPN), w.Length)
			}
		}
	}
	if len(w.Hosts) < 2 {
		return
	}
	for i := range w.Flows {
		f := &w.Flows[i]
		if f.SQPKnown {
			rp.pair(end(f.Key.Src, f.SQP), end(f.Key.Dst, f.Key.DQP), w.Length)
		}
	}
}

// pair records that a and b are the two ends of a connection, replacing
// what either was paired with before. When the table is full, pairs unseen
// for pairTTL are forgotten first, then all but those of this window.
func (rp *Reporter) pair(a, b qpEnd, length int64) {
	if old, ok := rp.pairs[a]; ok && old.peer == b {
		// Seen again: refresh the pair's age now and then, not in
		// every window (a map write per flow and window).
		if rp.now-old.seen >= pairTTL/length/4 {
			rp.pairs[a], rp.pairs[b] = pairing{b, rp.now}, pairing{a, rp.now}
		}
		return
	}
	for _, e := range [2]qpEnd{a, b} {
		if old, ok := rp.pairs[e]; ok && rp.pairs[old.peer].peer == e {
			delete(rp.pairs, old.peer)
		}
	}
	if len(rp.pairs)+2 > rp.maxPairs {
		forget(rp.pairs, rp.now-pairTTL/length)
	}
	if len(rp.pairs)+2 > rp.maxPairs {
		forget(rp.pairs, rp.now)
	}
	if len(rp.pairs)+2 <= rp.maxPairs {
		rp.pairs[a], rp.pairs[b] = pairing{b, rp.now}, pairing{a, rp.now}
	}
}

// forget deletes the entries of m last seen before window before.
func forget[K comparable](m map[K]pairing, before int64) {
	for k, v := range m {
		if v.seen < before {
			delete(m, k)
		}
	}
}

// Build returns the report of w, a normalized window, which must follow
// the previously built one in time. The report's lists are its own.
func (rp *Reporter) Build(w *metrics.Window) *Report {
	rp.now = w.Index()
	rp.learn(w)
	r := &Report{Window: w, Flows: w.Distinct.Estimate()}
	r.Exact = w.Counters[metrics.UntrackedPackets] == 0
	secs := Seconds(w)
	idx := w.Index()
	// A flow's rate is compared with the previous window's only when
	// there is one: the first window of a run has no jitter.
	hasPrev := rp.built && rp.prevIdx == idx-1
	if !hasPrev {
		rp.prev = rp.prev[:0]
	}

	flows := w.Flows
	// The pass below also counts the flows into the directory of the
	// window's flows by hash and lists those that carried CNPs, which
	// need the directory: a pass of its own each read every record.
	rp.index.begin(w)
	rp.carriers = rp.carriers[:0]
	rp.cur = rp.curMem.Resize(len(flows))[:0]
	top := newTopList(rp.cfg.Top, func(i, j int32) int { return byBytes(&flows[i], &flows[j]) })
	topRetrans := newTopList(rp.cfg.Top, func(i, j int32) int {
		return byCount(flows[i].C[metrics.FlowRetransmits], flows[j].C[metrics.FlowRetransmits], &flows[i], &flows[j])
	})
	var elephants, jitter []int32
	// Elephants of the previous window that sent nothing in this one:
	// their rate fell to zero, which is jitter too.
	var vanished []FlowReport
	fellSilent := func(p *flowRate) {
		if rp.isJitter(0, p.rate) {
			vanished = append(vanished, FlowReport{FlowRecord: metrics.FlowRecord{Key: p.key}, PrevRate: p.rate, Jitter: true})
		}
	}
	// A summary names no events: its windows' reports do, and its
	// flows' activity spans windows.
	findEvents := !rp.summing
	gatherDsts := findEvents && w.Burst > 0 // for the incast search (events)
	if findEvents {
		rp.resetDsts(len(flows))
	}
	j := 0
	for i := range flows {
		f := &flows[i]
		if gatherDsts {
			rp.addDst(int32(i), f)
		}
		rate := float64(f.C[metrics.FlowBytes]) * 8 / secs
		prev := 0.0
		for ; j < len(rp.prev) && compareRate(&rp.prev[j], f) < 0; j++ {
			fellSilent(&rp.prev[j])
		}
		if j < len(rp.prev) && rp.prev[j].key.Equal(&f.Key) {
			prev = rp.prev[j].rate
			j++
		}
		// Field by field into room made above: a composite literal is
		// staged on the stack, and the copy's loads of the key wait for
		// its stores (a third of Build's samples in perf).
		rp.cur = rp.cur[:len(rp.cur)+1]
		c := &rp.cur[len(rp.cur)-1]
		c.hash = f.Hash()
		rp.index.add(c.hash)
		if f.C[metrics.FlowCNPCarried] > 0 {
			rp.carriers = append(rp.carriers, int32(i))
		}
		c.key = f.Key
		c.rate = rate
		top.offer(int32(i))
		if f.C[metrics.FlowRetransmits] > 0 {
			topRetrans.offer(int32(i))
		}
		if rate >= rp.cfg.ElephantRate {
			elephants = append(elephants, int32(i))
		}
		if hasPrev && rp.isJitter(rate, prev) {
			jitter = append(jitter, int32(i))
		}
	}
	for ; j < len(rp.prev); j++ {
		fellSilent(&rp.prev[j])
	}
	rp.index.done(w)
	if rp.summing {
		clear(rp.cnp)
	} else {
		rp.attributeCNPs(w)
	}
	r.CNPUnattributed = rp.cnp[unattributed]
	if len(rp.cnp) > 0 {
		r.cnp = maps.Clone(rp.cnp)
	}
	report := func(i int32) FlowReport { return rp.flowReport(w, i, secs, hasPrev) }
	r.Top = collect(top.sorted(), report)
	r.Elephants = collect(sortByBytes(flows, elephants), report)
	r.Jitter = append(collect(sortByBytes(flows, jitter), report), vanished...)
	r.TopRetransmits = collect(topRetrans.sorted(), report)
	// CNPs: attributed to the window's flows now, or (a Summary's)
	// carried by their records already.
	cnps := func(i int32) uint64 { return rp.cnp[i] + flows[i].C[metrics.FlowCNP] }
	topCNP := newTopList(rp.cfg.Top, func(i, j int32) int { return byCount(cnps(i), cnps(j), &flows[i], &flows[j]) })
	for i := range rp.cnp {
		if i != unattributed {
			topCNP.offer(i)
		}
	}
	if findEvents {
		rp.events(w, r, hasPrev)
		r.EventFlows = collect(eventFlows(r.Events), report)
	} else {
		for i := range flows {
			if flows[i].C[metrics.FlowCNP] > 0 {
				topCNP.offer(int32(i))
			}
		}
	}
	r.TopCNP = collect(topCNP.sorted(), report)
	if !r.Exact {
		r.Top = rp.mergeEstimated(r.Top, w, secs)
	}
	if rp.cfg.Exact {
		r.All = make([]FlowReport, len(flows))
		for i := range flows {
			r.All[i] = report(int32(i))
		}
		if r.Exact {
			r.SketchError = sketchError(w, r)
		}
	}
	r.ReadLatency = summarize(w.ReadLatency)
	r.AckLatency = summarize(w.AckLatency)
	rp.prev, rp.cur = rp.cur, rp.prev
	rp.prevMem, rp.curMem = rp.curMem, rp.prevMem
	rp.prevIdx, rp.built = idx, true
	return r
}

// Seconds returns the time rates in w are computed over: the part of the
// window the input covered (less than the window for the first and last
// windows of a capture), or the whole window when it covered none.
func Seconds(w *metrics.Window) float64 {
	if c := w.Covered(); c > 0 {
		return float64(c) / 1e9
	}
	return float64(w.Length) / 1e9
}

// compareRate orders a previous window's flow against a record, in the
// canonical order of flow lists.
func compareRate(p *flowRate, f *metrics.FlowRecord) int {
	if h := f.Hash(); p.hash != h {
		return cmp.Compare(p.hash, h)
	}
	if p.key.Equal(&f.Key) {
		return 0 // the same flow, as two of one hash nearly always are
	}
	return p.key.Compare(f.Key)
}

// flowReport returns the report of flow i of w: its record with the source
// QP the learned pairs give, the CNPs attributed to it, its rates and marks.
func (rp *Reporter) flowReport(w *metrics.Window, i int32, secs float64, hasPrev bool) FlowReport {
	f := FlowReport{FlowRecord: w.Flows[i]}
	fl := rp.flow(&f.FlowRecord)
	f.SQP, f.SQPKnown = fl.SQP, fl.SQPKnown
	f.C[metrics.FlowCNP] += rp.cnp[i]
	f.Rate = float64(f.C[metrics.FlowBytes]) * 8 / secs
	if hasPrev {
		if j, ok := slices.BinarySearchFunc(rp.prev, &f.FlowRecord, func(p flowRate, f *metrics.FlowRecord) int { return compareRate(&p, f) }); ok {
			f.PrevRate = rp.prev[j].rate
		}
	}
	f.Elephant = f.Rate >= rp.cfg.ElephantRate
	f.Jitter = hasPrev && rp.isJitter(f.Rate, f.PrevRate)
	return f
}

// collect returns the reports of the flows at idx.
func collect(idx []int32, report func(int32) FlowReport) []FlowReport {
	out := make([]FlowReport, len(idx))
	for k, i := range idx {
		out[k] = report(i)
	}
	return out
}

// attributeCNPs finds, for each flow of w that carried CNPs (rp.carriers),
// the flow they throttle, and counts the CNPs in rp.cnp by the throttled
// flow's position (unattributed when it is not in the window): a CNP
// travels from the responder B to the requester A with A's QP as its
// destination QP, and throttles A→B toward B's QP.
func (rp *Reporter) attributeCNPs(w *metrics.Window) {
	clear(rp.cnp)
	for _, i := range rp.carriers {
		y := &w.Flows[i]
		j := int32(unattributed)
		if fl := rp.flow(y); fl.SQPKnown {
			if k := rp.index.find(w, metrics.FlowKey{Src: y.Key.Dst, Dst: y.Key.Src, DQP: fl.SQP}); k >= 0 {
				j = k
			}
		}
		rp.cnp[j] += y.C[metrics.FlowCNPCarried]
	}
}

// unattributed is the key of rp.cnp for CNPs whose throttled flow is not
// in the window.
const unattributed = -1

// isJitter reports whether a flow going from rate prev to cur is a jitter
// flow: an elephant in either window whose rate changed by at least the
// jitter rate.
func (rp *Reporter) isJitter(cur, prev float64) bool {
	return max(cur, prev) >= rp.cfg.ElephantRate && abs(cur-prev) >= rp.cfg.JitterRate
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// topList keeps the n first flows in an order as they are offered, in a
// heap whose root is the last of them, so that a top list of a window of a
// million flows costs one pass, not a sort.
type topList struct {
	n     int
	order func(i, j int32) int // < 0 when flow i comes before flow j
	h     []int32
}

func newTopList(n int, order func(i, j int32) int) *topList { return &topList{n: n, order: order} }

// less reports whether flow i comes before flow j.
func (t *topList) less(i, j int32) bool { return t.order(i, j) < 0 }

// offer considers flow i.
func (t *topList) offer(i int32) {
	h := t.h
	switch {
	case len(h) < t.n:
		h = append(h, i)
		for c := len(h) - 1; c > 0; {
			p := (c - 1) / 2
			if !t.less(h[p], h[c]) {
				break
			}
			h[c], h[p] = h[p], h[c]
			c = p
		}
	case t.n > 0 && t.less(i, h[0]):
		h[0] = i
		for c := 0; ; {
			m, l, r := c, 2*c+1, 2*c+2
			if l < len(h) && t.less(h[m], h[l]) {
				m = l
			}
			if r < len(h) && t.less(h[m], h[r]) {
				m = r
			}
			if m == c {
				break
			}
			h[c], h[m] = h[m], h[c]
			c = m
		}
	}
	t.h = h
}

// sorted returns the kept flows, first first.
func (t *topList) sorted() []int32 {
	slices.SortFunc(t.h, t.order)
	return t.h
}

// sortByBytes sorts the positions idx of flows by bytes, largest first,
// ties by key, and returns idx.
func sortByBytes(flows []metrics.FlowRecord, idx []int32) []int32 {
	slices.SortFunc(idx, func(i, j int32) int { return byBytes(&flows[i], &flows[j]) })
	return idx
}

// byCount orders flows a and b by counts na and nb, largest first, then by
// key.
func byCount(na, nb uint64, a, b *metrics.FlowRecord) int {
	if c := cmp.Compare(nb, na); c != 0 {
		return c
	}
	return a.Key.Compare(b.Key)
}

// eventFlows returns the positions of the flows evs name, each once, in
// window order.
func eventFlows(evs []Event) []int32 {
	var idx []int32
	for i := range evs {
		idx = append(idx, evs[i].flows...)
	}
	slices.Sort(idx)
	return slices.Compact(idx)
}

// byBytes orders flows by bytes, largest first, then by key.
func byBytes(a, b *metrics.FlowRecord) int {
	if c := cmp.Compare(b.C[metrics.FlowBytes], a.C[metrics.FlowBytes]); c != 0 {
		return c
	}
	return a.Key.Compare(b.Key)
}

// mergeEstimated completes the top list of a window whose QP tables
// overflowed with the heavy hitters the sketch saw. Their figures are
// bounds: bytes the smaller of the heavy-hitter and Count-Min estimates
// (each never below the truth), BytesMin what the heavy-hitter table
// guarantees, packets the Count-Min estimate.
func (rp *Reporter) mergeEstimated(top []FlowReport, w *metrics.Window, secs float64) []FlowReport {
	for _, e := range w.Top.Top(nil) {
		if slices.ContainsFunc(top, func(f FlowReport) bool { return f.Key == e.Key }) {
			continue
		}
		f := FlowReport{FlowRecord: metrics.FlowRecord{Key: e.Key}, Estimated: true}
		f.C[metrics.FlowBytes] = min(e.Count, w.FlowBytes.Estimate(e.Hash))
		f.C[metrics.FlowPackets] = w.FlowPackets.Estimate(e.Hash)
		f.BytesMin = min(e.Count-min(e.Error, e.Count), f.C[metrics.FlowBytes])
		f.Rate = float64(f.C[metrics.FlowBytes]) * 8 / secs
		f.Elephant = f.Rate >= rp.cfg.ElephantRate
		top = append(top, f)
	}
	slices.SortFunc(top, func(a, b FlowReport) int { return byBytes(&a.FlowRecord, &b.FlowRecord) })
	return top[:min(len(top), rp.cfg.Top)]
}

// summarize reads the usual quantiles off a latency sketch.
func summarize(q *sketch.Quantile) LatencySummary {
	if q.Count() == 0 {
		return LatencySummary{}
	}
	return LatencySummary{
		Count: q.Count(),
		P50:   q.Quantile(0.5),
		P90:   q.Quantile(0.9),
		P99:   q.Quantile(0.99),
		P999:  q.Quantile(0.999),
		Max:   q.Max(),
	}
}

// sketchError measures the sketches against the exact flow records.
func sketchError(w *metrics.Window, r *Report) *SketchError {
	flows := r.All
	se := &SketchError{}
	if n := float64(len(flows)); n > 0 {
		se.FlowsRelErr = abs(r.Flows.Value-n) / n
		var sum float64
		for i := range flows {
			f := &flows[i]
			h := f.Key.Hash(w.Seed())
			exact := float64(f.C[metrics.FlowBytes])
			if exact > 0 {
				sum += abs(float64(w.FlowBytes.Estimate(h))-exact) / exact
			}
		}
		se.CountMinARE = sum / n
	}
	want := make(map[metrics.FlowKey]bool, len(r.Top))
	for _, f := range r.Top {
		want[f.Key] = true
	}
	got := w.Top.Top(nil)
	if len(got) > len(r.Top) {
		got = got[:len(r.Top)]
	}
	hit := 0
	for _, e := range got {
		if want[e.Key] {
			hit++
		}
	}
	if len(want) > 0 {
		se.TopRecall = float64(hit) / float64(len(want))
	}
	if len(got) > 0 {
		se.TopPrec = float64(hit) / float64(len(got))
	}
	return se
}
