package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/state"
)

// twoHostStates splits a small trace between hosts hA and hB by
// connection, replays each part into a state directory of its own, and
// returns each host's state files, one per window (3 windows).
func twoHostStates(t *testing.T, dir string) (a, b []string) {
	t.Helper()
	parts, _ := writeSplitTrace(t, dir, &synth.Config{Seed: 3, Packets: 20000, Flows: 200}, 2, byConnection(2))
	var files [2][]string
	for i, part := range parts {
		states := filepath.Join(dir, fmt.Sprintf("src%d", i))
		mustRunInProcess(t, append([]string{"replay", "--format", "jsonl", "--host", []string{"hA", "hB"}[i], "--state-out", states + "/", part}, mergeRates...)...)
		if files[i] = stateFilesIn(t, states); len(files[i]) != 3 {
			t.Fatalf("host %d has %d windows, want 3", i, len(files[i]))
		}
	}
	return files[0], files[1]
}

// readState returns the first state of the state file path.
func readState(t *testing.T, path string) *metrics.Window {
	t.Helper()
	sr, err := state.Open(context.Background(), path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	var w metrics.Window
	if err := sr.Next(&w); err != nil {
		t.Fatal(err)
	}
	return &w
}

// restamped writes the one state of the file path into the directory dir
// as a state of host, moved to the window that starts at start, and
// returns the file written.
func restamped(t *testing.T, path, dir, host string, start int64) string {
	t.Helper()
	w := readState(t, path)
	w.From, w.To, w.Start = w.From-w.Start+start, w.To-w.Start+start, start
	w.Hosts = []string{host}
	sw, err := state.NewWriter(dir+"/", &metrics.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(sw.Write(w), sw.Close()); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%d%s", host, start, state.Ext))
}

// oneShot returns the reports of a one-shot merge of states (copied into a
// directory of their own) that expects hosts.
func oneShot(t *testing.T, hosts string, states ...string) []string {
	t.Helper()
	d := t.TempDir()
	deliver(t, d, states...)
	out := mustRunInProcess(t, append(append([]string{"merge", "--format", "jsonl", "--hosts", hosts}, mergeRates...), d)...)
	return strings.SplitAfter(out, "\n")[:strings.Count(out, "\n")]
}

// followDir starts merge --follow on a new directory and returns both.
func followDir(t *testing.T, flags ...string) (string, *follower) {
	t.Helper()
	d := t.TempDir()
	return d, startFollow(t, append(append(append([]string{"merge", "--follow", "--poll", "10ms", "--format", "jsonl"}, mergeRates...), flags...), d)...)
}

// TestMergeFollowFutureState: a state of host hA from a day ahead (a clock
// ahead, or a damaged state) arrives in a followed directory between
// windows. It must not become a window that makes every later window of
// every host late: it is held apart and refused, and the three windows
// are reported as a one-shot merge of the other states reports them.
func TestMergeFollowFutureState(t *testing.T) {
	dir := t.TempDir()
	a, b := twoHostStates(t, dir)
	future := restamped(t, a[0], filepath.Join(dir, "future"), "hA", readState(t, a[0]).Start+int64(24*time.Hour))

	d, f := followDir(t, "--hosts", "hA,hB", "--timeout", "1s")
	deliver(t, d, a[0], b[0])
	waitFor(t, "window 0", func() bool { return len(f.stdout.lines()) == 1 })
	deliver(t, d, future)
	time.Sleep(1500 * time.Millisecond) // longer than --timeout: the future window would be reported now
	deliver(t, d, a[1], b[1])
	deliver(t, d, a[2], b[2])
	waitFor(t, "windows 1 and 2", func() bool { return len(f.stdout.lines()) == 3 })
	if code := f.stop(); code != 0 {
		t.Fatalf("exit status %d: %s", code, f.stderr.String())
	}
	if diff := cmp.Diff(oneShot(t, "hA,hB", slices.Concat(a, b)...), f.stdout.lines()); diff != "" {
		t.Errorf("reports (-one-shot merge without the future state +follow):\n%s", diff)
	}
	if got := f.stderr.String(); !strings.Contains(got, filepath.Join(d, filepath.Base(future))) || !strings.Contains(got, "more than 1h0m0s ahead of the other hosts'") || !strings.Contains(got, "refused") {
		t.Errorf("stderr %q: want a warning that %s is far ahead and refused", got, future)
	}
}

// TestMergeFollowSkipsBadFiles: a file named like a state file that is not
// one, and a copy of a host's state under another name (a duplicate),
// arrive in a followed directory. Each is skipped with one warning naming
// it, and every window is reported as a one-shot merge of the good states
// reports it.
func TestMergeFollowSkipsBadFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := twoHostStates(t, dir)
	d, f := followDir(t, "--hosts", "hA,hB", "--timeout", "1h")
	deliver(t, d, a[0], b[0])
	junk := filepath.Join(d, "junk"+state.Ext)
	if err := os.WriteFile(junk, []byte("GIF89a not a state at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	deliver(t, d, a[1])
	data, err := os.ReadFile(a[1])
	if err != nil {
		t.Fatal(err)
	}
	dup := filepath.Join(d, "zz-copy"+state.Ext)
	if err := os.WriteFile(dup, data, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warnings", func() bool {
		return strings.Contains(f.stderr.String(), junk) && strings.Contains(f.stderr.String(), dup)
	})
	deliver(t, d, b[1], a[2], b[2])
	waitFor(t, "windows 0 to 2", func() bool { return len(f.stdout.lines()) == 3 })
	if code := f.stop(); code != 0 {
		t.Fatalf("exit status %d: %s", code, f.stderr.String())
	}
	if diff := cmp.Diff(oneShot(t, "hA,hB", slices.Concat(a, b)...), f.stdout.lines()); diff != "" {
		t.Errorf("reports (-one-shot merge of the good states +follow):\n%s", diff)
	}
	stderr := f.stderr.String()
	for _, want := range []string{
		fmt.Sprintf("rocescope merge: state: %s: not a rocescope state file: invalid window state; skipped\n", junk),
		fmt.Sprintf("rocescope merge: state: %s: window 2023-11-14T22:13:21Z: host hA already delivered it in %s: host delivered the same part of a window twice; the first is kept, this state skipped\n", dup, filepath.Join(d, filepath.Base(a[1]))),
		"rocescope merge: 3 windows reported; states skipped: 1 not readable or not mergeable, 1 duplicates\n",
	} {
		if strings.Count(stderr, want) != 1 {
			t.Errorf("stderr %q: want once %q", stderr, want)
		}
	}
}

// TestMergeRestartedCapture: a capture host stops and starts again within
// a window, writing its states into the same directory. The second run's
// state of that window goes to a file of its own (the first is never
// replaced), and merge adds both: every window counts every frame, as the
// replay of the whole trace does.
func TestMergeRestartedCapture(t *testing.T) {
	dir := t.TempDir()
	cfg := &synth.Config{Seed: 4, Packets: 20000, Flows: 200}
	// Two parts of one trace in time: the cut falls inside its middle
	// window.
	parts, _ := writeSplitTrace(t, dir, cfg, 2, func(i int, _ *decode.Packet) int { return i * 2 / cfg.Packets })
	states := filepath.Join(dir, "states") + "/"
	for _, part := range parts {
		mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "cap1", "--state-out", states, part)
	}
	files := stateFilesIn(t, states)
	if len(files) != 4 {
		t.Errorf("state files %q, want 4: windows 0 and 2, and window 1 from each run", files)
	}
	whole := parseReports(t, mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "cap1", filepath.Join(dir, "all.pcap")))
	merged := parseReports(t, mustRunInProcess(t, "merge", "--format", "jsonl", states))
	if len(merged) != len(whole) || len(whole) != 3 {
		t.Fatalf("%d merged windows, %d of the whole trace; want 3", len(merged), len(whole))
	}
	for i := range whole {
		for _, k := range []string{"window_start_ns", "packets", "bytes", "roce_packets", "other_packets", "payload_bytes", "cnp"} {
			if merged[i][k] != whole[i][k] {
				t.Errorf("window %d: %s %v merged, %v in the whole trace", i, k, merged[i][k], whole[i][k])
			}
		}
	}
}

// TestMergeMissingHosts: windows reported after --timeout without a host
// of --hosts name it in missing_hosts, and standard error says so once per
// host and outage: hC never delivers, hB misses window 1 only.
func TestMergeMissingHosts(t *testing.T) {
	dir := t.TempDir()
	a, b := twoHostStates(t, dir)
	d, f := followDir(t, "--hosts", "hA,hB,hC", "--timeout", "300ms")
	want := [][]string{{"hC"}, {"hB", "hC"}, {"hC"}}
	for i, states := range [][]string{{a[0], b[0]}, {a[1]}, {a[2], b[2]}} {
		deliver(t, d, states...)
		waitFor(t, fmt.Sprintf("window %d", i), func() bool { return len(f.stdout.lines()) == i+1 })
	}
	if code := f.stop(); code != 0 {
		t.Fatalf("exit status %d: %s", code, f.stderr.String())
	}
	for i, l := range f.stdout.lines() {
		var r struct {
			Missing []string `json:"missing_hosts"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Missing, want[i]) {
			t.Errorf("window %d: missing_hosts %q, want %q", i, r.Missing, want[i])
		}
	}
	wantErr := "rocescope merge: host hC missing from window 2023-11-14T22:13:20Z on: reported without it (see missing_hosts)\n" +
		"rocescope merge: host hB missing from window 2023-11-14T22:13:21Z on: reported without it (see missing_hosts)\n"
	if got, _ := lastWords(t, f.stderr.String()); got != wantErr {
		t.Errorf("stderr %q, want %q, then the run's line", got, wantErr)
	}
}

// TestMergeRefusesBadHostNames: states whose host name would be terminal
// escape sequences, a spreadsheet formula or two hosts in the
// comma-joined host key are refused like a --host of that name: merge
// names the file and stops, or with --keep-going skips them, and no output
// carries the name.
func TestMergeRefusesBadHostNames(t *testing.T) {
	dir := t.TempDir()
	trace := smallTrace(t, dir)
	good := filepath.Join(dir, "good")
	mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "a", "--state-out", good+"/", trace)
	for i, c := range []struct{ host, mark string }{
		{"\x1b[31mred\x1b[0m", "31mred"},
		{`=HYPERLINK("http://example.com/","x")`, "HYPERLINK"},
		{"b,c", "b,c"},
	} {
		host := c.host
		bad := filepath.Join(dir, fmt.Sprintf("bad%d", i))
		engineStates(t, bad, trace, &metrics.Config{Host: host, Workers: 1})
		code, out, errOut := runInProcess(context.Background(), "merge", "--format", "jsonl", good, bad)
		if code != 1 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "invalid host name") || out != "" {
			t.Errorf("host %q: exit status %d, %d bytes of reports, stderr %q; want 1, none, naming %s", host, code, len(out), errOut, bad)
		}
		for _, format := range []string{"csv", "table", "jsonl"} {
			code, out, errOut := runInProcess(context.Background(), "merge", "--keep-going", "--format", format, good, bad)
			if code != 0 || !strings.Contains(errOut, "invalid host name: invalid window state; skipped") || strings.Contains(out, c.mark) || out == "" {
				t.Errorf("host %q, --keep-going --format %s: exit status %d, stderr %q; want 0, the states skipped and no trace of the name in:\n%.400s", host, format, code, errOut, out)
			}
		}
	}
}

// TestMergePre1823Windows: states of windows in 1811 (a pcapng
// if_tsoffset far in the past) merge like any others: every window is
// reported, none is taken for late.
func TestMergePre1823Windows(t *testing.T) {
	dir := t.TempDir()
	a, b := twoHostStates(t, dir)
	old := filepath.Join(dir, "old")
	start := int64(-5_000_000_000_000_000_000) // 1811-07-23
	var want []string
	for i := range a {
		s := start + int64(i)*int64(time.Second)
		restamped(t, a[i], old, "hA", s)
		restamped(t, b[i], old, "hB", s)
		want = append(want, fmt.Sprint(s))
	}
	var got []string
	for _, r := range parseReports(t, mustRunInProcess(t, "merge", "--format", "jsonl", old)) {
		got = append(got, fmt.Sprint(r["window_start_ns"]))
		if h := reportHosts(r); !slices.Equal(h, []string{"hA", "hB"}) {
			t.Errorf("window %v merged from %q, want hA and hB", r["window_start_ns"], h)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("windows %q reported, want %q", got, want)
	}
}
