package decode

// LinkType is the link-layer header type of a frame, numbered as pcap's
// LINKTYPE_ values (https://www.tcpdump.org/linktypes.html).
type LinkType uint16

// Link types the decoder understands.
const (
	LinkNull       LinkType = 0   // BSD loopback: 4-byte address family in host byte order, then IPv4 or IPv6
	LinkEthernet   LinkType = 1   // Ethernet II, with 802.1Q/QinQ tags
	LinkRaw        LinkType = 101 // raw IPv4 or IPv6, version from the first nibble
	LinkLinuxSLL   LinkType = 113 // Linux cooked capture v1
	LinkERF        LinkType = 197 // Endace ERF records (type 21: InfiniBand)
	LinkIPv4       LinkType = 228 // raw IPv4
	LinkIPv6       LinkType = 229 // raw IPv6
	LinkInfiniBand LinkType = 247 // raw InfiniBand, starting at the LRH
	LinkLinuxSLL2  LinkType = 276 // Linux cooked capture v2
)

// Kind classifies a decoded frame. The zero value, KindOther, is any frame
// that is neither RoCE/InfiniBand nor link-level flow control.
type Kind uint8

// Frame kinds.
const (
	KindOther  Kind = iota // not RoCE, not IB, not pause (also: no decode yet)
	KindRoCEv2             // BTH in UDP (destination port 4791 by default)
	KindRoCEv1             // GRH and BTH in Ethernet, ethertype 0x8915
	KindIB                 // native InfiniBand: LRH (and GRH), then BTH
	KindPFC                // 802.1Qbb priority flow control, MAC control opcode 0x0101
	KindPause              // 802.3x pause, MAC control opcode 0x0001
)

// Header is a bit set of the headers found in a frame. A field of [Packet]
// is defined only when the bit of its header is set.
type Header uint32

// Header bits, outermost first.
const (
	HasEthernet     Header = 1 << iota // Ethernet II (or the SLL/SLL2 equivalent)
	HasVLAN                            // one or more 802.1Q/802.1ad tags
	HasMirror                          // ERSPAN II/III or GRE mirror encapsulation
	HasIPv4                            // IPv4 (inner, when mirrored)
	HasIPv6                            // IPv6 (inner, when mirrored)
	HasUDP                             // UDP
	HasLRH                             // InfiniBand local route header
	HasGRH                             // InfiniBand global route header
	HasBTH                             // base transport header
	HasRDETH                           // reliable datagram extended transport header
	HasDETH                            // datagram extended transport header
	HasXRCETH                          // XRC extended transport header
	HasRETH                            // RDMA extended transport header
	HasAtomicETH                       // atomic extended transport header
	HasAETH                            // ACK extended transport header
	HasAtomicAckETH                    // atomic ACK extended transport header
	HasImmDt                           // immediate data
	HasIETH                            // invalidate extended transport header
	HasICRC                            // invariant CRC (the frame held all of it)
	HasCM                              // communication management MAD on QP1
	HasPFC                             // PFC frame
	HasPause                           // 802.3x pause frame
	HasFragment                        // an IP fragment (IPv4 MF or offset; IPv6 fragment header with M or offset): its payload is not decoded
)

// Mirror identifies the switch mirror encapsulation around a frame.
type Mirror uint8

// Mirror encapsulations. The zero value, MirrorNone, means the frame was not
// encapsulated.
const (
	MirrorNone    Mirror = iota
	MirrorERSPAN2        // GRE protocol 0x88BE, ERSPAN type II
	MirrorERSPAN3        // GRE protocol 0x22EB, ERSPAN type III
	MirrorGRE            // GRE protocol 0x6558, transparent Ethernet bridging
)

// Opcode is the BTH opcode: the transport service in the top three bits
// (RC 0x00, UC 0x20, RD 0x40, UD 0x60, CNP 0x80, XRC 0xA0) and the operation
// in the low five. Every value is meaningful on the wire, so the zero value is
// RC SEND First, not "invalid"; [Packet.Headers] says whether a BTH was seen.
type Opcode uint8

// Error is a per-frame decode failure. It is a one-byte code so that
// returning and counting it never allocates. The zero value means no error.
// ErrTruncated means the frame ended before the headers it announced;
// every other code means the bytes present are not valid (malformed).
type Error uint8

// ErrTruncated: the captured bytes end before a header the frame announces.
const ErrTruncated Error = 1

// Packet is one decoded frame. Decode into a reused Packet; it holds no
// pointers but Payload, which aliases the decoded frame and is valid only as
// long as the frame's bytes are. After a decode error the fields of headers
// decoded before the failure are set (their Headers bits tell which) and the
// rest are undefined.
type Packet struct {
	Headers Header // which of the fields below are defined
	Kind    Kind   // what the frame is
	Err     Error  // why decoding stopped early; 0 when it did not

	// Ethernet and link level.
	SrcMAC, DstMAC [6]byte
	EtherType      uint16    // innermost ethertype (after VLAN tags)
	VLANs          [2]uint16 // VLAN IDs, outermost first (HasVLAN)
	NumVLAN        uint8     // tags seen; more than two counts but keeps the first two
	PCP            uint8     // priority code point of the outermost tag

	// Mirror encapsulation (HasMirror): the outer addresses and the session.
	Mirror        Mirror
	MirrorSession uint16 // ERSPAN session ID (10 bits); 0 for plain GRE
	MirrorSrc     Addr   // outer IP source
	MirrorDst     Addr   // outer IP destination

	// Network (HasIPv4/HasIPv6; for RoCEv1 and IB, Src/Dst come from the GRH
	// GIDs or the LRH LIDs).
	Src, Dst  Addr
	DSCP, ECN uint8 // from the IPv4 TOS / IPv6 traffic class, or the GRH TClass
	TTL       uint8 // IPv4 TTL or IPv6 hop limit
	IPLen     uint16

	// UDP (HasUDP).
	SrcPort, DstPort uint16
	UDPLen           uint16

	// InfiniBand routing (HasLRH, HasGRH).
	LRH LRH
	GRH GRH

	// Transport.
	BTH          BTH
	RDETH        uint32 // EE context (24 bits)
	DETH         DETH
	XRCETH       uint32 // XRC SRQ (24 bits)
	RETH         RETH
	AtomicETH    AtomicETH
	AETH         AETH
	AtomicAckETH uint64 // original remote data
	ImmDt        uint32 // immediate data, as the 32-bit big-endian value
	IETH         uint32 // R_Key to invalidate
	ICRC         uint32 // invariant CRC as carried (HasICRC)

	// PayloadLen is the RDMA payload length: what follows the transport
	// headers, less pad and ICRC. It is computed from the UDP length (RoCEv2),
	// the GRH payload length (RoCEv1) or the LRH packet length (IB), so it is
	// right even when the capture was cut short. Payload holds the captured
	// part of it (aliasing the frame).
	PayloadLen uint32
	Payload    []byte

	// Communication management (HasCM) and link-level flow control
	// (HasPFC, HasPause).
	CM    CM
	Pause Pause
}

// LRH is the InfiniBand local route header.
type LRH struct {
	VL, LVer, SL, LNH uint8
	DLID, SLID        uint16
	PktLen            uint16 // in 4-byte words
}

// GRH is the InfiniBand global route header (IPv6-like).
type GRH struct {
	IPVer, TClass, NxtHdr, HopLmt uint8
	FlowLabel                     uint32
	PayLen                        uint16
	SGID, DGID                    [16]byte
}

// BTH is the base transport header.
type BTH struct {
	Opcode     Opcode
	SE, M      bool
	PadCnt     uint8
	TVer       uint8
	PKey       uint16
	FECN, BECN bool
	Resv6a     uint8 // the six reserved bits of byte 4 (Huawei NICs set one)
	DestQP     uint32
	AckReq     bool
	Resv7      uint8
	PSN        uint32
}

// DETH is the datagram extended transport header.
type DETH struct {
	QKey  uint32
	SrcQP uint32
}

// RETH is the RDMA extended transport header.
type RETH struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// AtomicETH is the atomic extended transport header.
type AtomicETH struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

// AETH is the ACK extended transport header. Syndrome is the raw byte; its
// methods decode it.
type AETH struct {
	Syndrome uint8
	MSN      uint32
}

// CM is a communication management MAD seen on QP1 (the fields rocescope
// needs to learn which QPs form a connection).
type CM struct {
	AttrID       uint16 // 0x0010 REQ, 0x0013 REP, 0x0014 RTU, 0x0015 DREQ, ...
	LocalCommID  uint32
	RemoteCommID uint32
	LocalQPN     uint32 // REQ: the requester's QPN; REP: the responder's
	StartingPSN  uint32 // REQ/REP
}

// Pause is an 802.3x pause or 802.1Qbb PFC frame.
type Pause struct {
	Opcode uint16    // 0x0001 pause, 0x0101 PFC
	Enable uint8     // PFC class-enable vector, bit n = priority n
	Quanta [8]uint16 // PFC: per priority; 802.3x: Quanta[0]
}
