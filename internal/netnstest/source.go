package netnstest

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

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

// CheckInterfaceGone checks what a live source on iface does when remove
// deletes the interface while a Next waits in another goroutine: within a
// second, Next returns an error that wraps capture.ErrInterfaceGone and
// says "capture: interface IFACE disappeared", and the next call says so
// again. It returns how long Next took to notice.
func CheckInterfaceGone(t testing.TB, src capture.Source, iface string, remove func()) time.Duration {
	t.Helper()
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
	time.Sleep(50 * time.Millisecond) // let Next wait in poll
	start := time.Now()
	remove()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Second):
		t.Fatalf("Next still runs a second after %s was deleted", iface)
	}
	took := time.Since(start)
	want := "capture: interface " + iface + " disappeared"
	if !errors.Is(err, capture.ErrInterfaceGone) || !strings.Contains(err.Error(), want) {
		t.Errorf("Next after deleting %s = %v, want an error wrapping capture.ErrInterfaceGone saying %q", iface, err, want)
	}
	if err := src.Next(capture.NewBatch(16)); !errors.Is(err, capture.ErrInterfaceGone) {
		t.Errorf("Next again = %v, want capture.ErrInterfaceGone again", err)
	}
	return took
}
