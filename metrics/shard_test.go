package metrics

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/testframes"
)

// shardHarness drives one shard with hand-made events and keeps the
// windows it closes.
type shardHarness struct {
	t   *testing.T
	cfg Config
	sh  *shard
}

func newShardHarness(t *testing.T, capacity int) *shardHarness {
	t.Helper()
	cfg, err := (&Config{Window: time.Second, Workers: 1, TableSize: capacity, Host: "test"}).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	h := &shardHarness{t: t, cfg: cfg}
	pool := newWindowPool(&h.cfg, 4)
	h.sh = newShard(&h.cfg, capacity, pool)
	return h
}

var (
	hostA = decode.AddrFrom4([4]byte{10, 0, 0, 1})
	hostB = decode.AddrFrom4([4]byte{10, 0, 0, 2})
)

const (
	qpA = 0x11
	qpB = 0x22
)

// send hands the shard one event of opcode op on the flow src→dst toward
// dqp at time t (ns within window 0 unless larger).
func (h *shardHarness) send(src, dst decode.Addr, dqp uint32, op decode.Opcode, psn uint32, t int64, extra uint16) {
	h.sh.handleBatch([]event{h.event(src, dst, dqp, op, psn, t, extra)}, false)
}

// event returns the event send hands the shard.
func (h *shardHarness) event(src, dst decode.Addr, dqp uint32, op decode.Opcode, psn uint32, t int64, extra uint16) event {
	ev := event{
		key:     FlowKey{Src: src, Dst: dst, DQP: dqp},
		time:    t,
		win:     floorDiv(t, int64(h.cfg.Window)),
		wire:    100,
		payload: 1024,
		psn:     psn & psnMask,
		sport:   49152,
		opcode:  op,
		flags:   opFlags[op] | extra,
	}
	ev.hash = ev.key.Hash(h.cfg.Seed)
	return ev
}

// closeAll closes every window of the shard, counts their flows into
// their sketches as the collector does, and returns the last.
func (h *shardHarness) closeAll() *Window {
	h.t.Helper()
	h.closeWindows()
	if len(h.sh.closed) == 0 {
		h.t.Fatal("no window closed")
	}
	w := h.sh.closed[len(h.sh.closed)-1]
	w.Normalize()
	return w
}

// closeWindows closes every window of the shard and counts their flows
// into their sketches as the collector does.
func (h *shardHarness) closeWindows() {
	h.sh.closeThrough(allWindows)
	var l lines
	for _, w := range h.sh.closed {
		h.sh.pool.sketches(w)
		w.countFlows(&l, nil)
	}
}

func (h *shardHarness) flow(w *Window, src, dst decode.Addr, dqp uint32) *FlowRecord {
	h.t.Helper()
	for i := range w.Flows {
		if k := w.Flows[i].Key; k.Src == src && k.Dst == dst && k.DQP == dqp {
			return &w.Flows[i]
		}
	}
	h.t.Fatalf("flow %v→%v qp %d not in the window", src, dst, dqp)
	return nil
}

func TestShardPSNGapAndGoBackN(t *testing.T) {
	h := newShardHarness(t, 100)
	// PSNs 100..104 sent; 105 lost before the mirror; 106..108 seen; NAK;
	// 105..108 resent; 109 continues.
	psns := []uint32{100, 101, 102, 103, 104, 106, 107, 108, 105, 106, 107, 108, 109}
	for i, p := range psns {
		if i == 8 {
			h.send(hostB, hostA, qpA, testframes.OpAck, 105, int64(i), evNAK)
		}
		h.send(hostA, hostB, qpB, testframes.OpWriteMiddle, p, int64(i), 0)
	}
	w := h.closeAll()
	f := h.flow(w, hostA, hostB, qpB)
	if got := [2]uint64{f.C[FlowPSNGaps], f.C[FlowRetransmits]}; got != [2]uint64{1, 4} {
		t.Errorf("gaps, retransmits = %v, want [1 4]", got)
	}
	if w.Counters[PSNGaps] != 1 || w.Counters[Retransmits] != 4 {
		t.Errorf("window gaps, retransmits = %d, %d, want 1, 4", w.Counters[PSNGaps], w.Counters[Retransmits])
	}
	if f.C[FlowPackets] != uint64(len(psns)) || f.C[FlowBytes] != 100*uint64(len(psns)) {
		t.Errorf("packets, bytes = %d, %d", f.C[FlowPackets], f.C[FlowBytes])
	}
}

// TestShardOutOfOrder: a PSN a gap skipped that arrives before any NAK is
// out of order, not a retransmission; after a NAK it is a retransmission.
func TestShardOutOfOrder(t *testing.T) {
	h := newShardHarness(t, 100)
	for i, p := range []uint32{100, 101, 103, 104, 102, 105, 107, 106} {
		h.send(hostA, hostB, qpB, testframes.OpWriteMiddle, p, int64(i), 0)
	}
	f := h.flow(h.closeAll(), hostA, hostB, qpB)
	got := [3]uint64{f.C[FlowPSNGaps], f.C[FlowOutOfOrder], f.C[FlowRetransmits]}
	if got != [3]uint64{2, 2, 0} {
		t.Errorf("gaps, out of order, retransmits = %v, want [2 2 0]", got)
	}
	h = newShardHarness(t, 100)
	h.send(hostA, hostB, qpB, testframes.OpWriteMiddle, 100, 1, 0)
	h.send(hostA, hostB, qpB, testframes.OpWriteMiddle, 102, 2, 0)
	h.send(hostB, hostA, qpA, testframes.OpAck, 101, 3, evNAK)
	h.send(hostA, hostB, qpB, testframes.OpWriteMiddle, 101, 4, 0)
	f = h.flow(h.closeAll(), hostA, hostB, qpB)
	got = [3]uint64{f.C[FlowPSNGaps], f.C[FlowOutOfOrder], f.C[FlowRetransmits]}
	if got != [3]uint64{1, 0, 1} {
		t.Errorf("after a NAK: gaps, out of order, retransmits = %v, want [1 0 1]", got)
	}
}

func TestShardPSNWrap(t *testing.T) {
	h := newShardHarness(t, 100)
	for i, p := range []uint32{psnMask - 1, psnMask, 0, 1, 3} {
		h.send(hostA, hostB, qpB, testframes.OpWriteMiddle, p, int64(i), 0)
	}
	f := h.flow(h.closeAll(), hostA, hostB, qpB)
	if f.C[FlowPSNGaps] != 1 || f.C[FlowRetransmits] != 0 {
		t.Errorf("across the 24-bit wrap: gaps %d retransmits %d, want 1 and 0", f.C[FlowPSNGaps], f.C[FlowRetransmits])
	}
}

func TestShardReadConsumesPSNs(t *testing.T) {
	h := newShardHarness(t, 100)
	// A WRITE First teaches the path MTU (1024); a READ of 4096 bytes then
	// consumes four PSNs, so 11 follows 7 without a gap, and 16 after the
	// second READ (PSN 11, 4 PSNs → next 15) is a gap.
	h.send(hostA, hostB, qpB, testframes.OpWriteFirst, 5, 1, 0)
	h.send(hostA, hostB, qpB, testframes.OpWriteLast, 6, 2, 0)
	ev := event{key: FlowKey{Src: hostA, Dst: hostB, DQP: qpB}, time: 3, wire: 100, psn: 7, dmaLen: 4096, sport: 49152, opcode: testframes.OpReadRequest, flags: opFlags[testframes.OpReadRequest]}
	ev.hash = ev.key.Hash(h.cfg.Seed)
	h.sh.handleBatch([]event{ev}, false)
	ev.psn, ev.time = 11, 4
	h.sh.handleBatch([]event{ev}, false)
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 16, 5, 0)
	f := h.flow(h.closeAll(), hostA, hostB, qpB)
	if f.C[FlowPSNGaps] != 1 {
		t.Errorf("gaps = %d, want 1", f.C[FlowPSNGaps])
	}
}

func TestShardPairingLatencyAndCNP(t *testing.T) {
	h := newShardHarness(t, 100)
	// A→B READ request PSN 50 at t=1000; B→A READ response First PSN 50 at
	// t=4000: latency 3000. A→B WRITE Only with AckReq PSN 51 at 5000,
	// ACK PSN 51 at 5500: latency 500. B→A CNP toward qpA.
	h.send(hostA, hostB, qpB, testframes.OpReadRequest, 50, 1000, 0)
	h.send(hostB, hostA, qpA, testframes.OpReadFirst, 50, 4000, 0)
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 51, 5000, evAckReq)
	h.send(hostB, hostA, qpA, testframes.OpAck, 51, 5500, evAck)
	h.send(hostB, hostA, qpA, testframes.OpCNP, 0, 6000, 0)
	w := h.closeAll()
	fwd := h.flow(w, hostA, hostB, qpB)
	rev := h.flow(w, hostB, hostA, qpA)
	if !fwd.SQPKnown || fwd.SQP != qpA || !rev.SQPKnown || rev.SQP != qpB {
		t.Errorf("source QPs: fwd %v/%d rev %v/%d, want %d and %d", fwd.SQPKnown, fwd.SQP, rev.SQPKnown, rev.SQP, qpA, qpB)
	}
	want := map[FlowCounter]uint64{FlowReadLatencyCount: 1, FlowReadLatencySum: 3000, FlowAckLatencyCount: 1, FlowAckLatencySum: 500}
	got := map[FlowCounter]uint64{}
	for c := range want {
		got[c] = fwd.C[c]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("latency counters (-want +got):\n%s", diff)
	}
	if rev.C[FlowCNPCarried] != 1 || rev.C[FlowAcks] != 1 {
		t.Errorf("reverse flow carried %d CNPs and %d ACKs, want 1 and 1", rev.C[FlowCNPCarried], rev.C[FlowAcks])
	}
	if w.ReadLatency.Count() != 1 || w.AckLatency.Count() != 1 {
		t.Errorf("latency sketches hold %d and %d values, want 1 and 1", w.ReadLatency.Count(), w.AckLatency.Count())
	}
}

// TestShardWindowsAndLateness: a frame counts in the window its reader
// gave it, also when the ring closed that window already for the frames of
// another reader: then in a late part of it, which closes with the ring.
// The shard counts nothing late itself (the reader does).
func TestShardWindowsAndLateness(t *testing.T) {
	h := newShardHarness(t, 100)
	sec := int64(time.Second)
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 1, 5*sec+1, 0)
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 2, 6*sec+1, 0)
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 3, 5*sec+2, 0) // late but window 5 is open
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 4, 7*sec+1, 0) // closes window 5
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 5, 5*sec+3, 0) // in a late part of window 5
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 6, 7*sec+2, 0)
	h.sh.closeThrough(allWindows)
	got := map[int64]uint64{}
	var parts []int64
	for _, w := range h.sh.closed {
		w.Normalize()
		for _, f := range w.Flows {
			got[w.Start/sec] += f.C[FlowPackets]
		}
		if w.Counters[LatePackets] != 0 {
			t.Errorf("window %d: %d late packets counted by the shard", w.Start/sec, w.Counters[LatePackets])
		}
		parts = append(parts, w.Start/sec)
	}
	if diff := cmp.Diff(map[int64]uint64{5: 3, 6: 1, 7: 2}, got); diff != "" {
		t.Errorf("packets per window (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{5, 5, 6, 7}, parts); diff != "" {
		t.Errorf("windows closed (-want +got):\n%s", diff)
	}
}

func TestShardTableFullEvictsIdleFlows(t *testing.T) {
	h := newShardHarness(t, 2)
	sec := int64(time.Second)
	h.send(hostA, hostB, 1, testframes.OpWriteOnly, 1, 1, 0)
	h.send(hostA, hostB, 2, testframes.OpWriteOnly, 1, 2, 0)
	h.send(hostA, hostB, 3, testframes.OpWriteOnly, 1, 3, 0) // table full, nothing idle: untracked
	h.send(hostA, hostB, 1, testframes.OpWriteOnly, 2, 3*sec, 0)
	h.send(hostA, hostB, 4, testframes.OpWriteOnly, 1, 3*sec+1, 0) // flow 2 is idle: evicted for flow 4
	h.send(hostA, hostB, 5, testframes.OpWriteOnly, 1, 3*sec+2, 0) // flows 1 and 4 active: untracked
	h.closeWindows()
	if len(h.sh.closed) != 2 {
		t.Fatalf("%d windows closed, want 2", len(h.sh.closed))
	}
	w0, w3 := h.sh.closed[0], h.sh.closed[1]
	if w0.Counters[UntrackedPackets] != 1 || len(w0.Flows) != 2 {
		t.Errorf("window 0: untracked %d, flows %d, want 1 and 2", w0.Counters[UntrackedPackets], len(w0.Flows))
	}
	if e := w0.Distinct.Estimate(); e.Value < 2.5 || e.Value > 3.5 {
		t.Errorf("window 0 distinct estimate %v, want 3 (two tracked, one untracked)", e.Value)
	}
	w3.Normalize()
	if w3.Counters[UntrackedPackets] != 1 || w3.Counters[Evictions] != 1 || len(w3.Flows) != 2 {
		t.Errorf("window 3: untracked %d, evictions %d, flows %d, want 1, 1, 2", w3.Counters[UntrackedPackets], w3.Counters[Evictions], len(w3.Flows))
	}
	if qps := []uint32{w3.Flows[0].Key.DQP, w3.Flows[1].Key.DQP}; !slices.Contains(qps, 1) || !slices.Contains(qps, 4) {
		t.Errorf("window 3 flows %v and %v, want QPs 1 and 4", w3.Flows[0].Key, w3.Flows[1].Key)
	}
	if f := h.flow(w3, hostA, hostB, 1); f.C[FlowRetransmits]+f.C[FlowPSNGaps] != 0 {
		t.Error("flow 1 kept across windows lost its PSN state")
	}
}

// TestShardLastCloseCountsIdleFlows: the last window of a run counts the
// idle flows of a nearly full table as evicted, without evicting them; a
// window that is not the last evicts them, and the count is the same. Six
// of eight flows of window 0 are idle in window 1.
func TestShardLastCloseCountsIdleFlows(t *testing.T) {
	sec := int64(time.Second)
	for _, more := range []bool{false, true} {
		h := newShardHarness(t, 8)
		for qp := range uint32(8) {
			h.send(hostA, hostB, qp+1, testframes.OpWriteOnly, 1, int64(qp), 0)
		}
		h.send(hostA, hostB, 1, testframes.OpWriteOnly, 2, sec, 0)
		h.send(hostA, hostB, 2, testframes.OpWriteOnly, 2, sec+1, 0)
		if more {
			h.send(hostA, hostB, 1, testframes.OpWriteOnly, 3, 2*sec, 0) // window 1 is not the last
		}
		h.sh.closeThrough(allWindows)
		var w1 *Window
		for _, w := range h.sh.closed {
			if w.Start == sec && w1 == nil {
				w1 = w
			}
		}
		if w1 == nil {
			t.Fatalf("more %v: window 1 not closed", more)
		}
		if got := w1.Counters[Evictions]; got != 6 {
			t.Errorf("more %v: window 1 counts %d evictions, want 6", more, got)
		}
		if used := h.sh.tab.used; more && used != 2 || !more && used != 8 {
			t.Errorf("more %v: %d flows left in the table", more, used)
		}
	}
}

// TestLatencyMatchAddsNoIdleFlow sends a READ request at the end of one
// window and its response in the next: the window of the response counts
// the latency in its quantiles, but the requester's flow, silent in that
// window, is not part of it (not in the flow list, not in the distinct
// estimate).
func TestLatencyMatchAddsNoIdleFlow(t *testing.T) {
	h := newShardHarness(t, 100)
	sec := int64(time.Second)
	h.send(hostA, hostB, qpB, testframes.OpReadRequest, 7, sec-10, 0)
	h.send(hostB, hostA, qpA, testframes.OpReadOnly, 7, sec+500, 0)
	h.closeWindows()
	if len(h.sh.closed) != 2 {
		t.Fatalf("%d windows closed, want 2", len(h.sh.closed))
	}
	w1 := h.sh.closed[1]
	if n := w1.ReadLatency.Count(); n != 1 {
		t.Errorf("window 1 READ latencies %d, want 1", n)
	}
	if len(w1.Flows) != 1 || w1.Flows[0].Key.Src != hostB {
		t.Fatalf("window 1 flows %+v, want only the response flow B→A", w1.Flows)
	}
	if e := w1.Distinct.Estimate(); e.Value < 0.5 || e.Value > 1.5 {
		t.Errorf("window 1 distinct flows %v, want 1", e.Value)
	}
	if c := w1.Flows[0].C[FlowReadLatencyCount]; c != 0 {
		t.Errorf("response flow counts %d READ latencies, want 0 (they belong to the requester)", c)
	}
	// In one window, the requester's flow carries the latency.
	h = newShardHarness(t, 100)
	h.send(hostA, hostB, qpB, testframes.OpReadRequest, 7, 10, 0)
	h.send(hostB, hostA, qpA, testframes.OpReadOnly, 7, 510, 0)
	w := h.closeAll()
	if f := h.flow(w, hostA, hostB, qpB); f.C[FlowReadLatencyCount] != 1 || f.C[FlowReadLatencySum] != 500 {
		t.Errorf("requester flow READ latency count %d sum %d, want 1 and 500", f.C[FlowReadLatencyCount], f.C[FlowReadLatencySum])
	}
}

// TestShardLatencyFromLatestTransmission: a READ request and an ACK-request
// sent again before their answers are timed from the resend, not from the
// first copy, which the responder never answered.
func TestShardLatencyFromLatestTransmission(t *testing.T) {
	h := newShardHarness(t, 100)
	h.send(hostA, hostB, qpB, testframes.OpReadRequest, 500, 1000, 0)
	h.send(hostA, hostB, qpB, testframes.OpReadRequest, 500, 900_000, 0) // sent again
	h.send(hostB, hostA, qpA, testframes.OpReadOnly, 500, 900_330, 0)    // answers the resend
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 501, 950_000, evAckReq)
	h.send(hostA, hostB, qpB, testframes.OpWriteOnly, 501, 1_950_000, evAckReq) // sent again
	h.send(hostB, hostA, qpA, testframes.OpAck, 501, 1_950_200, evAck)
	w := h.closeAll()
	f := h.flow(w, hostA, hostB, qpB)
	got := [4]uint64{f.C[FlowReadLatencyCount], f.C[FlowReadLatencySum], f.C[FlowAckLatencyCount], f.C[FlowAckLatencySum]}
	if want := [4]uint64{1, 330, 1, 200}; got != want {
		t.Errorf("READ count, sum, ACK count, sum = %v, want %v", got, want)
	}
	if w.ReadLatency.Max() != 330 || w.AckLatency.Max() != 200 {
		t.Errorf("window READ, ACK latency max = %v, %v; want 330, 200", w.ReadLatency.Max(), w.AckLatency.Max())
	}
}

// TestShardFlushOrder: flush hands over a window's list in canonical
// order, with each flow's packets, however its record came to be: new at
// the close, made when the flow moved on to the next window while this one
// was open, a tally made by a CE mark, or made by a frame late for a
// window the flow moved on from.
func TestShardFlushOrder(t *testing.T) {
	h := newShardHarness(t, 10000)
	sec := int64(time.Second)
	rng := rand.New(rand.NewPCG(9, 10))
	want := map[int64]map[FlowKey]uint64{}
	const perWindow = 4000
	for step := range 4 * perWindow {
		w := int64(step / perWindow)
		at := w*sec + int64(step%perWindow)*sec/perWindow
		if w > 0 && step%perWindow < perWindow/10 && rng.IntN(3) == 0 {
			at -= sec / 2 // late for the window before, which is open still
		}
		n := rng.IntN(3000)
		key := FlowKey{Src: decode.AddrFrom4([4]byte{10, 1, byte(n >> 8), byte(n)}), Dst: hostB, DQP: uint32(n)}
		var extra uint16
		if rng.IntN(20) == 0 {
			extra = evCE
		}
		h.send(key.Src, key.Dst, key.DQP, testframes.OpWriteOnly, uint32(step), at, extra)
		if want[at/sec] == nil {
			want[at/sec] = map[FlowKey]uint64{}
		}
		want[at/sec][key]++
	}
	h.sh.closeThrough(allWindows)
	if len(h.sh.closed) != 4 {
		t.Fatalf("%d windows closed, want 4", len(h.sh.closed))
	}
	for _, w := range h.sh.closed {
		if !inOrder(w.Flows) {
			t.Errorf("window %d: the list is not in canonical order", w.Index())
		}
		got := map[FlowKey]uint64{}
		for _, f := range w.Flows {
			got[f.Key] += f.C[FlowPackets]
			if f.Hash() != f.Key.Hash(h.cfg.Seed) {
				t.Fatalf("window %d: %v has hash %#x", w.Index(), f.Key, f.Hash())
			}
		}
		if diff := cmp.Diff(want[w.Index()], got); diff != "" {
			t.Errorf("window %d: packets per flow (-want +got):\n%s", w.Index(), diff)
		}
	}
}

// TestShardFlushOneHash: flows whose keys differ but whose flow hash is
// one (forced here; a 64-bit hash makes it rare) are listed in the order of
// their keys when their window closes, whether their records are made then
// or were listed before (a tally: a frame marked CE), among flows with
// hashes of their own.
func TestShardFlushOneHash(t *testing.T) {
	h := newShardHarness(t, 1000)
	const shared = 0x5eed
	for i := range 100 {
		h.send(hostA, hostB, uint32(1000+i), testframes.OpWriteOnly, 0, int64(i)*1000, 0)
	}
	for q := uint32(5); q > 0; q-- { // keys in decreasing order
		var extra uint16
		if q == 3 {
			extra = evCE
		}
		for psn := range uint32(2) {
			ev := h.event(hostA, hostB, q, testframes.OpWriteOnly, psn, int64(q)*1e6+int64(psn), extra)
			ev.hash = shared
			h.sh.handleBatch([]event{ev}, false)
		}
	}
	h.sh.closeThrough(allWindows)
	w := h.sh.closed[0]
	if !inOrder(w.Flows) || len(w.Flows) != 105 {
		t.Fatalf("%d records, in canonical order %v; want 105, in order", len(w.Flows), inOrder(w.Flows))
	}
	var got []uint32 // the flows' QPs: their keys differ in no other field
	for _, f := range w.Flows {
		if f.Hash() == shared {
			got = append(got, f.Key.DQP)
			ce := uint64(0)
			if f.Key.DQP == 3 {
				ce = 2
			}
			if f.C[FlowPackets] != 2 || f.C[FlowECNCE] != ce {
				t.Errorf("%v: %d packets, %d CE; want 2, 2 on QP 3 only", f.Key, f.C[FlowPackets], f.C[FlowECNCE])
			}
		}
	}
	if want := []uint32{1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("QPs of the flows of one hash, in list order: %v; want %v", got, want)
	}
}
