package netnstest

import (
	"encoding/binary"
	"math/rand/v2"
)

// Addresses used by [Traffic]. TrafficSrcMAC and TrafficDstMAC are not the
// MAC addresses of a [Pair]'s interfaces, so the peer's IP stack ignores the
// frames (packet type "other host") and sends nothing back, while every
// packet socket and XDP program on the interface still sees them.
var (
	TrafficSrcMAC = [6]byte{0x02, 0x72, 0x73, 0x00, 0x00, 0x01}
	TrafficDstMAC = [6]byte{0x02, 0x72, 0x73, 0x00, 0x00, 0x02}
)

// RoCEPort is the UDP destination port of RoCEv2.
const RoCEPort = 4791

// TrafficQPs is the number of distinct destination QPs in [Traffic]'s RoCE
// frames: 0x000100 to 0x000100+TrafficQPs-1.
const TrafficQPs = 8

// Ethertypes and protocol numbers the generator writes.
const (
	etherIPv4  = 0x0800
	etherIPv6  = 0x86dd
	etherARP   = 0x0806
	etherVLAN  = 0x8100
	etherQinQ  = 0x88a8
	protoUDP   = 17
	minFrame   = 60 // Ethernet minimum without FCS; short frames are padded
	bthLen     = 12
	rethLen    = 16
	icrcLen    = 4
	opWriteOnl = 0x0a // RC RDMA WRITE Only
)

// roceShape and otherShape are the frame layouts Traffic draws from.
type roceShape uint8

const (
	roceIPv4        roceShape = iota // Ethernet/IPv4/UDP/BTH/RETH
	roceIPv4Options                  // IPv4 with a 4-byte options field (IHL 6)
	roceIPv6                         // Ethernet/IPv6/UDP/BTH/RETH
	roceVLANIPv4                     // one 802.1Q tag
	roceQinQIPv4                     // 802.1ad outer tag and 802.1Q inner tag
	roceVLANIPv6                     // one 802.1Q tag, IPv6
	roceShapes
)

type otherShape uint8

const (
	otherUDPv4     otherShape = iota // IPv4 UDP to a port other than 4791
	otherUDPv6                       // IPv6 UDP to a port other than 4791
	otherVLANUDPv4                   // one 802.1Q tag, IPv4 UDP, not 4791
	otherARP                         // ARP request, broadcast
	otherShapes
)

// Traffic returns nRoCE RoCEv2 frames interleaved with nOther non-RoCE
// frames, in an order and with contents fixed by seed. Every frame is
// distinct and at least 60 bytes long, lengths and IPv4 header checksums are
// correct, and UDP checksums are zero (IPv6 frames included: RoCEv2 relies on
// its ICRC, whose four bytes here are filler, not a computed CRC).
//
// RoCE frames are RC RDMA WRITE Only (opcode 0x0A) with a RETH, to UDP port
// 4791, spread over [TrafficQPs] destination QPs with a PSN that counts up
// per QP. Their layouts rotate through IPv4, IPv4 with options, IPv6, one
// 802.1Q tag (IPv4 and IPv6) and QinQ (802.1ad then 802.1Q). The other frames
// are UDP to ports other than 4791 (IPv4, IPv6, VLAN-tagged IPv4) and ARP
// requests. Unicast frames go from [TrafficSrcMAC] to [TrafficDstMAC].
func Traffic(nRoCE, nOther int, seed int64) [][]byte {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x726f6365))
	isRoCE := make([]bool, nRoCE+nOther)
	for i := range nRoCE {
		isRoCE[i] = true
	}
	rng.Shuffle(len(isRoCE), func(i, j int) { isRoCE[i], isRoCE[j] = isRoCE[j], isRoCE[i] })

	var psn [TrafficQPs]uint32
	frames := make([][]byte, len(isRoCE))
	for i, roce := range isRoCE {
		if roce {
			qp := rng.IntN(TrafficQPs)
			frames[i] = roceFrame(roceShape(rng.IntN(int(roceShapes))), qp, psn[qp], 4*rng.IntN(65), uint64(i))
			psn[qp] = (psn[qp] + 1) & 0xffffff
		} else {
			frames[i] = otherFrame(otherShape(rng.IntN(int(otherShapes))), 1024+rng.IntN(3000), uint64(i))
		}
	}
	return frames
}

// ethernet appends an Ethernet header with the given tags (TPID, TCI pairs)
// and final ethertype.
func ethernet(b []byte, dst [6]byte, tags [][2]uint16, etherType uint16) []byte {
	b = append(b, dst[:]...)
	b = append(b, TrafficSrcMAC[:]...)
	for _, t := range tags {
		b = binary.BigEndian.AppendUint16(b, t[0])
		b = binary.BigEndian.AppendUint16(b, t[1])
	}
	return binary.BigEndian.AppendUint16(b, etherType)
}

// ipv4 appends an IPv4 header carrying payloadLen bytes of protocol proto,
// with optLen bytes of options (a multiple of 4: NOPs then end-of-list), and
// its header checksum.
func ipv4(b []byte, src, dst [4]byte, proto uint8, optLen, payloadLen int, id uint16) []byte {
	start := len(b)
	hl := 20 + optLen
	b = append(b, byte(0x40|hl/4), 0x6a) // version 4, IHL; DSCP 26 (AF31), ECN ECT(0)
	b = binary.BigEndian.AppendUint16(b, uint16(hl+payloadLen))
	b = binary.BigEndian.AppendUint16(b, id)
	b = append(b, 0x40, 0, 64, proto, 0, 0) // DF, TTL 64, checksum later
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	for k := range optLen {
		if k == optLen-1 {
			b = append(b, 0) // end of option list
		} else {
			b = append(b, 1) // no operation
		}
	}
	binary.BigEndian.PutUint16(b[start+10:], ipv4Checksum(b[start:]))
	return b
}

// ipv4Checksum returns the ones' complement of the ones' complement sum of
// the 16-bit words of hdr, with the checksum field holding zero (RFC 791).
func ipv4Checksum(hdr []byte) uint16 {
	var sum uint32
	for k := 0; k+1 < len(hdr); k += 2 {
		sum += uint32(binary.BigEndian.Uint16(hdr[k:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// ipv6 appends an IPv6 header carrying payloadLen bytes of next header proto.
func ipv6(b []byte, src, dst [16]byte, proto uint8, payloadLen int, flow uint32) []byte {
	b = binary.BigEndian.AppendUint32(b, 6<<28|0x6a<<20|flow&0xfffff) // traffic class as IPv4's TOS
	b = binary.BigEndian.AppendUint16(b, uint16(payloadLen))
	b = append(b, proto, 64)
	b = append(b, src[:]...)
	return append(b, dst[:]...)
}

// udp appends a UDP header with a zero checksum for payloadLen bytes.
func udp(b []byte, sport, dport uint16, payloadLen int) []byte {
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = binary.BigEndian.AppendUint16(b, uint16(8+payloadLen))
	return append(b, 0, 0)
}

// v4 and v6 return the test addresses of host h in subnet net.
func v4(subnet, h byte) [4]byte { return [4]byte{10, 200, subnet, h} }

func v6(subnet, h byte) [16]byte {
	return [16]byte{0: 0xfd, 1: 0x00, 2: 0x02, 3: 0x00, 7: subnet, 15: h}
}

// pad extends b with zeros to the Ethernet minimum.
func pad(b []byte) []byte {
	for len(b) < minFrame {
		b = append(b, 0)
	}
	return b
}

// roceFrame builds RoCE frame number seq: an RC RDMA WRITE Only to QP
// 0x100+qp with the given PSN and payload length (a multiple of 4).
func roceFrame(shape roceShape, qp int, psn uint32, payload int, seq uint64) []byte {
	var tags [][2]uint16
	switch shape {
	case roceVLANIPv4, roceVLANIPv6:
		tags = [][2]uint16{{etherVLAN, 3<<13 | uint16(100+qp)}}
	case roceQinQIPv4:
		tags = [][2]uint16{{etherQinQ, uint16(200 + qp)}, {etherVLAN, 3<<13 | uint16(300+qp)}}
	}
	transport := bthLen + rethLen + payload + icrcLen
	b := make([]byte, 0, 18+40+8+transport+minFrame)
	sport := uint16(49152 + qp)
	subnet := byte(qp)
	switch shape {
	case roceIPv6, roceVLANIPv6:
		b = ethernet(b, TrafficDstMAC, tags, etherIPv6)
		b = ipv6(b, v6(subnet, 1), v6(subnet, 2), protoUDP, 8+transport, uint32(qp))
	default:
		opt := 0
		if shape == roceIPv4Options {
			opt = 4
		}
		b = ethernet(b, TrafficDstMAC, tags, etherIPv4)
		b = ipv4(b, v4(subnet, 1), v4(subnet, 2), protoUDP, opt, 8+transport, uint16(seq))
	}
	b = udp(b, sport, RoCEPort, transport)
	// BTH: opcode; SE=0 M=0 PadCnt=0 TVer=0; P_Key 0xffff; reserved, dest QP;
	// AckReq=1, reserved, PSN.
	b = append(b, opWriteOnl, 0, 0xff, 0xff)
	b = binary.BigEndian.AppendUint32(b, uint32(0x100+qp))
	b = binary.BigEndian.AppendUint32(b, 1<<31|psn&0xffffff)
	// RETH: virtual address (unique per frame), R_Key, DMA length.
	b = binary.BigEndian.AppendUint64(b, 0x7f0000000000+seq<<12)
	b = binary.BigEndian.AppendUint32(b, 0x1000+uint32(qp))
	b = binary.BigEndian.AppendUint32(b, uint32(payload))
	for k := range payload {
		b = append(b, byte(seq)+byte(k))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(seq)^0xc0ffee00) // ICRC filler
	return pad(b)
}

// otherFrame builds non-RoCE frame number seq; port is the UDP destination
// port (never 4791) for the UDP shapes.
func otherFrame(shape otherShape, port int, seq uint64) []byte {
	b := make([]byte, 0, 18+40+8+16+minFrame)
	const payload = 16 // the sequence number twice
	switch shape {
	case otherARP:
		b = ethernet(b, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, nil, etherARP)
		b = append(b, 0, 1, 8, 0, 6, 4, 0, 1) // Ethernet, IPv4, request
		b = append(b, TrafficSrcMAC[:]...)
		src := v4(250, byte(seq))
		b = append(b, src[:]...)
		b = append(b, 0, 0, 0, 0, 0, 0)
		b = append(b, 192, 0, 2, byte(seq>>8))    // TEST-NET-1: nobody answers
		b = binary.BigEndian.AppendUint64(b, seq) // trailer makes it distinct
		return pad(b)
	case otherUDPv6:
		b = ethernet(b, TrafficDstMAC, nil, etherIPv6)
		b = ipv6(b, v6(240, 1), v6(240, 2), protoUDP, 8+payload, 0)
	case otherVLANUDPv4:
		b = ethernet(b, TrafficDstMAC, [][2]uint16{{etherVLAN, 42}}, etherIPv4)
		b = ipv4(b, v4(240, 1), v4(240, 2), protoUDP, 0, 8+payload, uint16(seq))
	default:
		b = ethernet(b, TrafficDstMAC, nil, etherIPv4)
		b = ipv4(b, v4(240, 1), v4(240, 2), protoUDP, 0, 8+payload, uint16(seq))
	}
	b = udp(b, 33000, uint16(port), payload)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint64(b, ^seq)
	return pad(b)
}
