package sketch

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// TestLogDet compares logDet with math.Log over the range the package uses
// and beyond.
func TestLogDet(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	worst := 0.0
	for i := range 200_000 {
		x := math.Exp(rng.Float64()*80 - 20)
		if i < 100 {
			x = 1 + float64(i)*1e-3
		}
		got, want := logDet(x), math.Log(x)
		d := math.Abs(got-want) / max(1, math.Abs(want))
		worst = max(worst, d)
		if d > 4e-16 {
			t.Fatalf("logDet(%v) = %v, math.Log %v", x, got, want)
		}
	}
	if logDet(1) != 0 || logDet(2) != math.Ln2 {
		t.Errorf("logDet(1) = %v, logDet(2) = %v", logDet(1), logDet(2))
	}
	t.Logf("largest difference %.2g", worst)
}

// TestLinearEstimate checks the estimate and its error against values
// computed by hand (Python, math.log).
func TestLinearEstimate(t *testing.T) {
	for _, c := range []struct {
		m, z int
		want Estimate
	}{
		{64, 64, Estimate{0, 0, MethodLinearCounting}},
		{64, 32, Estimate{44.3614195558365, 0.09989634785277472, MethodLinearCounting}},
		{64, 0, Estimate{266.168517335019, 1, MethodLinearCounting}},
	} {
		got := linearEstimate(c.m, c.z)
		if math.Abs(got.Value-c.want.Value) > 1e-12 || math.Abs(got.RelErr-c.want.RelErr) > 1e-15 || got.Method != c.want.Method {
			t.Errorf("linearEstimate(%d, %d) = %+v, want %+v", c.m, c.z, got, c.want)
		}
	}
}

// TestDistinctSwitch checks where Distinct switches from Linear Counting to
// HyperLogLog: at the zero count where Linear Counting's standard error
// exceeds HyperLogLog's, computed independently (Python): 11 zero bits of
// 1024 at precision 8, 144 of 2^22 at precision 14.
func TestDistinctSwitch(t *testing.T) {
	if z := switchZeros(1<<22, 14); z != 144 {
		t.Errorf("switchZeros(2^22, 14) = %d, want 144", z)
	}
	d := must(NewDistinct(DistinctConfig{Bits: 1 << 10, HLLPrecision: 8}))
	if d.zmin != 11 {
		t.Fatalf("zmin = %d, want 11", d.zmin)
	}
	// Set bits 0, 1, ... one at a time: the top 10 bits of the hash pick
	// the bit.
	for i := range 1024 - 11 {
		d.Insert(uint64(i) << 54)
	}
	if e := d.Estimate(); e.Method != MethodLinearCounting || e != d.LinearCounting() {
		t.Errorf("11 zero bits: %+v, want Linear Counting %+v", e, d.LinearCounting())
	}
	d.Insert(uint64(1024-11) << 54)
	if e := d.Estimate(); e.Method != MethodHyperLogLog || e != d.HyperLogLog() {
		t.Errorf("10 zero bits: %+v, want HyperLogLog", e)
	}
}

// TestTopKSmall follows one bucket of eight entries by hand.
func TestTopKSmall(t *testing.T) {
	x := must(NewTopK[string](TopKConfig{K: 3, Capacity: TopKWays}))
	h := func(s string) uint64 { return Hash(DefaultSeed, []byte(s)) }
	for _, u := range []struct {
		key string
		w   uint64
	}{
		{"a", 50}, {"b", 3}, {"c", 7}, {"d", 8}, {"e", 9}, {"f", 10}, {"g", 11}, {"h", 12}, // full
		{"i", 1},  // replaces b (3): 4, error 3
		{"b", 2},  // replaces i (4): 6, error 4
		{"a", 0},  // no change
		{"zz", 0}, // not added
		{"h", 1},
	} {
		x.Update(h(u.key), u.key, u.w)
	}
	want := []Entry[string]{
		{Key: "a", Hash: h("a"), Count: 50},
		{Key: "h", Hash: h("h"), Count: 13},
		{Key: "g", Hash: h("g"), Count: 11},
	}
	if diff := cmp.Diff(want, x.Top(nil)); diff != "" {
		t.Errorf("Top (-want +got):\n%s", diff)
	}
	if e, ok := x.Lookup(h("b")); !ok || e != (Entry[string]{Key: "b", Hash: h("b"), Count: 6, Error: 4}) {
		t.Errorf("Lookup(b) = %+v, %t", e, ok)
	}
	if b := x.Bound(h("i")); b != 6 {
		t.Errorf("Bound = %d, want 6", b)
	}
	for _, k := range []string{"i", "zz"} {
		if _, ok := x.Lookup(h(k)); ok {
			t.Errorf("%s in the table", k)
		}
	}
	top := x.Top(make([]Entry[string], 1, 16))[1:]
	if diff := cmp.Diff(want, top); diff != "" {
		t.Errorf("Top appended (-want +got):\n%s", diff)
	}
}

// TestQuantileSmall checks buckets, quantiles and the special values by hand:
// accuracy 0.25 gives S = 2 sub-buckets per octave over [1, 8):
// [1,1.5) [1.5,2) [2,3) [3,4) [4,6) [6,8), reported at their harmonic
// midpoints 1.2, 12/7, 2.4, 24/7, 4.8 and 48/7.
func TestQuantileSmall(t *testing.T) {
	q := must(NewQuantile(QuantileConfig{RelativeAccuracy: 0.25, MinValue: 1, MaxValue: 4}))
	if q.RelativeAccuracy() != 0.2 || len(q.counts) != 6 {
		t.Fatalf("accuracy %v, %d buckets; want 0.2, 6", q.RelativeAccuracy(), len(q.counts))
	}
	if q.Quantile(0.5) != 0 || q.Min() != 0 || q.Max() != 0 || q.Count() != 0 {
		t.Error("empty sketch does not answer 0")
	}
	for _, v := range []float64{1.6, 9, 0.5, 2.5, 7, 1.4, 1, math.NaN()} {
		q.Add(v)
	}
	// Sorted: 0.5 (under), 1, 1.4, 1.6, 2.5, 7, 9 (over).
	for _, c := range []struct{ p, want float64 }{
		{0, 0.5}, {0.17, 1.2}, {0.34, 1.2}, {0.5, 12.0 / 7}, {0.7, 2.4}, {0.84, 48.0 / 7}, {1, 9},
	} {
		if got := q.Quantile(c.p); got != c.want {
			t.Errorf("Quantile(%g) = %v, want %v", c.p, got, c.want)
		}
	}
	if !math.IsNaN(q.Quantile(-0.1)) || !math.IsNaN(q.Quantile(1.1)) || !math.IsNaN(q.Quantile(math.NaN())) {
		t.Error("Quantile outside [0, 1] is not NaN")
	}
	want := []uint64{2, 1, 1, 0, 0, 1}
	if q.Count() != 7 || q.under != 1 || q.over != 1 || !cmp.Equal(q.counts, want) || q.Min() != 0.5 || q.Max() != 9 {
		t.Errorf("count %d under %d over %d buckets %v min %v max %v", q.Count(), q.under, q.over, q.counts, q.Min(), q.Max())
	}
	n := must(NewQuantile(QuantileConfig{}))
	n.Add(math.Copysign(0, -1))
	n.AddNanos(5)
	if n.Min() != 0 || math.Signbit(n.Min()) || n.Quantile(1) != 5 {
		t.Errorf("-0 and 5: min %v, max quantile %v", n.Min(), n.Quantile(1))
	}
}

// TestCountMinIn: a sketch made in the caller's counters counts in them,
// and estimates, encodes and resets as one with its own; counters of
// another length are refused.
func TestCountMinIn(t *testing.T) {
	cfg := CountMinConfig{Depth: 3, Width: 1 << 10}
	if n, err := cfg.Counters(); n != 3<<10 || err != nil {
		t.Fatalf("Counters of 3×1024: %d, %v", n, err)
	}
	if n, err := (CountMinConfig{}).Counters(); n != DefaultCountMinDepth*DefaultCountMinWidth || err != nil {
		t.Fatalf("Counters of the defaults: %d, %v; want %d", n, err, DefaultCountMinDepth*DefaultCountMinWidth)
	}
	if _, err := (CountMinConfig{Depth: 4, Width: 1 << 62}).Counters(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Counters of 4×2^62: %v, want ErrConfig", err)
	}
	mem := make([]uint64, 3<<10)
	in := must(NewCountMinIn(cfg, mem))
	own := must(NewCountMin(cfg))
	for k := range uint32(500) {
		in.Add(testHash(k), uint64(k))
		own.Add(testHash(k), uint64(k))
	}
	var sum uint64
	for _, v := range mem {
		sum += v
	}
	if sum != 3*own.Total() || own.Total() != 124750 {
		t.Fatalf("the caller's counters sum to %d, want 3 rows of %d (124750)", sum, own.Total())
	}
	a, b := must(in.MarshalBinary()), must(own.MarshalBinary())
	if !bytes.Equal(a, b) {
		t.Fatal("a sketch in the caller's counters encodes differently")
	}
	in.Reset()
	for i, v := range mem {
		if v != 0 {
			t.Fatalf("counter %d is %d after Reset", i, v)
		}
	}
	for _, n := range []int{3<<10 - 1, 3<<10 + 1, 1} {
		if _, err := NewCountMinIn(cfg, make([]uint64, n)); !errors.Is(err, ErrConfig) {
			t.Errorf("%d counters for 3×1024: %v, want ErrConfig", n, err)
		}
	}
}

// TestCountMinSmall checks exact estimates when few keys share no counter,
// and conservative update against the standard rule.
func TestCountMinSmall(t *testing.T) {
	std := must(NewCountMin(CountMinConfig{Depth: 4, Width: 1 << 16}))
	cu := must(NewCountMin(CountMinConfig{Depth: 4, Width: 1 << 16, Conservative: true}))
	for k := range uint32(20) {
		for range k {
			std.Add(testHash(k), uint64(k))
			cu.Add(testHash(k), uint64(k))
		}
	}
	for k := range uint32(20) {
		if a, b := std.Estimate(testHash(k)), cu.Estimate(testHash(k)); a != uint64(k*k) || b != a {
			t.Errorf("key %d: estimates %d and %d, want %d", k, a, b, k*k)
		}
	}
	if std.Total() != 2470 || cu.Total() != 2470 {
		t.Errorf("totals %d %d, want 2470", std.Total(), cu.Total())
	}
	// Two rows of two counters: every pair of keys collides somewhere,
	// and conservative update keeps the estimates lower.
	std2 := must(NewCountMin(CountMinConfig{Depth: 2, Width: 2}))
	cu2 := must(NewCountMin(CountMinConfig{Depth: 2, Width: 2, Conservative: true}))
	exact := map[uint32]uint64{}
	rng := rand.New(rand.NewPCG(21, 22))
	for range 1000 {
		k, w := uint32(rng.IntN(10)), uint64(rng.IntN(100))
		exact[k] += w
		std2.Add(testHash(k), w)
		cu2.Add(testHash(k), w)
	}
	lower := false
	for k, w := range exact {
		a, b := std2.Estimate(testHash(k)), cu2.Estimate(testHash(k))
		if b < w || b > a {
			t.Errorf("key %d: true %d, standard %d, conservative %d", k, w, a, b)
		}
		lower = lower || b < a
	}
	if !lower {
		t.Error("conservative update never estimates below standard")
	}
}

// TestConfig checks that constructors reject invalid configurations with
// ErrConfig and accept the limits.
func TestConfig(t *testing.T) {
	bad := map[string]error{}
	ok := map[string]error{}
	try := func(m map[string]error, name string, err error) { m[name] = err }
	for _, b := range []int{32, 100, 1 << 29, -64} {
		_, err := NewLinearCounting(LinearCountingConfig{Bits: b})
		try(bad, "linear counting bits "+itoa(b), err)
	}
	_, err := NewLinearCounting(LinearCountingConfig{Bits: 64})
	try(ok, "linear counting 64", err)
	for _, p := range []uint8{3, 19} {
		_, err := NewDistinct(DistinctConfig{HLLPrecision: p})
		try(bad, "distinct precision "+itoa(int(p)), err)
	}
	_, err = NewDistinct(DistinctConfig{Bits: 100})
	try(bad, "distinct bits 100", err)
	_, err = NewDistinct(DistinctConfig{HLLPrecision: 18, Bits: 1 << 28})
	try(ok, "distinct limits", err)
	for _, c := range []CountMinConfig{{Depth: 17}, {Depth: -1}, {Width: 1}, {Width: 3}, {Depth: 2, Width: 1 << 24}, {Depth: 4, Width: 1 << 62}} {
		_, err := NewCountMin(c)
		try(bad, "count-min "+itoa(c.Depth)+"x"+itoa(c.Width), err)
	}
	_, err = NewCountMin(CountMinConfig{Depth: 1, Width: 1 << 24})
	try(ok, "count-min limits", err)
	for _, c := range []TopKConfig{{K: -1}, {K: 9, Capacity: 8}, {Capacity: 6000}, {Capacity: 4, K: 1}, {Capacity: 1 << 21}} {
		_, err := NewTopK[int](c)
		try(bad, "top-k "+itoa(c.K)+" "+itoa(c.Capacity), err)
	}
	_, err = NewTopK[int](TopKConfig{K: 1, Capacity: 8})
	try(ok, "top-k 1", err)
	for _, c := range []QuantileConfig{{RelativeAccuracy: 0.5}, {RelativeAccuracy: 1e-4}, {RelativeAccuracy: -0.1}, {MinValue: -1}, {MinValue: 10, MaxValue: 1},
		{MaxValue: math.Inf(1)}, {MinValue: 1e-310}, {RelativeAccuracy: 1.0 / 4096, MinValue: 1e-300, MaxValue: 1e300}} {
		_, err := NewQuantile(c)
		try(bad, "quantile", err)
	}
	_, err = NewQuantile(QuantileConfig{RelativeAccuracy: 0.4999, MinValue: 0x1p-1022, MaxValue: math.MaxFloat64})
	try(ok, "quantile limits", err)
	for name, err := range bad {
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	for name, err := range ok {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i < 0 {
		return appendInt(append(b, '-'), -i)
	}
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// TestZeroValueMerge checks that merging a zero value (not a usable sketch)
// into a sketch is refused rather than a panic. Decoding into zero values
// is covered by the codec tests.
func TestZeroValueMerge(t *testing.T) {
	for name, err := range map[string]error{
		"linear counting": must(NewLinearCounting(LinearCountingConfig{})).Merge(&LinearCounting{}),
		"distinct":        must(NewDistinct(DistinctConfig{})).Merge(&Distinct{}),
		"count-min":       must(NewCountMin(CountMinConfig{})).Merge(&CountMin{}),
		"quantile":        must(NewQuantile(QuantileConfig{})).Merge(&Quantile{}),
		"top-k":           must(NewTopK[int](TopKConfig{})).Merge(&TopK[int]{}),
		"top-k disjoint":  must(NewTopK[int](TopKConfig{})).MergeDisjoint(&TopK[int]{}),
	} {
		if !errors.Is(err, ErrIncompatible) {
			t.Errorf("%s: Merge(zero value) = %v, want ErrIncompatible", name, err)
		}
	}
}

// TestResetClone checks that Reset returns a sketch to its empty encoding
// and that a Clone is independent of its original.
func TestResetClone(t *testing.T) {
	type sk struct {
		name   string
		enc    func() []byte
		clone  func() func() []byte // returns the clone's encoder
		update func()
		reset  func()
		empty  []byte
	}
	lc := lcSamples()[1]
	d := distinctSamples()[1]
	c := countMinSamples()[1]
	q := quantileSamples()[1]
	x := topKSamples()[1]
	empty := func(s encoder) []byte { return encOf(s) }
	cases := []sk{
		{"linear counting", func() []byte { return encOf(lc) }, func() func() []byte { n := lc.Clone(); return func() []byte { return encOf(n) } },
			func() { lc.Insert(999) }, lc.Reset, empty(must(NewLinearCounting(LinearCountingConfig{Bits: 1024, Seed: 5})))},
		{"distinct", func() []byte { return encOf(d) }, func() func() []byte { n := d.Clone(); return func() []byte { return encOf(n) } },
			func() { d.Insert(999) }, d.Reset, empty(must(NewDistinct(DistinctConfig{Bits: 256, HLLPrecision: 6})))},
		{"count-min", func() []byte { return encOf(c) }, func() func() []byte { n := c.Clone(); return func() []byte { return encOf(n) } },
			func() { c.Add(999, 1) }, c.Reset, empty(must(NewCountMin(CountMinConfig{Depth: 3, Width: 16})))},
		{"quantile", func() []byte { return encOf(q) }, func() func() []byte { n := q.Clone(); return func() []byte { return encOf(n) } },
			func() { q.Add(999) }, q.Reset, empty(must(NewQuantile(QuantileConfig{RelativeAccuracy: 0.1, MinValue: 1, MaxValue: 1000})))},
		{"top-k", func() []byte { return keyedEncOf(x) }, func() func() []byte { n := x.Clone(); return func() []byte { return keyedEncOf(n) } },
			func() { x.Update(999, 999, 1) }, x.Reset, keyedEncOf(must(NewTopK[uint32](TopKConfig{K: 4, Capacity: 16})))},
	}
	for _, s := range cases {
		before := s.enc()
		cloneEnc := s.clone()
		s.update()
		if bytes.Equal(before, s.enc()) {
			t.Errorf("%s: update changed nothing", s.name)
		}
		if !bytes.Equal(before, cloneEnc()) {
			t.Errorf("%s: the clone changed with its original", s.name)
		}
		s.reset()
		if !bytes.Equal(s.enc(), s.empty) {
			t.Errorf("%s: Reset does not give the empty sketch", s.name)
		}
	}
}

// TestMemoryBytes checks the memory figures of the default configurations.
func TestMemoryBytes(t *testing.T) {
	type flowKey40 [40]byte
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"linear counting", must(NewLinearCounting(LinearCountingConfig{})).MemoryBytes(), 1 << 19},
		{"distinct", must(NewDistinct(DistinctConfig{})).MemoryBytes(), 1<<19 + 1<<14},
		{"count-min", must(NewCountMin(CountMinConfig{})).MemoryBytes(), 4 << 16 * 8},
		{"top-k", must(NewTopK[flowKey40](TopKConfig{})).MemoryBytes(), 4096 * 64},
		{"top-k 1024", must(NewTopK[flowKey40](TopKConfig{K: 1024})).MemoryBytes(), 4096 * 64},
		{"quantile", must(NewQuantile(QuantileConfig{})).MemoryBytes(), 40 * 50 * 8},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, c.got, c.want)
		}
		t.Logf("MEMORY | %s | %d bytes", c.name, c.got)
	}
}

// TestCountMinCells checks that Cells names exactly the counters Add
// raises: after one Add to a fresh sketch, the counters that hold a
// weight, one a row, are at the addresses Cells gives, in row order.
func TestCountMinCells(t *testing.T) {
	for _, depth := range []int{1, 3, 4, MaxCountMinDepth} {
		c := must(NewCountMin(CountMinConfig{Depth: depth, Width: 1 << 10}))
		for k := range uint32(50) {
			c.Reset()
			h := testHash(k)
			c.Add(h, 7)
			var raised []uintptr
			for i := range c.counters {
				if c.counters[i] != 0 {
					raised = append(raised, uintptr(unsafe.Pointer(&c.counters[i])))
				}
			}
			if got := c.Cells(h, nil); !slices.Equal(got, raised) || len(got) != depth {
				t.Fatalf("depth %d, key %d: cells %x, raised counters at %x", depth, k, got, raised)
			}
		}
	}
}

// TestCountMinLines checks that a CountMin fills whole cache lines, so that
// two sketches updated by two goroutines never share one (see its last
// field).
func TestCountMinLines(t *testing.T) {
	if n := unsafe.Sizeof(CountMin{}); n%64 != 0 {
		t.Errorf("CountMin is %d bytes, not a multiple of 64", n)
	}
}
