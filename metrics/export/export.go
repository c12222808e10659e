package export

import (
	"bytes"
	"fmt"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rocescope/rocescope/decode"
)

// Sink writes reports somewhere.
type Sink interface {
	// Write writes one window's report. The text sinks (JSON lines, CSV,
	// table) hand the whole window to their writer in one Write call
	// before they return, so that a reader of a pipe or file sees each
	// window as soon as it closes.
	Write(r *report.Report) error
	// Flush writes out anything a sink holds back until the run ends (the
	// HTML page); the text sinks hold nothing back.
	Flush() error
}

// AppendJSON appends the report as one JSON object (no newline), with the
// keys of the report contract in DESIGN.md.
func AppendJSON(b []byte, r *report.Report) []byte {
	w := r.Window
	o := openObject(b)
	o.int("window_start_ns", w.Start)
	o.int("window_ns", w.Length)
	o.string("window_start", time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano))
	o.string("host", strings.Join(w.Hosts, ","))
	o.key("hosts")
	o.b = append(o.b, '[')
	for i, h := range w.Hosts {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = appendJSONString(o.b, h)
	}
	o.b = append(o.b, ']')
	for c := metrics.Counter(0); c < metrics.Counter(metrics.NumScalar); c++ {
		o.uint(c.String(), w.Counters[c])
	}
	o.uint("cnp_unattributed", r.CNPUnattributed)
	o.uint("flows", uint64(math.Round(r.Flows.Value)))
	o.string("flows_method", r.Flows.Method)
	o.float("flows_rel_err", r.Flows.RelErr)
	o.uint("flows_tracked", uint64(len(w.Flows)))
	o.bool("exact", r.Exact)
	o.key("opcodes")
	o.b = appendSparse(o.b, w.Counters.Opcodes(), nil)
	o.key("nak_codes")
	o.b = appendSparse(o.b, w.Counters.NAKCodes(), nil)
	o.key("decode_errors")
	o.b = appendSparse(o.b, w.Counters.DecodeErrorCodes(), func(i int) string { return decode.Error(i).Error() })
	o.key("pfc")
	pfc := openObject(o.b)
	for p := range 8 {
		if frames, quanta := w.Counters.PFC(p); frames > 0 {
			pfc.key(strconv.Itoa(p))
			x := openObject(pfc.b)
			x.uint("frames", frames)
			x.uint("quanta", quanta)
			pfc.b = x.close()
		}
	}
	o.b = pfc.close()
	o.key("read_latency_ns")
	o.b = appendLatency(o.b, r.ReadLatency)
	o.key("ack_latency_ns")
	o.b = appendLatency(o.b, r.AckLatency)
	for _, l := range []struct {
		name  string
		flows []report.FlowReport
	}{{"top_flows", r.Top}, {"elephants", r.Elephants}, {"jitter", r.Jitter}, {"flows_all", r.All}} {
		if l.flows == nil && l.name == "flows_all" {
			continue
		}
		o.key(l.name)
		o.b = append(o.b, '[')
		for i := range l.flows {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = AppendFlowJSON(o.b, &l.flows[i])
		}
		o.b = append(o.b, ']')
	}
	if se := r.SketchError; se != nil {
		o.key("sketch_error")
		x := openObject(o.b)
		x.float("flows_rel_err", se.FlowsRelErr)
		x.float("count_min_are", se.CountMinARE)
		x.float("top_recall", se.TopRecall)
		x.float("top_precision", se.TopPrec)
		o.b = x.close()
	}
	return o.close()
}

// appendSparse appends the non-zero entries of counts as a JSON object
// keyed by the decimal index, or by name(index) when name is not nil.
func appendSparse(b []byte, counts []uint64, name func(int) string) []byte {
	o := openObject(b)
	for i, n := range counts {
		if n == 0 {
			continue
		}
		if name != nil {
			o.uint(name(i), n)
		} else {
			o.uint(strconv.Itoa(i), n)
		}
	}
	return o.close()
}

func appendLatency(b []byte, l report.LatencySummary) []byte {
	o := openObject(b)
	o.uint("count", l.Count)
	if l.Count > 0 {
		o.float("p50", l.P50)
		o.float("p90", l.P90)
		o.float("p99", l.P99)
		o.float("p999", l.P999)
		o.float("max", l.Max)
	}
	return o.close()
}

// AppendFlowJSON appends the flow as a JSON object with the flow keys of the
// report contract.
func AppendFlowJSON(b []byte, f *report.FlowReport) []byte {
	o := openObject(b)
	o.text("src", f.Key.Src.AppendTo)
	o.text("dst", f.Key.Dst.AppendTo)
	o.uint("dqp", uint64(f.Key.DQP))
	if f.SQPKnown {
		o.uint("sqp", uint64(f.SQP))
	}
	if f.Sport != 0 {
		o.uint("sport", uint64(f.Sport))
	}
	o.float("rate_bps", f.Rate)
	o.float("prev_rate_bps", f.PrevRate)
	o.bool("elephant", f.Elephant)
	o.bool("jitter", f.Jitter)
	if f.Estimated {
		o.bool("estimated", true)
	}
	for c := metrics.FlowCounter(0); c < metrics.FlowCounter(metrics.NumFlowCounters); c++ {
		o.uint(c.String(), f.C[c])
	}
	if n := f.C[metrics.FlowReadLatencyCount]; n > 0 {
		o.float("read_latency_mean_ns", float64(f.C[metrics.FlowReadLatencySum])/float64(n))
	}
	if n := f.C[metrics.FlowAckLatencyCount]; n > 0 {
		o.float("ack_latency_mean_ns", float64(f.C[metrics.FlowAckLatencySum])/float64(n))
	}
	o.key("opcodes")
	ops := openObject(o.b)
	for i, op := range f.Ops.Op {
		if f.Ops.N[i] == 0 {
			break
		}
		ops.uint(strconv.Itoa(int(op)), f.Ops.N[i])
	}
	if f.Ops.Other > 0 {
		ops.uint("other", f.Ops.Other)
	}
	o.b = ops.close()
	return o.close()
}

// JSONLines writes one JSON object per window and line.
type JSONLines struct {
	w   io.Writer
	buf []byte
}

// NewJSONLines returns a sink writing JSON lines to w.
func NewJSONLines(w io.Writer) *JSONLines { return &JSONLines{w: w} }

// Write implements Sink.
func (j *JSONLines) Write(r *report.Report) error {
	j.buf = append(AppendJSON(j.buf[:0], r), '\n')
	_, err := j.w.Write(j.buf)
	return err
}

// Flush implements Sink; JSON lines are written by Write.
func (j *JSONLines) Flush() error { return nil }

// CSV writes one row per reported flow and window: every flow with
// Config.Exact, otherwise the top flows, elephants and jitter flows.
type CSV struct {
	w      io.Writer
	header bool
	buf    []byte
}

// NewCSV returns a sink writing CSV to w.
func NewCSV(w io.Writer) *CSV { return &CSV{w: w} }

// Write implements Sink.
func (c *CSV) Write(r *report.Report) error {
	b := c.buf[:0]
	if !c.header {
		c.header = true
		b = append(b, "window_start_ns,window_ns,host,src,dst,dqp,sqp,sport,rate_bps,prev_rate_bps,elephant,jitter,estimated"...)
		for fc := metrics.FlowCounter(0); fc < metrics.FlowCounter(metrics.NumFlowCounters); fc++ {
			b = append(append(b, ','), fc.String()...)
		}
		b = append(b, '\n')
	}
	host := strings.Join(r.Window.Hosts, " ")
	for _, f := range csvFlows(r) {
		b = strconv.AppendInt(b, r.Window.Start, 10)
		b = strconv.AppendInt(append(b, ','), r.Window.Length, 10)
		b = appendCSVField(append(b, ','), host)
		b = f.Key.Src.AppendTo(append(b, ','))
		b = f.Key.Dst.AppendTo(append(b, ','))
		b = strconv.AppendUint(append(b, ','), uint64(f.Key.DQP), 10)
		b = append(b, ',')
		if f.SQPKnown {
			b = strconv.AppendUint(b, uint64(f.SQP), 10)
		}
		b = strconv.AppendUint(append(b, ','), uint64(f.Sport), 10)
		b = appendJSONFloat(append(b, ','), f.Rate)
		b = appendJSONFloat(append(b, ','), f.PrevRate)
		b = strconv.AppendBool(append(b, ','), f.Elephant)
		b = strconv.AppendBool(append(b, ','), f.Jitter)
		b = strconv.AppendBool(append(b, ','), f.Estimated)
		for fc := metrics.FlowCounter(0); fc < metrics.FlowCounter(metrics.NumFlowCounters); fc++ {
			b = strconv.AppendUint(append(b, ','), f.C[fc], 10)
		}
		b = append(b, '\n')
	}
	c.buf = b
	_, err := c.w.Write(b)
	return err
}

// Flush implements Sink; rows are written by Write.
func (c *CSV) Flush() error { return nil }

// csvFlows returns the flows a CSV row is written for, each once.
func csvFlows(r *report.Report) []*report.FlowReport {
	if r.All != nil {
		out := make([]*report.FlowReport, len(r.All))
		for i := range r.All {
			out[i] = &r.All[i]
		}
		return out
	}
	var out []*report.FlowReport
	seen := make(map[metrics.FlowKey]bool)
	for _, l := range [][]report.FlowReport{r.Top, r.Elephants, r.Jitter} {
		for i := range l {
			if !seen[l[i].Key] {
				seen[l[i].Key] = true
				out = append(out, &l[i])
			}
		}
	}
	return out
}

// appendCSVField appends s, quoted when it holds a separator or a quote.
func appendCSVField(b []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\n\r") {
		return append(b, s...)
	}
	return append(append(b, '"'), append([]byte(strings.ReplaceAll(s, `"`, `""`)), '"')...)
}

// Table writes a readable summary per window for a terminal.
type Table struct {
	w   io.Writer
	buf bytes.Buffer
}

// NewTable returns a sink writing readable tables to w.
func NewTable(w io.Writer) *Table { return &Table{w: w} }

// Write implements Sink.
func (t *Table) Write(r *report.Report) error {
	w := r.Window
	c := &w.Counters
	t.buf.Reset()
	p := func(format string, a ...any) { fmt.Fprintf(&t.buf, format, a...) }
	p("window %s  %v  host %s\n", time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano), time.Duration(w.Length), strings.Join(w.Hosts, ","))
	p("  packets %d (%s)  roce %d  other %d  malformed %d  truncated %d  late %d  kernel drops %d\n",
		c[metrics.Packets], humanBytes(c[metrics.Bytes]), c[metrics.RoCEPackets], c[metrics.OtherPackets], c[metrics.MalformedPackets], c[metrics.TruncatedPackets], c[metrics.LatePackets], c[metrics.KernelDrops])
	p("  flows ~%.0f (%s, ±%.2g%%)  tracked %d  exact %v  messages %d\n",
		r.Flows.Value, r.Flows.Method, 100*r.Flows.RelErr, len(w.Flows), r.Exact, c[metrics.Messages])
	p("  congestion: CNP %d  ECN-CE %d  FECN %d  BECN %d  PFC %d  pause %d\n",
		c[metrics.CNP], c[metrics.ECNCE], c[metrics.FECN], c[metrics.BECN], pfcFrames(c), c[metrics.PauseFrames])
	p("  transport: ACK %d  NAK %d  RNR NAK %d  retransmits %d  PSN gaps %d  out of order %d\n",
		c[metrics.Acks], c[metrics.NAKs], c[metrics.RNRNAKs], c[metrics.Retransmits], c[metrics.PSNGaps], c[metrics.OutOfOrder])
	if l := r.ReadLatency; l.Count > 0 {
		p("  READ latency: n %d  p50 %v  p99 %v  max %v\n", l.Count, ns(l.P50), ns(l.P99), ns(l.Max))
	}
	if l := r.AckLatency; l.Count > 0 {
		p("  ACK latency:  n %d  p50 %v  p99 %v  max %v\n", l.Count, ns(l.P50), ns(l.P99), ns(l.Max))
	}
	p("  opcodes:")
	for op := range 256 {
		if n := c.Opcode(uint8(op)); n > 0 {
			p(" %s=%d", decode.Opcode(op), n)
		}
	}
	p("\n")
	if len(r.Top) > 0 {
		p("  %-40s %-40s %8s %8s %12s %10s %s\n", "src", "dst", "dqp", "sqp", "bytes", "rate", "flags")
		for i := range r.Top {
			f := &r.Top[i]
			sqp := "-"
			if f.SQPKnown {
				sqp = strconv.FormatUint(uint64(f.SQP), 10)
			}
			var flags []string
			for _, x := range []struct {
				on   bool
				name string
			}{{f.Elephant, "elephant"}, {f.Jitter, "jitter"}, {f.Estimated, "estimated"}, {f.C[metrics.FlowCNP] > 0, "cnp"}, {f.C[metrics.FlowRetransmits] > 0, "retrans"}} {
				if x.on {
					flags = append(flags, x.name)
				}
			}
			p("  %-40s %-40s %8d %8s %12s %10s %s\n", f.Key.Src, f.Key.Dst, f.Key.DQP, sqp, humanBytes(f.C[metrics.FlowBytes]), humanRate(f.Rate), strings.Join(flags, ","))
		}
	}
	if len(r.Jitter) > 0 {
		p("  jitter flows: %d  elephants: %d\n", len(r.Jitter), len(r.Elephants))
	}
	p("\n")
	_, err := t.w.Write(t.buf.Bytes())
	return err
}

// Flush implements Sink; tables are written by Write.
func (t *Table) Flush() error { return nil }

// pfcFrames returns the PFC frames over every priority.
func pfcFrames(c *metrics.Counters) (n uint64) {
	for p := range 8 {
		f, _ := c.PFC(p)
		n += f
	}
	return n
}

func ns(v float64) time.Duration { return time.Duration(v) }

func humanBytes(n uint64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

func humanRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f Gb/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.2f Mb/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.2f kb/s", bps/1e3)
	}
	return fmt.Sprintf("%.0f b/s", bps)
}
