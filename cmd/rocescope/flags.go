package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/export/clickhouse"
	"github.com/rocescope/rocescope/metrics/export/ipfix"
)

// rate is a flag value in bits per second that accepts SI suffixes:
// 10M, 2.5G, 400Gbps.
type rate float64

func (r *rate) String() string { return formatRate(float64(*r)) }

func (r *rate) Type() string { return "rate" }

func (r *rate) Set(s string) error {
	v, err := parseRate(s)
	if err != nil {
		return err
	}
	*r = rate(v)
	return nil
}

// parseRate reads a rate in bits per second: a number with an optional k,
// M, G or T suffix (powers of 1000) and an optional "bps" or "b/s".
func parseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	for _, unit := range []string{"bps", "b/s", "bit/s"} {
		if strings.HasSuffix(strings.ToLower(t), unit) {
			t = t[:len(t)-len(unit)]
			break
		}
	}
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult = 1e3
		case 'M':
			mult = 1e6
		case 'G', 'g':
			mult = 1e9
		case 'T', 't':
			mult = 1e12
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a rate: want bits per second such as 400M, 2.5G or 100Gbps", s)
	}
	return v * mult, nil
}

func formatRate(v float64) string {
	for _, u := range []struct {
		m float64
		s string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= u.m && v == float64(int64(v/u.m))*u.m {
			return strconv.FormatInt(int64(v/u.m), 10) + u.s
		}
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// port is a flag value holding a UDP port, 1 to 65535.
type port uint16

func (p *port) String() string { return strconv.Itoa(int(*p)) }

func (p *port) Type() string { return "port" }

func (p *port) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 1 || v > 65535 {
		return fmt.Errorf("want a UDP port from 1 to 65535")
	}
	*p = port(v)
	return nil
}

// reportOptions are the flags every command that writes reports shares.
type reportOptions struct {
	window       time.Duration
	lateness     time.Duration
	top          int
	elephantRate rate
	jitterRate   rate
	workers      int
	tableSize    int
	exact        bool
	summary      bool
	host         string
	format       string
	outputs      []string // -o, each a file, - or a server URL; none means -
	prometheus   string
	stateOut     string
	rocePort     port
	progress     bool
	inputs       []string // what the run reads, for reports that name it (html)
	diagnoses    diagnosisOptions
}

// diagnosisOptions are the flags of the diagnoses (events): the link rate,
// the burst interval and the rules.
type diagnosisOptions struct {
	linkRate rate
	burst    time.Duration
	rules    metrics.Rules
}

// bind registers the diagnosis flags on fs; their usage states each rule.
func (d *diagnosisOptions) bind(fs *pflag.FlagSet) {
	d.linkRate = rate(metrics.DefaultLinkRate)
	r := &d.rules
	fs.Var(&d.linkRate, "link-rate", "rate of the mirrored links (bits/s): a PFC pause quantum lasts 512 bit times at it, and incasts are measured against it")
	fs.DurationVar(&d.burst, "burst", metrics.DefaultBurst, "burst interval: the time slot of each flow's activity profile, which incasts are found in (1µs to 10ms, dividing --window)")
	fs.IntVar(&r.IncastSources, "incast-sources", metrics.DefaultIncastSources, "incast: at least this many source addresses whose flows to one destination together reach --incast-load of --link-rate within a burst interval")
	fs.Float64Var(&r.IncastLoad, "incast-load", metrics.DefaultIncastLoad, "incast: the fraction of --link-rate (0 to 1) those flows must reach together over a burst interval")
	fs.DurationVar(&r.StormInterval, "storm-interval", metrics.DefaultStormInterval, "PFC storm: a priority paused by one source MAC's PFC frames for at least --storm-paused of at least this long")
	fs.Float64Var(&r.StormPaused, "storm-paused", metrics.DefaultStormPaused, "PFC storm: the fraction (0 to 1) of --storm-interval or longer the priority must be paused")
	fs.IntVar(&r.RetransResent, "retrans-resent", metrics.DefaultRetransResent, "retransmission: an episode (request PSNs at or below the highest sent, until a new one) is an event from this many frames sent again")
	fs.DurationVar(&r.RetransStall, "retrans-stall", 0, "retransmission: an episode is an event only when it stalled this long, from its trouble (the NAK, or the last frame before the silence) to the first frame sent again")
	fs.IntVar(&r.CEMarks, "ce-marks", metrics.DefaultCEMarks, "ce_without_cnp: a flow with at least this many CE-marked frames in a window whose receiver, seen in the capture, sent no CNP back")
	fs.IntVar(&r.MaxEvents, "max-events", metrics.DefaultMaxEvents, "events of each kind a window's report lists at most (the earliest; events_omitted counts the rest)")
}

// check validates the diagnosis flags against the window length.
func (d *diagnosisOptions) check(window time.Duration) error {
	r := &d.rules
	switch {
	case !(d.linkRate > 0):
		return usagef("--link-rate %v: want more than 0", d.linkRate.String())
	case d.burst < time.Microsecond || d.burst > metrics.MaxBurst || window%d.burst != 0 || window/d.burst > metrics.MaxSlots:
		return usagef("--burst %v: want 1µs to %v, dividing --window (%v) into at most %d", d.burst, metrics.MaxBurst, window, metrics.MaxSlots)
	case r.IncastSources < 2:
		return usagef("--incast-sources %d: want at least 2", r.IncastSources)
	case !(r.IncastLoad > 0 && r.IncastLoad <= 1):
		return usagef("--incast-load %v: want more than 0, at most 1", r.IncastLoad)
	case r.StormInterval <= 0:
		return usagef("--storm-interval %v: want more than 0", r.StormInterval)
	case !(r.StormPaused > 0 && r.StormPaused <= 1):
		return usagef("--storm-paused %v: want more than 0, at most 1", r.StormPaused)
	case r.RetransResent < 1, r.CEMarks < 1, r.MaxEvents < 1:
		return usagef("--retrans-resent %d, --ce-marks %d, --max-events %d: want at least 1", r.RetransResent, r.CEMarks, r.MaxEvents)
	case r.RetransStall < 0:
		return usagef("--retrans-stall %v: want 0 or more", r.RetransStall)
	}
	return nil
}

// bind registers the report flags on fs. config is registered by
// applyConfigFile's caller convention: every command has --config.
func (o *reportOptions) bind(fs *pflag.FlagSet) {
	o.elephantRate = rate(metrics.DefaultElephantRate)
	o.jitterRate = rate(metrics.DefaultJitterRate)
	fs.DurationVar(&o.window, "window", metrics.DefaultWindow, "window length; windows are aligned to multiples of it since the Unix epoch")
	fs.DurationVar(&o.lateness, "lateness", 0, "how long after its end a window still takes late frames (default window/10)")
	fs.IntVar(&o.top, "top", metrics.DefaultTop, "flows in each window's top list (at least 1)")
	fs.Var(&o.elephantRate, "elephant-rate", "a flow at or above this rate in a window is an elephant (bits/s; 10M, 2.5G, 400G)")
	fs.Var(&o.jitterRate, "jitter-rate", "an elephant whose rate changes by this much between adjacent windows is a jitter flow (bits/s)")
	fs.IntVar(&o.workers, "workers", runtime.NumCPU(), "worker goroutines (flows are sharded by connection)")
	fs.IntVar(&o.tableSize, "table-size", metrics.DefaultTableSize, "QP table capacity in flows, from --workers to 268435456; flows beyond it are counted by the sketches only")
	fs.BoolVar(&o.exact, "exact", false, "list every flow and print the sketches' measured error next to their estimates")
	fs.BoolVar(&o.summary, "summary", false, "write one report of the whole run, when it ends, instead of one per window: each counter, of the run and of each flow, is its sum over the windows (jsonl, csv or table)")
	fs.StringVar(&o.host, "host", "", "host name written into reports and states: at most 128 bytes, printable, no spaces or commas, not beginning with =, +, - or @ (default: this machine's name)")
	fs.StringVar(&o.format, "format", "", "format of the file outputs: jsonl, csv, table or html (a self-contained page of charts; needs -o FILE) (default: the file's extension .jsonl, .json, .csv or .html, else table on a terminal and jsonl otherwise)")
	fs.StringArrayVarP(&o.outputs, "output", "o", nil, "write reports to this file (- is standard output, the default), into ClickHouse (clickhouse://HOST:PORT/DATABASE) or to an IPFIX collector (ipfix://HOST:PORT over UDP, ipfix+tcp://HOST:PORT); repeat for several outputs")
	fs.StringVar(&o.prometheus, "prometheus", "", "serve current totals on http://ADDR/metrics; \":24791\" binds 127.0.0.1:24791 only, so that the metrics are not exposed by accident; \"0.0.0.0:24791\" serves every interface")
	fs.StringVar(&o.stateOut, "state-out", "", "write each window's mergeable state to this file, or to one file per window if it is a directory (a path ending in / is created as one), or to Kafka: kafka://BROKER[,BROKER...]/TOPIC")
	o.rocePort = metrics.DefaultRoCEPort
	fs.Var(&o.rocePort, "roce-port", "UDP destination port of RoCEv2 (1 to 65535)")
	fs.BoolVar(&o.progress, "progress", true, "show progress on standard error when it is a terminal")
	o.diagnoses.bind(fs)
	fs.String("config", "", "read flag values from this YAML file (keys are flag names; flags on the command line win)")
}

// maxTableSize is the largest QP table the engine takes (2^28 flows).
const maxTableSize = 1 << 28

// config returns the engine configuration the flags describe.
func (o *reportOptions) config(live bool) (*metrics.Config, error) {
	if o.workers < 1 {
		return nil, usagef("--workers %d: want at least 1", o.workers)
	}
	if o.top < 1 {
		return nil, usagef("--top %d: want at least 1", o.top)
	}
	if o.tableSize < o.workers || o.tableSize > maxTableSize {
		return nil, usagef("--table-size %d: want between --workers (%d) and %d flows", o.tableSize, o.workers, maxTableSize)
	}
	if o.window < time.Millisecond {
		return nil, usagef("--window %v: want at least 1ms", o.window)
	}
	if o.lateness < 0 || o.lateness > o.window {
		return nil, usagef("--lateness %v: want between 0 and the window (%v)", o.lateness, o.window)
	}
	if err := o.diagnoses.check(o.window); err != nil {
		return nil, err
	}
	return &metrics.Config{
		Host:         o.host,
		Window:       o.window,
		Lateness:     o.lateness,
		Workers:      o.workers,
		TableSize:    o.tableSize,
		Top:          o.top,
		ElephantRate: float64(o.elephantRate),
		JitterRate:   float64(o.jitterRate),
		RoCEPort:     uint16(o.rocePort),
		Exact:        o.exact,
		Live:         live,
		LinkRate:     float64(o.diagnoses.linkRate),
		Burst:        o.diagnoses.burst,
		Rules:        o.diagnoses.rules,
	}, nil
}

// check validates the flags before any input is opened, so that a mistake
// on the command line is reported as one (exit status 2) whatever the input.
func (o *reportOptions) check() error {
	if _, err := o.config(false); err != nil {
		return err
	}
	if err := checkHost(o.host); err != nil {
		return err
	}
	if err := o.checkSummary(); err != nil {
		return err
	}
	switch o.format {
	case "", "jsonl", "json", "csv", "table", "html":
	default:
		return usagef("--format %q: want jsonl, csv, table or html", o.format)
	}
	_, err := o.outputList()
	return err
}

// checkHost validates --host: a name for reports and state files (see
// metrics.CheckHost), or empty for this machine's name.
func checkHost(h string) error {
	if h == "" {
		return nil
	}
	if err := metrics.CheckHost(h); err != nil {
		return usagef("--host: %v", err)
	}
	return nil
}

// output is one report output of -o.
type output struct {
	dest   string // a file, - (standard output) or a server URL
	format string // of a file or standard output: jsonl, csv, table or html; "" for servers and a terminal's default
}

// formatByExtension are the file extensions that choose a file output's
// format when --format is not given.
var formatByExtension = map[string]string{".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".html": "html", ".htm": "html"}

// outputList returns the outputs -o names (standard output when none),
// each file with its format: --format, else its extension's, else jsonl
// (table for a terminal, chosen when it is opened). --format and an
// extension that names another format, two outputs to one place, and an
// HTML page on standard output are usage errors.
func (o *reportOptions) outputList() ([]output, error) {
	dests := o.outputs
	if len(dests) == 0 {
		dests = []string{"-"}
	}
	var outs []output
	seen := map[string]bool{}
	for _, d := range dests {
		if d == "" {
			return nil, usagef("-o \"\": want a file, - or a URL")
		}
		if seen[d] {
			return nil, usagef("-o %s given twice", d)
		}
		seen[d] = true
		if clickhouse.IsURL(d) || ipfix.IsURL(d) {
			outs = append(outs, output{dest: d})
			continue
		}
		f := o.format
		if f == "json" {
			f = "jsonl"
		}
		if ext := formatByExtension[strings.ToLower(filepath.Ext(d))]; d != "-" && ext != "" {
			if f != "" && f != ext {
				return nil, usagef("-o %s: the extension says %s but --format is %s: drop --format (each file's extension chooses its format) or rename the file", d, ext, o.format)
			}
			if f == "" {
				f = ext
			}
		}
		if f == "html" && d == "-" {
			return nil, usagef("--format html writes a page to a file: give -o FILE.html")
		}
		if f == "" && d != "-" {
			f = "jsonl"
		}
		outs = append(outs, output{dest: d, format: f})
	}
	return outs, nil
}

// sink opens the report outputs and returns one sink writing to all of
// them and a function that flushes and closes them. If one cannot be
// opened, those opened before it are closed.
func (o *reportOptions) sink(e *env) (_ export.Sink, _ func() error, err error) {
	outs, err := o.outputList()
	if err != nil {
		return nil, nil, err
	}
	var sinks []export.Sink
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	for _, out := range outs {
		s, closeFn, err := o.openOutput(e, out)
		if err != nil {
			return nil, nil, err
		}
		sinks, closers = append(sinks, s), append(closers, closeFn)
	}
	if len(sinks) == 1 {
		return sinks[0], closers[0], nil
	}
	return export.NewTee(sinks...), closeAll, nil
}

// openOutput opens one report output.
func (o *reportOptions) openOutput(e *env, out output) (export.Sink, func() error, error) {
	switch {
	case clickhouse.IsURL(out.dest):
		return clickhouseSink(out.dest, e.stderr)
	case ipfix.IsURL(out.dest):
		return ipfixSink(out.dest, e.stderr, uint16(o.rocePort))
	case out.format == "html":
		return o.htmlSink(out.dest)
	}
	var w io.Writer = e.stdout
	closeFn := func() error { return nil }
	format := out.format
	if out.dest == "-" {
		if format == "" {
			format = "jsonl"
			if isTerminal(e.stdout) {
				format = "table"
			}
		}
	} else {
		f, err := os.Create(out.dest)
		if err != nil {
			return nil, nil, fmt.Errorf("report output: %w", err)
		}
		w, closeFn = f, f.Close
	}
	var s export.Sink
	switch format {
	case "jsonl":
		s = export.NewJSONLines(w)
	case "csv":
		s = export.NewCSV(w)
	case "table":
		s = export.NewTable(w, &export.TableOptions{Width: tableWidth(w), ElephantRate: float64(o.elephantRate), JitterRate: float64(o.jitterRate)})
	}
	return s, func() error { return errors.Join(s.Flush(), closeFn()) }, nil
}

// applyConfigFile sets every flag named in the YAML file of --config that
// the command line did not set. Unknown keys are an error that lists the
// accepted ones.
func applyConfigFile(fs *pflag.FlagSet) error {
	cf := fs.Lookup("config")
	if cf == nil || cf.Value.String() == "" {
		return nil
	}
	path := cf.Value.String()
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	for k, v := range m {
		f := fs.Lookup(k)
		if f == nil || k == "config" {
			var known []string
			fs.VisitAll(func(f *pflag.Flag) {
				if f.Name != "config" {
					known = append(known, f.Name)
				}
			})
			return fmt.Errorf("--config %s: unknown key %q (keys are flag names: %s)", path, k, strings.Join(known, ", "))
		}
		if f.Changed {
			continue
		}
		var s string
		switch v := v.(type) {
		case []any:
			parts := make([]string, len(v))
			for i, x := range v {
				parts[i] = fmt.Sprint(x)
			}
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				// A list flag (-o, --hosts) takes the items as they
				// are: one of them may hold a comma.
				if err := sv.Replace(parts); err != nil {
					return fmt.Errorf("--config %s: key %q: %w", path, k, err)
				}
				f.Changed = true
				continue
			}
			s = strings.Join(parts, ",")
		default:
			s = fmt.Sprint(v)
		}
		if err := fs.Set(k, s); err != nil {
			return fmt.Errorf("--config %s: key %q: %w", path, k, err)
		}
	}
	return nil
}
