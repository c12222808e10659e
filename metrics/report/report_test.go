package report

import (
	"testing"
	"time"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
)

// TestReporterForgetsOldPairs: learned QP pairs are replaced when an end
// pairs anew, and forgotten when the table is full and they are stale, so
// a long capture keeps learning.
func TestReporterForgetsOldPairs(t *testing.T) {
	rp, err := NewReporter(&metrics.Config{TableSize: 2, Workers: 1}) // room for 8 ends
	if err != nil {
		t.Fatal(err)
	}
	length := int64(time.Second)
	at := func(i int) qpEnd { return end(decode.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), uint32(i)) }
	for i := range 4 {
		rp.pair(at(2*i), at(2*i+1), length)
	}
	if len(rp.pairs) != 8 {
		t.Fatalf("%d ends after four pairs, want 8", len(rp.pairs))
	}
	rp.pair(at(100), at(101), length) // full, nothing stale: only older windows go
	if _, ok := rp.pairs[at(100)]; ok {
		t.Error("a new pair displaced pairs of the same window")
	}
	rp.now = int64(11 * time.Minute / time.Second)
	rp.pair(at(100), at(101), length)
	if len(rp.pairs) != 2 || rp.pairs[at(100)].peer != at(101) {
		t.Errorf("after 11 idle minutes: %d ends, want only the new pair", len(rp.pairs))
	}
	rp.pair(at(100), at(102), length)
	if _, ok := rp.pairs[at(101)]; ok || rp.pairs[at(102)].peer != at(100) {
		t.Errorf("re-pairing left the old peer: %v", rp.pairs)
	}
}
