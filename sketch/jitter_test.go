package sketch

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestJitterDetect checks the rule on hand-made windows: elephants in either
// window, absolute change, relative change, flows that appear and vanish, and
// the order of the result.
func TestJitterDetect(t *testing.T) {
	type obs struct {
		key  uint32
		rate float64
	}
	tests := []struct {
		name      string
		cfg       JitterConfig
		prev, cur []obs
		want      []JitterFlow[uint32]
	}{{
		name: "absolute",
		cfg:  JitterConfig{ElephantRate: 10, AbsRate: 5},
		prev: []obs{{1, 10}, {2, 20}, {3, 9}, {4, 12}, {5, 30}},
		cur:  []obs{{1, 15}, {2, 14.5}, {3, 13.9}, {4, 16.9}, {6, 10}},
		// 1: +5 (flagged, ≥ is inclusive); 2: −5.5; 3: +4.9 (no);
		// 4: +4.9 (no); 5 vanished: −30; 6 appeared: +10.
		want: []JitterFlow[uint32]{
			{Key: 5, Prev: 30, Cur: 0},
			{Key: 6, Prev: 0, Cur: 10},
			{Key: 2, Prev: 20, Cur: 14.5},
			{Key: 1, Prev: 10, Cur: 15},
		},
	}, {
		name: "not elephants",
		cfg:  JitterConfig{ElephantRate: 100, AbsRate: 5},
		prev: []obs{{1, 10}, {2, 99}},
		cur:  []obs{{1, 90}, {3, 99.5}},
		want: nil,
	}, {
		name: "relative",
		cfg:  JitterConfig{ElephantRate: 10, AbsRate: 1, RelChange: 0.5},
		prev: []obs{{1, 100}, {2, 100}, {3, 20}, {4, 20}},
		cur:  []obs{{1, 149}, {2, 50}, {3, 10}, {5, 11}},
		// 1: +49 < 50; 2: −50 (flagged); 3: −10 ≥ 10 (flagged);
		// 4 vanished: −20 ≥ 10; 5 appeared: +11 ≥ 0.
		want: []JitterFlow[uint32]{
			{Key: 2, Prev: 100, Cur: 50},
			{Key: 4, Prev: 20, Cur: 0},
			{Key: 5, Prev: 0, Cur: 11},
			{Key: 3, Prev: 20, Cur: 10},
		},
	}, {
		name: "summed observations",
		cfg:  JitterConfig{ElephantRate: 10, AbsRate: 5},
		prev: []obs{{1, 4}, {1, 4}},
		cur:  []obs{{1, 8}, {1, 8}, {2, -1}, {2, 0}},
		want: []JitterFlow[uint32]{{Key: 1, Prev: 8, Cur: 16}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := NewJitter[uint32](tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range [][]obs{tt.prev, tt.cur} {
				j.Advance()
				for _, o := range w {
					j.Observe(testHash(o.key), o.key, o.rate)
				}
			}
			got := j.Detect(nil)
			for i := range got {
				got[i].Hash = 0
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}

// testHash is the hash of a uint32 test key.
func testHash(k uint32) uint64 {
	b := [4]byte{byte(k), byte(k >> 8), byte(k >> 16), byte(k >> 24)}
	return Hash(DefaultSeed, b[:])
}

// TestJitterMinRate checks that dropping the observations below MinRate
// changes no flag, for random rate pairs around the thresholds and several
// configurations.
func TestJitterMinRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, cfg := range []JitterConfig{
		{ElephantRate: 10, AbsRate: 3},
		{ElephantRate: 10, AbsRate: 10},
		{ElephantRate: 10, AbsRate: 20},
		{ElephantRate: 10, AbsRate: 3, RelChange: 0.25},
		{ElephantRate: 10, AbsRate: 3, RelChange: 0.8},
		{ElephantRate: 10, AbsRate: 1, RelChange: 2},
	} {
		j, _ := NewJitter[uint32](cfg)
		m := j.MinRate()
		cut := func(r float64) float64 {
			if r < m {
				return 0
			}
			return r
		}
		for range 100_000 {
			p, c := 25*rng.Float64(), 25*rng.Float64()
			if rng.IntN(4) == 0 {
				p = 0
			}
			if j.IsJitter(p, c) != j.IsJitter(cut(p), cut(c)) {
				t.Fatalf("%+v, min rate %g: %g → %g flagged %t, without the small rate %t", cfg, m, p, c, j.IsJitter(p, c), !j.IsJitter(p, c))
			}
		}
	}
}

// jitterWindow generates one window of packets: each flow of rates
// (bits/s over one second) sends its bytes in packets of 1 to 4 KiB, in a
// random interleaving.
func jitterWindow(rng *rand.Rand, rates map[uint32]float64) (keys []uint32, sizes []uint32, exact map[uint32]float64) {
	exact = make(map[uint32]float64, len(rates))
	for k, r := range rates {
		for left := int64(r / 8); left > 0; {
			n := min(int64(1024+rng.IntN(3073)), left)
			keys, sizes = append(keys, k), append(sizes, uint32(n))
			exact[k] += 8 * float64(n)
			left -= n
		}
	}
	rng.Shuffle(len(keys), func(i, j int) {
		keys[i], keys[j] = keys[j], keys[i]
		sizes[i], sizes[j] = sizes[j], sizes[i]
	})
	return keys, sizes, exact
}

// TestJitterAccuracy checks detection through the sketches: two windows of
// 400 heavy flows with known swings (stable, up, down, vanished, new) over
// 50 k background flows; a TopK (the engine's configuration: K 1024)
// estimates each window's rates, which feed the detector. Its flags must
// match, with precision and recall ≥ 99 %, the flags computed from the exact
// rates.
func TestJitterAccuracy(t *testing.T) {
	const (
		e          = 8e6 // elephant rate, bits/s: 1 MB per 1 s window
		heavy      = 400
		background = 50_000
	)
	for _, cfg := range []JitterConfig{{ElephantRate: e, AbsRate: e}, {ElephantRate: e, AbsRate: e / 2, RelChange: 0.5}} {
		rng := rand.New(rand.NewPCG(11, 12))
		w1, w2 := map[uint32]float64{}, map[uint32]float64{}
		for k := range uint32(heavy) {
			r := e * (0.2 + 3.8*rng.Float64())
			swing := cfg.AbsRate * (1.5 + 1.5*rng.Float64())
			switch c := rng.IntN(20); {
			case c < 5: // stable
				w1[k], w2[k] = r, r*(0.9+0.2*rng.Float64())
			case c < 10:
				w1[k], w2[k] = r, r+swing
			case c < 15:
				w1[k], w2[k] = r, max(0, r-swing)
			case c < 17:
				w1[k] = r
			default:
				w2[k] = e * (1.5 + 2.5*rng.Float64())
			}
		}
		bg := newAlias(zipfWeights(background, 1.0))
		for _, w := range []map[uint32]float64{w1, w2} {
			for range 100_000 { // about a fifth of the bytes, in mice
				w[heavy+uint32(bg.sample(rng))] += 8 * 300
			}
		}
		j, err := NewJitter[uint32](cfg)
		if err != nil {
			t.Fatal(err)
		}
		top, _ := NewTopK[uint32](TopKConfig{K: 1024})
		var exact [2]map[uint32]float64
		for i, w := range []map[uint32]float64{w1, w2} {
			keys, sizes, ex := jitterWindow(rng, w)
			exact[i] = ex
			j.Advance()
			top.Reset()
			for p, k := range keys {
				top.Update(testHash(k), k, uint64(sizes[p]))
			}
			for _, en := range top.Top(nil) {
				j.Observe(en.Hash, en.Key, 8*float64(en.Count))
			}
		}
		want := map[uint32]bool{}
		for k := range uint32(heavy + background) {
			if j.IsJitter(exact[0][k], exact[1][k]) {
				want[k] = true
			}
		}
		got := j.Detect(nil)
		hits := 0
		for _, f := range got {
			if want[f.Key] {
				hits++
			}
		}
		recall, precision := float64(hits)/float64(len(want)), float64(hits)/float64(len(got))
		t.Logf("JITTER | %+v | %d true, %d flagged, precision %.4f recall %.4f | %d bytes", cfg, len(want), len(got), precision, recall, j.MemoryBytes())
		if len(want) < 150 || recall < 0.99 || precision < 0.99 || j.Dropped() != 0 {
			t.Errorf("%+v: %d true jitter flows, %d flagged, precision %.4f, recall %.4f, %d dropped", cfg, len(want), len(got), precision, recall, j.Dropped())
		}
	}
}
