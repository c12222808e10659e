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
0.`,
		example: `  rocescope merge hostA.states hostB.states
  rocescope merge --format csv -o fleet.csv /shared/states/
  rocescope merge --follow --hosts cap1,cap2,cap3 --timeout 5s /shared/states/`,
		flags: func(fs *pflag.FlagSet) runner {
			var o reportOptions
			o.bind(fs)
			follow := fs.Bool("follow", false, "keep watching the directories for new state files")
			hosts := fs.StringSlice("hosts", nil, "with --follow: the hosts whose states complete a window")
			timeout := fs.Duration("timeout", 10*time.Second, "with --follow: emit a window this long after its first state even if hosts are missing")
			poll := fs.Duration("poll", 500*time.Millisecond, "with --follow: how often to look for new files")
			maxState := fs.Int64("max-state-bytes", 0, fmt.Sprintf("refuse a state whose sketches would take more memory than this many bytes (default 4 times a window's sketches in the local configuration: %d)", stateLimitFactor*defaultSketchBytes))
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
				m := &merger{opts: &o, e: e, expect: *hosts, timeout: *timeout, read: state.ReadOptions{MaxSketchBytes: *maxState, Growing: *follow}}
				var err error
				if !*follow {
					for _, name := range []string{"hosts", "timeout", "poll"} {
						if fs.Changed(name) {
							return usagef("--%s needs --follow", name)
						}
					}
					err = m.once(ctx, args)
				} else {
					if *timeout <= 0 || *poll <= 0 {
						return usagef("--timeout %v and --poll %v: want more than 0", *timeout, *poll)
					}
					err = m.follow(ctx, args, *poll)
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

// merger merges window states into reports.
type merger struct {
	opts     *reportOptions
	e        *env
	expect   []string // --hosts
	timeout  time.Duration
	read     state.ReadOptions
	merged   *state.Merger
	first    map[int64]time.Time // when each pending window's first state arrived
	hosts    map[string]bool     // every host seen
	offsets  map[string]int64    // state files read: where their next state begins
	refused  map[string]bool     // files skipped with a warning
	reporter *report.Reporter
	sink     export.Sink
}

func (m *merger) setup() (func() error, error) {
	cfg, err := m.opts.config(false)
	if err != nil {
		return nil, err
	}
	if m.reporter, err = report.NewReporter(cfg); err != nil {
		return nil, usagef("%v", err)
	}
	if m.read.MaxSketchBytes == 0 {
		n, err := cfg.SketchBytes()
		if err != nil {
			return nil, usagef("%v", err)
		}
		m.read.MaxSketchBytes = stateLimitFactor * n
	}
	sink, closeSink, err := m.opts.sink(m.e)
	if err != nil {
		return nil, err
	}
	m.sink = sink
	m.merged = state.NewMerger()
	m.first = make(map[int64]time.Time)
	m.hosts = make(map[string]bool)
	m.offsets = make(map[string]int64)
	m.refused = make(map[string]bool)
	return closeSink, nil
}

// once merges every state of the given files and directories, writing
// each window's report as soon as no file can add to it.
func (m *merger) once(ctx context.Context, args []string) (err error) {
	closeSink, err := m.setup()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeSink()) }()
	files, err := stateFiles(args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no %s files in %s", state.Ext, strings.Join(args, ", "))
	}
	return state.MergeFiles(ctx, files, &m.read, func(w *metrics.Window) error { return m.sink.Write(m.reporter.Build(w)) })
}

// follow merges states as they appear in the directories, and emits each
// window once it is complete or timed out. When ctx is done it reads the
// directories a last time, emits every pending window and returns nil.
func (m *merger) follow(ctx context.Context, dirs []string, poll time.Duration) (err error) {
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return usagef("--follow needs directories; %s is not one", d)
		}
	}
	closeSink, err := m.setup()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeSink()) }()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		// After an interrupt, the directories are read a last time
		// without the context: only regular files are read, which do not
		// block.
		done := ctx.Err() != nil
		rctx := ctx
		if done {
			rctx = context.WithoutCancel(ctx)
		}
		now := time.Now()
		ready := func(s int64) bool { return done || m.complete(s) || now.Sub(m.first[s]) >= m.timeout }
		if err := m.readDirs(rctx, dirs, ready); err != nil {
			if !done && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				continue // interrupted while reading: read a last time
			}
			return err
		}
		if err := m.emit(ready); err != nil {
			return err
		}
		if err := m.sink.Flush(); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// readDirs merges what is new in the state files of dirs since the last
// call, in window order, and emits each window that no file can add to in
// this pass as soon as ready says it is done, so that catching up with a
// full directory holds few windows. A state not yet complete is left for
// the next call, a file that vanished is forgotten, and a file that is not
// a regular file is skipped with a warning, once. A state of a window
// already emitted (after --timeout) is skipped with a warning; any other
// bad state is an error naming the file.
func (m *merger) readDirs(ctx context.Context, dirs []string, ready func(start int64) bool) error {
	files, err := stateFiles(dirs)
	if err != nil {
		return err
	}
	for f := range m.offsets {
		if _, found := slices.BinarySearch(files, f); !found {
			delete(m.offsets, f) // gone (retention clean-up)
		}
	}
	rd := state.NewFiles(&m.read)
	for _, f := range files {
		off, read := m.offsets[f]
		if read {
			if st, err := os.Stat(f); err == nil && st.Size() == off {
				continue // nothing new
			}
		}
		switch err := rd.Add(ctx, f, off); {
		case err == nil, err == io.EOF:
			m.offsets[f] = off
		case errors.Is(err, fs.ErrNotExist):
			// deleted since the listing, or a dangling symlink
		case errors.Is(err, state.ErrNotRegular):
			if !m.refused[f] {
				m.refused[f] = true
				fmt.Fprintf(m.e.stderr, "rocescope merge: %v; skipped\n", err)
			}
		default:
			return err
		}
	}
	for {
		w := m.merged.Spare()
		path, off, err := rd.Next(ctx, w)
		if err == io.EOF {
			m.merged.Recycle(w)
			return nil
		}
		if err != nil {
			return err
		}
		m.offsets[path] = off
		switch err := m.merged.Add(path, w); {
		case errors.Is(err, state.ErrLate):
			fmt.Fprintf(m.e.stderr, "rocescope merge: %v: reports up to a later window are out (raise --timeout); state skipped\n", err)
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
		head, more := rd.Head()
		if err := m.emit(func(s int64) bool { return (!more || s < head) && ready(s) }); err != nil {
			return err
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

// emit reports the pending windows in time order for as long as ready says
// the oldest one is done.
func (m *merger) emit(ready func(start int64) bool) error {
	for _, s := range m.merged.Pending() {
		if !ready(s) {
			break
		}
		w := m.merged.Take()
		delete(m.first, s)
		if err := m.sink.Write(m.reporter.Build(w)); err != nil {
			return err
		}
		m.merged.Recycle(w)
	}
	return nil
}
