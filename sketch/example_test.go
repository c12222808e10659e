package sketch_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/rocescope/rocescope/sketch"
)

// Two workers each see part of a stream of flows (one heavy flow, 999
// light ones), keep their own sketches, and merge them: the result is what
// one worker seeing everything would have.
func Example() {
	type worker struct {
		flows *sketch.Distinct
		bytes *sketch.CountMin
		top   *sketch.TopK[uint32]
		lat   *sketch.Quantile
	}
	newWorker := func() *worker {
		w := &worker{}
		w.flows, _ = sketch.NewDistinct(sketch.DistinctConfig{})
		w.bytes, _ = sketch.NewCountMin(sketch.CountMinConfig{})
		w.top, _ = sketch.NewTopK[uint32](sketch.TopKConfig{K: 3})
		w.lat, _ = sketch.NewQuantile(sketch.QuantileConfig{})
		return w
	}
	workers := []*worker{newWorker(), newWorker()}
	hash := func(flow uint32) uint64 {
		var key [4]byte
		binary.BigEndian.PutUint32(key[:], flow)
		return sketch.Hash(sketch.DefaultSeed, key[:])
	}
	for flow := range uint32(1000) {
		h := hash(flow)
		w := workers[h%2] // shard by flow hash
		size := uint64(1000 + flow)
		if flow == 42 {
			size = 1_000_000
		}
		w.flows.Insert(h)
		w.bytes.Add(h, size)
		w.top.Update(h, flow, size)
		w.lat.AddNanos(int64(1000 + flow%100))
	}
	all := workers[0]
	for _, err := range []error{
		all.flows.Merge(workers[1].flows),
		all.bytes.Merge(workers[1].bytes),
		all.top.MergeDisjoint(workers[1].top), // sharded by flow: no flow in both
		all.lat.Merge(workers[1].lat),
	} {
		if err != nil {
			fmt.Println(err)
		}
	}
	e := all.flows.Estimate()
	fmt.Printf("flows: %.0f (%s, ±%.3f%%)\n", e.Value, e.Method, 100*e.RelErr)
	fmt.Println("flow 42 bytes:", all.bytes.Estimate(hash(42)))
	for _, t := range all.top.Top(nil) {
		fmt.Printf("top: flow %d, %d bytes (error ≤ %d)\n", t.Key, t.Count, t.Error)
	}
	// The exact median is 1049 ns: the sketch is within 1 %.
	fmt.Printf("latency p50 %.0f ns, max %.0f ns\n", math.Round(all.lat.Quantile(0.5)), all.lat.Max())
	// Output:
	// flows: 1000 (linear_counting, ±0.035%)
	// flow 42 bytes: 1000000
	// top: flow 42, 1000000 bytes (error ≤ 0)
	// top: flow 999, 1999 bytes (error ≤ 0)
	// top: flow 998, 1998 bytes (error ≤ 0)
	// latency p50 1055 ns, max 1099 ns
}
