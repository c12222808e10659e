package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pageData reads the figures a --format html page embeds.
func pageData(t *testing.T, path string) (d struct {
	Inputs       []string              `json:"inputs"`
	Hosts        []string              `json:"hosts"`
	Windows      int                   `json:"windows"`
	ElephantRate float64               `json:"elephant_rate_bps"`
	JitterRate   float64               `json:"jitter_rate_bps"`
	Series       map[string][]*float64 `json:"series"`
}) {
	t.Helper()
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), `<script type="application/json" id="data">`)
	data, _, ok2 := strings.Cut(rest, "</script>")
	if !ok || !ok2 {
		t.Fatalf("%s: no data script", path)
	}
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

// TestHTMLFormat checks the wiring of --format html: replay and merge write
// a page of every window, naming the inputs and the thresholds of the
// flags, and the page needs -o.
func TestHTMLFormat(t *testing.T) {
	const demo = "../../testdata/demo.pcap"
	dir := t.TempDir()
	code, jsonl, stderr := runCLI(t, "replay", "--format", "jsonl", "--host", "a", demo)
	if code != 0 {
		t.Fatalf("replay jsonl: exit %d: %s", code, stderr)
	}
	var packets float64
	lines := strings.Split(strings.TrimSpace(jsonl), "\n")
	for _, l := range lines {
		var m struct{ Packets float64 }
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		packets += m.Packets
	}

	page := filepath.Join(dir, "replay.html")
	states := filepath.Join(dir, "states") + "/"
	code, out, stderr := runCLI(t, "replay", "--format", "html", "-o", page, "--host", "a", "--elephant-rate", "10M", "--jitter-rate", "5M", "--state-out", states, demo)
	if code != 0 || out != "" {
		t.Fatalf("replay html: exit %d, stdout %q: %s", code, out, stderr)
	}
	merged := filepath.Join(dir, "merge.html")
	if code, _, stderr := runCLI(t, "merge", "--format", "html", "-o", merged, states); code != 0 {
		t.Fatalf("merge html: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct {
		path   string
		inputs []string
		rates  [2]float64
	}{
		{page, []string{demo}, [2]float64{10e6, 5e6}},
		{merged, []string{states}, [2]float64{1e9, 1e9}},
	} {
		d := pageData(t, tc.path)
		var got float64
		for _, v := range d.Series["packets"] {
			got += *v
		}
		if d.Windows != len(lines) || got != packets || strings.Join(d.Inputs, " ") != strings.Join(tc.inputs, " ") ||
			strings.Join(d.Hosts, " ") != "a" || [2]float64{d.ElephantRate, d.JitterRate} != tc.rates {
			t.Errorf("%s: %d windows, %v packets, inputs %q, hosts %q, rates %v %v; want %d, %v, %q, [a], %v",
				tc.path, d.Windows, got, d.Inputs, d.Hosts, d.ElephantRate, d.JitterRate, len(lines), packets, tc.inputs, tc.rates)
		}
	}

	for _, args := range [][]string{
		{"replay", "--format", "html", demo},
		{"replay", "--format", "html", "-o", "-", demo},
		{"merge", "--format", "html", states},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, "give -o FILE.html") {
			t.Errorf("%q: exit %d, %q; want 2 and a request for -o", args, code, stderr)
		}
	}
}
