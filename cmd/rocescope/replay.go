package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
)

func replayCommand() *command {
	return &command{
		name:    "replay",
		args:    "FILE...",
		summary: "analyze capture files (pcap, pcapng, ibdump, gzip; - for stdin)",
		about: `Replay reads capture files, merged by frame time as mergecap merges them
(--concat: one after another), and writes one report per window. Windows
are aligned to multiples of --window since the Unix epoch by packet time, so
replays are deterministic and hosts agree on window boundaries. Formats are
recognized by their magic: classic pcap (µs or ns), pcapng, ibdump output
(Ethernet or ERF link type) and gzip-compressed files.

With --summary it writes one report of the whole run instead: each counter,
of the run and of each flow, is its sum over the windows, rates are over the
time the frames span, and the latency quantiles and distinct flows are those
of the whole run. (A --window as long as the file is not the same: windows
are aligned to multiples of their length since the epoch, so a 24h window
still splits a trace that crosses midnight UTC.)

Damaged files stop the replay with an error naming the file and byte offset;
with --keep-going the damaged records are counted and the replay goes on.
Every replay ends with one line on standard error, as tcpdump does: frames,
RoCE frames, windows, distinct flows, the time the traffic spans, and how
long the replay took.

Each report names the window's trouble as events: an incast (many sources
bursting into one destination within --burst), a PFC storm (a priority kept
paused by one source MAC), a retransmission episode and its cause (a NAK, an
RNR NAK, or a timeout), and a flow whose CE marks its receiver answered with
no CNP. The flags from --link-rate to --max-events set their rules.
` + filterHelp,
		example: `  rocescope replay trace.pcap
  rocescope replay --window 100ms --elephant-rate 10G --top 50 a.pcap b.pcapng.gz
  rocescope replay --format csv -o flows.csv --exact trace.pcap
  rocescope replay --summary --exact ibdump.pcap   # one report of the whole file, every QP
  rocescope replay --format html -o report.html trace.pcap   # charts, opens offline
  rocescope replay --state-out states/ trace.pcap   # then: rocescope merge states/*
  rocescope replay --host cap1 --state-out kafka://k1:9092/states -o clickhouse://ch1:8123/rocescope trace.pcap
  rocescope replay -o report.jsonl -o ipfix://collector:4739 trace.pcap   # a file and an IPFIX collector
  tcpdump -w - -i eth1 udp port 4791 | rocescope replay -
  rocescope replay --qp 0x4bdaaf,0x9d5d7d trace.pcap     # one RC connection
  rocescope replay -f 'host 10.0.0.5' --op read,ack trace.pcap`,
		flags: func(fs *pflag.FlagSet) runner {
			var o reportOptions
			o.bind(fs)
			var fo filterOptions
			fo.bind(fs)
			keepGoing := fs.Bool("keep-going", false, "count damaged records and go on instead of stopping at the first")
			concat := fs.Bool("concat", false, "read the files one after another instead of merging them by frame time")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("no capture file given")
				}
				o.inputs = args
				if err := o.check(); err != nil {
					return err
				}
				set, err := fo.set(fo.expr)
				if err != nil {
					return err
				}
				src, err := file.Open(args, &file.Options{KeepGoing: *keepGoing, Concat: *concat})
				if err != nil {
					return err
				}
				defer src.Close()
				a := &analysis{opts: &o, filter: set, progress: func() string { return progressText(src.Progress()) }}
				err = a.run(ctx, e, []capture.Source{src})
				if st := src.Stats(); st.Errors > 0 {
					files := strings.Join(args, ", ")
					fmt.Fprintf(e.stderr, "rocescope replay: %s: records skipped as damaged: %d\n", files, st.Errors)
					if st.Received == 0 && err == nil {
						err = fmt.Errorf("%s: not a capture: no record could be read", files)
					}
				}
				return err
			}
		},
	}
}

// progressText describes how far a replay got.
func progressText(p file.Progress) string {
	s := fmt.Sprintf("file %d/%d", p.File, p.Files)
	if p.Total > 0 {
		s += fmt.Sprintf(" %.0f%%", 100*float64(p.Done)/float64(p.Total))
	}
	return s
}
