package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
)

// TestStateBytesSameForAnyWorkers replays a synthetic trace of 12 000
// connections (24 000 flows) with a heavy-hitter table of 64 entries, which
// the flows overfill, and demands that every window's state and report are
// byte for byte the same with 1, 2 and 4 workers.
func TestStateBytesSameForAnyWorkers(t *testing.T) {
	packets := 300000
	if testing.Short() {
		packets = 120000
	}
	run := func(workers int) (states, reports [][]byte) {
		src, err := synth.New(&synth.Config{Seed: 5, Packets: packets, Flows: 12000})
		if err != nil {
			t.Fatal(err)
		}
		cfg := &metrics.Config{Workers: workers, Host: "h", TopKSize: 64, Exact: true, ElephantRate: 1e6, JitterRate: 5e5}
		e, err := metrics.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := report.NewReporter(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = e.Run(context.Background(), []capture.Source{src}, func(w *metrics.Window) error {
			if n := w.Top.K(); len(w.Flows) <= 4*n {
				t.Errorf("window %d: %d flows do not overfill a top-k of %d", w.Start, len(w.Flows), n)
			}
			b, err := w.AppendBinary(nil)
			states = append(states, b)
			reports = append(reports, export.AppendJSON(nil, rp.Build(w)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return states, reports
	}
	wantStates, wantReports := run(1)
	if len(wantStates) < 3 {
		t.Fatalf("%d windows, want at least 3", len(wantStates))
	}
	for _, workers := range []int{2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			states, reports := run(workers)
			if len(states) != len(wantStates) {
				t.Fatalf("%d windows, %d with one worker", len(states), len(wantStates))
			}
			for i := range states {
				if !bytes.Equal(states[i], wantStates[i]) {
					t.Errorf("window %d: state of %d bytes differs from one worker's (%d bytes)", i, len(states[i]), len(wantStates[i]))
				}
				if !bytes.Equal(reports[i], wantReports[i]) {
					t.Errorf("window %d: report differs from one worker's", i)
				}
			}
		})
	}
}
