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
	"unicode"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/rocescope/rocescope/internal/mapped"
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

// lateness is the --lateness flag: a duration where 0 means none
// (metrics.NoLateness), and no value the engine's default, window/10.
type lateness time.Duration

func (l *lateness) String() string {
	switch time.Duration(*l) {
	case 0:
		return "" // not given: the default, which the usage names
	case metrics.NoLateness:
		return "0s"
	}
	return time.Duration(*l).String()
}

func (l *lateness) Type() string { return "duration" }

func (l *lateness) Set(s string) error {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return errors.New("want a duration such as 100ms")
	case d < 0:
		return errors.New("want 0 or more")
	case d == 0:
		d = metrics.NoLateness
	}
	*l = lateness(d)
	return nil
}

// hugePages is the --huge-pages flag: auto, on or off.
type hugePages mapped.HugePages

func (h *hugePages) String() string { return mapped.HugePages(*h).String() }

func (h *hugePages) Type() string { return "policy" }

func (h *hugePages) Set(s string) error {
	for _, p := range []mapped.HugePages{mapped.HugeAuto, mapped.HugeOn, mapped.HugeOff} {
		if s == p.String() {
			*h = hugePages(p)
			return nil
		}
	}
	return errors.New("want auto, on or off")
}

// reportOptions are the flags every command that writes reports shares.
type reportOptions struct {
	cfg        metrics.Config // the analysis flags, each bound to its field; Live is the command's
	summary    bool
	format     string
	outputs    []string // -o, each a file, - or a server URL; none means -
	prometheus string
	stateOut   string
	progress   bool
	inputs     []string // what the run reads, for reports that name it (html)
	hugePages  hugePages
	cpuProfile string
}

// bind registers the report flags on fs. config is registered by
// applyConfigFile's caller convention: every command has --config.
func (o *reportOptions) bind(fs *pflag.FlagSet) {
	c := &o.cfg
	c.ElephantRate, c.JitterRate, c.LinkRate = metrics.DefaultElephantRate, metrics.DefaultJitterRate, metrics.DefaultLinkRate
	c.RoCEPort = metrics.DefaultRoCEPort
	fs.DurationVar(&c.Window, "window", metrics.DefaultWindow, "window length; windows are aligned to multiples of it since the Unix epoch")
	fs.Var((*lateness)(&c.Lateness), "lateness", "how long after its end a window still takes late frames, at most --window; 0 closes each window at its end (default window/10)")
	fs.IntVar(&c.Top, "top", metrics.DefaultTop, "flows in each window's top list (at least 1)")
	fs.Var((*rate)(&c.ElephantRate), "elephant-rate", "a flow at or above this rate in a window is an elephant (bits/s, above 0; 10M, 2.5G, 400G)")
	fs.Var((*rate)(&c.JitterRate), "jitter-rate", "an elephant whose rate changes by this much between adjacent windows is a jitter flow (bits/s, above 0)")
	fs.IntVar(&c.Workers, "workers", runtime.NumCPU(), "worker goroutines (flows are sharded by connection), 1 to 256")
	fs.IntVar(&c.TableSize, "table-size", metrics.DefaultTableSize, "QP table capacity in flows, from --workers to 268435456; flows beyond it are counted by the sketches only")
	fs.BoolVar(&c.Exact, "exact", false, "list every flow and print the sketches' measured error next to their estimates")
	fs.BoolVar(&o.summary, "summary", false, "write one report of the whole run, when it ends, instead of one per window: each counter, of the run and of each flow, is its sum over the windows (jsonl, csv or table)")
	fs.StringVar(&c.Host, "host", "", "host name written into reports and states: at most 128 bytes, printable, no spaces or commas, not beginning with =, +, - or @ (default: this machine's name)")
	fs.StringVar(&o.format, "format", "", "format of the file outputs: jsonl, csv, table or html (a self-contained page of charts; needs -o FILE) (default: the file's extension .jsonl, .json, .csv or .html, else table on a terminal and jsonl otherwise)")
	fs.StringArrayVarP(&o.outputs, "output", "o", nil, "write reports to this file (- is standard output, the default), into ClickHouse (clickhouse://HOST:PORT/DATABASE) or to an IPFIX collector (ipfix://HOST:PORT over UDP, ipfix+tcp://HOST:PORT); repeat for several outputs")
	fs.StringVar(&o.prometheus, "prometheus", "", "serve current totals on http://ADDR/metrics; \":24791\" binds 127.0.0.1:24791 only, so that the metrics are not exposed by accident; \"0.0.0.0:24791\" serves every interface")
	fs.StringVar(&o.stateOut, "state-out", "", "write each window's mergeable state to this file, or to one file per window if it is a directory (a path ending in / is created as one), or to Kafka: kafka://BROKER[,BROKER...]/TOPIC")
	fs.Var((*port)(&c.RoCEPort), "roce-port", "UDP destination port of RoCEv2 (1 to 65535)")
	fs.BoolVar(&o.progress, "progress", true, "show progress on standard error when it is a terminal")
	r := &c.Rules
	fs.Var((*rate)(&c.LinkRate), "link-rate", "rate of the mirrored links (bits/s, above 0): a PFC pause quantum lasts 512 bit times at it, and incasts are measured against it")
	fs.DurationVar(&c.Burst, "burst", metrics.DefaultBurst, "burst interval: the time slot of each flow's activity profile, which incasts are found in (1µs to 10ms, dividing --window)")
	fs.IntVar(&r.IncastSources, "incast-sources", metrics.DefaultIncastSources, "incast: at least this many source addresses whose flows to one destination together reach --incast-load of --link-rate within a burst interval")
	fs.Float64Var(&r.IncastLoad, "incast-load", metrics.DefaultIncastLoad, "incast: the fraction of --link-rate (0 to 1) those flows must reach together over a burst interval")
	fs.DurationVar(&r.StormInterval, "storm-interval", metrics.DefaultStormInterval, "PFC storm: a priority paused by one source MAC's PFC frames for at least --storm-paused of at least this long")
	fs.Float64Var(&r.StormPaused, "storm-paused", metrics.DefaultStormPaused, "PFC storm: the fraction (0 to 1) of --storm-interval or longer the priority must be paused")
	fs.IntVar(&r.RetransResent, "retrans-resent", metrics.DefaultRetransResent, "retransmission: an episode (request PSNs at or below the highest sent, until a new one) is an event from this many frames sent again")
	fs.DurationVar(&r.RetransStall, "retrans-stall", 0, "retransmission: an episode is an event only when it stalled this long, from its trouble (the NAK, or the last frame before the silence) to the first frame sent again")
	fs.IntVar(&r.CEMarks, "ce-marks", metrics.DefaultCEMarks, "ce_without_cnp: a flow with at least this many CE-marked frames in a window whose receiver, seen in the capture, sent no CNP back")
	fs.IntVar(&r.MaxEvents, "max-events", metrics.DefaultMaxEvents, "events of each kind a window's report lists at most (the earliest; events_omitted counts the rest)")
	fs.Var(&o.hugePages, "huge-pages", "whether the flow table and lists ask the kernel for transparent huge pages (2 MiB: one page fault instead of 512): on, off, or auto: on, except in a virtual machine where a 4 KiB page costs less than 4 µs of CPU to touch first, measured once at the start (there huge pages come from memory the host took back, and cost more)")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file, for go tool pprof, or for the build's profile-guided optimization (cmd/rocescope/default.pgo; see the README)")
	fs.String("config", "", "read flag values from this YAML file (keys are flag names; flags on the command line win)")
}

// config returns the engine configuration the flags describe, validated
// by metrics.Config: an invalid field is a usage error naming its flag.
func (o *reportOptions) config(live bool) (*metrics.Config, error) {
	c := o.cfg
	c.Live = live
	if err := c.Validate(); err != nil {
		var ce *metrics.ConfigError
		if !errors.As(err, &ce) {
			return nil, err
		}
		v := ce.Value
		if f, ok := v.(float64); ok && strings.HasSuffix(ce.Field, "Rate") {
			v = formatRate(f)
		}
		return nil, usagef("--%s %v: want %s", flagName(ce.Field), v, ce.Want)
	}
	return &c, nil
}

// flagName returns the flag of a metrics.Config field: its Go name in
// lower case, words joined by hyphens (TableSize: table-size, CEMarks:
// ce-marks, RoCEPort: roce-port).
func flagName(field string) string {
	if field == "RoCEPort" {
		return "roce-port"
	}
	var b strings.Builder
	for i, r := range field {
		lower := unicode.ToLower(r)
		if i > 0 && r != lower && (unicode.IsLower(rune(field[i-1])) || i+1 < len(field) && unicode.IsLower(rune(field[i+1]))) {
			b.WriteByte('-')
		}
		b.WriteRune(lower)
	}
	return b.String()
}

// check validates the flags before any input is opened, so that a mistake
// on the command line is reported as one (exit status 2) whatever the input.
func (o *reportOptions) check() error {
	if _, err := o.config(false); err != nil {
		return err
	}
	if err := checkHost(o.cfg.Host); err != nil {
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
		return ipfixSink(out.dest, e.stderr, o.cfg.RoCEPort)
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
		s = export.NewTable(w, &export.TableOptions{Width: tableWidth(w), ElephantRate: o.cfg.ElephantRate, JitterRate: o.cfg.JitterRate})
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
