package metrics

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/mapped"
	"github.com/rocescope/rocescope/internal/mappedtest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/sketch"
)

// TestShardOf checks that the shard of a connection is its hash modulo the
// shards, with and without the division: outputs of a table too small for
// the flows depend on which shard holds a flow.
func TestShardOf(t *testing.T) {
	hashes := []uint64{0, 1, 2, 3, 7, 8, 1<<63 - 1, 1 << 63, math.MaxUint64, 0x9e3779b97f4a7c15}
	for i := range uint64(1000) {
		hashes = append(hashes, mix64(i))
	}
	for n := uint64(1); n <= 17; n++ {
		for _, h := range hashes {
			if got := shardOf(h, n); got != int(h%n) {
				t.Fatalf("shardOf(%#x, %d) = %d, want %d", h, n, got, h%n)
			}
		}
	}
}

func TestFlowKeyBinaryRoundTrip(t *testing.T) {
	for _, k := range []FlowKey{
		{Src: decode.AddrFrom4([4]byte{192, 168, 1, 2}), Dst: decode.AddrFrom4([4]byte{10, 0, 0, 1}), DQP: 0xabcdef},
		{Src: decode.AddrFrom16([16]byte{0xfd, 0, 15: 1}), Dst: decode.AddrFrom16([16]byte{0xfd, 0, 15: 2}), DQP: 1},
		{Src: decode.AddrFromGID([16]byte{0xfe, 0x80, 15: 9}), Dst: decode.AddrFromLID(7), DQP: 0},
		{},
	} {
		b := k.appendBinary(nil)
		if len(b) != flowKeyLen {
			t.Fatalf("len(appendBinary(%v)) = %d, want %d", k, len(b), flowKeyLen)
		}
		if got := flowKeyFromBinary(b); got != k {
			t.Errorf("round trip of %v gave %v", k, got)
		}
	}
}

// TestFlowKeyEqual checks Equal against ==: on every key that differs from
// another in one byte of its binary form, and on equal keys whose padding
// bytes differ (== ignores them).
func TestFlowKeyEqual(t *testing.T) {
	base := FlowKey{Src: decode.AddrFrom16([16]byte{0xfd, 1, 2, 3, 15: 4}), Dst: decode.AddrFromGID([16]byte{0xfe, 0x80, 15: 9}), DQP: 0x123456}
	keys := []FlowKey{base, {}, {Src: decode.AddrFrom4([4]byte{10, 0, 0, 1}), Dst: decode.AddrFrom4([4]byte{10, 0, 0, 2}), DQP: 7}}
	b := base.appendBinary(nil)
	for i := range b {
		for _, x := range []byte{1, 0x80} {
			c := slices.Clone(b)
			c[i] ^= x
			keys = append(keys, flowKeyFromBinary(c))
		}
	}
	for i := range keys {
		for j := range keys {
			if got, want := keys[i].Equal(&keys[j]), keys[i] == keys[j]; got != want {
				t.Fatalf("%v.Equal(%v) = %v, want %v", keys[i], keys[j], got, want)
			}
		}
	}
	padded := base
	pad := (*[2]byte)(unsafe.Add(unsafe.Pointer(&padded), 34))
	pad[0], pad[1] = 0xaa, 0x55
	if !base.Equal(&padded) || !padded.Equal(&base) {
		t.Fatal("keys that differ in padding only are not Equal")
	}
}

func TestConnHashIsSymmetric(t *testing.T) {
	a := decode.AddrFrom4([4]byte{10, 0, 0, 1})
	b := decode.AddrFrom4([4]byte{10, 0, 0, 2})
	c := decode.AddrFrom4([4]byte{10, 0, 0, 3})
	if connHash(&a, &b, 49152) != connHash(&b, &a, 49152) {
		t.Error("connHash(a, b) != connHash(b, a)")
	}
	if connHash(&a, &b, 49152) == connHash(&a, &b, 49153) {
		t.Error("connHash ignores the port")
	}
	if connHash(&a, &b, 1) == connHash(&a, &c, 1) {
		t.Error("connHash ignores an address")
	}
	// Pairs of hosts whose addresses add up alike (a linear mix of each
	// address would give 10.0.0.1-10.0.0.4 and 10.0.0.2-10.0.0.3 one
	// hash) are told apart, with one port for all as RoCEv1 has.
	seen := make(map[uint64][2]int)
	for i := 1; i <= 64; i++ {
		for j := i + 1; j <= 64; j++ {
			x, y := decode.AddrFrom4([4]byte{10, 0, 0, byte(i)}), decode.AddrFrom4([4]byte{10, 0, 0, byte(j)})
			h := connHash(&x, &y, 0)
			if p, dup := seen[h]; dup {
				t.Fatalf("10.0.0.%d-10.0.0.%d and 10.0.0.%d-10.0.0.%d share connHash %#x", p[0], p[1], i, j, h)
			}
			seen[h] = [2]int{i, j}
		}
	}
	// The shards of many connections between few hosts must spread.
	var counts [8]int
	for i := range 8000 {
		counts[shardOf(connHash(&a, &b, uint16(49152+i)), 8)]++
	}
	for i, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("shard %d got %d of 8000 connections", i, n)
		}
	}
}

func TestOpMix(t *testing.T) {
	var m OpMix
	for op := range 10 {
		m.Add(uint8(op), uint64(op+1))
	}
	m.Add(3, 10)
	for i := range maxFlowOps {
		want := uint64(i + 1)
		if i == 3 {
			want += 10
		}
		if m.Op[i] != uint8(i) || m.N[i] != want {
			t.Errorf("slot %d = (%d, %d), want (%d, %d)", i, m.Op[i], m.N[i], i, want)
		}
	}
	if m.Other != 9+10 {
		t.Errorf("other = %d, want 19", m.Other)
	}

	// Opcodes come in any order and stay in increasing order; a full
	// mix keeps the first maxFlowOps seen, a smaller opcode going to
	// Other like a larger one.
	var r OpMix
	for _, op := range []uint8{0x81, 0x11, 0x0a, 0x64, 0x06, 0x11, 0x0c, 0x08, 0x07} {
		r.Add(op, 1)
	}
	r.Add(0x01, 5) // full: other
	r.Add(0xff, 6) // full: other
	r.Add(0x0a, 2) // present
	want := OpMix{
		Op: [maxFlowOps]uint8{0x06, 0x07, 0x08, 0x0a, 0x0c, 0x11, 0x64, 0x81},
		N:  [maxFlowOps]uint64{1, 1, 1, 3, 1, 2, 1, 1},
	}
	want.Other = 11
	if r != want {
		t.Errorf("mix = %+v, want %+v", r, want)
	}
}

func TestFloorDiv(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 5, 0}, {-1, 1000, -1}} {
		if got := floorDiv(c.a, c.b); got != c.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestReaderIndex checks the reader's window index, which remembers its
// last division, against the division itself, on times in and out of
// order: around window edges, before the epoch, and at the ends of the
// representable windows, where the index is clamped.
func TestReaderIndex(t *testing.T) {
	for _, window := range []time.Duration{time.Second, 7 * time.Millisecond, 3 * time.Second} {
		cfg, err := (&Config{Window: window}).WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		r := newReader(&cfg, nil)
		w := int64(window)
		want := func(t int64) int64 { return min(max(floorDiv(t, w), r.minIdx), r.maxIdx) }
		times := []int64{0, -1, 1, w - 1, w, w + 1, -w, -w - 1, -w + 1, 5*w - 1, 5 * w, 5*w + 1,
			math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1, r.maxIdx * w, r.maxIdx*w - 1,
			r.minIdx * w, r.minIdx*w - 1, 0}
		rng := rand.New(rand.NewPCG(3, 4))
		for range 10_000 {
			times = append(times, rng.Int64N(20*w)-10*w, times[rng.IntN(len(times))]+rng.Int64N(3)-1)
		}
		for _, x := range times {
			if got := r.index(x); got != want(x) {
				t.Fatalf("window %v: index(%d) = %d, want %d", window, x, got, want(x))
			}
		}
	}
}

// eventSink is an output that keeps nothing: what a test of the reader
// alone hands its events and windows to.
type eventSink struct{ ev event }

func (o *eventSink) event(_, _ *decode.Addr, _ uint16) *event { return &o.ev }
func (o *eventSink) flush()                                   {}
func (o *eventSink) window(*readerWindow)                     {}
func (o *eventSink) mark(int64)                               {}

// TestReaderLiveNewestFrame checks that a live capture's reader keeps the
// time of its newest frame for frames in order in one window too (frame's
// fast path): once the clock closed the window, frames of it older than
// that newest frame are held, and jumpConfirm of them in a row are a step
// back of the clock; frames newer than it would be late instead.
func TestReaderLiveNewestFrame(t *testing.T) {
	cfg, err := (&Config{Live: true, Window: 10 * time.Millisecond}).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	ms := int64(time.Millisecond)
	at := func(ts int64) *capture.Frame { f := roceAt(ts); return &f }
	start := testframes.Epoch // a window's start
	r := newReader(&cfg, &eventSink{})
	r.startLive(start)
	r.frame(at(start + 1*ms))
	r.frame(at(start + 5*ms)) // in order, in the window of the frame before
	r.advance(start + 12*ms)  // the wall clock closes the window (10 ms, 1 ms late)
	for range jumpConfirm {
		r.frame(at(start + 3*ms))
	}
	if !r.stepped || len(r.behind.frames) != jumpConfirm {
		t.Errorf("%d frames older than the newest one held, stepped %v; want %d, true", len(r.behind.frames), r.stepped, jumpConfirm)
	}
}

// TestCompareKeysIsBinaryOrder checks the in-place comparison against the
// order of the binary forms it stands for.
func TestCompareKeysIsBinaryOrder(t *testing.T) {
	keys := []FlowKey{
		{}, testKey(1), testKey(2), testKey(258), {Src: testKey(1).Src, Dst: testKey(1).Dst, DQP: 0xffffff},
		{Src: decode.AddrFromGID([16]byte{0xfe, 0x80}), Dst: decode.AddrFromLID(3), DQP: 1},
		{Src: decode.AddrFromLID(3), Dst: decode.AddrFromLID(3), DQP: 1},
		{Src: decode.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 1}), Dst: testKey(1).Dst, DQP: 1},
	}
	for _, a := range keys {
		for _, b := range keys {
			want := bytes.Compare(a.appendBinary(nil), b.appendBinary(nil))
			if got := a.Compare(b); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// TestFlowKeyHashIsHashOfBinary checks that the in-place flow hash equals
// sketch.Hash of the key's binary form, which serialized sketches depend on.
func TestFlowKeyHashIsHashOfBinary(t *testing.T) {
	keys := []FlowKey{
		{}, testKey(1), testKey(0xfffe),
		{Src: decode.AddrFrom16([16]byte{0xfd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}), Dst: decode.AddrFrom16([16]byte{0xfe, 15: 0x80}), DQP: 0xabcdef},
		{Src: decode.AddrFromGID([16]byte{0xfe, 0x80, 15: 9}), Dst: decode.AddrFromLID(0x1234), DQP: 0x800001},
	}
	for _, k := range keys {
		for _, seed := range []uint64{0, 1, sketch.DefaultSeed} {
			if got, want := k.Hash(seed), sketch.Hash(seed, k.appendBinary(nil)); got != want {
				t.Errorf("hash(%v, %#x) = %#x, sketch.Hash of the binary form = %#x", k, seed, got, want)
			}
		}
	}
}

// TestMergeShardFlows checks the merge of two shards' normalized flow lists
// against sorting their concatenation, with hashes drawn so that equal
// hashes (told apart by key) fall on both sides, and that normalize leaves
// the result as it is.
func TestMergeShardFlows(t *testing.T) {
	rec := func(i int, hash uint64) FlowRecord {
		f := FlowRecord{Key: FlowKey{Src: decode.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), DQP: uint32(i)}, hash: hash}
		f.C[FlowPackets] = uint64(i)
		return f
	}
	for _, sizes := range [][2]int{{0, 0}, {0, 5}, {5, 0}, {1, 1}, {300, 1}, {2, 700}, {1000, 999}} {
		var a, b, all []FlowRecord
		for i := range sizes[0] + sizes[1] {
			f := rec(i, uint64(i*7919%97)<<40) // few distinct hashes: many ties
			all = append(all, f)
			if i%3 == 0 && len(a) < sizes[0] || len(b) == sizes[1] {
				a = append(a, f)
			} else {
				b = append(b, f)
			}
		}
		var o flowOrder
		a, b = o.normalize(a), o.normalize(b)
		want := slices.SortedFunc(slices.Values(all), func(x, y FlowRecord) int { return CompareFlows(&x, &y) })

		w, v := &Window{Flows: slices.Grow(a, len(b))}, &Window{Flows: b}
		w.mergeShardFlows(v)
		if !slices.EqualFunc(w.Flows, want, func(x, y FlowRecord) bool { return x.Key == y.Key && x.C == y.C }) {
			t.Fatalf("%v: merged list is not the sorted union", sizes)
		}
		if !inOrder(w.Flows) {
			t.Errorf("%v: inOrder(merged) = false", sizes)
		}
		if got := o.normalize(w.Flows); len(got) != len(want) || len(got) > 0 && &got[0] != &w.Flows[0] {
			t.Errorf("%v: normalize moved or dropped records of a normalized list", sizes)
		}
	}
	// A flow listed twice is not in order: normalize must merge it.
	twice := []FlowRecord{rec(1, 5), rec(1, 5)}
	if inOrder(twice) {
		t.Error("inOrder accepts a flow listed twice")
	}
	var o flowOrder
	if got := o.normalize(twice); len(got) != 1 || got[0].C[FlowPackets] != 2 {
		t.Errorf("normalize(flow twice) = %d records, packets %d; want 1 record, 2", len(got), got[0].C[FlowPackets])
	}
}

// TestMergeShardFlowsTakesList checks that a window with no flows yet takes
// a shard's list, and its memory, instead of copying the records into room
// of its own (where lists live in regions of their own: Linux).
func TestMergeShardFlowsTakesList(t *testing.T) {
	w, v := &Window{}, &Window{}
	growFlows(w, 4096)
	for i := range 10 {
		newFlow(v, &FlowKey{DQP: uint32(i)})
	}
	if !v.flowMem.holds(v.Flows) {
		t.Skip("flow lists are not in regions of their own on this platform")
	}
	first := &v.Flows[0]
	w.mergeShardFlows(v)
	if len(w.Flows) != 10 || &w.Flows[0] != first || !w.flowMem.holds(w.Flows) {
		t.Fatalf("merged list of %d records is not the shard's list in its region", len(w.Flows))
	}
	for i := range w.Flows {
		if w.Flows[i].Key.DQP != uint32(i) {
			t.Fatalf("record %d has QP %d", i, w.Flows[i].Key.DQP)
		}
	}
	if len(v.Flows) != 0 || v.flowMem.holds(w.Flows) {
		t.Fatalf("the shard's window kept %d records, or the merged list's memory", len(v.Flows))
	}
}

// TestMergeShardFlowsGrowsLarger checks that a merge for which neither
// list has room grows the larger list's memory, not the smaller one's:
// the records beyond what a list held before go to pages never touched.
func TestMergeShardFlowsGrowsLarger(t *testing.T) {
	w, v := &Window{}, &Window{}
	growFlows(w, 100)
	growFlows(v, 3000)
	for i := range 60 {
		newFlow(w, &FlowKey{DQP: uint32(2 * i)})
	}
	for i := range 2990 {
		newFlow(v, &FlowKey{DQP: uint32(2*i + 1)})
	}
	if !v.flowMem.holds(v.Flows) || !w.flowMem.holds(w.Flows) {
		t.Skip("flow lists are not in regions of their own on this platform")
	}
	var o flowOrder
	w.Flows, v.Flows = o.normalize(w.Flows), o.normalize(v.Flows)
	small, large := cap(w.Flows), cap(v.Flows)
	w.mergeShardFlows(v)
	if len(w.Flows) != 3050 || !inOrder(w.Flows) {
		t.Fatalf("merged %d records, in order %v; want 3050 in order", len(w.Flows), inOrder(w.Flows))
	}
	// The other window is left the list the merge did not grow.
	if cap(v.Flows) != small {
		t.Errorf("the merge grew the list of room for %d records, not the one of room for %d", small, large)
	}
}

// TestCommitFlows checks, page by page as mincore sees them, that
// commitFlows commits the pages of a list's records from the first never
// written to the one asked for, and no others, and that roomFlows commits
// the room it makes.
func TestCommitFlows(t *testing.T) {
	mappedtest.Need(t)
	w := &Window{}
	growFlows(w, 4096)
	room := w.Flows[:cap(w.Flows)]
	if !w.flowMem.holds(w.Flows) {
		t.Skip("flow lists are not in regions of their own on this platform")
	}
	last := func(records int) int { return (records*int(unsafe.Sizeof(FlowRecord{})) - 1) / mapped.PageSize }
	w.commitFlows(100)
	mappedtest.Committed(t, "100 records", room, last(100))
	w.Flows = w.Flows[:100] // written
	w.commitFlows(90)       // written already
	mappedtest.Committed(t, "fewer", room, last(100))
	w.commitFlows(250)
	mappedtest.Committed(t, "250 records", room, last(250))
	w.Flows = w.Flows[:250] // written
	roomFlows(w, 50)        // room for 50 more, in its region already
	mappedtest.Committed(t, "room for 300", room, last(300))
}

// TestNormalizeMergesRepeats checks normalize on shuffled lists long enough
// for the radix sort, with hashes shared by different flows and flows
// listed several times (or not), against an independent result: records
// summed per key in a map, sorted by hash then key, opcodes in order.
func TestNormalizeMergesRepeats(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, repeats := range []bool{false, true} {
		var list []FlowRecord
		want := map[FlowKey]*FlowRecord{}
		for i := range 3000 {
			k := i
			if repeats && i%5 == 0 {
				k = rng.IntN(i + 1) // a flow seen before, or a new one
			}
			f := FlowRecord{Key: FlowKey{Src: decode.AddrFrom4([4]byte{10, 0, byte(k >> 8), byte(k)}), DQP: uint32(k)}, hash: uint64(k%61) << 40}
			f.C[FlowPackets] = uint64(i + 1)
			f.Ops.Add(uint8(200-i%7), 1)
			f.Ops.Add(uint8(i%3), 2)
			list = append(list, f)
			if w, ok := want[f.Key]; ok {
				w.merge(&f)
			} else {
				c := f
				want[f.Key] = &c
			}
		}
		rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		var o flowOrder
		got := o.normalize(list)
		if len(got) != len(want) {
			t.Fatalf("repeats %v: %d records, want %d flows", repeats, len(got), len(want))
		}
		for i := range got {
			w := want[got[i].Key]
			if i > 0 && CompareFlows(&got[i-1], &got[i]) >= 0 {
				t.Fatalf("repeats %v: records %d and %d out of order", repeats, i-1, i)
			}
			if got[i].C != w.C || got[i].Ops != w.Ops {
				t.Fatalf("repeats %v: record %d (%v) has %v %v, want %v %v", repeats, i, got[i].Key, got[i].C[FlowPackets], got[i].Ops, w.C[FlowPackets], w.Ops)
			}
		}
	}
}

// TestPermute: permute puts at each position the record perm names, on
// random permutations of up to 300 records.
func TestPermute(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	var o flowOrder
	for i := range 3000 {
		n := rng.IntN(300)
		perm := make([]uint32, n)
		for k := range perm {
			perm[k] = uint32(k)
		}
		rng.Shuffle(n, func(a, b int) { perm[a], perm[b] = perm[b], perm[a] })
		flows := make([]FlowRecord, n)
		for k := range flows {
			flows[k].C[FlowPackets] = uint64(k) // the record's old position
		}
		want := slices.Clone(perm)
		o.permute(flows, perm)
		for k, from := range want {
			if got := flows[k].C[FlowPackets]; got != uint64(from) {
				t.Fatalf("case %d (%d records): position %d holds the record from %d, want %d", i, n, k, got, from)
			}
		}
	}
}

// TestRadix checks radix against a stable comparison sort on uniform
// hashes with repeats (whose input order it must keep), on hashes that
// differ only in their low bits (one bucket: the comparison sort's path)
// and on lengths around its thresholds.
func TestRadix(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 255, 256, 257, 1000, 4096, 124000, 300000} {
		for _, skewed := range []bool{false, true} {
			a := make([]sortItem, n)
			for i := range a {
				h := rng.Uint64()
				if skewed {
					h &= 1<<20 - 1
				}
				if i > 0 && rng.IntN(10) == 0 {
					h = a[rng.IntN(i)].hash // a repeat, after the first
				}
				a[i] = sortItem{hash: h, pos: uint32(i)}
			}
			want := slices.Clone(a)
			slices.SortStableFunc(want, byHash)
			var o flowOrder
			if got := o.radix(a, make([]sortItem, n)); !slices.Equal(got, want) {
				t.Errorf("%d items, skewed %v: not the stable order", n, skewed)
			}
		}
	}
}

// BenchmarkRadix sorts the items of a closing window of 100 k connections
// (about 124 000: sortList's count on the gen trace).
func BenchmarkRadix(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]sortItem, 124000)
	for i := range src {
		src[i] = sortItem{hash: rng.Uint64(), pos: uint32(i)}
	}
	a, other := make([]sortItem, len(src)), make([]sortItem, len(src))
	var o flowOrder
	b.ReportAllocs()
	for b.Loop() {
		copy(a, src)
		o.radix(a, other)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/item")
}
