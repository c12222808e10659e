// Package frame writes the headers of the frames rocescope makes: Ethernet
// with 802.1Q and 802.1ad tags, IPv4 (with options and its checksum), IPv6,
// UDP, the InfiniBand BTH and its extension headers, the RoCEv2 ICRC,
// 802.1Qbb PFC and ARP. The traffic generator (capture/synth), the live
// tests' traffic (internal/netnstest) and the hand-made test frames
// (internal/testframes) all build their frames with it.
//
// Every Put function writes one header at the start of b, which must have
// room for it, and returns the number of bytes written, so that a frame is
// built as off += PutX(b[off:], ...). Nothing allocates.
package frame

import (
	"encoding/binary"
	"hash/crc32"
)

// Ethertypes.
const (
	EtherIPv4 = 0x0800
	EtherIPv6 = 0x86DD
	EtherARP  = 0x0806
	EtherVLAN = 0x8100 // 802.1Q tag
	EtherQinQ = 0x88A8 // 802.1ad service tag
	EtherMACC = 0x8808 // MAC control: pause and PFC
)

// Lengths of fixed-size headers.
const (
	EthernetLen = 14
	TagLen      = 4
	IPv4Len     = 20 // without options
	IPv6Len     = 40
	UDPLen      = 8
	BTHLen      = 12
	RETHLen     = 16
	AETHLen     = 4
	ImmLen      = 4
	ICRCLen     = 4
	PFCLen      = 34 // Ethernet header and PFC body
	ARPLen      = 28 // Ethernet/IPv4 ARP body
	MinLen      = 60 // Ethernet minimum without FCS
)

// Tag is an 802.1Q or 802.1ad tag: its TPID and its TCI (PCP << 13 | VID).
type Tag struct{ TPID, TCI uint16 }

// PutEthernet writes an Ethernet header from src to dst with tags, outer
// first, and etherType after them.
func PutEthernet(b []byte, dst, src *[6]byte, etherType uint16, tags ...Tag) int {
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	off := 12
	for _, t := range tags {
		binary.BigEndian.PutUint16(b[off:], t.TPID)
		binary.BigEndian.PutUint16(b[off+2:], t.TCI)
		off += TagLen
	}
	binary.BigEndian.PutUint16(b[off:], etherType)
	return off + 2
}

// IPv4 is an IPv4 header with Don't Fragment set and no fragment offset.
type IPv4 struct {
	TOS      uint8 // DSCP << 2 | ECN
	ID       uint16
	TTL      uint8
	Proto    uint8
	Src, Dst *[4]byte // pointers: headers are written per frame, copies cost
	// OptLen is the length of the options field, a multiple of 4: no-
	// operation options and an end-of-list.
	OptLen int
}

// PutIPv4 writes h for a payload of plen bytes, with its header checksum.
func PutIPv4(b []byte, h *IPv4, plen int) int {
	hl := IPv4Len + h.OptLen
	ip := b[:hl]
	be := binary.BigEndian
	// The header as five 32-bit words, its checksum summed from them
	// (RFC 1071 allows any word size), not read back from b: loading words
	// just stored byte by byte stalls, and the generator writes a header
	// per frame.
	w0 := uint32(0x40|hl/4)<<24 | uint32(h.TOS)<<16 | uint32(uint16(hl+plen))
	w1 := uint32(h.ID)<<16 | 0x4000 // don't fragment
	w2 := uint32(h.TTL)<<24 | uint32(h.Proto)<<16
	src, dst := be.Uint32(h.Src[:]), be.Uint32(h.Dst[:])
	sum := uint64(w0) + uint64(w1) + uint64(w2) + uint64(src) + uint64(dst)
	if h.OptLen > 0 {
		putOptions(ip[IPv4Len:])
		for o := IPv4Len; o+4 <= hl; o += 4 {
			sum += uint64(be.Uint32(ip[o:]))
		}
	}
	sum = sum&0xffffffff + sum>>32
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	be.PutUint32(ip[0:], w0)
	be.PutUint32(ip[4:], w1)
	be.PutUint32(ip[8:], w2|uint32(^uint16(sum)))
	be.PutUint32(ip[12:], src)
	be.PutUint32(ip[16:], dst)
	return hl
}

// putOptions fills an IPv4 options field with no-operation options and an
// end of option list.
func putOptions(opts []byte) {
	for i := range opts {
		opts[i] = 1 // no operation
	}
	opts[len(opts)-1] = 0
}

// IPv6 is an IPv6 header without extension headers.
type IPv6 struct {
	TC       uint8  // traffic class: DSCP << 2 | ECN
	Flow     uint32 // flow label, 20 bits
	Next     uint8  // next header: the payload's protocol
	HopLimit uint8
	Src, Dst *[16]byte // pointers: headers are written per frame, copies cost
}

// PutIPv6 writes h for a payload of plen bytes.
func PutIPv6(b []byte, h *IPv6, plen int) int {
	ip := b[:IPv6Len]
	binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(h.TC)<<20|h.Flow&0xfffff)
	binary.BigEndian.PutUint16(ip[4:], uint16(plen))
	ip[6], ip[7] = h.Next, h.HopLimit
	copy(ip[8:24], h.Src[:])
	copy(ip[24:40], h.Dst[:])
	return IPv6Len
}

// PutUDP writes a UDP header for a payload of plen bytes with a zero
// checksum (RoCEv2 sends none; other senders fill it in afterwards).
func PutUDP(b []byte, sport, dport uint16, plen int) int {
	u := b[:UDPLen]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(UDPLen+plen))
	u[6], u[7] = 0, 0
	return UDPLen
}

// Checksum returns the Internet checksum (RFC 1071) of b added to the
// partial sum sum.
func Checksum(b []byte, sum uint32) uint16 {
	sum = Sum16(b, sum)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// Sum16 adds the big-endian 16-bit words of b (a last odd byte padded with
// zero) to sum. It does not fold: the sum of a 64 KiB segment and a
// pseudo-header fits in 32 bits.
func Sum16(b []byte, sum uint32) uint32 {
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

// BTH is an InfiniBand base transport header with the default P_Key.
type BTH struct {
	Op     uint8
	SE     bool  // solicited event
	Mig    bool  // migration state
	Pad    uint8 // pad count, 0-3
	FECN   bool
	BECN   bool
	DQP    uint32 // destination QP, 24 bits
	AckReq bool
	PSN    uint32 // 24 bits
}

// PutBTH writes h.
func PutBTH(b []byte, h *BTH) int {
	w0 := uint32(h.Op)<<24 | uint32(h.Pad&3)<<20 | 0xffff // default P_Key
	if h.SE {
		w0 |= 1 << 23
	}
	if h.Mig {
		w0 |= 1 << 22
	}
	w1 := h.DQP & 0xffffff
	if h.FECN {
		w1 |= 1 << 31
	}
	if h.BECN {
		w1 |= 1 << 30
	}
	w2 := h.PSN & 0xffffff
	if h.AckReq {
		w2 |= 1 << 31
	}
	t := b[:BTHLen]
	binary.BigEndian.PutUint32(t[0:], w0)
	binary.BigEndian.PutUint32(t[4:], w1)
	binary.BigEndian.PutUint32(t[8:], w2)
	return BTHLen
}

// PutRETH writes an RDMA extended transport header.
func PutRETH(b []byte, va uint64, rkey, dmaLen uint32) int {
	binary.BigEndian.PutUint64(b[0:], va)
	binary.BigEndian.PutUint32(b[8:], rkey)
	binary.BigEndian.PutUint32(b[12:], dmaLen)
	return RETHLen
}

// PutAETH writes an ACK extended transport header.
func PutAETH(b []byte, syndrome uint8, msn uint32) int {
	binary.BigEndian.PutUint32(b, uint32(syndrome)<<24|msn&0xffffff)
	return AETHLen
}

// PutImm writes immediate data.
func PutImm(b []byte, imm uint32) int {
	binary.BigEndian.PutUint32(b, imm)
	return ImmLen
}

// ff8CRC is the CRC-32 of the eight bytes of ones that stand for the LRH
// in a RoCEv2 ICRC.
var ff8CRC = crc32.ChecksumIEEE([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// ICRC returns the invariant CRC of the RoCEv2 packet whose IP header
// starts at b[ipOff], UDP header at b[udpOff], and whose pad ends at
// b[end]: CRC-32 (as Ethernet's) over eight bytes of ones, the IP, UDP and
// BTH headers with their variant fields set to ones (IPv4 TOS, TTL and
// checksum; IPv6 traffic class, flow label and hop limit; UDP checksum; the
// BTH byte holding FECN and BECN), and the rest of the packet. It sets the
// variant fields to ones in b for one pass of the CRC over the whole
// packet, and puts them back. The ICRC goes on the wire little-endian.
func ICRC(b []byte, ipOff, udpOff, end int, v6 bool) uint32 {
	at := [8]int{ipOff + 1, ipOff + 8, ipOff + 10, ipOff + 11, udpOff + 6, udpOff + 7, udpOff + 12, udpOff + 12}
	if v6 {
		at = [8]int{ipOff, ipOff + 1, ipOff + 2, ipOff + 3, ipOff + 7, udpOff + 6, udpOff + 7, udpOff + 12}
	}
	var saved [8]byte
	for i, j := range at {
		saved[i] = b[j]
	}
	for _, j := range at {
		b[j] = 0xff
	}
	if v6 {
		b[ipOff] = saved[0] | 0x0f // the version nibble is covered
	}
	crc := crc32.Update(ff8CRC, crc32.IEEETable, b[ipOff:end])
	for i := len(at) - 1; i >= 0; i-- {
		b[at[i]] = saved[i]
	}
	return crc
}

// PFCDst is the MAC control multicast address pause frames go to.
var PFCDst = [6]byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x01}

// PutPFC writes an 802.1Qbb priority flow control frame from src, Ethernet
// header included, with class-enable vector enable and the pause quanta
// of each priority. It writes PFCLen bytes, no padding.
func PutPFC(b []byte, src *[6]byte, enable uint8, quanta *[8]uint16) int {
	off := PutEthernet(b, &PFCDst, src, EtherMACC)
	binary.BigEndian.PutUint16(b[off:], 0x0101) // PFC opcode
	b[off+2], b[off+3] = 0, enable
	for i, q := range quanta {
		binary.BigEndian.PutUint16(b[off+4+2*i:], q)
	}
	return PFCLen
}

// Broadcast is the Ethernet broadcast address.
var Broadcast = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// PutARPRequest writes the body of an Ethernet/IPv4 ARP request from
// senderMAC at senderIP asking for targetIP.
func PutARPRequest(b []byte, senderMAC *[6]byte, senderIP, targetIP [4]byte) int {
	a := b[:ARPLen]
	binary.BigEndian.PutUint64(a[0:], 0x0001_0800_0604_0001) // Ethernet, IPv4, request
	copy(a[8:14], senderMAC[:])
	copy(a[14:18], senderIP[:])
	clear(a[18:24])
	copy(a[24:28], targetIP[:])
	return ARPLen
}

// Pad clears b[n:MinLen] when a frame of n bytes is shorter than the
// Ethernet minimum, and returns the padded length.
func Pad(b []byte, n int) int {
	if n >= MinLen {
		return n
	}
	clear(b[n:MinLen])
	return MinLen
}
