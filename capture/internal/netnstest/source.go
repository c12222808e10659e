package netnstest

import (
	"errors"
	"os"
	"testing"

	"github.com/rocescope/rocescope/capture"
)

// CheckCloseUnblocks checks the Close contract of a live source on a quiet
// interface: Next returns an empty batch when nothing arrives, a Next
// blocked in another goroutine returns os.ErrClosed once closeFn (the
// source's or its group's Close) runs, and a second closeFn returns nil.
func CheckCloseUnblocks(t testing.TB, src capture.Source, closeFn func() error) {
	t.Helper()
	b := capture.NewBatch(16)
	if err := src.Next(b); err != nil || len(b.Frames) != 0 {
		t.Fatalf("Next on a quiet source: %d frames, %v; want an empty batch", len(b.Frames), err)
	}
	done := make(chan error, 1)
	go func() {
		b := capture.NewBatch(16)
		for {
			if err := src.Next(b); err != nil {
				done <- err
				return
			}
		}
	}()
	if err := closeFn(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Errorf("Next during Close returned %v, want os.ErrClosed", err)
	}
	if err := closeFn(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Drain reads src until Next returns an empty batch (nothing arrived for a
// poll interval) and returns the frames it delivered.
func Drain(t testing.TB, src capture.Source) int {
	t.Helper()
	b := capture.NewBatch(256)
	n := 0
	for {
		if err := src.Next(b); err != nil {
			t.Fatal(err)
		}
		if len(b.Frames) == 0 {
			return n
		}
		n += len(b.Frames)
	}
}
