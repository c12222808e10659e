package filter

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/decode"
)

// TestCompileErrors checks the errors of the pure-Go compiler, which a
// build with the pcap tag keeps beside libpcap's.
func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		expr string
		is   error
		says string
	}{
		{"", ErrSyntax, "empty expression"},
		{"udp and", ErrSyntax, "expression ends where a primitive is expected"},
		{"(udp", ErrSyntax, "missing )"},
		{"udp)", ErrSyntax, `unexpected ")"`},
		{"host", ErrSyntax, `a value is missing after "host"`},
		{"port 70000", ErrSyntax, `port "70000"`},
		{"port domain", ErrSyntax, "service names are not looked up"},
		{"portrange 5-", ErrSyntax, "portrange"},
		{"host example.com", ErrUnsupported, "host names are not looked up"},
		{"host 02:00:00:00:00:01", ErrSyntax, `a MAC address needs "ether host"`},
		{"net 10.0.0.1/8", ErrSyntax, "bits set past the length"},
		{"udp[8] = 0x64", ErrUnsupported, `"udp[8]"`},
		{"less 100", ErrUnsupported, `"less"`},
		{"gateway 10.0.0.1", ErrUnsupported, `"gateway"`},
		{"tcp host 10.0.0.1", ErrSyntax, "want ip, arp, rarp or nothing"},
		{"ip6 host 10.0.0.1", ErrSyntax, "want ip, arp, rarp or nothing"},
		{"ip port 80", ErrSyntax, "want tcp, udp, sctp or nothing before port"},
		{"src or dst host 10.0.0.1", ErrUnsupported, "src or dst"},
		{"vlan 5000", ErrSyntax, "vlan"},
		{"4791", ErrSyntax, "want host, net, port or portrange"},
		{"ether proto foo", ErrSyntax, "ether proto"},
	} {
		_, err := compilePure(c.expr)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Compile(%q) = %v, want an error wrapping %v that says %q", c.expr, err, c.is, c.says)
		}
	}
}

// TestPrecedence checks that and and or group from the left with the same
// precedence, and that not binds closest, on frames built to tell the
// groupings apart.
func TestPrecedence(t *testing.T) {
	frame := func(src, dst string) []byte {
		f := make([]byte, 14+20+8)
		f[12], f[13] = 0x08, 0x00
		f[14] = 0x45
		f[14+9] = 17
		s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
		copy(f[26:], s[:])
		copy(f[30:], d[:])
		return f
	}
	a := frame("10.0.0.1", "10.0.0.9") // host 10.0.0.1 only
	b := frame("10.0.0.2", "10.0.0.3") // hosts 2 and 3
	for _, c := range []struct {
		expr string
		a, b bool
	}{
		{"host 10.0.0.1 or host 10.0.0.2 and host 10.0.0.3", false, true}, // (1 or 2) and 3
		{"host 10.0.0.2 and host 10.0.0.3 or host 10.0.0.1", true, true},  // (2 and 3) or 1
		{"host 10.0.0.1 or (host 10.0.0.2 and host 10.0.0.3)", true, true},
		{"not host 10.0.0.1 and udp", false, true},
		{"not (host 10.0.0.1 or host 10.0.0.2)", false, false},
		{"! host 10.0.0.1 && ! host 10.0.0.2 || udp", true, true},
		{"src 10.0.0.1 or 10.0.0.2", true, true},
		{"dst 10.0.0.9 or 10.0.0.2", true, false},
	} {
		e, err := Compile(c.expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", c.expr, err)
		}
		if ga, gb := e.Match(a, decode.LinkEthernet), e.Match(b, decode.LinkEthernet); ga != c.a || gb != c.b {
			t.Errorf("%q matches a: %v, b: %v; want %v, %v", c.expr, ga, gb, c.a, c.b)
		}
	}
}

// TestLinkTypes matches one IPv4 UDP datagram behind each link layer.
func TestLinkTypes(t *testing.T) {
	ip := make([]byte, 20+8)
	ip[0], ip[9] = 0x45, 17
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	ip[22], ip[23] = 0x12, 0xb7 // destination port 4791
	eth := append([]byte{12: 0x08, 13: 0x00}, ip...)
	sll := append([]byte{14: 0x08, 15: 0x00}, ip...)
	sll2 := append([]byte{0: 0x08, 1: 0x00, 19: 0}, ip...)
	e, err := Compile("udp dst port 4791 and src host 10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		link  decode.LinkType
		frame []byte
		want  bool
	}{
		{decode.LinkEthernet, eth, true},
		{decode.LinkLinuxSLL, sll, true},
		{decode.LinkLinuxSLL2, sll2, true},
		{decode.LinkRaw, ip, true},
		{decode.LinkIPv4, ip, true},
		{decode.LinkInfiniBand, ip, false},
		{decode.LinkEthernet, eth[:14+20+3], false}, // cut in the port
	} {
		if got := e.Match(c.frame, c.link); got != c.want {
			t.Errorf("link %d: Match = %v, want %v", c.link, got, c.want)
		}
	}
	if _, err := e.Instructions(decode.LinkERF); err == nil {
		t.Error("Instructions(ERF) = nil error, want one")
	}
}

func TestParseQPs(t *testing.T) {
	got, err := ParseQPs("0x4bdaaf, 4970927,0XFFFFFF,0")
	if want := []uint32{0x4bdaaf, 4970927, 0xffffff, 0}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ParseQPs = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "0x1000000", "-1", "qp1", "1,,2", "0x"} {
		if _, err := ParseQPs(bad); err == nil {
			t.Errorf("ParseQPs(%q) = nil error, want one", bad)
		}
	}
}

func TestParseOps(t *testing.T) {
	o, err := ParseOps("read, Write,0x81,17")
	if err != nil || o.String() != "write,read,0x11,0x81" {
		t.Fatalf("ParseOps = %q, %v; want write,read,0x11,0x81", o, err)
	}
	// The classes, opcode by opcode, written out independently of Has.
	classes := map[string][]int{
		"send":   {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x16, 0x17, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x64, 0x65, 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xb6, 0xb7},
		"write":  {0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab},
		"read":   {0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0xac, 0xad, 0xae, 0xaf, 0xb0},
		"atomic": {0x12, 0x13, 0x14, 0x1d, 0xb2, 0xb3, 0xb4}, // 0x1d: RC ATOMIC WRITE
		"ack":    {0x11, 0x12, 0xb1, 0xb2},
		"cnp":    {0x81},
	}
	for class, want := range classes {
		o, err := ParseOps(class)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for op := range 256 {
			if o.Has(decode.Opcode(op)) && op&0xe0 != 0x40 { // RD opcodes (0x40-0x5f) are left out of the table
				got = append(got, op)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("--op %s (-want +got):\n%s", class, diff)
		}
	}
	for _, bad := range []string{"", "reads", "256", "read,,ack"} {
		if _, err := ParseOps(bad); err == nil {
			t.Errorf("ParseOps(%q) = nil error, want one", bad)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes("10.0.0.21,10.0.0.0/24, fd00::1d,::ffff:10.0.0.1,10.1.2.3/8")
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.21/32"), netip.MustParsePrefix("10.0.0.0/24"),
		netip.MustParsePrefix("fd00::1d/128"), netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"),
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ParsePrefixes = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "10.0.0", "10.0.0.0/33", "host", "10.0.0.1,"} {
		if _, err := ParsePrefixes(bad); err == nil {
			t.Errorf("ParsePrefixes(%q) = nil error, want one", bad)
		}
	}
}

// FuzzRoCEFlags feeds the RoCE filter flags' parsers arbitrary text: each
// must return an error or values that print back to text it reads to the
// same values.
func FuzzRoCEFlags(f *testing.F) {
	for _, s := range []string{"0x4bdaaf", "1,2,3", "read,write,cnp", "0x81", "10.0.0.0/24,fd00::1", "0x1000000", ",", " send "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if qps, err := ParseQPs(s); err == nil {
			r := &RoCE{QPs: qps}
			again, err := ParseQPs(strings.TrimPrefix(r.String(), "--qp "))
			if err != nil || !slices.Equal(qps, again) {
				t.Errorf("ParseQPs(%q) = %v, printed %q, read back %v, %v", s, qps, r.String(), again, err)
			}
			for _, q := range qps {
				if q > 0xffffff {
					t.Errorf("ParseQPs(%q) gave QP %#x > 0xffffff", s, q)
				}
			}
		}
		if o, err := ParseOps(s); err == nil {
			again, err := ParseOps(o.String())
			if err != nil || again != o {
				t.Errorf("ParseOps(%q) = %q, read back %q, %v", s, o, again, err)
			}
		}
		if ps, err := ParsePrefixes(s); err == nil {
			r := &RoCE{Addr: ps}
			again, err := ParsePrefixes(strings.TrimPrefix(r.String(), "--addr "))
			if err != nil || !slices.Equal(ps, again) {
				t.Errorf("ParsePrefixes(%q) = %v, printed %q, read back %v, %v", s, ps, r.String(), again, err)
			}
		}
	})
}

// FuzzCompile compiles arbitrary expressions: each must fail with one of
// the package's errors or give programs the BPF VM takes, whose verdict
// on a frame does not depend on the frame's bytes past its end.
func FuzzCompile(f *testing.F) {
	for _, s := range tcpdumpExprs {
		f.Add(s, []byte{})
	}
	f.Fuzz(func(t *testing.T, expr string, frame []byte) {
		e, err := compilePure(expr)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, errTooLong) {
				t.Fatalf("Compile(%q) = %v: not a package error", expr, err)
			}
			return
		}
		for _, link := range links {
			got := e.Match(frame, link)
			padded := append(append([]byte(nil), frame...), make([]byte, 64)...)
			if got && !e.Match(padded[:len(frame)], link) {
				t.Fatalf("%q: verdict changed on the same bytes", expr)
			}
		}
	})
}
