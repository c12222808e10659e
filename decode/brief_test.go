package decode_test

import (
	"testing"

	"github.com/rocescope/rocescope/decode"
)

// definedBrief returns b with the fields its Headers do not define zeroed.
func definedBrief(b decode.Brief) decode.Brief {
	if b.Headers&decode.HasRETH == 0 {
		b.DMALen = 0
	}
	if b.Headers&decode.HasDETH == 0 {
		b.SrcQP = 0
	}
	if b.Headers&decode.HasAETH == 0 {
		b.Syndrome = 0
	}
	return b
}

// checkBrief decodes frame with DecodeBrief, into a Brief holding the
// leftovers of another frame, and reports whether it took the frame. When
// it did, Decode must decode the frame without error as RoCE, and
// Packet.Brief must give the same Brief.
func checkBrief(t *testing.T, d *decode.Decoder, frame []byte, link decode.LinkType) bool {
	t.Helper()
	got := decode.Brief{DMALen: 7, SrcQP: 7, Syndrome: 7, SrcPort: 7, CE: true, FECN: true, BECN: true, AckReq: true}
	if !d.DecodeBrief(&got, frame, link) {
		return false
	}
	var p decode.Packet
	if err := d.Decode(&p, frame, link); err != nil || !p.IsRoCE() {
		t.Fatalf("DecodeBrief took a frame that Decode does not decode as RoCE (error %v, kind %v)", err, p.Kind)
	}
	var want decode.Brief
	p.Brief(&want)
	if definedBrief(got) != definedBrief(want) {
		t.Fatalf("DecodeBrief gives\n%+v\nPacket.Brief after Decode\n%+v", definedBrief(got), definedBrief(want))
	}
	return true
}

// TestDecodeBriefFields checks DecodeBrief's fields against values written
// by hand: a UD SEND behind a VLAN tag and IPv6 with ECN-CE, a READ request
// over IPv4, an RNR NAK.
func TestDecodeBriefFields(t *testing.T) {
	v4a, v4b := decode.AddrFrom4([4]byte{10, 0, 0, 1}), decode.AddrFrom4([4]byte{10, 0, 0, 2})
	send := cat(bth(0x64, false, false, 2, 0x40, 0x321, true, 5), deth(0x11111111, 0xabcdef), payload(256), icrc)
	read := cat(bth(0x0c, false, false, 0, 0x80, 0x42, false, 0xfffffe), reth(1<<40, 7, 65536), icrc)
	rnr := cat(bth(0x11, false, false, 0, 0, 0x43, false, 9), aeth(0x61, 3), icrc)
	for _, c := range []struct {
		name  string
		frame []byte
		want  decode.Brief
	}{
		{"UD SEND Only, VLAN, IPv6, ECN-CE, BECN",
			cat(ether(0x8100), tag(3, 100, 0x86DD), ipv6(0x03, 17, 8+len(send)), udp(4791, len(send)), send),
			decode.Brief{Src: decode.AddrFrom16([16]byte{0xfd, 15: 1}), Dst: decode.AddrFrom16([16]byte{0xfd, 15: 2}),
				DestQP: 0x321, PSN: 5, PayloadLen: 256 - 2, SrcQP: 0xabcdef, Headers: decode.HasUDP | decode.HasDETH,
				SrcPort: 49152, Opcode: 0x64, BECN: true, AckReq: true, CE: true}},
		{"READ Request, IPv4 ECT(1), FECN", roceV4(0x01, read),
			decode.Brief{Src: v4a, Dst: v4b, DestQP: 0x42, PSN: 0xfffffe, DMALen: 65536, Headers: decode.HasUDP | decode.HasRETH,
				SrcPort: 49152, Opcode: 0x0c, FECN: true}},
		{"RNR NAK", roceV4(0, rnr),
			decode.Brief{Src: v4a, Dst: v4b, DestQP: 0x43, PSN: 9, Syndrome: 0x61, Headers: decode.HasUDP | decode.HasAETH,
				SrcPort: 49152, Opcode: 0x11}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d decode.Decoder
			if !checkBrief(t, &d, c.frame, decode.LinkEthernet) {
				t.Fatal("DecodeBrief did not take the frame")
			}
			var got decode.Brief
			d.DecodeBrief(&got, c.frame, decode.LinkEthernet)
			if definedBrief(got) != c.want {
				t.Fatalf("got\n%+v\nwant\n%+v", definedBrief(got), c.want)
			}
		})
	}
}

// TestDecodeBrief holds DecodeBrief to Decode on the hand-made frames,
// which it must take exactly when they are well-formed RoCEv2 frames of
// the common shape (plain or one 802.1Q tag, IPv4 without options or IPv6
// without extension headers, not a CM MAD), and on the synthetic and
// shared captures.
func TestDecodeBrief(t *testing.T) {
	common := map[string]bool{
		"RoCEv2 NAK, bytes by hand":      true,
		"RoCEv2 WRITE First":             true,
		"CNP with ECN-CE and BECN":       true,
		"payload cut by the snap length": true,
		"RoCE port 1234":                 true,
		"IPv4 DF alone is no fragment":   true,
	}
	seen := map[string]bool{}
	for _, c := range decodeCases(t) {
		t.Run(c.name, func(t *testing.T) {
			d := decode.Decoder{RoCEPort: c.port}
			if took := checkBrief(t, &d, c.frame, c.link); took != common[c.name] {
				t.Fatalf("DecodeBrief took the frame: %v, want %v", took, common[c.name])
			}
			seen[c.name] = true
		})
	}
	for name := range common {
		if !seen[name] {
			t.Errorf("no case %q", name)
		}
	}

	synthetic := testdataFiles(t)
	var d decode.Decoder
	tookSynthetic := 0
	for i, path := range append(synthetic, corpusFilesIfAny(t)...) {
		link, recs, err := readPcap(path)
		if err != nil {
			t.Fatal(err)
		}
		took := 0
		for _, r := range recs {
			if checkBrief(t, &d, r.data, link) {
				took++
			}
		}
		if i < len(synthetic) {
			tookSynthetic += took
		}
		t.Logf("%s: DecodeBrief took %d of %d frames", path, took, len(recs))
	}
	if tookSynthetic == 0 {
		t.Error("DecodeBrief took none of the synthetic captures' frames")
	}
}
