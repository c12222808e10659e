package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/testframes"
)

// TestActivityAdd folds runs into a profile by hand: adjacent slots make
// one run, a fifth run joins the two closest (the earliest of equal gaps),
// a run out of time order joins what it touches.
func TestActivityAdd(t *testing.T) {
	slot := func(s uint16, bytes uint64) Run { return Run{Start: s, End: s + 1, Bytes: bytes} }
	var a Activity
	for _, s := range []uint16{0, 1, 2} {
		a.add(slot(s, 100))
	}
	if want := (Activity{{Start: 0, End: 3, Bytes: 300}}); a != want {
		t.Fatalf("adjacent slots: %+v, want %+v", a, want)
	}
	a = Activity{}
	for _, s := range []uint16{0, 2, 4, 6, 7} {
		a.add(slot(s, uint64(s)))
	}
	if want := (Activity{{0, 0, 1, 0, 0}, {2, 2, 3, 0, 0}, {4, 4, 5, 0, 0}, {13, 6, 8, 0, 0}}); a != want {
		t.Fatalf("four runs: %+v, want %+v", a, want)
	}
	a.add(Run{Start: 20, End: 21, ECNCE: 3, CNP: 1, Bytes: 20})
	if want := (Activity{{2, 0, 3, 0, 0}, {4, 4, 5, 0, 0}, {13, 6, 8, 0, 0}, {20, 20, 21, 3, 1}}); a != want {
		t.Fatalf("a fifth run: %+v, want %+v", a, want)
	}
	a.add(slot(5, 5)) // out of order: touches [4,5) and [6,8)
	if want := (Activity{{2, 0, 3, 0, 0}, {22, 4, 8, 0, 0}, {20, 20, 21, 3, 1}}); a != want {
		t.Fatalf("a run out of order: %+v, want %+v", a, want)
	}
	a.add(slot(30, 1))
	a.add(slot(31, 1))
	a.add(slot(40, 1)) // gaps 1, 12, 9, 9: [0,3) and [4,8) join
	if want := (Activity{{24, 0, 8, 0, 0}, {20, 20, 21, 3, 1}, {2, 30, 32, 0, 0}, {1, 40, 41, 0, 0}}); a != want {
		t.Fatalf("full again: %+v, want %+v", a, want)
	}
}

// TestActivityRule: however the runs come, add and merge give what the
// rule gives (combineRuns over the union), and merge is symmetric.
func TestActivityRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	random := func() Activity {
		var a Activity
		s := uint16(rng.IntN(4))
		for range rng.IntN(12) {
			a.add(Run{Start: s, End: s + 1 + uint16(rng.IntN(3)), Bytes: uint64(rng.IntN(1000)), ECNCE: uint16(rng.IntN(2))})
			s += 1 + uint16(rng.IntN(10))
			if rng.IntN(5) == 0 {
				s = uint16(rng.IntN(int(s) + 1)) // now and then, out of order
			}
		}
		return a
	}
	for i := range 20000 {
		a, b := random(), random()
		r := Run{Start: uint16(rng.IntN(60)), Bytes: 7, CNP: 1}
		r.End = r.Start + 1 + uint16(rng.IntN(2))
		var buf [2 * ActivityRuns]Run
		n := copy(buf[:], a.Runs())
		buf[n] = r
		var want Activity
		want.set(combineRuns(buf[:n+1], ActivityRuns))
		got := a
		got.add(r)
		if got != want {
			t.Fatalf("case %d: %+v add %+v = %+v, the rule gives %+v", i, a, r, got, want)
		}
		ab, ba := a, b
		ab.merge(&b)
		ba.merge(&a)
		n = copy(buf[:], a.Runs())
		n += copy(buf[n:], b.Runs())
		want.set(combineRuns(buf[:n], ActivityRuns))
		if ab != ba || ab != want {
			t.Fatalf("case %d: merge of %+v and %+v: %+v one way, %+v the other, the rule gives %+v", i, a, b, ab, ba, want)
		}
		if ab.Bytes() != a.Bytes()+b.Bytes() {
			t.Fatalf("case %d: merge lost bytes", i)
		}
	}
}

// at returns the time ms milliseconds (and us microseconds) after the
// epoch of the hand-made frames.
func at(ms, us float64) int64 {
	return testframes.Epoch + int64(ms*float64(time.Millisecond)) + int64(us*float64(time.Microsecond))
}

// frameAt returns f as a captured frame at time t.
func frameAt(t int64, b []byte) capture.Frame {
	return capture.Frame{Data: b, Time: t, OrigLen: uint32(len(b)), Link: decode.LinkEthernet}
}

// flowOf returns the record of key in w, or nil.
func flowOf(w *Window, key FlowKey) *FlowRecord {
	for i := range w.Flows {
		if w.Flows[i].Key == key {
			return &w.Flows[i]
		}
	}
	return nil
}

// TestEngineActivity: a flow's burst slots, bytes, CE marks and the CNPs
// its reverse direction carries, exactly, with one and two workers; a late
// frame counts in the slot it is in.
func TestEngineActivity(t *testing.T) {
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	w := func(psn uint32, ecn uint8) []byte {
		return testframes.RoCE{Src: a, Dst: b, Sport: 50000, Op: testframes.OpWriteMiddle, DQP: 0x200, PSN: psn, ECN: ecn, Payload: 1000}.Bytes()
	}
	cnp := testframes.RoCE{Src: b, Dst: a, Sport: 50000, Op: testframes.OpCNP, DQP: 0x100, Ext: make([]byte, 16)}.Bytes()
	frames := []capture.Frame{
		frameAt(at(0, 100), w(1, 0)), frameAt(at(0, 500), w(2, 0)), frameAt(at(1, 200), w(3, 3)),
		frameAt(at(1, 300), cnp), frameAt(at(5, 0), w(4, 0)), frameAt(at(5, 900), w(5, 3)),
		frameAt(at(999, 0), w(6, 0)), frameAt(at(1000, 10), w(7, 0)), frameAt(at(999, 500), w(8, 0)), // the last is late
	}
	size := uint64(len(w(1, 0)))
	for _, workers := range []int{1, 2} {
		wins := runEngine(t, &Config{Workers: workers, Host: "h", Burst: time.Millisecond}, &testframes.Source{Frames: slices.Clone(frames), Per: 2})
		if len(wins) != 2 {
			t.Fatalf("%d windows", len(wins))
		}
		fwd, rev := FlowKey{Src: decode.AddrFrom4(a), Dst: decode.AddrFrom4(b), DQP: 0x200}, FlowKey{Src: decode.AddrFrom4(b), Dst: decode.AddrFrom4(a), DQP: 0x100}
		want := Activity{{Start: 0, End: 2, ECNCE: 1, Bytes: 3 * size}, {Start: 5, End: 6, ECNCE: 1, Bytes: 2 * size}, {Start: 999, End: 1000, Bytes: 2 * size}}
		if f := flowOf(wins[0], fwd); f == nil || f.Act != want {
			t.Errorf("%d workers: window 0, %v: %+v, want %+v", workers, fwd, f, want)
		}
		if f := flowOf(wins[0], rev); f == nil || f.Act != (Activity{{Start: 1, End: 2, CNP: 1, Bytes: uint64(len(cnp))}}) {
			t.Errorf("%d workers: window 0, the CNPs' flow: %+v", workers, f)
		}
		if f := flowOf(wins[1], fwd); f == nil || f.Act != (Activity{{Start: 0, End: 1, Bytes: size}}) {
			t.Errorf("%d workers: window 1: %+v", workers, f)
		}
		if wins[0].Burst != int64(time.Millisecond) {
			t.Errorf("burst %d", wins[0].Burst)
		}
	}
}

// TestEngineRetransmissions: retransmission episodes with their cause (a
// NAK, an RNR NAK, or a timeout), trouble, first PSN and frames resent; an
// episode that spans two windows has a record in each; PSN wraps, a READ
// request's PSN span and a gap filled before any NAK are no episode.
func TestEngineRetransmissions(t *testing.T) {
	var frames []capture.Frame
	type conn struct {
		a, b  [4]byte
		sport uint16
	}
	const qpA, qpB = 0x100, 0x200
	c := func(i byte) conn { return conn{[4]byte{10, 1, i, 1}, [4]byte{10, 1, i, 2}, 50000 + uint16(i)} }
	req := func(c conn, tm int64, op decode.Opcode, psn uint32, ext []byte, payload int) {
		frames = append(frames, frameAt(tm, testframes.RoCE{Src: c.a, Dst: c.b, Sport: c.sport, Op: op, DQP: qpB, PSN: psn, Ext: ext, Payload: payload}.Bytes()))
	}
	write := func(c conn, tm int64, psn uint32) { req(c, tm, testframes.OpWriteMiddle, psn, nil, 1024) }
	back := func(c conn, tm int64, syndrome uint8, psn uint32) {
		frames = append(frames, frameAt(tm, testframes.RoCE{Src: c.b, Dst: c.a, Sport: c.sport, Op: testframes.OpAck, DQP: qpA, PSN: psn, Ext: testframes.AETH(syndrome, 1)}.Bytes()))
	}
	key := func(c conn) FlowKey {
		return FlowKey{Src: decode.AddrFrom4(c.a), Dst: decode.AddrFrom4(c.b), DQP: qpB}
	}
	var want [2][]Retransmission
	// A NAK: PSNs 100-105, a NAK for 102, 102-105 again, then 106.
	nak := c(1)
	for i := range uint32(6) {
		write(nak, at(10, float64(10*i)), 100+i)
	}
	back(nak, at(10, 55), 0x60, 102)
	for i := range uint32(5) {
		write(nak, at(10, 60+float64(10*i)), 102+i)
	}
	want[0] = append(want[0], Retransmission{Key: key(nak), Trouble: at(10, 55), First: at(10, 60), Last: at(10, 90), FirstPSN: 102, Resent: 4, Cause: CauseNAK})
	// A timeout: 200-203, 10 ms of silence, 200-203 again, then 204.
	to := c(2)
	for i := range uint32(4) {
		write(to, at(20, float64(10*i)), 200+i)
	}
	for i := range uint32(5) {
		write(to, at(30, 30+float64(10*i)), 200+i)
	}
	want[0] = append(want[0], Retransmission{Key: key(to), Trouble: at(20, 30), First: at(30, 30), Last: at(30, 60), FirstPSN: 200, Resent: 4, Cause: CauseTimeout})
	// An RNR NAK (timer 14) for a SEND Only at 300, sent again 1.28 ms later.
	rnr := c(3)
	req(rnr, at(40, 0), 0x04, 300, nil, 64)
	back(rnr, at(40, 5), 0x2e, 300)
	req(rnr, at(41, 285), 0x04, 300, nil, 64)
	req(rnr, at(41, 300), 0x04, 301, nil, 64)
	want[0] = append(want[0], Retransmission{Key: key(rnr), Trouble: at(40, 5), First: at(41, 285), Last: at(41, 285), FirstPSN: 300, Resent: 1, Cause: CauseRNR, NAKCode: 14})
	// No episode: PSNs through the wrap, a READ of 8 KiB (PMTU unknown,
	// so between 2 and 32 PSNs) followed by the PSN after its span, and a
	// gap filled before any NAK.
	quiet := c(4)
	for i, psn := range []uint32{0xfffffe, 0xffffff, 0, 1} {
		write(quiet, at(50, float64(i)), psn)
	}
	req(quiet, at(50, 10), testframes.OpReadRequest, 2, testframes.RETH(8192), 0)
	write(quiet, at(50, 20), 10)
	write(quiet, at(50, 30), 12)
	write(quiet, at(50, 31), 11)
	// An episode across the window boundary: sent again at 999.9 ms and
	// 1000.1 ms after a NAK.
	span := c(5)
	for i := range uint32(3) {
		write(span, at(999, 800+float64(i)), 500+i)
	}
	back(span, at(999, 850), 0x60, 500)
	write(span, at(999, 900), 500)
	write(span, at(1000, 100), 501)
	write(span, at(1000, 200), 502)
	write(span, at(1000, 300), 503)
	want[0] = append(want[0], Retransmission{Key: key(span), Trouble: at(999, 850), First: at(999, 900), Last: at(999, 900), FirstPSN: 500, Resent: 1, Cause: CauseNAK, Ongoing: true})
	want[1] = append(want[1], Retransmission{Key: key(span), Trouble: at(999, 850), First: at(999, 900), Last: at(1000, 200), FirstPSN: 500, Resent: 2, Cause: CauseNAK})
	for i := range want { // times from the window start
		for j := range want[i] {
			r := &want[i][j]
			start := at(1000*float64(i), 0)
			r.Trouble, r.First, r.Last = r.Trouble-start, r.First-start, r.Last-start
		}
	}
	slices.SortStableFunc(frames, func(x, y capture.Frame) int { return int(x.Time - y.Time) })
	for _, workers := range []int{1, 3} {
		wins := runEngine(t, &Config{Workers: workers, Host: "h"}, &testframes.Source{Frames: slices.Clone(frames), Per: 5})
		for i := range want {
			sortRetrans(want[i])
			if diff := cmp.Diff(want[i], wins[i].Retrans, addrEqual); diff != "" {
				t.Errorf("%d workers, window %d (-want +got):\n%s", workers, i, diff)
			}
		}
		if n := wins[0].Counters[Retransmits]; n != 4+4+1+1 {
			t.Errorf("window 0: %d retransmits", n)
		}
	}
}

// TestEngineRetransmissionsBounded: a flow's sixth episode in a window is
// counted into its fourth record (maxEpisodes), marked merged.
func TestEngineRetransmissionsBounded(t *testing.T) {
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	var frames []capture.Frame
	psn := uint32(0)
	for i := range 6 {
		for range 3 {
			frames = append(frames, frameAt(at(float64(i), float64(psn)), testframes.RoCE{Src: a, Dst: b, Sport: 1, Op: testframes.OpWriteMiddle, DQP: 2, PSN: psn}.Bytes()))
			psn++
		}
		frames = append(frames, frameAt(at(float64(i), 500), testframes.RoCE{Src: a, Dst: b, Sport: 1, Op: testframes.OpWriteMiddle, DQP: 2, PSN: psn - 1}.Bytes()))
	}
	w := runEngine(t, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: frames, Per: 7})[0]
	if len(w.Retrans) != maxEpisodes {
		t.Fatalf("%d records, want %d", len(w.Retrans), maxEpisodes)
	}
	last := w.Retrans[maxEpisodes-1]
	if !last.Merged || last.Resent != 3 || last.Last != at(5, 500)-w.Start || w.Retrans[0].Merged {
		t.Errorf("last record %+v: want merged, 3 frames resent, the last at 5.5 ms", last)
	}
}

// TestEnginePauses: what PFC frames paused, per source MAC and priority:
// a storm of frames refreshed before they run out is one run, paused all
// along, until the resume that cuts the last pause short; isolated pauses
// beyond PauseRuns runs join the closest; a pause that outlasts its window
// goes on in the next.
func TestEnginePauses(t *testing.T) {
	storm, lone := [6]byte{0x0c, 0x42, 0xa1, 0, 0, 1}, [6]byte{0x0c, 0x42, 0xa1, 0, 0, 2}
	pfc := func(tm int64, src [6]byte, prio int, q uint16) capture.Frame {
		var quanta [8]uint16
		quanta[prio] = q
		return frameAt(tm, testframes.PFC(src, 1<<prio, quanta))
	}
	const window = 100 * time.Millisecond
	quantaNS := func(q float64) int64 { return int64(q * 512 * 1e9 / 100e9) }
	full, short := quantaNS(65535), quantaNS(1000) // 335539 and 5120 ns at 100 Gb/s
	var frames []capture.Frame
	for i := range 201 { // 10 ms of XOFF every 50 µs
		frames = append(frames, pfc(at(10, 50*float64(i)), storm, 3, 0xffff))
	}
	frames = append(frames, pfc(at(20, 100), storm, 3, 0)) // XON
	for i := range 10 {                                    // 10 short pauses, 10 ms apart
		frames = append(frames, pfc(at(float64(10*(i+1)), 1), lone, 4, 1000))
	}
	for i := range 100 { // a storm across the window's end: 95-100 ms, 100-105 ms
		frames = append(frames, pfc(at(95, 100*float64(i)), storm, 5, 0xffff))
	}
	slices.SortStableFunc(frames, func(x, y capture.Frame) int { return int(x.Time - y.Time) })
	wins := runEngine(t, &Config{Workers: 2, Host: "h", Window: window}, &testframes.Source{Frames: frames, Per: 3})
	if len(wins) != 2 {
		t.Fatalf("%d windows", len(wins))
	}
	joined := func(i, j int) PauseRun { // pauses i..j of the lone MAC as one run
		return PauseRun{Start: at(float64(10*(i+1)), 1), End: at(float64(10*(j+1)), 1) + short, Paused: int64(j-i+1) * short, Frames: uint64(j - i + 1)}
	}
	lonely := func(i int) PauseRun { return joined(i, i) }
	want := [2][]PauseRecord{{
		{MAC: storm, Priority: 3, Frames: 202, Runs: [PauseRuns]PauseRun{{Start: at(10, 0), End: at(20, 100), Paused: at(20, 100) - at(10, 0), Frames: 202}}},
		{MAC: storm, Priority: 5, Frames: 50, Runs: [PauseRuns]PauseRun{{Start: at(95, 0), End: at(100, 0), Paused: at(100, 0) - at(95, 0), Frames: 50}}},
		// Nine pauses, equal gaps: the earliest two join.
		{MAC: lone, Priority: 4, Frames: 9, Runs: [PauseRuns]PauseRun{joined(0, 1), lonely(2), lonely(3), lonely(4), lonely(5), lonely(6), lonely(7), lonely(8)}},
	}, {
		{MAC: storm, Priority: 5, Frames: 50, Runs: [PauseRuns]PauseRun{{Start: at(100, 0), End: at(104, 900) + full, Paused: at(104, 900) + full - at(100, 0), Frames: 50}}},
		{MAC: lone, Priority: 4, Frames: 1, Runs: [PauseRuns]PauseRun{lonely(9)}},
	}}
	for i := range want {
		slices.SortFunc(want[i], func(a, b PauseRecord) int { return comparePause(&a, &b) })
		for j := range want[i] { // runs from the window start
			for k := range want[i][j].Runs {
				if r := &want[i][j].Runs[k]; r.End != 0 {
					start := at(100*float64(i), 0)
					r.Start, r.End = r.Start-start, r.End-start
				}
			}
		}
	}
	for i := range want {
		if diff := cmp.Diff(want[i], wins[i].Pauses); diff != "" {
			t.Errorf("window %d (-want +got):\n%s", i, diff)
		}
	}
}

// BenchmarkActivityAdd folds slots into a full profile, as a flow that
// sends once every few slots does: every fold looks at the gaps.
func BenchmarkActivityAdd(b *testing.B) {
	b.ReportAllocs()
	var a Activity
	s := uint16(0)
	for b.Loop() {
		a.add(Run{Start: s, End: s + 1, Bytes: 1000})
		if s += 3; s > 990 {
			s, a = 0, Activity{}
		}
	}
}

// TestReaderSlot: the burst slot of a time, computed with a reciprocal,
// is the quotient, at the edges of slots and at random, for burst
// intervals and windows from the smallest to the largest.
func TestReaderSlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ window, burst time.Duration }{
		{time.Millisecond, time.Microsecond}, {time.Second, time.Millisecond}, {time.Second, 20 * time.Microsecond},
		{3 * time.Second, 3 * time.Millisecond}, {time.Minute, time.Millisecond}, {10 * time.Minute, 10 * time.Millisecond},
		{1000 * time.Millisecond, 50 * time.Microsecond}, {999 * time.Millisecond, 333 * time.Microsecond},
	} {
		cfg, err := (&Config{Window: c.window, Burst: c.burst}).WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		r := newReader(&cfg, nil)
		w, b := int64(c.window), int64(c.burst)
		start := 17 * w
		check := func(off int64) {
			if got, want := r.slot(17, start+off), uint32(min(max(off, 0), w-1)/b); got != want {
				t.Fatalf("window %v, burst %v, offset %d: slot %d, want %d", c.window, c.burst, off, got, want)
			}
		}
		for k := int64(0); k <= w/b; k += max(1, w/b/1000) {
			check(k*b - 1)
			check(k * b)
		}
		for range 10000 {
			check(rng.Int64N(w))
		}
		check(-5)
		check(w + 5)
	}
}

// oneTally is the tally of a single flow, as the shard keeps it.
type oneTally struct{ f FlowRecord }

func (o *oneTally) tally(h *hot, _ *cold) *FlowRecord {
	h.flags |= entTally
	return &o.f
}

// TestSlotRuns: frames counted through an entry give the profile that
// adding each run of the flow's consecutive slots to it in turn gives, the
// rule of Activity, here by hand: a run grows while each frame is in its
// last slot or the next and its bytes stay below 4 GiB (a longer one
// splits, and the parts join again in the profile). Frames in time order
// also give what adding each slot's frames as a run gives. The flows send
// in runs of consecutive slots, now and then, or more than 4 GiB in a run,
// and half of them now and then out of time order, as frames counted in a
// window they are late for are.
func TestSlotRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 20000 {
		var h hot
		var c cold
		var bySlot, byRun Activity
		var run Run // the run of consecutive slots being made, by the rule
		inOrder := rng.IntN(2) == 0
		slot := uint32(rng.IntN(5))
		big := rng.IntN(10) == 0
		for range rng.IntN(60) {
			var r Run
			for k := range 1 + rng.IntN(3) {
				ev := event{wire: uint32(1 + rng.IntN(5000))}
				if big && k > 0 {
					break
				}
				if big {
					ev.wire = 3 << 30 // 3 GiB a slot (a slot holds less than 4): runs of two pass 4 GiB
				}
				if run.End == 0 || uint32(run.End) != slot && uint32(run.End) != slot+1 || run.Bytes+uint64(ev.wire) > math.MaxUint32 {
					if run.End != 0 {
						byRun.add(run)
					}
					run = Run{Start: uint16(slot)}
				}
				run.End = uint16(slot + 1)
				run.Bytes += uint64(ev.wire)
				r.Bytes += uint64(ev.wire)
				if rng.IntN(4) == 0 {
					ev.flags |= evCE
					r.ECNCE++
					run.ECNCE++
				}
				if rng.IntN(5) == 0 {
					ev.flags |= evCNP
					r.CNP++
					run.CNP++
				}
				h.addSlot(&c, slot, &ev)
			}
			r.Start, r.End = uint16(slot), uint16(slot+1)
			bySlot.add(r)
			switch {
			case !inOrder && rng.IntN(6) == 0:
				slot = uint32(rng.IntN(int(slot) + 1))
			case rng.IntN(2) == 0:
				slot++ // the next slot
			default:
				slot += uint32(rng.IntN(9)) // the same, or a gap
			}
		}
		if run.End != 0 {
			byRun.add(run)
		}
		var got Activity
		h.takeActivity(&c, &got)
		if got != byRun {
			t.Fatalf("case %d: %+v through the entry, %+v run by run", i, got, byRun)
		}
		if inOrder && got != bySlot {
			t.Fatalf("case %d: %+v through the entry, %+v slot by slot", i, got, bySlot)
		}
		if h.acts != 0 || c.act != (Activity{}) {
			t.Fatalf("case %d: the entry keeps a profile: %d runs, %+v", i, h.acts, c.act)
		}
	}
}

// TestOpCounts checks opCounts.add against a list of (opcode, count)
// pairs scanned in order: opcodes 0 and 255 among others (an empty slot's
// opcode byte is 0), counts up to their limit, slots up to the eighth
// opcode, which both must refuse; a refusal empties the counts, as a fold
// does.
func TestOpCounts(t *testing.T) {
	type pair struct{ op, n uint8 }
	rng := rand.New(rand.NewPCG(11, 12))
	for round := range 200 {
		alphabet := []uint8{0x00, 0xff, 0x06, 0x07, 0x08, 0x0a, 0x04, 0x0c, 0x11, 0x10, 0x01}[:1+round%11]
		var c opCounts
		var want []pair
		for range 2000 {
			op := alphabet[rng.IntN(len(alphabet))]
			if rng.IntN(4) == 0 {
				op = alphabet[0] // long runs of one opcode reach the count limit
			}
			ok := true
			i := slices.IndexFunc(want, func(p pair) bool { return p.op == op })
			switch {
			case i >= 0 && want[i].n == math.MaxUint8, i < 0 && len(want) == hotOps:
				ok = false
			case i >= 0:
				want[i].n++
			default:
				want = append(want, pair{op, 1})
			}
			if got := c.add(op); got != ok {
				t.Fatalf("round %d: add(%#x) = %v, want %v (counts %+v)", round, op, got, ok, c)
			}
			var got []pair
			for k, n := range c.n {
				if n == 0 {
					break
				}
				got = append(got, pair{c.op[k], n})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: after %#x counts %v, want %v", round, op, got, want)
			}
			if !ok {
				c.n, want = [hotOps]uint8{}, nil // a fold
			}
		}
	}
}

// TestHotFold: a flow's counts through an entry's narrow hot counters,
// folded into its tally when one would overflow or an eighth opcode comes,
// and into its record at the end, are those of a record that counts every
// frame itself, opcode order included.
func TestHotFold(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range 20 {
		var h hot
		var c cold
		var tal oneTally
		var want FlowRecord
		// Up to 10 opcodes: more than the entry counts apart (hotOps)
		// and than a record does (maxFlowOps).
		ops := []decode.Opcode{0x07, 0x06, 0x08, 0x11, 0x04, 0x0c, 0x0a, 0x05, 0x10, 0x0d}[:2+i%9]
		frames := 1 + rng.IntN(300000)
		for k := range frames {
			ev := event{wire: uint32(64 + rng.IntN(9000)), opcode: ops[rng.IntN(len(ops))]}
			if i%4 == 0 && k%1000 == 0 {
				ev.wire = 1<<31 + 5 // a few huge frames overflow the 32-bit bytes
			}
			ev.payload = ev.wire / 2
			h.count(&tal, &c, &ev, 0)
			if rng.IntN(3) == 0 {
				h.msgs++ // as handle counts them
				want.C[FlowMessages]++
			}
			want.C[FlowBytes] += uint64(ev.wire)
			want.C[FlowPayloadBytes] += uint64(ev.payload)
			want.C[FlowPackets]++
			want.Ops.Add(uint8(ev.opcode), 1)
		}
		got := tal.tally(&h, &c)
		h.record(&c, got)
		if got.C != want.C || got.Ops != want.Ops {
			t.Fatalf("case %d (%d frames, %d opcodes): counters %v ops %+v, want %v %+v", i, frames, len(ops), got.C, got.Ops, want.C, want.Ops)
		}
		if h.flags&entTally != 0 || h.packets != 0 || h.ops.n != [hotOps]uint8{} {
			t.Fatalf("case %d: entry not emptied by record", i)
		}
	}
}
