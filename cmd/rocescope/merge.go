package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

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

A STATE is a state file or a directory of per-window state files. States
made with different sketch configurations or window lengths, damaged states
and a host delivering the same window twice are errors naming the file.

With --follow, merge watches the directories and emits each window, in time
order, once every host of --hosts (or every host seen so far) delivered it,
or --timeout after the window's first state arrived. A state that arrives
after its window was emitted is skipped with a warning. Each file is read
once, when it appears: replay and capture write per-window files under a
temporary name and rename them, so none is read half written. On interrupt
merge reads the directories once more, emits every pending window and exits
with status 0.

A STATE may instead be one Kafka topic, kafka://BROKER[,BROKER...]/TOPIC,
that "replay --state-out kafka://..." or "capture --state-out kafka://..."
write to. Merge reads it as a member of the consumer group --group: mergers
of one group share the topic's partitions (a window's states all go to one
partition). Without --follow merge reads what the topic holds, emits it and
exits; with --follow it runs on, and emits a window once every host of
--hosts delivered it or --wait (the same as --timeout) passed. Offsets are
committed once a window's report is written, so a merger that stops, or
whose partitions move to another, loses no window and reports none twice.
On interrupt it emits the windows that are ready and leaves the others to
the next run. With several mergers, jitter and prev_rate_bps are measured
against the previous window each merger reported.`,
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
			hosts := fs.StringSlice("hosts", nil, "with --follow: the hosts whose states complete a window")
			timeout := fs.Duration("timeout", 10*time.Second, "with --follow: emit a window this long after its first state even if hosts are missing (--wait is the same flag)")
			poll := fs.Duration("poll", 500*time.Millisecond, "with --follow: how often to look for new files (with kafka://, the longest wait for records)")
			group := fs.String("group", kafka.DefaultGroup, "with a kafka:// input: the consumer group, whose members share the topic's partitions")
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
				m := &merger{opts: &o, e: e, expect: *hosts, timeout: *timeout}
				if !*follow {
					for _, name := range []string{"hosts", "timeout", "poll"} {
						if fs.Changed(name) {
							return usagef("--%s needs --follow", name)
						}
					}
				} else if *timeout <= 0 || *poll <= 0 {
					return usagef("--timeout %v and --poll %v: want more than 0", *timeout, *poll)
				}
				if slices.ContainsFunc(args, kafka.IsURL) {
					if len(args) > 1 {
						return usagef("a kafka:// input is merged alone, not with %d other inputs", len(args)-1)
					}
					return m.runKafka(ctx, args[0], *group, *follow, *poll)
				}
				if fs.Changed("group") {
					return usagef("--group needs a kafka:// input")
				}
				if *follow {
					for _, d := range args {
						if st, err := os.Stat(d); err != nil || !st.IsDir() {
							return usagef("--follow needs directories; %s is not one", d)
						}
					}
				}
				return m.run(ctx, &fileInput{args: args, follow: *follow, poll: *poll})
			}
		},
	}
}

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
	{"progress", "merge shows no progress"},
}

// merger merges window states into reports. One merge path serves every
// transport: a stateInput hands it states, it merges them, emits the
// windows that are ready in time order and tells the input which were
// reported.
type merger struct {
	opts     *reportOptions
	e        *env
	expect   []string // --hosts
	timeout  time.Duration
	merged   *state.Merger
	first    map[int64]time.Time // when each pending window's first state arrived
	hosts    map[string]bool     // every host seen
	reporter *report.Reporter
	sink     export.Sink
}

// stateInput is where merge reads window states from: files and
// directories, or a Kafka topic.
type stateInput interface {
	// Read hands the states that arrived since the last call to m.add,
	// waiting at most until ctx is done or the poll interval passes, and
	// says how far the input got. When ctx is done it returns what a last
	// read found.
	Read(ctx context.Context, m *merger) (inputState, error)
	// Reported says that the reports of every window up to the one that
	// starts at start are written out.
	Reported(ctx context.Context, start int64) error
}

// inputState is how far an input got in a Read.
type inputState int

const (
	// inputBehind: states that exist were not read yet; emit nothing.
	inputBehind inputState = iota + 1
	// inputCurrent: everything there is was read and more may come; emit
	// the windows every host delivered or that waited --timeout.
	inputCurrent
	// inputEnd: everything was read and nothing more will come; emit
	// every pending window and stop.
	inputEnd
)

func (m *merger) setup() (func() error, error) {
	cfg, err := m.opts.config(false)
	if err != nil {
		return nil, err
	}
	if m.reporter, err = report.NewReporter(cfg); err != nil {
		return nil, usagef("%v", err)
	}
	sink, closeSink, err := m.opts.sink(m.e)
	if err != nil {
		return nil, err
	}
	m.sink = sink
	m.restart()
	m.hosts = make(map[string]bool)
	return closeSink, nil
}

// restart forgets the pending windows: their states will be read again.
func (m *merger) restart() {
	m.merged = state.NewMerger()
	m.first = make(map[int64]time.Time)
}

// run merges what in delivers until it reaches its end, or until ctx is
// done.
func (m *merger) run(ctx context.Context, in stateInput) (err error) {
	closeSink, err := m.setup()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeSink()) }()
	for {
		st, err := in.Read(ctx, m)
		if err != nil {
			return err
		}
		now := time.Now()
		n, last, err := m.emit(func(s int64) bool {
			return st == inputEnd || st == inputCurrent && (m.complete(s) || now.Sub(m.first[s]) >= m.timeout)
		})
		if err != nil {
			return err
		}
		if err := m.sink.Flush(); err != nil {
			return err
		}
		if n > 0 {
			// Record what was reported even when ctx is done.
			if err := in.Reported(context.WithoutCancel(ctx), last); err != nil {
				return err
			}
		}
		if st == inputEnd || ctx.Err() != nil {
			return nil
		}
	}
}

// complete reports whether every expected host delivered the window that
// starts at start: the hosts of --hosts, or else every host seen so far.
func (m *merger) complete(start int64) bool {
	expect := m.expect
	if len(expect) == 0 {
		expect = slices.Collect(maps.Keys(m.hosts))
	}
	for _, h := range expect {
		if !m.merged.Has(start, h) {
			return false
		}
	}
	return true
}

// spare returns a window to decode the next state into.
func (m *merger) spare() *metrics.Window { return m.merged.Spare() }

// add merges the state w, read from src, into its pending window. A state
// of a window already emitted (with --follow, after --timeout) is skipped
// with a warning; any other bad state is an error naming src.
func (m *merger) add(src string, w *metrics.Window) error {
	switch err := m.merged.Add(src, w); {
	case errors.Is(err, state.ErrLate):
		fmt.Fprintf(m.e.stderr, "rocescope merge: %v: reports up to a later window are out (raise --timeout); state skipped\n", err)
	case err != nil:
		return err
	default:
		if _, ok := m.first[w.Start]; !ok {
			m.first[w.Start] = time.Now()
		}
		for _, h := range w.Hosts {
			m.hosts[h] = true
		}
	}
	return nil
}

// emit reports the pending windows in time order for as long as ready says
// the oldest one is done, and returns how many it reported and the start
// of the last.
func (m *merger) emit(ready func(start int64) bool) (n int, last int64, err error) {
	for _, s := range m.merged.Pending() {
		if !ready(s) {
			break
		}
		w := m.merged.Take()
		delete(m.first, s)
		if err := m.sink.Write(m.reporter.Build(w)); err != nil {
			return n, last, err
		}
		n, last = n+1, s
	}
	return n, last, nil
}

// fileInput reads state files and directories: once, or, with follow,
// again every poll interval.
type fileInput struct {
	args   []string
	follow bool
	poll   time.Duration
	seen   map[string]bool // state files read
	ticker *time.Ticker    // with follow, after the first read
}

var _ stateInput = (*fileInput)(nil)

// Read reads the state files not read yet. Without follow it reads them
// all and returns inputEnd: nothing is written unless every state was read
// and merged. With follow it waits for the next poll first (but for the
// first read), and returns inputEnd once ctx is done.
func (in *fileInput) Read(ctx context.Context, m *merger) (inputState, error) {
	if in.seen == nil {
		in.seen = make(map[string]bool)
	} else if in.follow {
		if in.ticker == nil {
			in.ticker = time.NewTicker(in.poll)
		}
		select {
		case <-ctx.Done():
			in.ticker.Stop()
		case <-in.ticker.C:
		}
	}
	files, err := stateFiles(in.args)
	if err != nil {
		return 0, err
	}
	if !in.follow && len(files) == 0 {
		return 0, fmt.Errorf("no %s files in %s", state.Ext, strings.Join(in.args, ", "))
	}
	for _, f := range files {
		if !in.follow {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		if !in.seen[f] {
			if err := in.readFile(m, f); err != nil {
				return 0, err
			}
		}
	}
	if !in.follow || ctx.Err() != nil {
		return inputEnd, nil
	}
	return inputCurrent, nil
}

// Reported does nothing: files are not acknowledged.
func (in *fileInput) Reported(context.Context, int64) error { return nil }

// stateFiles expands directories into their state files, in name order.
func stateFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		for _, de := range ents {
			if !de.IsDir() && strings.HasSuffix(de.Name(), state.Ext) {
				files = append(files, filepath.Join(a, de.Name()))
			}
		}
	}
	slices.Sort(files)
	return files, nil
}

// readFile merges every state of one file into the pending windows.
func (in *fileInput) readFile(m *merger, path string) error {
	in.seen[path] = true
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sr := state.NewReader(f, path)
	n := 0
	for {
		w := m.spare()
		err := sr.Next(w)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		n++
		if err := m.add(path, w); err != nil {
			return err
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: no window state in the file: %w", path, metrics.ErrState)
	}
	return nil
}
