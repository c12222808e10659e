package report

import (
	"math/bits"

	"github.com/rocescope/rocescope/internal/scratch"
	"github.com/rocescope/rocescope/metrics"
)

// flowIndex finds the flows of a normalized window by key. The list is in
// flow hash order, and the hashes are uniform: a directory of positions by
// the top bits of the hash, about one bucket per flow, narrows a lookup to
// a record or two where a binary search of a million records probes twenty
// scattered ones. It is built on the window's first lookup.
type flowIndex struct {
	w     *metrics.Window       // the window indexed, nil for none
	shift uint                  // 64 minus the bits of the directory
	start []int32               // start[b]: the first position whose hash has top bits ≥ b; 2^bits+1 entries
	mem   *scratch.Array[int32] // start's memory
}

// maxIndexBits bounds the directory: 2^24 buckets (64 MiB) for lists of
// more than 16 million flows, which then share buckets.
const maxIndexBits = 24

// build indexes the flow list of w.
func (x *flowIndex) build(w *metrics.Window) {
	x.begin(w)
	for i := range w.Flows {
		x.add(w.Flows[i].Hash())
	}
	x.done(w)
}

// begin starts indexing the flow list of w, for a pass over it that adds
// each record's hash in order (add) and then calls done with w.
func (x *flowIndex) begin(w *metrics.Window) {
	b := min(max(bits.Len(uint(len(w.Flows))), 1), maxIndexBits)
	x.w, x.shift = nil, uint(64-b)
	if x.mem == nil {
		x.mem = scratch.NewArray[int32]()
	}
	x.start = x.mem.Resize(1<<b + 1)
	clear(x.start)
}

// add counts the record of hash h.
func (x *flowIndex) add(h uint64) { x.start[h>>x.shift+1]++ }

// done completes the index of w begun.
func (x *flowIndex) done(w *metrics.Window) {
	for i := 1; i < len(x.start); i++ {
		x.start[i] += x.start[i-1]
	}
	x.w = w
}

// find returns the position of the flow with key k in w, or -1. It indexes
// w first unless a pass over w indexed it last (begin, add, done).
func (x *flowIndex) find(w *metrics.Window, k metrics.FlowKey) int32 {
	if x.w != w {
		x.build(w)
	}
	probe := metrics.FlowRecord{Key: k}
	probe.SetHash(w.Seed())
	bucket := probe.Hash() >> x.shift
	for i := x.start[bucket]; i < x.start[bucket+1]; i++ {
		switch c := metrics.CompareFlows(&w.Flows[i], &probe); {
		case c == 0:
			return i
		case c > 0:
			return -1
		}
	}
	return -1
}
