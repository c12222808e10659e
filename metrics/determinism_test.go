package metrics

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

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
		cfg := &Config{Workers: workers, Host: "h", TopKSize: 64, Exact: true, ElephantRate: 1e6, JitterRate: 5e5}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := NewReporter(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = e.Run(context.Background(), []capture.Source{src}, func(w *Window) error {
			if n := w.Top.K(); len(w.Flows) <= 4*n {
				t.Errorf("window %d: %d flows do not overfill a top-k of %d", w.Start, len(w.Flows), n)
			}
			b, err := w.AppendBinary(nil)
			states = append(states, b)
			reports = append(reports, rp.Build(w).AppendJSON(nil))
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

// TestLatencyMatchAddsNoIdleFlow sends a READ request at the end of one
// window and its response in the next: the window of the response counts
// the latency in its quantiles, but the requester's flow, silent in that
// window, is not part of it (not in the flow list, not in the distinct
// estimate).
func TestLatencyMatchAddsNoIdleFlow(t *testing.T) {
	h := newShardHarness(t, 100)
	sec := int64(time.Second)
	h.send(hostA, hostB, qpB, opReadRequest, 7, sec-10, 0)
	h.send(hostB, hostA, qpA, opReadOnly, 7, sec+500, 0)
	h.sh.closeThrough(allWindows)
	if len(h.closed) != 2 {
		t.Fatalf("%d windows closed, want 2", len(h.closed))
	}
	w1 := h.closed[1]
	if n := w1.ReadLatency.Count(); n != 1 {
		t.Errorf("window 1 READ latencies %d, want 1", n)
	}
	if len(w1.Flows) != 1 || w1.Flows[0].Key.Src != hostB {
		t.Fatalf("window 1 flows %+v, want only the response flow B→A", w1.Flows)
	}
	if e := w1.Distinct.Estimate(); e.Value < 0.5 || e.Value > 1.5 {
		t.Errorf("window 1 distinct flows %v, want 1", e.Value)
	}
	if c := w1.Flows[0].C[FlowReadLatencyCount]; c != 0 {
		t.Errorf("response flow counts %d READ latencies, want 0 (they belong to the requester)", c)
	}
	// In one window, the requester's flow carries the latency.
	h = newShardHarness(t, 100)
	h.send(hostA, hostB, qpB, opReadRequest, 7, 10, 0)
	h.send(hostB, hostA, qpA, opReadOnly, 7, 510, 0)
	w := h.closeAll()
	if f := h.flow(w, hostA, hostB, qpB); f.C[FlowReadLatencyCount] != 1 || f.C[FlowReadLatencySum] != 500 {
		t.Errorf("requester flow READ latency count %d sum %d, want 1 and 500", f.C[FlowReadLatencyCount], f.C[FlowReadLatencySum])
	}
}
