package netnstest

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/rocescope/rocescope/decode"
)

// TestTrafficDeterministic checks that a seed fixes the traffic and that
// different seeds give different traffic.
func TestTrafficDeterministic(t *testing.T) {
	a, b, c := Traffic(50, 20, 1), Traffic(50, 20, 1), Traffic(50, 20, 2)
	if len(a) != 70 || len(c) != 70 {
		t.Fatalf("len = %d, %d, want 70", len(a), len(c))
	}
	same := true
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("frame %d differs between two calls with seed 1", i)
		}
		same = same && bytes.Equal(a[i], c[i])
	}
	if same {
		t.Error("seeds 1 and 2 gave the same traffic")
	}
}

// TestTrafficFrames decodes every frame with gopacket, checks lengths and
// IPv4 checksums by summing the header independently, and checks that
// rocescope's decoder classifies exactly the RoCE frames as RoCE, all of
// them RDMA WRITE Only with a RETH.
func TestTrafficFrames(t *testing.T) {
	const nRoCE, nOther = 3000, 1000
	frames := Traffic(nRoCE, nOther, 7)
	seen := make(map[string]int)
	var roce, tagged, qinq, v6, opts, arp int
	qps := make(map[uint32]bool)
	var p decode.Packet
	for i, f := range frames {
		if j, dup := seen[string(f)]; dup {
			t.Fatalf("frame %d equals frame %d", i, j)
		}
		seen[string(f)] = i
		if len(f) < 60 {
			t.Errorf("frame %d: %d bytes, want >= 60", i, len(f))
		}
		pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("frame %d: gopacket: %v", i, el.Error())
		}
		var udpDst layers.UDPPort
		if l, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
			hdr := l.Contents
			var sum uint32
			for k := 0; k < len(hdr); k += 2 {
				sum += uint32(binary.BigEndian.Uint16(hdr[k:]))
			}
			for sum > 0xffff {
				sum = sum&0xffff + sum>>16
			}
			if sum != 0xffff {
				t.Errorf("frame %d: IPv4 header sums to %#x, want 0xffff", i, sum)
			}
			if int(l.Length) != len(l.Contents)+len(l.Payload) {
				t.Errorf("frame %d: IPv4 total length %d, header+payload %d", i, l.Length, len(l.Contents)+len(l.Payload))
			}
			if l.IHL > 5 {
				opts++
			}
		}
		if l, ok := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
			v6++
			if int(l.Length) != len(l.Payload) {
				t.Errorf("frame %d: IPv6 payload length %d, have %d", i, l.Length, len(l.Payload))
			}
		}
		if l, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP); ok {
			udpDst = l.DstPort
			if int(l.Length) != 8+len(l.Payload) {
				t.Errorf("frame %d: UDP length %d, have %d", i, l.Length, 8+len(l.Payload))
			}
		}
		if pkt.Layer(layers.LayerTypeARP) != nil {
			arp++
		}
		if pkt.Layer(layers.LayerTypeDot1Q) != nil {
			tagged++
			if eth := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); eth.EthernetType == layers.EthernetTypeQinQ {
				qinq++
			}
		}

		if err := p.Decode(f, decode.LinkEthernet); err != nil {
			t.Fatalf("frame %d: decode: %v", i, err)
		}
		if p.IsRoCE() != (udpDst == RoCEPort) {
			t.Errorf("frame %d: IsRoCE = %v, UDP destination port %d", i, p.IsRoCE(), udpDst)
		}
		if p.IsRoCE() {
			roce++
			qps[p.BTH.DestQP] = true
			if p.BTH.Opcode != 0x0a || p.Headers&decode.HasRETH == 0 {
				t.Errorf("frame %d: opcode %#x headers %#x, want WRITE Only with RETH", i, p.BTH.Opcode, p.Headers)
			}
		}
	}
	if roce != nRoCE {
		t.Errorf("RoCE frames = %d, want %d", roce, nRoCE)
	}
	if len(qps) != TrafficQPs {
		t.Errorf("distinct QPs = %d, want %d", len(qps), TrafficQPs)
	}
	for name, n := range map[string]int{"VLAN-tagged": tagged, "QinQ": qinq, "IPv6": v6, "IPv4 with options": opts, "ARP": arp} {
		if n == 0 {
			t.Errorf("no %s frames among %d", name, len(frames))
		}
	}
}
