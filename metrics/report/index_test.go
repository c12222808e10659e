package report

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
)

// TestFlowIndex finds every flow of normalized lists of several sizes, and
// flows that are not there, against a linear search: the list refilled in
// the same window, indexed by a pass as Build does (begin, add, done) or by
// find itself.
func TestFlowIndex(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	key := func() metrics.FlowKey {
		return metrics.FlowKey{Src: decode.AddrFrom4([4]byte{10, 0, byte(rnd.IntN(4)), byte(rnd.IntN(256))}),
			Dst: decode.AddrFrom4([4]byte{10, 1, 0, byte(rnd.IntN(256))}), DQP: rnd.Uint32N(1 << 24)}
	}
	linear := func(w *metrics.Window, k metrics.FlowKey) int32 {
		for i := range w.Flows {
			if w.Flows[i].Key == k {
				return int32(i)
			}
		}
		return -1
	}
	var x flowIndex
	w := &metrics.Window{}
	for _, n := range []int{0, 1, 2, 3, 1000, 20000} {
		w.Flows = w.Flows[:0]
		for range n {
			f := metrics.FlowRecord{Key: key()}
			f.SetHash(w.Seed())
			w.Flows = append(w.Flows, f)
		}
		w.Normalize()
		if n%2 == 0 {
			x.begin(w)
			for i := range w.Flows {
				x.add(w.Flows[i].Hash())
			}
			x.done(w)
		} else {
			x.w = nil // a refilled list: find indexes it again
		}
		for i := range w.Flows {
			if got := x.find(w, w.Flows[i].Key); got != int32(i) {
				t.Fatalf("%d flows: find(flow %d) = %d", n, i, got)
			}
		}
		for range 1000 {
			k := key()
			if got, want := x.find(w, k), linear(w, k); got != want {
				t.Fatalf("%d flows: find(%v) = %d, want %d", n, k, got, want)
			}
		}
	}
	if !slices.IsSortedFunc(w.Flows, func(a, b metrics.FlowRecord) int { return metrics.CompareFlows(&a, &b) }) {
		t.Fatal("the list is not in canonical order")
	}
}
