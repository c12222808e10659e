package sketch

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// resetKit is one sketch type's operations, so that TestResetDirty runs
// over every type alike.
type resetKit[S any] struct {
	name  string
	new   func() S // an empty sketch of the configuration under test
	zero  func() S // a zero value, the receiver of UnmarshalBinary
	fill  func(s S, seed uint64)
	merge func(dst, src S) error
	enc   func(S) []byte
	dec   func(S, []byte) error
	clone func(S) S
	dirty func(S) bool
	reset func(S)
}

// run checks that Reset returns the sketch to the state of a new one after
// every kind of write (adds, a merge into an empty sketch, a decode of a
// non-empty or an empty encoding into a new sketch or a zero value, a
// clone), that these writes mark it dirty, and that what cannot change the
// sketch (a merge of an empty sketch, a failed decode) leaves it clean.
func (k resetKit[S]) run(t *testing.T) {
	t.Run(k.name, func(t *testing.T) {
		empty := k.enc(k.new())
		filled := func(seed uint64) S { s := k.new(); k.fill(s, seed); return s }
		// check resets s and checks that it is clean, encodes as a new
		// sketch and fills as one.
		check := func(step string, s S, wantDirty bool) {
			t.Helper()
			if got := k.dirty(s); got != wantDirty {
				t.Errorf("%s: dirty = %t before Reset, want %t", step, got, wantDirty)
			}
			k.reset(s)
			if k.dirty(s) {
				t.Errorf("%s: dirty after Reset", step)
			}
			if got := k.enc(s); !bytes.Equal(got, empty) {
				t.Errorf("%s: Reset gives %x, a new sketch %x", step, got, empty)
			}
			k.fill(s, 99)
			if got, want := k.enc(s), k.enc(filled(99)); !bytes.Equal(got, want) {
				t.Errorf("%s: filled after Reset %x, filled new %x", step, got, want)
			}
		}

		check("new", k.new(), false)
		s := k.new()
		k.reset(s)
		check("reset twice", s, false)
		check("adds", filled(1), true)

		s = k.new()
		if err := k.merge(s, filled(2)); err != nil {
			t.Fatal(err)
		}
		check("merge into an empty sketch", s, true)

		s = k.new()
		if err := k.merge(s, k.new()); err != nil {
			t.Fatal(err)
		}
		check("merge of an empty sketch into an empty one", s, false)

		s = filled(3)
		before := k.enc(s)
		if err := k.merge(s, k.new()); err != nil {
			t.Fatal(err)
		}
		if got := k.enc(s); !bytes.Equal(got, before) {
			t.Errorf("merge of an empty sketch changed the receiver: %x, want %x", got, before)
		}
		check("merge of an empty sketch into a filled one", s, true)

		data := k.enc(filled(4))
		if bytes.Equal(data, empty) {
			t.Fatal("fill added nothing")
		}
		s = k.new()
		if err := k.dec(s, data); err != nil {
			t.Fatal(err)
		}
		check("decode into a new sketch", s, true)
		s = k.zero()
		if err := k.dec(s, data); err != nil {
			t.Fatal(err)
		}
		check("decode into a zero value", s, true)
		s = filled(5)
		if err := k.dec(s, empty); err != nil {
			t.Fatal(err)
		}
		k.reset(s)
		if got := k.enc(s); !bytes.Equal(got, empty) {
			t.Errorf("decode of an empty encoding, Reset: %x, want %x", got, empty)
		}
		s = k.new()
		if err := k.dec(s, data[:len(data)-1]); err == nil {
			t.Fatal("truncated encoding decoded")
		}
		check("failed decode", s, false)

		s = filled(6)
		before = k.enc(s)
		check("clone", k.clone(s), true)
		if got := k.enc(s); !bytes.Equal(got, before) {
			t.Error("Reset of a clone changed its original")
		}
	})
}

// TestResetDirty checks the dirty tracking that makes Reset O(1) on a
// sketch nothing was written to: see resetKit.run.
func TestResetDirty(t *testing.T) {
	rng := func(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 77)) }
	resetKit[*LinearCounting]{
		name: "linear counting",
		new:  func() *LinearCounting { return must(NewLinearCounting(LinearCountingConfig{Bits: 1 << 12})) },
		zero: func() *LinearCounting { return new(LinearCounting) },
		fill: func(s *LinearCounting, seed uint64) {
			fill(seed, 300, func(h uint64, _ int) { s.Insert(h) })
		},
		merge: (*LinearCounting).Merge,
		enc:   func(s *LinearCounting) []byte { return encOf(s) },
		dec:   (*LinearCounting).UnmarshalBinary,
		clone: (*LinearCounting).Clone,
		dirty: func(s *LinearCounting) bool { return s.dirty },
		reset: (*LinearCounting).Reset,
	}.run(t)
	resetKit[*Distinct]{
		name: "distinct",
		new:  func() *Distinct { return must(NewDistinct(DistinctConfig{Bits: 1 << 12, HLLPrecision: 8})) },
		zero: func() *Distinct { return new(Distinct) },
		fill: func(s *Distinct, seed uint64) {
			fill(seed, 300, func(h uint64, _ int) { s.Insert(h) })
		},
		merge: (*Distinct).Merge,
		enc:   func(s *Distinct) []byte { return encOf(s) },
		dec:   (*Distinct).UnmarshalBinary,
		clone: (*Distinct).Clone,
		dirty: func(s *Distinct) bool { return s.lc.dirty },
		reset: (*Distinct).Reset,
	}.run(t)
	for _, conservative := range []bool{false, true} {
		resetKit[*CountMin]{
			name: "count-min/conservative=" + strconv.FormatBool(conservative),
			new: func() *CountMin {
				return must(NewCountMin(CountMinConfig{Depth: 3, Width: 1 << 10, Conservative: conservative}))
			},
			zero: func() *CountMin { return new(CountMin) },
			fill: func(s *CountMin, seed uint64) {
				fill(seed, 300, func(h uint64, i int) { s.Add(h%97, uint64(1+i)) })
			},
			merge: (*CountMin).Merge,
			enc:   func(s *CountMin) []byte { return encOf(s) },
			dec:   (*CountMin).UnmarshalBinary,
			clone: (*CountMin).Clone,
			dirty: func(s *CountMin) bool { return s.dirty },
			reset: (*CountMin).Reset,
		}.run(t)
	}
	resetKit[*TopK[uint32]]{
		name: "top-k",
		new:  func() *TopK[uint32] { return must(NewTopK[uint32](TopKConfig{K: 16, Capacity: 64})) },
		zero: func() *TopK[uint32] { return new(TopK[uint32]) },
		fill: func(s *TopK[uint32], seed uint64) {
			r := rng(seed)
			for range 300 { // more keys than entries: replacements too
				k := uint32(r.IntN(200))
				s.Update(testHash(k), k, uint64(1+r.IntN(9)))
			}
		},
		merge: (*TopK[uint32]).Merge,
		enc:   func(s *TopK[uint32]) []byte { return keyedEncOf(s) },
		dec:   func(s *TopK[uint32], data []byte) error { return s.UnmarshalBinary(data, 4, readUint32) },
		clone: (*TopK[uint32]).Clone,
		dirty: func(s *TopK[uint32]) bool { return s.dirty },
		reset: (*TopK[uint32]).Reset,
	}.run(t)
	resetKit[*Quantile]{
		name: "quantile",
		new: func() *Quantile {
			return must(NewQuantile(QuantileConfig{RelativeAccuracy: 0.05, MinValue: 1, MaxValue: 1e6}))
		},
		zero: func() *Quantile { return new(Quantile) },
		fill: func(s *Quantile, seed uint64) {
			r := rng(seed)
			for range 300 {
				s.Add(r.Float64() * 2e6) // some past the range
			}
		},
		merge: (*Quantile).Merge,
		enc:   func(s *Quantile) []byte { return encOf(s) },
		dec:   (*Quantile).UnmarshalBinary,
		clone: (*Quantile).Clone,
		dirty: func(s *Quantile) bool { return s.dirty },
		reset: (*Quantile).Reset,
	}.run(t)
}

// checkBlocks checks the invariant of the Count-Min dirty marks: every
// non-zero counter lies in a marked block.
func checkBlocks(t *testing.T, step string, c *CountMin) {
	t.Helper()
	for i, v := range c.counters {
		b := i >> countMinBlockLog2
		if v != 0 && c.blocks[b] == 0 {
			t.Fatalf("%s: counter %d = %d in unmarked block %d", step, i, v, b)
		}
	}
}

// TestCountMinBlocks checks that Add, Merge, UnmarshalBinary and Clone keep
// the invariant of the dirty marks, that a few adds mark only their blocks, and
// that Reset then clears them all.
func TestCountMinBlocks(t *testing.T) {
	for _, cfg := range []CountMinConfig{
		{Depth: 4, Width: DefaultCountMinWidth},
		{Depth: 4, Width: DefaultCountMinWidth, Conservative: true},
		{Depth: 3, Width: 1 << 7}, // 384 counters: one partial block
		{Depth: 5, Width: 1 << 13},
	} {
		name := strconv.Itoa(cfg.Depth) + "x" + strconv.Itoa(cfg.Width) + "/conservative=" + strconv.FormatBool(cfg.Conservative)
		a, b := must(NewCountMin(cfg)), must(NewCountMin(cfg))
		empty := encOf(a)
		fill(11, 5, func(h uint64, i int) { a.Add(h, uint64(1+i)) })
		checkBlocks(t, name+" add", a)
		marked := 0
		for _, d := range a.blocks {
			marked += int(d)
		}
		if marked > 5*cfg.Depth {
			t.Errorf("%s: 5 adds marked %d blocks, more than %d", name, marked, 5*cfg.Depth)
		}
		fill(12, 7, func(h uint64, i int) { b.Add(h, uint64(1+i)) })
		if err := a.Merge(b); err != nil {
			t.Fatal(err)
		}
		checkBlocks(t, name+" merge", a)
		var d CountMin
		if err := d.UnmarshalBinary(encOf(a)); err != nil {
			t.Fatal(err)
		}
		checkBlocks(t, name+" decode", &d)
		checkBlocks(t, name+" clone", a.Clone())
		for _, s := range []*CountMin{a, &d} {
			s.Reset()
			if !bytes.Equal(encOf(s), empty) {
				t.Errorf("%s: Reset does not give the empty sketch", name)
			}
			if slices.Contains(s.blocks, 1) {
				t.Errorf("%s: blocks marked after Reset", name)
			}
		}
	}
}

// TestLinearCountingCountsAndClears checks the running count of set bits
// against a popcount of the bitmap, and that Reset leaves every word zero
// both when it clears only the words Insert touched (few inserts) and when
// it clears the whole bitmap (many, or a merge).
func TestLinearCountingCountsAndClears(t *testing.T) {
	l, err := NewLinearCounting(LinearCountingConfig{Bits: 1 << 16, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	popcount := func() (n int) {
		for _, w := range l.words {
			n += bits.OnesCount64(w)
		}
		return n
	}
	for _, inserts := range []int{1, 5, len(l.touched), len(l.touched) + 1, 5000} {
		for i := range inserts {
			l.Insert(Hash(3, []byte{byte(i), byte(i >> 8), 7}))
			l.Insert(Hash(3, []byte{byte(i), byte(i >> 8), 7})) // again: no new bit
		}
		if z := l.Zeros(); z != l.Bits()-popcount() {
			t.Errorf("%d inserts: Zeros %d, the bitmap has %d", inserts, z, l.Bits()-popcount())
		}
		l.Reset()
		if n := popcount(); n != 0 || l.Zeros() != l.Bits() {
			t.Errorf("%d inserts: %d bits left after Reset, Zeros %d", inserts, n, l.Zeros())
		}
	}
	// Merges of every mix of few and many bits on either side, one after
	// the other into the same l (so that its list of words is reused
	// across Resets): the bitmap must be the one a sketch that saw both
	// sides' hashes has, and Reset must leave nothing.
	o, _ := NewLinearCounting(LinearCountingConfig{Bits: 1 << 16, Seed: 3})
	both, _ := NewLinearCounting(LinearCountingConfig{Bits: 1 << 16, Seed: 3})
	sizes := []int{0, 1, 5, len(l.touched), len(l.touched) + 1, 5000}
	for _, nl := range sizes {
		for _, no := range sizes {
			for i := range nl {
				h := Hash(3, []byte{byte(i), byte(i >> 8), 'l'})
				l.Insert(h)
				both.Insert(h)
			}
			for i := range no {
				h := Hash(3, []byte{byte(i), byte(i >> 8), 'o'})
				o.Insert(h)
				both.Insert(h)
			}
			if i := len(l.words) / 2; nl == 1 && no == 1 {
				// a word both set bits in, already known to l
				o.Insert(uint64(i) << 6 << (64 - 16))
				both.Insert(uint64(i) << 6 << (64 - 16))
				l.Insert(uint64(i)<<6<<(64-16) | 1<<(64-16))
				both.Insert(uint64(i)<<6<<(64-16) | 1<<(64-16))
			}
			if err := l.Merge(o); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(l.words, both.words) || l.Zeros() != l.Bits()-popcount() {
				t.Errorf("merge of %d and %d inserts: bitmap differs from one sketch of both, or Zeros %d for %d bits set", nl, no, l.Zeros(), popcount())
			}
			for _, s := range []*LinearCounting{l, o, both} {
				s.Reset()
			}
			if n := popcount(); n != 0 {
				t.Errorf("merge of %d and %d inserts: %d bits left after Reset", nl, no, n)
			}
		}
	}
}
