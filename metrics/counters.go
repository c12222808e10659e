package metrics

// Counter names one exact, additive per-window figure. Counters are kept in
// a flat array so that merging, encoding and reporting are loops over one
// table of names instead of a field list written out five times.
type Counter uint16

// Scalar counters. Their names are the report's keys.
const (
	Packets              Counter = iota // frames seen
	Bytes                               // on-wire (original) length of all frames
	RoCEPackets                         // RoCEv2, RoCEv1 and native IB frames with a BTH
	OtherPackets                        // frames that are not RoCE (PFC and pause included)
	MalformedPackets                    // frames whose headers are invalid
	TruncatedPackets                    // frames cut before the headers they announce
	PayloadBytes                        // RDMA payload of RoCE frames
	LatePackets                         // frames older than the oldest open window, counted in it
	TimeJumps                           // frames an hour or more ahead of the others, held in the newest window, and clock steps back
	Messages                            // LAST and ONLY opcodes of SEND, WRITE and READ response
	CNP                                 // congestion notification packets
	ECNCE                               // RoCE frames with IP ECN = CE
	FECN                                // BTH FECN set
	BECN                                // BTH BECN set
	Acks                                // AETH ACKs (positive)
	NAKs                                // AETH NAKs (all codes; see the NAK code section)
	RNRNAKs                             // AETH RNR NAKs
	Retransmits                         // request packets with a PSN behind the expected one
	PSNGaps                             // request packets with a PSN ahead of the expected one
	OutOfOrder                          // request packets with a PSN a gap skipped, arriving before any NAK
	ReadRequests                        // RDMA READ requests
	Atomics                             // atomic requests
	CMPackets                           // communication management MADs
	PauseFrames                         // 802.3x pause frames
	PauseQuanta                         // pause quanta of 802.3x frames
	KernelDrops                         // frames the capture path lost (live capture)
	SourceErrors                        // records or frames the source skipped as damaged (replay --keep-going, bad ring entries)
	Evictions                           // idle flows evicted from the QP table
	UntrackedPackets                    // RoCE frames of flows the full QP table could not hold
	ReadLatencyUnmatched                // READ requests whose response was not seen
	Fragments                           // IPv4/IPv6 fragments (counted other; not reassembled)
	Filtered                            // frames the filters (Config.Filter) removed from the analysis
	PFCUntracked                        // PFC frame priorities not followed per source MAC (too many sources)
	numScalarCounter
)

// NumScalar is the number of scalar counters: they are Counter(0) up to
// Counter(NumScalar-1).
const NumScalar = int(numScalarCounter)

// numScalar is NumScalar, named as the section bases below use it.
const numScalar = NumScalar

// Counter sections: arrays of counters indexed by a code.
const (
	opcodeBase    = numScalar         // 256 counters: packets per BTH opcode
	pfcFrameBase  = opcodeBase + 256  // 8: PFC frames enabling each priority
	pfcQuantaBase = pfcFrameBase + 8  // 8: PFC pause quanta per priority
	nakCodeBase   = pfcQuantaBase + 8 // 32: NAKs per NAK code
	errorBase     = nakCodeBase + 32  // 256: frames per decode error code
	numCounters   = errorBase + 256   // size of Counters
)

// counterNames are the report keys of the scalar counters.
var counterNames = [numScalar]string{
	Packets:              "packets",
	Bytes:                "bytes",
	RoCEPackets:          "roce_packets",
	OtherPackets:         "other_packets",
	MalformedPackets:     "malformed_packets",
	TruncatedPackets:     "truncated_packets",
	PayloadBytes:         "payload_bytes",
	LatePackets:          "late_packets",
	TimeJumps:            "time_jumps",
	Messages:             "messages",
	CNP:                  "cnp",
	ECNCE:                "ecn_ce",
	FECN:                 "fecn",
	BECN:                 "becn",
	Acks:                 "acks",
	NAKs:                 "naks",
	RNRNAKs:              "rnr_naks",
	Retransmits:          "retransmits",
	PSNGaps:              "psn_gaps",
	OutOfOrder:           "out_of_order",
	ReadRequests:         "read_requests",
	Atomics:              "atomics",
	CMPackets:            "cm_packets",
	PauseFrames:          "pause_frames",
	PauseQuanta:          "pause_quanta",
	KernelDrops:          "kernel_drops",
	SourceErrors:         "source_errors",
	Evictions:            "evictions",
	UntrackedPackets:     "untracked_packets",
	ReadLatencyUnmatched: "read_latency_unmatched",
	Fragments:            "fragments",
	Filtered:             "filtered",
	PFCUntracked:         "pfc_untracked",
}

// String returns the report key of a scalar counter.
func (c Counter) String() string {
	if c < numScalarCounter {
		return counterNames[c]
	}
	return "counter"
}

// Counters are the exact, additive figures of a window. The zero value is
// an empty set of counters.
type Counters [numCounters]uint64

// Get returns the value of c.
func (cs *Counters) Get(c Counter) uint64 { return cs[c] }

// Opcode returns the packets counted for BTH opcode op.
func (cs *Counters) Opcode(op uint8) uint64 { return cs[opcodeBase+int(op)] }

// PFC returns the PFC frames that enabled priority p and their pause quanta.
func (cs *Counters) PFC(p int) (frames, quanta uint64) {
	return cs[pfcFrameBase+p], cs[pfcQuantaBase+p]
}

// NAKCode returns the NAKs counted with NAK code c (0..31).
func (cs *Counters) NAKCode(c uint8) uint64 { return cs[nakCodeBase+int(c&31)] }

// DecodeErrors returns the frames counted with decode error code e.
func (cs *Counters) DecodeErrors(e uint8) uint64 { return cs[errorBase+int(e)] }

// Opcodes returns the packets per BTH opcode, indexed by opcode (256).
func (cs *Counters) Opcodes() []uint64 { return cs[opcodeBase : opcodeBase+256] }

// NAKCodes returns the NAKs per NAK code, indexed by code (32).
func (cs *Counters) NAKCodes() []uint64 { return cs[nakCodeBase : nakCodeBase+32] }

// DecodeErrorCodes returns the frames per decode error code, indexed by
// code (256).
func (cs *Counters) DecodeErrorCodes() []uint64 { return cs[errorBase : errorBase+256] }

// Add adds o to cs.
func (cs *Counters) Add(o *Counters) {
	for i := range cs {
		cs[i] += o[i]
	}
}
