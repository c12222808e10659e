package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// runLine matches the line a run ends with, and takes apart its figures.
var runLine = regexp.MustCompile(`(?m)^rocescope (replay|capture|merge): (\d+) frames, (\d+) RoCE, (\d+) dropped by kernel, (\d+) filtered, ` +
	`(\d+) windows, ~?(\d+) flows, (?:(\d+) hosts, )?(\S+) of traffic, in \S+ \([0-9.]+ [kMG]?frames/s\)\n\z`)

// lastWords splits stderr into what comes before the line a run ends with
// and that line's figures; it fails t when there is no such line.
func lastWords(t *testing.T, stderr string) (before string, figures []string) {
	t.Helper()
	m := runLine.FindStringSubmatchIndex(stderr)
	if m == nil {
		t.Fatalf("standard error does not end with the run's line:\n%s", stderr)
	}
	for i := 2; i < len(m); i += 2 {
		if m[i] < 0 {
			figures = append(figures, "")
		} else {
			figures = append(figures, stderr[m[i]:m[i+1]])
		}
	}
	return stderr[:m[0]], figures
}

// reportTotals adds up the packets, RoCE packets and filtered frames of
// JSON lines reports.
func reportTotals(t *testing.T, jsonl string) (windows int, packets, roce, filtered uint64) {
	t.Helper()
	for _, r := range reports(t, jsonl) {
		windows++
		packets += uint64(r["packets"].(float64))
		roce += uint64(r["roce_packets"].(float64))
		filtered += uint64(r["filtered"].(float64))
	}
	return windows, packets, roce, filtered
}

// TestRunEndsWithALine: replay and merge end with one line on standard
// error, as tcpdump ends with its counts, whose frames, RoCE frames and
// windows are the sums of the reports, whose flows are the distinct flows
// of the whole run (the --summary report's), and a merge says how many
// hosts it merged.
func TestRunEndsWithALine(t *testing.T) {
	const demo = "../../testdata/demo.pcap"
	// The filter keeps the frames of one connection, both ways.
	filter := []string{"--format", "jsonl", "--qp", "0x4bdaaf,0x9d5d7d", demo}
	code, out, stderr := runCLI(t, append([]string{"replay"}, filter...)...)
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	before, f := lastWords(t, stderr)
	windows, packets, roce, filtered := reportTotals(t, out)
	code, sum, _ := runCLI(t, append([]string{"replay", "--summary"}, filter...)...)
	if code != 0 {
		t.Fatalf("replay --summary: exit %d", code)
	}
	s := reports(t, sum)[0]
	span := time.Duration(s["covered_ns"].(float64)).Round(time.Millisecond).String()
	want := []string{"replay", u(packets), u(roce), "0", u(filtered), strconv.Itoa(windows), strconv.Itoa(int(s["flows"].(float64))), "", span}
	if before != "" || strings.Join(f, " ") != strings.Join(want, " ") || windows != 3 || filtered == 0 || packets != 10000 {
		t.Errorf("replay ends with %q after %q; want %q alone, the demo's 10000 frames, some filtered", f, before, want)
	}

	// Merge the states of two hosts that each saw the demo trace.
	dir := t.TempDir()
	var dirs []string
	for _, host := range []string{"h0", "h1"} {
		d := filepath.Join(dir, host) + "/"
		if code, _, stderr := runCLI(t, "replay", "--host", host, "--state-out", d, "-o", filepath.Join(dir, "r.jsonl"), demo); code != 0 {
			t.Fatalf("replay: exit %d: %s", code, stderr)
		}
		dirs = append(dirs, d)
	}
	code, out, stderr = runCLI(t, append([]string{"merge", "--format", "jsonl"}, dirs...)...)
	if code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	_, f = lastWords(t, stderr)
	windows, packets, roce, _ = reportTotals(t, out)
	if want := []string{"merge", u(packets), u(roce), "0", "0", strconv.Itoa(windows), f[6], "2", span}; strings.Join(f, " ") != strings.Join(want, " ") || packets != 20000 {
		t.Errorf("merge ends with %q; want %q, twice the demo's frames", f, want)
	}
}

// TestCaptureEndsWithALine: a live analysis stopped by its context, as a
// signal (Ctrl-C) or --duration stops a capture, ends with the run's line,
// and with --summary writes the report of the whole run.
func TestCaptureEndsWithALine(t *testing.T) {
	for _, summary := range []bool{false, true} {
		o := testOptions(t)
		o.format, o.cfg.Window, o.summary = "jsonl", 10*time.Millisecond, summary
		var stdout, stderr strings.Builder
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		a := &analysis{opts: o, live: true}
		err := a.run(ctx, &env{stdout: &stdout, stderr: &stderr}, []capture.Source{&quietSource{frame: windowFrames(t)[0]}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		_, f := lastWords(t, stderr.String())
		windows, packets, _, _ := reportTotals(t, stdout.String())
		if summary {
			rs := reports(t, stdout.String())
			if len(rs) != 1 || rs[0]["summary"] != true || strconv.Itoa(int(rs[0]["windows"].(float64))) != f[5] {
				t.Errorf("--summary wrote %d reports (%v); want one, the summary of the %s windows", len(rs), rs, f[5])
			}
			windows, _ = strconv.Atoi(f[5])
		}
		if f[0] != "capture" || f[1] != u(packets) || f[5] != strconv.Itoa(windows) || windows < 2 {
			t.Errorf("capture ends with %q; want %d frames in %d windows", f, packets, windows)
		}
	}
}

// TestSummaryFlag: --summary writes one report of the whole run in every
// text format, whose counters and sections (opcodes, NAK codes, PFC) are
// the sums of the per-window reports'; merge writes one too; the HTML page,
// which charts every window, refuses it.
func TestSummaryFlag(t *testing.T) {
	const demo = "../../testdata/demo.pcap"
	code, out, stderr := runCLI(t, "replay", "--format", "jsonl", "--exact", demo)
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	windows := reports(t, out)
	code, out, stderr = runCLI(t, "replay", "--format", "jsonl", "--exact", "--summary", demo)
	if code != 0 {
		t.Fatalf("replay --summary: exit %d: %s", code, stderr)
	}
	rs := reports(t, out)
	if len(rs) != 1 || rs[0]["summary"] != true || rs[0]["windows"] != float64(len(windows)) {
		t.Fatalf("replay --summary wrote %d reports; want one, the summary of %d windows", len(rs), len(windows))
	}
	sum := rs[0]
	want := map[string]float64{}
	for _, w := range windows {
		for c := metrics.Counter(0); c < metrics.Counter(metrics.NumScalar); c++ {
			want[c.String()] += w[c.String()].(float64)
		}
		for _, section := range []string{"opcodes", "nak_codes"} {
			for k, v := range w[section].(map[string]any) {
				want[section+"."+k] += v.(float64)
			}
		}
		for p, v := range w["pfc"].(map[string]any) {
			for k, n := range v.(map[string]any) {
				want["pfc."+p+"."+k] += n.(float64)
			}
		}
		want["cnp_unattributed"] += w["cnp_unattributed"].(float64)
	}
	for k, v := range want {
		path := strings.Split(k, ".")
		var got any = sum
		for _, p := range path {
			got = got.(map[string]any)[p]
		}
		if got != v {
			t.Errorf("summary %s = %v, want %v, the sum over the windows", k, got, v)
		}
	}
	if n := len(sum["flows_all"].([]any)); n != int(sum["flows_tracked"].(float64)) || n < 300 {
		t.Errorf("summary lists %d flows of %v tracked", n, sum["flows_tracked"])
	}

	for format, first := range map[string]string{"csv": "row,", "table": "summary of 3 windows  2023-11-14T22:13:20Z  to 2023-11-14T22:13:23Z"} {
		code, out, _ := runCLI(t, "replay", "--format", format, "--summary", demo)
		lines := strings.Split(out, "\n")
		if code != 0 || !strings.HasPrefix(lines[0], first) {
			t.Errorf("replay --summary --format %s: exit %d, first line %q; want %q", format, code, lines[0], first)
		}
		if format == "csv" && (!strings.HasPrefix(lines[1], "summary,1700000000000000000,") || strings.Contains(out, "\nwindow,")) {
			t.Errorf("replay --summary --format csv: second line %q; want the summary row, and no window row", lines[1])
		}
	}
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "replay", "--state-out", dir+"/", "-o", filepath.Join(dir, "r.jsonl"), demo); code != 0 {
		t.Fatalf("replay --state-out: exit %d: %s", code, stderr)
	}
	code, out, stderr = runCLI(t, "merge", "--format", "jsonl", "--summary", dir)
	if rs := reports(t, out); code != 0 || len(rs) != 1 || rs[0]["windows"] != 3.0 || rs[0]["packets"] != sum["packets"] {
		t.Errorf("merge --summary: exit %d, %d reports; want one of 3 windows and %v packets (%s)", code, len(rs), sum["packets"], stderr)
	}
	code, _, stderr = runCLI(t, "replay", "--summary", "--format", "html", "-o", filepath.Join(dir, "r.html"), demo)
	if code != 2 || !strings.Contains(stderr, "--summary writes one report") {
		t.Errorf("replay --summary --format html: exit %d, %q; want 2 and why", code, stderr)
	}
}

// discardSink takes reports and writes nothing.
type discardSink struct{}

func (discardSink) Write(*report.Report) error { return nil }
func (discardSink) Flush() error               { return nil }

// TestRunFlowsAreTheUnion: the distinct flows the run's line gives are
// those of the union of the windows' sketches, whether a window's flows are
// few (their hashes are inserted) or many (its sketch is merged).
func TestRunFlowsAreTheUnion(t *testing.T) {
	for _, flows := range []int{100, 5000} {
		cfg := &metrics.Config{Workers: 2}
		src, err := synth.New(&synth.Config{Packets: 60000, Flows: flows, Duration: 4 * time.Second, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		wins := enginetest.Run(t, cfg, src)
		rp, err := report.NewReporter(cfg)
		if err != nil {
			t.Fatal(err)
		}
		o := testOptions(t)
		out, _, err := o.wrap(discardSink{}, func() error { return nil }, cfg)
		if err != nil {
			t.Fatal(err)
		}
		union := wins[0].Distinct.Clone()
		most := 0
		for _, w := range wins {
			most = max(most, len(w.Flows))
			if err := errors.Join(union.Merge(w.Distinct), out.Write(rp.Build(w))); err != nil {
				t.Fatal(err)
			}
		}
		got, err1 := out.distinct.AppendBinary(nil)
		want, err2 := union.AppendBinary(nil)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || (most < fewFlows) != (flows == 100) {
			t.Errorf("%d connections (%d flows in a window at most): the run's sketch (~%.0f flows) is not the union of the windows' (~%.0f)",
				flows, most, out.distinct.Estimate().Value, union.Estimate().Value)
		}
	}
}
