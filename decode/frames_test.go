package decode_test

import "encoding/binary"

// Frame builders for hand-made test frames. Each appends one header, in
// wire order, with every field given explicitly; the tests state the
// expected decode of the result field by field.

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// cat concatenates byte slices.
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

var (
	macA = []byte{0x02, 0, 0, 0, 0, 0x0a}
	macB = []byte{0x02, 0, 0, 0, 0, 0x0b}
)

// ether returns an Ethernet II header: destination macB, source macA.
func ether(etherType uint16) []byte { return cat(macB, macA, be16(etherType)) }

// tag returns an 802.1Q-style tag: TCI then the next ethertype.
func tag(pcp uint8, vid uint16, next uint16) []byte {
	return cat(be16(uint16(pcp)<<13|vid), be16(next))
}

// ipv4 returns an IPv4 header without options (checksum left 0): TOS tos,
// total length 20+payload, TTL 64, DF, protocol proto, 10.0.0.1 → 10.0.0.2.
func ipv4(tos uint8, proto uint8, payload int) []byte {
	return cat([]byte{0x45, tos}, be16(uint16(20+payload)), be16(0x1234), be16(0x4000),
		[]byte{64, proto}, be16(0), []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2})
}

// ipv6 returns an IPv6 header: traffic class tc, flow label 0x12345,
// payload length plen, next header nh, hop limit 63, fd00::1 → fd00::2.
func ipv6(tc uint8, nh uint8, plen int) []byte {
	src := [16]byte{0xfd, 15: 1}
	dst := [16]byte{0xfd, 15: 2}
	return cat(be32(6<<28|uint32(tc)<<20|0x12345), be16(uint16(plen)), []byte{nh, 63}, src[:], dst[:])
}

// udp returns a UDP header from port 49152 to dport, length 8+payload.
func udp(dport uint16, payload int) []byte {
	return cat(be16(49152), be16(dport), be16(uint16(8+payload)), be16(0))
}

// bth returns a BTH: opcode, SE, M, pad count, TVer 0, P_Key 0xFFFF, byte 4
// flags (FECN 0x80, BECN 0x40), dest QP, AckReq, PSN.
func bth(op uint8, se, m bool, pad uint8, flags uint8, dqp uint32, ack bool, psn uint32) []byte {
	b1 := pad << 4
	if se {
		b1 |= 0x80
	}
	if m {
		b1 |= 0x40
	}
	var a uint32
	if ack {
		a = 1 << 31
	}
	return cat([]byte{op, b1}, be16(0xffff), be32(uint32(flags)<<24|dqp), be32(a|psn))
}

func reth(va uint64, rkey, dmalen uint32) []byte { return cat(be64(va), be32(rkey), be32(dmalen)) }
func aeth(syndrome uint8, msn uint32) []byte     { return be32(uint32(syndrome)<<24 | msn) }
func deth(qkey, srcQP uint32) []byte             { return cat(be32(qkey), be32(srcQP)) }

// payload returns n bytes of filler.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

// roceV4 returns Ethernet/IPv4/UDP 4791 around transport (BTH onwards,
// ICRC included), with IPv4 TOS tos.
func roceV4(tos uint8, transport []byte) []byte {
	return cat(ether(0x0800), ipv4(tos, 17, 8+len(transport)), udp(4791, len(transport)), transport)
}

// icrc is the ICRC the hand-made frames carry.
var icrc = be32(0xA1B2C3D4)
