package decode_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rocescope/rocescope/decode"
)

// fuzzLinks are the link types FuzzDecode reaches, by the low bits of its
// selector argument.
var fuzzLinks = []decode.LinkType{
	decode.LinkEthernet, decode.LinkRaw, decode.LinkLinuxSLL, decode.LinkERF,
	decode.LinkIPv4, decode.LinkIPv6, decode.LinkInfiniBand, decode.LinkLinuxSLL2,
	decode.LinkNull,
}

// FuzzDecode decodes arbitrary bytes as every supported link type and
// checks the decoder's contract: a known error code or none; a reused
// Packet decodes exactly as a fresh one; a transport header comes with
// every extension header its opcode implies; the payload length follows
// from the enclosing length field; Payload aliases the frame; the JSON is
// valid and has the members the headers call for; a fragment has an IP
// header and nothing decoded after it; DecodeBrief, which takes a frame
// only when Decode decodes it as RoCE, gives the Brief that Packet.Brief
// gives after Decode.
func FuzzDecode(f *testing.F) {
	for _, c := range decodeCases(f) {
		f.Add(c.frame, uint8(slices.Index(fuzzLinks, c.link)))
	}
	for _, path := range testdataFiles(f) {
		link, recs, err := readPcap(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, r := range recs {
			f.Add(r.data, uint8(slices.Index(fuzzLinks, link)))
		}
	}
	buf := make([]byte, 0, 4096)
	f.Fuzz(func(t *testing.T, frame []byte, sel uint8) {
		link := fuzzLinks[int(sel)%len(fuzzLinks)]
		var p decode.Packet
		err := p.Decode(frame, link)
		var e decode.Error
		switch {
		case err == nil && p.Err != 0:
			t.Fatalf("nil error but Err %v", p.Err)
		case err != nil && (!errors.As(err, &e) || e == 0 || e > decode.ErrPad || e != p.Err):
			t.Fatalf("error %v (Err %v) is not a known decode.Error", err, p.Err)
		}

		q := dirty()
		err2 := q.Decode(frame, link)
		if err2 != err {
			t.Fatalf("reused Packet: error %v, fresh Packet %v", err2, err)
		}
		if diff := cmp.Diff(defined(&p), defined(&q), cmpPacket); diff != "" {
			t.Fatalf("reused Packet decodes differently (-fresh +reused):\n%s", diff)
		}

		if len(p.Payload) > 0 {
			off := cap(frame) - cap(p.Payload)
			if off < 0 || off+len(p.Payload) > len(frame) || &frame[off] != &p.Payload[0] {
				t.Fatal("Payload does not alias the frame")
			}
		}
		if p.Headers&decode.HasBTH != 0 && err == nil {
			checkTransport(t, &p)
		}
		if p.IsRoCE() != (p.Headers&decode.HasBTH != 0 && (p.Kind == decode.KindRoCEv2 || p.Kind == decode.KindRoCEv1 || p.Kind == decode.KindIB)) ||
			p.Headers&decode.HasPFC != 0 && p.Kind != decode.KindPFC || p.Headers&decode.HasPause != 0 && p.Kind != decode.KindPause {
			t.Fatalf("kind %v does not match headers %b", p.Kind, p.Headers)
		}
		if p.Headers&decode.HasFragment != 0 && (p.Headers&(decode.HasIPv4|decode.HasIPv6) == 0 ||
			p.Headers&(decode.HasUDP|decode.HasBTH) != 0 || p.Kind != decode.KindOther || err != nil) {
			t.Fatalf("fragment with headers %b, kind %v, error %v: want an IP header and nothing after it", p.Headers, p.Kind, err)
		}
		checkJSON(t, "fuzz", &p, buf)
		var d decode.Decoder
		checkBrief(t, &d, frame, link)
	})
}

// checkTransport checks a decoded transport packet against the spec table:
// the implied extension headers, and the payload length computed from the
// enclosing header's length field.
func checkTransport(t *testing.T, p *decode.Packet) {
	t.Helper()
	s, ok := specOf(p.BTH.Opcode)
	if !ok {
		t.Fatalf("opcode %#02x decoded without error but the spec does not define it", uint8(p.BTH.Opcode))
	}
	h, hl := s.headers()
	const ethBits = decode.HasRDETH | decode.HasDETH | decode.HasXRCETH | decode.HasRETH | decode.HasAtomicETH |
		decode.HasAETH | decode.HasAtomicAckETH | decode.HasImmDt | decode.HasIETH
	if p.Headers&ethBits != h {
		t.Fatalf("%v: extension headers %b, the spec says %b", p.BTH.Opcode, p.Headers&ethBits, h)
	}
	var wire int
	switch p.Kind {
	case decode.KindRoCEv2:
		wire = int(p.UDPLen) - 8
	case decode.KindRoCEv1:
		wire = int(p.GRH.PayLen)
	case decode.KindIB:
		wire = int(p.LRH.PktLen)*4 - 8
		if p.Headers&decode.HasGRH != 0 {
			wire -= 40
		}
	default:
		t.Fatalf("a BTH in a %v frame", p.Kind)
	}
	if want := wire - hl - int(p.BTH.PadCnt) - 4; int(p.PayloadLen) != want || len(p.Payload) > want {
		t.Fatalf("%v: payload length %d (%d captured), want %d", p.BTH.Opcode, p.PayloadLen, len(p.Payload), want)
	}
	if p.Headers&decode.HasICRC != 0 && len(p.Payload) != int(p.PayloadLen) {
		t.Fatalf("ICRC present but only %d of %d payload bytes", len(p.Payload), p.PayloadLen)
	}
}
