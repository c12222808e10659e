package metrics_test

import (
	"context"
	"fmt"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
	"maps"
	"math"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
)

// truthKey converts a flow key of the synthetic truth to the engine's.
func truthKey(k synth.FlowKey) metrics.FlowKey {
	conv := func(a netip.Addr) decode.Addr {
		if a.Is4() {
			return decode.AddrFrom4(a.As4())
		}
		return decode.AddrFrom16(a.As16())
	}
	return metrics.FlowKey{Src: conv(k.Src), Dst: conv(k.Dst), DQP: k.DQP}
}

// windowFigures are the window counters compared with the truth, under the
// truth's JSON names.
func windowFigures(c *metrics.Counters) map[string]uint64 {
	return map[string]uint64{
		"packets": c[metrics.Packets], "bytes": c[metrics.Bytes], "roce_packets": c[metrics.RoCEPackets], "other_packets": c[metrics.OtherPackets],
		"payload_bytes": c[metrics.PayloadBytes], "messages": c[metrics.Messages], "cnp": c[metrics.CNP], "ecn_ce": c[metrics.ECNCE],
		"fecn": c[metrics.FECN], "becn": c[metrics.BECN], "naks": c[metrics.NAKs], "rnr_naks": c[metrics.RNRNAKs], "acks": c[metrics.Acks],
		"retransmits": c[metrics.Retransmits], "psn_gaps": c[metrics.PSNGaps],
	}
}

func truthFigures(c *synth.Counts) map[string]uint64 {
	return map[string]uint64{
		"packets": c.Packets, "bytes": c.Bytes, "roce_packets": c.RoCEPackets, "other_packets": c.OtherPackets,
		"payload_bytes": c.PayloadBytes, "messages": c.Messages, "cnp": c.CNP, "ecn_ce": c.ECNCE,
		"fecn": c.FECN, "becn": c.BECN, "naks": c.NAKs, "rnr_naks": c.RNRNAKs, "acks": c.Acks,
		"retransmits": c.Retransmits, "psn_gaps": c.PSNGaps,
	}
}

// flowFigures are the per-flow figures compared with the truth.
type flowFigures struct {
	SQP                                                    uint32
	Packets, Bytes, Payload, Messages, ECNCE, CNP, Retrans uint64
	Gaps                                                   uint64
}

// TestEngineMatchesSynthTruth replays synthetic traces with known truth and
// checks every exact figure, per window and per flow, the sketches' error
// against the exact flows, and the elephants and jitter flows, with 1, 2 and
// 8 workers.
func TestEngineMatchesSynthTruth(t *testing.T) {
	packets := 400000
	if testing.Short() {
		packets = 100000
	}
	for _, workers := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			scfg := &synth.Config{Seed: 11, Packets: packets, Flows: 3000}
			src, err := synth.New(scfg)
			if err != nil {
				t.Fatal(err)
			}
			const elephant, jitterRate = 2e6, 1e6
			cfg := &metrics.Config{Workers: workers, Host: "synth", Exact: true, Top: 100, ElephantRate: elephant, JitterRate: jitterRate}
			e, err := metrics.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rp, err := report.NewReporter(cfg)
			if err != nil {
				t.Fatal(err)
			}
			type got struct {
				start     int64
				counters  metrics.Counters
				flows     map[metrics.FlowKey]flowFigures
				distinct  float64
				top       []metrics.FlowKey // the top-k sketch's heaviest flows
				topBytes  map[metrics.FlowKey]uint64
				cmBytes   map[metrics.FlowKey]uint64
				elephants []metrics.FlowKey
				jitter    []metrics.FlowKey
			}
			var wins []got
			err = e.Run(context.Background(), []capture.Source{src}, func(w *metrics.Window) error {
				r := rp.Build(w)
				g := got{start: w.Start, counters: w.Counters, flows: map[metrics.FlowKey]flowFigures{},
					distinct: r.Flows.Value, topBytes: map[metrics.FlowKey]uint64{}, cmBytes: map[metrics.FlowKey]uint64{}}
				for _, f := range r.All {
					g.flows[f.Key] = flowFigures{SQP: f.SQP, Packets: f.C[metrics.FlowPackets], Bytes: f.C[metrics.FlowBytes],
						Payload: f.C[metrics.FlowPayloadBytes], Messages: f.C[metrics.FlowMessages], ECNCE: f.C[metrics.FlowECNCE],
						CNP: f.C[metrics.FlowCNP], Retrans: f.C[metrics.FlowRetransmits], Gaps: f.C[metrics.FlowPSNGaps]}
					g.cmBytes[f.Key] = w.FlowBytes.Estimate(f.Key.Hash(e.Config().Seed))
				}
				for _, te := range w.Top.Top(nil) {
					g.top = append(g.top, te.Key)
					g.topBytes[te.Key] = te.Count
				}
				for _, f := range r.Elephants {
					g.elephants = append(g.elephants, f.Key)
				}
				for _, f := range r.Jitter {
					g.jitter = append(g.jitter, f.Key)
				}
				wins = append(wins, g)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			truth := src.Truth()
			if len(wins) != len(truth.Windows) {
				t.Fatalf("%d windows, truth has %d", len(wins), len(truth.Windows))
			}
			secs := float64(truth.WindowNS) / 1e9
			prevRate := map[metrics.FlowKey]float64{}
			for i, tw := range truth.Windows {
				g := wins[i]
				if g.start != tw.StartNS {
					t.Fatalf("window %d starts at %d, truth at %d", i, g.start, tw.StartNS)
				}
				if diff := cmp.Diff(truthFigures(&tw.Counts), windowFigures(&g.counters)); diff != "" {
					t.Errorf("window %d counters (-truth +engine):\n%s", i, diff)
				}
				ops := map[uint8]uint64{}
				for op := range 256 {
					if n := g.counters.Opcode(uint8(op)); n > 0 {
						ops[uint8(op)] = n
					}
				}
				if diff := cmp.Diff(tw.Opcodes, ops); diff != "" {
					t.Errorf("window %d opcodes (-truth +engine):\n%s", i, diff)
				}
				for p, pc := range tw.PFC {
					if f, q := g.counters.PFC(int(p)); f != pc.Frames || q != pc.Quanta {
						t.Errorf("window %d PFC priority %d: %d frames %d quanta, truth %d and %d", i, p, f, q, pc.Frames, pc.Quanta)
					}
				}

				// Per flow, exactly.
				want := map[metrics.FlowKey]flowFigures{}
				rate := map[metrics.FlowKey]float64{}
				for _, f := range tw.PerFlow {
					k := truthKey(f.FlowKey)
					want[k] = flowFigures{SQP: f.SQP, Packets: f.Packets, Bytes: f.Bytes, Payload: f.PayloadBytes,
						Messages: f.Messages, ECNCE: f.ECNCE, CNP: f.CNPReceived, Retrans: f.Retransmits, Gaps: f.PSNGaps}
					rate[k] = float64(f.Bytes) * 8 / secs
				}
				// The source QP is known once the reverse direction was
				// seen; a flow whose peer has not answered yet has none.
				unknown := 0
				for k, f := range g.flows {
					if w, ok := want[k]; ok && f.SQP == 0 {
						w.SQP = 0
						want[k] = w
						unknown++
					}
				}
				if unknown > len(want)/20 {
					t.Errorf("window %d: source QP unknown for %d of %d flows", i, unknown, len(want))
				}
				if diff := cmp.Diff(want, g.flows); diff != "" {
					t.Errorf("window %d flows (-truth +engine):\n%s", i, diff)
				}

				// Distinct flows within 0.5 %.
				if n := float64(tw.Flows); math.Abs(g.distinct-n)/n > 0.005 {
					t.Errorf("window %d: distinct flows %.1f, truth %d", i, g.distinct, tw.Flows)
				}

				// Top 100 by bytes: the top-k sketch's recall, precision
				// and byte error, and Count-Min's byte error.
				exact := slices.Collect(maps.Keys(want))
				slices.SortFunc(exact, func(a, b metrics.FlowKey) int {
					if c := cmpUint(want[b].Bytes, want[a].Bytes); c != 0 {
						return c
					}
					return a.Compare(b)
				})
				n := min(100, len(exact))
				topExact := exact[:n]
				topSketch := g.top[:min(n, len(g.top))]
				hit := 0
				var areTop, areCM float64
				for _, k := range topExact {
					if slices.Contains(topSketch, k) {
						hit++
					}
					areCM += math.Abs(float64(g.cmBytes[k])-float64(want[k].Bytes)) / float64(want[k].Bytes)
				}
				for _, k := range topSketch {
					areTop += math.Abs(float64(g.topBytes[k])-float64(want[k].Bytes)) / float64(max(want[k].Bytes, 1))
				}
				recall := float64(hit) / float64(n)
				areTop /= float64(len(topSketch))
				areCM /= float64(n)
				if recall < 0.99 || areTop > 0.01 || areCM > 0.01 {
					t.Errorf("window %d top %d: recall %.3f (precision the same), top-k byte ARE %.4f, count-min ARE %.4f", i, n, recall, areTop, areCM)
				}

				// Elephants and jitter flows, from the exact rates.
				var wantEle, wantJit []metrics.FlowKey
				for k, r := range rate {
					if r >= elephant {
						wantEle = append(wantEle, k)
					}
				}
				for k := range merged(rate, prevRate) {
					if i == 0 {
						break // the first window has no previous one to differ from
					}
					cur, prev := rate[k], prevRate[k]
					if max(cur, prev) >= elephant && math.Abs(cur-prev) >= jitterRate {
						wantJit = append(wantJit, k)
					}
				}
				sortKeys := func(s []metrics.FlowKey) []metrics.FlowKey { slices.SortFunc(s, metrics.FlowKey.Compare); return s }
				if diff := cmp.Diff(sortKeys(wantEle), sortKeys(g.elephants), cmp.Comparer(func(a, b decode.Addr) bool { return a == b })); diff != "" {
					t.Errorf("window %d elephants (-truth +engine):\n%s", i, diff)
				}
				if diff := cmp.Diff(sortKeys(wantJit), sortKeys(g.jitter), cmp.Comparer(func(a, b decode.Addr) bool { return a == b })); diff != "" {
					t.Errorf("window %d jitter flows (-truth +engine):\n%s", i, diff)
				}
				if i > 0 && len(wantJit) == 0 {
					t.Errorf("window %d: the trace has no jitter flow to find", i)
				}
				prevRate = rate
			}
		})
	}
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// merged returns the union of the keys of two rate maps.
func merged(a, b map[metrics.FlowKey]float64) map[metrics.FlowKey]bool {
	m := make(map[metrics.FlowKey]bool, len(a)+len(b))
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}
