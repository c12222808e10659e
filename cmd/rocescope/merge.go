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
with status 0.`,
		example: `  rocescope merge hostA.states hostB.states
  rocescope merge --format csv -o fleet.csv /shared/states/
  rocescope merge --follow --hosts cap1,cap2,cap3 --timeout 5s /shared/states/`,
		flags: func(fs *pflag.FlagSet) runner {
			var o reportOptions
			o.bind(fs)
			for _, f := range ignoredByMerge {
				fs.MarkHidden(f.flag) // accepted, for shared --config files, but not offered
			}
			follow := fs.Bool("follow", false, "keep watching the directories for new state files")
			hosts := fs.StringSlice("hosts", nil, "with --follow: the hosts whose states complete a window")
			timeout := fs.Duration("timeout", 10*time.Second, "with --follow: emit a window this long after its first state even if hosts are missing")
			poll := fs.Duration("poll", 500*time.Millisecond, "with --follow: how often to look for new files")
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
					return m.once(ctx, args)
				}
				if *timeout <= 0 || *poll <= 0 {
					return usagef("--timeout %v and --poll %v: want more than 0", *timeout, *poll)
				}
				return m.follow(ctx, args, *poll)
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

// merger merges window states into reports.
type merger struct {
	opts     *reportOptions
	e        *env
	expect   []string // --hosts
	timeout  time.Duration
	merged   *state.Merger
	first    map[int64]time.Time // when each pending window's first state arrived
	hosts    map[string]bool     // every host seen
	seen     map[string]bool     // state files read
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
	sink, closeSink, err := m.opts.sink(m.e)
	if err != nil {
		return nil, err
	}
	m.sink = sink
	m.merged = state.NewMerger()
	m.first = make(map[int64]time.Time)
	m.hosts = make(map[string]bool)
	m.seen = make(map[string]bool)
	return closeSink, nil
}

// once merges every state of the given files and directories. Nothing is
// written unless every state was read and merged.
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
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := m.readFile(f); err != nil {
			return err
		}
	}
	return m.emit(func(int64) bool { return true })
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
		files, err := stateFiles(dirs)
		if err != nil {
			return err
		}
		for _, f := range files {
			if !m.seen[f] {
				if err := m.readFile(f); err != nil {
					return err
				}
			}
		}
		done := ctx.Err() != nil
		now := time.Now()
		if err := m.emit(func(s int64) bool { return done || m.complete(s) || now.Sub(m.first[s]) >= m.timeout }); err != nil {
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

// readFile merges every state of one file into the pending windows. A
// state of a window already emitted (with --follow, after --timeout) is
// skipped with a warning; any other bad state is an error naming the file.
func (m *merger) readFile(path string) error {
	m.seen[path] = true
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sr := state.NewReader(f, path)
	n := 0
	for {
		w := m.merged.Spare()
		err := sr.Next(w)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		n++
		switch err := m.merged.Add(path, w); {
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
	}
	if n == 0 {
		return fmt.Errorf("%s: no window state in the file: %w", path, metrics.ErrState)
	}
	return nil
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
	}
	return nil
}
