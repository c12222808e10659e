package metrics_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
)

// TestDemoReadLatencyAfterResend replays testdata/demo.pcap, whose READ
// request PSN 15172197 on QP 0x95f362 is sent at 1700000000.444546204
// (frame 1482), lost, sent again at 1700000001.661417961 (frame 5539) and
// answered at 1700000001.661748049 (frame 5540; times from tshark). The
// flow's only READ latency in window 1700000001 is 330088 ns, from the
// resend, and no READ in that window waited a second.
func TestDemoReadLatencyAfterResend(t *testing.T) {
	src, err := file.Open([]string{filepath.Join("..", "testdata", "demo.pcap")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	e, err := metrics.New(&metrics.Config{Workers: 1, Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	key := metrics.FlowKey{Src: decode.AddrFrom4([4]byte{10, 0, 0, 16}), Dst: decode.AddrFrom4([4]byte{10, 0, 0, 7}), DQP: 0x95f362}
	found := false
	err = e.Run(context.Background(), []capture.Source{src}, func(w *metrics.Window) error {
		if w.Start != 1700000001e9 {
			return nil
		}
		if m := w.ReadLatency.Max(); m > 1e6 {
			t.Errorf("window %d: READ latency max %v ns, want below 1 ms", w.Start, m)
		}
		for _, f := range w.Flows {
			if f.Key == key {
				found = true
				if c, s := f.C[metrics.FlowReadLatencyCount], f.C[metrics.FlowReadLatencySum]; c != 1 || s != 330088 {
					t.Errorf("flow %v: READ latency count %d sum %d ns, want 1 and 330088", key, c, s)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Errorf("flow %v not in window 1700000001", key)
	}
}
