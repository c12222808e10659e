package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rocescope/rocescope/internal/clickhousetest"
	"github.com/rocescope/rocescope/metrics/state"
	"github.com/rocescope/rocescope/metrics/state/kafka"
)

// TestMain runs this test binary as rocescope when ROCESCOPE_TEST_MAIN is
// 1, so that a test can run rocescope in a process of its own, and kill it.
func TestMain(m *testing.M) {
	if os.Getenv("ROCESCOPE_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// process is rocescope running in a process of its own.
type process struct {
	cmd    *exec.Cmd
	stderr syncBuffer
	done   chan error
}

// startProcess runs rocescope with args in a process of its own, its
// standard output going to the file stdout, until the test ends.
func startProcess(t *testing.T, stdout string, args ...string) *process {
	t.Helper()
	out, err := os.Create(stdout)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p := &process{cmd: exec.Command(os.Args[0], args...), done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), "ROCESCOPE_TEST_MAIN=1")
	p.cmd.Stdout, p.cmd.Stderr = out, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// kill kills the process with SIGKILL, as a crash or the OOM killer
// would, and waits for it.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-p.done
	p.done <- err // for the cleanup
}

// twoHostTopic replays a trace of 8 windows split between hosts h0 and h1
// into state directories, and returns them with the file merge's reports
// by window start (with --hosts h0,h1).
func twoHostTopic(t *testing.T, dir string) (dirs []string, want map[string]string, starts []string) {
	t.Helper()
	parts, _ := writeSplitTrace(t, dir, kafkaTrace(), 2, byConnection(2))
	dirs, _ = splitRun(t, dir, parts)
	want = reportLines(t, mustRunInProcess(t, slices.Concat([]string{"merge", "--exact", "--format", "jsonl", "--hosts", "h0,h1"}, mergeRates, dirs)...))
	starts = slices.Sorted(maps.Keys(want))
	if len(starts) != 8 {
		t.Fatalf("%d windows, want 8", len(starts))
	}
	return dirs, want, starts
}

// produceRecords writes records to the topic, in order, and waits for the
// brokers to take them.
func produceRecords(t *testing.T, c *kfake.Cluster, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestKafkaFutureStateGroupRestart: a state of h0 from a day ahead sits in
// the topic among the windows of h0 and h1. The merger reports the
// windows around it, never the future window, and commits no floor
// past them: a merger of the same group started later reports the next
// windows.
func TestKafkaFutureStateGroupRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("two mergers of a group take seconds: not with -short (CI runs it)")
	}
	dir := t.TempDir()
	dirs, _, starts := twoHostTopic(t, dir)
	_, url := startKafka(t, 1, 4, "fleet", 0)
	produceStates(t, url, dirs, []int{0, 1}, starts[:4])
	future := filepath.Join(dir, "future")
	var first int64
	fmt.Sscan(starts[0], &first)
	restamped(t, filepath.Join(dirs[0], "h0-"+starts[0]+state.Ext), future, "h0", first+int64(24*time.Hour))
	produceStates(t, url, []string{future}, []int{0}, []string{fmt.Sprint(first + int64(24*time.Hour))})
	merge := func() *follower {
		return startFollow(t, slices.Concat([]string{"merge", "--exact", "--format", "jsonl", "--follow", "--poll", "20ms", "--wait", "1s",
			"--hosts", "h0,h1", "--group", "fleet-mergers"}, mergeRates, []string{url})...)
	}
	a := merge()
	waitFor(t, "the first 4 windows", func() bool { return len(a.stdout.lines()) == 4 })
	time.Sleep(1500 * time.Millisecond) // longer than --wait: the future window would be reported now
	if code := a.stop(); code != 0 {
		t.Fatalf("merger a: exit status %d: %s", code, a.stderr.String())
	}
	produceStates(t, url, dirs, []int{0, 1}, starts[4:])
	b := merge()
	waitFor(t, "the last 4 windows", func() bool { return len(b.stdout.lines()) >= 4 })
	time.Sleep(200 * time.Millisecond) // room for more to show
	if code := b.stop(); code != 0 {
		t.Fatalf("merger b: exit status %d: %s", code, b.stderr.String())
	}
	for i, f := range []*follower{a, b} {
		got := reportLines(t, f.stdout.String())
		if diff := cmp.Diff(starts[4*i:4*i+4], slices.Sorted(maps.Keys(got))); diff != "" {
			t.Errorf("merger %d reported windows (-want +got):\n%s\nstderr: %s", i, diff, f.stderr.String())
		}
	}
	if got := b.stderr.String(); !strings.Contains(got, "more than 1h0m0s ahead of the other hosts'") {
		t.Errorf("merger b said %q: want a warning about the future state", got)
	}
}

// TestKafkaSkipsPoisonRecords: among the states of h0 and h1 the topic
// holds a record of another program, a state record whose value is
// damaged, and a state delivered twice. A merge of the topic reports every
// window as the file merge does, says of each bad record where it is, keeps
// the first of the duplicate, and ends with status 1 saying how many it
// skipped; the next merge of the group finds nothing left.
func TestKafkaSkipsPoisonRecords(t *testing.T) {
	dir := t.TempDir()
	dirs, want, starts := twoHostTopic(t, dir)
	c, url := startKafka(t, 1, 1, "fleet", 0)
	produceStates(t, url, dirs, []int{0, 1}, starts[:3])
	produceStates(t, url, dirs, []int{0}, starts[2:3]) // again
	var start int64
	fmt.Sscan(starts[3], &start)
	key := binary.BigEndian.AppendUint64(nil, uint64(start))
	produceRecords(t, c,
		&kgo.Record{Topic: "fleet", Value: []byte(`{"event":"another program's record"}`)},
		&kgo.Record{Topic: "fleet", Key: key, Value: []byte("damaged"), Headers: []kgo.RecordHeader{
			{Key: kafka.HeaderHost, Value: []byte("h0")}, {Key: kafka.HeaderWindowStart, Value: []byte(starts[3])},
			{Key: kafka.HeaderWindowLength, Value: []byte("1000000000")}, {Key: kafka.HeaderStateVersion, Value: []byte("2")},
			{Key: kafka.HeaderPart, Value: []byte("1/1")}}})
	produceStates(t, url, dirs, []int{0, 1}, starts[3:])
	code, out, errOut := runInProcess(context.Background(), slices.Concat([]string{"merge", "--exact", "--format", "jsonl", "--hosts", "h0,h1"}, mergeRates, []string{url})...)
	if code != 1 || !strings.Contains(errOut, "2 states skipped (--keep-going skips them without failing)") {
		t.Errorf("exit status %d, stderr %q; want 1, saying 2 states were skipped", code, errOut)
	}
	got := reportLines(t, out)
	if len(got) != len(want) {
		t.Errorf("%d windows reported, want %d:\n%s", len(got), len(want), errOut)
	}
	for _, s := range starts {
		if got[s] != want[s] {
			t.Errorf("window %s differs from the file merge's (-files +kafka):\n%s", s, cmp.Diff(want[s], got[s]))
		}
	}
	// Offsets: h0's windows 0 to 2 (0-2), h1's (3-5), h0's window 2
	// again (6), the other program's record (7), the damaged one (8).
	for _, says := range []string{
		"fleet/0@7: want the headers host, window_start_ns, window_ns, state_version and part once each: not a rocescope state record; skipped",
		"fleet/0@8: state: fleet: not a rocescope state file: invalid window state; skipped",
		"state: fleet/0@6: window " + windowTime(t, starts[2]) + ": host h0 already delivered it in fleet/0@2: host delivered the same part of a window twice; the first is kept, this state skipped",
	} {
		if strings.Count(errOut, says) != 1 {
			t.Errorf("stderr %q: want once %q", errOut, says)
		}
	}
	if code, again, errOut := runInProcess(context.Background(), "merge", "--hosts", "h0,h1", url); code != 0 || again != "" {
		t.Errorf("a second merge of the group: exit status %d, %d bytes of reports, stderr %q; want 0 and nothing", code, len(again), errOut)
	}
}

// windowTime formats a window start as the merge's messages do.
func windowTime(t *testing.T, start string) string {
	t.Helper()
	var ns int64
	if _, err := fmt.Sscan(start, &ns); err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// TestKafkaCommittedOffsetsRetried: the brokers fail the merger's first
// reads of the group's committed offsets (the ones it asks for the floor
// of each partition as they are assigned). merge --follow says so and
// tries again at the next poll, and reports every window.
func TestKafkaCommittedOffsetsRetried(t *testing.T) {
	dir := t.TempDir()
	dirs, want, starts := twoHostTopic(t, dir)
	c, url := startKafka(t, 1, 2, "fleet", 0)
	produceStates(t, url, dirs, []int{0, 1}, starts)
	var mu sync.Mutex
	failed := 0
	c.ControlKey(int16(kmsg.OffsetFetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.OffsetFetchRequest)
		mu.Lock()
		defer mu.Unlock()
		if req.RequireStable || failed == 3 {
			return nil, nil, false // the group's own fetch, or enough failures
		}
		failed++
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.Version = req.Version
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: kerr.GroupAuthorizationFailed.Code})
		}
		return resp, nil, true
	})
	f := startFollow(t, slices.Concat([]string{"merge", "--exact", "--format", "jsonl", "--follow", "--poll", "20ms", "--hosts", "h0,h1"}, mergeRates, []string{url})...)
	waitFor(t, "all 8 windows", func() bool { return len(f.stdout.lines()) == 8 })
	if code := f.stop(); code != 0 {
		t.Fatalf("exit status %d: %s", code, f.stderr.String())
	}
	got := reportLines(t, f.stdout.String())
	for _, s := range starts {
		if got[s] != want[s] {
			t.Errorf("window %s differs from the file merge's (-files +kafka):\n%s", s, cmp.Diff(want[s], got[s]))
		}
	}
	if stderr := f.stderr.String(); !strings.Contains(stderr, "read committed offsets:") || !strings.Contains(stderr, "(trying again)") || !strings.Contains(stderr, "reading again after") {
		t.Errorf("stderr %q: want the failed reads said once, and that reading goes on", stderr)
	}
}

// TestKafkaKillBeforeCommit shows the delivery guarantee: a merger writes
// and syncs the reports of every window into a file, then cannot commit
// (the brokers fail its commits), and is killed with SIGKILL. The merger
// started again in its group reports the windows again: each window is
// reported at least once, none is lost, and those reported and not
// committed are reported twice. Once it committed, a third merger reports
// nothing.
func TestKafkaKillBeforeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mergers in processes of their own: not with -short (CI runs it)")
	}
	dir := t.TempDir()
	dirs, want, starts := twoHostTopic(t, dir)
	c, url := startKafka(t, 1, 4, "fleet", 0)
	produceStates(t, url, dirs, []int{0, 1}, starts)
	var mu sync.Mutex
	refuse := true
	c.ControlKey(int16(kmsg.OffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if !refuse {
			return nil, nil, false
		}
		req := r.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Version = req.Version
		for _, t := range req.Topics {
			rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: kerr.GroupAuthorizationFailed.Code})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	args := slices.Concat([]string{"merge", "--exact", "--format", "jsonl", "--follow", "--poll", "20ms", "--hosts", "h0,h1"}, mergeRates)
	first := filepath.Join(dir, "first.jsonl")
	p := startProcess(t, first, append(args, "-o", first, url)...)
	waitFor(t, "8 reports written and a failed commit", func() bool {
		data, _ := os.ReadFile(first)
		return strings.Count(string(data), "\n") == 8 && strings.Contains(p.stderr.String(), "commit offsets after window")
	})
	p.kill(t)
	mu.Lock()
	refuse = false
	mu.Unlock()
	second := filepath.Join(dir, "second.jsonl")
	f := startFollow(t, append(args, "-o", second, url)...)
	// The killed merger holds its partitions until the group's session
	// times out (45 s by default).
	waitUntil(t, "the windows again", 2*time.Minute, func() bool {
		data, _ := os.ReadFile(second)
		return strings.Count(string(data), "\n") == 8
	})
	waitFor(t, "the commit", func() bool { return committed(t, c, "fleet", kafka.DefaultGroup) == topicRecords(t, c, "fleet") })
	if code := f.stop(); code != 0 {
		t.Fatalf("exit status %d: %s", code, f.stderr.String())
	}
	for _, path := range []string{first, second} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got := reportLines(t, string(data))
		for _, s := range starts {
			if got[s] != want[s] {
				t.Errorf("%s: window %s differs from the file merge's (-files +kafka):\n%s", filepath.Base(path), s, cmp.Diff(want[s], got[s]))
			}
		}
	}
	if code, again, errOut := runInProcess(context.Background(), "merge", "--hosts", "h0,h1", url); code != 0 || again != "" {
		t.Errorf("a third merge of the group: exit status %d, %d bytes of reports, stderr %q; want 0 and nothing", code, len(again), errOut)
	}
}

// blackHole is a server that takes HTTP requests and answers each with
// 503, as a ClickHouse server that is down behind a proxy would, and
// counts the requests it was sent.
type blackHole struct {
	addr     string
	mu       sync.Mutex
	requests int
}

func startBlackHole(t *testing.T) *blackHole {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b := &blackHole{addr: l.Addr().String()}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 64<<10)
				for {
					conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
					n, err := conn.Read(buf)
					if strings.HasPrefix(string(buf[:n]), "POST ") {
						b.mu.Lock()
						b.requests++
						b.mu.Unlock()
					}
					if err != nil {
						if ne, ok := err.(net.Error); ok && ne.Timeout() && n == 0 {
							conn.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\ndown"))
						}
						return
					}
				}
			}()
		}
	}()
	return b
}

// requestsSeen returns how many requests the server was sent.
func (b *blackHole) requestsSeen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}

// TestKafkaClickHouseDownKill: merge --follow from Kafka into a ClickHouse
// server that is down, then kill -9. Its reports were written to the sink
// but never inserted nor spilled: it must not have committed them. The
// merger started again with the server up reports every window into it,
// exactly once, and no spill file is left.
func TestKafkaClickHouseDownKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a clickhouse-server and processes of their own: not with -short (CI runs it)")
	}
	addr := clickhousetest.Start(t)
	dir := t.TempDir()
	dirs, want, starts := twoHostTopic(t, dir)
	c, url := startKafka(t, 1, 4, "fleet", 0)
	produceStates(t, url, dirs, []int{0, 1}, starts)
	spill := filepath.Join(dir, "spill")
	down := startBlackHole(t)
	args := slices.Concat([]string{"merge", "--hosts", "h0,h1"}, mergeRates)
	p := startProcess(t, filepath.Join(dir, "stdout"), slices.Concat(args, []string{"--follow", "--poll", "20ms",
		"-o", fmt.Sprintf("clickhouse://%s/fleet?spill=%s", down.addr, spill), url})...)
	// The sink sends rows (after creating the tables) once a report is
	// written to it.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the first merger said: %s", p.stderr.String())
		}
	})
	waitFor(t, "a request to the server that is down", func() bool { return down.requestsSeen() > 0 })
	// Standard error says so at once, not when the request times out.
	waitFor(t, "a line on standard error about the server", func() bool {
		return strings.Contains(p.stderr.String(), "rocescope: clickhouse "+down.addr+": CREATE DATABASE IF NOT EXISTS `fleet`: 503 Service Unavailable: down; trying again")
	})
	time.Sleep(500 * time.Millisecond) // room for a commit, had there been one
	if n := committed(t, c, "fleet", kafka.DefaultGroup); n > 0 {
		t.Errorf("the merger committed %d records while its reports were not in ClickHouse", n)
	}
	p.kill(t)
	if files, _ := filepath.Glob(spill + "*"); len(files) > 0 {
		t.Errorf("spill files %q after the kill", files)
	}
	mustRunInProcess(t, slices.Concat(args, []string{"-o", fmt.Sprintf("clickhouse://%s/fleet?spill=%s", addr, spill), url})...)
	rows := selectRows(t, addr, "SELECT window_start_ns, packets, bytes, host FROM fleet.windows ORDER BY window_start_ns FORMAT JSONEachRow")
	if len(rows) != len(starts) {
		t.Fatalf("%d rows in windows, want %d (one per window)", len(rows), len(starts))
	}
	for i, r := range rows {
		w := parseReports(t, want[starts[i]])[0]
		for _, k := range []string{"window_start_ns", "packets", "bytes", "host"} {
			sameValue(t, fmt.Sprintf("window %d %s", i, k), w[k], r[k])
		}
	}
	if files, _ := filepath.Glob(spill + "*"); len(files) > 0 {
		t.Errorf("spill files %q after the second merge", files)
	}
}
