package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/filter"
	"github.com/rocescope/rocescope/internal/mapped"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
)

// analysis is one run of the engine with its outputs: what replay and
// capture share.
type analysis struct {
	opts     *reportOptions
	filter   *filter.Set // the filters the engine applies, or nil
	live     bool
	progress func() string // extra progress text (percent of file), or nil
	// progressEvery is how often progress is drawn (default half a second).
	progressEvery time.Duration
}

// startCPUProfile starts profiling the process's CPU time into the file at
// path and returns the function that stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(fmt.Errorf("--cpu-profile %s: %w", path, err), f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		return nil
	}, nil
}

// run analyzes the frames of sources and writes the reports and states.
func (a *analysis) run(ctx context.Context, e *env, sources []capture.Source) (err error) {
	cfg, err := a.opts.config(a.live)
	if err != nil {
		return err
	}
	cfg.Filter = a.filter
	if a.opts.cpuProfile != "" {
		var stop func() error
		if stop, err = startCPUProfile(a.opts.cpuProfile); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	mapped.SetHugePages(mapped.HugePages(a.opts.hugePages))
	eng, err := metrics.New(cfg)
	if err != nil {
		return usagef("%v", err)
	}
	ecfg := eng.Config()
	reporter, err := report.NewReporter(&ecfg)
	if err != nil {
		return err
	}
	// Progress is drawn only on a terminal; the console erases and redraws
	// it around the messages and, when they go to a terminal too (the
	// same one, as a rule), the reports.
	var con *console
	if a.opts.progress && isTerminal(e.stderr) {
		con = &console{status: e.stderr, width: ttyOf(e.stderr).Width()}
		shared := &env{stdin: e.stdin, stdout: e.stdout, stderr: con.writer(ttyOf(e.stderr))}
		if isTerminal(e.stdout) {
			shared.stdout = con.writer(ttyOf(e.stdout))
		}
		e = shared
	}
	sink, closeSink, err := a.opts.sink(e)
	if err != nil {
		return err
	}
	out, closeSink, err := a.opts.wrap(sink, closeSink, &ecfg)
	if err != nil {
		return err
	}
	// The run's last line comes after the last report (the summary's,
	// written when the sink closes) and once progress is erased.
	defer func() { out.end(e.stderr, a.command(), err) }()
	defer func() { err = errors.Join(err, closeSink()) }()
	var states stateOutput
	if a.opts.stateOut != "" {
		if states, err = openStateOutput(e, a.opts.stateOut, &ecfg); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, states.Close()) }()
	}
	var prom *export.Prometheus
	if a.opts.prometheus != "" {
		if prom, err = export.ServePrometheus(listenAddr(a.opts.prometheus), &export.PrometheusOptions{ErrorLog: e.stderr}); err != nil {
			return err
		}
		defer prom.Close()
		fmt.Fprintf(e.stderr, "rocescope: serving metrics on http://%s/metrics\n", prom.Addr())
	}
	stopProgress := a.showProgress(con, eng)
	defer stopProgress()

	segment := uint32(0)
	err = eng.RunOnce(ctx, sources, func(w *metrics.Window) error {
		if w.Segment != segment {
			segment = w.Segment
			fmt.Fprintf(e.stderr, "rocescope: the frames' clock stepped back; windows start again at %s (segment %d, counted in time_jumps)\n",
				time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano), segment)
		}
		if states != nil {
			if err := states.Write(w); err != nil {
				return err
			}
		}
		r := reporter.Build(w)
		if prom != nil {
			prom.Update(r)
		}
		return out.Write(r)
	})
	if a.live && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// A live capture ends by its context (--duration, or a signal)
		// once the last window is written: its normal end.
		err = nil
	}
	return err
}

// command returns the name of the command that runs the analysis.
func (a *analysis) command() string {
	if a.live {
		return "capture"
	}
	return "replay"
}

// listenAddr binds a bare ":port" to the loopback address, so that metrics
// are not exposed by accident.
func listenAddr(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// showProgress draws a progress line on the console, when there is one,
// every progressEvery, and returns the function that stops and erases it.
func (a *analysis) showProgress(con *console, eng *metrics.Engine) func() {
	if con == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start, last, lastN := time.Now(), time.Now(), uint64(0)
		every := a.progressEvery
		if every == 0 {
			every = 500 * time.Millisecond
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				con.clear()
				return
			case now := <-t.C:
				n := eng.Frames()
				rate := float64(n-lastN) / now.Sub(last).Seconds()
				last, lastN = now, n
				extra := ""
				if a.progress != nil {
					extra = "  " + a.progress()
				}
				con.show(fmt.Sprintf("rocescope: %d frames  %.2f Mpps  %s%s", n, rate/1e6, now.Sub(start).Round(time.Second), extra))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
