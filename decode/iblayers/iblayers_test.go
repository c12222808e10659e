package iblayers_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/decode/iblayers"
)

func unhex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// A RoCEv2 NAK and a RoCEv1 SEND Only, with their fields computed by hand.
const (
	rocev2NAK = `02000000000b 02000000000a 0800
		45 02 0030 1234 4000 40 11 0000 0a000001 0a000002
		c000 12b7 001c 0000
		11 40 ffff 00000041 000003e8
		60 00004d
		a1b2c3d4`
	rocev1Send = `02000000000b 02000000000a 8915
		60300000 0018 1b 40
		fe800000000000000000000000000001
		fe800000000000000000000000000002
		04 00 ffff 00000010 80000005
		0102030405060708
		11223344`
)

func TestNewPacketRoCEv2(t *testing.T) {
	pkt := gopacket.NewPacket(unhex(t, rocev2NAK), layers.LayerTypeEthernet, gopacket.Default)
	if err := pkt.ErrorLayer(); err != nil {
		t.Fatal(err.Error())
	}
	l, ok := pkt.Layer(iblayers.LayerTypeBTH).(*iblayers.BTH)
	if !ok {
		t.Fatalf("no BTH layer in %v", pkt)
	}
	want := decode.BTH{Opcode: 0x11, M: true, PKey: 0xffff, DestQP: 0x41, PSN: 1000}
	if diff := cmp.Diff(want, l.Packet.BTH); diff != "" {
		t.Errorf("BTH (-want +got):\n%s", diff)
	}
	if l.Packet.Headers != decode.HasBTH|decode.HasAETH|decode.HasICRC || l.Packet.AETH != (decode.AETH{Syndrome: 0x60, MSN: 77}) ||
		l.Packet.ICRC != 0xa1b2c3d4 || len(l.LayerContents()) != 16 || len(l.LayerPayload()) != 0 {
		t.Errorf("headers %b AETH %+v ICRC %#x contents %d payload %d", l.Packet.Headers, l.Packet.AETH, l.Packet.ICRC,
			len(l.LayerContents()), len(l.LayerPayload()))
	}
}

func TestDecodingLayerParserRoCEv1(t *testing.T) {
	var (
		eth  layers.Ethernet
		grh  iblayers.GRH
		bth  iblayers.BTH
		data gopacket.Payload
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &grh, &bth, &data)
	var decoded []gopacket.LayerType
	if err := parser.DecodeLayers(unhex(t, rocev1Send), &decoded); err != nil {
		t.Fatal(err)
	}
	if want := []gopacket.LayerType{layers.LayerTypeEthernet, iblayers.LayerTypeGRH, iblayers.LayerTypeBTH, gopacket.LayerTypePayload}; !cmp.Equal(want, decoded) {
		t.Fatalf("layers %v, want %v", decoded, want)
	}
	gid := [16]byte{0xfe, 0x80, 15: 1}
	if grh.TClass != 3 || grh.PayLen != 24 || grh.SGID != gid || bth.Packet.BTH.DestQP != 0x10 || !bth.Packet.BTH.AckReq ||
		bth.Packet.PayloadLen != 8 || string(data) != "\x01\x02\x03\x04\x05\x06\x07\x08" {
		t.Errorf("GRH %+v, BTH %+v, payload %x", grh.GRH, bth.Packet.BTH, []byte(data))
	}
}

func TestBTHErrors(t *testing.T) {
	var b iblayers.BTH
	var df gopacket.DecodeFeedback = gopacket.NilDecodeFeedback
	if err := b.DecodeFromBytes(unhex(t, "11 40 ffff 00000041"), df); !errors.Is(err, decode.ErrUDP) {
		t.Errorf("8 bytes: %v, want ErrUDP", err)
	}
	if err := b.DecodeFromBytes(unhex(t, "15 40 ffff 00000041 000003e8 00000000"), df); !errors.Is(err, decode.ErrOpcode) {
		t.Errorf("reserved opcode: %v, want ErrOpcode", err)
	}
	var g iblayers.GRH
	if err := g.DecodeFromBytes(make([]byte, 39), df); !errors.Is(err, decode.ErrTruncated) {
		t.Errorf("39-byte GRH: %v, want ErrTruncated", err)
	}
}
