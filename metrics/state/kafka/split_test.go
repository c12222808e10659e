package kafka

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/metrics"
)

// windowStates analyzes a synthetic trace and returns the states of its
// windows.
func windowStates(tb testing.TB, cfg *synth.Config) [][]byte {
	tb.Helper()
	src, err := synth.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	eng, err := metrics.New(&metrics.Config{Host: "h", Workers: 2, Exact: true})
	if err != nil {
		tb.Fatal(err)
	}
	var states [][]byte
	err = eng.Run(context.Background(), []capture.Source{src}, func(w *metrics.Window) error {
		b, err := w.AppendBinary(nil)
		states = append(states, b)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return states
}

// TestSplitMergesExactly splits real window states into parts of several
// sizes and requires the merge of the parts, normalized, to encode to the
// state byte for byte; every part must fit its limit, and parts must
// exist beyond the first (else the test proves nothing).
func TestSplitMergesExactly(t *testing.T) {
	states := windowStates(t, &synth.Config{Seed: 9, Packets: 60_000, Flows: 3000})
	for _, limit := range []int{160 << 10, 200 << 10, 300 << 10, 1 << 30} {
		for i, enc := range states {
			var w metrics.Window
			if err := w.UnmarshalBinary(enc); err != nil {
				t.Fatal(err)
			}
			parts, err := split(&w, enc, limit)
			if err != nil {
				t.Fatalf("limit %d, window %d: %v", limit, i, err)
			}
			if limit == 1<<30 {
				if len(parts) != 1 || !bytes.Equal(parts[0], enc) {
					t.Errorf("window %d fits, yet split into %d parts", i, len(parts))
				}
				continue
			}
			if len(parts) < 2 {
				t.Fatalf("limit %d, window %d of %d bytes: %d parts", limit, i, len(enc), len(parts))
			}
			var merged *metrics.Window
			for j, p := range parts {
				if len(p) > limit {
					t.Errorf("limit %d, window %d: part %d has %d bytes", limit, i, j, len(p))
				}
				pw := new(metrics.Window)
				if err := pw.UnmarshalBinary(p); err != nil {
					t.Fatal(err)
				}
				if merged == nil {
					merged = pw
				} else if err := merged.Merge(pw); err != nil {
					t.Fatal(err)
				}
			}
			merged.Normalize()
			got, err := merged.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, enc) {
				t.Errorf("limit %d, window %d: the merge of %d parts encodes to %d bytes that differ from the state's %d", limit, i, len(parts), len(got), len(enc))
			}
		}
	}
}

// TestSplitTooLarge requires a limit below one sketch's size to fail with
// ErrTooLarge, not to drop anything.
func TestSplitTooLarge(t *testing.T) {
	enc := windowStates(t, &synth.Config{Seed: 9, Packets: 20_000, Flows: 500})[0]
	var w metrics.Window
	if err := w.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if _, err := split(&w, enc, 1024); !errors.Is(err, ErrTooLarge) {
		t.Errorf("split into 1 KiB records: %v, want ErrTooLarge", err)
	}
}
