package sketch

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// benchHashes returns n (a power of two) random hashes.
func benchHashes(n int) []uint64 {
	rng := rand.New(rand.NewPCG(23, 24))
	h := make([]uint64, n)
	for i := range h {
		h[i] = rng.Uint64()
	}
	return h
}

// flowKey40 stands for the engine's 40-byte flow key.
type flowKey40 [40]byte

// zipfStream returns n (a power of two) packets of a Zipf 1.0 stream over
// keys keys: the key index and the hash of each.
func zipfStream(n, keys int) ([]uint32, []uint64) {
	rng := rand.New(rand.NewPCG(25, 26))
	a := newAlias(zipfWeights(keys, 1.0))
	hashes := make([]uint64, keys)
	for i := range hashes {
		k := flowKey(uint32(i))
		hashes[i] = Hash(DefaultSeed, k[:])
	}
	idx, hs := make([]uint32, n), make([]uint64, n)
	for i := range idx {
		idx[i] = uint32(a.sample(rng))
		hs[i] = hashes[idx[i]]
	}
	return idx, hs
}

func BenchmarkLinearCountingInsert(b *testing.B) {
	for _, bits := range []int{1 << 16, DefaultLinearCountingBits} {
		b.Run("bits="+strconv.Itoa(bits), func(b *testing.B) {
			l := must(NewLinearCounting(LinearCountingConfig{Bits: bits}))
			hs := benchHashes(1 << 16)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				l.Insert(hs[i&(1<<16-1)] + uint64(i))
			}
		})
	}
}

func BenchmarkDistinctInsert(b *testing.B) {
	d := must(NewDistinct(DistinctConfig{}))
	hs := benchHashes(1 << 16)
	b.Run("distinct", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			d.Insert(hs[i&(1<<16-1)] + uint64(i))
		}
	})
	b.Run("hyperloglog", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			d.hll.InsertHash(hs[i&(1<<16-1)] + uint64(i))
		}
	})
}

func BenchmarkCountMinAdd(b *testing.B) {
	for _, c := range []CountMinConfig{
		{Depth: 4, Width: 1 << 12},
		{Depth: 4, Width: DefaultCountMinWidth},
		{Depth: 4, Width: DefaultCountMinWidth, Conservative: true},
	} {
		name := "4x" + strconv.Itoa(c.Width)
		if c.Conservative {
			name += "/conservative"
		}
		b.Run(name, func(b *testing.B) {
			cm := must(NewCountMin(c))
			hs := benchHashes(1 << 16)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				cm.Add(hs[i&(1<<16-1)]+uint64(i), 1500)
			}
		})
	}
}

func BenchmarkCountMinEstimate(b *testing.B) {
	cm := must(NewCountMin(CountMinConfig{}))
	hs := benchHashes(1 << 16)
	for _, h := range hs {
		cm.Add(h, 1500)
	}
	b.ReportAllocs()
	var s uint64
	for i := 0; b.Loop(); i++ {
		s += cm.Estimate(hs[i&(1<<16-1)])
	}
	uint64Sink = s
}

// BenchmarkTopKUpdate measures updates with 40-byte keys: a Zipf 1.0 stream
// over 100 k and 2 M keys (hits on the heavy keys, replacements in the
// tail), and the two extremes: always the same key, always a new key.
func BenchmarkTopKUpdate(b *testing.B) {
	keys := make([]flowKey40, 1<<12) // a few cache lines' worth would do: the keys are only copied
	for i := range keys {
		k := flowKey(uint32(i))
		copy(keys[i][:], k[:])
	}
	for _, n := range []int{100_000, 2_000_000} {
		b.Run("zipf1.0/keys="+strconv.Itoa(n), func(b *testing.B) {
			idx, hs := zipfStream(1<<20, n)
			x := must(NewTopK[flowKey40](TopKConfig{}))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				j := i & (1<<20 - 1)
				x.Update(hs[j], keys[idx[j]&(1<<12-1)], 1500)
			}
		})
	}
	b.Run("zipf1.0/keys=2000000/key=uint32", func(b *testing.B) {
		idx, hs := zipfStream(1<<20, 2_000_000)
		x := must(NewTopK[uint32](TopKConfig{}))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			j := i & (1<<20 - 1)
			x.Update(hs[j], idx[j], 1500)
		}
	})
	b.Run("baseline", func(b *testing.B) {
		// The loop of the Zipf cases calling a no-op of Update's
		// signature: what the harness and the 40-byte key argument cost.
		idx, hs := zipfStream(1<<20, 2_000_000)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			j := i & (1<<20 - 1)
			noUpdate(hs[j], keys[idx[j]&(1<<12-1)], 1500)
		}
	})
	b.Run("same", func(b *testing.B) {
		x := must(NewTopK[flowKey40](TopKConfig{}))
		h := Hash(DefaultSeed, keys[0][:])
		b.ReportAllocs()
		for b.Loop() {
			x.Update(h, keys[0], 1500)
		}
	})
	b.Run("new", func(b *testing.B) {
		x := must(NewTopK[flowKey40](TopKConfig{}))
		hs := benchHashes(1 << 16)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			x.Update(hs[i&(1<<16-1)]+uint64(i), keys[i&(1<<12-1)], 1500)
		}
	})
}

// noUpdate is the no-op of BenchmarkTopKUpdate/baseline.
//
//go:noinline
func noUpdate(h uint64, key flowKey40, weight uint64) { uint64Sink += h + weight + uint64(key[0]) }

func BenchmarkQuantileAdd(b *testing.B) {
	q := must(NewQuantile(QuantileConfig{}))
	hs := benchHashes(1 << 16)
	vals := make([]float64, len(hs))
	for i, h := range hs {
		vals[i] = float64(h>>40) + 100 // latencies up to 16 ms
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.Add(vals[i&(1<<16-1)])
	}
}

// BenchmarkEstimate measures the once-per-window queries of the default
// sketches filled with 100 k flows.
func BenchmarkEstimate(b *testing.B) {
	hs := benchHashes(1 << 17)[:100_000]
	lc := must(NewLinearCounting(LinearCountingConfig{}))
	d := must(NewDistinct(DistinctConfig{}))
	x := must(NewTopK[flowKey40](TopKConfig{}))
	q := must(NewQuantile(QuantileConfig{}))
	for i, h := range hs {
		lc.Insert(h)
		d.Insert(h)
		var k flowKey40
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		x.Update(h, k, uint64(i))
		q.Add(float64(h >> 40))
	}
	entries := make([]Entry[flowKey40], 0, 4096)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"LinearCounting", func() { estimateSink = lc.Estimate() }},
		{"Distinct", func() { estimateSink = d.Estimate() }},
		{"HyperLogLog", func() { estimateSink = d.HyperLogLog() }},
		{"TopK.Top", func() { _ = x.Top(entries[:0]) }},
		{"Quantile.p99", func() { floatSink = q.Quantile(0.99) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.f()
			}
		})
	}
}

// BenchmarkMerge measures merging two default sketches filled with 100 k
// flows each.
func BenchmarkMerge(b *testing.B) {
	hs := benchHashes(1 << 18)
	fill := func(off int) (*Distinct, *CountMin, *TopK[flowKey40], *Quantile) {
		d := must(NewDistinct(DistinctConfig{}))
		c := must(NewCountMin(CountMinConfig{}))
		x := must(NewTopK[flowKey40](TopKConfig{}))
		q := must(NewQuantile(QuantileConfig{}))
		for i, h := range hs[off : off+100_000] {
			d.Insert(h)
			c.Add(h, uint64(i))
			x.Update(h, flowKey40{byte(i), byte(i >> 8), byte(i >> 16)}, uint64(i))
			q.Add(float64(h >> 40))
		}
		return d, c, x, q
	}
	d1, c1, x1, q1 := fill(0)
	d2, c2, x2, q2 := fill(100_000)
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"LinearCounting", func() error { return d1.lc.Merge(&d2.lc) }},
		{"Distinct", func() error { return d1.Merge(d2) }},
		{"CountMin", func() error { return c1.Merge(c2) }},
		{"TopK", func() error { return x1.Merge(x2) }},
		{"TopK.Disjoint", func() error { return x1.MergeDisjoint(x2) }},
		{"Quantile", func() error { return q1.Merge(q2) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncode measures AppendBinary and UnmarshalBinary of default
// sketches holding 10 k flows, the size of a busy window.
func BenchmarkEncode(b *testing.B) {
	hs := benchHashes(1 << 14)[:10_000]
	d := must(NewDistinct(DistinctConfig{}))
	c := must(NewCountMin(CountMinConfig{}))
	for i, h := range hs {
		d.Insert(h)
		c.Add(h, uint64(1500*i))
	}
	for _, s := range []struct {
		name string
		enc  func([]byte) ([]byte, error)
		dec  func([]byte) error
	}{
		{"Distinct", d.AppendBinary, d.UnmarshalBinary},
		{"CountMin", c.AppendBinary, c.UnmarshalBinary},
	} {
		buf := must(s.enc(nil))
		b.Run(s.name+"/append", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				buf = must(s.enc(buf[:0]))
			}
		})
		b.Run(s.name+"/unmarshal", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if err := s.dec(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// resetSketches returns the sketches of an engine window (the defaults, a
// top-k of 1024 40-byte keys, two Count-Min tables and two quantiles), each
// with a write of the i-th of a set of random flows and its Reset, and the
// whole window as "Window".
func resetSketches() []struct {
	name  string
	write func(i int)
	reset func()
} {
	d := must(NewDistinct(DistinctConfig{}))
	c1, c2 := must(NewCountMin(CountMinConfig{})), must(NewCountMin(CountMinConfig{}))
	x := must(NewTopK[flowKey40](TopKConfig{K: 1024}))
	q1, q2 := must(NewQuantile(QuantileConfig{})), must(NewQuantile(QuantileConfig{}))
	hs := benchHashes(1 << 16)
	var key flowKey40
	return []struct {
		name  string
		write func(i int)
		reset func()
	}{
		{"Distinct", func(i int) { d.Insert(hs[i]) }, d.Reset},
		{"CountMin", func(i int) { c1.Add(hs[i], 1500) }, c1.Reset},
		{"TopK", func(i int) { x.Update(hs[i], key, 1500) }, x.Reset},
		{"Quantile", func(i int) { q1.Add(float64(hs[i] >> 40)) }, q1.Reset},
		{"Window", func(i int) {
			d.Insert(hs[i])
			c1.Add(hs[i], 1500)
			c2.Add(hs[i], 1)
			x.Update(hs[i], key, 1500)
			q1.Add(float64(hs[i] >> 40))
			q2.Add(float64(hs[i] >> 41))
		}, func() {
			d.Reset()
			c1.Reset()
			c2.Reset()
			x.Reset()
			q1.Reset()
			q2.Reset()
		}},
	}
}

// BenchmarkResetClean measures Reset of sketches nothing was written to
// since the last Reset, as in the windows of an idle link: O(1).
func BenchmarkResetClean(b *testing.B) {
	for _, s := range resetSketches() {
		b.Run(s.name, func(b *testing.B) {
			s.write(0)
			s.reset()
			b.ReportAllocs()
			for b.Loop() {
				s.reset()
			}
		})
	}
}

// BenchmarkResetDirty measures Reset after writes of 1, 64 and 65536
// flows: a window of one flow, of a few, and a busy one, which touches every
// block of the Count-Min tables. ns/op is the writes and the Reset;
// reset-ns/op the Reset alone, timed around it, less what timing an empty
// stretch reads (clockCost: 25-28 ns on the KVM VM, a fifth of a small
// Reset). Stopping the benchmark's timer for the writes instead would read
// the memory statistics, which stops the world, twice an iteration, and a
// run of the benchmark would take minutes.
func BenchmarkResetDirty(b *testing.B) {
	for _, flows := range []int{1, 64, 1 << 16} {
		for _, s := range resetSketches() {
			b.Run("flows="+strconv.Itoa(flows)+"/"+s.name, func(b *testing.B) {
				b.ReportAllocs()
				empty := clockCost()
				var reset time.Duration
				for b.Loop() {
					for i := range flows {
						s.write(i)
					}
					t := time.Now()
					s.reset()
					reset += time.Since(t)
				}
				b.ReportMetric(float64((reset-time.Duration(b.N)*empty).Nanoseconds())/float64(b.N), "reset-ns/op")
			})
		}
	}
}

// clockCost returns what an empty stretch timed with time.Now and
// time.Since reads, on average.
func clockCost() time.Duration {
	const n = 1 << 16
	var d time.Duration
	for range n {
		t := time.Now()
		d += time.Since(t)
	}
	return d / n
}
