package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

A STATE is a state file or a directory of per-window state files. Each
file's states must be in window order, as replay and capture write them.
Merge reads the files window by window and writes each window's report as
soon as every file is past it, so that it holds one window at a time however
many the files hold. States made with different sketch configurations or
window lengths, damaged states, states out of window order, a host
delivering the same window twice and files that are not regular files are
errors naming the file; the reports of the windows before it are written.
A state whose sketches would take more memory than --max-state-bytes is
refused before it is decoded.

With --follow, merge watches the directories and emits each window, in time
order, once every host of --hosts (or every host seen so far) delivered it,
or --timeout after the window's first state arrived. A state that arrives
after its window was emitted is skipped with a warning. Files are read as
they grow: a state not yet complete (its length and checksum) is read again
at the next poll, a file that vanishes is forgotten, and a file that is not
a regular file (a FIFO) is skipped with a warning. On interrupt merge reads
the directories once more, emits every pending window and exits with status
0.

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
against the previous window each merger reported.

Merge ends with one line on standard error: the frames, RoCE frames and
windows it reported, the distinct flows and the hosts. With --summary it
writes one report of every window it merged, when it ends, instead of one
per window.`,
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
				if *maxState < 0 || fs.Changed("max-state-bytes") && *maxState == 0 {
					return usagef("--max-state-bytes %d: want more than 0", *maxState)
				}
				if !*follow {
					for _, name := range []string{"hosts", "timeout", "poll"} {
						if fs.Changed(name) {
							return usagef("--%s needs --follow", name)
						}
					}
				} else if *timeout <= 0 || *poll <= 0 {
					return usagef("--timeout %v and --poll %v: want more than 0", *timeout, *poll)
				}
				read, err := o.stateLimit(*maxState)
				if err != nil {
					return err
				}
				m := &merger{opts: &o, e: e, expect: *hosts, timeout: *timeout}
				switch {
				case slices.ContainsFunc(args, kafka.IsURL):
					if len(args) > 1 {
						return usagef("a kafka:// input is merged alone, not with %d other inputs", len(args)-1)
					}
					err = m.runKafka(ctx, args[0], *group, &read, *follow, *poll)
				case fs.Changed("group"):
					return usagef("--group needs a kafka:// input")
				default:
					if *follow {
						for _, d := range args {
							if st, err := os.Stat(d); err != nil || !st.IsDir() {
								return usagef("--follow needs directories; %s is not one", d)
							}
						}
					}
					read.Growing = *follow
					err = m.run(ctx, &fileInput{args: args, opts: read, follow: *follow, poll: *poll})
				}
				if m.out != nil {
					m.out.end(e.stderr, "merge", err)
				}
				if errors.Is(err, metrics.ErrStateSize) {
					return fmt.Errorf("%w (see --max-state-bytes)", err)
				}
				return err
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
	out      *runOutput // the sink, counting what it reports
}

// stateInput is where merge reads window states from: files and
// directories, or a Kafka topic.
type stateInput interface {
	// Read hands the states that arrived since the last call to m.add,
	// waiting at most until ctx is done or the poll interval passes, and
	// says how far the input got. A Read called once ctx is done is the
	// last: it returns what a last read found. An input that reads in
	// window order calls m.settled as it goes, so that the windows no
	// state still to be read can add to are emitted before the next is
	// read.
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

// setup makes the reporter, the sink and an empty merge, and returns the
// function that flushes and closes the sink.
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
	if m.out, closeSink, err = m.opts.wrap(sink, closeSink, cfg); err != nil {
		return nil, err
	}
	m.sink = m.out
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
		// A Read begun once ctx is done is the last: one that ctx
		// interrupted is followed by another.
		final := ctx.Err() != nil
		st, err := in.Read(ctx, m)
		if err != nil {
			return err
		}
		now := time.Now()
		n, last, err := m.emit(func(s int64) bool { return m.ready(st, now, s) })
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
		if st == inputEnd || final {
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
// of a window already emitted (with --follow, after --timeout, or of a
// later segment of a capture whose clock stepped back) is skipped with a
// warning; any other bad state is an error naming src.
func (m *merger) add(src string, w *metrics.Window) error {
	switch err := m.merged.Add(src, w); {
	case errors.Is(err, state.ErrLate):
		why := "reports up to a later window are out (raise --timeout)"
		if w.Segment > 0 {
			why = fmt.Sprintf("it is of segment %d, after its capture's clock stepped back, and its window is reported already (a merge of the files once, without --follow, adds it)", w.Segment)
		}
		fmt.Fprintf(m.e.stderr, "rocescope merge: %v: %s; state skipped\n", err, why)
		m.merged.Recycle(w)
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

// ready returns whether the pending window that starts at start is done,
// at now, for an input that got as far as st: every window once the input
// ended, a window that every host delivered or that waited --timeout while
// it is current, none while it is behind.
func (m *merger) ready(st inputState, now time.Time, start int64) bool {
	return st == inputEnd || st == inputCurrent && (m.complete(start) || now.Sub(m.first[start]) >= m.timeout)
}

// settled emits the pending windows that start before before and are
// ready for an input that will have got as far as st once it read
// everything it holds now: an input reading in window order calls it as
// soon as it is past them, so that it holds few windows however many it
// reads. The input is not told of these windows through Reported: it
// emitted them.
func (m *merger) settled(st inputState, before int64) error {
	now := time.Now()
	_, _, err := m.emit(func(s int64) bool { return s < before && m.ready(st, now, s) })
	return err
}

// emit reports the pending windows in time order for as long as ready says
// the oldest one is done, and returns how many it reported and the start
// of the last. It recycles the windows reported.
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
		m.merged.Recycle(w)
		n, last = n+1, s
	}
	return n, last, nil
}

// fileInput reads state files and directories: once, or, with follow,
// again every poll interval, from where each file's states ended. It reads
// the files in window order with state.Files, emitting each window as soon
// as every file is past it, so that it holds few windows however many the
// files hold.
type fileInput struct {
	args    []string
	opts    state.ReadOptions
	follow  bool
	poll    time.Duration
	offsets map[string]int64 // state files read: where their next state begins
	refused map[string]bool  // files skipped with a warning
	ticker  *time.Ticker     // with follow, after the first read
}

var _ stateInput = (*fileInput)(nil)

// Read reads the states not read yet. Without follow it reads them all and
// returns inputEnd; an error stops it, after the reports of the windows
// before the bad state. With follow it waits for the next poll first (but
// for the first read) and reads what is new: a state not yet complete is
// left for the next poll, a file that vanished is forgotten, and a file
// that is not a regular file is skipped with a warning, once. Once ctx is
// done it reads the directories a last time and returns inputEnd; a read
// that ctx interrupts returns inputBehind, and the merger reads again.
func (in *fileInput) Read(ctx context.Context, m *merger) (inputState, error) {
	if in.offsets == nil {
		in.offsets = make(map[string]int64)
		in.refused = make(map[string]bool)
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
	if !in.follow {
		return inputEnd, in.pass(ctx, m, inputEnd)
	}
	// After an interrupt, the directories are read a last time without
	// the context: only regular files are read, which do not block.
	done := ctx.Err() != nil
	rctx, st := ctx, inputCurrent
	if done {
		rctx, st = context.WithoutCancel(ctx), inputEnd
	}
	err := in.pass(rctx, m, st)
	if !done && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return inputBehind, nil // interrupted while reading: the merger reads a last time
	}
	return st, err
}

// Reported does nothing: files are not acknowledged.
func (in *fileInput) Reported(context.Context, int64) error { return nil }

// pass reads what is new in the state files in window order, and has m
// emit the windows ready for st that every file is past.
func (in *fileInput) pass(ctx context.Context, m *merger, st inputState) error {
	files, err := stateFiles(in.args)
	if err != nil {
		return err
	}
	if !in.follow && len(files) == 0 {
		return fmt.Errorf("no %s files in %s", state.Ext, strings.Join(in.args, ", "))
	}
	for f := range in.offsets {
		if _, found := slices.BinarySearch(files, f); !found {
			delete(in.offsets, f) // gone (retention clean-up)
		}
	}
	rd := state.NewFiles(&in.opts)
	for _, f := range files {
		off, read := in.offsets[f]
		if read {
			if fi, err := os.Stat(f); err == nil && fi.Size() == off {
				continue // nothing new
			}
		}
		switch err := rd.Add(ctx, f, off); {
		case err == nil:
			in.offsets[f] = off
		case err == io.EOF && !in.follow:
			return fmt.Errorf("%s: no window state in the file: %w", f, metrics.ErrState)
		case err == io.EOF:
			in.offsets[f] = off
		case in.follow && errors.Is(err, fs.ErrNotExist):
			// deleted since the listing, or a dangling symlink
		case in.follow && errors.Is(err, state.ErrNotRegular):
			if !in.refused[f] {
				in.refused[f] = true
				fmt.Fprintf(m.e.stderr, "rocescope merge: %v; skipped\n", err)
			}
		default:
			return err
		}
	}
	return rd.Drain(ctx, &fileDraining{in: in, m: m, st: st})
}

// fileDraining is where a pass of a fileInput drains its files: into the
// merger, which emits each window once every file is past it.
type fileDraining struct {
	in *fileInput
	m  *merger
	st inputState // what the pass will return
}

var _ state.Draining = (*fileDraining)(nil)

// Spare returns a window of the merger.
func (d *fileDraining) Spare() *metrics.Window { return d.m.spare() }

// Recycle gives w back to the merger.
func (d *fileDraining) Recycle(w *metrics.Window) { d.m.merged.Recycle(w) }

// Add notes where the next state of path begins and merges w.
func (d *fileDraining) Add(path string, off int64, w *metrics.Window) error {
	d.in.offsets[path] = off
	return d.m.add(path, w)
}

// Settled emits the ready windows that start before before.
func (d *fileDraining) Settled(before int64) error { return d.m.settled(d.st, before) }

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
