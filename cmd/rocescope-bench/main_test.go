package main

import (
	"testing"
	"time"
)

// TestMedian: the middle value of an odd count, the mean of the two
// middle ones of an even count, whatever the order.
func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.42, 0.30, 0.35, 0.33, 0.37}, 0.35},
	} {
		if got := median(append([]float64(nil), tc.v...)); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if got := median([]int64{9, 1, 4, 6}); got != 5 {
		t.Errorf("median of 9, 1, 4, 6 = %d, want 5", got)
	}
}

// TestPairedAndMedians: ratios are taken round by round (not median over
// median), printed with their lowest and highest; a contestant's median
// run takes each figure's own median.
func TestPairedAndMedians(t *testing.T) {
	cpu := func(ms ...int) []result {
		rs := make([]result, len(ms))
		for i, m := range ms {
			rs[i] = result{cpu: time.Duration(m) * time.Millisecond, elapsed: time.Duration(10-i) * time.Millisecond, faults: int64(i)}
		}
		return rs
	}
	ratio := func(a, b result) float64 { return float64(a.cpu) / float64(b.cpu) }
	// Round by round 0.5, 0.25, 0.5: median 0.5; the medians' ratio
	// would be 40/100 = 0.4.
	a, b := cpu(50, 40, 10), cpu(100, 160, 20)
	if got, want := paired(a, b, ratio), "0.500x (0.25-0.50)"; got != want {
		t.Errorf("paired = %q, want %q", got, want)
	}
	if got, want := paired(a[:1], b[:1], ratio), "0.500x"; got != want {
		t.Errorf("paired of one round = %q, want %q", got, want)
	}
	if got := paired(nil, b, ratio); got != "-" {
		t.Errorf("paired of no round = %q, want -", got)
	}
	m := medians([][]result{a})[0]
	if m.cpu != 40*time.Millisecond || m.elapsed != 9*time.Millisecond || m.faults != 1 {
		t.Errorf("medians = %+v, want cpu 40ms, elapsed 9ms, faults 1", m)
	}
}

// TestByPlacement: the rounds split by where both runs found the CPUs; a
// round whose two runs disagree counts in neither part.
func TestByPlacement(t *testing.T) {
	run := func(ms int, c2c time.Duration) result {
		return result{cpu: time.Duration(ms) * time.Millisecond, c2c: c2c}
	}
	near, far := 60*time.Nanosecond, 330*time.Nanosecond
	a := []result{run(50, near), run(90, far), run(60, near), run(80, far), run(70, near)}
	b := []result{run(100, near), run(100, far), run(100, near), run(100, far), run(100, far)}
	ratio := func(a, b result) float64 { return float64(a.cpu) / float64(b.cpu) }
	if got, want := byPlacement(a, b, ratio), "near (2) 0.550x (0.50-0.60), far (2) 0.850x (0.80-0.90)"; got != want {
		t.Errorf("byPlacement = %q, want %q", got, want)
	}
	if got, want := byPlacement(a[:1], b[:1], ratio), "near (1) 0.500x, far (0) -"; got != want {
		t.Errorf("byPlacement of one round = %q, want %q", got, want)
	}
}
