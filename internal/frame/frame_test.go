package frame_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/frame"
)

var (
	macA = [6]byte{0x02, 0, 0, 0, 0, 1}
	macB = [6]byte{0x02, 0, 0, 0, 0, 2}
)

// TestPutIPv4 checks an IPv4 header against one whose checksum is worked
// out by hand (the classic example: 45 00 00 73 ... checksum b8 61), and
// the options field.
func TestPutIPv4(t *testing.T) {
	b := make([]byte, 24)
	h := frame.IPv4{TTL: 64, Proto: 17, Src: &[4]byte{192, 168, 0, 1}, Dst: &[4]byte{192, 168, 0, 199}}
	if n := frame.PutIPv4(b, &h, 0x73-20); n != 20 {
		t.Fatalf("PutIPv4 wrote %d bytes", n)
	}
	want := []byte{0x45, 0, 0, 0x73, 0, 0, 0x40, 0, 0x40, 0x11, 0xb8, 0x61, 192, 168, 0, 1, 192, 168, 0, 199}
	if !bytes.Equal(b[:20], want) {
		t.Errorf("header % x, want % x", b[:20], want)
	}
	h.OptLen, h.ID, h.TOS = 4, 0x1234, 0x6a
	if n := frame.PutIPv4(b, &h, 8); n != 24 {
		t.Fatalf("PutIPv4 with options wrote %d bytes", n)
	}
	if b[0] != 0x46 || !bytes.Equal(b[20:24], []byte{1, 1, 1, 0}) || binary.BigEndian.Uint16(b[2:]) != 32 {
		t.Errorf("header with options % x", b[:24])
	}
	if frame.Checksum(b[:24], 0) != 0 {
		t.Errorf("checksum over the header with options is %#x, want 0", frame.Checksum(b[:24], 0))
	}
}

// TestRoCEv2 builds RoCEv2 frames with every header writer and checks
// what the decoder, written apart from them, reads back.
func TestRoCEv2(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		const payload = 6 // pad 2
		b := make([]byte, 256)
		tags := []frame.Tag{{TPID: frame.EtherQinQ, TCI: 200}, {TPID: frame.EtherVLAN, TCI: 3<<13 | 300}}
		transport := frame.BTHLen + frame.RETHLen + frame.ImmLen + payload + 2 + frame.ICRCLen
		var off, ipOff int
		if v6 {
			ipOff = frame.PutEthernet(b, &macB, &macA, frame.EtherIPv6, tags...)
			ip := frame.IPv6{TC: 26<<2 | 3, Flow: 0x12345, Next: 17, HopLimit: 63, Src: &[16]byte{0: 0xfd, 15: 1}, Dst: &[16]byte{0: 0xfd, 15: 2}}
			off = ipOff + frame.PutIPv6(b[ipOff:], &ip, frame.UDPLen+transport)
		} else {
			ipOff = frame.PutEthernet(b, &macB, &macA, frame.EtherIPv4, tags...)
			ip := frame.IPv4{TOS: 26<<2 | 3, ID: 7, TTL: 63, Proto: 17, Src: &[4]byte{10, 0, 0, 1}, Dst: &[4]byte{10, 0, 0, 2}, OptLen: 8}
			off = ipOff + frame.PutIPv4(b[ipOff:], &ip, frame.UDPLen+transport)
		}
		udpOff := off
		off += frame.PutUDP(b[off:], 50000, decode.DefaultRoCEPort, transport)
		off += frame.PutBTH(b[off:], &frame.BTH{Op: 0x0b, SE: true, Mig: true, Pad: 2, FECN: true, BECN: true,
			DQP: 0x1abcdef, AckReq: true, PSN: 0x1fedcba})
		off += frame.PutRETH(b[off:], 0x7f00_0000_1000, 0xcafe, payload)
		off += frame.PutImm(b[off:], 0xdeadbeef)
		copy(b[off:], "abcdef")
		off += payload + 2
		binary.LittleEndian.PutUint32(b[off:], frame.ICRC(b, ipOff, udpOff, off, v6))
		off += frame.ICRCLen

		var p decode.Packet
		if p.Decode(b[:off], decode.LinkEthernet); p.Err != 0 || p.Kind != decode.KindRoCEv2 {
			t.Fatalf("v6 %v: decode error %v, kind %v", v6, p.Err, p.Kind)
		}
		if p.SrcMAC != macA || p.DstMAC != macB || p.NumVLAN != 2 || p.VLANs != [2]uint16{200, 300} || p.PCP != 0 {
			t.Errorf("v6 %v: Ethernet %+v %+v %d %v", v6, p.SrcMAC, p.DstMAC, p.NumVLAN, p.VLANs)
		}
		if p.DSCP != 26 || p.ECN != 3 || p.TTL != 63 || p.SrcPort != 50000 || int(p.UDPLen) != frame.UDPLen+transport {
			t.Errorf("v6 %v: DSCP %d ECN %d TTL %d port %d UDP length %d", v6, p.DSCP, p.ECN, p.TTL, p.SrcPort, p.UDPLen)
		}
		wantBTH := decode.BTH{Opcode: 0x0b, SE: true, M: true, PadCnt: 2, PKey: 0xffff, FECN: true, BECN: true,
			DestQP: 0xabcdef, AckReq: true, PSN: 0xfedcba}
		if p.BTH != wantBTH {
			t.Errorf("v6 %v: BTH %+v, want %+v", v6, p.BTH, wantBTH)
		}
		if p.RETH != (decode.RETH{VA: 0x7f00_0000_1000, RKey: 0xcafe, DMALen: payload}) || p.ImmDt != 0xdeadbeef {
			t.Errorf("v6 %v: RETH %+v, ImmDt %#x", v6, p.RETH, p.ImmDt)
		}
		if p.PayloadLen != payload || string(p.Payload) != "abcdef" {
			t.Errorf("v6 %v: payload %q (%d)", v6, p.Payload, p.PayloadLen)
		}
		// The ICRC leaves the frame as it was and ignores the variant fields.
		c := bytes.Clone(b[:off])
		c[udpOff+frame.UDPLen+4] = 0 // FECN, BECN
		if frame.ICRC(c, ipOff, udpOff, off-4, v6) != binary.LittleEndian.Uint32(b[off-4:]) || !bytes.Equal(c[udpOff+frame.UDPLen+5:], b[udpOff+frame.UDPLen+5:off]) {
			t.Errorf("v6 %v: ICRC depends on FECN/BECN or changed the frame", v6)
		}
	}
}

// TestAETH checks an ACK's extended header as the decoder reads it.
func TestAETH(t *testing.T) {
	b := make([]byte, frame.MinLen+32)
	off := frame.PutEthernet(b, &macB, &macA, frame.EtherIPv4)
	transport := frame.BTHLen + frame.AETHLen + frame.ICRCLen
	off += frame.PutIPv4(b[off:], &frame.IPv4{TTL: 64, Proto: 17, Src: &[4]byte{10, 0, 0, 2}, Dst: &[4]byte{10, 0, 0, 1}}, frame.UDPLen+transport)
	off += frame.PutUDP(b[off:], 50000, decode.DefaultRoCEPort, transport)
	off += frame.PutBTH(b[off:], &frame.BTH{Op: 0x11, DQP: 0x100, PSN: 12})
	off += frame.PutAETH(b[off:], 0x60, 0x1000003)
	n := frame.Pad(b, off+frame.ICRCLen)
	if n != 62 { // 14 + 20 + 8 + 12 + 4 + 4: no padding
		t.Errorf("padded to %d bytes", n)
	}
	var p decode.Packet
	if p.Decode(b[:n], decode.LinkEthernet); p.Err != 0 || p.AETH != (decode.AETH{Syndrome: 0x60, MSN: 3}) || p.BTH.PSN != 12 {
		t.Errorf("decode error %v, AETH %+v, PSN %d", p.Err, p.AETH, p.BTH.PSN)
	}
}

// TestPFCAndARP checks the two link-level frames against bytes written out
// by hand.
func TestPFCAndARP(t *testing.T) {
	b := make([]byte, frame.MinLen)
	n := frame.Pad(b, frame.PutPFC(b, &macA, 0x28, &[8]uint16{3: 0xffff, 5: 7}))
	want := []byte{0x01, 0x80, 0xc2, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0x88, 0x08, 0x01, 0x01, 0, 0x28,
		0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 7, 0, 0, 0, 0}
	if n != frame.MinLen || !bytes.Equal(b[:frame.PFCLen], want) {
		t.Errorf("PFC % x (%d bytes), want % x", b[:frame.PFCLen], n, want)
	}
	var p decode.Packet
	if p.Decode(b[:n], decode.LinkEthernet); p.Kind != decode.KindPFC || p.Pause.Enable != 0x28 || p.Pause.Quanta[3] != 0xffff {
		t.Errorf("PFC decodes as %v %+v", p.Kind, p.Pause)
	}

	b = make([]byte, frame.MinLen)
	off := frame.PutEthernet(b, &frame.Broadcast, &macA, frame.EtherARP)
	off += frame.PutARPRequest(b[off:], &macA, [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2})
	want = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06,
		0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2}
	if !bytes.Equal(b[:off], want) {
		t.Errorf("ARP % x, want % x", b[:off], want)
	}
}
