package synth_test

import (
	"errors"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rocescope/rocescope/capture/synth"
)

// fuzzConfig builds a Config from fuzz input: small traces, every knob
// reachable, including invalid values.
func fuzzConfig(seed uint64, packets, flows uint16, knobs []byte) synth.Config {
	k := func(i int) int {
		if i < len(knobs) {
			return int(knobs[i])
		}
		return 0
	}
	share := func(i int) float64 { // 0: default, 255: off, else a fraction (may exceed 1)
		switch v := k(i); v {
		case 0:
			return 0
		case 255:
			return synth.Off
		default:
			return float64(v) / 200
		}
	}
	return synth.Config{
		Seed: seed, Packets: int(packets % 4000), Flows: int(flows%300) - 1,
		Hosts:            k(0) - 1,
		PMTU:             128 << (k(1) % 6), // 128 and 8192 are invalid
		Window:           time.Duration(k(2)) * time.Millisecond,
		Duration:         time.Duration(k(3)) * 10 * time.Millisecond,
		ZipfS:            share(4) * 3,
		MaxMessage:       k(5) * 1000,
		IPv6Share:        share(6),
		VLANShare:        share(7),
		ReadShare:        share(8),
		SendShare:        share(9),
		LossProb:         share(10) / 5,
		LossBeforeMirror: share(11),
		RNRProb:          share(12) / 5,
		ECNCEProb:        share(13) / 5,
		CNPProb:          share(14),
		PFCShare:         share(15) / 5,
		OtherShare:       share(16) / 5,
		JitterFlows:      k(17)%8 - 1,
		JitterShare:      share(18) / 4,
		SnapLen:          []int{0, synth.MinSnapLen, 200, 50, synth.MinSnapLen + 54}[k(19)%5],
		DSCP:             k(20)%70 - 1,
		ERSPAN:           k(21) % 4, // 1 is invalid
	}
}

// FuzzGenerate generates traces from fuzzed configs: New either rejects
// the config with ErrConfig or makes a trace whose every frame decodes and
// whose truth equals the recount from the decoded frames.
func FuzzGenerate(f *testing.F) {
	f.Add(uint64(1), uint16(2000), uint16(20), []byte{})
	f.Add(uint64(2), uint16(3000), uint16(3), []byte{2, 0, 1, 1, 0, 2, 200, 200, 100, 50, 200, 100, 200, 200, 0, 50, 50, 2, 0, 1})
	f.Add(uint64(3), uint16(500), uint16(1), []byte{0, 4, 0, 0, 255, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 0})
	f.Fuzz(func(t *testing.T, seed uint64, packets, flows uint16, knobs []byte) {
		cfg := fuzzConfig(seed, packets, flows, knobs)
		if _, err := synth.New(&cfg); err != nil {
			if !errors.Is(err, synth.ErrConfig) {
				t.Fatalf("New(%+v) = %v, not ErrConfig", cfg, err)
			}
			return
		}
		frames, tr := generate(t, &cfg, 64)
		if want := cfg.Packets; want > 0 && len(frames) != want || want == 0 && len(frames) != synth.DefaultPackets {
			t.Fatalf("%d frames for %d packets", len(frames), want)
		}
		got, _ := recount(t, frames, tr.WindowNS, uint32(cfg.PMTU), tr)
		if cfg.PMTU == 0 {
			// Mixed path MTUs: the recount cannot know how many PSNs a READ
			// takes; compare all but the PSN counters.
			got, tr = withoutPSNCounts(got), withoutPSNCounts(tr)
		}
		if d := gocmp.Diff(tr, got, cmpAddr, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("config %+v: truth differs from the recount (-truth +recount):\n%s", cfg, d)
		}
	})
}

// withoutPSNCounts returns a copy of tr with the retransmit and gap
// counters zeroed.
func withoutPSNCounts(tr *synth.Truth) *synth.Truth {
	c := *tr
	c.Total.Retransmits, c.Total.PSNGaps = 0, 0
	c.Windows = append([]synth.Window(nil), tr.Windows...)
	for i := range c.Windows {
		w := &c.Windows[i]
		w.Retransmits, w.PSNGaps = 0, 0
		w.PerFlow = zeroPSN(w.PerFlow)
	}
	c.PerFlow = zeroPSN(tr.PerFlow)
	return &c
}

// zeroPSN returns a copy of flows with the retransmit and gap counters
// zeroed.
func zeroPSN(flows []synth.Flow) []synth.Flow {
	out := append([]synth.Flow(nil), flows...)
	for i := range out {
		out[i].Retransmits, out[i].PSNGaps = 0, 0
	}
	return out
}
