package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/metrics"
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

With --follow, merge watches the directories and emits each window once
every host of --hosts (or every host seen so far) delivered it, or --timeout
after the window's first state arrived.`,
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
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("no state file or directory given")
				}
				m := &merger{opts: &o, e: e, expect: *hosts, timeout: *timeout}
				if *follow {
					return m.follow(ctx, args, *poll)
				}
				return m.once(ctx, args)
			}
		},
	}
}

// merger merges window states into reports.
type merger struct {
	opts     *reportOptions
	e        *env
	expect   []string
	timeout  time.Duration
	windows  map[int64]*pendingWindow
	seen     map[string]bool // state files read
	reporter *metrics.Reporter
	sink     metrics.Sink
	length   int64 // window length of the first state
	lengthOf string
	emitted  int64 // newest window emitted (follow)
}

// pendingWindow is a window being merged and the files it came from.
type pendingWindow struct {
	w     *metrics.Window
	from  map[string]string // host → file that delivered it
	first time.Time
}

func (m *merger) setup() (func() error, error) {
	cfg, err := m.opts.config(false)
	if err != nil {
		return nil, err
	}
	if m.reporter, err = metrics.NewReporter(cfg); err != nil {
		return nil, usagef("%v", err)
	}
	sink, closeSink, err := m.opts.sink(m.e)
	if err != nil {
		return nil, err
	}
	m.sink = sink
	m.windows = make(map[int64]*pendingWindow)
	m.seen = make(map[string]bool)
	m.emitted = -1 << 62
	return closeSink, nil
}

// once merges every state of the given files and directories.
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
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := m.readFile(f); err != nil {
			return err
		}
	}
	return m.emit(func(*pendingWindow) bool { return true })
}

// follow merges states as they appear in the directories.
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
		now := time.Now()
		if err := m.emit(func(p *pendingWindow) bool { return m.complete(p) || now.Sub(p.first) >= m.timeout }); err != nil {
			return err
		}
		if err := m.sink.Flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			// Emit what is pending: nothing is dropped on the way out.
			return m.emit(func(*pendingWindow) bool { return true })
		case <-t.C:
		}
	}
}

// complete reports whether every expected host delivered p.
func (m *merger) complete(p *pendingWindow) bool {
	if len(m.expect) == 0 {
		return false
	}
	for _, h := range m.expect {
		if _, ok := p.from[h]; !ok {
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
			if !de.IsDir() && strings.HasSuffix(de.Name(), metrics.StateExt) {
				files = append(files, filepath.Join(a, de.Name()))
			}
		}
	}
	slices.Sort(files)
	return files, nil
}

// readFile merges every state of one file into the pending windows.
func (m *merger) readFile(path string) error {
	m.seen[path] = true
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sr := metrics.NewStateReader(f, path)
	n := 0
	for {
		w := new(metrics.Window)
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
		return fmt.Errorf("%s: no window state in the file", path)
	}
	return nil
}

// add merges one state.
func (m *merger) add(path string, w *metrics.Window) error {
	if m.length == 0 {
		m.length, m.lengthOf = w.Length, path
	} else if w.Length != m.length {
		return fmt.Errorf("%s: window length %v differs from %v in %s: %w", path, time.Duration(w.Length), time.Duration(m.length), m.lengthOf, metrics.ErrMismatch)
	}
	if w.Start <= m.emitted {
		return fmt.Errorf("%s: window %s arrived after it was emitted (raise --timeout)", path, time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano))
	}
	p, ok := m.windows[w.Start]
	if !ok {
		m.windows[w.Start] = &pendingWindow{w: w, from: hostsFrom(w, path), first: time.Now()}
		return nil
	}
	for _, h := range w.Hosts {
		if prev, dup := p.from[h]; dup {
			return fmt.Errorf("%s: host %s delivered window %s already in %s", path, h, time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano), prev)
		}
	}
	if err := p.w.Merge(w); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for h := range hostsFrom(w, path) {
		p.from[h] = path
	}
	return nil
}

func hostsFrom(w *metrics.Window, path string) map[string]string {
	m := make(map[string]string, len(w.Hosts))
	for _, h := range w.Hosts {
		m[h] = path
	}
	return m
}

// emit reports, in window order, the pending windows ready says are done.
// Windows are emitted in order, so a window waits for older pending ones.
func (m *merger) emit(ready func(*pendingWindow) bool) error {
	starts := make([]int64, 0, len(m.windows))
	for s := range m.windows {
		starts = append(starts, s)
	}
	slices.Sort(starts)
	for _, s := range starts {
		p := m.windows[s]
		if !ready(p) {
			break
		}
		delete(m.windows, s)
		p.w.Normalize()
		if err := m.sink.Write(m.reporter.Build(p.w)); err != nil {
			return err
		}
		m.emitted = s
	}
	return nil
}
