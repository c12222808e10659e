package decode_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rocescope/rocescope/decode"
)

// unhex decodes a hex string with spaces and line breaks.
func unhex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// defined returns the fields of p that its Headers say are defined, with
// every other field zero: what two decodes of the same frame must agree on.
func defined(p *decode.Packet) decode.Packet {
	h := p.Headers
	q := decode.Packet{Headers: h, Kind: p.Kind, Err: p.Err, PayloadLen: p.PayloadLen, Payload: p.Payload}
	if h&decode.HasEthernet != 0 {
		q.SrcMAC, q.DstMAC, q.EtherType, q.NumVLAN = p.SrcMAC, p.DstMAC, p.EtherType, p.NumVLAN
	}
	if h&decode.HasVLAN != 0 {
		q.PCP = p.PCP
		for i := 0; i < int(p.NumVLAN) && i < len(p.VLANs); i++ {
			q.VLANs[i] = p.VLANs[i]
		}
	}
	if h&decode.HasMirror != 0 {
		q.Mirror, q.MirrorSession, q.MirrorSrc, q.MirrorDst = p.Mirror, p.MirrorSession, p.MirrorSrc, p.MirrorDst
	}
	if h&(decode.HasIPv4|decode.HasIPv6|decode.HasLRH|decode.HasGRH) != 0 {
		q.Src, q.Dst = p.Src, p.Dst
	}
	if h&(decode.HasIPv4|decode.HasIPv6) != 0 || p.Kind == decode.KindRoCEv1 && h&decode.HasGRH != 0 {
		q.DSCP, q.ECN, q.TTL, q.IPLen = p.DSCP, p.ECN, p.TTL, p.IPLen
	}
	if h&decode.HasUDP != 0 {
		q.SrcPort, q.DstPort, q.UDPLen = p.SrcPort, p.DstPort, p.UDPLen
	}
	if h&decode.HasLRH != 0 {
		q.LRH = p.LRH
	}
	if h&decode.HasGRH != 0 {
		q.GRH = p.GRH
	}
	if h&decode.HasBTH != 0 {
		q.BTH = p.BTH
	}
	if h&decode.HasRDETH != 0 {
		q.RDETH = p.RDETH
	}
	if h&decode.HasDETH != 0 {
		q.DETH = p.DETH
	}
	if h&decode.HasXRCETH != 0 {
		q.XRCETH = p.XRCETH
	}
	if h&decode.HasRETH != 0 {
		q.RETH = p.RETH
	}
	if h&decode.HasAtomicETH != 0 {
		q.AtomicETH = p.AtomicETH
	}
	if h&decode.HasAETH != 0 {
		q.AETH = p.AETH
	}
	if h&decode.HasAtomicAckETH != 0 {
		q.AtomicAckETH = p.AtomicAckETH
	}
	if h&decode.HasImmDt != 0 {
		q.ImmDt = p.ImmDt
	}
	if h&decode.HasIETH != 0 {
		q.IETH = p.IETH
	}
	if h&decode.HasICRC != 0 {
		q.ICRC = p.ICRC
	}
	if h&decode.HasCM != 0 {
		q.CM = p.CM
	}
	if h&(decode.HasPFC|decode.HasPause) != 0 {
		q.Pause = p.Pause
	}
	return q
}

// cmpPacket compares packets, Payload by content and Addr by value.
var cmpPacket = cmp.Options{
	cmp.Comparer(func(a, b decode.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) }),
}

const (
	eth  = decode.HasEthernet
	ip4  = decode.HasIPv4
	ip6  = decode.HasIPv6
	udpH = decode.HasUDP
	bthH = decode.HasBTH
	crc  = decode.HasICRC
)

func v4(a, b, c, d byte) decode.Addr { return decode.AddrFrom4([4]byte{a, b, c, d}) }

var (
	ipA  = v4(10, 0, 0, 1)
	ipB  = v4(10, 0, 0, 2)
	ip6A = decode.AddrFrom16([16]byte{0xfd, 15: 1})
	ip6B = decode.AddrFrom16([16]byte{0xfd, 15: 2})
	mA   = [6]byte{2, 0, 0, 0, 0, 0x0a}
	mB   = [6]byte{2, 0, 0, 0, 0, 0x0b}
)

// decodeCase is one frame with its complete expected decode.
type decodeCase struct {
	name  string
	link  decode.LinkType
	port  uint16 // Decoder.RoCEPort
	frame []byte
	want  decode.Packet // only the defined fields; Err is the expected error
}

// decodeCases are the hand-made frames. The first three are written out
// byte by byte; the others use the builders of frames_test.go.
func decodeCases(tb testing.TB) []decodeCase {
	ackNAK := unhex(tb, `
		02000000000b 02000000000a 0800
		45 02 0030 1234 4000 40 11 0000 0a000001 0a000002
		c000 12b7 001c 0000
		11 40 ffff 00000041 000003e8
		60 00004d
		a1b2c3d4`)
	rocev1 := unhex(tb, `
		02000000000b 02000000000a 8915
		60300000 0018 1b 40
		fe800000000000000000000000000001
		fe800000000000000000000000000002
		04 00 ffff 00000010 80000005
		0102030405060708
		11223344`)
	ibUD := unhex(tb, `
		00 22 0022 0011 0011
		65 20 ffff 00000057 00000001
		00000001 00000058
		00000099
		`+strings.Repeat("ab", 30)+` 0000
		a1b2c3d4
		beef`)
	gidA := [16]byte{0xfe, 0x80, 15: 1}
	gidB := [16]byte{0xfe, 0x80, 15: 2}

	writeFirst := cat(bth(0x06, false, true, 0, 0, 0xABCDEF, false, 0xFFFFFF), reth(0x7f0012345678, 0x1234ABCD, 8192), payload(1024), icrc)
	wantWrite := decode.Packet{
		Headers: eth | ip4 | udpH | bthH | decode.HasRETH | crc, Kind: decode.KindRoCEv2,
		SrcMAC: mA, DstMAC: mB, EtherType: 0x0800,
		Src: ipA, Dst: ipB, DSCP: 0, ECN: 2, TTL: 64, IPLen: uint16(20 + 8 + len(writeFirst)),
		SrcPort: 49152, DstPort: 4791, UDPLen: uint16(8 + len(writeFirst)),
		BTH:        decode.BTH{Opcode: 0x06, M: true, PKey: 0xffff, DestQP: 0xABCDEF, PSN: 0xFFFFFF},
		RETH:       decode.RETH{VA: 0x7f0012345678, RKey: 0x1234ABCD, DMALen: 8192},
		ICRC:       0xA1B2C3D4,
		PayloadLen: 1024, Payload: payload(1024),
	}

	// IPv6 in two VLAN tags (802.1ad outer, 802.1Q inner) with hop-by-hop
	// options and an atomic fragment header before the UDP header.
	send := cat(bth(0x04, true, false, 3, 0x80, 0x321, true, 5), payload(61), []byte{0, 0, 0}, icrc)
	ext := cat([]byte{44, 0}, make([]byte, 6), []byte{17, 0, 0, 0, 0, 0, 0, 7}) // HBH → fragment (offset 0, M 0) → UDP
	v6 := cat(ether(0x88A8), tag(1, 100, 0x8100), tag(2, 200, 0x86DD),
		ipv6(0x03<<2|3, 0, len(ext)+8+len(send)), ext, udp(4791, len(send)), send)
	wantV6 := decode.Packet{
		Headers: eth | decode.HasVLAN | ip6 | udpH | bthH | crc, Kind: decode.KindRoCEv2,
		SrcMAC: mA, DstMAC: mB, EtherType: 0x86DD, NumVLAN: 2, VLANs: [2]uint16{100, 200}, PCP: 1,
		Src: ip6A, Dst: ip6B, DSCP: 3, ECN: 3, TTL: 63, IPLen: uint16(len(ext) + 8 + len(send)),
		SrcPort: 49152, DstPort: 4791, UDPLen: uint16(8 + len(send)),
		BTH:        decode.BTH{Opcode: 0x04, SE: true, PadCnt: 3, PKey: 0xffff, FECN: true, DestQP: 0x321, AckReq: true, PSN: 5},
		ICRC:       0xA1B2C3D4,
		PayloadLen: 61, Payload: payload(61),
	}

	// ERSPAN III with a platform-specific subheader around an ACK; outer
	// 192.0.2.1 → 192.0.2.2, session 1023.
	inner := roceV4(0x02, cat(bth(0x11, false, false, 0, 0, 0x41, false, 9), aeth(0x2e, 3), icrc))
	erspan3 := cat(ether(0x0800), ipv4(0, 47, 4+12+8+len(inner)), be16(0), be16(0x22EB),
		be32(2<<28|5<<16|1023), be32(0xABCDEF), []byte{0, 0, 0, 1}, be64(0x0c00000100000002), inner)
	copy(erspan3[26:], []byte{192, 0, 2, 1, 192, 0, 2, 2})
	wantERSPAN := decode.Packet{
		Headers: eth | decode.HasMirror | ip4 | udpH | bthH | decode.HasAETH | crc, Kind: decode.KindRoCEv2,
		SrcMAC: mA, DstMAC: mB, EtherType: 0x0800,
		Mirror: decode.MirrorERSPAN3, MirrorSession: 1023, MirrorSrc: v4(192, 0, 2, 1), MirrorDst: v4(192, 0, 2, 2),
		Src: ipA, Dst: ipB, ECN: 2, TTL: 64, IPLen: 48,
		SrcPort: 49152, DstPort: 4791, UDPLen: 28,
		BTH:  decode.BTH{Opcode: 0x11, PKey: 0xffff, DestQP: 0x41, PSN: 9},
		AETH: decode.AETH{Syndrome: 0x2e, MSN: 3},
		ICRC: 0xA1B2C3D4,
	}
	erspan2 := cat(ether(0x0800), ipv4(0, 47, 8+8+len(inner)), be16(0x1000), be16(0x88BE), be32(9),
		be32(1<<28|300), be32(0x12345), inner)
	gre := cat(ether(0x0800), ipv4(0, 47, 8+len(inner)), be16(0x2000), be16(0x6558), be32(0x77), inner)
	wantERSPAN2, wantGRE := wantERSPAN, wantERSPAN
	wantERSPAN2.Mirror, wantERSPAN2.MirrorSession = decode.MirrorERSPAN2, 300
	wantGRE.Mirror, wantGRE.MirrorSession = decode.MirrorGRE, 0
	wantERSPAN2.MirrorSrc, wantERSPAN2.MirrorDst = ipA, ipB
	wantGRE.MirrorSrc, wantGRE.MirrorDst = ipA, ipB

	cnp := roceV4(0x03, cat(bth(0x81, false, false, 0, 0x40, 0x123, false, 0), make([]byte, 16), icrc))
	pfc := cat(ether(0x8808), be16(0x0101), []byte{0, 0x89}, be16(0xffff), be16(0), be16(0), be16(100),
		be16(0), be16(0), be16(0), be16(1), make([]byte, 26))
	pause := cat(ether(0x8808), be16(0x0001), be16(0x1234), make([]byte, 42))

	cmReq := cat(bth(0x64, false, false, 0, 0, 1, true, 1), deth(0x80010000, 1),
		[]byte{1, 7, 2, 3}, make([]byte, 12), be16(0x0010), make([]byte, 6), // MAD header
		be32(0x0A0B0C0D), make([]byte, 28), be32(0x00ABCD10), make([]byte, 8), be32(0x12345637), make([]byte, 232-48),
		icrc)
	wantCM := decode.Packet{
		Headers: eth | ip4 | udpH | bthH | decode.HasDETH | decode.HasCM | crc, Kind: decode.KindRoCEv2,
		SrcMAC: mA, DstMAC: mB, EtherType: 0x0800,
		Src: ipA, Dst: ipB, TTL: 64, IPLen: uint16(28 + len(cmReq)),
		SrcPort: 49152, DstPort: 4791, UDPLen: uint16(8 + len(cmReq)),
		BTH:        decode.BTH{Opcode: 0x64, PKey: 0xffff, DestQP: 1, AckReq: true, PSN: 1},
		DETH:       decode.DETH{QKey: 0x80010000, SrcQP: 1},
		CM:         decode.CM{AttrID: 0x0010, LocalCommID: 0x0A0B0C0D, LocalQPN: 0x00ABCD, StartingPSN: 0x123456},
		ICRC:       0xA1B2C3D4,
		PayloadLen: 256, Payload: cmReq[20 : 20+256],
	}

	erf := cat(be64(0x0102030405060708), []byte{21 | 0x80, 0x04}, be16(uint16(16+8+len(ibUD)+6)), be16(0), be16(uint16(len(ibUD))),
		[]byte{0x03, 0, 0, 0, 0, 0, 0, 0}, ibUD, make([]byte, 6))
	sll := cat(be16(4), be16(1), be16(6), macA, []byte{0, 0}, be16(0x0800), roceV4(0x02, cat(bth(0x11, false, true, 0, 0, 0x41, false, 1000), aeth(0x60, 77), icrc))[14:])
	sll2 := cat(be16(0x0800), be16(0), be32(3), be16(1), []byte{4, 6}, macA, []byte{0, 0}, sll[16:])
	wantACK := decode.Packet{
		Headers: eth | ip4 | udpH | bthH | decode.HasAETH | crc, Kind: decode.KindRoCEv2,
		SrcMAC: mA, DstMAC: mB, EtherType: 0x0800,
		Src: ipA, Dst: ipB, ECN: 2, TTL: 64, IPLen: 48,
		SrcPort: 49152, DstPort: 4791, UDPLen: 28,
		BTH:  decode.BTH{Opcode: 0x11, M: true, PKey: 0xffff, DestQP: 0x41, PSN: 1000},
		AETH: decode.AETH{Syndrome: 0x60, MSN: 77},
		ICRC: 0xA1B2C3D4,
	}
	wantSLL := wantACK
	wantSLL.DstMAC = [6]byte{}
	wantRaw := wantACK
	wantRaw.Headers &^= eth
	wantRaw.SrcMAC, wantRaw.DstMAC, wantRaw.EtherType = [6]byte{}, [6]byte{}, 0
	wantV6Fragment := wantV6
	wantV6Fragment.Headers, wantV6Fragment.Kind = eth|decode.HasVLAN|ip6|decode.HasFragment, decode.KindOther
	wantV6Fragment.PayloadLen, wantV6Fragment.Payload = 0, nil
	wantV6Fragment = defined(&wantV6Fragment)
	wantRawV6 := wantV6
	wantRawV6.Headers &^= eth | decode.HasVLAN
	wantRawV6.SrcMAC, wantRawV6.DstMAC, wantRawV6.EtherType = [6]byte{}, [6]byte{}, 0
	wantRawV6.NumVLAN, wantRawV6.VLANs, wantRawV6.PCP = 0, [2]uint16{}, 0

	wantIB := decode.Packet{
		Headers: decode.HasLRH | bthH | decode.HasDETH | decode.HasImmDt | crc, Kind: decode.KindIB,
		Src: decode.AddrFromLID(0x11), Dst: decode.AddrFromLID(0x22),
		LRH:        decode.LRH{SL: 2, LNH: 2, DLID: 0x22, PktLen: 17, SLID: 0x11},
		BTH:        decode.BTH{Opcode: 0x65, PadCnt: 2, PKey: 0xffff, DestQP: 0x57, PSN: 1},
		DETH:       decode.DETH{QKey: 1, SrcQP: 0x58},
		ImmDt:      0x99,
		ICRC:       0xA1B2C3D4,
		PayloadLen: 30, Payload: bytes.Repeat([]byte{0xab}, 30),
	}

	// Native IB with a GRH (LNH 3) around an RNR NAK.
	ibGRH := cat([]byte{0x10, 0x03}, be16(0x22), be16(uint16((8+40+12+4+4)/4)), be16(0x11),
		be32(6<<28|0x12<<20|0x54321), be16(20), []byte{0x1b, 1}, gidA[:], gidB[:],
		bth(0x11, false, false, 0, 0, 0x56, false, 9), aeth(0x2e, 4), icrc, be16(0xbeef))

	return []decodeCase{
		{name: "RoCEv2 NAK, bytes by hand", link: decode.LinkEthernet, frame: ackNAK, want: wantACK},
		{name: "RoCEv1 SEND Only with ECN-CE, bytes by hand", link: decode.LinkEthernet, frame: rocev1, want: decode.Packet{
			Headers: eth | decode.HasGRH | bthH | crc, Kind: decode.KindRoCEv1,
			SrcMAC: mA, DstMAC: mB, EtherType: 0x8915,
			Src: decode.AddrFromGID(gidA), Dst: decode.AddrFromGID(gidB), DSCP: 0, ECN: 3, TTL: 0x40, IPLen: 24,
			GRH:        decode.GRH{IPVer: 6, TClass: 3, PayLen: 24, NxtHdr: 0x1b, HopLmt: 0x40, SGID: gidA, DGID: gidB},
			BTH:        decode.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: 0x10, AckReq: true, PSN: 5},
			ICRC:       0x11223344,
			PayloadLen: 8, Payload: []byte{1, 2, 3, 4, 5, 6, 7, 8},
		}},
		{name: "IB UD SEND Only Immediate with pad, bytes by hand", link: decode.LinkInfiniBand, frame: ibUD, want: wantIB},
		{name: "IB GRH RNR NAK", link: decode.LinkInfiniBand, frame: ibGRH, want: decode.Packet{
			Headers: decode.HasLRH | decode.HasGRH | bthH | decode.HasAETH | crc, Kind: decode.KindIB,
			Src: decode.AddrFromGID(gidA), Dst: decode.AddrFromGID(gidB),
			LRH:  decode.LRH{VL: 1, LNH: 3, DLID: 0x22, PktLen: 17, SLID: 0x11},
			GRH:  decode.GRH{IPVer: 6, TClass: 0x12, FlowLabel: 0x54321, PayLen: 20, NxtHdr: 0x1b, HopLmt: 1, SGID: gidA, DGID: gidB},
			BTH:  decode.BTH{Opcode: 0x11, PKey: 0xffff, DestQP: 0x56, PSN: 9},
			AETH: decode.AETH{Syndrome: 0x2e, MSN: 4},
			ICRC: 0xA1B2C3D4,
		}},
		{name: "ERF InfiniBand with extension header and padding", link: decode.LinkERF, frame: erf, want: wantIB},
		// The record length is not used, as Wireshark does not use it.
		{name: "ERF record length below 16", link: decode.LinkERF, frame: func() []byte { f := bytes.Clone(erf); f[10], f[11] = 0, 8; return f }(), want: wantIB},
		{name: "RoCEv2 WRITE First", link: decode.LinkEthernet, frame: roceV4(0x02, writeFirst), want: wantWrite},
		{name: "raw IPv4 (101)", link: decode.LinkRaw, frame: ackNAK[14:], want: wantRaw},
		{name: "raw IPv4 (228)", link: decode.LinkIPv4, frame: ackNAK[14:], want: wantRaw},
		{name: "BSD loopback IPv4, little-endian family 2", link: decode.LinkNull, frame: cat([]byte{2, 0, 0, 0}, ackNAK[14:]), want: wantRaw},
		{name: "BSD loopback IPv4, big-endian family 2", link: decode.LinkNull, frame: cat([]byte{0, 0, 0, 2}, ackNAK[14:]), want: wantRaw},
		{name: "BSD loopback IPv6, family 24 (NetBSD, OpenBSD)", link: decode.LinkNull, frame: cat([]byte{24, 0, 0, 0}, v6[22:]), want: wantRawV6},
		{name: "BSD loopback IPv6, family 28 (FreeBSD)", link: decode.LinkNull, frame: cat([]byte{0, 0, 0, 28}, v6[22:]), want: wantRawV6},
		{name: "BSD loopback IPv6, family 30 (Darwin)", link: decode.LinkNull, frame: cat([]byte{30, 0, 0, 0}, v6[22:]), want: wantRawV6},
		{name: "BSD loopback, other family", link: decode.LinkNull, frame: cat([]byte{7, 0, 0, 0}, ackNAK[14:]), want: decode.Packet{}},
		{name: "Linux SLL", link: decode.LinkLinuxSLL, frame: sll, want: wantSLL},
		{name: "Linux SLL2", link: decode.LinkLinuxSLL2, frame: sll2, want: wantSLL},
		{name: "QinQ IPv6 with extension headers", link: decode.LinkEthernet, frame: v6, want: wantV6},
		{name: "raw IPv6 (229)", link: decode.LinkIPv6, frame: v6[22:], want: wantRawV6},
		{name: "raw IPv6 (101)", link: decode.LinkRaw, frame: v6[22:], want: wantRawV6},
		{name: "triple tag keeps two, counts three", link: decode.LinkEthernet,
			frame: cat(ether(0x9100), tag(7, 7, 0x88A8), tag(0, 8, 0x8100), tag(0, 9, 0x0806), make([]byte, 28)),
			want: decode.Packet{Headers: eth | decode.HasVLAN, SrcMAC: mA, DstMAC: mB, EtherType: 0x0806,
				NumVLAN: 3, VLANs: [2]uint16{7, 8}, PCP: 7}},
		{name: "ERSPAN III", link: decode.LinkEthernet, frame: erspan3, want: wantERSPAN},
		{name: "ERSPAN II", link: decode.LinkEthernet, frame: erspan2, want: wantERSPAN2},
		{name: "GRE transparent Ethernet bridging", link: decode.LinkEthernet, frame: gre, want: wantGRE},
		{name: "CNP with ECN-CE and BECN", link: decode.LinkEthernet, frame: cnp, want: decode.Packet{
			Headers: eth | ip4 | udpH | bthH | crc, Kind: decode.KindRoCEv2,
			SrcMAC: mA, DstMAC: mB, EtherType: 0x0800,
			Src: ipA, Dst: ipB, ECN: 3, TTL: 64, IPLen: 60, SrcPort: 49152, DstPort: 4791, UDPLen: 40,
			BTH:  decode.BTH{Opcode: 0x81, PKey: 0xffff, BECN: true, DestQP: 0x123},
			ICRC: 0xA1B2C3D4, Payload: []byte{},
		}},
		{name: "CM ConnectRequest on QP1", link: decode.LinkEthernet, frame: roceV4(0, cmReq), want: wantCM},
		{name: "PFC", link: decode.LinkEthernet, frame: pfc, want: decode.Packet{
			Headers: eth | decode.HasPFC, Kind: decode.KindPFC, SrcMAC: mA, DstMAC: mB, EtherType: 0x8808,
			Pause: decode.Pause{Opcode: 0x0101, Enable: 0x89, Quanta: [8]uint16{0xffff, 0, 0, 100, 0, 0, 0, 1}},
		}},
		{name: "802.3x pause", link: decode.LinkEthernet, frame: pause, want: decode.Packet{
			Headers: eth | decode.HasPause, Kind: decode.KindPause, SrcMAC: mA, DstMAC: mB, EtherType: 0x8808,
			Pause: decode.Pause{Opcode: 0x0001, Quanta: [8]uint16{0x1234}},
		}},
		{name: "payload cut by the snap length", link: decode.LinkEthernet, frame: roceV4(0x02, writeFirst)[:200], want: func() decode.Packet {
			w := wantWrite
			w.Headers &^= crc
			w.ICRC, w.Payload = 0, payload(200-14-20-8-28)
			return w
		}()},
		{name: "RoCE port 1234", link: decode.LinkEthernet, port: 1234,
			frame: cat(ether(0x0800), ipv4(0x02, 17, 8+len(writeFirst)), udp(1234, len(writeFirst)), writeFirst),
			want:  func() decode.Packet { w := wantWrite; w.DstPort = 1234; return w }()},
		{name: "port 4791 is not RoCE on another RoCE port", link: decode.LinkEthernet, port: 1234,
			frame: roceV4(0x02, writeFirst), want: decode.Packet{Headers: eth | ip4 | udpH, SrcMAC: mA, DstMAC: mB,
				EtherType: 0x0800, Src: ipA, Dst: ipB, ECN: 2, TTL: 64, IPLen: wantWrite.IPLen,
				SrcPort: 49152, DstPort: 4791, UDPLen: wantWrite.UDPLen}},
		{name: "UDP to another port", link: decode.LinkEthernet, frame: cat(ether(0x0800), ipv4(0, 17, 12), udp(53, 4), make([]byte, 4)),
			want: decode.Packet{Headers: eth | ip4 | udpH, SrcMAC: mA, DstMAC: mB, EtherType: 0x0800,
				Src: ipA, Dst: ipB, TTL: 64, IPLen: 32, SrcPort: 49152, DstPort: 53, UDPLen: 12}},
		{name: "TCP", link: decode.LinkEthernet, frame: cat(ether(0x0800), ipv4(0, 6, 20), make([]byte, 20)),
			want: decode.Packet{Headers: eth | ip4, SrcMAC: mA, DstMAC: mB, EtherType: 0x0800, Src: ipA, Dst: ipB, TTL: 64, IPLen: 40}},
		{name: "ARP", link: decode.LinkEthernet, frame: cat(ether(0x0806), make([]byte, 28)),
			want: decode.Packet{Headers: eth, SrcMAC: mA, DstMAC: mB, EtherType: 0x0806}},
		{name: "IPv4 fragment", link: decode.LinkEthernet, frame: func() []byte {
			f := roceV4(0, writeFirst)
			f[20] = 0x20 // MF
			return f
		}(), want: decode.Packet{Headers: eth | ip4 | decode.HasFragment, SrcMAC: mA, DstMAC: mB, EtherType: 0x0800, Src: ipA, Dst: ipB,
			TTL: 64, IPLen: wantWrite.IPLen}},
		{name: "IPv4 last fragment, offset 1480, DF clear", link: decode.LinkEthernet, frame: func() []byte {
			f := roceV4(0, writeFirst)
			f[20], f[21] = 0x00, 185 // offset 185*8
			return f
		}(), want: decode.Packet{Headers: eth | ip4 | decode.HasFragment, SrcMAC: mA, DstMAC: mB, EtherType: 0x0800, Src: ipA, Dst: ipB,
			TTL: 64, IPLen: wantWrite.IPLen}},
		{name: "IPv4 first fragment, raw IP", link: decode.LinkRaw, frame: func() []byte {
			f := roceV4(0, writeFirst)[14:]
			f[6] = 0x20 // MF, offset 0
			return f
		}(), want: decode.Packet{Headers: ip4 | decode.HasFragment, Src: ipA, Dst: ipB, TTL: 64, IPLen: wantWrite.IPLen}},
		{name: "IPv4 DF alone is no fragment", link: decode.LinkEthernet, frame: func() []byte {
			f := roceV4(0x02, writeFirst)
			f[20] = 0x40 // DF
			return f
		}(), want: wantWrite},
		{name: "IPv6 fragment header with M set", link: decode.LinkEthernet, frame: func() []byte {
			f := bytes.Clone(v6)
			f[22+40+8+3] = 1 // M, offset 0
			return f
		}(), want: wantV6Fragment},
		{name: "IPv6 fragment header with offset 32", link: decode.LinkEthernet, frame: func() []byte {
			f := bytes.Clone(v6)
			f[22+40+8+2] = 0x01 // offset 0x100>>3, M clear
			return f
		}(), want: wantV6Fragment},

		// Malformed frames: Err says which header is wrong.
		{name: "IPv4 IHL 4", link: decode.LinkEthernet, frame: func() []byte { f := bytes.Clone(ackNAK); f[14] = 0x44; return f }(),
			want: decode.Packet{Headers: eth, Err: decode.ErrIPv4, SrcMAC: mA, DstMAC: mB, EtherType: 0x0800}},
		{name: "UDP length below 8", link: decode.LinkEthernet, frame: func() []byte { f := bytes.Clone(ackNAK); f[38], f[39] = 0, 7; return f }(),
			want: withErr(wantACK, decode.ErrUDP, eth|ip4|udpH, func(p *decode.Packet) { p.UDPLen = 7 })},
		{name: "UDP length beyond the IP payload", link: decode.LinkEthernet, frame: func() []byte { f := bytes.Clone(ackNAK); f[39] = 29; return f }(),
			want: withErr(wantACK, decode.ErrUDP, eth|ip4|udpH, func(p *decode.Packet) { p.UDPLen = 29 })},
		{name: "UDP length too short for the AETH", link: decode.LinkEthernet, frame: func() []byte {
			f := bytes.Clone(ackNAK)
			f[17], f[39] = 0x2c, 24 // IP 44, UDP 24: BTH + 4 bytes
			return f
		}(), want: withErr(wantACK, decode.ErrUDP, eth|ip4|udpH|bthH, func(p *decode.Packet) { p.UDPLen, p.IPLen = 24, 44 })},
		{name: "reserved opcode 0x15 in RC", link: decode.LinkEthernet, frame: func() []byte { f := bytes.Clone(ackNAK); f[42] = 0x15; return f }(),
			want: withErr(wantACK, decode.ErrOpcode, eth|ip4|udpH|bthH, func(p *decode.Packet) { p.BTH.Opcode = 0x15 })},
		{name: "pad count larger than the payload", link: decode.LinkEthernet, frame: func() []byte { f := bytes.Clone(ackNAK); f[43] = 0x70; return f }(),
			want: withErr(wantACK, decode.ErrPad, eth|ip4|udpH|bthH|decode.HasAETH, func(p *decode.Packet) { p.BTH.PadCnt = 3 })},
		{name: "IPv6 extension header beyond the payload", link: decode.LinkEthernet, frame: func() []byte {
			f := bytes.Clone(v6)
			f[22+40+1] = 200 // hop-by-hop length
			return f
		}(), want: func() decode.Packet {
			w := wantV6
			w.Headers, w.Kind, w.Err, w.PayloadLen, w.Payload = eth|decode.HasVLAN|ip6, decode.KindOther, decode.ErrIPv6, 0, nil
			return defined(&w)
		}()},
		{name: "GRE version 1", link: decode.LinkEthernet, frame: func() []byte { f := bytes.Clone(erspan2); f[35] = 1; return f }(),
			want: decode.Packet{Headers: eth | ip4, Err: decode.ErrMirror, SrcMAC: mA, DstMAC: mB, EtherType: 0x0800,
				Src: ipA, Dst: ipB, TTL: 64, IPLen: uint16(len(erspan2) - 14)}},
		{name: "ERSPAN III version 1", link: decode.LinkEthernet, frame: func() []byte { f := bytes.Clone(erspan3); f[38] = 0x10; return f }(),
			want: decode.Packet{Headers: eth | ip4, Err: decode.ErrMirror, SrcMAC: mA, DstMAC: mB, EtherType: 0x0800,
				Src: v4(192, 0, 2, 1), Dst: v4(192, 0, 2, 2), TTL: 64, IPLen: uint16(len(erspan3) - 14)}},
		{name: "LRH packet length shorter than the headers", link: decode.LinkInfiniBand, frame: func() []byte { f := bytes.Clone(ibUD); f[5] = 5; return f }(),
			want: decode.Packet{Headers: decode.HasLRH, Kind: decode.KindIB, Err: decode.ErrLRH,
				Src: decode.AddrFromLID(0x11), Dst: decode.AddrFromLID(0x22), LRH: decode.LRH{SL: 2, LNH: 2, DLID: 0x22, PktLen: 5, SLID: 0x11}}},
		{name: "GRH payload length shorter than BTH and ICRC", link: decode.LinkEthernet, frame: func() []byte { f := bytes.Clone(rocev1); f[19] = 15; return f }(),
			want: decode.Packet{Headers: eth | decode.HasGRH, Kind: decode.KindRoCEv1, Err: decode.ErrGRH,
				SrcMAC: mA, DstMAC: mB, EtherType: 0x8915,
				Src: decode.AddrFromGID(gidA), Dst: decode.AddrFromGID(gidB), ECN: 3, TTL: 0x40, IPLen: 15,
				GRH: decode.GRH{IPVer: 6, TClass: 3, PayLen: 15, NxtHdr: 0x1b, HopLmt: 0x40, SGID: gidA, DGID: gidB}}},
		{name: "raw IP version 5", link: decode.LinkRaw, frame: []byte{0x50, 0, 0, 0},
			want: decode.Packet{Err: decode.ErrIPVersion}},
		{name: "unsupported link type (802.11)", link: 105, frame: []byte{2, 0, 0, 0}, want: decode.Packet{Err: decode.ErrLinkType}},
		{name: "BSD loopback cut in the family", link: decode.LinkNull, frame: []byte{2, 0, 0}, want: decode.Packet{Err: decode.ErrTruncated}},
		{name: "empty Ethernet frame", link: decode.LinkEthernet, want: decode.Packet{Err: decode.ErrTruncated}},
	}
}

// withErr returns w with error e, headers h, the payload fields cleared and
// mod applied: the expectation for a frame broken at one header.
func withErr(w decode.Packet, e decode.Error, h decode.Header, mod func(*decode.Packet)) decode.Packet {
	w.Err, w.Headers, w.PayloadLen, w.Payload = e, h, 0, nil
	mod(&w)
	return defined(&w)
}

// dirty returns a Packet whose every field holds garbage, to show that
// Decode resets what it must.
func dirty() decode.Packet {
	b := bytes.Repeat([]byte{0xff}, 400)
	var p decode.Packet
	p.Headers, p.Kind, p.Err, p.PayloadLen, p.Payload = ^decode.Header(0), 99, 99, 1<<31, b
	p.SrcMAC, p.DstMAC, p.EtherType, p.VLANs, p.NumVLAN, p.PCP = [6]byte{1}, [6]byte{1}, 9, [2]uint16{1, 1}, 9, 9
	p.Src, p.Dst, p.MirrorSrc, p.MirrorDst = decode.AddrFromLID(9), decode.AddrFromLID(9), ipA, ipA
	p.DSCP, p.ECN, p.TTL, p.IPLen, p.Mirror, p.MirrorSession = 9, 9, 9, 9, 9, 9
	p.SrcPort, p.DstPort, p.UDPLen = 9, 9, 9
	p.LRH = decode.LRH{VL: 9, LVer: 9, SL: 9, LNH: 9, DLID: 9, SLID: 9, PktLen: 9}
	p.GRH = decode.GRH{IPVer: 9, TClass: 9, NxtHdr: 9, HopLmt: 9, FlowLabel: 9, PayLen: 9, SGID: [16]byte{9}, DGID: [16]byte{9}}
	p.BTH = decode.BTH{Opcode: 9, SE: true, M: true, PadCnt: 3, TVer: 9, PKey: 9, FECN: true, BECN: true, Resv6a: 9, DestQP: 9, AckReq: true, Resv7: 9, PSN: 9}
	p.RDETH, p.XRCETH, p.AtomicAckETH, p.ImmDt, p.IETH, p.ICRC = 9, 9, 9, 9, 9, 9
	p.DETH, p.RETH, p.AETH = decode.DETH{QKey: 9, SrcQP: 9}, decode.RETH{VA: 9, RKey: 9, DMALen: 9}, decode.AETH{Syndrome: 9, MSN: 9}
	p.AtomicETH = decode.AtomicETH{VA: 9, RKey: 9, SwapAdd: 9, Compare: 9}
	p.CM = decode.CM{AttrID: 9, LocalCommID: 9, RemoteCommID: 9, LocalQPN: 9, StartingPSN: 9}
	p.Pause = decode.Pause{Opcode: 9, Enable: 9, Quanta: [8]uint16{9, 9, 9, 9, 9, 9, 9, 9}}
	return p
}

func TestDecode(t *testing.T) {
	for _, c := range decodeCases(t) {
		t.Run(c.name, func(t *testing.T) {
			d := decode.Decoder{RoCEPort: c.port}
			for _, start := range []struct {
				name string
				p    decode.Packet
			}{{"zero Packet", decode.Packet{}}, {"reused Packet", dirty()}} {
				p := start.p
				err := d.Decode(&p, c.frame, c.link)
				if c.want.Err == 0 && err != nil || c.want.Err != 0 && !errors.Is(err, c.want.Err) {
					t.Errorf("%s: Decode error %v, want %v", start.name, err, c.want.Err)
				}
				if diff := cmp.Diff(c.want, defined(&p), cmpPacket); diff != "" {
					t.Errorf("%s: Decode mismatch (-want +got):\n%s", start.name, diff)
				}
			}
		})
	}
}

func TestDecodePayloadAliasesFrame(t *testing.T) {
	for _, c := range decodeCases(t) {
		var p decode.Packet
		if err := (&decode.Decoder{RoCEPort: c.port}).Decode(&p, c.frame, c.link); err != nil || len(p.Payload) == 0 {
			continue
		}
		off := cap(c.frame) - cap(p.Payload)
		if off < 0 || off+len(p.Payload) > len(c.frame) || &c.frame[off] != &p.Payload[0] {
			t.Errorf("%s: Payload does not alias the frame", c.name)
		}
	}
}

// headerEnd returns the offset in frame where the headers of p end: the
// payload start for a RoCE packet, else len(frame).
func headerEnd(frame []byte, p *decode.Packet) int {
	if p.Headers&decode.HasBTH != 0 && p.Err == 0 {
		return cap(frame) - cap(p.Payload)
	}
	return len(frame)
}

func TestDecodeEveryPrefix(t *testing.T) {
	frames := decodeCases(t)
	for _, path := range testdataFiles(t) {
		link, recs, err := readPcap(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			frames = append(frames, decodeCase{name: fmt.Sprintf("%s frame %d", path, i+1), link: link, frame: r.data})
		}
	}
	for _, c := range frames {
		d := decode.Decoder{RoCEPort: c.port}
		var full decode.Packet
		fullErr := d.Decode(&full, c.frame, c.link)
		end := headerEnd(c.frame, &full)
		for n := 0; n < len(c.frame); n++ {
			prefix := c.frame[:n:n]
			var p decode.Packet
			err := d.Decode(&p, prefix, c.link)
			switch {
			case err != nil && !errors.Is(err, decode.ErrTruncated) && !errors.Is(err, fullErr):
				t.Fatalf("%s: prefix %d: error %v, want nil, ErrTruncated or the full frame's %v", c.name, n, err, fullErr)
			case n < end && err == nil && full.Err == 0 && full.IsRoCE():
				t.Fatalf("%s: prefix %d of %d header bytes decodes without error", c.name, n, end)
			case n >= end && fullErr == nil && err != nil:
				t.Fatalf("%s: prefix %d holds all %d header bytes but fails: %v", c.name, n, end, err)
			}
			if full.Headers&decode.HasMirror != 0 && p.Headers&decode.HasMirror == 0 {
				// Cut before the mirror header: the prefix shows the outer
				// headers, whose addresses the full frame reports as the mirror's.
				if p.Headers&(decode.HasIPv4|decode.HasIPv6) != 0 && (p.Src != full.MirrorSrc || p.Dst != full.MirrorDst) {
					t.Fatalf("%s: prefix %d: outer addresses %v → %v, the full frame's mirror %v → %v",
						c.name, n, p.Src, p.Dst, full.MirrorSrc, full.MirrorDst)
				}
				continue
			}
			// Every header the prefix decoded has the full frame's values.
			if p.Headers&^full.Headers&^decode.HasICRC != 0 {
				t.Fatalf("%s: prefix %d has headers %b the full frame lacks (%b)", c.name, n, p.Headers, full.Headers)
			}
			if p.Kind != decode.KindOther && p.Kind != full.Kind {
				t.Fatalf("%s: prefix %d is a %v, the full frame a %v", c.name, n, p.Kind, full.Kind)
			}
			got, want := defined(&p), defined(&full)
			want.Headers, want.Kind, want.Err = got.Headers, got.Kind, got.Err
			maskTo(&want, got.Headers)
			if got.Err != 0 && got.NumVLAN <= want.NumVLAN {
				// Cut inside the tags: the tags so far, and the ethertype last read.
				want.EtherType, want.NumVLAN = got.EtherType, got.NumVLAN
				for i := int(got.NumVLAN); i < len(want.VLANs); i++ {
					want.VLANs[i] = 0
				}
			}
			if got.Headers&decode.HasGRH == 0 && full.Headers&decode.HasGRH != 0 {
				want.Src, want.Dst = got.Src, got.Dst // LIDs until the GRH's GIDs are read
			}
			if p.Err != 0 || n < end {
				got.PayloadLen, got.Payload, want.PayloadLen, want.Payload = 0, nil, 0, nil
			} else {
				want.Payload = want.Payload[:len(got.Payload)]
			}
			if diff := cmp.Diff(want, got, cmpPacket); diff != "" {
				t.Fatalf("%s: prefix %d differs from the full frame (-full +prefix):\n%s", c.name, n, diff)
			}
		}
	}
}

// maskTo clears in p the fields of headers outside h.
func maskTo(p *decode.Packet, h decode.Header) {
	q := *p
	q.Headers = h
	*p = defined(&q)
	p.Headers = h
}
