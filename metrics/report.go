package metrics

import (
	"cmp"
	"slices"
	"time"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/sketch"
)

// Report is what rocescope says about one window: the window's exact
// counters, its flow estimates and the flows worth naming. It is built from
// a merged [Window] by a [Reporter] and written by the exporters.
type Report struct {
	Window    *Window         // the state the report was built from
	Flows     sketch.Estimate // distinct flows, estimated
	Exact     bool            // every flow was held by the QP tables: per-flow figures are exact
	Top       []FlowReport    // largest flows by bytes, largest first
	Elephants []FlowReport    // flows with rate ≥ the elephant rate, fastest first
	Jitter    []FlowReport    // elephants of this or the previous window whose rate changed by ≥ the jitter rate
	All       []FlowReport    // every flow, by key (with Config.Exact)

	// CNPUnattributed counts CNPs whose throttled flow is unknown (its
	// source QP was never learned, or it sent nothing in this window).
	CNPUnattributed uint64
	// ReadLatency and AckLatency summarize the latencies seen at the
	// mirror point, in ns.
	ReadLatency, AckLatency LatencySummary
	// SketchError holds the sketches' measured error against the exact
	// flow records (with Config.Exact and an exact window).
	SketchError *SketchError
}

// FlowReport is one flow of a report.
type FlowReport struct {
	FlowRecord
	Rate      float64 // bits/s over the window
	PrevRate  float64 // bits/s over the previous window
	Elephant  bool
	Jitter    bool
	Estimated bool // from the sketches only: the QP table could not hold the flow
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
type Reporter struct {
	cfg      Config
	prevIdx  int64
	prev     []flowRate // previous window's flows, sorted by key
	cur      []flowRate
	flows    []FlowReport // the last report's flows, reused
	pairs    map[qpEnd]pairing
	cmReq    map[cmReqKey]pairing
	maxPairs int
	now      int64 // index of the window being built
}

// flowRate is a flow's rate in a window.
type flowRate struct {
	key  FlowKey
	rate float64
}

// qpEnd is one end of a connection: an address and a QPN.
type qpEnd struct {
	addr decode.Addr
	qpn  uint32
}

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
func NewReporter(cfg *Config) (*Reporter, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Reporter{
		cfg:      c,
		prevIdx:  noWindow,
		pairs:    make(map[qpEnd]pairing),
		cmReq:    make(map[cmReqKey]pairing),
		maxPairs: 4 * c.TableSize,
	}, nil
}

// CM attribute IDs of the messages that pair QPs.
const (
	cmConnectRequest = 0x0010
	cmConnectReply   = 0x0013
)

// learn records the QP pairs a window shows: from CM REQ/REP exchanges and
// from flows whose source QP the engine learned.
func (rp *Reporter) learn(w *Window) {
	for _, m := range w.CM {
		switch m.AttrID {
		case cmConnectRequest:
			if len(rp.cmReq) >= rp.maxPairs {
				forget(rp.cmReq, rp.now-pairTTL/w.Length)
			}
			if len(rp.cmReq) < rp.maxPairs {
				rp.cmReq[cmReqKey{m.Src, m.LocalCommID}] = pairing{qpEnd{m.Src, m.LocalQPN}, rp.now}
			}
		case cmConnectReply:
			k := cmReqKey{m.Dst, m.RemoteCommID}
			if req, ok := rp.cmReq[k]; ok {
				delete(rp.cmReq, k)
				rp.pair(req.peer, qpEnd{m.Src, m.LocalQPN}, w.Length)
			}
		}
	}
	for i := range w.Flows {
		f := &w.Flows[i]
		if f.SQPKnown {
			rp.pair(qpEnd{f.Key.Src, f.SQP}, qpEnd{f.Key.Dst, f.Key.DQP}, w.Length)
		}
	}
}

// pair records that a and b are the two ends of a connection, replacing
// what either was paired with before. When the table is full, pairs unseen
// for pairTTL are forgotten first, then all but those of this window.
func (rp *Reporter) pair(a, b qpEnd, length int64) {
	if old, ok := rp.pairs[a]; ok && old.peer == b {
		rp.pairs[a], rp.pairs[b] = pairing{b, rp.now}, pairing{a, rp.now} // seen again
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
// the previously built one in time. The report's All list shares memory
// with the reporter: it is valid until the next call of Build.
func (rp *Reporter) Build(w *Window) *Report {
	rp.now = w.index()
	rp.learn(w)
	r := &Report{Window: w, Flows: w.Distinct.Estimate()}
	r.Exact = w.Counters[UntrackedPackets] == 0
	secs := float64(w.Length) / 1e9
	idx := w.index()
	if rp.prevIdx != idx-1 {
		rp.prev = rp.prev[:0]
	}

	flows := slices.Grow(rp.flows[:0], len(w.Flows))[:len(w.Flows)]
	rp.flows = flows
	rp.cur = rp.cur[:0]
	for i := range w.Flows {
		f := &flows[i]
		*f = FlowReport{FlowRecord: w.Flows[i]}
		if !f.SQPKnown {
			if p, ok := rp.pairs[qpEnd{f.Key.Dst, f.Key.DQP}]; ok && p.peer.addr == f.Key.Src {
				f.SQP, f.SQPKnown = p.peer.qpn, true
			}
		}
		f.Rate = float64(f.C[FlowBytes]) * 8 / secs
		rp.cur = append(rp.cur, flowRate{f.Key, f.Rate})
	}
	r.CNPUnattributed = rp.attributeCNPs(flows)
	rp.markRates(flows)

	r.Top = topFlows(flows, rp.cfg.Top, nil)
	r.Elephants = topFlows(flows, len(flows), func(f *FlowReport) bool { return f.Elephant })
	r.Jitter = topFlows(flows, len(flows), func(f *FlowReport) bool { return f.Jitter })
	r.Jitter = append(r.Jitter, rp.vanished(w.Flows)...)
	if !r.Exact {
		r.Top = rp.mergeEstimated(r.Top, w, secs)
	}
	if rp.cfg.Exact {
		r.All = flows
		if r.Exact {
			r.SketchError = sketchError(w, flows, r)
		}
	}
	r.ReadLatency = summarize(w.ReadLatency)
	r.AckLatency = summarize(w.AckLatency)
	rp.prev, rp.cur = rp.cur, rp.prev
	rp.prevIdx = idx
	return r
}

// attributeCNPs adds the CNPs each flow carried to the flow they throttle:
// a CNP travels from the responder B to the requester A with A's QP as its
// destination QP, and throttles A→B toward B's QP. It returns the CNPs
// whose throttled flow is not in the window.
func (rp *Reporter) attributeCNPs(flows []FlowReport) (unattributed uint64) {
	for i := range flows {
		y := &flows[i]
		n := y.C[FlowCNPCarried]
		if n == 0 {
			continue
		}
		// y runs B→A toward A's QP; the throttled flow runs A→B toward B's.
		// Build has filled in the source QP from the learned pairs.
		qb, ok := y.SQP, y.SQPKnown
		if ok {
			fwd := FlowKey{Src: y.Key.Dst, Dst: y.Key.Src, DQP: qb}
			if j, found := slices.BinarySearchFunc(flows, fwd, func(f FlowReport, k FlowKey) int { return compareKeys(f.Key, k) }); found {
				flows[j].C[FlowCNP] += n
				continue
			}
		}
		unattributed += n
	}
	return unattributed
}

// markRates sets each flow's previous rate and its elephant and jitter
// marks, joining the sorted flow lists of this and the previous window.
func (rp *Reporter) markRates(flows []FlowReport) {
	j := 0
	for i := range flows {
		f := &flows[i]
		for j < len(rp.prev) && compareKeys(rp.prev[j].key, f.Key) < 0 {
			j++
		}
		if j < len(rp.prev) && rp.prev[j].key == f.Key {
			f.PrevRate = rp.prev[j].rate
		}
		f.Elephant = f.Rate >= rp.cfg.ElephantRate
		f.Jitter = rp.isJitter(f.Rate, f.PrevRate)
	}
}

// isJitter reports whether a flow going from rate prev to cur is a jitter
// flow: an elephant in either window whose rate changed by at least the
// jitter rate.
func (rp *Reporter) isJitter(cur, prev float64) bool {
	return max(cur, prev) >= rp.cfg.ElephantRate && abs(cur-prev) >= rp.cfg.JitterRate
}

// vanished returns the previous window's elephants that sent nothing in
// this one: their rate fell to zero, which is jitter too.
func (rp *Reporter) vanished(flows []FlowRecord) []FlowReport {
	var out []FlowReport
	i := 0
	for _, p := range rp.prev {
		for i < len(flows) && compareKeys(flows[i].Key, p.key) < 0 {
			i++
		}
		if i < len(flows) && flows[i].Key == p.key {
			continue
		}
		if rp.isJitter(0, p.rate) {
			out = append(out, FlowReport{FlowRecord: FlowRecord{Key: p.key}, PrevRate: p.rate, Jitter: true})
		}
	}
	return out
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// topFlows returns up to n flows for which keep is true (every flow when
// keep is nil), by bytes, largest first, ties broken by key so the order is
// deterministic. It keeps the n largest in a min-heap as it goes, so a top
// list of a window of a million flows costs one pass, not a sort.
func topFlows(flows []FlowReport, n int, keep func(*FlowReport) bool) []FlowReport {
	var h []*FlowReport
	for i := range flows {
		f := &flows[i]
		if keep != nil && !keep(f) {
			continue
		}
		if len(h) < n {
			h = append(h, f)
			heapUp(h, len(h)-1)
		} else if n > 0 && byBytes(f, h[0]) < 0 {
			h[0] = f
			heapDown(h, 0)
		}
	}
	out := make([]FlowReport, len(h))
	for i, f := range h {
		out[i] = *f
	}
	slices.SortFunc(out, func(a, b FlowReport) int { return byBytes(&a, &b) })
	return out
}

// byBytes orders flows by bytes, largest first, then by key.
func byBytes(a, b *FlowReport) int {
	if c := cmp.Compare(b.C[FlowBytes], a.C[FlowBytes]); c != 0 {
		return c
	}
	return compareKeys(a.Key, b.Key)
}

// heapUp and heapDown keep h a heap whose root is the flow that byBytes
// puts last: the smallest of the top list.
func heapUp(h []*FlowReport, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if byBytes(h[i], h[p]) <= 0 {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func heapDown(h []*FlowReport, i int) {
	for {
		m, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && byBytes(h[l], h[m]) > 0 {
			m = l
		}
		if r < len(h) && byBytes(h[r], h[m]) > 0 {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// mergeEstimated completes the top list of a window whose QP tables
// overflowed with the heavy hitters the sketch saw.
func (rp *Reporter) mergeEstimated(top []FlowReport, w *Window, secs float64) []FlowReport {
	for _, e := range w.Top.Top(nil) {
		if slices.ContainsFunc(top, func(f FlowReport) bool { return f.Key == e.Key }) {
			continue
		}
		f := FlowReport{FlowRecord: FlowRecord{Key: e.Key}, Estimated: true}
		f.C[FlowBytes] = e.Count
		f.Rate = float64(e.Count) * 8 / secs
		f.Elephant = f.Rate >= rp.cfg.ElephantRate
		top = append(top, f)
	}
	return topFlows(top, rp.cfg.Top, nil)
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
func sketchError(w *Window, flows []FlowReport, r *Report) *SketchError {
	se := &SketchError{}
	if n := float64(len(flows)); n > 0 {
		se.FlowsRelErr = abs(r.Flows.Value-n) / n
		var sum float64
		for i := range flows {
			f := &flows[i]
			h := f.Key.hash(w.sketchConfig.Seed)
			exact := float64(f.C[FlowBytes])
			if exact > 0 {
				sum += abs(float64(w.FlowBytes.Estimate(h))-exact) / exact
			}
		}
		se.CountMinARE = sum / n
	}
	want := make(map[FlowKey]bool, len(r.Top))
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
