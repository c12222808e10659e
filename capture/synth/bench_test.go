package synth_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
)

// BenchmarkNext measures generation: frames/s and bytes/s of whole
// frames, with and without a snap length, truth included.
func BenchmarkNext(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  synth.Config
	}{
		{"defaults", synth.Config{}},
		{"snap128", synth.Config{SnapLen: 128}},
		{"pmtu1024-small", synth.Config{PMTU: 1024, MaxMessage: 4096}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := bc.cfg
			cfg.Packets = 1 << 30 // never runs out
			cfg.Duration = time.Hour
			src, err := synth.New(&cfg)
			if err != nil {
				b.Fatal(err)
			}
			batch := capture.NewBatch(256)
			var frames, bytes int
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := src.Next(batch); err != nil {
					b.Fatal(err)
				}
				frames += len(batch.Frames)
				for _, f := range batch.Frames {
					bytes += len(f.Data)
				}
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(frames)/s, "frames/s")
			b.ReportMetric(float64(bytes)/s/1e6, "MB/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/frame")
		})
	}
}

// BenchmarkTrace1M generates a whole trace of a million frames, truth
// included.
func BenchmarkTrace1M(b *testing.B) {
	batch := capture.NewBatch(256)
	b.ReportAllocs()
	for b.Loop() {
		src, err := synth.New(&synth.Config{Packets: 1_000_000})
		if err != nil {
			b.Fatal(err)
		}
		for err == nil {
			err = src.Next(batch)
		}
		if !errors.Is(err, io.EOF) || src.Truth().Total.Packets != 1_000_000 {
			b.Fatal(err)
		}
	}
}

// TestNextNoAllocs checks that generating frames inside a window
// allocates nothing.
func TestNextNoAllocs(t *testing.T) {
	src, err := synth.New(&synth.Config{Packets: 1 << 30, Window: time.Hour, Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	batch := capture.NewBatch(256)
	for range 20 { // size the arena
		if err := src.Next(batch); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(200, func() {
		if err := src.Next(batch); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Next allocates %v times per batch", n)
	}
}
