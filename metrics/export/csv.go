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
//     window rows;
//   - the events' columns (csvEventHead: kind, id, start_ns, end_ns,
//     ongoing, then the kinds' own keys, as in the JSON report and the
//     ClickHouse events table): event rows;
//   - missing_hosts, last: the hosts a merge expected (merge --hosts) that
//     the window lacks, joined by spaces (the JSON's missing_hosts): window
//     rows.
//
// An event row ("event"), one per event of the window, follows the window
// row, before the flow rows. It names its flow in src, dst, dqp, dqp_hex,
// sqp and sqp_hex (retransmission, ce_without_cnp; an incast its
// destination in dst, its senders in senders as src/dqp_hex), and puts its
// counts of bytes, ecn_ce, cnp and packets in those columns: the
// senders' in the burst for an incast, the flow's in the window for
// ce_without_cnp. An event that spans windows has a row, with the same
// id, in each. Cells a row does not have are empty.
type CSV struct {
	w      io.Writer
	header bool
	buf    []byte
}

// NewCSV returns a sink writing CSV to w.
func NewCSV(w io.Writer) *CSV { return &CSV{w: w} }

// csvFlowHead are the columns of a flow's identity and rate.
const csvFlowHead = "src,dst,dqp,dqp_hex,sqp,sqp_hex,sport,rate_bps,prev_rate_bps,elephant,jitter,estimated"

// csvEventHead are the columns of the events, last in every row: the
// keys of the JSON report's events (those the flow columns have not).
const csvEventHead = "kind,id,start_ns,end_ns,ongoing,sender_count,sources,peak_bps,senders," +
	"mac,priority,paused_ns,paused_fraction,frames,cause,first_psn,resent,stall_ns,nak_code,rnr_timer,merged,reverse_packets"

// csvNoEvent is the empty event cells of window and flow rows.
var csvNoEvent = strings.Repeat(",", strings.Count(csvEventHead, ",")+1)

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
		b = append(append(append(b, ','), csvEventHead...), ",missing_hosts\n"...)
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
	b = append(b, csvNoEvent...)
	b = append(appendCSVField(append(b, ','), strings.Join(r.MissingHosts, " ")), '\n')
	for i := range r.Events {
		b = appendCSVEvent(prefix(b, "event"), &r.Events[i])
	}
	// The flow rows.
	for _, f := range reportedFlows(r) {
		b = appendCSVFlowID(prefix(b, "flow"), &f.Key, f.SQP, f.SQPKnown)
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
		b = append(append(b, csvNoEvent...), ",\n"...) // and no missing_hosts
	}
	c.buf = b
	_, err := c.w.Write(b)
	return err
}

// appendCSVFlowID appends the cells that name a flow: src, dst, dqp,
// dqp_hex, and sqp and sqp_hex (empty when not known).
func appendCSVFlowID(b []byte, k *metrics.FlowKey, sqp uint32, known bool) []byte {
	b = k.Src.AppendTo(append(b, ','))
	b = k.Dst.AppendTo(append(b, ','))
	b = strconv.AppendUint(append(b, ','), uint64(k.DQP), 10)
	b = AppendQP(append(b, ','), k.DQP)
	if !known {
		return append(b, ",,"...)
	}
	b = strconv.AppendUint(append(b, ','), uint64(sqp), 10)
	return AppendQP(append(b, ','), sqp)
}

// appendCSVEvent appends the cells of an event row after its prefix, the
// empty missing_hosts and the newline.
func appendCSVEvent(b []byte, e *report.Event) []byte {
	var flow *report.Flow
	var counts [metrics.NumFlowCounters]string // bytes, ecn_ce, cnp, packets where the event has them
	switch {
	case e.Incast != nil:
		counts[metrics.FlowBytes], counts[metrics.FlowECNCE], counts[metrics.FlowCNP] = u(e.Incast.Bytes), u(e.Incast.ECNCE), u(e.Incast.CNP)
	case e.Retransmission != nil:
		flow = &e.Retransmission.Flow
	case e.CEWithoutCNP != nil:
		flow = &e.CEWithoutCNP.Flow
		counts[metrics.FlowECNCE], counts[metrics.FlowCNP], counts[metrics.FlowPackets] = u(e.CEWithoutCNP.ECNCE), "0", u(e.CEWithoutCNP.Packets)
	}
	switch {
	case flow != nil:
		b = appendCSVFlowID(b, &flow.Key, flow.SQP, flow.SQPKnown)
	case e.Incast != nil:
		b = e.Incast.Dst.AppendTo(append(b, ",,"...))
		b = append(b, ",,,,"...)
	default:
		b = append(b, ",,,,,,"...)
	}
	b = append(b, ",,,,,,"...) // sport, rate_bps, prev_rate_bps, elephant, jitter, estimated
	for _, c := range counts {
		b = append(append(b, ','), c...)
	}
	b = append(b, csvFlowTail...)
	b = append(append(b, ','), e.Kind.String()...)
	b = e.ID.AppendText(append(b, ','))
	b = strconv.AppendInt(append(b, ','), e.Start, 10)
	b = strconv.AppendInt(append(b, ','), e.End, 10)
	b = strconv.AppendBool(append(b, ','), e.Ongoing)
	var cells [17]string // sender_count ... reverse_packets
	switch {
	case e.Incast != nil:
		in := e.Incast
		var senders []byte
		for i := range in.Senders {
			if i > 0 {
				senders = append(senders, ' ')
			}
			senders = AppendQP(append(in.Senders[i].Key.Src.AppendTo(senders), '/'), in.Senders[i].Key.DQP)
		}
		cells[0], cells[1], cells[2], cells[3] = strconv.Itoa(in.SenderCount), strconv.Itoa(in.Sources), string(AppendFloat(nil, in.PeakBPS)), string(senders)
	case e.PFCStorm != nil:
		st := e.PFCStorm
		cells[4], cells[5] = string(report.AppendMAC(nil, st.MAC)), strconv.Itoa(int(st.Priority))
		cells[6], cells[7], cells[8] = strconv.FormatInt(st.PausedNS, 10), string(AppendFloat(nil, st.PausedFraction)), u(st.Frames)
	case e.Retransmission != nil:
		rt := e.Retransmission
		cells[9], cells[10], cells[11], cells[12] = rt.Cause.String(), u(uint64(rt.FirstPSN)), u(rt.Resent), strconv.FormatInt(rt.StallNS, 10)
		switch rt.Cause {
		case metrics.CauseNAK:
			cells[13] = strconv.Itoa(int(rt.NAKCode))
		case metrics.CauseRNR:
			cells[14] = strconv.Itoa(int(rt.NAKCode))
		}
		cells[15] = strconv.FormatBool(rt.Merged)
	case e.CEWithoutCNP != nil:
		cells[16] = u(e.CEWithoutCNP.ReversePackets)
	}
	for _, c := range cells {
		b = appendCSVField(append(b, ','), c)
	}
	return append(b, ",\n"...)
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
