package html

import (
	"math"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
)

// This file and events.go are the ones that read the metrics package's
// report: the rest of the package works on the window type below.

var _ export.Sink = (*File)(nil)

// Write adds the report of one window to the page; it keeps nothing of r
// past the call, so the engine may reuse the window. Windows must come in
// time order and have one length, else Write returns an error wrapping
// [ErrOrder] and the page is unchanged.
func (p *Page) Write(r *report.Report) error { return p.add(windowOf(r)) }

// Write adds the report of one window to the page the next Flush writes.
func (f *File) Write(r *report.Report) error {
	f.dirty = true
	return f.page.Write(r)
}

// window is what the page keeps of one report.
type window struct {
	start, length int64 // ns
	hosts         []string
	exact         bool    // every flow was in the QP tables
	flowsMethod   string  // how the distinct flows were estimated
	flowsRelErr   float64 // the estimate's stated relative error
	figures
	top []flowSample // the report's top list, largest first, then the flows its events name beyond it
	// events are the report's events (their kind's figures point into
	// the report: the page copies what it keeps).
	events        []report.Event
	eventsOmitted [report.NumEventKinds]uint64
}

// flowSample is one flow of a window's top list.
type flowSample struct {
	id                              flowID
	sqp                             uint32
	sqpKnown                        bool
	bytes, packets, cnp, ecnCE, ret uint64
	rate, delta                     float64 // bits/s, and its change from the previous window
	elephant, jitter, estimated     bool
}

// flowID names a flow as the report does.
type flowID struct {
	src, dst string
	dqp      uint32
}

// reportCounters are the sums read straight off the window's counters.
var reportCounters = []struct {
	sum     int
	counter metrics.Counter
}{
	{sumPackets, metrics.Packets},
	{sumBytes, metrics.Bytes},
	{sumRoCE, metrics.RoCEPackets},
	{sumOther, metrics.OtherPackets},
	{sumMalformed, metrics.MalformedPackets},
	{sumTruncated, metrics.TruncatedPackets},
	{sumKernelDrops, metrics.KernelDrops},
	{sumLate, metrics.LatePackets},
	{sumSourceErrors, metrics.SourceErrors},
	{sumUntracked, metrics.UntrackedPackets},
	{sumMessages, metrics.Messages},
	{sumCNP, metrics.CNP},
	{sumECNCE, metrics.ECNCE},
	{sumFECN, metrics.FECN},
	{sumBECN, metrics.BECN},
	{sumAcks, metrics.Acks},
	{sumNAKs, metrics.NAKs},
	{sumRNRNAKs, metrics.RNRNAKs},
	{sumRetransmits, metrics.Retransmits},
	{sumPSNGaps, metrics.PSNGaps},
	{sumOutOfOrder, metrics.OutOfOrder},
	{sumPauseFrames, metrics.PauseFrames},
	{sumPauseQuanta, metrics.PauseQuanta},
	{sumReadRequests, metrics.ReadRequests},
	{sumReadUnmatched, metrics.ReadLatencyUnmatched},
}

// windowOf returns what the page keeps of r.
func windowOf(r *report.Report) window {
	w := r.Window
	c := &w.Counters
	out := window{
		start:       w.Start,
		length:      w.Length,
		hosts:       w.Hosts,
		exact:       r.Exact,
		flowsMethod: r.Flows.Method,
		flowsRelErr: r.Flows.RelErr,
	}
	f := &out.figures
	f.windows = 1
	for _, k := range reportCounters {
		f.sum[k.sum] = c.Get(k.counter)
	}
	f.sum[sumCNPUnattributed] = r.CNPUnattributed
	f.sum[sumReadCount] = r.ReadLatency.Count
	f.sum[sumAckCount] = r.AckLatency.Count
	for op := range 256 {
		f.sum[sumOpcodeBase+op] = c.Opcode(uint8(op))
	}
	for code := range 32 {
		f.sum[sumNAKCodeBase+code] = c.NAKCode(uint8(code))
	}
	for p := range 8 {
		f.sum[sumPFCFramesBase+p], f.sum[sumPFCQuantaBase+p] = c.PFC(p)
	}

	ns := report.Seconds(w) * 1e9 // the covered part of the window
	f.max[maxGbps] = float64(c.Get(metrics.Bytes)) * 8 / ns
	f.max[maxMpps] = float64(c.Get(metrics.Packets)) * 1e3 / ns
	f.min[minGbps], f.min[minMpps] = f.max[maxGbps], f.max[maxMpps]
	f.max[maxFlows] = math.Round(r.Flows.Value)
	f.max[maxElephants] = float64(len(r.Elephants))
	f.max[maxJitter] = float64(len(r.Jitter))
	for i, l := range [2]report.LatencySummary{r.ReadLatency, r.AckLatency} {
		q := [4]float64{absent, absent, absent, absent}
		if l.Count > 0 {
			q = [4]float64{l.P50, l.P90, l.P99, l.Max}
		}
		copy(f.max[maxReadP50+4*i:], q[:])
	}

	out.events, out.eventsOmitted = r.Events, r.EventsOmitted
	out.top = make([]flowSample, len(r.Top), len(r.Top)+len(r.EventFlows))
	for i := range r.Top {
		out.top[i] = sampleOf(&r.Top[i])
	}
	if len(r.EventFlows) == 0 {
		return out
	}
	listed := make(map[metrics.FlowKey]bool, len(r.Top))
	for i := range r.Top {
		listed[r.Top[i].Key] = true
	}
	for i := range r.EventFlows {
		if f := &r.EventFlows[i]; !listed[f.Key] {
			out.top = append(out.top, sampleOf(f))
		}
	}
	return out
}

// sampleOf returns what the page keeps of a flow of a report.
func sampleOf(t *report.FlowReport) flowSample {
	return flowSample{
		id:        flowID{src: t.Key.Src.String(), dst: t.Key.Dst.String(), dqp: t.Key.DQP},
		sqp:       t.SQP,
		sqpKnown:  t.SQPKnown,
		bytes:     t.Get(metrics.FlowBytes),
		packets:   t.Get(metrics.FlowPackets),
		cnp:       t.Get(metrics.FlowCNP),
		ecnCE:     t.Get(metrics.FlowECNCE),
		ret:       t.Get(metrics.FlowRetransmits),
		rate:      t.Rate,
		delta:     math.Abs(t.Rate - t.PrevRate),
		elephant:  t.Elephant,
		jitter:    t.Jitter,
		estimated: t.Estimated,
	}
}
