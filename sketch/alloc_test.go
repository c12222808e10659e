package sketch

import "testing"

// Sinks keep the compiler from dropping the measured calls.
var (
	estimateSink Estimate
	uint64Sink   uint64
	floatSink    float64
	entriesSink  []Entry[uint32]
)

// TestNoAllocs checks that the update paths, the per-window resets and the
// estimates do not allocate.
func TestNoAllocs(t *testing.T) {
	lc := must(NewLinearCounting(LinearCountingConfig{}))
	d := must(NewDistinct(DistinctConfig{}))
	cm := must(NewCountMin(CountMinConfig{}))
	cu := must(NewCountMin(CountMinConfig{Conservative: true}))
	x := must(NewTopK[uint32](TopKConfig{}))
	q := must(NewQuantile(QuantileConfig{}))
	entries := make([]Entry[uint32], 0, 4096)
	var i uint32
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"LinearCounting.Insert", func() { i++; lc.Insert(testHash(i)) }},
		{"LinearCounting.Estimate", func() { estimateSink = lc.Estimate() }},
		{"Distinct.Insert", func() { i++; d.Insert(testHash(i)) }},
		{"Distinct.Estimate", func() { estimateSink = d.Estimate() }},
		{"CountMin.Add", func() { i++; cm.Add(testHash(i), 1500) }},
		{"CountMin.Add conservative", func() { i++; cu.Add(testHash(i), 1500) }},
		{"CountMin.Estimate", func() { uint64Sink = cm.Estimate(testHash(i)) }},
		{"TopK.Update new", func() { i++; x.Update(testHash(i), i, 1500) }},
		{"TopK.Update same", func() { x.Update(testHash(7), 7, 1500) }},
		{"TopK.Top", func() { entriesSink = x.Top(entries[:0]) }},
		{"Quantile.Add", func() { i++; q.Add(float64(i)) }},
		{"Quantile.AddNanos", func() { i++; q.AddNanos(int64(i)) }},
		{"Quantile.Quantile", func() { floatSink = q.Quantile(0.99) }},
		{"Reset", func() {
			lc.Reset()
			d.Reset()
			cm.Reset()
			x.Reset()
			q.Reset()
		}},
	} {
		if n := testing.AllocsPerRun(1000, c.f); n != 0 {
			t.Errorf("%s allocates %v times", c.name, n)
		}
	}
}
