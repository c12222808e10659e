package decode

import "strconv"

// Service is the InfiniBand transport service of an opcode. The zero value,
// ServiceNone, is the service of reserved and vendor-specific opcodes.
type Service uint8

// Transport services, in the order of the opcode's top three bits.
const (
	ServiceNone Service = iota // reserved or vendor-specific opcode
	ServiceRC                  // reliable connection, opcodes 0x00-0x1F
	ServiceUC                  // unreliable connection, 0x20-0x3F
	ServiceRD                  // reliable datagram opcodes, 0x40-0x5F (carried by ConnectX DC; see Packet.Decode)
	ServiceUD                  // unreliable datagram, 0x60-0x7F
	ServiceCNP                 // RoCEv2 congestion notification packet, 0x81
	ServiceXRC                 // extended reliable connection, 0xA0-0xBF
)

var serviceNames = [...]string{"none", "RC", "UC", "RD", "UD", "CNP", "XRC"}

// String returns the service abbreviation ("RC", "UD", ...) or "none".
func (s Service) String() string {
	if int(s) < len(serviceNames) {
		return serviceNames[s]
	}
	return "Service(" + strconv.Itoa(int(s)) + ")"
}

// opFlag classifies an opcode for the Opcode predicates.
type opFlag uint8

const (
	opEnds     opFlag = 1 << iota // last or only packet of a SEND, WRITE or READ response message
	opRequest                     // requester to responder, consumes a PSN
	opReadReq                     // RDMA READ request
	opReadResp                    // RDMA READ response
	opAck                         // Acknowledge or ATOMIC Acknowledge
	opAtomic                      // CmpSwap, FetchAdd, ATOMIC WRITE
	opCNP                         // congestion notification
)

// opInfo is everything the package knows about one opcode. The decoder
// reads the extension headers from eth and hlen; the Opcode methods read
// the rest.
type opInfo struct {
	name  string
	eth   Header // extension headers after the BTH, a subset of ethHeaders
	skip  uint8  // bytes right after the BTH that no Packet field holds
	hlen  uint8  // bytes from the first BTH byte to the first payload byte
	svc   Service
	flags opFlag
	// Offsets from the first BTH byte of the RETH, DETH and AETH, 0 for
	// none (Brief.transport).
	reth, deth, aeth uint8
}

// ethHeaders are the extension header bits, in wire order (RDETH and
// XRCETH never occur together, nor DETH and XRCETH). Bytes no field holds
// (opInfo.skip) come first, right after the BTH.
const ethHeaders = HasRDETH | HasDETH | HasXRCETH | HasRETH | HasAtomicETH |
	HasAETH | HasAtomicAckETH | HasImmDt | HasIETH

// Header lengths in bytes.
const (
	lenBTH          = 12
	lenRDETH        = 4
	lenDETH         = 8
	lenXRCETH       = 4
	lenRETH         = 16
	lenAtomicETH    = 28
	lenAETH         = 4
	lenAtomicAckETH = 8
	lenImmDt        = 4
	lenIETH         = 4
	lenFETH         = 4  // RDMA FLUSH extended transport header (skipped)
	lenCNPReserved  = 16 // the reserved bytes after a CNP's BTH
	lenDCT          = 8  // the BTH extension of ConnectX DC packets (skipped)
	lenICRC         = 4
)

// operation is one operation code (an opcode's low five bits) as the IBTA
// opcode table lists it, with the headers it carries in every service.
type operation struct {
	name  string
	eth   Header
	skip  uint8
	flags opFlag
}

var operations = [32]operation{
	0x00: {name: "SEND First", flags: opRequest},
	0x01: {name: "SEND Middle", flags: opRequest},
	0x02: {name: "SEND Last", flags: opRequest | opEnds},
	0x03: {name: "SEND Last with Immediate", eth: HasImmDt, flags: opRequest | opEnds},
	0x04: {name: "SEND Only", flags: opRequest | opEnds},
	0x05: {name: "SEND Only with Immediate", eth: HasImmDt, flags: opRequest | opEnds},
	0x06: {name: "RDMA WRITE First", eth: HasRETH, flags: opRequest},
	0x07: {name: "RDMA WRITE Middle", flags: opRequest},
	0x08: {name: "RDMA WRITE Last", flags: opRequest | opEnds},
	0x09: {name: "RDMA WRITE Last with Immediate", eth: HasImmDt, flags: opRequest | opEnds},
	0x0A: {name: "RDMA WRITE Only", eth: HasRETH, flags: opRequest | opEnds},
	0x0B: {name: "RDMA WRITE Only with Immediate", eth: HasRETH | HasImmDt, flags: opRequest | opEnds},
	0x0C: {name: "RDMA READ Request", eth: HasRETH, flags: opRequest | opReadReq},
	0x0D: {name: "RDMA READ response First", eth: HasAETH, flags: opReadResp},
	0x0E: {name: "RDMA READ response Middle", flags: opReadResp},
	0x0F: {name: "RDMA READ response Last", eth: HasAETH, flags: opReadResp | opEnds},
	0x10: {name: "RDMA READ response Only", eth: HasAETH, flags: opReadResp | opEnds},
	0x11: {name: "Acknowledge", eth: HasAETH, flags: opAck},
	0x12: {name: "ATOMIC Acknowledge", eth: HasAETH | HasAtomicAckETH, flags: opAck},
	0x13: {name: "CmpSwap", eth: HasAtomicETH, flags: opRequest | opAtomic},
	0x14: {name: "FetchAdd", eth: HasAtomicETH, flags: opRequest | opAtomic},
	0x15: {name: "RESYNC", flags: opRequest},
	0x16: {name: "SEND Last with Invalidate", eth: HasIETH, flags: opRequest | opEnds},
	0x17: {name: "SEND Only with Invalidate", eth: HasIETH, flags: opRequest | opEnds},
	0x1C: {name: "RDMA FLUSH", eth: HasRETH, skip: lenFETH, flags: opRequest},
	0x1D: {name: "ATOMIC WRITE", eth: HasRETH, flags: opRequest | opAtomic},
}

// transport is one transport service: which operations it has and the
// extension headers it adds to them.
type transport struct {
	svc    Service
	ops    uint32 // bit n set: operation n exists in this service
	all    Header // headers every packet of the service carries
	onReq  Header // headers its requests (opRequest) carry
	skip   uint8  // bytes every packet carries right after the BTH
	prefix string
}

// opsRange returns a bit set with bits lo..hi.
func opsRange(lo, hi uint) uint32 { return (1<<(hi+1) - 1) &^ (1<<lo - 1) }

// transports lists the services by the opcode's top three bits. No adapter
// ever implemented RD; the packets with RD opcodes seen on real fabrics are
// NVIDIA ConnectX Dynamically Connected (DC) transport packets, which put 8
// more bytes after the BTH and then follow the RD header layout. The
// decoder skips those 8 bytes, as Wireshark's infiniband dissector does.
var transports = [8]transport{
	0: {svc: ServiceRC, prefix: "RC", ops: opsRange(0x00, 0x14) | 1<<0x16 | 1<<0x17 | 1<<0x1C | 1<<0x1D},
	1: {svc: ServiceUC, prefix: "UC", ops: opsRange(0x00, 0x0B)},
	2: {svc: ServiceRD, prefix: "RD", ops: opsRange(0x00, 0x15), all: HasRDETH, onReq: HasDETH, skip: lenDCT},
	3: {svc: ServiceUD, prefix: "UD", ops: 1<<0x04 | 1<<0x05, all: HasDETH},
	5: {svc: ServiceXRC, prefix: "XRC", ops: opsRange(0x00, 0x14) | 1<<0x16 | 1<<0x17, onReq: HasXRCETH},
}

// opcodeCNP is the RoCEv2 congestion notification packet opcode.
const opcodeCNP Opcode = 0x81

// opcodes is the opcode table: the single source of what each opcode means.
var opcodes = makeOpcodes()

func makeOpcodes() (t [256]opInfo) {
	for top, tr := range transports {
		for low, op := range operations {
			if tr.ops&(1<<low) == 0 {
				continue
			}
			eth := op.eth | tr.all
			if op.flags&opRequest != 0 {
				eth |= tr.onReq
			}
			t[top<<5|low] = opInfo{
				name:  tr.prefix + " " + op.name,
				eth:   eth,
				skip:  tr.skip + op.skip,
				hlen:  uint8(lenBTH + int(tr.skip+op.skip) + ethLen(eth)),
				svc:   tr.svc,
				flags: op.flags,
				reth:  ethOffset(eth, tr.skip+op.skip, HasRETH),
				deth:  ethOffset(eth, tr.skip+op.skip, HasDETH),
				aeth:  ethOffset(eth, tr.skip+op.skip, HasAETH),
			}
		}
	}
	t[opcodeCNP] = opInfo{name: "CNP", skip: lenCNPReserved, hlen: lenBTH + lenCNPReserved, svc: ServiceCNP, flags: opCNP}
	return t
}

// ethLens are the extension headers' lengths, in wire order.
var ethLens = [...]struct {
	h Header
	n int
}{
	{HasRDETH, lenRDETH}, {HasDETH, lenDETH}, {HasXRCETH, lenXRCETH},
	{HasRETH, lenRETH}, {HasAtomicETH, lenAtomicETH}, {HasAETH, lenAETH},
	{HasAtomicAckETH, lenAtomicAckETH}, {HasImmDt, lenImmDt}, {HasIETH, lenIETH},
}

// ethLen returns the total length of the extension headers in h.
func ethLen(h Header) int {
	n := 0
	for _, x := range ethLens {
		if h&x.h != 0 {
			n += x.n
		}
	}
	return n
}

// ethOffset returns the offset from the first BTH byte of extension header
// x of an opcode with headers eth and skip bytes before them, 0 when eth
// does not have x.
func ethOffset(eth Header, skip uint8, x Header) uint8 {
	if eth&x == 0 {
		return 0
	}
	return uint8(lenBTH + int(skip) + ethLen(eth&(x-1)))
}

// String returns the opcode's name in the IBTA's words with the service in
// front, as Wireshark shows it ("RC RDMA WRITE First", "UD SEND Only",
// "CNP"), or "Opcode(0xNN)" for a reserved or vendor-specific opcode.
func (o Opcode) String() string { return string(o.appendName(nil)) }

// appendName appends the text of [Opcode.String] to b.
func (o Opcode) appendName(b []byte) []byte {
	if n := opcodes[o].name; n != "" {
		return append(b, n...)
	}
	const hex = "0123456789abcdef"
	return append(b, 'O', 'p', 'c', 'o', 'd', 'e', '(', '0', 'x', hex[o>>4], hex[o&0xf], ')')
}

// Service returns the transport service of o, or ServiceNone when o is
// reserved or vendor-specific.
func (o Opcode) Service() Service { return opcodes[o].svc }

// Valid reports whether the IBTA specification (with its RoCEv2 annex for
// CNP) defines o, so that the headers following its BTH are known.
func (o Opcode) Valid() bool { return opcodes[o].svc != ServiceNone }

// EndsMessage reports whether o is the last or only packet of a SEND, RDMA
// WRITE or RDMA READ response message (with immediate or invalidate too).
func (o Opcode) EndsMessage() bool { return opcodes[o].flags&opEnds != 0 }

// IsReadRequest reports whether o is an RDMA READ request.
func (o Opcode) IsReadRequest() bool { return opcodes[o].flags&opReadReq != 0 }

// IsReadResponse reports whether o is an RDMA READ response (first,
// middle, last or only).
func (o Opcode) IsReadResponse() bool { return opcodes[o].flags&opReadResp != 0 }

// IsAcknowledge reports whether o is an Acknowledge or ATOMIC Acknowledge
// (which carry the AETH of ACKs, RNR NAKs and NAKs).
func (o Opcode) IsAcknowledge() bool { return opcodes[o].flags&opAck != 0 }

// IsAtomic reports whether o is an atomic request: CmpSwap, FetchAdd or
// ATOMIC WRITE.
func (o Opcode) IsAtomic() bool { return opcodes[o].flags&opAtomic != 0 }

// IsRequest reports whether o travels from requester to responder and
// consumes a PSN: SEND, RDMA WRITE, RDMA READ request, atomics, RDMA FLUSH
// and RD RESYNC.
func (o Opcode) IsRequest() bool { return opcodes[o].flags&opRequest != 0 }

// IsCNP reports whether o is the RoCEv2 congestion notification opcode 0x81.
func (o Opcode) IsCNP() bool { return opcodes[o].flags&opCNP != 0 }
