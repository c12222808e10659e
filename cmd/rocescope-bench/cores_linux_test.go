package main

import (
	"runtime"
	"testing"
)

// TestCoreRoundTrip: with two CPUs the word goes back and forth, which
// takes some time; with one there is nothing to measure.
func TestCoreRoundTrip(t *testing.T) {
	got := coreRoundTrip(1000)
	if runtime.NumCPU() < 2 {
		if got != 0 {
			t.Errorf("coreRoundTrip on one CPU = %v, want 0", got)
		}
		return
	}
	if got <= 0 {
		t.Errorf("coreRoundTrip = %v, want a positive time", got)
	}
}
