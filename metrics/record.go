package metrics

import (
	"bytes"
	"cmp"
	"slices"
)

// FlowCounter names one exact, additive per-flow figure.
type FlowCounter uint8

// Per-flow counters.
const (
	FlowBytes            FlowCounter = iota // on-wire bytes
	FlowPayloadBytes                        // RDMA payload bytes
	FlowReadLatencySum                      // sum of READ request → first response latencies, ns
	FlowAckLatencySum                       // sum of AckReq request → ACK latencies, ns
	FlowPackets                             // frames
	FlowMessages                            // LAST and ONLY opcodes
	FlowCNP                                 // CNPs against this flow (attributed when the report is built)
	FlowECNCE                               // frames with ECN = CE
	FlowFECN                                // BTH FECN set
	FlowBECN                                // BTH BECN set
	FlowRetransmits                         // request PSN behind the expected one
	FlowPSNGaps                             // request PSN ahead of the expected one
	FlowOutOfOrder                          // request PSN a gap skipped, before any NAK
	FlowAcks                                // ACKs carried
	FlowNAKs                                // NAKs carried
	FlowRNRNAKs                             // RNR NAKs carried
	FlowReadLatencyCount                    // matched READ latencies
	FlowAckLatencyCount                     // matched ACK latencies
	FlowCNPCarried                          // CNPs this flow carried (dest QP = the throttled requester)
	numFlowCounters
)

var flowCounterNames = [numFlowCounters]string{
	FlowBytes:            "bytes",
	FlowPayloadBytes:     "payload_bytes",
	FlowReadLatencySum:   "read_latency_sum_ns",
	FlowAckLatencySum:    "ack_latency_sum_ns",
	FlowPackets:          "packets",
	FlowMessages:         "messages",
	FlowCNP:              "cnp",
	FlowECNCE:            "ecn_ce",
	FlowFECN:             "fecn",
	FlowBECN:             "becn",
	FlowRetransmits:      "retransmits",
	FlowPSNGaps:          "psn_gaps",
	FlowOutOfOrder:       "out_of_order",
	FlowAcks:             "acks",
	FlowNAKs:             "naks",
	FlowRNRNAKs:          "rnr_naks",
	FlowReadLatencyCount: "read_latency_count",
	FlowAckLatencyCount:  "ack_latency_count",
	FlowCNPCarried:       "cnp_carried",
}

// String returns the report key of c.
func (c FlowCounter) String() string {
	if c < numFlowCounters {
		return flowCounterNames[c]
	}
	return "flow_counter"
}

// maxFlowOps is how many distinct opcodes a flow record keeps apart; the
// rest are summed as "other". Flows use few opcodes each (a WRITE stream
// uses four), so this is exact in practice; the window's opcode histogram
// is always exact.
const maxFlowOps = 8

// OpMix is the packets of a flow per BTH opcode.
type OpMix struct {
	Op    [maxFlowOps]uint8  // opcodes, in order of first sight
	N     [maxFlowOps]uint64 // packets per opcode; N[i] == 0 ends the list
	Other uint64             // packets of opcodes beyond the first maxFlowOps
}

// Add counts n packets of opcode op.
func (m *OpMix) Add(op uint8, n uint64) {
	for i := range m.Op {
		if m.N[i] == 0 {
			m.Op[i], m.N[i] = op, n
			return
		}
		if m.Op[i] == op {
			m.N[i] += n
			return
		}
	}
	m.Other += n
}

// Merge adds the packets of o to m.
func (m *OpMix) Merge(o *OpMix) {
	for i := range o.Op {
		if o.N[i] == 0 {
			break
		}
		m.Add(o.Op[i], o.N[i])
	}
	m.Other += o.Other
}

// FlowRecord is the exact record of one flow in one window, kept by the QP
// table and merged across workers and hosts.
type FlowRecord struct {
	Key      FlowKey
	SQP      uint32 // source QP, when SQPKnown
	SQPKnown bool
	Sport    uint16 // UDP source port (RoCEv2), 0 otherwise
	C        [numFlowCounters]uint64
	Ops      OpMix
}

// Get returns the value of counter c.
func (r *FlowRecord) Get(c FlowCounter) uint64 { return r.C[c] }

// merge adds o, a record of the same flow, to r.
func (r *FlowRecord) merge(o *FlowRecord) {
	for i := range r.C {
		r.C[i] += o.C[i]
	}
	r.Ops.Merge(&o.Ops)
	if !r.SQPKnown && o.SQPKnown {
		r.SQP, r.SQPKnown = o.SQP, true
	}
	if r.Sport == 0 {
		r.Sport = o.Sport
	}
}

// compareKeys orders flow keys by their binary form (see appendBinary),
// comparing the fields in place: it runs for every comparison of every
// window's sort.
func compareKeys(a, b FlowKey) int {
	as, bs := a.Src.As16(), b.Src.As16()
	if c := bytes.Compare(as[:], bs[:]); c != 0 {
		return c
	}
	ad, bd := a.Dst.As16(), b.Dst.As16()
	if c := bytes.Compare(ad[:], bd[:]); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Src.Kind(), b.Src.Kind()), cmp.Compare(a.Dst.Kind(), b.Dst.Kind()), cmp.Compare(a.DQP, b.DQP))
}

// normalizeFlows sorts flows by key and merges records of the same flow, so
// that a window's flow list is canonical whatever order its parts arrived in.
func normalizeFlows(flows []FlowRecord) []FlowRecord {
	slices.SortFunc(flows, func(a, b FlowRecord) int { return compareKeys(a.Key, b.Key) })
	out := flows[:0]
	for i := range flows {
		if n := len(out); n > 0 && out[n-1].Key == flows[i].Key {
			out[n-1].merge(&flows[i])
			continue
		}
		out = append(out, flows[i])
	}
	for i := range out {
		out[i].Ops.sort()
	}
	return out
}

// sort orders the opcodes of m by value, the canonical order.
func (m *OpMix) sort() {
	n := 0
	for n < maxFlowOps && m.N[n] != 0 {
		n++
	}
	for i := 1; i < n; i++ {
		for j := i; j > 0 && m.Op[j] < m.Op[j-1]; j-- {
			m.Op[j], m.Op[j-1] = m.Op[j-1], m.Op[j]
			m.N[j], m.N[j-1] = m.N[j-1], m.N[j]
		}
	}
}
