package export

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// TableOptions shape the terminal table. A nil *TableOptions means the
// defaults.
type TableOptions struct {
	// Width is the columns every line fits in (default 80; at least 60).
	// A wider table shows more per-flow columns.
	Width int
	// ElephantRate and JitterRate (bits/s) are named in the flow list's
	// legend when set.
	ElephantRate, JitterRate float64
}

// minTableWidth is the narrowest table; narrower widths are raised to it.
const minTableWidth = 60

// Table writes a readable summary per window for a terminal, every line
// within TableOptions.Width columns: first the window's events, one line
// each behind a "!" (see Table.events), then the window's totals (throughput,
// packets by kind, drops), the flow count, congestion and transport
// counters, latency quantiles in µs, the opcode mix, then the flows (the
// top list and the elephants and jitter flows beyond it, or every flow with
// Config.Exact). QPs are in hex as Wireshark shows them; rates are in Gb/s
// or Mb/s with three significant digits.
type Table struct {
	w    io.Writer
	opts TableOptions
	buf  []byte
}

// NewTable returns a sink writing readable tables to w.
func NewTable(w io.Writer, opts *TableOptions) *Table {
	t := &Table{w: w}
	if opts != nil {
		t.opts = *opts
	}
	if t.opts.Width == 0 {
		t.opts.Width = 80
	}
	t.opts.Width = max(t.opts.Width, minTableWidth)
	return t
}

// Write implements Sink.
func (t *Table) Write(r *report.Report) error {
	w := r.Window
	c := &w.Counters
	secs := report.Seconds(w)
	t.buf = t.buf[:0]
	label := "window"
	head := []string{time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano), time.Duration(w.Length).String()}
	if cov := w.Covered(); cov > 0 && cov < w.Length {
		head = append(head, "(partial: "+time.Duration(cov).Round(time.Microsecond).String()+" covered)")
	}
	if r.Summary > 0 {
		label = "summary"
		head = []string{fmt.Sprintf("of %d windows", r.Summary), time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano),
			"to " + time.Unix(0, w.Start+w.Length).UTC().Format(time.RFC3339Nano),
			"(" + time.Duration(w.Covered()).Round(time.Microsecond).String() + " covered)"}
	}
	for i, h := range w.Hosts { // one item each, so that many hosts wrap
		h = printable(h)
		if i == 0 {
			h = "host " + h
		}
		if i < len(w.Hosts)-1 {
			h += ","
		}
		head = append(head, h)
	}
	if len(r.MissingHosts) > 0 {
		head = append(head, "missing "+printable(strings.Join(r.MissingHosts, ",")))
	}
	t.fields(label, head...)
	t.events(r)
	t.fields("  throughput", formatRate(float64(c[metrics.Bytes])*8/secs), sig3(float64(c[metrics.Packets])/secs/1e6)+" Mpps",
		u(c[metrics.Packets])+" packets", FormatBytes(c[metrics.Bytes]), "drops "+u(c[metrics.KernelDrops]))
	t.fields("  frames:", "roce "+u(c[metrics.RoCEPackets]), "other "+u(c[metrics.OtherPackets]),
		"malformed "+u(c[metrics.MalformedPackets]), "truncated "+u(c[metrics.TruncatedPackets]),
		"late "+u(c[metrics.LatePackets]), "skipped "+u(c[metrics.SourceErrors]))
	tracked := "tracked " + strconv.Itoa(len(w.Flows)) + ", exact"
	if !r.Exact {
		tracked = "tracked " + strconv.Itoa(len(w.Flows)) + ", table full: others estimated"
	}
	t.fields("  flows", fmt.Sprintf("~%.0f ±%.2g%% (%s)", r.Flows.Value, 100*r.Flows.RelErr, strings.ReplaceAll(r.Flows.Method, "_", " ")),
		tracked, "messages "+u(c[metrics.Messages]))
	t.fields("  congestion:", "CNP "+u(c[metrics.CNP]), "ECN-CE "+u(c[metrics.ECNCE]), "FECN "+u(c[metrics.FECN]),
		"BECN "+u(c[metrics.BECN]), "PFC "+u(pfcFrames(c)), "pause "+u(c[metrics.PauseFrames]))
	t.fields("  transport:", "ACK "+u(c[metrics.Acks]), "NAK "+u(c[metrics.NAKs]), "RNR NAK "+u(c[metrics.RNRNAKs]),
		"retrans "+u(c[metrics.Retransmits]), "PSN gaps "+u(c[metrics.PSNGaps]), "out of order "+u(c[metrics.OutOfOrder]))
	if r.ReadLatency.Count > 0 || r.AckLatency.Count > 0 {
		t.printf("  %-12s %8s %11s %11s %11s %11s\n", "latency µs", "n", "p50", "p90", "p99", "max")
		for _, l := range []struct {
			name string
			s    report.LatencySummary
		}{{"READ", r.ReadLatency}, {"ACK", r.AckLatency}} {
			if l.s.Count > 0 {
				t.printf("  %-12s %8d %11s %11s %11s %11s\n", l.name, l.s.Count, micros(l.s.P50), micros(l.s.P90), micros(l.s.P99), micros(l.s.Max))
			}
		}
	}
	t.opcodes(c)
	if se := r.SketchError; se != nil {
		t.fields("  sketch error:", fmt.Sprintf("flows %.3g%%", 100*se.FlowsRelErr), fmt.Sprintf("count-min ARE %.3g%%", 100*se.CountMinARE),
			fmt.Sprintf("top-k recall %.3f", se.TopRecall), fmt.Sprintf("precision %.3f", se.TopPrec))
	}
	t.flows(r)
	t.buf = append(t.buf, '\n')
	_, err := t.w.Write(t.buf)
	return err
}

// events appends a line per event of the window, first thing under the
// header, each beginning with "!", its start (UTC, to the µs) and kind:
//
//	! 22:13:20.734000 incast → 10.250.0.1  16 senders  peak 120 Gb/s over 4ms  CE 480  CNP 480
//	! 22:13:20.192335 pfc_storm 0c:42:a1:00:00:01  prio 4  paused 300ms (100 %)  6001 frames
//	! 22:13:21.237967 retransmission 10.250.0.20 → 10.250.0.21  QP 0x000123  PSN 913293  timeout: 8 resent after 16ms stall
//	! 22:13:21.741000 ce_without_cnp 10.250.0.24 → 10.250.0.25  QP 0x000127  CE 100  CNP 0  of 400 packets, 50 back
//
// An event that goes on past the window ends with "ongoing"; one that
// began in an earlier window starts there, and its figures are this
// window's part. Events a window does not list (--max-events) are counted
// on a last line.
func (t *Table) events(r *report.Report) {
	for i := range r.Events {
		e := &r.Events[i]
		head := "! " + time.Unix(0, e.Start).UTC().Format("15:04:05.000000") + " " + e.Kind.String()
		var items []string
		flow := func(f *report.Flow) {
			items = append(items, f.Key.Src.String()+" → "+f.Key.Dst.String(), "QP "+string(AppendQP(nil, f.Key.DQP)))
		}
		switch {
		case e.Incast != nil:
			in := e.Incast
			items = append(items, "→ "+in.Dst.String(), plural(in.SenderCount, "sender"),
				"peak "+formatRate(in.PeakBPS)+" over "+duration(e.End-e.Start),
				"CE "+u(in.ECNCE), "CNP "+u(in.CNP))
			if in.Sources != in.SenderCount {
				items = append(items, "from "+plural(in.Sources, "address"))
			}
		case e.PFCStorm != nil:
			st := e.PFCStorm
			items = append(items, string(report.AppendMAC(nil, st.MAC)), "prio "+strconv.Itoa(int(st.Priority)),
				"paused "+duration(st.PausedNS)+" ("+strconv.FormatFloat(100*st.PausedFraction, 'f', 0, 64)+" %)",
				u(st.Frames)+" frames")
		case e.Retransmission != nil:
			rt := e.Retransmission
			flow(&rt.Flow)
			cause := rt.Cause.String()
			switch rt.Cause {
			case metrics.CauseNAK:
				cause += " (" + decode.NAKCode(rt.NAKCode).String() + ")"
			case metrics.CauseRNR:
				cause += " (timer " + strconv.Itoa(int(rt.NAKCode)) + ")"
			}
			items = append(items, "PSN "+strconv.FormatUint(uint64(rt.FirstPSN), 10),
				cause+": "+u(rt.Resent)+" resent after "+duration(rt.StallNS)+" stall")
			if rt.Merged {
				items = append(items, "(later episodes counted in)")
			}
		case e.CEWithoutCNP != nil:
			ce := e.CEWithoutCNP
			flow(&ce.Flow)
			items = append(items, "CE "+u(ce.ECNCE), "CNP 0", "of "+u(ce.Packets)+" packets, "+u(ce.ReversePackets)+" back")
		}
		if e.Ongoing {
			items = append(items, "ongoing")
		}
		t.fields(head, items...)
	}
	var omitted []string
	for k, n := range r.EventsOmitted {
		if n > 0 {
			omitted = append(omitted, u(n)+" "+report.EventKind(k).String())
		}
	}
	if len(omitted) > 0 {
		t.fields("! not listed (--max-events):", omitted...)
	}
}

// duration formats ns as a Go duration to a thousandth of its unit
// ("207.664ms", "2.5µs").
func duration(ns int64) string {
	d := time.Duration(ns)
	for _, unit := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if d >= unit {
			return d.Round(unit / 1000).String()
		}
	}
	return d.String()
}

// plural returns n and the noun, with an s unless n is 1 ("address" takes
// "es").
func plural(n int, noun string) string {
	s := strconv.Itoa(n) + " " + noun
	switch {
	case n == 1:
		return s
	case strings.HasSuffix(noun, "s"):
		return s + "es"
	}
	return s + "s"
}

// printable returns s, or s quoted with Go escapes when it holds a
// character that is not printable or a space, so that a name from a state
// cannot move the cursor or recolour a terminal.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}

// Flush implements Sink; tables are written by Write.
func (t *Table) Flush() error { return nil }

// Sync implements Syncer: it fsyncs the file written to, if it is one.
func (t *Table) Sync(context.Context) error { return syncWriter(t.w) }

// printf appends formatted text.
func (t *Table) printf(format string, a ...any) { t.buf = fmt.Appendf(t.buf, format, a...) }

// fields appends label and items on a line, separated by two spaces,
// continuing on indented lines where the next item would pass the width.
func (t *Table) fields(label string, items ...string) {
	line := label
	indent := strings.Repeat(" ", 4+len(label)-len(strings.TrimLeft(label, " ")))
	for _, it := range items {
		sep := "  "
		if line == label {
			sep = " "
		}
		if width(line)+len(sep)+width(it) > t.opts.Width && strings.TrimSpace(line) != "" && width(line) > len(indent) {
			t.buf = append(append(t.buf, line...), '\n')
			line, sep = indent, ""
		}
		line += sep + it
	}
	t.buf = append(append(t.buf, line...), '\n')
}

// opcodes appends the opcode histogram, one group per transport (RC, UC,
// RD, UD, XRC) named once, then the opcodes of none (CNP).
func (t *Table) opcodes(c *metrics.Counters) {
	var groups [][]string // group name, then "opcode packets" items
	group := func(name string) int {
		for i, g := range groups {
			if g[0] == name {
				return i
			}
		}
		groups = append(groups, []string{name})
		return len(groups) - 1
	}
	for op := range 256 {
		n := c.Opcode(uint8(op))
		if n == 0 {
			continue
		}
		name := decode.Opcode(op).String()
		transport, rest, _ := strings.Cut(name, " ")
		switch transport {
		case "RC", "UC", "RD", "UD", "XRC":
		default:
			transport, rest = "", name
		}
		i := group(transport)
		groups[i] = append(groups[i], rest+" "+u(n))
	}
	for _, g := range groups {
		label := "  opcodes:"
		if g[0] != "" {
			label = "  " + g[0] + " opcodes:"
		}
		t.fields(label, g[1:]...)
	}
}

// flowColumn is an optional per-flow column, shown when the width allows.
type flowColumn struct {
	head  string
	width int
	value func(f *report.FlowReport) string
}

// optionalColumns are the per-flow columns beyond the ones every table
// has, in the order they are added as the width allows.
var optionalColumns = []flowColumn{
	{"packets", 10, func(f *report.FlowReport) string { return u(f.C[metrics.FlowPackets]) }},
	{"msgs", 8, func(f *report.FlowReport) string { return u(f.C[metrics.FlowMessages]) }},
	{"CNP", 7, func(f *report.FlowReport) string { return u(f.C[metrics.FlowCNP]) }},
	{"ECN-CE", 7, func(f *report.FlowReport) string { return u(f.C[metrics.FlowECNCE]) }},
	{"retx", 6, func(f *report.FlowReport) string { return u(f.C[metrics.FlowRetransmits]) }},
	{"gaps", 6, func(f *report.FlowReport) string { return u(f.C[metrics.FlowPSNGaps]) }},
	{"NAK", 6, func(f *report.FlowReport) string { return u(f.C[metrics.FlowNAKs]) }},
	{"READ µs", 10, func(f *report.FlowReport) string {
		if n := f.C[metrics.FlowReadLatencyCount]; n > 0 {
			return micros(float64(f.C[metrics.FlowReadLatencySum]) / float64(n))
		}
		return "-"
	}},
}

// Widths of the columns every flow row has.
const (
	qpWidth    = 8  // 0x and six hex digits
	bytesWidth = 9  // "999.0 kB"
	rateWidth  = 10 // "0.521 Mb/s"
	flagsWidth = 5  // E, J, C, R, ~
)

// flows appends the flow list: a heading with the legend, then one row
// per flow, or two when the addresses do not fit beside the figures.
func (t *Table) flows(r *report.Report) {
	flows := reportedFlows(r)
	if len(flows) == 0 {
		return
	}
	head := fmt.Sprintf("top %d by bytes", len(r.Top))
	if r.All != nil {
		head = fmt.Sprintf("all %d (--exact)", len(r.All))
	} else if extra := len(flows) - len(r.Top); extra > 0 {
		head += fmt.Sprintf(", %d more elephant or jitter", extra)
	}
	elephant, jitter := "E elephant", "J jitter"
	if t.opts.ElephantRate > 0 {
		elephant += " ≥" + formatRate(t.opts.ElephantRate)
	}
	if t.opts.JitterRate > 0 {
		jitter += " Δ≥" + formatRate(t.opts.JitterRate)
	}
	t.fields("  flows:", head, elephant, jitter, "C CNP", "R retransmits", "~ estimated")
	addrW := 3
	for _, f := range flows {
		addrW = max(addrW, len(f.Key.Src.String()), len(f.Key.Dst.String()))
	}
	fixed := 2 + qpWidth + 1 + qpWidth + 1 + bytesWidth + 1 + rateWidth + 1 + flagsWidth
	split := 2+addrW+1+addrW+1+fixed > t.opts.Width
	used := fixed
	if !split {
		used += 2 + 2*addrW
	}
	var cols []flowColumn
	for _, c := range optionalColumns {
		if used+1+c.width > t.opts.Width {
			break
		}
		cols = append(cols, c)
		used += 1 + c.width
	}
	row := func(src, dst, dqp, sqp, bytes, rate, flags string, extra []string) {
		if split {
			t.printf("  %s → %s\n  ", src, dst)
		} else {
			t.printf("  %-*s %-*s ", addrW, src, addrW, dst)
		}
		t.printf("%-*s %-*s %*s %*s", qpWidth, dqp, qpWidth, sqp, bytesWidth, bytes, rateWidth, rate)
		for i, c := range cols {
			t.printf(" %*s", c.width, extra[i])
		}
		t.buf = append(trimRight(append(append(t.buf, ' '), flags...)), '\n')
	}
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c.head
		if n := utf8.RuneCountInString(c.head); n < len(c.head) {
			heads[i] = strings.Repeat(" ", len(c.head)-n) + c.head // pad by runes, not bytes
		}
	}
	row("src", "dst", "dqp", "sqp", "bytes", "rate", "flags", heads)
	extra := make([]string, len(cols))
	for _, f := range flows {
		sqp := "-"
		if f.SQPKnown {
			sqp = string(AppendQP(nil, f.SQP))
		}
		for i, c := range cols {
			extra[i] = c.value(f)
		}
		row(f.Key.Src.String(), f.Key.Dst.String(), string(AppendQP(nil, f.Key.DQP)), sqp,
			FormatBytes(f.C[metrics.FlowBytes]), formatRate(f.Rate), flowFlags(f), extra)
	}
}

// flowFlags returns the flag letters of a flow.
func flowFlags(f *report.FlowReport) string {
	var b []byte
	for _, x := range []struct {
		on   bool
		flag byte
	}{{f.Elephant, 'E'}, {f.Jitter, 'J'}, {f.C[metrics.FlowCNP] > 0, 'C'}, {f.C[metrics.FlowRetransmits] > 0, 'R'}, {f.Estimated, '~'}} {
		if x.on {
			b = append(b, x.flag)
		}
	}
	return string(b)
}

// trimRight removes trailing spaces.
func trimRight(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// width returns the columns s takes on a terminal (one per rune).
func width(s string) int { return utf8.RuneCountInString(s) }

// pfcFrames returns the PFC frames over every priority.
func pfcFrames(c *metrics.Counters) (n uint64) {
	for p := range 8 {
		f, _ := c.PFC(p)
		n += f
	}
	return n
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// micros formats a duration in ns as µs with two decimals.
func micros(ns float64) string { return strconv.FormatFloat(ns/1e3, 'f', 2, 64) }

// sig3 formats v with three significant digits (more left of the point
// when v ≥ 1000), never in exponent form.
func sig3(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	digits := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	if r := math.Pow10(-digits); math.Abs(math.Round(v/r)*r) >= 1000*r && digits > 0 {
		digits-- // 9.996 rounds to 10.0, not 10.00
	}
	return strconv.FormatFloat(v, 'f', max(digits, 0), 64)
}

// formatRate formats bits/s in Gb/s from 1 Gb/s up, else in Mb/s, with
// three significant digits.
func formatRate(bps float64) string {
	if bps >= 999.5e6 {
		return sig3(bps/1e9) + " Gb/s"
	}
	return sig3(bps/1e6) + " Mb/s"
}

// formatBytes formats a byte count with SI units and three significant
// digits.
func FormatBytes(n uint64) string {
	if n < 1000 {
		return u(n) + " B"
	}
	v, unit := float64(n)/1000, 0
	for ; v >= 999.5 && unit < 4; unit++ {
		v /= 1000
	}
	return sig3(v) + " " + [...]string{"kB", "MB", "GB", "TB", "PB"}[unit]
}
