package decode_test

import (
	"strings"
	"testing"

	"github.com/rocescope/rocescope/decode"
)

// benchFrames are the frames the benchmarks decode: the common RoCEv2
// cases, and the longer paths through VLAN/IPv6 and ERSPAN.
func benchFrames() []struct {
	name  string
	frame []byte
} {
	writeFirst := roceV4(0x02, cat(bth(0x06, false, true, 0, 0, 0xABCDEF, false, 1000),
		reth(0x7f0012345678, 0x1234, 4096), payload(1024), icrc))
	readMiddle := roceV4(0x02, cat(bth(0x0E, false, true, 0, 0, 0x41, false, 1001), payload(1024), icrc))
	ack := roceV4(0x02, cat(bth(0x11, false, true, 0, 0, 0x41, false, 1002), aeth(0x1f, 77), icrc))
	send := cat(bth(0x04, false, true, 0, 0, 0x321, true, 5), payload(256), icrc)
	v6 := cat(ether(0x8100), tag(3, 100, 0x86DD), ipv6(0x02, 17, 8+len(send)), udp(4791, len(send)), send)
	erspan := cat(ether(0x0800), ipv4(0, 47, 4+12+len(writeFirst)), be16(0), be16(0x22EB),
		be32(2<<28|0x3ff), be32(0), be32(0), writeFirst)
	return []struct {
		name  string
		frame []byte
	}{
		{"RoCEv2_IPv4_WriteFirst_RETH", writeFirst},
		{"RoCEv2_IPv4_ReadResponseMiddle", readMiddle},
		{"RoCEv2_IPv4_ACK", ack},
		{"RoCEv2_VLAN_IPv6_Send", v6},
		{"ERSPAN3_RoCEv2_WriteFirst", erspan},
	}
}

// sinkErr keeps the benchmarked results alive.
var sinkErr error

func BenchmarkDecode(b *testing.B) {
	for _, c := range benchFrames() {
		b.Run(c.name, func(b *testing.B) {
			var p decode.Packet
			if err := p.Decode(c.frame, decode.LinkEthernet); err != nil || !p.IsRoCE() {
				b.Fatalf("setup: %v, IsRoCE %v", err, p.IsRoCE())
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(c.frame)))
			for b.Loop() {
				sinkErr = p.Decode(c.frame, decode.LinkEthernet)
			}
		})
	}
}

// sinkOK keeps DecodeBrief's results alive.
var sinkOK bool

// BenchmarkDecodeBrief decodes the same frames as BenchmarkDecode with
// DecodeBrief, which takes the four common ones and turns down the
// mirrored one (which Decode then decodes in full).
func BenchmarkDecodeBrief(b *testing.B) {
	var d decode.Decoder
	for _, c := range benchFrames() {
		b.Run(c.name, func(b *testing.B) {
			var br decode.Brief
			want := !strings.HasPrefix(c.name, "ERSPAN")
			if got := d.DecodeBrief(&br, c.frame, decode.LinkEthernet); got != want {
				b.Fatalf("setup: DecodeBrief took the frame: %v, want %v", got, want)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(c.frame)))
			for b.Loop() {
				sinkOK = d.DecodeBrief(&br, c.frame, decode.LinkEthernet)
			}
		})
	}
}
