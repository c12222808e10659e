package export

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// CSV writes one row of window totals per window, followed by one row per
// flow the report lists (every flow with Config.Exact, otherwise the top
// flows and the elephants and jitter flows beyond them). The first line is
// the header; a column holds the same figure in every row that has it:
//
//   - row: "window" or "flow" ("summary" instead of "window" for the
//     report of a whole run, report.Summary);
//   - window_start_ns, window_start (RFC 3339, UTC), window_ns, host
//     (hosts joined by spaces): every row;
//   - src, dst, dqp, dqp_hex, sqp, sqp_hex (when known), sport,
//     prev_rate_bps, elephant, jitter, estimated: flow rows; QPs in
//     decimal, and in hex as Wireshark shows them;
//   - rate_bps: bits/s of the flow, or of the whole window, over the part
//     of the window the input covered, as every rate;
//   - the per-flow counters of the JSON report (bytes, payload_bytes,
//     packets, messages, cnp, ecn_ce, fecn, becn, retransmits, psn_gaps,
//     out_of_order, acks, naks, rnr_naks, and the latency sums and counts,
//     cnp_carried): flow rows, and window rows for those the window counts
//     too;
//   - the window counters the flows do not have (roce_packets,
//     other_packets, malformed_packets, truncated_packets, kernel_drops and
//     the rest of the JSON report's counters), flows (the estimate),
//     flows_tracked and exact, the READ and ACK latencies
//     (read_latency_matched, read_latency_p50_ns, _p90_ns, _p99_ns,
//     _p999_ns, _max_ns, then the same for ack_latency: the JSON's
//     read_latency_ns and ack_latency_ns; no quantiles when none matched),
//     and PFC per priority (pfc0_frames, pfc0_quanta, ... pfc7_quanta):
//     window rows.
//
// Cells a row does not have are empty.
type CSV struct {
	w      io.Writer
	header bool
	buf    []byte
}

// NewCSV returns a sink writing CSV to w.
func NewCSV(w io.Writer) *CSV { return &CSV{w: w} }

// csvFlowHead are the columns of a flow's identity and rate.
const csvFlowHead = "src,dst,dqp,dqp_hex,sqp,sqp_hex,sport,rate_bps,prev_rate_bps,elephant,jitter,estimated"

// csvWindowTail are the columns after exact: latencies and PFC per
// priority, in window rows only; csvFlowTail is the empty cells a flow row
// has from the first window counter on.
var csvWindowTail, csvFlowTail = csvTail()

func csvTail() (head, empty string) {
	for _, l := range []string{"read_latency", "ack_latency"} {
		head += "," + l + "_matched"
		for _, q := range []string{"p50", "p90", "p99", "p999", "max"} {
			head += "," + l + "_" + q + "_ns"
		}
	}
	for p := range 8 {
		head += fmt.Sprintf(",pfc%d_frames,pfc%d_quanta", p, p)
	}
	return head, strings.Repeat(",", len(windowOnly)+3+strings.Count(head, ","))
}

// windowCounterOf maps each per-flow counter to the index of the window
// counter of the same name, or -1; windowOnly are the window counters no flow counter
// names.
var windowCounterOf, windowOnly = csvCounters()

func csvCounters() (of [metrics.NumFlowCounters]int, only []metrics.Counter) {
	named := make(map[string]bool)
	for fc := range of {
		of[fc] = -1
		for c := metrics.Counter(0); c < metrics.Counter(metrics.NumScalar); c++ {
			if c.String() == metrics.FlowCounter(fc).String() {
				of[fc] = int(c)
				named[c.String()] = true
			}
		}
	}
	for c := metrics.Counter(0); c < metrics.Counter(metrics.NumScalar); c++ {
		if !named[c.String()] {
			only = append(only, c)
		}
	}
	return of, only
}

// Write implements Sink.
func (c *CSV) Write(r *report.Report) error {
	b := c.buf[:0]
	if !c.header {
		c.header = true
		b = append(b, "row,window_start_ns,window_start,window_ns,host,"+csvFlowHead...)
		for fc := range metrics.NumFlowCounters {
			b = append(append(b, ','), metrics.FlowCounter(fc).String()...)
		}
		for _, wc := range windowOnly {
			b = append(append(b, ','), wc.String()...)
		}
		b = append(b, ",flows,flows_tracked,exact"...)
		b = append(b, csvWindowTail...)
		b = append(b, '\n')
	}
	w := r.Window
	host := strings.Join(w.Hosts, " ")
	start := time.Unix(0, w.Start).UTC()
	prefix := func(b []byte, row string) []byte {
		b = append(b, row...)
		b = strconv.AppendInt(append(b, ','), w.Start, 10)
		b = start.AppendFormat(append(b, ','), time.RFC3339Nano)
		b = strconv.AppendInt(append(b, ','), w.Length, 10)
		return appendCSVField(append(b, ','), host)
	}
	// The window row, or the summary's.
	if r.Summary > 0 {
		b = prefix(b, "summary")
	} else {
		b = prefix(b, "window")
	}
	b = append(b, ",,,,,,,,"...) // src, dst, dqp, dqp_hex, sqp, sqp_hex, sport, then rate_bps
	b = AppendFloat(b, float64(w.Counters[metrics.Bytes])*8/report.Seconds(w))
	b = append(b, ",,,,"...) // prev_rate_bps, elephant, jitter, estimated
	for _, wc := range windowCounterOf {
		b = append(b, ',')
		if wc >= 0 {
			b = strconv.AppendUint(b, w.Counters[metrics.Counter(wc)], 10)
		}
	}
	for _, wc := range windowOnly {
		b = strconv.AppendUint(append(b, ','), w.Counters[wc], 10)
	}
	b = strconv.AppendUint(append(b, ','), uint64(math.Round(r.Flows.Value)), 10)
	b = strconv.AppendInt(append(b, ','), int64(len(w.Flows)), 10)
	b = strconv.AppendBool(append(b, ','), r.Exact)
	for _, l := range [2]report.LatencySummary{r.ReadLatency, r.AckLatency} {
		b = strconv.AppendUint(append(b, ','), l.Count, 10)
		for _, q := range [...]float64{l.P50, l.P90, l.P99, l.P999, l.Max} {
			b = append(b, ',')
			if l.Count > 0 {
				b = AppendFloat(b, q)
			}
		}
	}
	for p := range 8 {
		frames, quanta := w.Counters.PFC(p)
		b = strconv.AppendUint(append(b, ','), frames, 10)
		b = strconv.AppendUint(append(b, ','), quanta, 10)
	}
	b = append(b, '\n')
	// The flow rows.
	for _, f := range reportedFlows(r) {
		b = prefix(b, "flow")
		b = f.Key.Src.AppendTo(append(b, ','))
		b = f.Key.Dst.AppendTo(append(b, ','))
		b = strconv.AppendUint(append(b, ','), uint64(f.Key.DQP), 10)
		b = AppendQP(append(b, ','), f.Key.DQP)
		if f.SQPKnown {
			b = strconv.AppendUint(append(b, ','), uint64(f.SQP), 10)
			b = AppendQP(append(b, ','), f.SQP)
		} else {
			b = append(b, ",,"...)
		}
		b = strconv.AppendUint(append(b, ','), uint64(f.Sport), 10)
		b = AppendFloat(append(b, ','), f.Rate)
		b = AppendFloat(append(b, ','), f.PrevRate)
		b = strconv.AppendBool(append(b, ','), f.Elephant)
		b = strconv.AppendBool(append(b, ','), f.Jitter)
		b = strconv.AppendBool(append(b, ','), f.Estimated)
		for fc := range metrics.NumFlowCounters {
			b = strconv.AppendUint(append(b, ','), f.C[fc], 10)
		}
		b = append(b, csvFlowTail...)
		b = append(b, '\n')
	}
	c.buf = b
	_, err := c.w.Write(b)
	return err
}

// Flush implements Sink; rows are written by Write.
func (c *CSV) Flush() error { return nil }

// Sync implements Syncer: it fsyncs the file written to, if it is one.
func (c *CSV) Sync(context.Context) error { return syncWriter(c.w) }

// appendCSVField appends s, quoted when it holds a separator or a quote,
// and behind a ' when it begins like a spreadsheet formula (=, +, -, @, a
// tab or a carriage return), so that a spreadsheet shows it as text.
func appendCSVField(b []byte, s string) []byte {
	if s != "" && strings.ContainsAny(s[:1], "=+-@\t\r") {
		s = "'" + s
	}
	if !strings.ContainsAny(s, ",\"\n\r") {
		return append(b, s...)
	}
	return append(append(b, '"'), append([]byte(strings.ReplaceAll(s, `"`, `""`)), '"')...)
}
