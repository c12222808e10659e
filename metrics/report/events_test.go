package report

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
)

// trace builds frames by hand, in any order; frames sorts them by time.
type trace []capture.Frame

// ms returns the time ms milliseconds (and us microseconds) after the
// epoch of the hand-made frames.
func ms(m, us float64) int64 {
	return testframes.Epoch + int64(m*float64(time.Millisecond)) + int64(us*float64(time.Microsecond))
}

func (tr *trace) add(t int64, b []byte) {
	*tr = append(*tr, capture.Frame{Data: b, Time: t, OrigLen: uint32(len(b)), Link: decode.LinkEthernet})
}

func (tr trace) frames() []capture.Frame {
	f := slices.Clone(tr)
	slices.SortStableFunc(f, func(x, y capture.Frame) int { return int(x.Time - y.Time) })
	return f
}

// conn is a connection of the hand-made traces: requests from a to b to
// QP qb, answers from b to a to QP qa, both from UDP port sport.
type conn struct {
	a, b   [4]byte
	qa, qb uint32
	sport  uint16
	psn    uint32
}

func (c *conn) fwd() metrics.FlowKey {
	return metrics.FlowKey{Src: decode.AddrFrom4(c.a), Dst: decode.AddrFrom4(c.b), DQP: c.qb}
}

// write adds a WRITE Middle of payload bytes at t, marked CE when ce.
func (c *conn) write(tr *trace, t int64, payload int, ce bool) []byte {
	f := testframes.RoCE{Src: c.a, Dst: c.b, Sport: c.sport, Op: testframes.OpWriteMiddle, DQP: c.qb, PSN: c.psn, Payload: payload}
	if ce {
		f.ECN = 3
	}
	c.psn++
	b := f.Bytes()
	tr.add(t, b)
	return b
}

// back adds an ACK (syndrome 0x1f), a NAK or RNR NAK (syndrome), or with
// cnp a CNP, from b to a at t.
func (c *conn) back(tr *trace, t int64, syndrome uint8, cnp bool) {
	f := testframes.RoCE{Src: c.b, Dst: c.a, Sport: c.sport, Op: testframes.OpAck, DQP: c.qa, PSN: c.psn - 1, Ext: testframes.AETH(syndrome, 1)}
	if cnp {
		f = testframes.RoCE{Src: c.b, Dst: c.a, Sport: c.sport, Op: testframes.OpCNP, DQP: c.qa, Ext: make([]byte, 16)}
	}
	tr.add(t, f.Bytes())
}

// build runs the engine over frames, as one host or split by connection
// over hosts merged, and returns the reports of every window.
func build(t *testing.T, cfg *metrics.Config, frames []capture.Frame, hosts int) []*Report {
	t.Helper()
	var wins []*metrics.Window
	for i, part := range testframes.SplitByConnection(frames, hosts) {
		c := *cfg
		c.Host = string(rune('a' + i))
		for j, w := range enginetest.Run(t, &c, &testframes.Source{Frames: part, Per: 7}) {
			if j >= len(wins) {
				wins = append(wins, w)
			} else if err := wins[j].Merge(w); err != nil {
				t.Fatal(err)
			}
		}
	}
	rp, err := NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Report
	for _, w := range wins {
		w.Normalize()
		out = append(out, rp.Build(w))
	}
	return out
}

// eventOpts compare events by their exported fields, floats within a
// part per million.
var eventOpts = cmp.Options{
	cmp.Comparer(func(a, b decode.Addr) bool { return a == b }),
	cmpopts.IgnoreUnexported(Event{}, metrics.FlowRecord{}),
	cmpopts.EquateApprox(1e-6, 0),
}

// TestIncast: five sources bursting into one destination for 3 ms make
// one incast, with its senders, bytes, shares, CE marks, CNPs and peak
// exact; one source with five QPs at the same rate, and an even fan-in of
// eight slow sources, make none; an incast across the end of a window is
// reported in both, with one ID. The same from one host and from two
// hosts, each with part of the connections, merged.
func TestIncast(t *testing.T) {
	var tr trace
	d := [4]byte{10, 9, 0, 1}
	var senders []*conn
	var size uint64
	for i := range 5 {
		c := &conn{a: [4]byte{10, 9, 1, byte(i + 1)}, b: d, qa: 0x800 + uint32(i), qb: 0x900 + uint32(i), sport: 40000 + uint16(i)}
		senders = append(senders, c)
		for slot := 3; slot < 6; slot++ {
			for k := range 11 {
				size = uint64(len(c.write(&tr, ms(float64(slot), 90*float64(k)), 4096, slot == 3 && k == 0)))
			}
			c.back(&tr, ms(float64(slot), 995), 0x1f, false)
		}
		c.back(&tr, ms(4, 500), 0, true) // a CNP
	}
	// One source, five QPs, the same rate: no incast.
	for i := range 5 {
		c := &conn{a: [4]byte{10, 9, 2, 1}, b: [4]byte{10, 9, 0, 2}, qa: 0x700 + uint32(i), qb: 0x600 + uint32(i), sport: 41000 + uint16(i)}
		for k := range 33 {
			c.write(&tr, ms(3, 90*float64(k)), 4096, false)
		}
	}
	// Eight sources, a frame each per ms all window long: no incast.
	for i := range 8 {
		c := &conn{a: [4]byte{10, 9, 3, byte(i + 1)}, b: [4]byte{10, 9, 0, 3}, qa: 0x500 + uint32(i), qb: 0x400 + uint32(i), sport: 42000 + uint16(i)}
		for slot := range 1000 {
			c.write(&tr, ms(float64(slot), 17), 1024, false)
		}
	}
	// Four sources into one destination at 998-1002 ms.
	var late []*conn
	for i := range 4 {
		c := &conn{a: [4]byte{10, 9, 4, byte(i + 1)}, b: [4]byte{10, 9, 0, 4}, qa: 0x300 + uint32(i), qb: 0x200 + uint32(i), sport: 43000 + uint16(i)}
		late = append(late, c)
		for slot := 998; slot < 1002; slot++ {
			for k := range 8 {
				c.write(&tr, ms(float64(slot), 100*float64(k)), 4096, false)
			}
		}
	}
	cfg := &metrics.Config{Workers: 2, LinkRate: 1e9} // 100 kB in a 1 ms slot is 80 %
	per := size * 11 * 3
	want := &Incast{Dst: decode.AddrFrom4(d), SenderCount: 5, Sources: 5, PeakBPS: float64(5*11*size) * 8 / 1e-3,
		Bytes: 5 * per, ECNCE: 5, CNP: 5}
	for _, c := range senders {
		want.Senders = append(want.Senders, Sender{Flow: Flow{Key: c.fwd(), SQP: c.qa, SQPKnown: true}, Bytes: per, Share: 0.2})
	}
	slices.SortFunc(want.Senders, func(x, y Sender) int { return x.Key.Compare(y.Key) })
	lateSenders := func(slots uint64) []Sender {
		var s []Sender
		for _, c := range late {
			s = append(s, Sender{Flow: Flow{Key: c.fwd()}, Bytes: slots * 8 * size, Share: 0.25}) // no answer: no source QP
		}
		slices.SortFunc(s, func(x, y Sender) int { return x.Key.Compare(y.Key) })
		return s
	}
	lateDst := decode.AddrFrom4([4]byte{10, 9, 0, 4})
	for _, hosts := range []int{1, 2} {
		reports := build(t, cfg, tr.frames(), hosts)
		if len(reports) != 2 {
			t.Fatalf("%d windows", len(reports))
		}
		var got [][]Event
		for _, r := range reports {
			var in []Event
			for _, e := range r.Events {
				if e.Kind == EventIncast {
					in = append(in, e)
				}
			}
			got = append(got, in)
		}
		if len(got[0]) != 2 || len(got[1]) != 1 {
			t.Fatalf("%d hosts: %d and %d incasts, want 2 and 1: %v", hosts, len(got[0]), len(got[1]), got)
		}
		first := Event{Kind: EventIncast, ID: got[0][0].ID, Start: ms(3, 0), End: ms(6, 0), Incast: want}
		if diff := cmp.Diff(first, got[0][0], eventOpts); diff != "" {
			t.Errorf("%d hosts: the burst (-want +got):\n%s", hosts, diff)
		}
		peak := float64(4*8*size) * 8 / 1e-3
		for i, w := range []Event{
			{Kind: EventIncast, Start: ms(998, 0), End: ms(1000, 0), Ongoing: true,
				Incast: &Incast{Dst: lateDst, Senders: lateSenders(2), SenderCount: 4, Sources: 4, PeakBPS: peak, Bytes: 2 * 4 * 8 * size}},
			{Kind: EventIncast, Start: ms(998, 0), End: ms(1002, 0),
				Incast: &Incast{Dst: lateDst, Senders: lateSenders(2), SenderCount: 4, Sources: 4, PeakBPS: peak, Bytes: 2 * 4 * 8 * size}},
		} {
			g := got[i][len(got[i])-1]
			w.ID = got[0][1].ID
			if diff := cmp.Diff(w, g, eventOpts); diff != "" {
				t.Errorf("%d hosts: window %d, the incast across windows (-want +got):\n%s", hosts, i, diff)
			}
		}
		if got[0][0].ID == got[0][1].ID {
			t.Errorf("two incasts share ID %v", got[0][0].ID)
		}
		// Every sender is among the report's flows.
		for _, s := range want.Senders {
			if !slices.ContainsFunc(reports[0].EventFlows, func(f FlowReport) bool { return f.Key == s.Key }) {
				t.Errorf("%d hosts: sender %v is not in event_flows", hosts, s.Key)
			}
		}
	}
}

// TestPFCStorm: a priority paused by one MAC's XOFF frames, refreshed
// every 50 µs, for 300 ms across the end of a window is a storm once 200
// ms of it are seen (in the second window, starting in the first); one
// inside a window is a storm there; one across two window ends is
// reported in both, with one ID and each window's part; a pause every 10
// ms is none.
func TestPFCStorm(t *testing.T) {
	var tr trace
	pfc := func(t int64, mac byte, prio int, q uint16) {
		var quanta [8]uint16
		quanta[prio] = q
		tr.add(t, testframes.PFC([6]byte{0x0c, 0x42, 0xa1, 0, 0, mac}, 1<<prio, quanta))
	}
	storm := func(mac byte, prio int, from, to float64) {
		for i := range int((to - from) * 20) {
			pfc(ms(from, 50*float64(i)), mac, prio, 0xffff)
		}
	}
	storm(1, 4, 850, 1150)
	storm(2, 3, 1200, 1500)
	storm(4, 2, 1700, 2300)
	for i := range 300 {
		pfc(ms(float64(10*i), 3), 3, 3, 0xffff)
	}
	full := int64(335539) // 65535 quanta at 100 Gb/s
	reports := build(t, &metrics.Config{Workers: 1}, tr.frames(), 1)
	if len(reports) != 3 {
		t.Fatalf("%d windows", len(reports))
	}
	var got [3][]Event
	for i, r := range reports {
		got[i] = r.Events
	}
	mac := func(b byte) [6]byte { return [6]byte{0x0c, 0x42, 0xa1, 0, 0, b} }
	last := func(to float64) int64 { return ms(to, -50) + full } // the last frame's pause ends
	span := func(from, to int64, frames uint64, m byte, prio uint8, ongoing bool) Event {
		return Event{Kind: EventPFCStorm, Start: from, End: to, Ongoing: ongoing,
			PFCStorm: &PFCStorm{MAC: mac(m), Priority: prio, PausedNS: to - from, PausedFraction: 1, Frames: frames}}
	}
	a := span(ms(850, 0), last(1150), 6000, 1, 4, false)
	b := span(ms(1200, 0), last(1500), 6000, 2, 3, false)
	c := span(ms(1700, 0), ms(2000, 0), 6000, 4, 2, true)
	c2 := span(ms(1700, 0), last(2300), 6000, 4, 2, false)
	c2.PFCStorm.PausedNS = c2.End - ms(2000, 0) // the part no earlier report gave
	want := [3][]Event{nil, {a, b, c}, {c2}}
	for i := range want {
		for j := range got[i] {
			if j < len(want[i]) {
				want[i][j].ID = got[i][j].ID
			}
		}
		slices.SortFunc(want[i], func(x, y Event) int { return int(x.Start - y.Start) })
		if diff := cmp.Diff(want[i], got[i], eventOpts); diff != "" {
			t.Errorf("window %d (-want +got):\n%s", i, diff)
		}
	}
	if len(got[1]) == 3 && len(got[2]) == 1 && got[1][2].ID != got[2][0].ID {
		t.Errorf("the storm across windows has IDs %v and %v", got[1][2].ID, got[2][0].ID)
	}
}

// TestRetransmissionEvents: the engine's episodes become events with
// their cause, stall and PSN, and the flow in event_flows and
// top_retransmits; below Rules.RetransResent frames an episode is none
// until it reaches them, in a later window then, counted from its start.
func TestRetransmissionEvents(t *testing.T) {
	var tr trace
	nak := &conn{a: [4]byte{10, 8, 0, 1}, b: [4]byte{10, 8, 0, 2}, qa: 0x10, qb: 0x20, sport: 1000, psn: 100}
	for i := range 6 {
		nak.write(&tr, ms(10, float64(i)), 64, false)
	}
	nak.psn = 102
	nak.back(&tr, ms(10, 10), 0x60, false)
	for i := range 4 {
		nak.write(&tr, ms(10, 20+float64(i)), 64, false)
	}
	nak.write(&tr, ms(10, 30), 64, false) // 106: the episode ends
	// A timeout that resends two frames at 999.9 ms and one at 1000.1 ms.
	to := &conn{a: [4]byte{10, 8, 1, 1}, b: [4]byte{10, 8, 1, 2}, qa: 0x11, qb: 0x21, sport: 1001, psn: 500}
	for i := range 3 {
		to.write(&tr, ms(990, float64(i)), 64, false)
	}
	to.psn = 500
	to.write(&tr, ms(999, 900), 64, false)
	to.write(&tr, ms(999, 901), 64, false)
	to.write(&tr, ms(1000, 100), 64, false)
	to.write(&tr, ms(1000, 200), 64, false) // 503: the end
	for _, resent := range []int{1, 3} {
		reports := build(t, &metrics.Config{Workers: 2, Rules: metrics.Rules{RetransResent: resent}}, tr.frames(), 1)
		nakEv := Event{Kind: EventRetransmission, Start: ms(10, 10), End: ms(10, 23),
			Retransmission: &Retransmission{Flow: Flow{Key: nak.fwd(), SQP: nak.qa, SQPKnown: true}, Cause: metrics.CauseNAK, FirstPSN: 102, Resent: 4, StallNS: 10_000}}
		toEv := Event{Kind: EventRetransmission, Start: ms(990, 2), End: ms(999, 901), Ongoing: true,
			Retransmission: &Retransmission{Flow: Flow{Key: to.fwd()}, Cause: metrics.CauseTimeout, FirstPSN: 500, Resent: 2, StallNS: ms(999, 900) - ms(990, 2)}}
		toEv2 := toEv
		toEv2.End, toEv2.Ongoing = ms(1000, 100), false
		to2 := *toEv.Retransmission
		to2.Resent = 1
		toEv2.Retransmission = &to2
		want := [2][]Event{{nakEv, toEv}, {toEv2}}
		if resent == 3 {
			to3 := to2
			to3.Resent = 3 // reported first in the second window: all of it
			toEv2.Retransmission = &to3
			want = [2][]Event{{nakEv}, {toEv2}}
		}
		for i, r := range reports {
			for j := range want[i] {
				if j < len(r.Events) {
					want[i][j].ID = r.Events[j].ID
				}
			}
			if diff := cmp.Diff(want[i], r.Events, eventOpts); diff != "" {
				t.Errorf("resent %d, window %d (-want +got):\n%s", resent, i, diff)
			}
		}
		if r := reports[0]; len(r.TopRetransmits) == 0 || r.TopRetransmits[0].Key != nak.fwd() || len(r.EventFlows) == 0 {
			t.Errorf("resent %d: top_retransmits %v, event_flows %v", resent, r.TopRetransmits, r.EventFlows)
		}
		if resent == 1 && reports[0].Events[1].ID != reports[1].Events[0].ID {
			t.Errorf("the episode across windows has two IDs")
		}
	}
}

// TestCEWithoutCNP: a flow with 20 CE marks whose receiver answers with
// ACKs but no CNP is an event, spanning the run of its activity that holds
// the marks (it sends every 1 ms, so one run); one that got CNPs back, one whose
// receiver's direction the capture does not show, and one with fewer CE
// marks than Rules.CEMarks are not; the flow that got CNPs is in top_cnp.
func TestCEWithoutCNP(t *testing.T) {
	var tr trace
	c := func(i byte) *conn {
		return &conn{a: [4]byte{10, 7, i, 1}, b: [4]byte{10, 7, i, 2}, qa: 0x30 + uint32(i), qb: 0x40 + uint32(i), sport: 2000 + uint16(i)}
	}
	bad, good, oneWay, few := c(1), c(2), c(3), c(4)
	for k := range 40 {
		t0 := ms(100+float64(k), 0)
		bad.write(&tr, t0, 64, k >= 10 && k < 30)
		bad.back(&tr, t0+1000, 0x1f, false)
		good.write(&tr, t0, 64, k < 20)
		if k < 20 {
			good.back(&tr, t0+2000, 0, true)
		}
		oneWay.write(&tr, t0, 64, k < 20)
		few.write(&tr, t0, 64, k < 10)
		few.back(&tr, t0+1000, 0x1f, false)
	}
	reports := build(t, &metrics.Config{Workers: 2}, tr.frames(), 1)
	want := []Event{{Kind: EventCEWithoutCNP, Start: ms(100, 0), End: ms(140, 0),
		CEWithoutCNP: &CEWithoutCNP{Flow: Flow{Key: bad.fwd(), SQP: bad.qa, SQPKnown: true}, ECNCE: 20, Packets: 40, ReversePackets: 40}}}
	r := reports[0]
	if len(r.Events) == 1 {
		want[0].ID = r.Events[0].ID
	}
	if diff := cmp.Diff(want, r.Events, eventOpts); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(r.TopCNP) != 1 || r.TopCNP[0].Key != good.fwd() || r.TopCNP[0].C[metrics.FlowCNP] != 20 {
		t.Errorf("top_cnp %+v, want the flow that got 20 CNPs", r.TopCNP)
	}
	if len(r.EventFlows) != 1 || r.EventFlows[0].Key != bad.fwd() {
		t.Errorf("event_flows %+v", r.EventFlows)
	}
}

// TestEventsOmitted: past Rules.MaxEvents of a kind, the earliest are
// listed and the others counted.
func TestEventsOmitted(t *testing.T) {
	var tr trace
	for i := range 5 {
		c := &conn{a: [4]byte{10, 6, byte(i), 1}, b: [4]byte{10, 6, byte(i), 2}, qa: 1, qb: 2, sport: 3000 + uint16(i), psn: 10}
		c.write(&tr, ms(float64(10*i), 0), 64, false)
		c.psn = 10
		c.write(&tr, ms(float64(10*i), 5), 64, false)
	}
	r := build(t, &metrics.Config{Workers: 1, Rules: metrics.Rules{MaxEvents: 2}}, tr.frames(), 1)[0]
	if len(r.Events) != 2 || r.Events[0].Start != ms(0, 0) || r.Events[1].Start != ms(10, 0) || r.EventsOmitted[EventRetransmission] != 3 {
		t.Errorf("%d events from %d, %v omitted; want the first two of five", len(r.Events), r.Events[0].Start, r.EventsOmitted)
	}
}

// TestReaches checks the incast search's first sum against hand-counted
// aggregates of three flows into one destination, in bytes per slot: 150
// in slot 0, 100 in slot 1, 300 in slot 2, where all three send, and 100
// in slots 3 and 4 (a run counts in the slots [Start, End)).
func TestReaches(t *testing.T) {
	run := func(start, end uint16, perSlot uint64) metrics.Run {
		return metrics.Run{Start: start, End: end, Bytes: perSlot * uint64(end-start)}
	}
	w := &metrics.Window{Flows: make([]metrics.FlowRecord, 3)}
	w.Flows[0].Act[0] = run(0, 3, 100)
	w.Flows[1].Act[0], w.Flows[1].Act[1] = run(0, 1, 50), run(2, 5, 100)
	w.Flows[2].Act[0] = run(2, 3, 100)
	rp := &Reporter{nextFlow: []int32{-1, 0, 1}}
	a := &dstAgg{head: 2}
	for _, c := range []struct {
		thr  uint64
		want bool
	}{{150, true}, {300, true}, {301, false}, {1 << 40, false}} {
		if got := rp.reaches(w, a, c.thr<<densityShift); got != c.want {
			t.Errorf("reaches(%d bytes per slot) = %v, want %v", c.thr, got, c.want)
		}
	}
	// The slots are clear for the next destination.
	if i := slices.IndexFunc(rp.load, func(d uint64) bool { return d != 0 }); i >= 0 {
		t.Errorf("load[%d] = %d after the search, want 0", i, rp.load[i])
	}
	if rp.reaches(w, &dstAgg{head: -1}, 1) {
		t.Error("a destination without flows reaches a threshold")
	}
}

// TestDensityBound checks the incast search's cheap bound of a run's
// density against the density in exact rational arithmetic: at least
// bytes·2^16/slots, and less than twice it plus one, on runs of every
// length up to the widest and on byte counts up to 2^47.
func TestDensityBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(r metrics.Run) {
		t.Helper()
		exact := new(big.Rat).SetFrac(new(big.Int).Lsh(new(big.Int).SetUint64(r.Bytes), densityShift), big.NewInt(int64(r.End-r.Start)))
		got := new(big.Rat).SetInt(new(big.Int).SetUint64(densityBound(&r)))
		limit := new(big.Rat).Add(new(big.Rat).Mul(exact, big.NewRat(2, 1)), big.NewRat(1, 1))
		if got.Cmp(exact) < 0 || got.Cmp(limit) >= 0 {
			t.Fatalf("run %+v: bound %v, density %v: want at least the density and less than twice it plus one", r, got, exact.FloatString(3))
		}
	}
	for n := 1; n <= math.MaxUint16; n++ {
		start := uint16(rng.IntN(math.MaxUint16 - n + 1))
		check(metrics.Run{Start: start, End: start + uint16(n), Bytes: uint64(1 + rng.IntN(3*n))})
		check(metrics.Run{Start: start, End: start + uint16(n), Bytes: rng.Uint64N(1 << 47)})
	}
	check(metrics.Run{Start: 0, End: 2, Bytes: 3}) // the floor of 3/2 slots: 1, below the density
}
