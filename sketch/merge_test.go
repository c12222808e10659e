package sketch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// encoder is what every sketch without a key codec implements.
type encoder interface {
	MarshalBinary() ([]byte, error)
}

// mustEncode returns the encoding of s.
func mustEncode(t testing.TB, s encoder) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appendUint32 and readUint32 are the key codec of the uint32 test keys.
func appendUint32(k uint32, b []byte) []byte { return binary.BigEndian.AppendUint32(b, k) }
func readUint32(b []byte) uint32             { return binary.BigEndian.Uint32(b) }

// testHash is the hash of a uint32 test key.
func testHash(k uint32) uint64 {
	b := [4]byte{byte(k), byte(k >> 8), byte(k >> 16), byte(k >> 24)}
	return Hash(DefaultSeed, b[:])
}

// encodeKeyed returns the encoding of a key-carrying sketch with the uint32
// codec.
func encodeKeyed(t testing.TB, s interface {
	AppendBinary([]byte, func(uint32, []byte) []byte) ([]byte, error)
}) []byte {
	t.Helper()
	b, err := s.AppendBinary(nil, appendUint32)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// split assigns each packet of st to part A or B: at random per packet (a
// flow is seen by both, like two capture points), or by key (like shards).
func split(st *stream, byKey bool) (a, b []int) {
	rng := rand.New(rand.NewPCG(13, 14))
	for i, k := range st.keys {
		if byKey && testHash(k)&1 == 0 || !byKey && rng.IntN(2) == 0 {
			a = append(a, i)
		} else {
			b = append(b, i)
		}
	}
	return a, b
}

// mergeStreams are the streams of the merge tests: small enough to be quick,
// skewed enough to exercise the top-k merge.
var mergeStreams = []streamSpec{
	{keys: 100_000, packets: 1_000_000, s: 1.0},
	{keys: 20_000, packets: 500_000, s: 0.8},
}

// TestMergeExact checks that merging the sketches of two halves of a stream
// gives, byte for byte, the sketch of the whole stream, for Linear Counting,
// Distinct (in its Linear Counting and its HyperLogLog range), standard
// Count-Min and Quantile, and that the merged estimates are equal.
func TestMergeExact(t *testing.T) {
	for _, spec := range mergeStreams {
		st := genStream(spec, 1)
		for _, byKey := range []bool{false, true} {
			a, b := split(st, byKey)
			type sketchSet struct {
				lc    *LinearCounting
				d, dh *Distinct
				cm    *CountMin
				q     *Quantile
			}
			build := func(idx []int) sketchSet {
				s := sketchSet{}
				s.lc, _ = NewLinearCounting(LinearCountingConfig{Bits: 1 << 16})
				s.d, _ = NewDistinct(DistinctConfig{})
				s.dh, _ = NewDistinct(DistinctConfig{Bits: 1 << 10, HLLPrecision: 12})
				s.cm, _ = NewCountMin(CountMinConfig{Depth: 4, Width: 1 << 12})
				s.q, _ = NewQuantile(QuantileConfig{})
				for _, i := range idx {
					h, w := st.hashes[st.keys[i]], uint64(st.sizes[i])
					s.lc.Insert(h)
					s.d.Insert(h)
					s.dh.Insert(h)
					s.cm.Add(h, w)
					s.q.Add(float64(w) * 1.37)
				}
				return s
			}
			all := make([]int, len(st.keys))
			for i := range all {
				all[i] = i
			}
			whole, sa, sb := build(all), build(a), build(b)
			for _, m := range []struct {
				name  string
				merge func() error
				got   encoder
				want  encoder
			}{
				{"linear counting", func() error { return sa.lc.Merge(sb.lc) }, sa.lc, whole.lc},
				{"distinct", func() error { return sa.d.Merge(sb.d) }, sa.d, whole.d},
				{"distinct hyperloglog", func() error { return sa.dh.Merge(sb.dh) }, sa.dh, whole.dh},
				{"count-min", func() error { return sa.cm.Merge(sb.cm) }, sa.cm, whole.cm},
				{"quantile", func() error { return sa.q.Merge(sb.q) }, sa.q, whole.q},
			} {
				if err := m.merge(); err != nil {
					t.Fatalf("%v by key %t: %s: %v", spec, byKey, m.name, err)
				}
				if !bytes.Equal(mustEncode(t, m.got), mustEncode(t, m.want)) {
					t.Errorf("%v by key %t: %s: merge differs from the sketch of the whole stream", spec, byKey, m.name)
				}
			}
			if g, w := sa.d.Estimate(), whole.d.Estimate(); g != w || g.Method != MethodLinearCounting {
				t.Errorf("distinct estimate %+v, whole %+v", g, w)
			}
			if g, w := sa.dh.Estimate(), whole.dh.Estimate(); g != w || g.Method != MethodHyperLogLog {
				t.Errorf("distinct hyperloglog estimate %+v, whole %+v", g, w)
			}
			if g, w := sa.lc.Estimate(), whole.lc.Estimate(); g != w {
				t.Errorf("linear counting estimate %+v, whole %+v", g, w)
			}
			for _, p := range []float64{0, 0.5, 0.99, 1} {
				if g, w := sa.q.Quantile(p), whole.q.Quantile(p); g != w {
					t.Errorf("quantile %g: %g, whole %g", p, g, w)
				}
			}
		}
	}
}

// TestMergeConservative checks the stated bound of merged conservative
// Count-Min sketches: never below the true weight, never above the standard
// sketch of the whole stream.
func TestMergeConservative(t *testing.T) {
	st := genStream(mergeStreams[0], 2)
	a, b := split(st, false)
	cfg := CountMinConfig{Depth: 4, Width: 1 << 12}
	std, _ := NewCountMin(cfg)
	cfg.Conservative = true
	ca, _ := NewCountMin(cfg)
	cb, _ := NewCountMin(cfg)
	for _, part := range []struct {
		idx []int
		c   *CountMin
	}{{a, ca}, {b, cb}} {
		for _, i := range part.idx {
			h, w := st.hashes[st.keys[i]], uint64(st.sizes[i])
			part.c.Add(h, w)
			std.Add(h, w)
		}
	}
	if err := ca.Merge(cb); err != nil {
		t.Fatal(err)
	}
	if ca.Total() != st.total {
		t.Errorf("total %d, want %d", ca.Total(), st.total)
	}
	for k, want := range st.bytes {
		h := st.hashes[k]
		if got, hi := ca.Estimate(h), std.Estimate(h); got < want || got > hi {
			t.Fatalf("key %d: merged conservative %d, true %d, standard %d", k, got, want, hi)
		}
	}
}

// TestMergeTopK checks that merged top-k sketches keep their bounds for
// every key, both when the halves share flows (Merge) and when they split
// them by key (MergeDisjoint, and Merge, whose bounds hold too), and that the
// merged top 100 of a Zipf 1.0 stream is still right: recall ≥ 99 % and, for
// the exact MergeDisjoint, byte counts within 1 % on average.
func TestMergeTopK(t *testing.T) {
	st := genStream(mergeStreams[0], 3)
	truth := st.topKeys(100)
	for _, c := range []struct {
		byKey, disjoint bool
	}{{false, false}, {true, true}, {true, false}} {
		a, b := split(st, c.byKey)
		ta, _ := NewTopK[uint32](TopKConfig{})
		tb, _ := NewTopK[uint32](TopKConfig{})
		for _, part := range []struct {
			idx []int
			t   *TopK[uint32]
		}{{a, ta}, {b, tb}} {
			for _, i := range part.idx {
				k := st.keys[i]
				part.t.Update(st.hashes[k], k, uint64(st.sizes[i]))
			}
		}
		merge := ta.Merge
		if c.disjoint {
			merge = ta.MergeDisjoint
		}
		if err := merge(tb); err != nil {
			t.Fatal(err)
		}
		for k, want := range st.bytes {
			h := st.hashes[k]
			if e, ok := ta.Lookup(h); ok {
				if e.Key != uint32(k) || e.Count < want || e.Count-e.Error > want {
					t.Fatalf("%+v: key %d: %d bytes, merged entry %+v", c, k, want, e)
				}
			} else if bound := ta.Bound(h); want > bound {
				t.Fatalf("%+v: key %d: %d bytes, absent, bound %d", c, k, want, bound)
			}
		}
		got := ta.Top(nil)[:100]
		in := map[uint32]bool{}
		are := 0.0
		for _, e := range got {
			in[e.Key] = true
			are += float64(e.Count-st.bytes[e.Key]) / float64(st.bytes[e.Key]) / float64(len(got))
		}
		hits := 0
		for _, k := range truth {
			if in[k] {
				hits++
			}
		}
		t.Logf("MERGE TOPK | %s | by key %t disjoint %t | top100 recall %d%% ARE %.4f%%", st.spec, c.byKey, c.disjoint, hits, 100*are)
		if c.byKey == c.disjoint && hits < 99 || c.disjoint && are > maxTopARE {
			t.Errorf("%+v: merged top 100 holds %d of the true top 100, ARE %.4f%%", c, hits, 100*are)
		}
	}
}

// TestMergeTopKSmall checks the merge rule on one bucket by hand.
func TestMergeTopKSmall(t *testing.T) {
	newT := func() *TopK[uint32] {
		return must(NewTopK[uint32](TopKConfig{K: TopKWays, Capacity: TopKWays}))
	}
	a, b := newT(), newT()
	for _, u := range []struct {
		t    *TopK[uint32]
		k    uint32
		w    uint64
		want Entry[uint32]
	}{
		{a, 1, 10, Entry[uint32]{Key: 1, Count: 10}},
		{a, 2, 20, Entry[uint32]{Key: 2, Count: 20}},
		{a, 3, 5, Entry[uint32]{Key: 3, Count: 5}},
		{a, 4, 1, Entry[uint32]{Key: 4, Count: 1}},
		{a, 10, 30, Entry[uint32]{Key: 10, Count: 30}},
		{a, 11, 40, Entry[uint32]{Key: 11, Count: 40}},
		{a, 12, 50, Entry[uint32]{Key: 12, Count: 50}},
		{a, 13, 60, Entry[uint32]{Key: 13, Count: 60}},
		{a, 5, 2, Entry[uint32]{Key: 5, Count: 3, Error: 1}}, // replaces 4
		{b, 1, 7, Entry[uint32]{Key: 1, Count: 7}},
		{b, 6, 4, Entry[uint32]{Key: 6, Count: 4}},
	} {
		u.t.Update(testHash(u.k), u.k, u.w)
		got, ok := u.t.Lookup(testHash(u.k))
		u.want.Hash = testHash(u.k)
		if !ok || got != u.want {
			t.Fatalf("after update of %d: %+v, want %+v", u.k, got, u.want)
		}
	}
	if _, ok := a.Lookup(testHash(4)); ok {
		t.Fatal("key 4 still in the table")
	}
	disjoint := a.Clone()
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	// a's bucket is full (least 3), b's is not (least 0): 1 adds up, a's
	// others add 0, 6 adds a's least 3. Of the nine, the eight heaviest
	// stay: 5 (3) goes.
	want := []Entry[uint32]{
		{Key: 13, Count: 60}, {Key: 12, Count: 50}, {Key: 11, Count: 40}, {Key: 10, Count: 30},
		{Key: 2, Count: 20}, {Key: 1, Count: 17}, {Key: 6, Count: 7, Error: 3}, {Key: 3, Count: 5},
	}
	for i := range want {
		want[i].Hash = testHash(want[i].Key)
	}
	if diff := cmp.Diff(want, a.Top(nil)); diff != "" {
		t.Errorf("Merge: Top (-want +got):\n%s", diff)
	}
	if _, ok := a.Lookup(testHash(5)); ok || a.Bound(testHash(5)) != 5 {
		t.Errorf("key 5 kept, or bound %d, want 5", a.Bound(testHash(5)))
	}
	// Disjoint, 6 keeps its count and error: 4, 0; 5 (3) still goes.
	if err := disjoint.MergeDisjoint(b); err != nil {
		t.Fatal(err)
	}
	want[6] = Entry[uint32]{Key: 3, Hash: testHash(3), Count: 5}
	want[7] = Entry[uint32]{Key: 6, Hash: testHash(6), Count: 4}
	if diff := cmp.Diff(want, disjoint.Top(nil)); diff != "" {
		t.Errorf("MergeDisjoint: Top (-want +got):\n%s", diff)
	}
}

// TestMergeIncompatible checks that every Merge refuses sketches of other
// dimensions, seeds or rules, and leaves the receiver unchanged.
func TestMergeIncompatible(t *testing.T) {
	lc := func(c LinearCountingConfig) *LinearCounting { x, _ := NewLinearCounting(c); x.Insert(1); return x }
	di := func(c DistinctConfig) *Distinct { x, _ := NewDistinct(c); x.Insert(1); return x }
	cm := func(c CountMinConfig) *CountMin { x, _ := NewCountMin(c); x.Add(1, 1); return x }
	qu := func(c QuantileConfig) *Quantile { x, _ := NewQuantile(c); x.Add(1); return x }
	type pair struct {
		name  string
		enc   func() []byte
		merge func() error
	}
	var pairs []pair
	add := func(name string, recv encoder, merge func() error) {
		pairs = append(pairs, pair{name, func() []byte { return mustEncode(t, recv) }, merge})
	}
	for _, o := range []LinearCountingConfig{{Bits: 1 << 10}, {Seed: 7}} {
		r := lc(LinearCountingConfig{})
		add("linear counting", r, func() error { return r.Merge(lc(o)) })
	}
	for _, o := range []DistinctConfig{{Bits: 1 << 10}, {Seed: 7}, {HLLPrecision: 12}} {
		r := di(DistinctConfig{})
		add("distinct", r, func() error { return r.Merge(di(o)) })
	}
	for _, o := range []CountMinConfig{{Depth: 3}, {Width: 1 << 10}, {Seed: 7}, {Conservative: true}} {
		r := cm(CountMinConfig{})
		add("count-min", r, func() error { return r.Merge(cm(o)) })
	}
	for _, o := range []QuantileConfig{{RelativeAccuracy: 0.02}, {MinValue: 0.5}, {MaxValue: 1e15}} {
		r := qu(QuantileConfig{})
		add("quantile", r, func() error { return r.Merge(qu(o)) })
	}
	for _, o := range []TopKConfig{{K: 10}, {Capacity: 8192}, {Seed: 7}} {
		r, _ := NewTopK[uint32](TopKConfig{})
		r.Update(1, 1, 1)
		x, _ := NewTopK[uint32](o)
		pairs = append(pairs, pair{"top-k", func() []byte { return encodeKeyed(t, r) }, func() error { return r.Merge(x) }})
	}
	for _, p := range pairs {
		before := p.enc()
		err := p.merge()
		if !errors.Is(err, ErrIncompatible) {
			t.Errorf("%s: Merge = %v, want ErrIncompatible", p.name, err)
		}
		if !bytes.Equal(before, p.enc()) {
			t.Errorf("%s: failed Merge changed the receiver", p.name)
		}
	}
}
