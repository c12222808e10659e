package ipfix

import (
	"cmp"
	"slices"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
)

// Element is an Information Element as a template names it: an IANA
// element, or an element of rocescope's numbering under the enterprise
// number of [Options.PEN].
type Element struct {
	Name       string // the IANA name, or ours in the same lowerCamelCase style
	ID         uint16 // element ID, without the enterprise bit
	Length     uint16 // encoded length in bytes
	Enterprise bool   // numbered under Options.PEN, not by IANA
	Type       string // abstract data type (RFC 7012 section 3.1)
	About      string // what the element holds, for the element list
}

// source says where a field's value comes from.
type source uint8

const (
	srcNone            source = iota // invalid
	srcSrcAddr                       // the flow's source address (4 or 16 bytes, or a LID)
	srcDstAddr                       // the flow's destination address
	srcSport                         // UDP source port
	srcDport                         // UDP destination port (Options.RoCEPort)
	srcProtocol                      // 17 (UDP)
	srcCounter                       // a per-flow counter, field.counter
	srcStart                         // start of the part of the window the input covered
	srcEnd                           // its end
	srcEndReason                     // active timeout: the window closed
	srcDQP                           // BTH destination QP
	srcSQP                           // source QP (templates of flows whose source QP is known)
	srcOpcode                        // the opcode with the most packets
	srcOperations                    // operationFlags of the flow's opcodes
	srcCNP                           // CNPs that throttle the flow (attributed by the report)
	srcReadLatencyMean               // mean READ latency, ns
	srcAckLatencyMean                // mean ACK latency, ns
)

// field is one field of a template: the element and where its value
// comes from. A template and the records written with it are made from
// the same fields, so they cannot disagree.
type field struct {
	el      Element
	src     source
	counter metrics.FlowCounter // for srcCounter
}

// IANA elements (https://www.iana.org/assignments/ipfix).
var (
	ianaOctetDeltaCount          = Element{"octetDeltaCount", 1, 8, false, "unsigned64", "on-wire bytes of the flow's frames in the window (the report's bytes)"}
	ianaPacketDeltaCount         = Element{"packetDeltaCount", 2, 8, false, "unsigned64", "frames of the flow in the window (the report's packets)"}
	ianaProtocolIdentifier       = Element{"protocolIdentifier", 4, 1, false, "unsigned8", "17 (UDP): RoCEv2"}
	ianaSourceTransportPort      = Element{"sourceTransportPort", 7, 2, false, "unsigned16", "UDP source port of the flow's first frame (RoCEv2 NICs derive it from the QP), 0 if unknown"}
	ianaSourceIPv4Address        = Element{"sourceIPv4Address", 8, 4, false, "ipv4Address", "source address"}
	ianaDestinationTransportPort = Element{"destinationTransportPort", 11, 2, false, "unsigned16", "UDP destination port: the RoCEv2 port (4791, or --roce-port)"}
	ianaDestinationIPv4Address   = Element{"destinationIPv4Address", 12, 4, false, "ipv4Address", "destination address"}
	ianaSourceIPv6Address        = Element{"sourceIPv6Address", 27, 16, false, "ipv6Address", "source address"}
	ianaDestinationIPv6Address   = Element{"destinationIPv6Address", 28, 16, false, "ipv6Address", "destination address"}
	ianaFlowEndReason            = Element{"flowEndReason", 136, 1, false, "unsigned8", "2 (active timeout): the window closed"}
	ianaFlowStartNanoseconds     = Element{"flowStartNanoseconds", 156, 8, false, "dateTimeNanoseconds", "start of the part of the window the input covered (flows' own first frame times are not kept)"}
	ianaFlowEndNanoseconds       = Element{"flowEndNanoseconds", 157, 8, false, "dateTimeNanoseconds", "end of that part: the report's rates are bytes over this span"}
)

// Enterprise-specific elements, numbered by rocescope under Options.PEN.
// Names follow the IPFIX lowerCamelCase style with a rocev2 prefix for
// what the BTH and its extension headers carry, so that each maps by its
// BTH field to the element draft-lin-opsawg-ipfix-rocev2 proposes once
// IANA assigns one. The numbers are stable: new elements get new numbers.
var (
	entDestinationQueuePair       = Element{"rocev2DestinationQueuePair", 1, 4, true, "unsigned32", "BTH destination QP (24 bits): with the addresses, the flow's key"}
	entSourceQueuePair            = Element{"rocev2SourceQueuePair", 2, 4, true, "unsigned32", "source QP, in the templates of flows whose source QP is known (DETH, CM, or the reverse direction)"}
	entOpcode                     = Element{"rocev2Opcode", 3, 1, true, "unsigned8", "BTH opcode with the most packets in the window"}
	entOperationFlags             = Element{"rocev2OperationFlags", 4, 2, true, "unsigned16", "bit set of the operations and transport services the flow's opcodes belong to (see below)"}
	entPayloadOctetDeltaCount     = Element{"rocev2PayloadOctetDeltaCount", 5, 8, true, "unsigned64", "RDMA payload bytes"}
	entMessageDeltaCount          = Element{"rocev2MessageDeltaCount", 6, 8, true, "unsigned64", "messages: LAST and ONLY packets of SEND, WRITE and READ response"}
	entCnpDeltaCount              = Element{"rocev2CnpDeltaCount", 7, 8, true, "unsigned64", "CNPs that throttle this flow (they travel the other way)"}
	entEcnCePacketDeltaCount      = Element{"rocev2EcnCePacketDeltaCount", 8, 8, true, "unsigned64", "frames with IP ECN = CE"}
	entFecnPacketDeltaCount       = Element{"rocev2FecnPacketDeltaCount", 9, 8, true, "unsigned64", "frames with the BTH FECN bit"}
	entBecnPacketDeltaCount       = Element{"rocev2BecnPacketDeltaCount", 10, 8, true, "unsigned64", "frames with the BTH BECN bit"}
	entAckDeltaCount              = Element{"rocev2AckDeltaCount", 11, 8, true, "unsigned64", "positive AETH acknowledgements the flow carried"}
	entNakDeltaCount              = Element{"rocev2NakDeltaCount", 12, 8, true, "unsigned64", "AETH NAKs the flow carried (every code)"}
	entRnrNakDeltaCount           = Element{"rocev2RnrNakDeltaCount", 13, 8, true, "unsigned64", "AETH receiver-not-ready NAKs the flow carried"}
	entRetransmissionDeltaCount   = Element{"rocev2RetransmissionDeltaCount", 14, 8, true, "unsigned64", "request packets with a PSN behind the expected one"}
	entPsnGapDeltaCount           = Element{"rocev2PsnGapDeltaCount", 15, 8, true, "unsigned64", "request packets with a PSN ahead of the expected one"}
	entOutOfOrderDeltaCount       = Element{"rocev2OutOfOrderDeltaCount", 16, 8, true, "unsigned64", "request packets with a PSN a gap skipped, before any NAK"}
	entReadLatencyMeanNanoseconds = Element{"rocev2ReadLatencyMeanNanoseconds", 17, 8, true, "unsigned64", "mean READ request to first response latency at the mirror point, ns (0 without a match)"}
	entReadLatencyDeltaCount      = Element{"rocev2ReadLatencyDeltaCount", 18, 8, true, "unsigned64", "READ latencies matched (the weight of the mean)"}
	entAckLatencyMeanNanoseconds  = Element{"rocev2AckLatencyMeanNanoseconds", 19, 8, true, "unsigned64", "mean request (AckReq) to ACK latency, ns (0 without a match)"}
	entAckLatencyDeltaCount       = Element{"rocev2AckLatencyDeltaCount", 20, 8, true, "unsigned64", "ACK latencies matched"}
	entSourceGid                  = Element{"ibSourceGid", 21, 16, true, "ipv6Address", "source GID of a RoCEv1 or InfiniBand flow (GRH)"}
	entDestinationGid             = Element{"ibDestinationGid", 22, 16, true, "ipv6Address", "destination GID (GRH)"}
	entSourceLid                  = Element{"ibSourceLid", 23, 2, true, "unsigned16", "source LID of an InfiniBand flow without GRH (LRH)"}
	entDestinationLid             = Element{"ibDestinationLid", 24, 2, true, "unsigned16", "destination LID (LRH)"}
)

// Bits of rocev2OperationFlags: the operations of the flow's opcodes (an
// opcode's low five bits) and their transport services (its top three).
const (
	OpSend         = 1 << iota // SEND (every variant)
	OpWrite                    // RDMA WRITE
	OpReadRequest              // RDMA READ request
	OpReadResponse             // RDMA READ response
	OpAcknowledge              // Acknowledge and ATOMIC Acknowledge
	OpAtomic                   // CmpSwap, FetchAdd, ATOMIC WRITE
	OpCNP                      // congestion notification
	OpOther                    // any other opcode (RESYNC, FLUSH, reserved), or more distinct opcodes than a flow record keeps apart
	OpRC                       // reliable connection service
	OpUC                       // unreliable connection
	OpRD                       // reliable datagram (ConnectX DC)
	OpUD                       // unreliable datagram
	OpXRC                      // extended reliable connection
)

// operations returns the rocev2OperationFlags of a flow's opcode mix and
// the opcode with the most packets (the first seen of equal ones).
func operations(m *metrics.OpMix) (flags uint16, top uint8) {
	var most uint64
	for i, op := range m.Op {
		if m.N[i] == 0 {
			break
		}
		if m.N[i] > most {
			most, top = m.N[i], op
		}
		flags |= opFlags(decode.Opcode(op))
	}
	if m.Other > 0 {
		flags |= OpOther
	}
	return flags, top
}

// opFlags returns the rocev2OperationFlags bits of one opcode.
func opFlags(op decode.Opcode) uint16 {
	var f uint16
	switch op.Service() {
	case decode.ServiceRC:
		f = OpRC
	case decode.ServiceUC:
		f = OpUC
	case decode.ServiceRD:
		f = OpRD
	case decode.ServiceUD:
		f = OpUD
	case decode.ServiceXRC:
		f = OpXRC
	}
	switch low := op & 0x1f; {
	case !op.Valid():
		return f | OpOther
	case op.IsCNP():
		return f | OpCNP
	case op.IsReadRequest():
		return f | OpReadRequest
	case op.IsReadResponse():
		return f | OpReadResponse
	case op.IsAcknowledge():
		return f | OpAcknowledge
	case op.IsAtomic():
		return f | OpAtomic
	case low <= 0x05 || low == 0x16 || low == 0x17:
		return f | OpSend
	case low <= 0x0b:
		return f | OpWrite
	}
	return f | OpOther
}

// templateKind is the address family of a template.
type templateKind uint8

const (
	kindIPv4 templateKind = iota // RoCEv2 over IPv4
	kindIPv6                     // RoCEv2 over IPv6
	kindGID                      // RoCEv1 and InfiniBand with a GRH
	kindLID                      // InfiniBand without a GRH
	numKinds
)

// numTemplates is the number of templates: each kind, with and without the
// source QP.
const numTemplates = 2 * int(numKinds)

// firstTemplateID is the ID of the first template; 0-255 are reserved for
// set IDs (RFC 7011 section 3.3.2).
const firstTemplateID = 256

// templateOf returns the template index of a flow: its kind and whether
// its source QP is known; ok is false when its addresses are not of one
// kind rocescope exports.
func templateOf(f *metrics.FlowRecord) (t int, ok bool) {
	var k templateKind
	switch f.Key.Src.Kind() {
	case decode.AddrIPv4:
		k = kindIPv4
	case decode.AddrIPv6:
		k = kindIPv6
	case decode.AddrGID:
		k = kindGID
	case decode.AddrLID:
		k = kindLID
	default:
		return 0, false
	}
	if f.Key.Dst.Kind() != f.Key.Src.Kind() {
		return 0, false
	}
	t = 2 * int(k)
	if !f.SQPKnown {
		t++
	}
	return t, true
}

// templateFields returns the fields of template t (see templateOf).
func templateFields(t int) []field {
	var fs []field
	switch templateKind(t / 2) {
	case kindIPv4:
		fs = []field{{el: ianaSourceIPv4Address, src: srcSrcAddr}, {el: ianaDestinationIPv4Address, src: srcDstAddr}}
	case kindIPv6:
		fs = []field{{el: ianaSourceIPv6Address, src: srcSrcAddr}, {el: ianaDestinationIPv6Address, src: srcDstAddr}}
	case kindGID:
		fs = []field{{el: entSourceGid, src: srcSrcAddr}, {el: entDestinationGid, src: srcDstAddr}}
	case kindLID:
		fs = []field{{el: entSourceLid, src: srcSrcAddr}, {el: entDestinationLid, src: srcDstAddr}}
	}
	if k := templateKind(t / 2); k == kindIPv4 || k == kindIPv6 {
		fs = append(fs,
			field{el: ianaSourceTransportPort, src: srcSport},
			field{el: ianaDestinationTransportPort, src: srcDport},
			field{el: ianaProtocolIdentifier, src: srcProtocol})
	}
	fs = append(fs,
		field{el: ianaOctetDeltaCount, src: srcCounter, counter: metrics.FlowBytes},
		field{el: ianaPacketDeltaCount, src: srcCounter, counter: metrics.FlowPackets},
		field{el: ianaFlowStartNanoseconds, src: srcStart},
		field{el: ianaFlowEndNanoseconds, src: srcEnd},
		field{el: ianaFlowEndReason, src: srcEndReason},
		field{el: entDestinationQueuePair, src: srcDQP})
	if t%2 == 0 {
		fs = append(fs, field{el: entSourceQueuePair, src: srcSQP})
	}
	return append(fs,
		field{el: entOpcode, src: srcOpcode},
		field{el: entOperationFlags, src: srcOperations},
		field{el: entPayloadOctetDeltaCount, src: srcCounter, counter: metrics.FlowPayloadBytes},
		field{el: entMessageDeltaCount, src: srcCounter, counter: metrics.FlowMessages},
		field{el: entCnpDeltaCount, src: srcCNP},
		field{el: entEcnCePacketDeltaCount, src: srcCounter, counter: metrics.FlowECNCE},
		field{el: entFecnPacketDeltaCount, src: srcCounter, counter: metrics.FlowFECN},
		field{el: entBecnPacketDeltaCount, src: srcCounter, counter: metrics.FlowBECN},
		field{el: entAckDeltaCount, src: srcCounter, counter: metrics.FlowAcks},
		field{el: entNakDeltaCount, src: srcCounter, counter: metrics.FlowNAKs},
		field{el: entRnrNakDeltaCount, src: srcCounter, counter: metrics.FlowRNRNAKs},
		field{el: entRetransmissionDeltaCount, src: srcCounter, counter: metrics.FlowRetransmits},
		field{el: entPsnGapDeltaCount, src: srcCounter, counter: metrics.FlowPSNGaps},
		field{el: entOutOfOrderDeltaCount, src: srcCounter, counter: metrics.FlowOutOfOrder},
		field{el: entReadLatencyMeanNanoseconds, src: srcReadLatencyMean},
		field{el: entReadLatencyDeltaCount, src: srcCounter, counter: metrics.FlowReadLatencyCount},
		field{el: entAckLatencyMeanNanoseconds, src: srcAckLatencyMean},
		field{el: entAckLatencyDeltaCount, src: srcCounter, counter: metrics.FlowAckLatencyCount})
}

// Elements returns every element rocescope exports, IANA's first, each
// once, in the order of their numbers: the element list of the docs.
func Elements() []Element {
	seen := map[Element]bool{}
	var iana, ent []Element
	for t := range numTemplates {
		for _, f := range templateFields(t) {
			if seen[f.el] {
				continue
			}
			seen[f.el] = true
			if f.el.Enterprise {
				ent = append(ent, f.el)
			} else {
				iana = append(iana, f.el)
			}
		}
	}
	byID := func(a, b Element) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(iana, byID)
	slices.SortFunc(ent, byID)
	return append(iana, ent...)
}
