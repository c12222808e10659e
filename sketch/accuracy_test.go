package sketch

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Accuracy targets (issue 5).
const (
	maxDistinctRelErr = 0.005 // Linear Counting / HyperLogLog
	minTopRecall      = 0.99  // top-100, Zipf ≥ 1.0
	maxTopARE         = 0.01  // average relative error of the top-100 bytes, Zipf ≥ 1.0
)

// TestAccuracy feeds the default Distinct, Count-Min (standard and
// conservative) and TopK with each generated stream and measures them
// against the exact counts. Every stream checks the hard guarantees (no
// Count-Min underestimate, conservative never above standard, top-k bounds
// hold for every key); the accuracy targets apply to every stream for
// Distinct and to Zipf ≥ 1.0 for the top-100. Run with -v for the table.
func TestAccuracy(t *testing.T) {
	forEachStream(t, func(t *testing.T, st *stream) {
		d, _ := NewDistinct(DistinctConfig{})
		cm, _ := NewCountMin(CountMinConfig{})
		cu, _ := NewCountMin(CountMinConfig{Conservative: true})
		top, _ := NewTopK[uint32](TopKConfig{})
		for i, k := range st.keys {
			h, w := st.hashes[k], uint64(st.sizes[i])
			d.Insert(h)
			cm.Add(h, w)
			cu.Add(h, w)
			top.Update(h, k, w)
		}

		// Distinct.
		est := d.Estimate()
		distinctErr := math.Abs(est.Value-float64(st.present)) / float64(st.present)
		if distinctErr > maxDistinctRelErr || est.Method != MethodLinearCounting {
			t.Errorf("distinct: %d keys, estimate %+v: error %.4f%%", st.present, est, 100*distinctErr)
		}

		// Count-Min: never below, conservative never above standard.
		for k, b := range st.bytes {
			h := st.hashes[k]
			if e, c := cm.Estimate(h), cu.Estimate(h); e < b || c < b || c > e {
				t.Fatalf("key %d: %d bytes, count-min %d, conservative %d", k, b, e, c)
			}
		}

		// Top-k bounds, for every key.
		for k, b := range st.bytes {
			h := st.hashes[k]
			if e, ok := top.Lookup(h); ok {
				if e.Key != uint32(k) || e.Count < b || e.Count-e.Error > b {
					t.Fatalf("key %d: %d bytes, top-k entry %+v", k, b, e)
				}
			} else if bound := top.Bound(h); b > bound {
				t.Fatalf("key %d: %d bytes, not in the top-k table, whose bound is %d", k, b, bound)
			}
		}

		// The top 100.
		truth := st.topKeys(100)
		inTruth := make(map[uint32]bool, len(truth))
		var cmARE, cuARE float64
		for _, k := range truth {
			inTruth[k] = true
			b := float64(st.bytes[k])
			cmARE += math.Abs(float64(cm.Estimate(st.hashes[k]))-b) / b / float64(len(truth))
			cuARE += math.Abs(float64(cu.Estimate(st.hashes[k]))-b) / b / float64(len(truth))
		}
		got := top.Top(nil)[:100]
		hits, topARE := 0, 0.0
		for _, e := range got {
			if inTruth[e.Key] {
				hits++
			}
			b := float64(st.bytes[e.Key])
			topARE += math.Abs(float64(e.Count)-b) / b / float64(len(got))
		}
		recall, precision := float64(hits)/float64(len(truth)), float64(hits)/float64(len(got))
		if st.spec.s >= 1 {
			if recall < minTopRecall || precision < minTopRecall || topARE > maxTopARE || cmARE > maxTopARE {
				t.Errorf("top-100: recall %.3f, precision %.3f, top-k ARE %.4f%%, count-min ARE %.4f%%", recall, precision, 100*topARE, 100*cmARE)
			}
		}
		t.Logf("ACCURACY | %s | distinct %d est %.0f err %.4f%% | top100 recall %.2f precision %.2f topk ARE %.4f%% | count-min top100 ARE %.4f%% conservative %.4f%%",
			st.spec, st.present, est.Value, 100*distinctErr, recall, precision, 100*topARE, 100*cmARE, 100*cuARE)
	})
}

// TestDistinctSizes checks Distinct's estimate, with the default
// configuration, at sizes from 1 to 2 M distinct hashes (4 M without
// -short), and that it switches to HyperLogLog only past Linear Counting's
// range.
func TestDistinctSizes(t *testing.T) {
	sizes := []int{1, 10, 100, 1000, 10_000, 100_000, 1_000_000, 2_000_000}
	if !testing.Short() {
		sizes = append(sizes, 4_000_000)
	}
	d, _ := NewDistinct(DistinctConfig{})
	rng := rand.New(rand.NewPCG(3, 4))
	n := 0
	for _, size := range sizes {
		for ; n < size; n++ {
			d.Insert(rng.Uint64())
		}
		e := d.Estimate()
		relErr := math.Abs(e.Value-float64(n)) / float64(n)
		t.Logf("DISTINCT | n=%d | estimate %.1f | error %.4f%% | stated %.4f%% | %s", n, e.Value, 100*relErr, 100*e.RelErr, e.Method)
		if e.Method != MethodLinearCounting || relErr > maxDistinctRelErr || relErr > 4*e.RelErr+1e-9 {
			t.Errorf("n=%d: estimate %+v, error %.4f%%", n, e, 100*relErr)
		}
	}
}

// TestHyperLogLogRange checks the HyperLogLog side: with a bitmap far too
// small, Distinct reports HyperLogLog; at precision 18 (0.2 % standard
// error) it is within the 0.5 % target over 100 k to 2 M hashes, and at
// the default precision 14 within 3 standard errors (2.4 %).
func TestHyperLogLogRange(t *testing.T) {
	for _, p := range []uint8{14, 18} {
		d, err := NewDistinct(DistinctConfig{Bits: 1 << 12, HLLPrecision: p})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, uint64(p)))
		n := 0
		for _, size := range []int{100_000, 500_000, 1_000_000, 2_000_000} {
			for ; n < size; n++ {
				d.Insert(rng.Uint64())
			}
			e := d.Estimate()
			relErr := math.Abs(e.Value-float64(n)) / float64(n)
			t.Logf("HLL | p=%d | n=%d | estimate %.0f | error %.4f%% | stated %.4f%%", p, n, e.Value, 100*relErr, 100*e.RelErr)
			limit := 3 * e.RelErr
			if p == 18 {
				limit = maxDistinctRelErr
			}
			if e.Method != MethodHyperLogLog || relErr > limit {
				t.Errorf("p=%d n=%d: estimate %+v, error %.4f%%", p, n, e, 100*relErr)
			}
		}
	}
}

// TestQuantileAccuracy compares quantiles with the exact sorted values for
// several latency-like distributions: every reported quantile inside the
// range must be within the stated relative accuracy of the exact value of
// the same rank.
func TestQuantileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	dists := []struct {
		name string
		gen  func() float64
	}{
		{"lognormal", func() float64 { return math.Exp(9 + 1.5*rng.NormFloat64()) }},
		{"uniform", func() float64 { return 1 + rng.Float64()*1e6 }},
		{"bimodal", func() float64 {
			if rng.IntN(10) == 0 {
				return 5e6 + rng.Float64()*1e6
			}
			return 2000 + rng.Float64()*500
		}},
		{"integers", func() float64 { return float64(1 + rng.IntN(50)) }},
		{"pareto", func() float64 { return 1000 / math.Pow(rng.Float64()+1e-12, 1/1.2) }},
	}
	ps := []float64{0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1}
	for _, acc := range []float64{0.01, 0.001} {
		for _, d := range dists {
			q, err := NewQuantile(QuantileConfig{RelativeAccuracy: acc})
			if err != nil {
				t.Fatal(err)
			}
			vals := make([]float64, 200_000)
			for i := range vals {
				vals[i] = d.gen()
				q.Add(vals[i])
			}
			slices.Sort(vals)
			worst := 0.0
			for _, p := range ps {
				exact := vals[int(p*float64(len(vals)-1))]
				got := q.Quantile(p)
				relErr := math.Abs(got-exact) / exact
				worst = max(worst, relErr)
				if relErr > q.RelativeAccuracy()*(1+1e-9) {
					t.Errorf("accuracy %g, %s: p%g = %g, exact %g: error %.4f%% > %.4f%%", acc, d.name, p, got, exact, 100*relErr, 100*q.RelativeAccuracy())
				}
			}
			if q.Count() != uint64(len(vals)) || q.Min() != vals[0] || q.Max() != vals[len(vals)-1] {
				t.Errorf("%s: count %d min %g max %g, want %d %g %g", d.name, q.Count(), q.Min(), q.Max(), len(vals), vals[0], vals[len(vals)-1])
			}
			t.Logf("QUANTILE | accuracy %g (stated %.4f%%) | %s | worst error %.4f%% | %d buckets, %d bytes", acc, 100*q.RelativeAccuracy(), d.name, 100*worst, len(q.counts), q.MemoryBytes())
		}
	}
}
