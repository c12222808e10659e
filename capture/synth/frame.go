package synth

import (
	"encoding/binary"
	"strings"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/frame"
)

// Frame layout constants.
const (
	psnMask = 1<<24 - 1
	psnHalf = 1 << 23

	maxPayload = 4096
	// maxFrame is the longest frame: Ethernet with a tag, IPv6, UDP, BTH,
	// RETH, ImmDt, a 4096-byte payload and the ICRC.
	maxFrame = MinSnapLen + maxPayload + 4

	roceDSCPCNP = 48 // DSCP of CNPs, as ConnectX NICs send them by default
	pcpRoCE     = 3  // 802.1Q priority of RoCE traffic
	pcpCNP      = 6  // 802.1Q priority of CNPs
	ecnECT0     = 2
	ecnCE       = 3
	ttl         = 64
)

// packet is one RoCE packet: what the frame writer writes and the tally
// counts.
type packet struct {
	c        *conn
	toB      bool   // requester to responder (A→B)
	flow     int32  // flow number: 2*connection, +1 for B→A
	seq      int    // requests: the message's sequence number on the connection
	idx      uint32 // requests: the packet's index in its message
	op       decode.Opcode
	psn      uint32
	npsn     uint32 // PSNs a request consumes: 1, or a READ's response count
	dqp      uint32
	se       bool
	mig      bool
	ackReq   bool
	becn     bool
	ce       bool
	va       uint64
	rkey     uint32
	dmaLen   uint32
	imm      uint32
	syndrome uint8
	msn      uint32
	payload  int
	payOff   int // where the payload starts in the source's byte pattern
}

// Extension headers by opcode.
func hasRETH(op decode.Opcode) bool {
	return op == 0x06 || op == 0x0A || op == 0x0B || op == 0x0C
}
func hasImm(op decode.Opcode) bool {
	return op == 0x03 || op == 0x05 || op == 0x09 || op == 0x0B
}
func hasAETH(op decode.Opcode) bool {
	return op == 0x0D || op == 0x0F || op == 0x10 || op == 0x11
}

// transportLen returns the length of the BTH and extension headers of op.
func transportLen(op decode.Opcode) int {
	n := 12
	if hasRETH(op) {
		n += 16
	}
	if hasImm(op) {
		n += 4
	}
	if hasAETH(op) {
		n += 4
	}
	if op.IsCNP() {
		n += 16
	}
	return n
}

// l2 is the link and network header of a frame between two hosts.
type l2 struct {
	src, dst *host
	vlan     uint16 // 0: untagged
	pcp      uint8
	v6       bool
	tos      uint8 // DSCP << 2 | ECN
	flow     uint32
}

// writeL2 writes the Ethernet header (with its tag) and the IP header of a
// packet whose IP payload is plen bytes long with protocol proto, and
// returns the offset of the IP header and of the IP payload.
func writeL2(b []byte, h *l2, proto uint8, plen int) (ipOff, off int) {
	etherType := uint16(frame.EtherIPv4)
	if h.v6 {
		etherType = frame.EtherIPv6
	}
	if h.vlan != 0 {
		ipOff = frame.PutEthernet(b, &h.dst.mac, &h.src.mac, etherType, frame.Tag{TPID: frame.EtherVLAN, TCI: uint16(h.pcp)<<13 | h.vlan})
	} else {
		ipOff = frame.PutEthernet(b, &h.dst.mac, &h.src.mac, etherType)
	}
	if h.v6 {
		ip := frame.IPv6{TC: h.tos, Flow: h.flow, Next: proto, HopLimit: ttl, Src: &h.src.ip6, Dst: &h.dst.ip6}
		return ipOff, ipOff + frame.PutIPv6(b[ipOff:], &ip, plen)
	}
	ip := frame.IPv4{TOS: h.tos, TTL: ttl, Proto: proto, Src: &h.src.ip4, Dst: &h.dst.ip4}
	return ipOff, ipOff + frame.PutIPv4(b[ipOff:], &ip, plen)
}

// pseudoSum returns the partial checksum of the IPv4 or IPv6 pseudo-header
// of a transport segment of length n.
func pseudoSum(h *l2, proto uint8, n int) uint32 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
	}
	if h.v6 {
		add(h.src.ip6[:])
		add(h.dst.ip6[:])
	} else {
		add(h.src.ip4[:])
		add(h.dst.ip4[:])
	}
	return sum + uint32(proto) + uint32(n)
}

// finish pads a frame of wire bytes to the Ethernet minimum and returns
// the on-wire and captured lengths for a slot of len(b) bytes.
func finish(b []byte, wire int) (int, int) {
	wire = frame.Pad(b, wire)
	return wire, min(wire, len(b))
}

// writeRoCE writes p into b, whose length is the capture room, and
// returns the frame's on-wire and captured lengths. Headers always fit
// (len(b) >= MinSnapLen); payload, pad and ICRC are written as far as b
// holds them.
func (s *Source) writeRoCE(b []byte, p *packet) (wire, captured int) {
	c := p.c
	h := l2{src: &s.hosts[c.ha], dst: &s.hosts[c.hb], vlan: c.vlan, pcp: pcpRoCE, v6: c.v6,
		tos: uint8(s.cfg.DSCP)<<2 | ecnECT0, flow: c.flowLabel}
	if !p.toB {
		h.src, h.dst = h.dst, h.src
	}
	switch {
	case p.op.IsCNP():
		h.tos, h.pcp = roceDSCPCNP<<2, pcpCNP
	case p.ce:
		h.tos |= ecnCE
	}
	tl := transportLen(p.op)
	pad := -p.payload & 3
	udpLen := 8 + tl + p.payload + pad + 4
	ipOff, udpOff := writeL2(b, &h, 17, udpLen)
	wire = udpOff + udpLen
	bth := udpOff + frame.PutUDP(b[udpOff:], c.sport, decode.DefaultRoCEPort, udpLen-frame.UDPLen)
	frame.PutBTH(b[bth:], &frame.BTH{Op: uint8(p.op), SE: p.se, Mig: p.mig, Pad: uint8(pad), BECN: p.becn,
		DQP: p.dqp, AckReq: p.ackReq, PSN: p.psn})
	e := b[bth+frame.BTHLen : bth+tl]
	switch {
	case hasRETH(p.op):
		e = e[frame.PutRETH(e, p.va, p.rkey, p.dmaLen):]
	case hasAETH(p.op):
		e = e[frame.PutAETH(e, p.syndrome, p.msn):]
	case p.op.IsCNP():
		clear(e[:16])
		e = e[16:]
	}
	if hasImm(p.op) {
		frame.PutImm(e, p.imm)
	}
	pay := bth + tl
	end := pay + p.payload + pad
	copy(b[pay:min(len(b), pay+p.payload)], s.pattern[p.payOff:p.payOff+p.payload])
	clear(b[min(len(b), pay+p.payload):min(len(b), end)])
	if end < len(b) { // the ICRC is (partly) captured: the bytes it covers are all there
		var crc [4]byte
		binary.LittleEndian.PutUint32(crc[:], frame.ICRC(b, ipOff, udpOff, end, c.v6))
		copy(b[end:], crc[:])
	}
	return finish(b, wire)
}

// pfcFrame is an 802.1Qbb priority flow control frame.
type pfcFrame struct {
	src    [6]byte
	enable uint8
	quanta [8]uint16
}

// writePFC writes f into b.
func writePFC(b []byte, f *pfcFrame) (wire, captured int) {
	return finish(b, frame.PutPFC(b, &f.src, f.enable, &f.quanta))
}

// Background frame kinds.
const (
	bgARP = iota
	bgUDP
	bgTCP
	bgKinds
)

// background is one non-RoCE frame between two hosts.
type background struct {
	kind    int
	l2      l2
	sport   uint16
	dport   uint16
	seq     uint32
	payload int
	payOff  int
}

// backgroundText is the payload of background datagrams and segments:
// text, which Wireshark's heuristic dissectors do not mistake for RTP,
// RTCP and the like as they do random bytes.
var backgroundText = []byte(strings.Repeat("rocescope synthetic background traffic; not RDMA. ", 64))

// writeBackground writes g into b.
func (s *Source) writeBackground(b []byte, g *background) (wire, captured int) {
	if g.kind == bgARP {
		off := frame.PutEthernet(b, &frame.Broadcast, &g.l2.src.mac, frame.EtherARP)
		return finish(b, off+frame.PutARPRequest(b[off:], &g.l2.src.mac, g.l2.src.ip4, g.l2.dst.ip4))
	}
	hl, proto := 8, uint8(17)
	if g.kind == bgTCP {
		hl, proto = 20, 6
	}
	n := hl + g.payload
	_, off := writeL2(b, &g.l2, proto, n)
	wire = off + n
	seg := b[off : off+hl]
	ck := 6
	if g.kind == bgTCP {
		binary.BigEndian.PutUint16(seg[0:], g.sport)
		binary.BigEndian.PutUint16(seg[2:], g.dport)
		binary.BigEndian.PutUint32(seg[4:], g.seq)
		binary.BigEndian.PutUint32(seg[8:], g.seq^0x5a5a5a5a)
		seg[12], seg[13] = 5<<4, 0x18 // header length 20, PSH ACK
		binary.BigEndian.PutUint16(seg[14:], 65535)
		seg[16], seg[17], seg[18], seg[19] = 0, 0, 0, 0
		ck = 16
	} else {
		frame.PutUDP(seg, g.sport, g.dport, g.payload)
	}
	pay := off + hl
	data := backgroundText[g.payOff : g.payOff+g.payload]
	copy(b[pay:min(len(b), pay+g.payload)], data)
	// The checksum covers the whole payload, captured or not; the header
	// length is even, so the payload's words follow the header's.
	sum := frame.Checksum(data, frame.Sum16(seg, pseudoSum(&g.l2, proto, n)))
	if sum == 0 && proto == 17 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(seg[ck:], sum)
	return finish(b, wire)
}

// Mirror encapsulation: the switch's and the collector's addresses, and
// the mirror session.
var (
	mirrorSrc    = host{mac: [6]byte{0x02, 0x5e, 0, 0, 0, 0xaa}, ip4: [4]byte{192, 0, 2, 1}}
	collector    = host{mac: [6]byte{0x02, 0xc0, 0x11, 0xec, 0x70, 0x01}, ip4: [4]byte{192, 0, 2, 100}}
	mirrorSessID = uint16(7)
)

// erspanLen returns the bytes ERSPAN type typ puts before a mirrored
// frame: Ethernet, IPv4, GRE with a sequence number, and the ERSPAN header
// (8 bytes for type II, 12 for type III).
func erspanLen(typ int) int {
	switch typ {
	case 2:
		return 14 + 20 + 8 + 8
	case 3:
		return 14 + 20 + 8 + 12
	}
	return 0
}

// mirror writes the ERSPAN encapsulation into the first s.encap bytes of
// b, around a frame of wire bytes mirrored at time t, and returns the
// on-wire length of the whole.
func (s *Source) mirror(b []byte, wire int, t int64) int {
	h := l2{src: &mirrorSrc, dst: &collector}
	proto := uint16(0x88BE) // ERSPAN type II
	if s.cfg.ERSPAN == 3 {
		proto = 0x22EB
	}
	n := s.encap - 14 - 20 + wire
	_, off := writeL2(b, &h, 47, n)
	g := b[off:]
	binary.BigEndian.PutUint16(g[0:], 0x1000) // sequence number present
	binary.BigEndian.PutUint16(g[2:], proto)
	binary.BigEndian.PutUint32(g[4:], s.greSeq)
	s.greSeq++
	e := g[8:]
	if s.cfg.ERSPAN == 2 {
		binary.BigEndian.PutUint16(e[0:], 1<<12)              // version 1, VLAN 0
		binary.BigEndian.PutUint16(e[2:], 3<<13|mirrorSessID) // COS 3, session
		binary.BigEndian.PutUint32(e[4:], 0)                  // index
		return s.encap + wire
	}
	binary.BigEndian.PutUint16(e[0:], 2<<12)              // version 2, VLAN 0
	binary.BigEndian.PutUint16(e[2:], 3<<13|mirrorSessID) // COS 3, session
	binary.BigEndian.PutUint32(e[4:], uint32(t/100_000))  // timestamp, 100 us units
	binary.BigEndian.PutUint32(e[8:], 0)                  // SGT 0, frame type Ethernet, no subheader
	return s.encap + wire
}
