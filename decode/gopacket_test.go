package decode_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/decode/iblayers"
)

// gopacketParser is a DecodingLayerParser for Ethernet frames with the
// iblayers layers.
type gopacketParser struct {
	eth     layers.Ethernet
	dot1q   layers.Dot1Q
	ip4     layers.IPv4
	ip6     layers.IPv6
	udp     layers.UDP
	grh     iblayers.GRH
	bth     iblayers.BTH
	payload gopacket.Payload
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

func newGopacketParser() *gopacketParser {
	g := &gopacketParser{}
	g.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		&g.eth, &g.dot1q, &g.ip4, &g.ip6, &g.udp, &g.grh, &g.bth, &g.payload)
	return g
}

// TestGopacketLayersAgree decodes every Ethernet frame of the corpus and of
// the synthetic captures with gopacket's DecodingLayerParser and the
// iblayers layers, and with decode, and requires the same BTH, extension
// headers and ICRC.
func TestGopacketLayersAgree(t *testing.T) {
	g := newGopacketParser()
	frames, compared, skipped := 0, 0, 0
	for _, path := range append(testdataFiles(t), corpusFilesIfAny(t)...) {
		link, recs, err := readPcap(path)
		if err != nil {
			t.Fatal(err)
		}
		if link != decode.LinkEthernet {
			continue
		}
		for i, r := range recs {
			frames++
			var p decode.Packet
			derr := p.Decode(r.data, decode.LinkEthernet)
			gerr := g.parser.DecodeLayers(r.data, &g.decoded)
			hasBTH := slices.Contains(g.decoded, iblayers.LayerTypeBTH)
			var unsupported gopacket.UnsupportedLayerType
			if p.Headers&decode.HasMirror != 0 || derr != nil || p.Headers&decode.HasBTH != 0 && !hasBTH &&
				(errors.As(gerr, &unsupported) || r.data[12] == 0x91) {
				// gopacket has no layer for 0x9100 tags, IPv6 extension
				// headers in a DecodingLayerParser or ERSPAN III, and fails
				// differently on malformed frames.
				skipped++
				continue
			}
			if hasBTH != (p.Headers&decode.HasBTH != 0) {
				t.Errorf("%s frame %d: gopacket BTH layer %v, decode BTH %v", path, i+1, hasBTH, p.Headers&decode.HasBTH != 0)
				continue
			}
			if !hasBTH {
				continue
			}
			compared++
			// The layer has only the transport fields, and, for a frame cut
			// by the snap length, takes the cut length as the packet's.
			keep := decode.HasBTH | decode.HasRDETH | decode.HasDETH | decode.HasXRCETH | decode.HasRETH |
				decode.HasAtomicETH | decode.HasAETH | decode.HasAtomicAckETH | decode.HasImmDt | decode.HasIETH | decode.HasCM
			if len(p.Payload) == int(p.PayloadLen) {
				keep |= decode.HasICRC
			}
			want, got := defined(&p), g.bth.Packet
			maskTo(&want, want.Headers&keep)
			maskTo(&got, got.Headers&keep)
			want.Kind, want.PayloadLen, want.Payload = got.Kind, got.PayloadLen, got.Payload
			if diff := cmp.Diff(want, got, cmpPacket); diff != "" {
				t.Errorf("%s frame %d: (-decode +gopacket):\n%s", path, i+1, diff)
			}
		}
	}
	if compared == 0 {
		t.Fatal("no frame compared")
	}
	t.Logf("%d Ethernet frames, %d with a BTH compared, %d that gopacket cannot follow or that are malformed skipped", frames, compared, skipped)
}

func BenchmarkGopacketDecodingLayerParser(b *testing.B) {
	for _, c := range benchFrames() {
		b.Run(c.name, func(b *testing.B) {
			g := newGopacketParser()
			b.ReportAllocs()
			b.SetBytes(int64(len(c.frame)))
			for b.Loop() {
				sinkErr = g.parser.DecodeLayers(c.frame, &g.decoded)
			}
		})
	}
}
