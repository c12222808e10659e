package export

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// scenarioReports returns the reports, at the given window length, of a
// synthetic trace with every trouble and look-alike of synth.ScenarioAll
// over 200 connections without losses of their own (as `gen --scenario all
// --loss 0 --rnr 0 --packets 5000 --flows 200 --snaplen 128` writes it),
// and its truth: six events.
func scenarioReports(t *testing.T, window time.Duration) ([]*report.Report, *synth.Truth) {
	t.Helper()
	src, err := synth.New(&synth.Config{Seed: 1, Packets: 5000, Flows: 200, Scenario: synth.ScenarioAll,
		LossProb: synth.Off, RNRProb: synth.Off, SnapLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &metrics.Config{Workers: 1, Host: "h", Window: window}
	rp, err := report.NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*report.Report
	for _, w := range enginetest.Run(t, cfg, src) {
		rs = append(rs, rp.Build(w))
	}
	truth := src.Truth()
	if len(truth.Events) != 6 {
		t.Fatalf("the scenario trace holds %d events, want 6", len(truth.Events))
	}
	return rs, truth
}

// TestPrometheusEvents: rocescope_events_total{kind} counts each event of
// the scenario trace once, as many per kind as its truth injected, though
// at 100 ms windows the PFC storm is reported in two; event_active says
// the storm goes on after the first of them and not after the second.
func TestPrometheusEvents(t *testing.T) {
	rs, truth := scenarioReports(t, 100*time.Millisecond)
	want := map[string]int{"incast": 0, "pfc_storm": 0, "retransmission": 0, "ce_without_cnp": 0}
	for _, e := range truth.Events {
		want[e.Kind]++
	}
	p := &Prometheus{}
	sample := func(name, kind string) string {
		text := string(p.AppendText(nil))
		prefix := "rocescope_" + name + `{kind="` + kind + `"} `
		for _, l := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(l, prefix); ok {
				return v
			}
		}
		t.Fatalf("no %s in\n%s", prefix, text)
		return ""
	}
	if got := sample("events_total", "incast"); got != "0" {
		t.Errorf("before any window: events_total{incast} %s, want 0", got)
	}
	storms := 0
	for _, r := range rs {
		p.Update(r)
		if !slices.ContainsFunc(r.Events, func(e report.Event) bool { return e.Kind == report.EventPFCStorm }) {
			continue
		}
		storms++
		if got := sample("events_total", "pfc_storm"); got != "1" {
			t.Errorf("storm window %d: events_total{pfc_storm} %s, want 1", storms, got)
		}
		active := map[int]string{1: "1", 2: "0"}[storms]
		if got := sample("event_active", "pfc_storm"); got != active {
			t.Errorf("storm window %d: event_active{pfc_storm} %s, want %s", storms, got, active)
		}
	}
	if storms != 2 {
		t.Errorf("the storm is in %d windows of 100 ms, want 2", storms)
	}
	for kind, n := range want {
		if got := sample("events_total", kind); got != strconv.Itoa(n) {
			t.Errorf("events_total{%s} %s, want %d", kind, got, n)
		}
		if got := sample("events_omitted_total", kind); got != "0" {
			t.Errorf("events_omitted_total{%s} %s, want 0", kind, got)
		}
	}
}
