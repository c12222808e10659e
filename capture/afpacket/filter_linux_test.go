package afpacket

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/rocescope/rocescope/internal/netnstest"
	"golang.org/x/sys/unix"
)

// runBPF runs a classic BPF program over pkt as the kernel does for a
// socket filter, for the instructions the filters use, and returns the
// number of bytes to keep (0: drop). A load past the end of pkt drops it.
func runBPF(prog []unix.SockFilter, pkt []byte) (uint32, error) {
	var a, x uint32
	var mem [16]uint32
	load := func(off uint32, size uint16) (uint32, bool) {
		n := map[uint16]uint32{unix.BPF_B: 1, unix.BPF_H: 2, unix.BPF_W: 4}[size]
		if n == 0 || uint64(off)+uint64(n) > uint64(len(pkt)) {
			return 0, false
		}
		var v uint32
		for _, c := range pkt[off : off+n] {
			v = v<<8 | uint32(c)
		}
		return v, true
	}
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		class, size, mode := ins.Code&0x07, ins.Code&0x18, ins.Code&0xe0
		op, src := ins.Code&0xf0, ins.Code&0x08
		switch {
		case class == unix.BPF_LD && (mode == unix.BPF_ABS || mode == unix.BPF_IND):
			off := ins.K
			if mode == unix.BPF_IND {
				off += x
			}
			v, ok := load(off, size)
			if !ok {
				return 0, nil
			}
			a = v
		case class == unix.BPF_LDX && mode == unix.BPF_IMM:
			x = ins.K
		case class == unix.BPF_LD && mode == unix.BPF_MEM && ins.K < 16:
			a = mem[ins.K]
		case class == unix.BPF_ST && ins.K < 16:
			mem[ins.K] = a
		case class == unix.BPF_ALU:
			operand := ins.K
			if src == unix.BPF_X {
				operand = x
			}
			switch op {
			case unix.BPF_AND:
				a &= operand
			case unix.BPF_LSH:
				a <<= operand
			case unix.BPF_ADD:
				a += operand
			default:
				return 0, fmt.Errorf("instruction %d: ALU op %#x not interpreted", pc, op)
			}
		case class == unix.BPF_MISC && ins.Code&0xf8 == unix.BPF_TAX:
			x = a
		case class == unix.BPF_MISC && ins.Code&0xf8 == unix.BPF_TXA:
			a = x
		case class == unix.BPF_JMP && op == unix.BPF_JA:
			pc += int(ins.K)
		case class == unix.BPF_JMP && src == unix.BPF_K && (op == unix.BPF_JEQ || op == unix.BPF_JSET):
			cond := a == ins.K
			if op == unix.BPF_JSET {
				cond = a&ins.K != 0
			}
			if cond {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case class == unix.BPF_RET && ins.Code&0x18 == unix.BPF_K:
			return ins.K, nil
		default:
			return 0, fmt.Errorf("instruction %d: code %#x not interpreted", pc, ins.Code)
		}
	}
	return 0, fmt.Errorf("program ran off its end")
}

// wantKeep is the filter's specification in plain Go: whether the filter
// must accept frame. Like the filter, it needs only the bytes of the fields
// it looks at.
func wantKeep(f []byte) bool {
	u16 := func(off int) (uint16, bool) {
		if off+2 > len(f) {
			return 0, false
		}
		return binary.BigEndian.Uint16(f[off:]), true
	}
	u8 := func(off int) (uint8, bool) {
		if off >= len(f) {
			return 0, false
		}
		return f[off], true
	}
	l3 := 14
	et, ok := u16(12)
	for tags := 0; ok && tags < 2 && (et == 0x8100 || et == 0x88a8); tags++ {
		l3 += 4
		et, ok = u16(l3 - 2)
	}
	if !ok {
		return false
	}
	switch et {
	case 0x8915, 0x8808:
		return true
	case 0x0800:
		proto, ok := u8(l3 + 9)
		if !ok || proto == 47 {
			return ok
		}
		frag, ok1 := u16(l3 + 6)
		vihl, ok2 := u8(l3)
		if proto != 17 || !ok1 || !ok2 || frag&0x1fff != 0 {
			return false
		}
		port, ok := u16(l3 + int(vihl&0xf)*4 + 2)
		return ok && port == 4791
	case 0x86dd:
		next, ok := u8(l3 + 6)
		at := l3 + 40
		for i := 0; ok; i++ {
			switch {
			case next == 47:
				return true
			case next == 17:
				port, ok := u16(at + 2)
				return ok && port == 4791
			case i == 6:
				return false
			case next == 0 || next == 43 || next == 60:
				units, ok2 := u8(at + 1)
				next, ok = u8(at)
				ok = ok && ok2
				at += 8 * (int(units) + 1)
			case next == 44:
				frag, ok1 := u16(at + 2)
				if !ok1 || frag&0xfff8 != 0 {
					return false
				}
				next, ok = u8(at)
				at += 8
			default:
				return false
			}
		}
	}
	return false
}

// Hand-made frames for the filter tests.

func eth(types ...uint16) []byte {
	b := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1}
	for _, t := range types {
		b = binary.BigEndian.AppendUint16(b, t)
		if t == 0x8100 || t == 0x88a8 {
			b = append(b, 0x20, 0x05) // PCP 1, VLAN 5
		}
	}
	return b
}

// ip4 is an IPv4 header of ihl words with protocol proto and the given
// flags/fragment offset field; option bytes are opt repeated.
func ip4(ihl int, proto byte, frag uint16, opt byte) []byte {
	h := make([]byte, ihl*4)
	h[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(h[6:], frag)
	h[8], h[9] = 64, proto
	for i := 20; i < len(h); i++ {
		h[i] = opt
	}
	return h
}

func ip6(next byte) []byte {
	h := make([]byte, 40)
	h[0], h[6], h[7] = 0x60, next, 64
	return h
}

// ext6 is an IPv6 hop-by-hop, routing or destination options header of
// (units+1)*8 bytes announcing next.
func ext6(next, units byte) []byte {
	h := make([]byte, (int(units)+1)*8)
	h[0], h[1] = next, units
	return h
}

// frag6 is an IPv6 fragment header announcing next, with the fragment
// offset (8-byte units) and more-fragments flag.
func frag6(next byte, offset uint16, more bool) []byte {
	f := offset << 3
	if more {
		f |= 1
	}
	return append(binary.BigEndian.AppendUint16([]byte{next, 0}, f), 0, 0, 0x12, 0x34)
}

func udp(sport, dport uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, sport), dport)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return append(b, make([]byte, 16)...) // some payload
}

// fakePort is an IPv4 header with options whose last two bytes are 4791,
// where the UDP destination port of a 20-byte header would be.
var fakePort = append(ip4(6, 17, 0, 1)[:22:22], 0x12, 0xb7)

// filterCases are hand-made frames and whether the RoCE filter keeps them.
var filterCases = []struct {
	name  string
	frame []byte
	keep  bool
}{
	{"ipv4 udp 4791", cat(eth(0x0800), ip4(5, 17, 0, 0), udp(50000, 4791)), true},
	{"ipv4 udp 4792", cat(eth(0x0800), ip4(5, 17, 0, 0), udp(50000, 4792)), false},
	{"ipv4 udp from 4791", cat(eth(0x0800), ip4(5, 17, 0, 0), udp(4791, 53)), false},
	{"ipv4 options udp 4791", cat(eth(0x0800), ip4(6, 17, 0, 1), udp(50000, 4791)), true},
	{"ipv4 60-byte header udp 4791", cat(eth(0x0800), ip4(15, 17, 0, 1), udp(50000, 4791)), true},
	// The options hold 4791 where a 20-byte header's port would be.
	{"ipv4 options fake port", cat(eth(0x0800), fakePort, udp(50000, 53)), false},
	{"ipv4 first fragment 4791", cat(eth(0x0800), ip4(5, 17, 0x2000, 0), udp(50000, 4791)), true},
	{"ipv4 later fragment", cat(eth(0x0800), ip4(5, 17, 0x0010, 0), udp(50000, 4791)), false},
	{"ipv4 gre", cat(eth(0x0800), ip4(5, 47, 0, 0), []byte{0, 0, 0x88, 0xbe}), true},
	{"ipv4 tcp 4791", cat(eth(0x0800), ip4(5, 6, 0, 0), udp(50000, 4791)), false},
	{"ipv6 udp 4791", cat(eth(0x86dd), ip6(17), udp(50000, 4791)), true},
	{"ipv6 udp 53", cat(eth(0x86dd), ip6(17), udp(50000, 53)), false},
	{"ipv6 gre", cat(eth(0x86dd), ip6(47)), true},
	{"ipv6 tcp 4791", cat(eth(0x86dd), ip6(6), udp(50000, 4791)), false},
	{"ipv6 hop-by-hop udp 4791", cat(eth(0x86dd), ip6(0), ext6(17, 0), udp(50000, 4791)), true},
	{"ipv6 routing udp 4791", cat(eth(0x86dd), ip6(43), ext6(17, 2), udp(50000, 4791)), true},
	{"ipv6 destination options udp 4791", cat(eth(0x86dd), ip6(60), ext6(17, 1), udp(50000, 4791)), true},
	{"ipv6 first fragment udp 4791", cat(eth(0x86dd), ip6(44), frag6(17, 0, true), udp(50000, 4791)), true},
	{"ipv6 later fragment udp 4791", cat(eth(0x86dd), ip6(44), frag6(17, 185, false), udp(50000, 4791)), false},
	{"ipv6 four extension headers udp 4791", cat(eth(0x86dd), ip6(0), ext6(60, 0), ext6(43, 1), ext6(44, 0), frag6(17, 0, false), udp(50000, 4791)), true},
	{"ipv6 six extension headers udp 4791", cat(eth(0x86dd), ip6(0), ext6(60, 0), ext6(43, 0), ext6(44, 0), frag6(60, 0, false), ext6(60, 0), ext6(17, 0), udp(50000, 4791)), true},
	{"ipv6 seven extension headers udp 4791", cat(eth(0x86dd), ip6(0), ext6(60, 0), ext6(60, 0), ext6(60, 0), ext6(60, 0), ext6(60, 0), ext6(60, 0), ext6(17, 0), udp(50000, 4791)), false},
	{"vlan ipv6 hop-by-hop udp 4791", cat(eth(0x8100, 0x86dd), ip6(0), ext6(17, 0), udp(50000, 4791)), true},
	{"ipv6 destination options gre", cat(eth(0x86dd), ip6(60), ext6(47, 0)), true},
	{"ipv6 hop-by-hop udp 53", cat(eth(0x86dd), ip6(0), ext6(17, 0), udp(50000, 53)), false},
	{"ipv6 hop-by-hop tcp 4791", cat(eth(0x86dd), ip6(0), ext6(6, 0), udp(50000, 4791)), false},
	{"ipv6 authentication header udp 4791", cat(eth(0x86dd), ip6(51), ext6(17, 2), udp(50000, 4791)), false},
	// The header says 16 bytes; read as 8, UDP port 4791 would follow.
	{"ipv6 hop-by-hop length honoured", cat(eth(0x86dd), ip6(0), ext6(17, 1)[:8], udp(50000, 4791), make([]byte, 4), udp(50000, 53)), false},
	{"ipv6 cut in extension header", cat(eth(0x86dd), ip6(0), ext6(17, 0))[:14+40+1], false},
	{"ipv6 cut before port after extension", cat(eth(0x86dd), ip6(0), ext6(17, 0), udp(50000, 4791))[:14+40+8+3], false},
	{"vlan ipv4 4791", cat(eth(0x8100, 0x0800), ip4(5, 17, 0, 0), udp(50000, 4791)), true},
	{"vlan ipv4 options 4791", cat(eth(0x8100, 0x0800), ip4(7, 17, 0, 1), udp(50000, 4791)), true},
	{"vlan ipv4 53", cat(eth(0x8100, 0x0800), ip4(5, 17, 0, 0), udp(50000, 53)), false},
	{"qinq ipv4 4791", cat(eth(0x88a8, 0x8100, 0x0800), ip4(5, 17, 0, 0), udp(50000, 4791)), true},
	{"double 802.1q ipv6 4791", cat(eth(0x8100, 0x8100, 0x86dd), ip6(17), udp(50000, 4791)), true},
	{"qinq ipv6 53", cat(eth(0x88a8, 0x8100, 0x86dd), ip6(17), udp(50000, 53)), false},
	{"three tags ipv4 4791", cat(eth(0x88a8, 0x8100, 0x8100, 0x0800), ip4(5, 17, 0, 0), udp(50000, 4791)), false},
	{"vlan arp", cat(eth(0x8100, 0x0806), make([]byte, 28)), false},
	{"rocev1", cat(eth(0x8915), make([]byte, 40)), true},
	{"vlan rocev1", cat(eth(0x8100, 0x8915), make([]byte, 40)), true},
	{"pfc", cat(eth(0x8808), []byte{0x01, 0x01}), true},
	{"qinq pause", cat(eth(0x88a8, 0x8100, 0x8808), []byte{0x00, 0x01}), true},
	{"arp", cat(eth(0x0806), make([]byte, 28)), false},
	{"lldp", cat(eth(0x88cc)), false},
	{"ipv4 cut in header", cat(eth(0x0800), ip4(5, 17, 0, 0))[:14+8], false},
	{"ipv4 cut before port", cat(eth(0x0800), ip4(5, 17, 0, 0), udp(50000, 4791))[:14+20+3], false},
	{"ipv6 cut before port", cat(eth(0x86dd), ip6(17), udp(50000, 4791))[:14+40+3], false},
	{"vlan cut", eth(0x8100, 0x0800)[:17], false},
	{"runt", make([]byte, 13), false},
	{"empty", nil, false},
}

// TestRoCEFilter runs the filter over hand-made frames and checks the
// verdict against the table and against wantKeep, and that a kept frame
// keeps the snap length.
func TestRoCEFilter(t *testing.T) {
	const snap = 1234
	prog, err := roceFilter(keepAll(snap))
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) > 255 {
		t.Fatalf("program has %d instructions", len(prog))
	}
	for _, c := range filterCases {
		got, err := runBPF(prog, c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := uint32(0)
		if c.keep {
			want = snap
		}
		if got != want {
			t.Errorf("%s: filter returns %d, want %d", c.name, got, want)
		}
		if wantKeep(c.frame) != c.keep {
			t.Errorf("%s: wantKeep = %v, table says %v", c.name, !c.keep, c.keep)
		}
	}
}

// TestRoCEFilterTraffic checks the filter over the live tests' traffic:
// it keeps the RoCE frames and drops the others, with the tags in the data
// and with the outermost tag taken out as the kernel does.
func TestRoCEFilterTraffic(t *testing.T) {
	prog, err := roceFilter(keepAll(DefaultSnapLen))
	if err != nil {
		t.Fatal(err)
	}
	const nRoCE = 2000
	kept := [2]int{}
	for _, f := range netnstest.Traffic(nRoCE, 1000, 11) {
		for i, frame := range [][]byte{f, stripTag(f)} {
			v, err := runBPF(prog, frame)
			if err != nil {
				t.Fatal(err)
			}
			if (v != 0) != wantKeep(frame) {
				t.Errorf("filter returns %d for % x", v, frame)
			}
			if v != 0 {
				kept[i]++
			}
		}
	}
	if kept != [2]int{nRoCE, nRoCE} {
		t.Errorf("kept %d frames as sent and %d without the outer tag, want %d each", kept[0], kept[1], nRoCE)
	}
}

// stripTag returns frame without its outermost VLAN tag, as a packet
// socket receives it.
func stripTag(frame []byte) []byte {
	if et := binary.BigEndian.Uint16(frame[12:]); et != 0x8100 && et != 0x88a8 {
		return frame
	}
	return append(append([]byte(nil), frame[:12]...), frame[16:]...)
}

// FuzzRoCEFilter checks that the filter agrees with wantKeep on any frame.
func FuzzRoCEFilter(f *testing.F) {
	for _, c := range filterCases {
		f.Add(c.frame)
	}
	prog, err := roceFilter(keepAll(DefaultSnapLen))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		v, err := runBPF(prog, frame)
		if err != nil {
			t.Fatal(err)
		}
		if want := wantKeep(frame); (v != 0) != want || (v != 0 && v != DefaultSnapLen) {
			t.Errorf("filter returns %d, wantKeep %v, for % x", v, want, frame)
		}
	})
}

// TestAssembleErrors checks that bad labels are refused.
func TestAssembleErrors(t *testing.T) {
	for name, prog := range map[string][]step{
		"unknown":  {{code: jeqK, jt: "nowhere"}, {code: retK}},
		"backward": {{label: "top", code: retK}, {code: jeqK, jf: "top"}},
		"self":     {{label: "me", code: jeqK, jt: "me"}},
	} {
		if _, err := assemble(prog); err == nil {
			t.Errorf("%s: assemble succeeded", name)
		}
	}
	long := []step{{code: jeqK, jt: "end"}}
	for range 256 {
		long = append(long, step{code: retK})
	}
	long = append(long, step{label: "end", code: retK})
	if _, err := assemble(long); err == nil {
		t.Error("a jump over 256 instructions assembled")
	}
}
