package html

import (
	"math"
	"strconv"
)

// A series is one figure of a window that the page charts over time. Its
// name is the path of the figure in the JSON lines report ("cnp",
// "pfc.3.frames", "read_latency_ns.p99"), or a figure derived from the
// report ("gbps"), so that the page and the report can be compared key by
// key.

// sumSeries are figures that add up: a point holds the sum over its
// windows. The sections that follow (opcodes, NAK codes, PFC priorities)
// have one series per code.
const (
	sumPackets = iota
	sumBytes
	sumRoCE
	sumOther
	sumMalformed
	sumTruncated
	sumKernelDrops
	sumLate
	sumSourceErrors
	sumUntracked
	sumMessages
	sumCNP
	sumCNPUnattributed
	sumECNCE
	sumFECN
	sumBECN
	sumAcks
	sumNAKs
	sumRNRNAKs
	sumRetransmits
	sumPSNGaps
	sumOutOfOrder
	sumPauseFrames
	sumPauseQuanta
	sumReadRequests
	sumReadUnmatched
	sumReadCount
	sumAckCount
	numScalarSums

	sumOpcodeBase    = numScalarSums
	sumNAKCodeBase   = sumOpcodeBase + 256
	sumPFCFramesBase = sumNAKCodeBase + 32
	sumPFCQuantaBase = sumPFCFramesBase + 8
	numSums          = sumPFCQuantaBase + 8
)

// scalarSumNames are the report keys of the scalar sums.
var scalarSumNames = [numScalarSums]string{
	sumPackets:         "packets",
	sumBytes:           "bytes",
	sumRoCE:            "roce_packets",
	sumOther:           "other_packets",
	sumMalformed:       "malformed_packets",
	sumTruncated:       "truncated_packets",
	sumKernelDrops:     "kernel_drops",
	sumLate:            "late_packets",
	sumSourceErrors:    "source_errors",
	sumUntracked:       "untracked_packets",
	sumMessages:        "messages",
	sumCNP:             "cnp",
	sumCNPUnattributed: "cnp_unattributed",
	sumECNCE:           "ecn_ce",
	sumFECN:            "fecn",
	sumBECN:            "becn",
	sumAcks:            "acks",
	sumNAKs:            "naks",
	sumRNRNAKs:         "rnr_naks",
	sumRetransmits:     "retransmits",
	sumPSNGaps:         "psn_gaps",
	sumOutOfOrder:      "out_of_order",
	sumPauseFrames:     "pause_frames",
	sumPauseQuanta:     "pause_quanta",
	sumReadRequests:    "read_requests",
	sumReadUnmatched:   "read_latency_unmatched",
	sumReadCount:       "read_latency_ns.count",
	sumAckCount:        "ack_latency_ns.count",
}

// sumName returns the name of sum series i.
func sumName(i int) string {
	switch {
	case i < numScalarSums:
		return scalarSumNames[i]
	case i < sumNAKCodeBase:
		return "opcodes." + strconv.Itoa(i-sumOpcodeBase)
	case i < sumPFCFramesBase:
		return "nak_codes." + strconv.Itoa(i-sumNAKCodeBase)
	case i < sumPFCQuantaBase:
		return "pfc." + strconv.Itoa(i-sumPFCFramesBase) + ".frames"
	}
	return "pfc." + strconv.Itoa(i-sumPFCQuantaBase) + ".quanta"
}

// maxSeries are figures that are rates, levels or quantiles: a point holds
// the largest value of its windows, the upper envelope, so that a spike of
// one window survives downsampling.
const (
	maxGbps      = iota // bytes·8 / window length, Gb/s
	maxMpps             // packets / window length, millions per second
	maxFlows            // estimated distinct flows
	maxElephants        // elephants in the window
	maxJitter           // jitter flows in the window
	maxReadP50
	maxReadP90
	maxReadP99
	maxReadMax
	maxAckP50
	maxAckP90
	maxAckP99
	maxAckMax
	numMaxes
)

// maxNames are the names of the max series.
var maxNames = [numMaxes]string{
	maxGbps:      "gbps",
	maxMpps:      "mpps",
	maxFlows:     "flows",
	maxElephants: "elephants",
	maxJitter:    "jitter",
	maxReadP50:   "read_latency_ns.p50",
	maxReadP90:   "read_latency_ns.p90",
	maxReadP99:   "read_latency_ns.p99",
	maxReadMax:   "read_latency_ns.max",
	maxAckP50:    "ack_latency_ns.p50",
	maxAckP90:    "ack_latency_ns.p90",
	maxAckP99:    "ack_latency_ns.p99",
	maxAckMax:    "ack_latency_ns.max",
}

// minSeries are the rates whose dips matter: a point also holds their
// smallest window, so that a dip survives downsampling too.
const (
	minGbps = iota
	minMpps
	numMins
)

// minNames are the names of the min series.
var minNames = [numMins]string{
	minGbps: "gbps_min",
	minMpps: "mpps_min",
}

// absent marks a max figure a window does not have, such as the latency
// quantiles of a window without a matched latency. No real figure is NaN.
var absent = math.NaN()

// figures are the numbers of one window or of one point (a run of
// windows): fixed in size, whatever the traffic.
type figures struct {
	windows int // windows added; 0 for a point no window fell into
	sum     [numSums]uint64
	max     [numMaxes]float64
	min     [numMins]float64
}

// add adds the figures of o, a window or a point, to f.
func (f *figures) add(o *figures) {
	if o.windows == 0 {
		return
	}
	if f.windows == 0 {
		*f = *o
		return
	}
	f.windows += o.windows
	for i, v := range o.sum {
		f.sum[i] += v
	}
	for i, v := range o.max {
		if math.IsNaN(f.max[i]) || v > f.max[i] {
			f.max[i] = v
		}
	}
	for i, v := range o.min {
		f.min[i] = min(f.min[i], v)
	}
}
