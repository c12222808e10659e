//go:build pcap

package libpcap

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/netnstest"
)

func TestSettings(t *testing.T) {
	for _, cfg := range []*Config{nil, {}} {
		c, err := settings(cfg)
		want := Config{SnapLen: 262144, Filter: DefaultFilter, Timeout: 20 * time.Millisecond, BufferSize: 64 << 20}
		if err != nil || c != want {
			t.Errorf("settings(%v) = %+v, %v; want %+v", cfg, c, err, want)
		}
	}
	if c, err := settings(&Config{All: true}); err != nil || c.Filter != "" {
		t.Errorf("settings(All) = %+v, %v; want no filter", c, err)
	}
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{SnapLen: -1}, "SnapLen"},
		{Config{Timeout: 101 * time.Millisecond}, "Timeout"},
		{Config{Timeout: -time.Second}, "Timeout"},
		{Config{BufferSize: -1}, "BufferSize"},
		{Config{All: true, Filter: "udp"}, "Filter"},
	} {
		if _, err := settings(&c.cfg); err == nil || !strings.Contains(err.Error(), "libpcap: "+c.field+" ") {
			t.Errorf("settings(%+v) = %v, want an error about %s", c.cfg, err, c.field)
		}
	}
}

// frame builds an Ethernet frame: MAC addresses, then the 16-bit words of
// types (tags are a TPID followed by a TCI), then body.
func frame(body []byte, types ...uint16) []byte {
	b := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1}
	for _, v := range types {
		b = binary.BigEndian.AppendUint16(b, v)
	}
	return append(b, body...)
}

// ipHeader is an IPv4 (version 4) or IPv6 header with protocol proto.
func ipHeader(version int, proto byte) []byte {
	if version == 6 {
		h := make([]byte, 40)
		h[0], h[6], h[7] = 0x60, proto, 64
		return h
	}
	h := make([]byte, 20)
	h[0], h[2], h[3], h[8], h[9] = 0x45, 0, 64, 64, proto
	return h
}

// TestDefaultFilter compiles DefaultFilter with libpcap and runs it (in
// user space, where VLAN tags are in the data) over the live tests'
// traffic and hand-made frames.
func TestDefaultFilter(t *testing.T) {
	bpf, err := pcap.NewBPF(layers.LinkTypeEthernet, DefaultSnapLen, DefaultFilter)
	if err != nil {
		t.Fatalf("compile %q: %v", DefaultFilter, err)
	}
	match := func(f []byte) bool {
		return bpf.Matches(gopacket.CaptureInfo{CaptureLength: len(f), Length: len(f)}, f)
	}
	var p decode.Packet
	for i, f := range netnstest.Traffic(2000, 1000, 9) {
		roce := p.Decode(f, decode.LinkEthernet) == nil && p.IsRoCE()
		if match(f) != roce {
			t.Errorf("traffic frame %d: filter %v, RoCE %v", i, !roce, roce)
		}
	}
	pad := make([]byte, 46)
	for _, c := range []struct {
		name  string
		frame []byte
		keep  bool
	}{
		{"rocev1", frame(pad, 0x8915), true},
		{"vlan rocev1", frame(pad, 0x8100, 5, 0x8915), true},
		{"pfc", frame(pad, 0x8808), true},
		{"qinq pfc", frame(pad, 0x88a8, 5, 0x8100, 6, 0x8808), true},
		{"ipv4 gre", frame(append(ipHeader(4, 47), pad...), 0x0800), true},
		{"ipv6 gre", frame(append(ipHeader(6, 47), pad...), 0x86dd), true},
		{"vlan ipv6 gre", frame(append(ipHeader(6, 47), pad...), 0x8100, 7, 0x86dd), true},
		{"ipv4 tcp", frame(append(ipHeader(4, 6), pad...), 0x0800), false},
		{"arp", frame(pad, 0x0806), false},
		{"three tags rocev1", frame(pad, 0x88a8, 5, 0x8100, 6, 0x8100, 7, 0x8915), false},
	} {
		if got := match(c.frame); got != c.keep {
			t.Errorf("%s: filter %v, want %v", c.name, got, c.keep)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("rsnosuchif0", nil); err == nil || !strings.Contains(err.Error(), "rsnosuchif0") {
		t.Errorf("Open of a missing interface: %v", err)
	}
	if _, err := Open("lo", &Config{SnapLen: -5}); err == nil || !strings.Contains(err.Error(), "SnapLen") {
		t.Errorf("Open with a bad config: %v", err)
	}
	if os.Geteuid() != 0 {
		_, err := Open("lo", nil)
		if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "CAP_NET_RAW") {
			t.Errorf("Open without privileges: %v, want a permission error naming CAP_NET_RAW", err)
		}
	}
}
