package afxdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Frame pieces, written byte by byte.

// hostMAC is the MAC address of the interface in the tests of frames
// addressed to the host; macs is addressed to another host.
var hostMAC = net.HardwareAddr{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x88}

var macs = []byte{
	0x02, 0, 0, 0, 0, 0x02, // destination
	0x02, 0, 0, 0, 0, 0x01, // source
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// tag is a VLAN tag with TPID tpid and VLAN ID 100.
func tag(tpid uint16) []byte { return cat(be16(tpid), []byte{0x00, 0x64}) }

// ipv4Hdr is an IPv4 header with IHL ihl (options zero), protocol proto and
// fragment field frag; the checksum is left zero (XDP does not check it).
func ipv4Hdr(ihl int, proto byte, frag uint16) []byte {
	h := []byte{
		byte(0x40 | ihl), 0x02, 0x00, 0x40, // version, IHL, ECN ECT(0), total length 64
		0x12, 0x34, byte(frag >> 8), byte(frag), // ID, flags and fragment offset
		64, proto, 0, 0, // TTL, protocol, checksum
		10, 0, 0, 1, 10, 0, 0, 2,
	}
	if ihl > 5 {
		h = append(h, make([]byte, 4*(ihl-5))...)
	}
	return h
}

func ipv6Hdr(next byte) []byte {
	h := []byte{0x60, 0, 0, 0, 0x00, 0x18, next, 64}
	h = append(h, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)
	return append(h, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2)
}

func udpHdr(sport, dport uint16) []byte {
	return cat(be16(sport), be16(dport), be16(8+12), []byte{0, 0})
}

// extHdr is an IPv6 hop-by-hop, routing or destination options header
// announcing next, of (units+1)*8 bytes.
func extHdr(next byte, units byte) []byte {
	h := make([]byte, (int(units)+1)*8)
	h[0], h[1] = next, units
	return h
}

// fragHdr is an IPv6 fragment header announcing next with the given
// fragment offset (in 8-byte units) and more-fragments flag.
func fragHdr(next byte, offset uint16, more bool) []byte {
	f := offset << 3
	if more {
		f |= 1
	}
	return cat([]byte{next, 0}, be16(f), []byte{0, 0, 0x12, 0x34})
}

// ipv6Ext is an IPv6 RoCEv2 frame (UDP to port) behind the extension
// headers exts, the first of which has type first.
func ipv6Ext(first byte, port uint16, exts ...[]byte) []byte {
	return cat(macs, be16(0x86dd), ipv6Hdr(first), cat(exts...), udpHdr(1, port), bth)
}

// bth is a BTH of an RC SEND Only to QP 0x000012, PSN 1.
var bth = []byte{0x04, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00, 0x01}

var (
	roceV4 = cat(macs, be16(0x0800), ipv4Hdr(5, 17, 0x4000), udpHdr(49152, 4791), bth)
	roceV6 = cat(macs, be16(0x86dd), ipv6Hdr(17), udpHdr(49152, 4791), bth)
	// Options whose bytes read as UDP port 4791 where a 20-byte header
	// would end; the real UDP header behind them goes to port 53.
	optionsLikeRoCE = func() []byte {
		f := cat(macs, be16(0x0800), ipv4Hdr(6, 17, 0), udpHdr(1024, 53), bth)
		copy(f[14+20:], []byte{0x00, 0x00, 0x12, 0xb7})
		return f
	}()
	// A later fragment: its first payload bytes look like UDP to 4791.
	laterFragment = cat(macs, be16(0x0800), ipv4Hdr(5, 17, 0x00b9), udpHdr(49152, 4791), bth)
	arp           = cat(
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x01}, be16(0x0806),
		[]byte{0, 1, 8, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 0x01, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2},
	)
	pfc = cat([]byte{0x01, 0x80, 0xc2, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x01}, be16(0x8808),
		[]byte{0x01, 0x01, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
)

// classifyCases are frames and the counter the program must bump for them
// when no socket is bound: counterNoSocket for frames it redirects (the map
// lookup misses and XDP_PASS is the fallback), counterPassed for the rest.
var classifyCases = []struct {
	name  string
	frame []byte
	want  int
}{
	{"RoCEv2 IPv4", roceV4, counterNoSocket},
	{"RoCEv2 IPv4 with options", cat(macs, be16(0x0800), ipv4Hdr(7, 17, 0), udpHdr(1, 4791), bth), counterNoSocket},
	{"RoCEv2 IPv6", roceV6, counterNoSocket},
	{"RoCEv2 IPv4 802.1Q", cat(macs, tag(0x8100), be16(0x0800), ipv4Hdr(5, 17, 0), udpHdr(1, 4791), bth), counterNoSocket},
	{"RoCEv2 IPv6 802.1Q", cat(macs, tag(0x8100), be16(0x86dd), ipv6Hdr(17), udpHdr(1, 4791), bth), counterNoSocket},
	{"RoCEv2 IPv4 QinQ", cat(macs, tag(0x88a8), tag(0x8100), be16(0x0800), ipv4Hdr(5, 17, 0), udpHdr(1, 4791), bth), counterNoSocket},
	{"RoCEv2 IPv4 first fragment", cat(macs, be16(0x0800), ipv4Hdr(5, 17, 0x2000), udpHdr(1, 4791), bth), counterNoSocket},
	{"RoCEv1", cat(macs, be16(0x8915), make([]byte, 40), bth), counterNoSocket},
	{"RoCEv1 802.1Q", cat(macs, tag(0x8100), be16(0x8915), make([]byte, 40), bth), counterNoSocket},
	{"GRE over IPv4", cat(macs, be16(0x0800), ipv4Hdr(5, 47, 0), []byte{0x10, 0x00, 0x88, 0xbe}, roceV4), counterNoSocket},
	{"GRE over IPv6", cat(macs, be16(0x86dd), ipv6Hdr(47), []byte{0x00, 0x00, 0x65, 0x58}, roceV4), counterNoSocket},
	{"GRE over IPv4 QinQ", cat(macs, tag(0x88a8), tag(0x8100), be16(0x0800), ipv4Hdr(5, 47, 0), []byte{0, 0, 0x65, 0x58}), counterNoSocket},
	{"PFC", pfc, counterNoSocket},
	{"802.3x pause minimum header", cat(macs, be16(0x8808)), counterNoSocket},

	{"ARP", arp, counterPassed},
	{"TCP to 4791", cat(macs, be16(0x0800), ipv4Hdr(5, 6, 0), udpHdr(1, 4791), bth), counterPassed},
	{"UDP to 53", cat(macs, be16(0x0800), ipv4Hdr(5, 17, 0), udpHdr(4791, 53), bth), counterPassed},
	{"UDP IPv6 to 53", cat(macs, be16(0x86dd), ipv6Hdr(17), udpHdr(4791, 53), bth), counterPassed},
	{"IPv6 hop-by-hop then UDP 4791", ipv6Ext(0, 4791, extHdr(17, 0)), counterNoSocket},
	{"IPv6 routing then UDP 4791", ipv6Ext(43, 4791, extHdr(17, 2)), counterNoSocket},
	{"IPv6 destination options then UDP 4791", ipv6Ext(60, 4791, extHdr(17, 1)), counterNoSocket},
	{"IPv6 first fragment then UDP 4791", ipv6Ext(44, 4791, fragHdr(17, 0, true)), counterNoSocket},
	{"IPv6 hop-by-hop, options, routing, fragment then UDP 4791", ipv6Ext(0, 4791, extHdr(60, 0), extHdr(43, 0), extHdr(44, 1), fragHdr(17, 0, false)), counterNoSocket},
	{"IPv6 six extension headers then UDP 4791", ipv6Ext(0, 4791, extHdr(60, 0), extHdr(43, 0), extHdr(44, 0), fragHdr(60, 0, false), extHdr(60, 0), extHdr(17, 0)), counterNoSocket},
	{"IPv6 802.1Q hop-by-hop then UDP 4791", cat(macs, tag(0x8100), be16(0x86dd), ipv6Hdr(0), extHdr(17, 0), udpHdr(1, 4791), bth), counterNoSocket},
	{"IPv6 destination options then GRE", cat(macs, be16(0x86dd), ipv6Hdr(60), extHdr(47, 0), []byte{0, 0, 0x65, 0x58}, roceV4), counterNoSocket},
	{"IPv6 hop-by-hop ending after the port", ipv6Ext(0, 4791, extHdr(17, 0))[:14+40+8+4], counterNoSocket},
	{"IPv6 seven extension headers then UDP 4791", ipv6Ext(0, 4791, extHdr(60, 0), extHdr(43, 0), extHdr(60, 0), extHdr(60, 0), extHdr(60, 0), extHdr(60, 0), extHdr(17, 0)), counterPassed},
	{"IPv6 later fragment", ipv6Ext(44, 4791, fragHdr(17, 185, false)), counterPassed},
	{"IPv6 hop-by-hop then UDP 53", ipv6Ext(0, 53, extHdr(17, 0)), counterPassed},
	{"IPv6 hop-by-hop then TCP", ipv6Ext(0, 4791, extHdr(6, 0)), counterPassed},
	{"IPv6 authentication header then UDP 4791", ipv6Ext(51, 4791, extHdr(17, 2)), counterPassed},
	// The hop-by-hop header says 16 bytes; read as 8, UDP port 4791 follows.
	{"IPv6 hop-by-hop length honoured", ipv6Ext(0, 53, cat(extHdr(17, 1)[:8], udpHdr(1, 4791))), counterPassed},
	{"truncated in an IPv6 extension header", ipv6Ext(0, 4791, extHdr(17, 1))[:14+40+15], counterPassed},
	{"truncated after an IPv6 extension header", ipv6Ext(0, 4791, extHdr(17, 0))[:14+40+8+3], counterPassed},
	{"IPv4 options read as a header", optionsLikeRoCE, counterPassed},
	{"IPv4 later fragment", laterFragment, counterPassed},
	// IHL 4 is invalid; read as given, the UDP port would be the last two
	// bytes of the destination address, 10.0.18.183: 0x12b7 = 4791.
	{"IPv4 IHL 4", cat(macs, be16(0x0800), func() []byte {
		h := ipv4Hdr(5, 17, 0)
		h[0], h[18], h[19] = 0x44, 0x12, 0xb7
		return h
	}(), udpHdr(1, 4791), bth), counterPassed},
	{"three VLAN tags", cat(macs, tag(0x8100), tag(0x8100), tag(0x8100), be16(0x0800), ipv4Hdr(5, 17, 0), udpHdr(1, 4791), bth), counterPassed},
	{"IPv4 minimum Ethernet header", cat(macs, be16(0x0800)), counterPassed},
	{"truncated in the VLAN tag", cat(macs, be16(0x8100), []byte{0x00, 0x64, 0x08}), counterPassed},
	{"truncated in the IPv4 header", roceV4[:14+19], counterPassed},
	{"truncated in the UDP header", roceV4[:14+20+3], counterPassed},
	{"truncated in the IPv4 options", optionsLikeRoCE[:14+20+3], counterPassed},
	{"truncated in the IPv6 header", roceV6[:14+39], counterPassed},
	{"truncated in the IPv6 UDP header", roceV6[:14+40+3], counterPassed},
	{"RoCEv2 IPv4 ending after the port", roceV4[:14+20+4], counterNoSocket},
	{"RoCEv2 IPv6 ending after the port", roceV6[:14+40+4], counterNoSocket},
}

func TestProgramAssembles(t *testing.T) {
	for _, all := range []bool{false, true} {
		insns := program(rule{all: all, host: hostMAC, snapLen: DefaultSnapLen})
		var buf bytes.Buffer
		if err := insns.Marshal(&buf, binary.LittleEndian); err != nil {
			t.Fatalf("program(all=%v).Marshal: %v\n%v", all, err, insns)
		}
		if buf.Len()%asm.InstructionSize != 0 || buf.Len() == 0 {
			t.Errorf("program(all=%v) is %d bytes, not a whole number of instructions", all, buf.Len())
		}
		if n := len(insns); n > 4096 {
			t.Errorf("program(all=%v) has %d instructions", all, n)
		}
	}
	// All mode has no parser: it must be the redirect-and-count tail alone.
	if got, want := len(program(rule{all: true, snapLen: DefaultSnapLen})), 1+len(redirectAndCount(DefaultSnapLen)); got != want {
		t.Errorf("program(all=true) has %d instructions, want %d", got, want)
	}
}

// loadForTest loads the program of rule r with an empty XSKMAP, or skips.
func loadForTest(t testing.TB, r rule) *objects {
	t.Helper()
	if os.Getenv("ROCESCOPE_LIVE") != "1" || os.Geteuid() != 0 {
		t.Skip("live test: loads a BPF program; set ROCESCOPE_LIVE=1 and run as root")
	}
	var objs objects
	if err := collectionSpec(r, 4).LoadAndAssign(&objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("load: %+v", ve)
		}
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { objs.Close() })
	return &objs
}

// readCounters reads the per-CPU counters summed over CPUs.
func readCounters(t testing.TB, m *ebpf.Map) [numCounters]uint64 {
	t.Helper()
	var got [numCounters]uint64
	for i := range got {
		var perCPU []uint64
		if err := m.Lookup(uint32(i), &perCPU); err != nil {
			t.Fatalf("lookup counter %d: %v", i, err)
		}
		for _, v := range perCPU {
			got[i] += v
		}
	}
	return got
}

// TestProgramClassifyLive runs the program in the kernel
// (BPF_PROG_TEST_RUN) on hand-made frames and checks which counter each
// frame moved. Without a socket in the map every verdict is XDP_PASS.
func TestProgramClassifyLive(t *testing.T) {
	for _, all := range []bool{false, true} {
		objs := loadForTest(t, rule{all: all, snapLen: DefaultSnapLen})
		for _, c := range classifyCases {
			want := c.want
			if all {
				want = counterNoSocket
			}
			before := readCounters(t, objs.Counters)
			ret, err := objs.Program.Run(&ebpf.RunOptions{Data: c.frame})
			if err != nil {
				t.Fatalf("all=%v %s: run: %v", all, c.name, err)
			}
			if ret != xdpPass {
				t.Errorf("all=%v %s: verdict %d, want XDP_PASS (%d)", all, c.name, ret, xdpPass)
			}
			after := readCounters(t, objs.Counters)
			for i := range after {
				d, w := after[i]-before[i], uint64(0)
				if i == want {
					w = 1
				}
				if d != w {
					t.Errorf("all=%v %s: counter %d moved by %d, want %d", all, c.name, i, d, w)
				}
			}
		}
	}
}

// TestProgramMetadataLive runs the program in the kernel on RoCE frames
// around the snap length and on a frame it passes, and checks what it
// hands on: the metadata (wire length, magic, a CLOCK_MONOTONIC time taken
// during the run) in front of a frame cut to the snap length, and nothing
// added to or cut from a passed frame.
func TestProgramMetadataLive(t *testing.T) {
	objs := loadForTest(t, rule{snapLen: DefaultSnapLen})
	pad := func(f []byte, n int) []byte { return append(append([]byte(nil), f...), make([]byte, n-len(f))...) }
	for _, c := range []struct {
		name  string
		frame []byte
		meta  bool
	}{
		{"RoCEv2 short", roceV4, true},
		{"RoCEv2 snap length", pad(roceV4, DefaultSnapLen), true},
		{"RoCEv2 snap length + 1", pad(roceV4, DefaultSnapLen+1), true},
		{"RoCEv2 IPv6 3000 bytes", pad(roceV6, 3000), true},
		{"ARP", arp, false},
		{"UDP 3000 bytes", pad(cat(macs, be16(0x0800), ipv4Hdr(5, 17, 0), udpHdr(4791, 53)), 3000), false},
	} {
		opts := &ebpf.RunOptions{Data: c.frame, DataOut: make([]byte, len(c.frame)+metaLen)}
		var before, after unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &before)
		ret, err := objs.Program.Run(opts)
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &after)
		if err != nil {
			t.Fatalf("%s: run: %v", c.name, err)
		}
		out := opts.DataOut // the kernel's output: metadata, then the frame
		if ret != xdpPass {
			t.Errorf("%s: verdict %d, want XDP_PASS", c.name, ret)
		}
		if !c.meta {
			if !bytes.Equal(out, c.frame) {
				t.Errorf("%s: passed frame changed: %d bytes out, %d in", c.name, len(out), len(c.frame))
			}
			continue
		}
		keep := min(len(c.frame), DefaultSnapLen)
		if len(out) != metaLen+keep {
			t.Errorf("%s: %d bytes out, want %d of metadata and %d of frame", c.name, len(out), metaLen, keep)
			continue
		}
		m, data := out[:metaLen], out[metaLen:]
		if !bytes.Equal(data, c.frame[:keep]) {
			t.Errorf("%s: the frame out is not the first %d bytes of the frame in", c.name, keep)
		}
		if got := binary.NativeEndian.Uint32(m[metaMagic:]); got != metaMagicValue {
			t.Errorf("%s: magic %#x, want %#x", c.name, got, metaMagicValue)
		}
		if got := binary.NativeEndian.Uint32(m[metaWireLen:]); got != uint32(len(c.frame)) {
			t.Errorf("%s: wire length %d, want %d", c.name, got, len(c.frame))
		}
		if got := int64(binary.NativeEndian.Uint64(m[metaTime:])); got < before.Nano() || got > after.Nano() {
			t.Errorf("%s: time %d outside the run, %d to %d (CLOCK_MONOTONIC)", c.name, got, before.Nano(), after.Nano())
		}
	}
}

// TestProgramHostLive runs the program that passes the host's frames (the
// default) on frames addressed to the host, to a group address and to
// another host, in both modes: a frame it would take is passed and counted
// in counterHost when addressed to the host or a group.
func TestProgramHostLive(t *testing.T) {
	to := func(dst []byte, frame []byte) []byte { return cat(dst, frame[6:]) }
	broadcast := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	for _, c := range []struct {
		name      string
		frame     []byte
		want, all int // counter without and with All
	}{
		{"RoCEv2 to another host", roceV4, counterNoSocket, counterNoSocket},
		{"RoCEv2 to the host", to(hostMAC, roceV4), counterHost, counterHost},
		{"RoCEv2 IPv6 to the host", to(hostMAC, roceV6), counterHost, counterHost},
		{"RoCEv2 to a MAC one bit off the host's", to(net.HardwareAddr{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x89}, roceV4), counterNoSocket, counterNoSocket},
		{"RoCEv2 to a MAC with the host's first four bytes", to(net.HardwareAddr{0x02, 0xaa, 0xbb, 0xcc, 0, 0}, roceV4), counterNoSocket, counterNoSocket},
		{"RoCEv2 broadcast", to(broadcast, roceV4), counterHost, counterHost},
		{"PFC (multicast)", pfc, counterHost, counterHost},
		{"ARP broadcast", arp, counterPassed, counterHost},
		{"ARP to another host", to(macs[:6], arp), counterPassed, counterNoSocket},
		{"UDP to 53 to the host", to(hostMAC, cat(macs, be16(0x0800), ipv4Hdr(5, 17, 0), udpHdr(4791, 53), bth)), counterPassed, counterHost},
	} {
		for _, all := range []bool{false, true} {
			objs := loadForTest(t, rule{all: all, host: hostMAC, snapLen: DefaultSnapLen})
			want := c.want
			if all {
				want = c.all
			}
			before := readCounters(t, objs.Counters)
			ret, err := objs.Program.Run(&ebpf.RunOptions{Data: c.frame})
			if err != nil {
				t.Fatalf("all=%v %s: run: %v", all, c.name, err)
			}
			after := readCounters(t, objs.Counters)
			for i := range after {
				d, w := after[i]-before[i], uint64(0)
				if i == want {
					w = 1
				}
				if d != w || ret != xdpPass {
					t.Errorf("all=%v %s: verdict %d, counter %d moved by %d; want XDP_PASS and %d", all, c.name, ret, i, d, w)
				}
			}
		}
	}
}
