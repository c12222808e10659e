package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/metrics/export"
)

func genCommand() *command {
	return &command{
		name:    "gen",
		args:    "[FILE]",
		summary: "write a synthetic RoCEv2 trace and its exact ground truth",
		about: `Gen writes a classic pcap file (nanosecond timestamps, Ethernet) of realistic
synthetic RoCEv2 traffic made from a seed: many RC QP connections with
Zipf-distributed sizes, WRITE, SEND and READ operations, ACKs, NAKs and RNR
NAKs, go-back-N retransmissions after losses, ECN-CE marks with the CNPs they
cause, PFC pause frames, flows whose rate swings between windows, IPv4 and
IPv6, VLAN tags and non-RoCE background frames. With --truth it also writes,
as JSON, exactly what the trace holds per window: the figures a replay must
report.

Files grow with --packets: whole frames average about 1.5 kB, so the default
100000 frames make about 150 MB and --packets 1000000 about 1.5 GB; --snaplen
128 cuts that to about 135 bytes a frame. Gen prints the size of the file on
standard error before it writes it: it generates the frames once without
their payload to count their lengths (a few seconds for 10 million frames).

--scenario injects, on top of that traffic, troubles that rocescope's reports
name as events, and healthy traffic that looks like them and must raise none,
each once, spread over --duration; the truth lists each with who and when
(events, look_alikes). The troubles: pfc_storm (a priority paused by one MAC's
XOFF frames every 50 µs for 300 ms), incast (16 senders at 10 Gb/s into one
destination for 3 ms), nak (a loss after the mirror, a NAK, go-back-N),
timeout (a message's last packet lost, 16 ms of silence, the message again),
rnr (a SEND refused with an RNR NAK), ce_without_cnp (100 CE marks a receiver
ACKs without a CNP). The look-alikes: fan_in (64 senders at 0.5 Gb/s into one
destination for 20 ms), isolated_pauses (10 pauses 10 ms apart), psn_wrap
(PSNs through 0) and read_responses (READs of 256 KiB). "trouble", "healthy"
and "all" name groups. Add --loss 0 --rnr 0 for background traffic without
retransmissions of its own.`,
		example: `  rocescope gen -o /tmp/demo.pcap && rocescope replay /tmp/demo.pcap
  rocescope gen -o big.pcap --packets 10000000 --flows 100000 --seed 7 --truth big.truth.json
  rocescope gen -o cut.pcap --snaplen 128      # frames cut as a mirror port with truncation would
  rocescope gen -o trouble.pcap --truth trouble.json --scenario all --loss 0 --rnr 0 --snaplen 128`,
		flags: func(fs *pflag.FlagSet) runner {
			var cfg synth.Config
			out := fs.StringP("output", "o", "", "write the trace to this file (- is standard output); or give FILE as the argument")
			truth := fs.String("truth", "", "write the ground truth as JSON to this file")
			fs.IntVar(&cfg.Packets, "packets", 100000, "frames to write")
			fs.IntVar(&cfg.Flows, "flows", 1000, "RC connections (each is two flows, one per direction)")
			fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed; the same seed gives the same bytes")
			fs.DurationVar(&cfg.Duration, "duration", 0, "time the trace spans (default: the generator's, 3s)")
			fs.DurationVar(&cfg.Window, "window", 0, "window length the ground truth is computed for (default 1s)")
			snap := fs.Int("snaplen", 0, "cut frames to this many bytes, keeping their on-wire length (0: whole frames)")
			scenario := fs.String("scenario", "", "inject troubles and healthy look-alikes: a comma-separated list of pfc_storm, incast, nak, timeout, rnr, ce_without_cnp, fan_in, isolated_pauses, psn_wrap, read_responses, or trouble, healthy, all")
			loss := fs.Float64("loss", -1, "probability that a new request packet is lost (default: the generator's, 0.0005)")
			rnr := fs.Float64("rnr", -1, "probability that a SEND meets no receive buffer, an RNR NAK (default: the generator's, 0.005)")
			fs.String("config", "", "read flag values from this YAML file (keys are flag names; flags on the command line win)")
			return func(ctx context.Context, e *env, args []string) error {
				switch {
				case len(args) == 1 && *out == "":
					*out = args[0]
				case len(args) > 0:
					return usagef("gen takes one output file (or -o FILE), got %q", args)
				case *out == "":
					return usagef("no output file: give -o FILE or FILE")
				}
				if cfg.Packets < 1 {
					return usagef("--packets %d: want at least 1", cfg.Packets)
				}
				if cfg.Flows < 1 {
					return usagef("--flows %d: want at least 1", cfg.Flows)
				}
				if *snap < 0 {
					return usagef("--snaplen %d: want 0 or more", *snap)
				}
				cfg.SnapLen = *snap
				var err error
				if cfg.Scenario, err = synth.ParseScenario(*scenario); err != nil {
					return usagef("--scenario: %v", err)
				}
				for _, p := range []struct {
					name string
					v    float64
					to   *float64
				}{{"loss", *loss, &cfg.LossProb}, {"rnr", *rnr, &cfg.RNRProb}} {
					switch {
					case fs.Changed(p.name) && !(p.v >= 0 && p.v <= 1):
						return usagef("--%s %v: want a probability from 0 to 1", p.name, p.v)
					case fs.Changed(p.name) && p.v == 0:
						*p.to = synth.Off
					case fs.Changed(p.name):
						*p.to = p.v
					}
				}
				return generate(ctx, e, &cfg, *out, *truth)
			}
		},
	}
}

// generate writes the trace cfg describes to path and its truth to
// truthPath when set.
func generate(ctx context.Context, e *env, cfg *synth.Config, path, truthPath string) (err error) {
	frames, size, err := estimateSize(ctx, cfg)
	if err != nil {
		return usagef("%v", err)
	}
	fmt.Fprintf(e.stderr, "rocescope gen: writing %d frames to %s: %s (%d bytes)\n", frames, path, export.FormatBytes(uint64(size)), size)
	src, err := synth.New(cfg)
	if err != nil {
		return usagef("%v", err)
	}
	defer src.Close()
	var w io.Writer = e.stdout
	if path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	pw, err := file.NewWriter(bw, &file.WriterOptions{SnapLen: cfg.SnapLen})
	if err != nil {
		return err
	}
	if err := capture.Each(ctx, src, capture.NewBatch(256), pw.WriteBatch); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := pw.Flush(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if truthPath == "" {
		return nil
	}
	data, err := json.MarshalIndent(src.Truth(), "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(truthPath, append(data, '\n'), 0o644)
}

// Header lengths of the classic pcap files gen writes.
const (
	pcapFileHeader   = 24
	pcapRecordHeader = 16
)

// estimateSize returns the frames of the trace of cfg, the scenarios'
// included, and the bytes of its pcap file: a record header and the
// captured bytes of every frame. The frames' lengths do not depend on the
// snap length, so it generates them cut to the shortest, whose payload the
// generator does not write, and adds up what cfg would capture. (Means over
// a part of the trace missed by up to 7 %: the mix of frames drifts with
// the rate limits, the jitter flows' windows and the density.)
func estimateSize(ctx context.Context, cfg *synth.Config) (frames, size int64, err error) {
	count := *cfg
	if cfg.ERSPAN == 0 {
		count.SnapLen = synth.MinSnapLen
	}
	src, err := synth.New(&count)
	if err != nil {
		return 0, 0, err
	}
	defer src.Close()
	size = pcapFileHeader
	err = capture.Each(ctx, src, capture.NewBatch(256), func(b *capture.Batch) error {
		for _, f := range b.Frames {
			n := int64(f.OrigLen)
			if cfg.SnapLen > 0 {
				n = min(n, int64(cfg.SnapLen))
			}
			size += pcapRecordHeader + n
			frames++
		}
		return nil
	})
	return frames, size, err
}
