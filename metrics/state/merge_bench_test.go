package state

import (
	"context"
	"errors"
	"fmt"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
)

// benchHostStates makes the state files of hosts capture hosts over a
// synthetic trace of windows one-second windows: the trace is split
// between the hosts by connection, as a packet broker would, each part
// goes through the engine with default sketches, and each host's windows
// are written by a Writer into one file. It returns the files' bytes
// and the hosts' names.
func benchHostStates(b *testing.B, hosts, windows, packets, flows int) ([][]byte, []string) {
	b.Helper()
	src, err := synth.New(&synth.Config{Seed: 1, Packets: packets, Flows: flows,
		Duration: time.Duration(windows) * time.Second, SnapLen: 128})
	if err != nil {
		b.Fatal(err)
	}
	parts := make([][]capture.Frame, hosts)
	arena := make([]byte, 0, packets*128)
	batch := capture.NewBatch(256)
	var p decode.Packet
	for n := 0; ; {
		err := src.Next(batch)
		for _, f := range batch.Frames {
			h := n % hosts
			if p.Decode(f.Data, f.Link); p.Headers&decode.HasUDP != 0 {
				h = int(p.SrcPort) % hosts // both directions of a connection share it
			}
			n++
			off := len(arena)
			arena = append(arena, f.Data...)
			f.Data = arena[off:len(arena):len(arena)]
			parts[h] = append(parts[h], f)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	files := make([][]byte, hosts)
	names := make([]string, hosts)
	for h := range hosts {
		names[h] = fmt.Sprintf("cap%02d", h)
		cfg := &metrics.Config{Host: names[h], Workers: 1}
		path := filepath.Join(b.TempDir(), names[h]+".states")
		sw, err := NewWriter(path, cfg)
		if err != nil {
			b.Fatal(err)
		}
		e, err := metrics.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		err = e.Run(context.Background(), []capture.Source{&testframes.Source{Frames: parts[h], Per: 256}}, func(w *metrics.Window) error {
			n++
			return sw.Write(w)
		})
		if err := errors.Join(err, sw.Close()); err != nil {
			b.Fatal(err)
		}
		if n != windows {
			b.Fatalf("host %s has %d windows, want %d", names[h], n, windows)
		}
		if files[h], err = os.ReadFile(path); err != nil {
			b.Fatal(err)
		}
	}
	return files, names
}

// BenchmarkMerge16Hosts60Windows measures what `rocescope merge` does with
// a minute of states from 16 capture hosts: Merge of a FileInput over the hosts'
// state files (framing, checksum, decoding into recycled windows), aligning
// them by window start, merging each window's 16 states and normalizing
// the 60 merged windows. The states come from a synthetic trace of 1.2 M
// frames over 20 000 connections (each host-window holds a few hundred
// flows and default-sized sketches), written to files once before the
// timer. Reported: ns per state, the encoded size of all states (state-MB)
// and its rate (MB/s), and the allocations of one whole merge.
func BenchmarkMerge16Hosts60Windows(b *testing.B) {
	const hosts, windows = 16, 60
	files, names := benchHostStates(b, hosts, windows, 1_200_000, 20_000)
	total := 0
	dir := b.TempDir()
	paths := make([]string, hosts)
	for h, f := range files {
		total += len(f)
		paths[h] = filepath.Join(dir, names[h]+Ext)
		if err := os.WriteFile(paths[h], f, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		err := mergeFiles(context.Background(), paths, nil, func(w *metrics.Window) error {
			if len(w.Hosts) != hosts {
				return fmt.Errorf("window %d merged from %d hosts, want %d", w.Start, len(w.Hosts), hosts)
			}
			n++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if n != windows {
			b.Fatalf("%d merged windows, want %d", n, windows)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*hosts*windows), "ns/state")
	b.ReportMetric(float64(total)/1e6, "state-MB")
}
