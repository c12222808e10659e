package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/export/clickhouse"
	"github.com/rocescope/rocescope/metrics/report"
	"github.com/rocescope/rocescope/sketch"
)

// runOutput is the report sink of a run (replay, capture, merge), wrapped:
// it counts every window reported, for the line the run ends with on
// standard error as tcpdump ends with its counts, and with --summary it
// adds the windows up into one report of the whole run, written when the
// run ends, instead of writing each.
type runOutput struct {
	sink     export.Sink
	summary  *report.Summary // with --summary
	started  time.Time
	windows  int
	counters metrics.Counters
	from, to int64 // the time the windows covered, ns
	hosts    map[string]bool
	distinct *sketch.Distinct // the union of the windows' distinct flows
}

var (
	_ export.Sink   = (*runOutput)(nil)
	_ export.Syncer = (*runOutput)(nil)
)

// wrap wraps sink, whose close function is closeSink, for a run whose
// windows cfg makes: it returns the run's output and the function that
// writes the summary report (with --summary) and closes the sink.
func (o *reportOptions) wrap(sink export.Sink, closeSink func() error, cfg *metrics.Config) (*runOutput, func() error, error) {
	if err := o.checkSummary(); err != nil {
		closeSink()
		return nil, nil, err
	}
	out := &runOutput{sink: sink, started: time.Now(), hosts: make(map[string]bool)}
	if o.summary {
		var err error
		if out.summary, err = report.NewSummary(cfg); err != nil {
			closeSink()
			return nil, nil, usagef("%v", err)
		}
	}
	return out, func() error { return errors.Join(out.writeSummary(), closeSink()) }, nil
}

// checkSummary validates --summary: one report of the whole run, for the
// text formats and IPFIX; the HTML page charts every window, and
// ClickHouse's windows table holds windows.
func (o *reportOptions) checkSummary() error {
	if !o.summary {
		return nil
	}
	outs, err := o.outputList()
	if err != nil {
		return err
	}
	for _, out := range outs {
		switch {
		case out.format == "html":
			return usagef("--summary writes one report, and the HTML page charts every window: give --format jsonl, csv or table, or leave --summary out")
		case clickhouse.IsURL(out.dest):
			return usagef("--summary writes one report of the whole run, not a window for ClickHouse's windows table (-o %s)", out.dest)
		}
	}
	return nil
}

// Write counts the window of r and writes r, or adds it to the summary.
func (out *runOutput) Write(r *report.Report) error {
	w := r.Window
	if out.windows == 0 {
		out.from, out.to = w.From, w.To
		out.distinct = w.Distinct.Clone()
	} else {
		out.from, out.to = min(out.from, w.From), max(out.to, w.To)
		if err := out.addFlows(w); err != nil {
			return err
		}
	}
	out.windows++
	out.counters.Add(&w.Counters)
	for _, h := range w.Hosts {
		out.hosts[h] = true
	}
	if out.summary != nil {
		return out.summary.Add(r)
	}
	return out.sink.Write(r)
}

// fewFlows is the most flows a window has whose hashes are inserted into
// the run's distinct flows rather than its sketch merged: an insert costs
// a few ns, a merge a pass over the sketch's registers (16 KiB).
const fewFlows = 1024

// addFlows adds the distinct flows of w, not the first window, to the
// run's. A window whose records hold every flow it saw (none untracked),
// and few of them, has their hashes inserted, as the engine inserted them
// into its sketch: the same bits, without the pass over the registers a
// merge costs, which doubled the time of a replay in 1 ms windows.
func (out *runOutput) addFlows(w *metrics.Window) error {
	if w.Counters[metrics.UntrackedPackets] > 0 || len(w.Flows) >= fewFlows {
		return out.distinct.Merge(w.Distinct)
	}
	for i := range w.Flows {
		out.distinct.Insert(w.Flows[i].Hash())
	}
	return nil
}

// Flush flushes the sink.
func (out *runOutput) Flush() error { return out.sink.Flush() }

// Sync makes durable what the sink wrote (export.Syncer).
func (out *runOutput) Sync(ctx context.Context) error { return export.Sync(ctx, out.sink) }

// writeSummary writes the report of the whole run, with --summary, when
// the run reported a window.
func (out *runOutput) writeSummary() error {
	if out.summary == nil || out.summary.Windows() == 0 {
		return nil
	}
	if err := out.sink.Write(out.summary.Report()); err != nil {
		return err
	}
	return out.sink.Flush()
}

// end writes the line a run that ended with err ends with to w: after it
// reported a window, ended normally or was interrupted, not when it failed
// before a window (its error says what happened).
func (out *runOutput) end(w io.Writer, cmd string, err error) {
	if out.windows > 0 || err == nil || errors.Is(err, context.Canceled) {
		fmt.Fprintln(w, out.line(cmd))
	}
}

// line returns the line a run ends with: the frames of its windows, the
// RoCE frames among them, the frames the kernel dropped (a live capture)
// and those the filters removed, the windows, the distinct flows of the
// whole run (estimated), the hosts of a merge, the time the traffic spans,
// and how long the run took at what rate.
func (out *runOutput) line(cmd string) string {
	c := &out.counters
	elapsed := time.Since(out.started)
	items := []string{
		u(c[metrics.Packets]) + " frames",
		u(c[metrics.RoCEPackets]) + " RoCE",
		u(c[metrics.KernelDrops]) + " dropped by kernel",
		u(c[metrics.Filtered]) + " filtered",
		strconv.Itoa(out.windows) + " windows",
	}
	if out.distinct != nil {
		items = append(items, fmt.Sprintf("~%.0f flows", out.distinct.Estimate().Value))
	} else {
		items = append(items, "0 flows")
	}
	if len(out.hosts) > 1 {
		items = append(items, strconv.Itoa(len(out.hosts))+" hosts")
	}
	items = append(items, time.Duration(out.to-out.from).Round(time.Millisecond).String()+" of traffic",
		fmt.Sprintf("in %v (%s)", elapsed.Round(time.Millisecond), perSecond(float64(c[metrics.Packets])/elapsed.Seconds(), "frames")))
	return "rocescope " + cmd + ": " + strings.Join(items, ", ")
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// perSecond formats a rate of unit per second with an SI prefix and three
// significant digits: "476 frames/s", "47.0 kframes/s".
func perSecond(v float64, unit string) string {
	prefix := ""
	for _, p := range []struct {
		m float64
		s string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= 0.9995*p.m {
			v, prefix = v/p.m, p.s
			break
		}
	}
	digits := 2
	if v >= 0.9995 {
		digits = max(0, 2-int(math.Floor(math.Log10(v*1.0005))))
	}
	return strconv.FormatFloat(v, 'f', digits, 64) + " " + prefix + unit + "/s"
}
