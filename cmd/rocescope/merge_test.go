package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/testfifo"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/state"
)

// Rates for the synthetic traces of these tests: 200k frames over 3 s make
// a few dozen of the 4000 flows reach 2 Mb/s in a window, and the jitter
// connections swing by more than 1 Mb/s.
var mergeRates = []string{"--elephant-rate", "2M", "--jitter-rate", "1M"}

// runInProcess runs a rocescope command line in process and returns its exit
// status, standard output and standard error.
func runInProcess(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(ctx, &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}, args)
	return code, out.String(), errOut.String()
}

// mustRunInProcess runs a command line that must succeed and returns its standard
// output.
func mustRunInProcess(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runInProcess(context.Background(), args...)
	if code != 0 {
		t.Fatalf("rocescope %s: exit status %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// splitter picks the part of a frame: i is the frame's position in the
// trace, p the frame decoded.
type splitter func(i int, p *decode.Packet) int

// byConnection keeps both directions of a connection in one of k parts:
// it hashes the unordered address pair and the UDP source port, which
// RoCEv2 NICs make equal both ways. Frames without UDP (PFC, ARP, TCP) go
// round-robin: nothing per connection depends on them.
func byConnection(k int) splitter {
	return func(i int, p *decode.Packet) int {
		if p.Headers&decode.HasUDP == 0 {
			return i % k
		}
		a, b := p.Src.As16(), p.Dst.As16()
		if bytes.Compare(a[:], b[:]) > 0 {
			a, b = b, a
		}
		h := fnv.New64a()
		h.Write(a[:])
		h.Write(b[:])
		h.Write(binary.BigEndian.AppendUint16(nil, p.SrcPort))
		return int(h.Sum64() % uint64(k))
	}
}

// roundRobin deals the frames to k parts in turn, splitting every flow.
func roundRobin(k int) splitter { return func(i int, _ *decode.Packet) int { return i % k } }

// writeSplitTrace writes the synthetic trace cfg describes to dir/all.pcap
// and its frames, split by part, to dir/part<i>.pcap. It returns the part
// paths and, per part, the window starts (1 s windows) it has frames in.
func writeSplitTrace(t *testing.T, dir string, cfg *synth.Config, k int, part splitter) ([]string, []map[int64]bool) {
	t.Helper()
	src, err := synth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	type out struct {
		f  *os.File
		bw *bufio.Writer
		pw *file.Writer
	}
	create := func(name string) out {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		bw := bufio.NewWriter(f)
		pw, err := file.NewWriter(bw, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out{f, bw, pw}
	}
	all := create("all.pcap")
	parts := make([]out, k)
	paths := make([]string, k)
	windows := make([]map[int64]bool, k)
	for i := range parts {
		paths[i] = filepath.Join(dir, fmt.Sprintf("part%d.pcap", i))
		parts[i] = create(filepath.Base(paths[i]))
		windows[i] = map[int64]bool{}
	}
	b := capture.NewBatch(256)
	var p decode.Packet
	n := 0
	for {
		err := src.Next(b)
		for _, f := range b.Frames {
			p.Decode(f.Data, f.Link) // damaged frames are split like any other
			j := part(n, &p)
			n++
			windows[j][f.Time-f.Time%int64(time.Second)] = true
			for _, o := range []out{all, parts[j]} {
				if err := o.pw.WriteFrame(f.Time, f.Data, int(f.OrigLen)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range append(parts, all) {
		if err := errors.Join(o.pw.Flush(), o.bw.Flush(), o.f.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return paths, windows
}

// parseReports parses JSON lines reports into generic objects, numbers kept as
// written so that comparisons are exact.
func parseReports(t *testing.T, jsonl string) []map[string]any {
	t.Helper()
	var rs []map[string]any
	dec := json.NewDecoder(strings.NewReader(jsonl))
	dec.UseNumber()
	for {
		var r map[string]any
		if err := dec.Decode(&r); err == io.EOF {
			return rs
		} else if err != nil {
			t.Fatalf("report %d: %v", len(rs), err)
		}
		rs = append(rs, r)
	}
}

// reportHosts returns the "hosts" key of a report.
func reportHosts(r map[string]any) []string {
	var hs []string
	for _, h := range r["hosts"].([]any) {
		hs = append(hs, h.(string))
	}
	return hs
}

// withoutKeys returns r without the given keys.
func withoutKeys(r map[string]any, keys ...string) map[string]any {
	c := make(map[string]any, len(r))
	for k, v := range r {
		if !slices.Contains(keys, k) {
			c[k] = v
		}
	}
	return c
}

// splitRun replays the k parts of a split trace into state directories,
// each as its own host, and returns the directories and the parts' own
// reports.
func splitRun(t *testing.T, dir string, parts []string) ([]string, [][]map[string]any) {
	t.Helper()
	dirs := make([]string, len(parts))
	own := make([][]map[string]any, len(parts))
	for i, part := range parts {
		dirs[i] = filepath.Join(dir, fmt.Sprintf("states%d", i))
		if err := os.Mkdir(dirs[i], 0o755); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"replay", "--exact", "--workers", "2", "--format", "jsonl", "--host", fmt.Sprintf("h%d", i), "--state-out", dirs[i]}, mergeRates...)
		own[i] = parseReports(t, mustRunInProcess(t, append(args, part)...))
	}
	return dirs, own
}

// propertyTrace is the synthetic trace of the property tests.
func propertyTrace() *synth.Config {
	c := &synth.Config{Seed: 5, Packets: 200_000, Flows: 2000}
	if testing.Short() {
		c.Packets = 60_000
	}
	return c
}

// TestMergeByConnectionEqualsOneHost splits a synthetic trace between k =
// 2..5 hosts by connection, replays each part as its own host, merges
// their state directories and requires the merged reports to equal the
// replay of the whole trace window by window, key by key (every counter,
// the distinct-flow estimate, every flow with --exact, top flows, elephants,
// jitter, latencies, sketch errors), but for host and hosts, which must
// list the hosts that had frames in the window.
func TestMergeByConnectionEqualsOneHost(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole")
	if err := os.Mkdir(whole, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	hosts := 5
	if testing.Short() {
		hosts = 3 // 4 and 5 hosts in the full run (CI)
	}
	for k := 2; k <= hosts; k++ {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			kdir := filepath.Join(dir, fmt.Sprint(k))
			if err := os.Mkdir(kdir, 0o755); err != nil {
				t.Fatal(err)
			}
			parts, windows := writeSplitTrace(t, kdir, propertyTrace(), k, byConnection(k))
			if want == nil {
				want = parseReports(t, mustRunInProcess(t, append([]string{"replay", "--exact", "--format", "jsonl", "--host", "all", filepath.Join(kdir, "all.pcap")}, mergeRates...)...))
				checkInteresting(t, want)
			}
			dirs, own := splitRun(t, kdir, parts)
			got := parseReports(t, mustRunInProcess(t, append(append([]string{"merge", "--exact", "--format", "jsonl"}, mergeRates...), dirs...)...))
			if len(got) != len(want) {
				t.Fatalf("merge wrote %d reports, the whole trace has %d", len(got), len(want))
			}
			for i := range want {
				start, _ := want[i]["window_start_ns"].(json.Number).Int64()
				var hosts []string
				for j := range k {
					if windows[j][start] {
						hosts = append(hosts, fmt.Sprintf("h%d", j))
					}
				}
				if diff := cmp.Diff(hosts, reportHosts(got[i])); diff != "" {
					t.Errorf("window %d hosts (-want +got):\n%s", i, diff)
				}
				if diff := cmp.Diff(withoutKeys(want[i], "host", "hosts"), withoutKeys(got[i], "host", "hosts")); diff != "" {
					t.Errorf("window %d: merged report differs from the whole trace's (-whole +merged):\n%s", i, diff)
				}
			}
			if k != 3 {
				return
			}
			// Host h2 loses its state of window 1: that window is merged from
			// h0 and h1 alone, and its counters are the sum of theirs.
			lost := filepath.Join(dirs[2], fmt.Sprintf("h2-%s%s", want[1]["window_start_ns"], state.Ext))
			if err := os.Remove(lost); err != nil {
				t.Fatal(err)
			}
			got = parseReports(t, mustRunInProcess(t, append(append([]string{"merge", "--exact", "--format", "jsonl"}, mergeRates...), dirs...)...))
			if diff := cmp.Diff([]string{"h0", "h1"}, reportHosts(got[1])); diff != "" {
				t.Errorf("window 1 without h2: hosts (-want +got):\n%s", diff)
			}
			for _, key := range []string{"packets", "bytes", "roce_packets", "other_packets", "payload_bytes", "cnp", "ecn_ce", "retransmits"} {
				a, _ := own[0][1][key].(json.Number).Int64()
				b, _ := own[1][1][key].(json.Number).Int64()
				if g, _ := got[1][key].(json.Number).Int64(); g != a+b {
					t.Errorf("window 1 without h2: %s %d, want h0's %d + h1's %d", key, g, a, b)
				}
			}
			if diff := cmp.Diff(withoutKeys(want[0], "host", "hosts"), withoutKeys(got[0], "host", "hosts")); diff != "" {
				t.Errorf("window 0 changed when h2 lost window 1 (-whole +merged):\n%s", diff)
			}
		})
	}
}

// checkInteresting fails unless every window of the whole trace has
// elephants, jitter flows, CNPs, retransmits and READ latencies to
// compare: a comparison of empty lists would prove nothing.
func checkInteresting(t *testing.T, rs []map[string]any) {
	t.Helper()
	if len(rs) < 3 {
		t.Fatalf("the whole trace has %d windows, want at least 3", len(rs))
	}
	for i, r := range rs {
		for _, key := range []string{"elephants", "jitter", "top_flows"} {
			if key == "jitter" && i == 0 {
				continue // the first window has no previous one to differ from
			}
			if len(r[key].([]any)) == 0 {
				t.Errorf("window %d of the whole trace has no %s", i, key)
			}
		}
		for _, key := range []string{"cnp", "retransmits", "psn_gaps", "naks"} {
			if r[key] == json.Number("0") {
				t.Errorf("window %d of the whole trace has no %s", i, key)
			}
		}
		if r["read_latency_ns"].(map[string]any)["count"] == json.Number("0") {
			t.Errorf("window %d of the whole trace has no READ latency", i)
		}
	}
}

// Report keys that depend on the order of a flow's packets, and so differ
// when a flow is split between hosts:
//   - retransmits, psn_gaps, out_of_order: PSN tracking compares each
//     request's PSN with the ones before it in the flow;
//   - latencies and read_latency_unmatched: a request and its response
//     must meet on one host;
//   - sqp, and the cnp and cnp_unattributed that attribution by source QP
//     yields: the source QP is learned from the opposite direction;
//   - a flow's opcodes: a flow record names the first 8 opcodes it saw
//     and sums the rest as "other", and which come first depends on the
//     order (the synthetic RC flows use more than 8);
//   - sketch_error: it holds the top-k sketch's recall, and that sketch
//     merges exactly only when each flow is on one host;
//   - events and the lists of flows by CNPs, retransmissions and events:
//     retransmission episodes follow PSNs, CNPs need the source QP, and
//     the activity profiles of a split flow join runs in another order.
var (
	windowOrderDependent = []string{"retransmits", "psn_gaps", "out_of_order", "read_latency_ns", "ack_latency_ns",
		"read_latency_unmatched", "cnp_unattributed", "sketch_error", "events", "events_omitted", "top_cnp", "top_retransmits", "event_flows"}
	flowOrderDependent = []string{"retransmits", "psn_gaps", "out_of_order", "sqp", "sqp_hex", "cnp", "opcodes", "read_latency_sum_ns",
		"ack_latency_sum_ns", "read_latency_count", "ack_latency_count", "read_latency_mean_ns", "ack_latency_mean_ns"}
)

// orderFree returns a report without the keys that depend on per-flow
// order, in its flow lists too.
func orderFree(r map[string]any) map[string]any {
	c := withoutKeys(r, append(windowOrderDependent, "host", "hosts")...)
	for _, list := range []string{"top_flows", "elephants", "jitter", "flows_all"} {
		var fs []any
		for _, f := range c[list].([]any) {
			fs = append(fs, withoutKeys(f.(map[string]any), flowOrderDependent...))
		}
		c[list] = fs
	}
	return c
}

// TestMergeRoundRobinAddsUp deals the frames of a synthetic trace to k = 2
// and 5 hosts in turn, so that every flow is split between hosts, and
// requires the merged reports to agree with the whole trace's on everything
// that does not depend on per-flow order (see windowOrderDependent): every
// window counter (packets, bytes, RoCE and other, opcodes, messages, CNP,
// ECN-CE, FECN, BECN, ACKs, NAKs, PFC ...), the distinct-flow estimate,
// every flow's packets, bytes, payload, ECN-CE, ACKs and NAKs carried, and
// rates, and so the top flows, elephants and jitter flows.
func TestMergeRoundRobinAddsUp(t *testing.T) {
	dir := t.TempDir()
	var want []map[string]any
	for _, k := range []int{2, 5} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			kdir := filepath.Join(dir, fmt.Sprint(k))
			if err := os.Mkdir(kdir, 0o755); err != nil {
				t.Fatal(err)
			}
			parts, _ := writeSplitTrace(t, kdir, propertyTrace(), k, roundRobin(k))
			if want == nil {
				want = parseReports(t, mustRunInProcess(t, append([]string{"replay", "--exact", "--format", "jsonl", "--host", "all", filepath.Join(kdir, "all.pcap")}, mergeRates...)...))
			}
			dirs, _ := splitRun(t, kdir, parts)
			got := parseReports(t, mustRunInProcess(t, append(append([]string{"merge", "--exact", "--format", "jsonl"}, mergeRates...), dirs...)...))
			if len(got) != len(want) {
				t.Fatalf("merge wrote %d reports, the whole trace has %d", len(got), len(want))
			}
			for i := range want {
				if n := len(reportHosts(got[i])); n != k {
					t.Errorf("window %d: %d hosts, want %d", i, n, k)
				}
				if diff := cmp.Diff(orderFree(want[i]), orderFree(got[i])); diff != "" {
					t.Errorf("window %d: merged report differs from the whole trace's (-whole +merged):\n%s", i, diff)
				}
			}
		})
	}
}

// smallTrace writes a small synthetic trace (3 windows) and returns its
// path.
func smallTrace(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "small.pcap")
	mustRunInProcess(t, "gen", "-o", path, "--packets", "20000", "--flows", "200", "--seed", "9")
	return path
}

// engineStates writes the window states of trace, analyzed with cfg, into
// the directory dir: the way to make states with sketch settings the
// command line does not offer.
func engineStates(t *testing.T, dir, trace string, cfg *metrics.Config) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := metrics.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := file.Open([]string{trace}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sw, err := state.NewWriter(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(e.Run(context.Background(), []capture.Source{src}, sw.Write), sw.Close()); err != nil {
		t.Fatal(err)
	}
}

// stateFilesIn returns the state files of dir in name order.
func stateFilesIn(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+state.Ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no state files in %s (%v)", dir, err)
	}
	return files
}

// TestStateOutDirectory checks what replay --state-out DIR leaves: one
// file per window named <host>-<start ns>.rsstate holding exactly that
// window's state, and no temporary file; and that --state-out FILE holds
// the same states in order.
func TestStateOutDirectory(t *testing.T) {
	dir := t.TempDir()
	trace := smallTrace(t, dir)
	states := filepath.Join(dir, "states")
	if err := os.Mkdir(states, 0o755); err != nil {
		t.Fatal(err)
	}
	jsonl := mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "cap-1", "--state-out", states, trace)
	single := filepath.Join(dir, "all.states")
	mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "cap-1", "--state-out", single, trace)
	var want []string
	for _, r := range parseReports(t, jsonl) {
		want = append(want, fmt.Sprintf("cap-1-%s%s", r["window_start_ns"], state.Ext))
	}
	ents, err := os.ReadDir(states)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, de := range ents {
		got = append(got, de.Name())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("state directory (-want +got):\n%s", diff)
	}
	f, err := os.Open(single)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all := state.NewReader(f, single, nil)
	for _, name := range got {
		data, err := os.ReadFile(filepath.Join(states, name))
		if err != nil {
			t.Fatal(err)
		}
		var w, fromFile metrics.Window
		sr := state.NewReader(bytes.NewReader(data), name, nil)
		if err := sr.Next(&w); err != nil {
			t.Fatal(err)
		}
		if err := sr.Next(new(metrics.Window)); err != io.EOF {
			t.Errorf("%s: second state: %v, want io.EOF", name, err)
		}
		if got := fmt.Sprintf("cap-1-%d%s", w.Start, state.Ext); got != name || !slices.Equal(w.Hosts, []string{"cap-1"}) {
			t.Errorf("%s holds window %s of hosts %q", name, got, w.Hosts)
		}
		if err := all.Next(&fromFile); err != nil {
			t.Fatal(err)
		}
		a, _ := w.AppendBinary(nil)
		b, _ := fromFile.AppendBinary(nil)
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from the same window in the single state file", name)
		}
	}
	if err := all.Next(new(metrics.Window)); err != io.EOF {
		t.Errorf("single state file: state after the last window: %v, want io.EOF", err)
	}
}

// TestMergeSegments replays two traces of the same two seconds one after
// the other (--concat): the clock steps back between them, and the second
// trace's windows come again, in segment 1. With --state-out DIR each
// segment's windows go to their own files (none overwritten), and merge
// combines a host's segments into one report per window. The reference is
// a replay of both traces merged by frame time, in one segment: the
// merged counters must be its own (the jumpConfirm frames that confirmed
// the step count in segment 1, none late), but for the step back counted
// in time_jumps.
func TestMergeSegments(t *testing.T) {
	dir := t.TempDir()
	var traces []string
	for i, seed := range []string{"3", "4"} {
		trace := filepath.Join(dir, fmt.Sprintf("t%d.pcap", i))
		mustRunInProcess(t, "gen", "-o", trace, "--packets", "20000", "--flows", "300", "--seed", seed)
		traces = append(traces, trace)
	}
	states := filepath.Join(dir, "states") + "/"
	code, out, stderr := runInProcess(context.Background(), append([]string{"replay", "--concat", "--format", "jsonl", "--host", "h", "--state-out", states}, traces...)...)
	if want := "rocescope: the frames' clock stepped back; windows start again at 2023-11-14T22:13:20Z (segment 1, counted in time_jumps)\n"; code != 0 || !strings.HasPrefix(stderr, want) {
		t.Fatalf("replay --concat: exit status %d, stderr %q; want 0 and %q, then the run's line", code, stderr, want)
	} else if before, _ := lastWords(t, stderr); before != want {
		t.Fatalf("replay --concat: stderr %q; want %q, then the run's line", stderr, want)
	}
	concat := parseReports(t, out)
	var files []string
	for _, r := range concat {
		seg := ""
		if len(files) >= len(concat)/2 {
			seg = ".s1"
		}
		files = append(files, fmt.Sprintf("h-%s%s%s", r["window_start_ns"], seg, state.Ext))
	}
	if got := stateFilesIn(t, states); len(got) != len(files) || len(concat) != 6 {
		t.Fatalf("%d windows in %d files %q, want 6 and %q", len(concat), len(got), got, files)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(states, f)); err != nil {
			t.Error(err)
		}
	}
	merged := parseReports(t, mustRunInProcess(t, "merge", "--format", "jsonl", states))
	whole := parseReports(t, mustRunInProcess(t, append([]string{"replay", "--format", "jsonl", "--host", "h"}, traces...)...))
	if len(merged) != 3 || len(whole) != 3 {
		t.Fatalf("%d merged windows, %d of the whole replay; want 3", len(merged), len(whole))
	}
	num := func(r map[string]any, k string) int64 {
		n, err := r[k].(json.Number).Int64()
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return n
	}
	jumps := int64(0)
	for i := range merged {
		m, w := merged[i], whole[i]
		if m["window_start_ns"] != w["window_start_ns"] {
			t.Errorf("window %d starts at %v merged, %v replayed", i, m["window_start_ns"], w["window_start_ns"])
		}
		for _, k := range []string{"packets", "bytes", "roce_packets", "acks", "flows_tracked", "late_packets", "read_requests"} {
			if m[k] != w[k] {
				t.Errorf("window %v: %s %v merged, %v replayed", m["window_start_ns"], k, m[k], w[k])
			}
		}
		jumps += num(m, "time_jumps") - num(w, "time_jumps")
	}
	if jumps != 1 {
		t.Errorf("%d time jumps more merged than replayed, want the step back: 1", jumps)
	}

	// merge --follow has reported segment 0's windows when segment 1's
	// states arrive: it skips them, saying why.
	followed := filepath.Join(dir, "followed")
	if err := os.Mkdir(followed, 0o755); err != nil {
		t.Fatal(err)
	}
	var seg0, seg1 []string
	for _, f := range files {
		if strings.Contains(f, ".s1") {
			seg1 = append(seg1, filepath.Join(states, f))
		} else {
			seg0 = append(seg0, filepath.Join(states, f))
		}
	}
	deliver(t, followed, seg0...)
	f := startFollow(t, "merge", "--follow", "--poll", "10ms", "--hosts", "h", "--format", "jsonl", followed)
	waitFor(t, "segment 0's windows", func() bool { return len(f.stdout.lines()) == 3 })
	deliver(t, followed, seg1...)
	waitFor(t, "the warnings about segment 1", func() bool {
		return strings.Count(f.stderr.String(), "it is of segment 1, after its capture's clock stepped back") == 3
	})
	if code := f.stop(); code != 0 || len(f.stdout.lines()) != 3 {
		t.Errorf("merge --follow: exit status %d, %d reports; want 0 and 3", code, len(f.stdout.lines()))
	}
}

// TestMergeRejectsBadInput gives merge damaged states, states that cannot
// be merged, and states delivered twice, and requires exit status 1, an
// error that names the offending file and says what is wrong, and no
// report at all.
func TestMergeRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	trace := smallTrace(t, dir)
	good := filepath.Join(dir, "a")
	if err := os.Mkdir(good, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "a", "--state-out", good, trace)
	goodFiles := stateFilesIn(t, good)
	first, err := os.ReadFile(goodFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(dir, "a.states")
	mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "a", "--state-out", single, trace)

	// write puts data into a new file of a directory that sorts after
	// good, so that the good states are read first.
	n := 0
	write := func(data []byte) string {
		n++
		p := filepath.Join(dir, "z", fmt.Sprintf("bad%d%s", n, state.Ext))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	edit := func(f func(b []byte) []byte) string { return write(f(bytes.Clone(first))) }
	trailing := edit(func(b []byte) []byte { return append(b, 0, 0) })
	frame := binary.BigEndian.Uint32(first)
	copied := filepath.Join(dir, "z", "copy", filepath.Base(goodFiles[1]))
	if err := os.MkdirAll(filepath.Dir(copied), 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(goodFiles[1])
	if err := os.WriteFile(copied, data, 0o644); err != nil {
		t.Fatal(err)
	}
	engineStates(t, filepath.Join(dir, "z", "cmwidth"), trace, &metrics.Config{Host: "b", Workers: 1, CMWidth: 1 << 12})
	engineStates(t, filepath.Join(dir, "z", "cmdepth"), trace, &metrics.Config{Host: "b", Workers: 1, CMDepth: 3})
	engineStates(t, filepath.Join(dir, "z", "seed"), trace, &metrics.Config{Host: "b", Workers: 1, Seed: 99})
	engineStates(t, filepath.Join(dir, "z", "distinct"), trace, &metrics.Config{Host: "b", Workers: 1, DistinctBits: 1 << 12})
	engineStates(t, filepath.Join(dir, "z", "topk"), trace, &metrics.Config{Host: "b", Workers: 1, TopKSize: 64})
	if err := os.MkdirAll(filepath.Join(dir, "z", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	halfWindow := filepath.Join(dir, "z", "window")
	if err := os.MkdirAll(halfWindow, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "b", "--window", "500ms", "--state-out", halfWindow, trace)

	engineStates(t, filepath.Join(dir, "z", "big"), trace, &metrics.Config{Host: "b", Workers: 1, CMWidth: 1 << 19})
	fifo := filepath.Join(dir, "z", "fifo", "x"+state.Ext)
	if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	fifoErr := testfifo.Make(fifo)
	second, err := os.ReadFile(goodFiles[1])
	if err != nil {
		t.Fatal(err)
	}
	reversed := write(append(bytes.Clone(second), first...))
	size := func(dir string) int64 { // the sketch bytes of dir's states
		var w metrics.Window
		sr, err := state.Open(context.Background(), stateFilesIn(t, dir)[0], 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sr.Close()
		if err := sr.Next(&w); err != nil {
			t.Fatal(err)
		}
		return int64(w.Distinct.MemoryBytes() + w.FlowBytes.MemoryBytes() + w.FlowPackets.MemoryBytes() + w.Top.MemoryBytes() + w.ReadLatency.MemoryBytes() + w.AckLatency.MemoryBytes())
	}
	limit := 4 * size(good)

	for _, tc := range []struct {
		name    string
		args    []string // the states to merge; default: the good directory, then file
		flags   []string
		file    string // the file the error must name
		says    string // what it must say
		reports int    // of the windows before the one at fault
	}{
		{name: "truncated", file: edit(func(b []byte) []byte { return b[:len(b)-100] }), says: fmt.Sprintf("state at offset 0: cut after %d of %d bytes: unexpected EOF: invalid window state", frame+4-100, frame+4)},
		{name: "length cut", file: write(first[:3]), says: "state at offset 0: cut after 3 bytes: unexpected EOF: invalid window state"},
		{name: "byte flipped", file: edit(func(b []byte) []byte { b[len(b)/2] ^= 1; return b }), says: "state at offset 0: checksum"},
		{name: "checksum flipped", file: edit(func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }), says: "state at offset 0: checksum"},
		{name: "length too large", file: edit(func(b []byte) []byte { binary.BigEndian.PutUint32(b, 1<<31+1); return b }),
			says: "state at offset 0: length 2147483649 is not that of a state (17 to 2147483648 bytes): invalid window state"},
		{name: "length short by one", file: edit(func(b []byte) []byte { binary.BigEndian.PutUint32(b, frame-1); return b }), says: "checksum"},
		{name: "trailing bytes", args: []string{trailing}, file: trailing, says: fmt.Sprintf("state at offset %d: cut after 2 bytes: unexpected EOF: invalid window state", 4+frame)},
		{name: "version", file: edit(func(b []byte) []byte { b[4+8] = 9; return b }), says: "state at offset 0: state version 9, this rocescope reads versions 2 to 4: invalid window state"},
		{name: "not a state", file: write([]byte("\x00\x00\x00\x10GET / HTTP/1.1\r\n")), says: "rsstate: not a rocescope state file: invalid window state"},
		{name: "not a state, long", file: write(bytes.Repeat([]byte("x"), 1<<20)), says: "rsstate: not a rocescope state file: invalid window state"},
		{name: "empty", file: write(nil), says: "no window state in the file: invalid window state"},
		{name: "out of order", args: []string{reversed}, file: reversed,
			says: fmt.Sprintf("state at offset %d: window %s after window %s: states out of window order (after a clock step back", len(second), strings.TrimSuffix(filepath.Base(goodFiles[0])[2:], state.Ext), strings.TrimSuffix(filepath.Base(goodFiles[1])[2:], state.Ext))},
		{name: "fifo", args: []string{filepath.Dir(fifo)}, file: fifo, says: "not a regular file (p---------)"},
		{name: "sketches too large", file: stateFilesIn(t, filepath.Join(dir, "z", "big"))[0], says: fmt.Sprintf("the limit is %d: state too large: invalid window state (see --max-state-bytes)", limit)},
		{name: "sketches above --max-state-bytes", flags: []string{"--max-state-bytes", "1000"}, args: []string{good}, file: goodFiles[0], says: "the limit is 1000: state too large"},
		{name: "count-min width", file: stateFilesIn(t, filepath.Join(dir, "z", "cmwidth"))[0], says: "sketch configuration"},
		{name: "count-min depth", file: stateFilesIn(t, filepath.Join(dir, "z", "cmdepth"))[0], says: "sketch configuration"},
		{name: "seed", file: stateFilesIn(t, filepath.Join(dir, "z", "seed"))[0], says: "sketch configuration"},
		{name: "distinct bits", file: stateFilesIn(t, filepath.Join(dir, "z", "distinct"))[0], says: "sketch configuration"},
		{name: "top-k size", file: stateFilesIn(t, filepath.Join(dir, "z", "topk"))[0], says: "sketch configuration"},
		{name: "window length", file: stateFilesIn(t, halfWindow)[0], says: "length 500ms differs from 1s in " + goodFiles[0]},
		{name: "same window twice", file: copied, says: "host a already delivered it in " + goodFiles[1], reports: 1},
		{name: "same host as file and directory", args: []string{good, single}, file: goodFiles[0], says: "host a already delivered it in " + single},
		{name: "missing", file: filepath.Join(dir, "nothing-here"), says: "no such file"},
		{name: "directory without states", args: []string{filepath.Join(dir, "z", "empty")}, file: filepath.Join(dir, "z", "empty"), says: "no .rsstate files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.file == fifo && fifoErr != nil {
				t.Skipf("mkfifo: %v", fifoErr)
			}
			states := tc.args
			if states == nil {
				states = []string{good, tc.file}
			}
			args := slices.Concat([]string{"merge", "--format", "jsonl"}, tc.flags, states)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			code, out, errOut := runInProcess(ctx, args...)
			if code != 1 || !strings.Contains(errOut, tc.file) || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit status %d, stderr %q; want 1 and an error naming %s that says %q", code, errOut, tc.file, tc.says)
			}
			if n := strings.Count(out, "\n"); n != tc.reports {
				t.Errorf("a failed merge wrote %d reports, want %d (those before the window at fault):\n%.300s", n, tc.reports, out)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer that a command running in a goroutine can
// write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines returns the complete lines written so far.
func (s *syncBuffer) lines() []string {
	text := s.String()
	return strings.SplitAfter(text, "\n")[:strings.Count(text, "\n")]
}

// onFirstWrite is a syncBuffer that calls do when it is first written
// to.
type onFirstWrite struct {
	syncBuffer
	once sync.Once
	do   func()
}

func (o *onFirstWrite) Write(p []byte) (int, error) {
	o.once.Do(o.do)
	return o.syncBuffer.Write(p)
}

// follower is a merge --follow running in a goroutine.
type follower struct {
	stdout, stderr syncBuffer
	cancel         context.CancelFunc
	done           chan int
}

// startFollow runs rocescope with args until stop is called.
func startFollow(t *testing.T, args ...string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan int, 1)}
	go func() {
		f.done <- run(ctx, &env{stdin: strings.NewReader(""), stdout: &f.stdout, stderr: &f.stderr}, args)
	}()
	t.Cleanup(func() {
		cancel()
		<-f.done
	})
	return f
}

// stop cancels the merge as an interrupt would and returns its exit
// status.
func (f *follower) stop() int {
	f.cancel()
	code := <-f.done
	f.done <- code // for the cleanup
	return code
}

// waitFor polls cond until it holds, and fails the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, what, 30*time.Second, cond)
}

// waitUntil polls cond until it holds, and fails the test after d.
func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// deliver puts state files into dir as StateWriter does: written under a
// temporary name, then renamed, all of them at once.
func deliver(t *testing.T, dir string, states ...string) {
	t.Helper()
	for _, state := range states {
		data, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(state)+".tmp"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, state := range states {
		dst := filepath.Join(dir, filepath.Base(state))
		if err := os.Rename(dst+".tmp", dst); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMergeFollow runs merge --follow on a directory while two hosts'
// states arrive in it, and checks when each window is emitted: once both
// hosts of --hosts delivered it (or every host seen, without --hosts), or
// after --timeout with the hosts that did; a state arriving after its
// window was emitted is skipped with a warning; cancelling reads the
// directory once more, emits what is pending and exits with 0; a replay
// writing its states into the followed directory while merge polls it
// every millisecond is never read half written. In each case the output
// must equal what a one-shot merge of the same states writes.
func TestMergeFollow(t *testing.T) {
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, &synth.Config{Seed: 3, Packets: 20000, Flows: 200}, 2, byConnection(2))
	var files [2][]string // the hosts' state files, one per window
	for i, part := range parts {
		states := filepath.Join(dir, fmt.Sprintf("src%d", i))
		if err := os.Mkdir(states, 0o755); err != nil {
			t.Fatal(err)
		}
		mustRunInProcess(t, append([]string{"replay", "--format", "jsonl", "--host", []string{"hA", "hB"}[i], "--state-out", states, part}, mergeRates...)...)
		if files[i] = stateFilesIn(t, states); len(files[i]) != 3 {
			t.Fatalf("host %d has %d windows, want 3", i, len(files[i]))
		}
	}
	a, b := files[0], files[1]
	n := 0
	newDir := func(t *testing.T) string {
		n++
		d := filepath.Join(dir, fmt.Sprintf("follow%d", n))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	// once returns the reports of a one-shot merge of states that expects
	// hosts (a comma-separated list, or none).
	once := func(t *testing.T, hosts string, states ...string) []string {
		d := newDir(t)
		deliver(t, d, states...)
		args := append([]string{"merge", "--format", "jsonl"}, mergeRates...)
		if hosts != "" {
			args = append(args, "--hosts", hosts)
		}
		out := mustRunInProcess(t, append(args, d)...)
		return strings.SplitAfter(out, "\n")[:strings.Count(out, "\n")]
	}
	follow := func(t *testing.T, d string, flags ...string) *follower {
		return startFollow(t, append(append(append([]string{"merge", "--follow", "--poll", "10ms", "--format", "jsonl"}, mergeRates...), flags...), d)...)
	}
	quiet := func(t *testing.T, f *follower, lines int) {
		t.Helper()
		time.Sleep(200 * time.Millisecond) // 20 polls
		if got := len(f.stdout.lines()); got != lines {
			t.Fatalf("%d reports, want %d:\n%s", got, lines, f.stdout.String())
		}
	}

	t.Run("complete", func(t *testing.T) {
		d := newDir(t)
		f := follow(t, d, "--hosts", "hA,hB", "--timeout", "1h")
		deliver(t, d, a[0])
		deliver(t, d, a[1])
		deliver(t, d, b[1])
		quiet(t, f, 0) // window 1 is complete, but window 0 goes first
		deliver(t, d, b[0])
		waitFor(t, "windows 0 and 1", func() bool { return len(f.stdout.lines()) == 2 })
		deliver(t, d, a[2])
		quiet(t, f, 2)
		if code := f.stop(); code != 0 {
			t.Fatalf("exit status %d after cancel: %s", code, f.stderr.String())
		}
		want := once(t, "hA,hB", a[0], b[0], a[1], b[1], a[2])
		if diff := cmp.Diff(want, f.stdout.lines()); diff != "" {
			t.Errorf("reports (-one-shot merge +follow):\n%s", diff)
		}
		if lines := f.stdout.lines(); len(lines) != 3 {
			t.Fatalf("%d reports, want 3", len(lines))
		}
		if hs := reportHosts(parseReports(t, f.stdout.lines()[2])[0]); !slices.Equal(hs, []string{"hA"}) {
			t.Errorf("window 2 flushed on cancel lists hosts %q, want [hA]", hs)
		}
	})

	// An interrupt that comes while merge writes a window, after its read
	// of the directory, still has it read the directory a last time, and
	// emit what arrived and what is pending.
	t.Run("interrupted while writing", func(t *testing.T) {
		d := newDir(t)
		deliver(t, d, a[0])
		deliver(t, d, b[0])
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stdout := &onFirstWrite{do: func() {
			deliver(t, d, a[1])
			cancel()
		}}
		var stderr syncBuffer
		args := append(append([]string{"merge", "--follow", "--poll", "1h", "--format", "jsonl", "--hosts", "hA,hB", "--timeout", "1h"}, mergeRates...), d)
		if code := run(ctx, &env{stdin: strings.NewReader(""), stdout: stdout, stderr: &stderr}, args); code != 0 {
			t.Fatalf("exit status %d: %s", code, stderr.String())
		}
		if diff := cmp.Diff(once(t, "hA,hB", a[0], b[0], a[1]), stdout.lines()); diff != "" {
			t.Errorf("reports (-one-shot merge +follow):\n%s", diff)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		d := newDir(t)
		f := follow(t, d, "--hosts", "hA,hB", "--timeout", "1s")
		deliver(t, d, a[0])
		waitFor(t, "window 0 after the timeout", func() bool { return len(f.stdout.lines()) == 1 })
		deliver(t, d, b[0])
		late := filepath.Join(d, filepath.Base(b[0]))
		waitFor(t, "the warning about the late state", func() bool {
			return strings.Contains(f.stderr.String(), late) && strings.Contains(f.stderr.String(), "state skipped")
		})
		deliver(t, d, a[1], b[1]) // together: window 1 must not time out
		waitFor(t, "window 1", func() bool { return len(f.stdout.lines()) == 2 })
		if code := f.stop(); code != 0 {
			t.Fatalf("exit status %d after cancel: %s", code, f.stderr.String())
		}
		want := once(t, "hA,hB", a[0], a[1], b[1])
		if diff := cmp.Diff(want, f.stdout.lines()); diff != "" {
			t.Errorf("reports (-one-shot merge +follow):\n%s", diff)
		}
	})

	t.Run("while replay writes", func(t *testing.T) {
		d := newDir(t)
		f := follow(t, d, "--hosts", "hA", "--timeout", "1h", "--poll", "1ms")
		mustRunInProcess(t, append([]string{"replay", "--format", "jsonl", "--host", "hA", "--state-out", d, parts[0]}, mergeRates...)...)
		waitFor(t, "3 windows", func() bool { return len(f.stdout.lines()) == 3 })
		if code := f.stop(); code != 0 {
			t.Fatalf("exit status %d after cancel: %s", code, f.stderr.String())
		}
		if diff := cmp.Diff(once(t, "hA", a...), f.stdout.lines()); diff != "" {
			t.Errorf("reports (-one-shot merge +follow):\n%s", diff)
		}
	})

	t.Run("written in place", func(t *testing.T) {
		d := newDir(t)
		f := follow(t, d, "--hosts", "hA,hB", "--timeout", "1h")
		deliver(t, d, a[0])
		// b[0] is written in place, in two parts with polls between
		// them; a FIFO and a dangling symlink named like state files lie
		// beside it.
		data, err := os.ReadFile(b[0])
		if err != nil {
			t.Fatal(err)
		}
		inPlace := filepath.Join(d, filepath.Base(b[0]))
		if err := os.WriteFile(inPlace, data[:len(data)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		fifo := filepath.Join(d, "pipe"+state.Ext)
		if err := testfifo.Make(fifo); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		if err := os.Symlink(filepath.Join(d, "gone"), filepath.Join(d, "dangling"+state.Ext)); err != nil {
			t.Fatal(err)
		}
		quiet(t, f, 0)
		w, err := os.OpenFile(inPlace, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data[len(data)/2:]); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "window 0", func() bool { return len(f.stdout.lines()) == 1 })
		if code := f.stop(); code != 0 {
			t.Fatalf("exit status %d after cancel: %s", code, f.stderr.String())
		}
		if diff := cmp.Diff(once(t, "hA,hB", a[0], b[0]), f.stdout.lines()); diff != "" {
			t.Errorf("reports (-one-shot merge +follow):\n%s", diff)
		}
		want := fmt.Sprintf("rocescope merge: state: %s: not a regular file (p---------); skipped\n"+
			"rocescope merge: 1 windows reported; states skipped: 1 not readable or not mergeable\n", fifo)
		if got, _ := lastWords(t, f.stderr.String()); got != want {
			t.Errorf("stderr %q, want %q", got, want)
		}
	})

	t.Run("hosts seen", func(t *testing.T) {
		d := newDir(t)
		deliver(t, d, a[0])
		deliver(t, d, b[0])
		deliver(t, d, a[1])
		f := follow(t, d, "--timeout", "1h")
		waitFor(t, "window 0", func() bool { return len(f.stdout.lines()) == 1 })
		quiet(t, f, 1) // hB, seen in window 0, has not delivered window 1
		deliver(t, d, b[1])
		waitFor(t, "window 1", func() bool { return len(f.stdout.lines()) == 2 })
		if code := f.stop(); code != 0 {
			t.Fatalf("exit status %d after cancel: %s", code, f.stderr.String())
		}
		want := once(t, "", a[0], b[0], a[1], b[1])
		if diff := cmp.Diff(want, f.stdout.lines()); diff != "" {
			t.Errorf("reports (-one-shot merge +follow):\n%s", diff)
		}
	})
}

// TestMergeWarnsAboutIgnoredFlags gives merge report flags that shape the
// analysis or outputs merge does not write: each draws a warning, and the
// reports are those of a merge without them.
func TestMergeWarnsAboutIgnoredFlags(t *testing.T) {
	dir := t.TempDir()
	trace := smallTrace(t, dir)
	states := filepath.Join(dir, "states")
	if err := os.Mkdir(states, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "a", "--state-out", states, trace)
	want := mustRunInProcess(t, "merge", "--format", "jsonl", states)
	code, out, errOut := runInProcess(context.Background(), "merge", "--format", "jsonl", "--window", "2s", "--workers", "3",
		"--state-out", filepath.Join(dir, "nowhere"), states)
	if code != 0 || out != want {
		t.Fatalf("exit status %d (stderr %q); reports equal to a plain merge's: %v", code, errOut, out == want)
	}
	for _, flag := range []string{"--window", "--workers", "--state-out"} {
		if !strings.Contains(errOut, "rocescope merge: "+flag+" is ignored") {
			t.Errorf("no warning about %s in %q", flag, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nowhere")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("merge wrote --state-out: %v", err)
	}
}

// TestHostChecked: replay and capture refuse a --host that cannot name
// reports and state files as a usage error before reading any input, and
// a --state-out directory whose file names the host makes too long fails
// before the run, with no report written.
func TestHostChecked(t *testing.T) {
	dir := t.TempDir()
	trace := smallTrace(t, dir)
	states := filepath.Join(dir, "states")
	long := strings.Repeat("h", 300)
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"replay", "--host", long, "--state-out", states, trace}, 2, "--host: host name of 300 bytes, want at most 128"},
		{[]string{"capture", "-i", "no-such-if0", "--host", long, "--state-out", states}, 2, "--host: host name of 300 bytes, want at most 128"},
		{[]string{"replay", "--host", "cap 1", trace}, 2, `--host: host "cap 1": want printable characters without spaces or commas`},
		{[]string{"replay", "--host", "cap\n1", trace}, 2, `--host: host "cap\n1": want printable characters without spaces or commas`},
		{[]string{"replay", "--host", "cap\xff", trace}, 2, `--host: host "cap\xff": want printable characters without spaces or commas`},
		{[]string{"replay", "--host", "cap,1", trace}, 2, `--host: host "cap,1": want printable characters without spaces or commas`},
		{[]string{"replay", "--host", "=HYPERLINK(\"http://x\")", trace}, 2, `--host: host "=HYPERLINK(\"http://x\")": want a name that does not begin with =, +, - or @`},
		{[]string{"merge", "--hosts", "a,-b", trace}, 2, `--hosts: host "-b": want a name that does not begin with =, +, - or @`},
		// 128 bytes of '%' escape to a 384-byte file name.
		{[]string{"replay", "--host", strings.Repeat("%", 128), "--state-out", states + "/", trace}, 1, "file name too long"},
	} {
		code, out, errOut := runInProcess(context.Background(), tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) || out != "" {
			t.Errorf("%.60q: exit status %d, stderr %q, %d bytes of reports; want %d, saying %q, no report", tc.args, code, errOut, len(out), tc.code, tc.says)
		}
	}
	if ents, _ := os.ReadDir(states); len(ents) != 0 {
		t.Errorf("%d files in the state directory, want none", len(ents))
	}
}

// TestMergeMaxStateBytesFlag: --max-state-bytes takes a positive number of
// bytes; 0 is its default (4 times the local window's sketches), not a
// value to give.
func TestMergeMaxStateBytesFlag(t *testing.T) {
	for _, v := range []string{"0", "-1"} {
		code, _, errOut := runInProcess(context.Background(), "merge", "--max-state-bytes", v, t.TempDir())
		if want := fmt.Sprintf("--max-state-bytes %s: want more than 0", v); code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("--max-state-bytes %s: exit status %d, stderr %q; want 2 saying %q", v, code, errOut, want)
		}
	}
}
