package report

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
)

// readAll reads src to the end and returns its frames, copied.
func readAll(t *testing.T, src capture.Source) []capture.Frame {
	t.Helper()
	b := capture.NewBatch(256)
	var out []capture.Frame
	for {
		err := src.Next(b)
		for _, f := range b.Frames {
			f.Data = bytes.Clone(f.Data)
			out = append(out, f)
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// scenarioTrace returns the frames and truth of a trace with every
// scenario over 10 000 connections of traffic without losses of its own.
func scenarioTrace(t *testing.T) ([]capture.Frame, *synth.Truth) {
	t.Helper()
	src, err := synth.New(&synth.Config{Seed: 8, Packets: 150_000, Flows: 10_000, Scenario: synth.ScenarioAll,
		LossProb: synth.Off, RNRProb: synth.Off, SnapLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	frames := readAll(t, src)
	return frames, src.Truth()
}

// isIncast returns a function reporting whether a frame goes to the
// destination of the truth's incast.
func isIncast(truth *synth.Truth) func(capture.Frame) bool {
	i := slices.IndexFunc(truth.Events, func(e synth.Event) bool { return e.Kind == "incast" })
	dst := addrOf(truth.Events[i].Dst)
	return func(f capture.Frame) bool {
		var p decode.Packet
		return p.Decode(f.Data, f.Link) == nil && p.IsRoCE() && p.Dst == dst
	}
}

// reportsOf builds the reports of windows in order.
func reportsOf(t *testing.T, cfg *metrics.Config, wins []*metrics.Window) []*Report {
	t.Helper()
	rp, err := NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Report
	for _, w := range wins {
		out = append(out, rp.Build(w))
	}
	return out
}

// found is an event as all the reports that name its ID tell it: the
// first one's start, the last one's end, the figures summed.
type found struct {
	Event
	resent, frames uint64
	reports        int
}

// foundEvents gathers the events of reports by ID.
func foundEvents(reports []*Report) []*found {
	byID := map[EventID]*found{}
	var out []*found
	for _, r := range reports {
		for _, e := range r.Events {
			f, ok := byID[e.ID]
			if !ok {
				f = &found{Event: e}
				byID[e.ID] = f
				out = append(out, f)
			}
			f.End, f.reports = e.End, f.reports+1
			if e.Retransmission != nil {
				f.resent += e.Retransmission.Resent
			}
			if e.PFCStorm != nil {
				f.frames += e.PFCStorm.Frames
			}
		}
	}
	return out
}

func addrOf(a netip.Addr) decode.Addr {
	if a.Is4() {
		return decode.AddrFrom4(a.As4())
	}
	return decode.AddrFrom16(a.As16())
}

func keyOf(k synth.FlowKey) metrics.FlowKey {
	return metrics.FlowKey{Src: addrOf(k.Src), Dst: addrOf(k.Dst), DQP: k.DQP}
}

// matches reports whether f is the event the truth e describes: its kind,
// who (destination and senders, MAC and priority, flow and cause), when
// (the start within one burst interval; storms and retransmissions to the
// nanosecond) and its figures. An incast ends within a burst interval of
// its last frame; CE without CNP spans the runs of activity that hold the
// marks.
func matches(f *found, e *synth.Event, burst int64) error {
	near := func(a, b int64) bool { return a-b < burst && b-a < burst }
	switch {
	case f.Kind.String() != e.Kind:
		return fmt.Errorf("kind %v", f.Kind)
	case f.Incast != nil:
		in := f.Incast
		var want []metrics.FlowKey
		for _, s := range e.Senders {
			want = append(want, keyOf(s.FlowKey))
		}
		var got []metrics.FlowKey
		for _, s := range in.Senders {
			if !s.SQPKnown || s.SQP != e.Senders[slices.IndexFunc(e.Senders, func(x synth.EventFlow) bool { return keyOf(x.FlowKey) == s.Key })].SQP {
				return fmt.Errorf("sender %v: source QP %v, %#x", s.Key, s.SQPKnown, s.SQP)
			}
			got = append(got, s.Key)
		}
		slices.SortFunc(want, metrics.FlowKey.Compare)
		slices.SortFunc(got, metrics.FlowKey.Compare)
		if in.Dst != addrOf(e.Dst) || !slices.Equal(got, want) || in.Sources != len(e.Senders) || !near(f.Start, e.StartNS) || !near(f.End, e.EndNS) {
			return fmt.Errorf("incast into %v from %d sources, %v to %v", in.Dst, in.Sources, f.Start, f.End)
		}
	case f.PFCStorm != nil:
		st := f.PFCStorm
		if report := string(AppendMAC(nil, st.MAC)); report != e.MAC || int(st.Priority) != e.Priority || f.Start != e.StartNS || f.End != e.EndNS || f.frames != uint64(e.Frames) {
			return fmt.Errorf("storm from %s priority %d, %d to %d, %d frames", report, st.Priority, f.Start, f.End, f.frames)
		}
	case f.Retransmission != nil:
		rt := f.Retransmission
		if rt.Key != keyOf(e.Flow.FlowKey) || !rt.SQPKnown || rt.SQP != e.Flow.SQP || rt.Cause.String() != e.Cause || rt.FirstPSN != e.FirstPSN ||
			f.resent != uint64(e.Resent) || f.Start != e.StartNS || rt.StallNS != e.StallNS || f.End != e.EndNS || e.Cause != "timeout" && int(rt.NAKCode) != e.NAKCode {
			return fmt.Errorf("retransmission %+v, %d resent, %d to %d", *rt, f.resent, f.Start, f.End)
		}
	case f.CEWithoutCNP != nil:
		ce := f.CEWithoutCNP
		// The event spans the runs of activity that hold the marks: it
		// ends with the run of the last mark, which may go on past it.
		if ce.Key != keyOf(e.Flow.FlowKey) || !ce.SQPKnown || ce.SQP != e.Flow.SQP || ce.ECNCE != uint64(e.ECNCE) || !near(f.Start, e.StartNS) || f.End <= e.EndNS {
			return fmt.Errorf("ce_without_cnp %+v, %d to %d", *ce, f.Start, f.End)
		}
	}
	return nil
}

// TestScenarioEvents replays a synthetic trace with every trouble and
// look-alike over 10 000 connections, on one and two workers, and as two
// hosts splitting the connections whose window states are encoded, decoded
// and merged: each names every injected trouble, exactly once, with its
// kind, who and when, and nothing else (no look-alike, nothing of the
// traffic); the hosts' merge names the same events as one host.
func TestScenarioEvents(t *testing.T) {
	frames, truth := scenarioTrace(t)
	cfg := &metrics.Config{}
	burst := int64(metrics.DefaultBurst)
	var one []*Report
	for _, run := range []struct {
		name    string
		workers int
		hosts   int
	}{{"one host, 1 worker", 1, 1}, {"one host, 2 workers", 2, 1}, {"two hosts merged", 2, 2}} {
		t.Run(run.name, func(t *testing.T) {
			var wins []*metrics.Window
			parts := testframes.SplitByConnection(frames, run.hosts)
			for i, p := range parts {
				if run.hosts > 1 && !slices.ContainsFunc(p, isIncast(truth)) {
					t.Fatalf("host %d of %d holds none of the incast's senders", i, run.hosts)
				}
			}
			for i, part := range parts {
				c := &metrics.Config{Workers: run.workers, Host: fmt.Sprint("h", i)}
				for j, w := range enginetest.Run(t, c, &testframes.Source{Frames: part, Per: 256}) {
					if j == len(wins) {
						wins = append(wins, w)
					} else if err := wins[j].Merge(w); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, w := range wins {
				w.Normalize()
			}
			reports := reportsOf(t, cfg, wins)
			got := foundEvents(reports)
			for i := range truth.Events {
				e := &truth.Events[i]
				var why []string
				n := 0
				for _, f := range got {
					if err := matches(f, e, burst); err == nil {
						n++
					} else if f.Kind.String() == e.Kind {
						why = append(why, err.Error())
					}
				}
				if n != 1 {
					t.Errorf("%s from %d: found %d times; the events of its kind: %q", e.Kind, e.StartNS, n, why)
				}
			}
			if len(got) != len(truth.Events) {
				for _, f := range got {
					t.Logf("found %s", f.String())
				}
				t.Errorf("%d events, the trace holds %d", len(got), len(truth.Events))
			}
			if run.hosts == 1 && run.workers == 1 {
				one = reports
				return
			}
			for i := range reports {
				if diff := cmp.Diff(one[i].Events, reports[i].Events, eventOpts, cmp.AllowUnexported(Event{})); diff != "" {
					t.Errorf("window %d: events differ from one host's with one worker (-one +this):\n%s", i, diff)
				}
			}
		})
	}
}

// TestHealthyTrafficRaisesNothing replays ten minutes of synthetic traffic
// without losses over 10 000 connections, with the healthy look-alikes (an
// even fan-in of 64 slow senders, isolated pauses, PSN wraps, READ
// responses) and the traffic's own CE marks with their CNPs and isolated
// PFC frames: at the default rules no event fires.
func TestHealthyTrafficRaisesNothing(t *testing.T) {
	packets := 600_000
	if testing.Short() {
		packets = 150_000
	}
	src, err := synth.New(&synth.Config{Seed: 12, Packets: packets, Flows: 10_000, Duration: 10 * time.Minute,
		Scenario: synth.ScenarioHealthy, LossProb: synth.Off, RNRProb: synth.Off})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &metrics.Config{Workers: 2, Host: "h"}
	e, err := metrics.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	windows, fired := 0, 0
	err = e.Run(t.Context(), []capture.Source{src}, func(w *metrics.Window) error {
		windows++
		for _, ev := range rp.Build(w).Events {
			if fired++; fired <= 10 {
				t.Errorf("window %d: %s", w.Start, ev.String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if windows < 590 || fired > 0 {
		t.Errorf("%d windows, %d events; want 600 and none", windows, fired)
	}
	if tr := src.Truth(); len(tr.LookAlikes) != 4 || tr.Total.CNP == 0 || tr.Total.PFC[3].Frames == 0 {
		t.Errorf("the trace holds %d look-alikes, %d CNPs and %d PFC frames: not what it tests", len(tr.LookAlikes), tr.Total.CNP, tr.Total.PFC[3].Frames)
	}
}
