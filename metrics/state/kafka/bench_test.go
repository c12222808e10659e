package kafka

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/metrics"
)

// BenchmarkSplit measures splitting a state of ~3000 exact flows into
// records of several sizes.
func BenchmarkSplit(b *testing.B) {
	enc := windowStates(b, &synth.Config{Seed: 9, Packets: 60_000, Flows: 3000})[1]
	var w metrics.Window
	if err := w.UnmarshalBinary(enc); err != nil {
		b.Fatal(err)
	}
	for _, limit := range []int{160 << 10, 300 << 10} {
		b.Run(fmt.Sprintf("limit=%dKiB", limit>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := split(&w, enc, limit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProduceConsume measures states through an in-process broker:
// Write, delivery, and a consumer group reading them back.
func BenchmarkProduceConsume(b *testing.B) {
	enc := windowStates(b, &synth.Config{Seed: 9, Packets: 60_000, Flows: 3000})[1]
	var w metrics.Window
	if err := w.UnmarshalBinary(enc); err != nil {
		b.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "states"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	target := &Target{Brokers: c.ListenAddrs(), Topic: "states", MaxRecordBytes: DefaultMaxRecordBytes}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	p, err := NewProducer(target, &ProducerConfig{Host: "h", Queue: b.N + 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		w.Start = int64(i+1) * w.Length
		if err := p.Write(&w); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
	cons, err := NewConsumer(target, &ConsumerConfig{Group: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	var into metrics.Window // the caller's window, reused as a merge reuses its spares
	for n := 0; n < b.N; {
		r, err := cons.Next(context.Background(), &into)
		if err != nil {
			b.Fatal(err)
		}
		if r.Skipped != nil {
			b.Fatal(r.Skipped)
		}
		if r.State {
			n++
		}
	}
}
