package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/internal/mapped"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
	"github.com/rocescope/rocescope/metrics/state"
	"github.com/rocescope/rocescope/metrics/state/kafka"
)

func mergeCommand() *command {
	return &command{
		name:    "merge",
		args:    "STATE...",
		summary: "merge the window states of several capture hosts into one report",
		about: `Merge reads window states written by "replay --state-out" or "capture
--state-out" on any number of hosts, aligns them by window start, merges them
with the same function the engine uses to merge its workers, and writes the
reports replay would have written had one host seen everything. Top flows,
elephants and jitter are recomputed on the merged state; each report lists
the hosts that contributed.

A STATE is a state file or a directory of per-window state files. Each
file's states must be in window order, as replay and capture write them.
Merge reads the files window by window and writes each window's report as
soon as every file is past it, so that it holds a few windows however many
the files hold. States made with different sketch configurations or window
lengths, damaged states, states out of window order, files that are not
state files or not regular files, and a host delivering the same part of a
window twice are errors naming the file and offset; the reports of the
windows before it are written. With --keep-going merge says so and skips
them instead. A host's states of one window that cover different parts of
it (a capture restarted within the window, a later segment after its clock
stepped back) are added together. A state whose sketches would take more
memory than --max-state-bytes is refused before it is decoded.

With --follow, merge watches the directories and emits each window, in time
order, once every host of --hosts (or every host seen so far) delivered it,
or --timeout after the window's first state arrived (while it reads a
backlog: once it read states --timeout later than the window). A window
reported without a host of --hosts lists it in missing_hosts, and merge says
so once per host and outage. A state that arrives after its window was
emitted is skipped with a warning. Files are read as they grow: a state not
yet complete is read again at the next poll, a file that vanishes is
forgotten, and a file that is not a state file, not a regular file (a FIFO)
or holds a damaged state is skipped with a warning. On interrupt merge reads
the directories once more, emits every pending window and exits with status
0.

A state of a window more than an hour (and two windows) ahead of every other
host's newest (a host whose clock is ahead, or a damaged state) is held
apart and refused with a warning, unless the states that follow confirm the
jump, so that it cannot make the windows of the other hosts late. Merge
holds at most --max-pending windows; past that, it reports the oldest
without the hosts it lacks.

A STATE may instead be one Kafka topic, kafka://BROKER[,BROKER...]/TOPIC,
that "replay --state-out kafka://..." or "capture --state-out kafka://..."
write to. Merge reads it as a member of the consumer group --group: mergers
of one group share the topic's partitions (a window's states all go to one
partition). Without --follow merge reads what the topic holds, emits it and
exits; with --follow it runs on, and emits a window once every host of
--hosts delivered it or --wait (the same as --timeout) passed. A record that
is not a state is skipped with a warning naming its partition and offset.

Delivery: merge writes a window's report, makes it durable in every output
(a file fsynced, ClickHouse rows inserted), and only then acknowledges its
states (commits the topic's offsets). A merger that dies before that is
delivered those states again: every window is reported at least once, and
one whose report was written but not yet acknowledged may be reported
twice. On interrupt it emits the windows that are ready and leaves the
others to the next run. With several mergers, jitter and prev_rate_bps are
measured against the previous window each merger reported.

Merge ends with one line on standard error: the frames, RoCE frames and
windows it reported, the distinct flows and the hosts. With --summary it
writes one report of every window it merged, when it ends, instead of one
per window (not with a kafka:// input, whose windows are acknowledged as
they are reported).`,
		example: `  rocescope merge hostA.states hostB.states
  rocescope merge --format csv -o fleet.csv /shared/states/
  rocescope merge --follow --hosts cap1,cap2,cap3 --timeout 5s /shared/states/
  rocescope merge --follow --hosts cap1,cap2,cap3 --wait 5s -o clickhouse://ch1:8123/rocescope kafka://k1:9092,k2:9092/states`,
		flags: func(fs *pflag.FlagSet) runner {
			var o reportOptions
			o.bind(fs)
			for _, f := range ignoredByMerge {
				fs.MarkHidden(f.flag) // accepted, for shared --config files, but not offered
			}
			follow := fs.Bool("follow", false, "keep watching the directories for new state files (or keep reading the kafka:// topic)")
			hosts := fs.StringSlice("hosts", nil, "the hosts expected: a window that lacks one lists it in missing_hosts; with --follow or kafka://, a window every one delivered is complete")
			timeout := fs.Duration("timeout", state.DefaultTimeout, "with --follow or kafka://: emit a window this long after its first state even if hosts are missing (--wait is the same flag)")
			poll := fs.Duration("poll", state.DefaultPoll, "with --follow: how often to look for new files (with kafka://, the longest wait for records)")
			group := fs.String("group", kafka.DefaultGroup, "with a kafka:// input: the consumer group, whose members share the topic's partitions")
			keepGoing := fs.Bool("keep-going", false, "skip states that cannot be read or merged, saying so, instead of stopping at the first (always so with --follow and kafka://)")
			maxPending := fs.Int("max-pending", state.DefaultMaxPending, "the most windows merge holds waiting for hosts (each takes its sketches' memory, some 5 MB by default); past it the oldest is reported without them")
			maxState := fs.Int64("max-state-bytes", 0, fmt.Sprintf("refuse a state whose sketches would take more memory than this many bytes (default 4 times a window's sketches in the local configuration: %d)", stateLimitFactor*defaultSketchBytes))
			fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
				if name == "wait" {
					name = "timeout" // --wait: the name the Kafka merge goes by
				}
				return pflag.NormalizedName(name)
			})
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("no state file or directory given")
				}
				for _, f := range ignoredByMerge {
					if fs.Changed(f.flag) {
						fmt.Fprintf(e.stderr, "rocescope merge: --%s is ignored: %s\n", f.flag, f.why)
					}
				}
				o.inputs = args
				fromKafka := slices.ContainsFunc(args, kafka.IsURL)
				switch {
				case *maxState < 0 || fs.Changed("max-state-bytes") && *maxState == 0:
					return usagef("--max-state-bytes %d: want more than 0", *maxState)
				case *maxPending < 1:
					return usagef("--max-pending %d: want at least 1", *maxPending)
				case *timeout <= 0 || *poll <= 0:
					return usagef("--timeout %v and --poll %v: want more than 0", *timeout, *poll)
				case fromKafka && len(args) > 1:
					return usagef("a kafka:// input is merged alone, not with %d other inputs", len(args)-1)
				case !fromKafka && fs.Changed("group"):
					return usagef("--group needs a kafka:// input")
				case fromKafka && o.summary:
					return usagef("--summary holds every window until the merge ends, and a kafka:// input acknowledges each once its report is out: merge the topic without --summary")
				}
				for _, h := range *hosts {
					if err := metrics.CheckHost(h); err != nil {
						return usagef("--hosts: %v", err)
					}
				}
				if !*follow && !fromKafka {
					for _, name := range []string{"timeout", "poll"} {
						if fs.Changed(name) {
							return usagef("--%s needs --follow or a kafka:// input", name)
						}
					}
				}
				read, err := o.stateLimit(*maxState)
				if err != nil {
					return err
				}
				cfg := &state.MergeConfig{Hosts: *hosts, Timeout: *timeout, MaxPending: *maxPending,
					KeepGoing: *keepGoing || *follow || fromKafka, Log: log.New(e.stderr, "rocescope merge: ", 0)}
				var in state.Input
				if fromKafka {
					c, err := openConsumer(args[0], &kafka.ConsumerConfig{Group: *group, Read: read, Follow: *follow, Poll: *poll})
					if err != nil {
						return err
					}
					defer c.Close()
					defer reportSkipped(e, args[0], c)
					in = c
				} else {
					if *follow {
						for _, d := range args {
							if st, err := os.Stat(d); err != nil || !st.IsDir() {
								return usagef("--follow needs directories; %s is not one", d)
							}
						}
					}
					in = state.NewFileInput(args, &state.FileInputConfig{Read: read, Follow: *follow, Poll: *poll})
				}
				stats, err := mergeInto(ctx, e, &o, in, cfg)
				if err == nil && stats.Skipped > 0 && !*follow && !*keepGoing {
					err = fmt.Errorf("%d states skipped (--keep-going skips them without failing), the first: %w", stats.Skipped, stats.FirstSkipped)
				}
				if errors.Is(err, metrics.ErrStateSize) {
					return fmt.Errorf("%w (see --max-state-bytes)", err)
				}
				return err
			}
		},
	}
}

// mergeInto merges what in delivers into the report outputs of o, and
// ends with the run's line on standard error.
func mergeInto(ctx context.Context, e *env, o *reportOptions, in state.Input, cfg *state.MergeConfig) (_ state.MergeStats, err error) {
	rc, err := o.config(false)
	if err != nil {
		return state.MergeStats{}, err
	}
	mapped.SetHugePages(mapped.HugePages(o.hugePages))
	reporter, err := report.NewReporter(rc)
	if err != nil {
		return state.MergeStats{}, usagef("%v", err)
	}
	sink, closeSink, err := o.sink(e)
	if err != nil {
		return state.MergeStats{}, err
	}
	out, closeSink, err := o.wrap(sink, closeSink, rc)
	if err != nil {
		return state.MergeStats{}, err
	}
	defer func() {
		err = errors.Join(err, closeSink())
		out.end(e.stderr, "merge", err)
	}()
	return state.Merge(ctx, in, &reportOutput{reporter: reporter, sink: out}, cfg)
}

// reportOutput is the state.Output of merge: it writes the merged windows'
// reports into the report sink.
type reportOutput struct {
	reporter *report.Reporter
	sink     export.Sink
}

var _ state.Output = (*reportOutput)(nil)

// Write builds w's report and writes it.
func (o *reportOutput) Write(w *metrics.Window, missing []string) error {
	r := o.reporter.Build(w)
	r.MissingHosts = missing
	return o.sink.Write(r)
}

// Sync flushes the sink and makes what it wrote durable.
func (o *reportOutput) Sync(ctx context.Context) error { return export.Sync(ctx, o.sink) }

// ignoredByMerge are the report flags that shape the analysis, which the
// states carry, or outputs merge does not write. Merge warns about them
// rather than failing, so that one --config file can serve replay and merge.
var ignoredByMerge = []struct{ flag, why string }{
	{"window", "the states carry their window length"},
	{"lateness", "the states are of closed windows"},
	{"workers", "merge runs on one goroutine"},
	{"roce-port", "the states are decoded already"},
	{"host", "reports list the hosts whose states they merge"},
	{"state-out", "merge writes reports only"},
	{"prometheus", "merge writes reports only"},
	{"table-size", "the states carry their flows"},
	{"burst", "the states carry their burst interval"},
	{"progress", "merge shows no progress"},
}

// stateLimitFactor is how many times the sketches of a window of the local
// configuration a state's may take by default.
const stateLimitFactor = 4

// defaultSketchBytes is the memory of a window's sketches with the
// default configuration.
var defaultSketchBytes = func() int64 {
	n, err := new(metrics.Config).SketchBytes()
	if err != nil {
		panic(fmt.Sprintf("rocescope: sketches of the default configuration: %v", err))
	}
	return n
}()

// stateLimit returns the options that bound the states merge decodes:
// maxSketchBytes (--max-state-bytes), or if 0, stateLimitFactor times a
// window's sketches in the configuration of o.
func (o *reportOptions) stateLimit(maxSketchBytes int64) (state.ReadOptions, error) {
	if maxSketchBytes == 0 {
		cfg, err := o.config(false)
		if err != nil {
			return state.ReadOptions{}, err
		}
		n, err := cfg.SketchBytes()
		if err != nil {
			return state.ReadOptions{}, usagef("%v", err)
		}
		maxSketchBytes = stateLimitFactor * n
	}
	return state.ReadOptions{MaxSketchBytes: maxSketchBytes}, nil
}
