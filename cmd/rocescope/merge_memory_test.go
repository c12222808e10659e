package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocescope/rocescope/metrics/state/kafka"
)

// backlogWindows is the backlog of TestKafkaMergeMemory;
// ROCESCOPE_BACKLOG_WINDOWS sets another, to measure (and
// ROCESCOPE_MERGE_BIN another rocescope binary).
func backlogWindows(t *testing.T) int {
	if s := os.Getenv("ROCESCOPE_BACKLOG_WINDOWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("ROCESCOPE_BACKLOG_WINDOWS=%q: want a number of windows", s)
		}
		return n
	}
	return 2000
}

// produceBacklog writes the state of window 0 of a small trace, as hosts
// h0 and h1, for n consecutive windows to the topic, window by window as
// capture hosts would, and returns the first window's start.
func produceBacklog(t *testing.T, url string, n int) int64 {
	t.Helper()
	dir := t.TempDir()
	trace := smallTrace(t, dir)
	states := filepath.Join(dir, "states")
	mustRunInProcess(t, "replay", "--format", "jsonl", "--host", "h", "--state-out", states+"/", trace)
	w := readState(t, stateFilesIn(t, states)[0])
	target, err := kafka.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"h0", "h1"}
	producers := make([]*kafka.Producer, len(hosts))
	for i, h := range hosts {
		if producers[i], err = kafka.NewProducer(target, &kafka.ProducerConfig{Host: h, Queue: 64}); err != nil {
			t.Fatal(err)
		}
	}
	first := w.Start
	for i := range n {
		if i%2 == 0 {
			// Capture hosts produce as windows close, in step: let the
			// producers deliver what they have, so that neither runs
			// ahead of the other by more than 2 windows.
			for _, p := range producers {
				for st := p.Stats(); st.Delivered+st.Failed < st.Written; st = p.Stats() {
					time.Sleep(time.Millisecond)
				}
			}
		}
		s := first + int64(i)*w.Length
		for j, p := range producers {
			c := *w
			c.Hosts = hosts[j : j+1]
			c.From, c.To, c.Start = w.From-w.Start+s, w.To-w.Start+s, s
			for {
				before := p.Stats().Dropped
				if err := p.Write(&c); err != nil {
					t.Fatal(err)
				}
				if p.Stats().Dropped == before {
					break
				}
				time.Sleep(10 * time.Millisecond) // the queue was full: again
			}
		}
	}
	for _, p := range producers {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return first
}

// peakRSS runs the command line under GNU time, which forks it from a
// small process (a child forked from the test would count the test's own
// memory until it execs), and returns its peak RSS in bytes and CPU time.
// It skips the test without /usr/bin/time.
func peakRSS(t *testing.T, args ...string) (peak int64, cpu time.Duration, stderr string) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		t.Skip("measures peak memory with /usr/bin/time (Debian package time): not installed")
	}
	out := filepath.Join(t.TempDir(), "time")
	cmd := exec.Command("/usr/bin/time", append([]string{"-o", out, "-f", "%M %U %S"}, args...)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var kb int64
	var user, sys float64
	if _, err := fmt.Sscan(string(data), &kb, &user, &sys); err != nil {
		t.Fatalf("/usr/bin/time said %q: %v", data, err)
	}
	return kb << 10, time.Duration((user + sys) * float64(time.Second)), errb.String()
}

// TestKafkaMergeMemory merges a backlog of 2 000 windows of two hosts from
// a Kafka topic, in a process of its own, and requires every window to be
// reported, merged from both hosts, with a peak RSS under 100 MB: the
// merge holds a bounded number of windows (some 5 MB each with the
// default sketches) however long the backlog, with --hosts and without.
func TestKafkaMergeMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rocescope and produces 4 000 states: not with -short (CI runs it)")
	}
	variants := [][]string{{"--hosts", "h0,h1"}, nil}
	bin := os.Getenv("ROCESCOPE_MERGE_BIN") // another build to measure, such as an older one
	if bin != "" {
		variants = variants[1:] // before merge took --hosts without --follow
	} else {
		var err error
		if bin, err = buildRocescope(t, ""); err != nil {
			t.Fatal(err)
		}
	}
	n := backlogWindows(t)
	_, url := startKafka(t, 1, 4, "backlog", 0)
	produceBacklog(t, url, n)
	for i, flags := range variants {
		out := filepath.Join(t.TempDir(), "reports.jsonl")
		args := slices.Concat([]string{bin, "merge", "--group", fmt.Sprint("g", i), "--format", "jsonl", "-o", out}, flags, []string{url})
		peak, cpu, stderr := peakRSS(t, args...)
		t.Logf("merge %s of %d windows: %v CPU (user+sys), peak RSS %.1f MB", strings.Join(flags, " "), n, cpu.Round(time.Millisecond), float64(peak)/1e6)
		if before, _ := lastWords(t, stderr); before != "" {
			t.Errorf("merge %s said: %s", strings.Join(flags, " "), stderr)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		rs := parseReports(t, string(data))
		if len(rs) != n {
			t.Fatalf("%d reports, want %d", len(rs), n)
		}
		for i, r := range rs {
			if h := strings.Join(reportHosts(r), ","); h != "h0,h1" {
				t.Fatalf("window %d merged from hosts %s, want h0,h1", i, h)
			}
		}
		if peak > 100e6 {
			t.Errorf("merge %s: peak RSS %.1f MB, want under 100 MB", strings.Join(flags, " "), float64(peak)/1e6)
		}
	}
}
