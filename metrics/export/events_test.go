package export

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"maps"
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

// TestCSVEvents: the CSV of the scenario trace at 100 ms windows has an
// event row per event and window, right after the window row, with what
// the truth injected: the incast's destination and exactly its senders,
// the storm's MAC, priority and frames (over the two windows it spans,
// under one id), each retransmission's flow, cause, first PSN,
// resends and stall, and the CE marks of the flow whose receiver sent no
// CNP.
func TestCSVEvents(t *testing.T) {
	rs, truth := scenarioReports(t, 100*time.Millisecond)
	var out bytes.Buffer
	c := NewCSV(&out)
	for _, r := range rs {
		if err := c.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := make(map[string]int)
	for i, name := range rows[0] {
		col[name] = i
	}
	type event map[string]string
	var events []event // the event rows, as column → cell
	for i, row := range rows[1:] {
		if row[col["row"]] != "event" {
			continue
		}
		if prev := rows[i][col["row"]]; prev != "window" && prev != "event" {
			t.Errorf("event row %d follows a %s row", i+1, prev)
		}
		e := event{}
		for name, j := range col {
			e[name] = row[j]
		}
		events = append(events, e)
	}
	byKind := func(kind string) []event {
		var out []event
		for _, e := range events {
			if e["kind"] == kind {
				out = append(out, e)
			}
		}
		return out
	}
	flowOf := func(f *synth.EventFlow) event {
		return event{"src": f.Src.String(), "dst": f.Dst.String(), "dqp": strconv.FormatUint(uint64(f.DQP), 10),
			"dqp_hex": fmt.Sprintf("0x%06x", f.DQP), "sqp": strconv.FormatUint(uint64(f.SQP), 10), "sqp_hex": fmt.Sprintf("0x%06x", f.SQP)}
	}
	check := func(what string, e event, want event) {
		t.Helper()
		for k, v := range want {
			if e[k] != v {
				t.Errorf("%s: %s = %q, want %q", what, k, e[k], v)
			}
		}
	}
	n := 0
	for _, te := range truth.Events {
		switch te.Kind {
		case "incast":
			got := byKind("incast")
			if len(got) != 1 {
				t.Fatalf("%d incast rows, want 1", len(got))
			}
			var senders []string
			for _, s := range te.Senders {
				senders = append(senders, fmt.Sprintf("%s/0x%06x", s.Src, s.DQP))
			}
			gotSenders := strings.Fields(got[0]["senders"])
			slices.Sort(senders)
			slices.Sort(gotSenders)
			if !slices.Equal(gotSenders, senders) {
				t.Errorf("incast senders %q, want %q", gotSenders, senders)
			}
			check("incast", got[0], event{"src": "", "dst": te.Dst.String(), "sender_count": strconv.Itoa(len(te.Senders)), "sources": strconv.Itoa(len(te.Senders))})
			n++
		case "pfc_storm":
			got := byKind("pfc_storm")
			if len(got) != 2 {
				t.Fatalf("%d pfc_storm rows at 100 ms windows, want 2", len(got))
			}
			frames := 0
			for i, e := range got {
				f, _ := strconv.Atoi(e["frames"])
				frames += f
				check("pfc_storm", e, event{"id": got[0]["id"], "start_ns": strconv.FormatInt(te.StartNS, 10),
					"mac": te.MAC, "priority": strconv.Itoa(te.Priority), "ongoing": strconv.FormatBool(i == 0)})
			}
			if frames != te.Frames {
				t.Errorf("pfc_storm: %d frames over its rows, want %d", frames, te.Frames)
			}
			if got[1]["end_ns"] != strconv.FormatInt(te.EndNS, 10) {
				t.Errorf("pfc_storm ends at %s, want %d", got[1]["end_ns"], te.EndNS)
			}
			n += 2
		case "retransmission":
			i := slices.IndexFunc(events, func(e event) bool { return e["kind"] == te.Kind && e["src"] == te.Flow.Src.String() })
			if i < 0 {
				t.Errorf("no row for the %s retransmission of %s", te.Cause, te.Flow.Src)
				continue
			}
			want := flowOf(te.Flow)
			maps.Copy(want, event{"cause": te.Cause, "first_psn": strconv.FormatUint(uint64(te.FirstPSN), 10), "resent": strconv.Itoa(te.Resent),
				"stall_ns": strconv.FormatInt(te.StallNS, 10), "start_ns": strconv.FormatInt(te.StartNS, 10), "mac": "", "senders": ""})
			switch te.Cause {
			case "nak":
				want["nak_code"] = strconv.Itoa(te.NAKCode)
			case "rnr":
				want["rnr_timer"] = strconv.Itoa(te.NAKCode)
			}
			check(te.Cause, events[i], want)
			n++
		case "ce_without_cnp":
			got := byKind(te.Kind)
			if len(got) != 1 {
				t.Fatalf("%d ce_without_cnp rows, want 1", len(got))
			}
			want := flowOf(te.Flow)
			maps.Copy(want, event{"ecn_ce": strconv.Itoa(te.ECNCE), "cnp": "0"})
			check(te.Kind, got[0], want)
			n++
		}
	}
	if len(events) != n {
		t.Errorf("%d event rows, want %d", len(events), n)
	}
}
