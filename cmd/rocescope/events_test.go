package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/capture/synth"
)

// TestReplayPrintsEvents: gen writes a capture with every trouble and
// look-alike and its truth, and replay prints, as JSON lines, one event per
// trouble with its kind, who and start (within the burst interval), and
// nothing for the look-alikes; the flows the events name are in
// event_flows. A YAML --config sets the rules like the flags: at
// --ce-marks 101 the flow with 100 CE marks is no event.
func TestReplayPrintsEvents(t *testing.T) {
	dir := t.TempDir()
	pcap, truthPath := filepath.Join(dir, "trouble.pcap"), filepath.Join(dir, "truth.json")
	mustRunInProcess(t, "gen", "-o", pcap, "--truth", truthPath, "--scenario", "all", "--loss", "0", "--rnr", "0",
		"--packets", "5000", "--flows", "200", "--snaplen", "128")
	var truth synth.Truth
	data, err := os.ReadFile(truthPath)
	if err != nil || json.Unmarshal(data, &truth) != nil || len(truth.Events) != 6 {
		t.Fatalf("truth: %v, %d events", err, len(truth.Events))
	}
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

// TestEventFlagsChecked: a rule out of range is a usage error (exit 2)
// that names the flag.
func TestEventFlagsChecked(t *testing.T) {
	const demo = "../../testdata/demo.pcap"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--burst", "3ms"}, "--burst 3ms: want 1µs to 10ms, dividing --window (1s) into at most 65535"},
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
