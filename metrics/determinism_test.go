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

// TestDeterminismPastTheTable replays a trace of 12 000 connections through
// a QP table of 2 000 flows with 1, 2 and 4 workers. Each worker holds its
// share of the table, so which flows are tracked depends on the workers,
// as metrics/doc.go states; what it states holds for any number of them
// is demanded here: every counter but the per-flow ones it names, the
// distinct-flow and Count-Min sketches, and the packets and bytes of the
// flow list and the untracked frames together.
func TestDeterminismPastTheTable(t *testing.T) {
	perFlow := map[metrics.Counter]bool{metrics.Evictions: true, metrics.UntrackedPackets: true, metrics.Retransmits: true,
		metrics.PSNGaps: true, metrics.OutOfOrder: true, metrics.ReadLatencyUnmatched: true}
	type figures struct {
		counters                     metrics.Counters
		distinct, cmBytes, cmPackets []byte
	}
	run := func(workers int) []figures {
		src, err := synth.New(&synth.Config{Seed: 5, Packets: 60000, Flows: 12000})
		if err != nil {
			t.Fatal(err)
		}
		e, err := metrics.New(&metrics.Config{Workers: workers, Host: "h", TableSize: 2000})
		if err != nil {
			t.Fatal(err)
		}
		var out []figures
		err = e.Run(context.Background(), []capture.Source{src}, func(w *metrics.Window) error {
			f := figures{counters: w.Counters}
			var packets uint64
			for _, r := range w.Flows {
				packets += r.C[metrics.FlowPackets]
			}
			untracked := w.Counters[metrics.UntrackedPackets]
			if packets+untracked != w.Counters[metrics.RoCEPackets] {
				t.Errorf("%d workers, window %d: %d packets in flows and %d untracked of %d RoCE", workers, w.Start, packets, untracked, w.Counters[metrics.RoCEPackets])
			}
			if untracked == 0 {
				t.Errorf("%d workers, window %d: the table held every flow", workers, w.Start)
			}
			var err error
			if f.distinct, err = w.Distinct.AppendBinary(nil); err != nil {
				return err
			}
			if f.cmBytes, err = w.FlowBytes.AppendBinary(nil); err != nil {
				return err
			}
			f.cmPackets, err = w.FlowPackets.AppendBinary(nil)
			for c := range f.counters {
				if perFlow[metrics.Counter(c)] {
					f.counters[c] = 0
				}
			}
			out = append(out, f)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := run(1)
	for _, workers := range []int{2, 4} {
		got := run(workers)
		if len(got) != len(want) {
			t.Fatalf("%d workers: %d windows, %d with one", workers, len(got), len(want))
		}
		for i := range got {
			if got[i].counters != want[i].counters {
				t.Errorf("%d workers, window %d: counters differ from one worker's", workers, i)
			}
			if !bytes.Equal(got[i].distinct, want[i].distinct) || !bytes.Equal(got[i].cmBytes, want[i].cmBytes) || !bytes.Equal(got[i].cmPackets, want[i].cmPackets) {
				t.Errorf("%d workers, window %d: sketches differ from one worker's", workers, i)
			}
		}
	}
}
