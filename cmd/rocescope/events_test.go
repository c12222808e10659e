package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture/synth"
)

// TestReplayPrintsEvents: gen writes a capture with every trouble and
// look-alike and its truth, and replay prints, as JSON lines, one event per
// trouble with its kind, who and start (within the burst interval), and
// nothing for the look-alikes; the flows the events name are in
// event_flows. A YAML --config sets the rules like the flags: at
// --ce-marks 101 the flow with 100 CE marks is no event.
func TestReplayPrintsEvents(t *testing.T) {
	pcap, truth := scenarioTrace(t)
	dir := filepath.Dir(pcap)
	type event struct {
		Kind     string `json:"kind"`
		ID       string `json:"id"`
		StartNS  int64  `json:"start_ns"`
		Dst      string `json:"dst"`
		Src      string `json:"src"`
		DQP      uint32 `json:"dqp"`
		MAC      string `json:"mac"`
		Priority int    `json:"priority"`
		Cause    string `json:"cause"`
		FirstPSN uint32 `json:"first_psn"`
	}
	events := func(args ...string) (evs []event, flows map[string]bool) {
		out := mustRunInProcess(t, append([]string{"replay", "--format", "jsonl"}, append(args, pcap)...)...)
		flows = map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r struct {
				Events     []event `json:"events"`
				EventFlows []struct {
					Src string `json:"src"`
					DQP uint32 `json:"dqp"`
				} `json:"event_flows"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, r.Events...)
			for _, f := range r.EventFlows {
				flows[fmt.Sprint(f.Src, "/", f.DQP)] = true
			}
		}
		return evs, flows
	}
	got, flows := events()
	if len(got) != len(truth.Events) {
		t.Errorf("%d events, the trace holds %d: %+v", len(got), len(truth.Events), got)
	}
	for _, e := range truth.Events {
		i := slices.IndexFunc(got, func(g event) bool {
			near := g.StartNS-e.StartNS < 1e6 && e.StartNS-g.StartNS < 1e6
			switch e.Kind {
			case "incast":
				return g.Kind == e.Kind && g.Dst == e.Dst.String() && near
			case "pfc_storm":
				return g.Kind == e.Kind && g.MAC == e.MAC && g.Priority == e.Priority && g.StartNS == e.StartNS
			}
			return g.Kind == e.Kind && g.Src == e.Flow.Src.String() && g.DQP == e.Flow.DQP && g.Cause == e.Cause &&
				(e.Kind != "retransmission" || g.FirstPSN == e.FirstPSN && g.StartNS == e.StartNS) && near
		})
		if i < 0 {
			t.Errorf("no event for %s from %d", e.Kind, e.StartNS)
			continue
		}
		if e.Flow != nil && !flows[fmt.Sprint(e.Flow.Src, "/", e.Flow.DQP)] {
			t.Errorf("%s: the flow is not in event_flows", e.Kind)
		}
		if len(got[i].ID) != 16 {
			t.Errorf("%s: id %q", e.Kind, got[i].ID)
		}
	}
	config := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(config, []byte("ce-marks: 101\nlink-rate: 100G\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ = events("--config", config)
	if n := len(got); n != 5 || slices.ContainsFunc(got, func(e event) bool { return e.Kind == "ce_without_cnp" }) {
		t.Errorf("--ce-marks 101 from --config: %d events %+v, want the 5 others", n, got)
	}
}

// scenarioTrace has gen write a capture with every trouble and look-alike
// of --scenario all over 200 connections without losses of their own, and
// returns its path and truth (six events).
func scenarioTrace(t *testing.T) (pcap string, truth *synth.Truth) {
	t.Helper()
	dir := t.TempDir()
	pcap, truthPath := filepath.Join(dir, "trouble.pcap"), filepath.Join(dir, "truth.json")
	mustRunInProcess(t, "gen", "-o", pcap, "--truth", truthPath, "--scenario", "all", "--loss", "0", "--rnr", "0",
		"--packets", "5000", "--flows", "200", "--snaplen", "128")
	truth = new(synth.Truth)
	data, err := os.ReadFile(truthPath)
	if err != nil || json.Unmarshal(data, truth) != nil || len(truth.Events) != 6 {
		t.Fatalf("truth: %v, %d events", err, len(truth.Events))
	}
	return pcap, truth
}

// TestEventFlagsChecked: a rule out of range is a usage error (exit 2)
// that names the flag.
func TestEventFlagsChecked(t *testing.T) {
	const demo = "../../testdata/demo.pcap"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--burst", "3ms"}, "--burst 3ms: want 1µs to 10ms, dividing the window (1s) into at most 65535"},
		{[]string{"--burst", "10µs"}, "--burst 10µs"},
		{[]string{"--burst", "20ms", "--window", "1s"}, "--burst 20ms"},
		{[]string{"--link-rate", "0"}, "--link-rate 0: want more than 0"},
		{[]string{"--incast-sources", "1"}, "--incast-sources 1: want at least 2"},
		{[]string{"--incast-load", "1.5"}, "--incast-load 1.5"},
		{[]string{"--storm-paused", "0"}, "--storm-paused 0"},
		{[]string{"--storm-interval", "0s"}, "--storm-interval 0s"},
		{[]string{"--max-events", "0"}, "--max-events 0"},
		{[]string{"--retrans-stall", "-1s"}, "--retrans-stall -1s"},
	} {
		code, _, stderr := runCLI(t, append(append([]string{"replay"}, tc.args...), demo)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, %q; want 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestTableEvents: the table lists a window's events first, one line each
// at 132 columns, naming what the truth of the scenario trace says was
// injected (who, when, the cause, the MAC and priority, the frames and
// resends), with the QPs in hex and the figures of the JSON report; an
// event spanning windows (the 300 ms storm over 100 ms windows) is in each,
// marked ongoing until its last, with that window's part of it.
func TestTableEvents(t *testing.T) {
	pcap, truth := scenarioTrace(t)
	t.Setenv("COLUMNS", "132")
	of := func(kind string) synth.Event {
		i := slices.IndexFunc(truth.Events, func(e synth.Event) bool { return e.Kind == kind || e.Cause == kind })
		return truth.Events[i]
	}
	clock := func(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000000") }
	flow := func(e synth.Event) string {
		return fmt.Sprintf("%s → %s  QP 0x%06x  PSN %d", e.Flow.Src, e.Flow.Dst, e.Flow.DQP, e.FirstPSN)
	}
	incast, storm, nak, timeout, rnr, ce := of("incast"), of("pfc_storm"), of("nak"), of("timeout"), of("rnr"), of("ce_without_cnp")
	const ms = int64(time.Millisecond)
	// The incast's start and span are whole burst intervals (1 ms); the
	// figures no truth holds (peak, CE, CNP, packets) are those of the
	// JSON report (TestReplayPrintsEvents checks its events).
	incastLine := fmt.Sprintf("! %s incast → %s  %d senders  peak 120 Gb/s over 4ms  CE 480  CNP 480",
		clock(incast.StartNS/ms*ms), incast.Dst, len(incast.Senders))
	stormLine := func(paused string, frames int, ongoing string) string {
		return fmt.Sprintf("! %s pfc_storm %s  prio %d  paused %s (100 %%)  %d frames%s", clock(storm.StartNS), storm.MAC, storm.Priority, paused, frames, ongoing)
	}
	retrans := []string{
		fmt.Sprintf("! %s retransmission %s", clock(nak.StartNS), flow(nak)),
		fmt.Sprintf("    nak (PSN sequence error): %d resent after %v stall", nak.Resent, time.Duration(nak.StallNS)),
		fmt.Sprintf("! %s retransmission %s  timeout: %d resent after %v stall  ongoing", clock(timeout.StartNS), flow(timeout), timeout.Resent, time.Duration(timeout.StallNS)),
		fmt.Sprintf("! %s retransmission %s  rnr (timer %d): %d resent after %v stall", clock(rnr.StartNS), flow(rnr), rnr.NAKCode, rnr.Resent, time.Duration(rnr.StallNS)),
	}
	ceLine := fmt.Sprintf("! %s ce_without_cnp %s → %s  QP 0x%06x  CE %d  CNP 0  of 400 packets, 50 back",
		clock(ce.StartNS/ms*ms), ce.Flow.Src, ce.Flow.Dst, ce.Flow.DQP, ce.ECNCE)
	// The storm is first an event in the window in which it has lasted
	// 200 ms (--storm-interval), ending at 20.4: that window reports it
	// from its start, with the frames to then (one every 50 µs), and the
	// next window the rest.
	stormEnd := storm.StartNS + 300*ms
	window := (storm.StartNS+200*ms)/(100*ms)*(100*ms) + 100*ms
	inFirst := int((window-storm.StartNS)/50_000) + 1
	for _, tc := range []struct {
		window string
		want   [][]string // the event lines of each window with events
	}{
		{"1s", [][]string{
			{incastLine, stormLine("300ms", storm.Frames, "")},
			append(slices.Clone(retrans), ceLine),
		}},
		{"100ms", [][]string{
			{stormLine(time.Duration(window-storm.StartNS).Round(time.Microsecond).String(), inFirst, "  ongoing")},
			{stormLine(time.Duration(stormEnd-window).Round(time.Microsecond).String(), storm.Frames-inFirst, "")},
			{incastLine}, retrans[:2], retrans[2:3], retrans[3:], {ceLine},
		}},
	} {
		code, out, stderr := runCLI(t, "replay", "--format", "table", "--window", tc.window, pcap)
		if code != 0 {
			t.Fatalf("replay: exit %d: %s", code, stderr)
		}
		var got [][]string
		for _, w := range strings.Split(out, "\nwindow ")[0:] {
			lines := strings.Split(w, "\n")[1:]
			var evs []string
			for i, l := range lines {
				if strings.HasPrefix(l, "! ") || i > 0 && strings.HasPrefix(lines[i-1], "! ") && strings.HasPrefix(l, "    ") {
					evs = append(evs, l)
				} else if !strings.HasPrefix(l, "!") {
					break // the events come first
				}
			}
			if evs != nil {
				got = append(got, evs)
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("--window %s: event lines (-want +got):\n%s", tc.window, diff)
		}
	}
}

// TestReadmeEventSamples: the README's samples of the events in the table
// and in CSV are what its commands print for the trace its gen command
// writes.
func TestReadmeEventSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and replays a 19 MB trace")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// block returns the lines of the indented code block after marker.
	block := func(marker string) []string {
		_, after, ok := strings.Cut(string(readme), marker)
		_, after, ok2 := strings.Cut(after, "  ```\n")
		body, _, ok3 := strings.Cut(after, "  ```\n")
		if !ok || !ok2 || !ok3 {
			t.Fatalf("the README has no sample after %q", marker)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			lines = append(lines, strings.TrimPrefix(l, "  "))
		}
		return lines
	}
	pcap := filepath.Join(t.TempDir(), "trouble.pcap")
	mustRunInProcess(t, "gen", "-o", pcap, "--scenario", "all", "--loss", "0", "--rnr", "0", "--snaplen", "128")
	t.Setenv("COLUMNS", "100")
	var table []string
	lines := strings.Split(mustRunInProcess(t, "replay", "--format", "table", pcap), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "! ") || i > 0 && strings.HasPrefix(lines[i-1], "! ") && strings.HasPrefix(l, "    ") {
			table = append(table, l)
		}
	}
	if diff := cmp.Diff(block("the second with the rest:"), table); diff != "" {
		t.Errorf("the README's table of events (-README +replay):\n%s", diff)
	}
	rows, err := csv.NewReader(strings.NewReader(mustRunInProcess(t, "replay", "--format", "csv", pcap))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	var events []string
	for _, r := range rows[1:] {
		if r[0] != "event" {
			continue
		}
		var cells []string
		for _, name := range []string{"kind", "start_ns", "ongoing", "src", "dst", "dqp_hex", "mac", "priority", "frames", "cause", "resent", "ecn_ce"} {
			cells = append(cells, r[col[name]])
		}
		events = append(events, strings.Join(cells, ","))
	}
	if diff := cmp.Diff(block(`$c["ecn_ce"]}'`+"\n  ```\n"), events); diff != "" {
		t.Errorf("the README's CSV event rows (-README +replay):\n%s", diff)
	}
}
