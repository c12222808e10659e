package export

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
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

var _ = []Syncer{(*JSONLines)(nil), (*CSV)(nil), (*Table)(nil)}

// Sync flushes s and, if s is a Syncer, makes what it wrote durable. A sink
// that is not one (writing to a pipe or a terminal) has nothing more to do.
func Sync(ctx context.Context, s Sink) error {
	if err := s.Flush(); err != nil {
		return err
	}
	if y, ok := s.(Syncer); ok {
		return y.Sync(ctx)
	}
	return nil
}

// SyncPath fsyncs the file or directory at path: for a directory, it makes
// the names created, renamed or removed in it durable.
func SyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// syncWriter makes what was written to w durable: it fsyncs w when w is a
// regular file, and does nothing for pipes, terminals and other writers.
func syncWriter(w io.Writer) error {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return err
	}
	return f.Sync()
}

// AppendJSON appends the report as one JSON object (no newline), with the
// keys of the report contract in DESIGN.md.
func AppendJSON(b []byte, r *report.Report) []byte {
	w := r.Window
	o := openObject(b)
	o.int("window_start_ns", w.Start)
	o.int("window_ns", w.Length)
	o.int("covered_ns", w.Covered())
	o.bool("partial", w.Covered() < w.Length)
	o.string("window_start", time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano))
	o.string("host", strings.Join(w.Hosts, ","))
	o.key("hosts")
	o.b = appendJSONStrings(o.b, w.Hosts)
	if len(r.MissingHosts) > 0 {
		o.key("missing_hosts")
		o.b = appendJSONStrings(o.b, r.MissingHosts)
	}
	if r.Summary > 0 {
		o.bool("summary", true)
		o.int("windows", int64(r.Summary))
	}
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
	}{{"top_flows", r.Top}, {"elephants", r.Elephants}, {"jitter", r.Jitter}, {"top_cnp", r.TopCNP},
		{"top_retransmits", r.TopRetransmits}, {"event_flows", r.EventFlows}, {"flows_all", r.All}} {
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
	o.key("events")
	o.b = appendEvents(o.b, r.Events)
	o.key("events_omitted")
	omitted := openObject(o.b)
	for k := report.EventKind(1); k < report.EventKind(report.NumEventKinds); k++ {
		omitted.uint(k.String(), r.EventsOmitted[k])
	}
	o.b = omitted.close()
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

// appendJSONStrings appends ss as a JSON array of strings.
func appendJSONStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
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
	appendFlowID(&o, &report.Flow{Key: f.Key, SQP: f.SQP, SQPKnown: f.SQPKnown})
	if f.Sport != 0 {
		o.uint("sport", uint64(f.Sport))
	}
	o.float("rate_bps", f.Rate)
	o.float("prev_rate_bps", f.PrevRate)
	o.bool("elephant", f.Elephant)
	o.bool("jitter", f.Jitter)
	if f.Estimated {
		o.bool("estimated", true)
		o.uint("bytes_min", f.BytesMin)
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

// AppendQP appends a QP number as Wireshark shows it and the table and
// the HTML page print it: 0x and six hex digits (QPNs are 24 bits).
func AppendQP(b []byte, qpn uint32) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '0', 'x')
	for shift := 20; shift >= 0; shift -= 4 {
		b = append(b, hex[qpn>>shift&15])
	}
	return b
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

// Sync implements Syncer: it fsyncs the file written to, if it is one.
func (j *JSONLines) Sync(context.Context) error { return syncWriter(j.w) }

// reportedFlows returns the flows a report lists, each once: every flow
// with Config.Exact, otherwise the top flows, then the elephants and jitter
// flows beyond them.
func reportedFlows(r *report.Report) []*report.FlowReport {
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
