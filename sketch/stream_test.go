package sketch

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// alias samples an index with probability proportional to its weight in
// O(1), by Vose's alias method.
type alias struct {
	prob  []float64
	other []int32
}

func newAlias(weights []float64) *alias {
	n := len(weights)
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	a := &alias{prob: make([]float64, n), other: make([]int32, n)}
	scaled := make([]float64, n)
	var small, large []int32
	for i, w := range weights {
		scaled[i] = w * float64(n) / sum
		if scaled[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		a.prob[s], a.other[s] = scaled[s], l
		scaled[l] -= 1 - scaled[s]
		if scaled[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range append(small, large...) {
		a.prob[i], a.other[i] = 1, i
	}
	return a
}

func (a *alias) sample(rng *rand.Rand) int {
	i := rng.IntN(len(a.prob))
	if rng.Float64() < a.prob[i] {
		return i
	}
	return int(a.other[i])
}

// zipfWeights returns the weights 1/(r+1)^s of ranks 0..n-1; s = 0 is
// uniform.
func zipfWeights(n int, s float64) []float64 {
	w := make([]float64, n)
	for r := range w {
		w[r] = math.Pow(float64(r+1), -s)
	}
	return w
}

// streamSpec describes a generated stream: packets whose keys (out of a
// universe of keys) follow a Zipf law of exponent s (0: uniform), each of a
// random size from 64 to 4159 bytes. Key r of the universe is flowKey(perm(r))
// for a seeded permutation, so that rank and hash are unrelated.
type streamSpec struct {
	keys    int
	packets int
	s       float64
	long    bool // skipped with -short
}

func (s streamSpec) String() string {
	d := "uniform"
	if s.s != 0 {
		d = fmt.Sprintf("zipf%.1f", s.s)
	}
	return fmt.Sprintf("%s/keys=%d/packets=%d", d, s.keys, s.packets)
}

// streamSpecs are the accuracy streams: uniform and Zipf 0.8 to 1.4 over
// 10 k, 100 k and 2 M keys.
func streamSpecs() []streamSpec {
	var out []streamSpec
	for _, size := range []struct {
		keys, packets int
		long          bool
	}{{10_000, 1_000_000, false}, {100_000, 2_000_000, false}, {2_000_000, 8_000_000, true}} {
		for _, s := range []float64{0, 0.8, 1.0, 1.2, 1.4} {
			out = append(out, streamSpec{keys: size.keys, packets: size.packets, s: s, long: size.long})
		}
	}
	return out
}

// stream is a generated stream with its exact per-key counts.
type stream struct {
	spec    streamSpec
	hashes  []uint64 // per key
	keys    []uint32 // per packet
	sizes   []uint32 // per packet, bytes
	bytes   []uint64 // exact bytes per key
	total   uint64
	present int // distinct keys in the stream
}

// genStream generates the stream of spec from a fixed seed.
func genStream(spec streamSpec, seed uint64) *stream {
	rng := rand.New(rand.NewPCG(seed, uint64(spec.keys)))
	st := &stream{spec: spec, hashes: make([]uint64, spec.keys), bytes: make([]uint64, spec.keys)}
	perm := rng.Perm(spec.keys)
	for r := range st.hashes {
		k := flowKey(uint32(perm[r]))
		st.hashes[r] = Hash(DefaultSeed, k[:])
	}
	a := newAlias(zipfWeights(spec.keys, spec.s))
	st.keys, st.sizes = make([]uint32, spec.packets), make([]uint32, spec.packets)
	for i := range st.keys {
		k, n := a.sample(rng), 64+rng.Uint32N(4096)
		st.keys[i], st.sizes[i] = uint32(k), n
		if st.bytes[k] == 0 {
			st.present++
		}
		st.bytes[k] += uint64(n)
		st.total += uint64(n)
	}
	return st
}

// topKeys returns the n keys with the most bytes, ties by key.
func (st *stream) topKeys(n int) []uint32 {
	idx := make([]uint32, 0, len(st.bytes))
	for k, b := range st.bytes {
		if b > 0 {
			idx = append(idx, uint32(k))
		}
	}
	slices.SortFunc(idx, func(a, b uint32) int { return cmp.Or(cmp.Compare(st.bytes[b], st.bytes[a]), cmp.Compare(a, b)) })
	return idx[:min(n, len(idx))]
}

// forEachStream runs f on every accuracy stream, skipping the long ones with
// -short.
func forEachStream(t *testing.T, f func(t *testing.T, st *stream)) {
	for _, spec := range streamSpecs() {
		t.Run(spec.String(), func(t *testing.T) {
			if spec.long && testing.Short() {
				t.Skip("2 M keys: skipped with -short")
			}
			f(t, genStream(spec, 42))
		})
	}
}
