package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/internal/freeport"
	"github.com/rocescope/rocescope/metrics/state"
	"github.com/rocescope/rocescope/metrics/state/kafka"
)

// startKafka starts an in-process Kafka cluster of brokers on 127.0.0.1,
// with the topic in partitions, its largest message maxMessage bytes (0
// for kfake's default), stopped when the test ends, and returns it with
// the kafka:// URL of the topic.
func startKafka(t *testing.T, brokers int, partitions int32, topic string, maxMessage int) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var configs map[string]string
	if maxMessage > 0 {
		configs = map[string]string{"max.message.bytes": fmt.Sprint(maxMessage)}
	}
	if err := c.CreateTopic(topic, partitions, configs); err != nil {
		t.Fatal(err)
	}
	return c, kafka.Scheme + strings.Join(c.ListenAddrs(), ",") + "/" + topic
}

// topicRecords returns the number of records in the topic.
func topicRecords(t *testing.T, c *kfake.Cluster, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// committed returns the offsets group has committed in topic, summed over
// its partitions: once it equals topicRecords, every record is merged and
// its report written.
func committed(t *testing.T, c *kfake.Cluster, topic, group string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if err != nil {
		return -1 // not yet
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			n += o.At
		}
	})
	return n
}

// kafkaTrace is the trace of the Kafka tests: 8 windows, so that a topic
// of 4 partitions spreads them and a merger can be stopped between two.
func kafkaTrace() *synth.Config {
	return &synth.Config{Seed: 7, Packets: 80_000, Flows: 1000, Duration: 8 * time.Second}
}

// reportLines splits JSON lines into a map by window start.
func reportLines(t *testing.T, out string) map[string]string {
	t.Helper()
	m := make(map[string]string)
	for _, l := range strings.SplitAfter(out, "\n") {
		if l == "" {
			continue
		}
		var r struct {
			Start json.Number `json:"window_start_ns"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("report %q: %v", l, err)
		}
		if _, dup := m[r.Start.String()]; dup {
			t.Errorf("window %s reported twice", r.Start)
		}
		m[r.Start.String()] = l
	}
	return m
}

// TestKafkaMergeEqualsFiles splits a trace over three hosts, replays each
// with its states going to a Kafka topic of 4 partitions on 3 brokers
// whose messages may not exceed 48 KiB (so that the producers must learn
// that and split every state into parts), and
// requires `merge kafka://...` to write byte for byte what merging the same
// hosts' state files writes, and what one host replaying the whole trace
// writes but for host and hosts; a second merge of the group must find
// nothing left to report.
func TestKafkaMergeEqualsFiles(t *testing.T) {
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, kafkaTrace(), 3, byConnection(3))
	dirs, _ := splitRun(t, dir, parts)
	// The hosts replay one after another, each a trace of 8 windows: with
	// --hosts, a window waits for all three while the merge reads the
	// backlog, up to --timeout (10 windows) past it.
	hosts := []string{"--hosts", "h0,h1,h2"}
	want := mustRunInProcess(t, slices.Concat([]string{"merge", "--exact", "--format", "jsonl"}, hosts, mergeRates, dirs)...)
	windows := strings.Count(want, "\n")
	if windows != 8 {
		t.Fatalf("file merge wrote %d windows, want 8", windows)
	}

	c, url := startKafka(t, 3, 4, "states", 48<<10)
	for i, part := range parts {
		args := append([]string{"replay", "--exact", "--workers", "2", "--format", "jsonl", "--host", fmt.Sprintf("h%d", i), "--state-out", url}, mergeRates...)
		mustRunInProcess(t, append(args, part)...)
	}
	if n := topicRecords(t, c, "states"); n <= int64(3*windows) {
		t.Fatalf("%d records for %d windows of 3 hosts: the states were not split", n, windows)
	}
	// --max-state-bytes bounds the states of a topic as those of files.
	code, _, errOut := runInProcess(context.Background(), "merge", "--group", "bounded", "--max-state-bytes", "1000", url)
	if want := "the limit is 1000: state too large: invalid window state (see --max-state-bytes)"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("merge --max-state-bytes 1000 of the topic: exit status %d, stderr %q; want 1 saying %q", code, errOut, want)
	}
	got := mustRunInProcess(t, slices.Concat([]string{"merge", "--exact", "--format", "jsonl"}, hosts, mergeRates, []string{url})...)
	if got != want {
		t.Errorf("merge of the topic differs from the merge of the files (-files +kafka):\n%s", cmp.Diff(want, got))
	}
	whole := parseReports(t, mustRunInProcess(t, append([]string{"replay", "--exact", "--format", "jsonl", "--host", "all", filepath.Join(dir, "all.pcap")}, mergeRates...)...))
	merged := parseReports(t, got)
	if len(merged) != len(whole) {
		t.Fatalf("merge of the topic wrote %d reports, the whole trace has %d", len(merged), len(whole))
	}
	for i := range whole {
		if diff := cmp.Diff(withoutKeys(whole[i], "host", "hosts"), withoutKeys(merged[i], "host", "hosts")); diff != "" {
			t.Errorf("window %d: merge of the topic differs from one host replaying the whole trace (-whole +kafka):\n%s", i, diff)
		}
	}
	if again := mustRunInProcess(t, slices.Concat([]string{"merge", "--exact", "--format", "jsonl"}, hosts, mergeRates, []string{url})...); again != "" {
		t.Errorf("a second merge of the group reported again:\n%s", again)
	}
}

// produceStates writes the states of the windows in starts, of the hosts
// h<i> for i in hosts (whose state directory is dirs[i]), to the topic, as
// capture hosts would: one Producer per host, closed (flushed) before it
// returns.
func produceStates(t *testing.T, url string, dirs []string, hosts []int, starts []string) {
	t.Helper()
	target, err := kafka.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range hosts {
		dir, host := dirs[i], fmt.Sprintf("h%d", i)
		p, err := kafka.NewProducer(target, &kafka.ProducerConfig{Host: host})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range starts {
			path := filepath.Join(dir, host+"-"+s+state.Ext)
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				continue // the host had no frames in the window
			}
			if err := p.Write(readState(t, path)); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKafkaMergeGroupRestart runs two mergers in one consumer group with
// --follow while the three hosts' states arrive; one merger is stopped
// while windows wait for a host, the last host's states arrive, and the
// merger is started again. Every window must be reported exactly once,
// by one of the mergers, and equal the file merge's report byte for byte
// but for what depends on the previous window (the jitter list, each
// flow's prev_rate_bps and jitter flag) when the merger that reported it did not report the
// window just before.
func TestKafkaMergeGroupRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("two mergers and a restart take seconds: not with -short (CI runs it)")
	}
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, kafkaTrace(), 3, byConnection(3))
	dirs, _ := splitRun(t, dir, parts)
	want := reportLines(t, mustRunInProcess(t, append(append([]string{"merge", "--exact", "--format", "jsonl"}, mergeRates...), dirs...)...))
	starts := slices.Sorted(maps.Keys(want))
	if len(starts) != 8 {
		t.Fatalf("%d windows, want 8", len(starts))
	}
	cluster, url := startKafka(t, 3, 4, "fleet", 0)
	url += "?max-record-bytes=32768"
	stable := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A cooperative rebalance takes two rounds: the group is stable
		// after the first, with the partitions to move unassigned, so
		// wait for each merger to own two of the four.
		if _, err := cluster.WaitGroupInfo(ctx, "fleet-mergers", func(g *kfake.GroupInfo) bool {
			if g == nil || g.State != "Stable" || len(g.Members) != 2 {
				return false
			}
			for i := range g.Members {
				if g.Members[i].NumAssigned() != 2 {
					return false
				}
			}
			return true
		}); err != nil {
			t.Fatalf("the group of two mergers does not settle with two partitions each: %v", err)
		}
	}
	merge := func() *follower {
		return startFollow(t, append(append([]string{"merge", "--exact", "--format", "jsonl", "--follow", "--poll", "20ms", "--wait", "1m",
			"--hosts", "h0,h1,h2", "--group", "fleet-mergers"}, mergeRates...), url)...)
	}
	var stopped []*follower
	reported := func(fs ...*follower) int {
		n := 0
		for _, f := range append(fs, stopped...) {
			n += len(f.stdout.lines())
		}
		return n
	}
	a, b := merge(), merge()
	stable()
	produceStates(t, url, dirs, []int{0, 1, 2}, starts[:4])
	waitFor(t, "the first 4 windows", func() bool { return reported(a, b) == 4 })
	if len(a.stdout.lines()) == 0 || len(b.stdout.lines()) == 0 {
		t.Errorf("mergers a and b reported %d and %d windows: they do not share the partitions", len(a.stdout.lines()), len(b.stdout.lines()))
	}

	// Windows 4..7 from h0 and h1 only: they wait for h2. Merger a stops.
	produceStates(t, url, dirs, []int{0, 1}, starts[4:])
	time.Sleep(200 * time.Millisecond)
	if n := reported(a, b); n != 4 {
		t.Fatalf("%d windows reported before h2 delivered windows 4..7, want 4", n)
	}
	if code := a.stop(); code != 0 {
		t.Fatalf("merger a: exit status %d: %s", code, a.stderr.String())
	}
	stopped = append(stopped, a)
	a2 := merge()
	stable()
	produceStates(t, url, dirs, []int{2}, starts[4:])
	t.Cleanup(func() {
		if t.Failed() {
			for i, f := range []*follower{a, b, a2} {
				t.Logf("merger %d: %d windows, stderr:\n%s", i, len(f.stdout.lines()), f.stderr.String())
			}
		}
	})
	waitFor(t, "all 8 windows", func() bool { return reported(a2, b) == 8 })
	time.Sleep(200 * time.Millisecond) // room for a duplicate to show
	for _, f := range []*follower{b, a2} {
		if code := f.stop(); code != 0 {
			t.Fatalf("merger: exit status %d: %s", code, f.stderr.String())
		}
	}
	got := map[string]string{}
	for _, f := range []*follower{a, b, a2} {
		t.Logf("merger reported %d windows; stderr: %s", len(f.stdout.lines()), f.stderr.String())
		lines := reportLines(t, f.stdout.String())
		prev := ""
		for _, s := range slices.Sorted(maps.Keys(lines)) {
			if _, dup := got[s]; dup {
				t.Errorf("window %s reported twice", s)
			}
			got[s] = lines[s]
			adjacent := prev != "" && slices.Index(starts, prev) == slices.Index(starts, s)-1
			prev = s
			if lines[s] == want[s] {
				continue
			}
			if adjacent {
				t.Errorf("window %s differs from the file merge's, though its merger reported the window before (-files +kafka):\n%s", s, cmp.Diff(want[s], lines[s]))
				continue
			}
			w, g := parseReports(t, want[s])[0], parseReports(t, lines[s])[0]
			if diff := cmp.Diff(withoutPrevious(w), withoutPrevious(g)); diff != "" {
				t.Errorf("window %s differs from the file merge's in more than jitter (-files +kafka):\n%s", s, diff)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d windows reported, want %d", len(got), len(want))
	}
	if len(a2.stdout.lines()) == 0 {
		t.Errorf("the restarted merger reported nothing: it did not take over a's partitions")
	}
}

// withoutPrevious returns a report without what depends on the previous
// window: the jitter list and each flow's prev_rate_bps and jitter flag,
// in every list of flows.
func withoutPrevious(r map[string]any) map[string]any {
	c := withoutKeys(r, "jitter")
	for _, l := range []string{"top_flows", "elephants", "top_cnp", "top_retransmits", "event_flows", "flows_all"} {
		fl, _ := c[l].([]any)
		var out []any
		for _, f := range fl {
			out = append(out, withoutKeys(f.(map[string]any), "prev_rate_bps", "jitter"))
		}
		c[l] = out
	}
	return c
}

// TestReplayKafkaDown replays with its states going to a broker that is
// not there: the reports must be written as without --state-out, and the
// run must end with status 1 and say that the states were not delivered.
func TestReplayKafkaDown(t *testing.T) {
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, &synth.Config{Seed: 3, Packets: 20_000, Flows: 200}, 1, roundRobin(1))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close() // nothing listens there now
	args := append([]string{"replay", "--format", "jsonl", "--host", "cap0"}, mergeRates...)
	want := mustRunInProcess(t, append(args, parts[0])...)
	start := time.Now()
	code, got, errOut := runInProcess(context.Background(), append(args, "--state-out", "kafka://"+down+"/states?delivery-timeout=1s", parts[0])...)
	if code != 1 || !strings.Contains(errOut, "3 of 3 window states not delivered") {
		t.Errorf("exit status %d, want 1 and a message that 3 of 3 states were not delivered:\n%s", code, errOut)
	}
	if n := strings.Count(errOut, "not delivered to topic states on "+down); n != 3 {
		t.Errorf("%d messages about undelivered states, want one per window:\n%s", n, errOut)
	}
	if got != want {
		t.Errorf("reports differ from a replay without --state-out (-want +got):\n%s", cmp.Diff(want, got))
	}
	t.Logf("replay with the broker down took %v", time.Since(start))
}

// TestKafkaMergeBrokerRestart runs merge --follow while its only broker
// (kfake, with its data in a directory) stops and starts again on the same
// port between two halves of the states: the merger must ride it out and
// report every window once, byte for byte as the file merge does (one
// merger sees every window in order, so nothing differs).
func TestKafkaMergeBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, kafkaTrace(), 3, byConnection(3))
	dirs, _ := splitRun(t, dir, parts)
	want := mustRunInProcess(t, append(append([]string{"merge", "--exact", "--format", "jsonl"}, mergeRates...), dirs...)...)
	starts := slices.Sorted(maps.Keys(reportLines(t, want)))
	port, data := freeport.Pick(t), t.TempDir()
	start := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(4, "fleet"), kfake.DataDir(data), kfake.SyncWrites())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	c := start()
	url := fmt.Sprintf("kafka://127.0.0.1:%d/fleet", port)
	m := startFollow(t, append(append([]string{"merge", "--exact", "--format", "jsonl", "--follow", "--poll", "20ms", "--wait", "1m",
		"--hosts", "h0,h1,h2"}, mergeRates...), url)...)
	produceStates(t, url, dirs, []int{0, 1, 2}, starts[:4])
	waitFor(t, "the first 4 windows", func() bool { return len(m.stdout.lines()) == 4 })
	// The broker goes away once the merger committed what it reported: a
	// commit lost with the broker would have the window reported again,
	// as after a crash between report and commit.
	waitFor(t, "the commit of the first 4 windows", func() bool {
		return committed(t, c, "fleet", kafka.DefaultGroup) == topicRecords(t, c, "fleet")
	})
	c.Close()
	time.Sleep(500 * time.Millisecond) // the merger meets the closed port
	start()
	produceStates(t, url, dirs, []int{0, 1, 2}, starts[4:])
	waitFor(t, "all 8 windows", func() bool { return len(m.stdout.lines()) == 8 })
	if code := m.stop(); code != 0 {
		t.Fatalf("merge: exit status %d: %s", code, m.stderr.String())
	}
	t.Logf("merge said:\n%s", m.stderr.String())
	if got := m.stdout.String(); got != want {
		t.Errorf("merge across a broker restart differs from the file merge (-files +kafka):\n%s", cmp.Diff(want, got))
	}
}
