package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/metrics/state/kafka"
)

// startKafka starts an in-process Kafka cluster of brokers on 127.0.0.1,
// with the topic in partitions, stopped when the test ends, and returns it
// with the kafka:// URL of the topic.
func startKafka(t *testing.T, brokers int, partitions int32, topic, query string) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, kafka.Scheme + strings.Join(c.ListenAddrs(), ",") + "/" + topic + query
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
// with its states going to a Kafka topic of 4 partitions on 3 brokers, in
// records of at most 32 KiB (so that every state is split into parts), and
// requires `merge kafka://...` to write byte for byte what merging the same
// hosts' state files writes, and that a second merge of the group finds
// nothing left to report.
func TestKafkaMergeEqualsFiles(t *testing.T) {
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, kafkaTrace(), 3, byConnection(3))
	dirs, _ := splitRun(t, dir, parts)
	want := mustRunInProcess(t, append(append([]string{"merge", "--exact", "--format", "jsonl"}, mergeRates...), dirs...)...)
	windows := strings.Count(want, "\n")
	if windows != 8 {
		t.Fatalf("file merge wrote %d windows, want 8", windows)
	}

	c, url := startKafka(t, 3, 4, "states", "?max-record-bytes=32768")
	for i, part := range parts {
		args := append([]string{"replay", "--exact", "--workers", "2", "--format", "jsonl", "--host", fmt.Sprintf("h%d", i), "--state-out", url}, mergeRates...)
		mustRunInProcess(t, append(args, part)...)
	}
	if n := topicRecords(t, c, "states"); n <= int64(3*windows) {
		t.Fatalf("%d records for %d windows of 3 hosts: the states were not split", n, windows)
	}
	got := mustRunInProcess(t, append(append([]string{"merge", "--exact", "--format", "jsonl"}, mergeRates...), url)...)
	if got != want {
		t.Errorf("merge of the topic differs from the merge of the files (-files +kafka):\n%s", cmp.Diff(want, got))
	}
	if again := mustRunInProcess(t, append(append([]string{"merge", "--exact", "--format", "jsonl"}, mergeRates...), url)...); again != "" {
		t.Errorf("a second merge of the group reported again:\n%s", again)
	}
}
