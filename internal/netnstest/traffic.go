package netnstest

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/rocescope/rocescope/internal/frame"
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

// Header fields of the generated frames.
const (
	protoUDP    = 17
	tos         = 26<<2 | 2 // DSCP 26 (AF31), ECN ECT(0)
	ttl         = 64
	opWriteOnly = 0x0a // RC RDMA WRITE Only
	// maxHeaders is the longest header stack: Ethernet with two tags,
	// IPv6 and UDP.
	maxHeaders = frame.EthernetLen + 2*frame.TagLen + frame.IPv6Len + frame.UDPLen
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

// putIP writes the Ethernet header with tags and an IPv4 header (with optLen
// bytes of options and ID id) or, if v6, an IPv6 header (with flow label
// flow) from host 1 to host 2 of subnet, carrying plen bytes of UDP, and
// returns their length.
func putIP(b []byte, tags []frame.Tag, v6 bool, subnet byte, optLen int, id uint16, flow uint32, plen int) int {
	if v6 {
		off := frame.PutEthernet(b, &TrafficDstMAC, &TrafficSrcMAC, frame.EtherIPv6, tags...)
		src, dst := v6Addr(subnet, 1), v6Addr(subnet, 2)
		ip := frame.IPv6{TC: tos, Flow: flow, Next: protoUDP, HopLimit: ttl, Src: &src, Dst: &dst}
		return off + frame.PutIPv6(b[off:], &ip, plen)
	}
	off := frame.PutEthernet(b, &TrafficDstMAC, &TrafficSrcMAC, frame.EtherIPv4, tags...)
	src, dst := v4Addr(subnet, 1), v4Addr(subnet, 2)
	ip := frame.IPv4{TOS: tos, ID: id, TTL: ttl, Proto: protoUDP, Src: &src, Dst: &dst, OptLen: optLen}
	return off + frame.PutIPv4(b[off:], &ip, plen)
}

// v4Addr and v6Addr return the test addresses of host h in subnet.
func v4Addr(subnet, h byte) [4]byte { return [4]byte{10, 200, subnet, h} }

func v6Addr(subnet, h byte) [16]byte {
	return [16]byte{0: 0xfd, 1: 0x00, 2: 0x02, 3: 0x00, 7: subnet, 15: h}
}

// roceFrame builds RoCE frame number seq: an RC RDMA WRITE Only to QP
// 0x100+qp with the given PSN and payload length (a multiple of 4).
func roceFrame(shape roceShape, qp int, psn uint32, payload int, seq uint64) []byte {
	var tags []frame.Tag
	switch shape {
	case roceVLANIPv4, roceVLANIPv6:
		tags = []frame.Tag{{TPID: frame.EtherVLAN, TCI: 3<<13 | uint16(100+qp)}}
	case roceQinQIPv4:
		tags = []frame.Tag{{TPID: frame.EtherQinQ, TCI: uint16(200 + qp)}, {TPID: frame.EtherVLAN, TCI: 3<<13 | uint16(300+qp)}}
	}
	opt := 0
	if shape == roceIPv4Options {
		opt = 4
	}
	transport := frame.BTHLen + frame.RETHLen + payload + frame.ICRCLen
	b := make([]byte, maxHeaders+transport)
	off := putIP(b, tags, shape == roceIPv6 || shape == roceVLANIPv6, byte(qp), opt, uint16(seq), uint32(qp), frame.UDPLen+transport)
	off += frame.PutUDP(b[off:], uint16(49152+qp), RoCEPort, transport)
	off += frame.PutBTH(b[off:], &frame.BTH{Op: opWriteOnly, DQP: uint32(0x100 + qp), AckReq: true, PSN: psn})
	// The virtual address is unique per frame.
	off += frame.PutRETH(b[off:], 0x7f0000000000+seq<<12, 0x1000+uint32(qp), uint32(payload))
	for k := range payload {
		b[off+k] = byte(seq) + byte(k)
	}
	off += payload
	binary.BigEndian.PutUint32(b[off:], uint32(seq)^0xc0ffee00) // ICRC filler
	return b[:frame.Pad(b, off+frame.ICRCLen)]
}

// otherFrame builds non-RoCE frame number seq; port is the UDP destination
// port (never 4791) for the UDP shapes.
func otherFrame(shape otherShape, port int, seq uint64) []byte {
	const payload = 16 // the sequence number twice
	b := make([]byte, maxHeaders+payload)
	var off int
	switch shape {
	case otherARP:
		off = frame.PutEthernet(b, &frame.Broadcast, &TrafficSrcMAC, frame.EtherARP)
		// TEST-NET-1: nobody answers.
		off += frame.PutARPRequest(b[off:], &TrafficSrcMAC, v4Addr(250, byte(seq)), [4]byte{192, 0, 2, byte(seq >> 8)})
		binary.BigEndian.PutUint64(b[off:], seq) // trailer makes it distinct
		return b[:frame.Pad(b, off+8)]
	case otherUDPv6:
		off = putIP(b, nil, true, 240, 0, 0, 0, frame.UDPLen+payload)
	case otherVLANUDPv4:
		off = putIP(b, []frame.Tag{{TPID: frame.EtherVLAN, TCI: 42}}, false, 240, 0, uint16(seq), 0, frame.UDPLen+payload)
	default:
		off = putIP(b, nil, false, 240, 0, uint16(seq), 0, frame.UDPLen+payload)
	}
	off += frame.PutUDP(b[off:], 33000, uint16(port), payload)
	binary.BigEndian.PutUint64(b[off:], seq)
	binary.BigEndian.PutUint64(b[off+8:], ^seq)
	return b[:frame.Pad(b, off+payload)]
}
