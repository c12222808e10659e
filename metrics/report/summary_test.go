package report_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// TestSummaryAddsUpTheWindows: the report of a Summary of a run's windows
// holds, for the run and for every flow, the sum of each counter over the
// reports of the windows (CNPs attributed as each window attributed them),
// spans the windows, rates flows over the covered time, and estimates the
// distinct flows of the whole run. The trace has 12 windows and thousands
// of flows, with CNPs, NAKs, retransmissions and latencies; once with
// every flow in the QP tables, once with tables too small for them.
func TestSummaryAddsUpTheWindows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table int
	}{{"exact", 0}, {"tables overflow", 500}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &metrics.Config{Workers: 2, Exact: true, ElephantRate: 5e6, JitterRate: 1e6, TableSize: tc.table}
			src, err := synth.New(&synth.Config{Packets: 150000, Flows: 1500, Duration: 12 * time.Second, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			wins := enginetest.Run(t, cfg, src)
			rp, err := report.NewReporter(cfg)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := report.NewSummary(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var (
				counters          metrics.Counters
				flows             = make(map[metrics.FlowKey][metrics.NumFlowCounters]uint64)
				unattributed      uint64
				readN, ackN       uint64
				exactWindows      int
				from, to          = int64(math.MaxInt64), int64(math.MinInt64)
				firstStart, endNs = wins[0].Start, wins[len(wins)-1].Start + wins[len(wins)-1].Length
			)
			for _, w := range wins {
				r := rp.Build(w)
				counters.Add(&w.Counters)
				for _, f := range r.All {
					c := flows[f.Key]
					for i := range c {
						c[i] += f.C[i]
					}
					flows[f.Key] = c
				}
				unattributed += r.CNPUnattributed
				readN += r.ReadLatency.Count
				ackN += r.AckLatency.Count
				if r.Exact {
					exactWindows++
				}
				from, to = min(from, w.From), max(to, w.To)
				if err := sum.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			if len(wins) != 12 || (exactWindows == len(wins)) != (tc.table == 0) {
				t.Fatalf("%d windows, %d exact: the trace does not test the case", len(wins), exactWindows)
			}
			got := sum.Report()
			if got.Summary != len(wins) || sum.Windows() != len(wins) {
				t.Errorf("summary of %d (%d) windows, want %d", got.Summary, sum.Windows(), len(wins))
			}
			w := got.Window
			if diff := cmp.Diff(counters, w.Counters); diff != "" {
				t.Errorf("counters differ from the sum over the windows (-want +got):\n%s", diff)
			}
			if w.Start != firstStart || w.Start+w.Length != endNs || w.Covered() != to-from {
				t.Errorf("summary window %d+%d covering %d ns, want %d+%d covering %d", w.Start, w.Length, w.Covered(), firstStart, endNs-firstStart, to-from)
			}
			if got.CNPUnattributed != unattributed || got.ReadLatency.Count != readN || got.AckLatency.Count != ackN {
				t.Errorf("unattributed CNPs %d, latencies matched %d and %d; want %d, %d and %d",
					got.CNPUnattributed, got.ReadLatency.Count, got.AckLatency.Count, unattributed, readN, ackN)
			}
			if got.Exact != (tc.table == 0) {
				t.Errorf("exact %t", got.Exact)
			}
			if len(got.All) != len(flows) || len(w.Flows) != len(flows) {
				t.Fatalf("%d flows listed, %d tracked; want the %d flows of the windows", len(got.All), len(w.Flows), len(flows))
			}
			var cnps, elephants, flowCNPs uint64
			for i := range w.Flows {
				if n := got.FlowCNP(i); n != w.Flows[i].C[metrics.FlowCNP] {
					t.Errorf("FlowCNP(%d) = %d, want the %d CNPs of its record", i, n, w.Flows[i].C[metrics.FlowCNP])
				}
				flowCNPs += got.FlowCNP(i)
			}
			secs := float64(w.Covered()) / 1e9
			for _, f := range got.All {
				want, ok := flows[f.Key]
				if !ok {
					t.Fatalf("flow %v is in no window", f.Key)
				}
				if diff := cmp.Diff(want, f.C); diff != "" {
					t.Errorf("flow %v: counters differ from the sum over the windows (-want +got):\n%s", f.Key, diff)
				}
				if rate := float64(f.C[metrics.FlowBytes]) * 8 / secs; math.Abs(rate-f.Rate) > 1e-6*rate || f.Elephant != (rate >= cfg.ElephantRate) || f.Jitter {
					t.Errorf("flow %v: rate %v elephant %t jitter %t, want %v, %t, false", f.Key, f.Rate, f.Elephant, f.Jitter, rate, rate >= cfg.ElephantRate)
				}
				cnps += f.C[metrics.FlowCNP]
				if f.Elephant {
					elephants++
				}
			}
			if flowCNPs != cnps {
				t.Errorf("FlowCNP adds up to %d, the flows to %d", flowCNPs, cnps)
			}
			if cnps == 0 || elephants == 0 || int(elephants) != len(got.Elephants) || len(got.Jitter) != 0 {
				t.Errorf("%d CNPs attributed, %d elephants (%d listed), %d jitter flows; want some, all listed, no jitter", cnps, elephants, len(got.Elephants), len(got.Jitter))
			}
			if tc.table == 0 {
				if cnps+unattributed != counters[metrics.CNP] {
					t.Errorf("CNPs: %d attributed + %d unattributed, want %d", cnps, unattributed, counters[metrics.CNP])
				}
				if n := float64(len(flows)); math.Abs(got.Flows.Value-n) > 0.01*n {
					t.Errorf("distinct flows ~%v, want %v within 1%%", got.Flows.Value, n)
				}
			}
		})
	}
}
