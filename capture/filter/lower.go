package filter

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"

	"github.com/rocescope/rocescope/decode"
)

// test is a lowered expression: a tree of checks on the frame's bytes.
type test interface{ isTest() }

type (
	allOf  []test // every test holds (none: true)
	anyOf  []test // some test holds (none: false)
	negate struct{ t test }
	// check loads size bytes at off (plus the length of the IPv4 header
	// at ihlAt, when afterIPv4 is set), masks them when mask is not 0, and
	// compares them with val.
	check struct {
		off       uint32
		size      int
		afterIPv4 bool
		ihlAt     uint32
		mask      uint32
		cond      bpf.JumpTest
		val       uint32
	}
)

func (allOf) isTest()  {}
func (anyOf) isTest()  {}
func (negate) isTest() {}
func (check) isTest()  {}

var (
	always = allOf{}
	never  = anyOf{}
)

// layout is where a link type puts its headers.
type layout struct {
	typeOff  int  // offset of the EtherType (or protocol) field; -1 for raw IP
	nh       int  // offset of the network header
	ethernet bool // Ethernet addresses at 0 and 6, VLAN tags possible
}

// layoutOf returns the layout of link, or false for a link type an
// expression does not apply to.
func layoutOf(link decode.LinkType) (layout, bool) {
	switch link {
	case decode.LinkEthernet:
		return layout{typeOff: 12, nh: 14, ethernet: true}, true
	case decode.LinkLinuxSLL:
		return layout{typeOff: 14, nh: 16}, true
	case decode.LinkLinuxSLL2:
		return layout{typeOff: 0, nh: 20}, true
	case decode.LinkRaw, decode.LinkIPv4, decode.LinkIPv6:
		return layout{typeOff: -1, nh: 0}, true
	}
	return layout{}, false
}

// EtherTypes and IP protocols the primitives name.
const (
	typeIPv4     = 0x0800
	typeIPv6     = 0x86dd
	typeARP      = 0x0806
	typeRARP     = 0x8035
	protoTCP     = 6
	protoUDP     = 17
	protoSCTP    = 132
	protoICMP    = 1
	protoICMPv6  = 58
	protoFragIP6 = 44
)

var etherTypeNames = map[string]uint32{"ip": typeIPv4, "ip6": typeIPv6, "arp": typeARP, "rarp": typeRARP}

var ipProtoNames = map[string]uint32{"tcp": protoTCP, "udp": protoUDP, "sctp": protoSCTP, "icmp": protoICMP, "icmp6": protoICMPv6}

// lowerer turns primitives into tests for one link layout.
type lowerer struct{ l layout }

func (lw lowerer) lower(n node) (test, error) {
	switch n := n.(type) {
	case andNode:
		a, b, err := lw.lowerBoth(n.a, n.b)
		return allOf{a, b}, err
	case orNode:
		a, b, err := lw.lowerBoth(n.a, n.b)
		return anyOf{a, b}, err
	case notNode:
		a, err := lw.lower(n.a)
		if err != nil {
			return nil, err
		}
		return negate{a}, nil
	}
	return lw.prim(n.(prim))
}

// lowerBoth lowers the two sides of an and or an or.
func (lw lowerer) lowerBoth(x, y node) (a, b test, err error) {
	if a, err = lw.lower(x); err != nil {
		return nil, nil, err
	}
	if b, err = lw.lower(y); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// at returns the layout for a primitive behind tags VLAN tags.
func (lw lowerer) at(tags int) layout {
	l := lw.l
	if tags > 0 && l.ethernet {
		l.typeOff += 4 * tags
		l.nh += 4 * tags
	}
	return l
}

// etherType tests the EtherType t; for raw IP the version nibble.
func etherType(l layout, t uint32) test {
	if l.typeOff >= 0 {
		return check{off: uint32(l.typeOff), size: 2, cond: bpf.JumpEqual, val: t}
	}
	switch t {
	case typeIPv4:
		return check{off: 0, size: 1, mask: 0xf0, cond: bpf.JumpEqual, val: 0x40}
	case typeIPv6:
		return check{off: 0, size: 1, mask: 0xf0, cond: bpf.JumpEqual, val: 0x60}
	}
	return never
}

// ipProto tests IPv4 protocol or IPv6 next header v (directly, or behind
// a fragment header, as libpcap's "ip6 proto" does); v4 and v6 say which.
func ipProto(l layout, v uint32, v4, v6 bool) test {
	var t anyOf
	nh := uint32(l.nh)
	if v4 {
		t = append(t, allOf{etherType(l, typeIPv4), check{off: nh + 9, size: 1, cond: bpf.JumpEqual, val: v}})
	}
	if v6 {
		t = append(t, allOf{etherType(l, typeIPv6), anyOf{
			check{off: nh + 6, size: 1, cond: bpf.JumpEqual, val: v},
			allOf{check{off: nh + 6, size: 1, cond: bpf.JumpEqual, val: protoFragIP6}, check{off: nh + 40, size: 1, cond: bpf.JumpEqual, val: v}},
		}})
	}
	return t
}

// either returns the test of the source field, the destination field, or
// either, as dir says.
func either(dir string, src, dst test) test {
	switch dir {
	case "src":
		return src
	case "dst":
		return dst
	}
	return anyOf{src, dst}
}

func (lw lowerer) prim(p prim) (test, error) {
	l := lw.at(p.tags)
	switch p.kind {
	case "vlan":
		if !l.ethernet {
			return never, nil
		}
		tag := anyOf{
			check{off: uint32(l.typeOff), size: 2, cond: bpf.JumpEqual, val: 0x8100},
			check{off: uint32(l.typeOff), size: 2, cond: bpf.JumpEqual, val: 0x88a8},
			check{off: uint32(l.typeOff), size: 2, cond: bpf.JumpEqual, val: 0x9100},
		}
		if p.value == "" {
			return tag, nil
		}
		id, err := parseUint(p.value, 4095)
		if err != nil {
			return nil, fmt.Errorf("%w: vlan %q: want an ID from 0 to 4095", ErrSyntax, p.value)
		}
		return allOf{tag, check{off: uint32(l.typeOff) + 2, size: 2, mask: 0x0fff, cond: bpf.JumpEqual, val: id}}, nil
	case "":
		if v, ok := etherTypeNames[p.proto]; ok {
			return etherType(l, v), nil
		}
		v := ipProtoNames[p.proto]
		return ipProto(l, v, p.proto != "icmp6", p.proto != "icmp"), nil
	case "proto":
		return lw.proto(l, p)
	case "host", "net":
		return lw.address(l, p)
	case "port", "portrange":
		return lw.port(l, p)
	}
	return nil, fmt.Errorf("%w: %q", ErrSyntax, p.kind)
}

// proto lowers "ether proto N", "ip proto N", "ip6 proto N", "proto N".
func (lw lowerer) proto(l layout, p prim) (test, error) {
	if p.dir != "" {
		return nil, fmt.Errorf("%w: %s proto: src and dst do not apply", ErrSyntax, p.dir)
	}
	if p.proto == "ether" {
		v, ok := etherTypeNames[p.value]
		if !ok {
			var err error
			if v, err = parseUint(p.value, 0xffff); err != nil {
				return nil, fmt.Errorf("%w: ether proto %q: want a number or ip, ip6, arp, rarp", ErrSyntax, p.value)
			}
		}
		return etherType(l, v), nil
	}
	v, ok := ipProtoNames[strings.TrimPrefix(p.value, "\\")]
	if !ok {
		var err error
		if v, err = parseUint(p.value, 255); err != nil {
			return nil, fmt.Errorf("%w: proto %q: want a number from 0 to 255 or tcp, udp, sctp, icmp, icmp6", ErrSyntax, p.value)
		}
	}
	switch p.proto {
	case "", "ip", "ip6":
		return ipProto(l, v, p.proto != "ip6", p.proto != "ip"), nil
	}
	return nil, fmt.Errorf("%w: %s proto: want ether, ip, ip6 or nothing before proto", ErrSyntax, p.proto)
}

// address lowers host and net, and a bare address.
func (lw lowerer) address(l layout, p prim) (test, error) {
	if p.proto == "ether" {
		return lw.etherHost(l, p)
	}
	var prefix netip.Prefix
	var err error
	if p.kind == "net" || strings.Contains(p.value, "/") {
		if prefix, err = netip.ParsePrefix(p.value); err != nil {
			return nil, fmt.Errorf("%w: net %q: want an address/length such as 10.0.0.0/8", ErrSyntax, p.value)
		}
		if prefix.Masked() != prefix {
			return nil, fmt.Errorf("%w: net %s: bits set past the length (%s)", ErrSyntax, p.value, prefix.Masked())
		}
	} else {
		a, err := netip.ParseAddr(p.value)
		if err != nil {
			if _, merr := net.ParseMAC(p.value); merr == nil {
				return nil, fmt.Errorf("%w: host %s: a MAC address needs \"ether host\"", ErrSyntax, p.value)
			}
			return nil, fmt.Errorf("%w: host %q: host names are not looked up; give an IPv4 or IPv6 address", ErrUnsupported, p.value)
		}
		prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
	}
	nh := uint32(l.nh)
	if prefix.Addr().Is4() {
		ip := func(src, dst uint32) test {
			return either(p.dir, v4match(src, prefix), v4match(dst, prefix))
		}
		var t anyOf
		switch p.proto {
		case "", "ip":
			t = append(t, allOf{etherType(l, typeIPv4), ip(nh+12, nh+16)})
		}
		for name, et := range map[string]uint32{"arp": typeARP, "rarp": typeRARP} {
			if p.proto == "" || p.proto == name {
				t = append(t, allOf{etherType(l, et), ip(nh+14, nh+24)})
			}
		}
		if len(t) == 0 {
			return nil, fmt.Errorf("%w: %s %s: want ip, arp, rarp or nothing before an IPv4 host or net", ErrSyntax, p.proto, p.kind)
		}
		return t, nil
	}
	if p.proto != "" && p.proto != "ip6" {
		return nil, fmt.Errorf("%w: %s %s: want ip6 or nothing before an IPv6 host or net", ErrSyntax, p.proto, p.kind)
	}
	return allOf{etherType(l, typeIPv6), either(p.dir, v6match(nh+8, prefix), v6match(nh+24, prefix))}, nil
}

// v4match tests the IPv4 address at off against prefix.
func v4match(off uint32, prefix netip.Prefix) test {
	a := prefix.Addr().As4()
	mask := uint32(0)
	if prefix.Bits() > 0 {
		mask = ^uint32(0) << (32 - prefix.Bits())
	}
	if mask == 0 {
		return always
	}
	c := check{off: off, size: 4, cond: bpf.JumpEqual, val: binary.BigEndian.Uint32(a[:])}
	if mask != ^uint32(0) {
		c.mask = mask
	}
	return c
}

// v6match tests the IPv6 address at off against prefix, word by word.
func v6match(off uint32, prefix netip.Prefix) test {
	a := prefix.Addr().As16()
	var t allOf
	for w := range 4 {
		bits := min(max(prefix.Bits()-32*w, 0), 32)
		if bits == 0 {
			break
		}
		c := check{off: off + uint32(4*w), size: 4, cond: bpf.JumpEqual, val: binary.BigEndian.Uint32(a[4*w:])}
		if bits < 32 {
			c.mask = ^uint32(0) << (32 - bits)
		}
		t = append(t, c)
	}
	return t
}

// etherHost lowers "ether host MAC" and its src and dst forms.
func (lw lowerer) etherHost(l layout, p prim) (test, error) {
	if p.kind != "host" && p.kind != "" {
		return nil, fmt.Errorf("%w: ether %s: want ether host, ether src, ether dst or ether proto", ErrSyntax, p.kind)
	}
	mac, err := net.ParseMAC(p.value)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("%w: ether host %q: want a MAC address such as 02:00:00:00:00:01", ErrSyntax, p.value)
	}
	if !l.ethernet {
		return never, nil
	}
	at := func(off uint32) test {
		return allOf{
			check{off: off, size: 4, cond: bpf.JumpEqual, val: binary.BigEndian.Uint32(mac[0:4])},
			check{off: off + 4, size: 2, cond: bpf.JumpEqual, val: uint32(binary.BigEndian.Uint16(mac[4:6]))},
		}
	}
	return either(p.dir, at(6), at(0)), nil
}

// port lowers port and portrange: TCP, UDP or SCTP (or the protocol
// named) over IPv4, in a first fragment, and over IPv6 with the transport
// header right after the IPv6 header, as libpcap does.
func (lw lowerer) port(l layout, p prim) (test, error) {
	lo, hi, err := portRange(p)
	if err != nil {
		return nil, err
	}
	var protos []uint32
	switch p.proto {
	case "":
		protos = []uint32{protoTCP, protoUDP, protoSCTP}
	case "tcp", "udp", "sctp":
		protos = []uint32{ipProtoNames[p.proto]}
	default:
		return nil, fmt.Errorf("%w: %s %s: want tcp, udp, sctp or nothing before port", ErrSyntax, p.proto, p.kind)
	}
	nh := uint32(l.nh)
	in := func(off uint32, afterIPv4 bool) test {
		if lo == hi {
			return check{off: off, size: 2, afterIPv4: afterIPv4, ihlAt: nh, cond: bpf.JumpEqual, val: lo}
		}
		return allOf{
			check{off: off, size: 2, afterIPv4: afterIPv4, ihlAt: nh, cond: bpf.JumpGreaterOrEqual, val: lo},
			check{off: off, size: 2, afterIPv4: afterIPv4, ihlAt: nh, cond: bpf.JumpLessOrEqual, val: hi},
		}
	}
	var v4, v6 anyOf
	for _, pr := range protos {
		v4 = append(v4, check{off: nh + 9, size: 1, cond: bpf.JumpEqual, val: pr})
		v6 = append(v6, check{off: nh + 6, size: 1, cond: bpf.JumpEqual, val: pr})
	}
	return anyOf{
		allOf{etherType(l, typeIPv4), v4,
			negate{check{off: nh + 6, size: 2, cond: bpf.JumpBitsSet, val: 0x1fff}},
			either(p.dir, in(nh, true), in(nh+2, true))},
		allOf{etherType(l, typeIPv6), v6, either(p.dir, in(nh+40, false), in(nh+42, false))},
	}, nil
}

// portRange reads the value of a port or portrange primitive.
func portRange(p prim) (lo, hi uint32, err error) {
	if p.kind == "portrange" {
		a, b, ok := strings.Cut(p.value, "-")
		lo, err1 := parseUint(a, 65535)
		hi, err2 := parseUint(b, 65535)
		if !ok || err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("%w: portrange %q: want two ports such as 4791-4792", ErrSyntax, p.value)
		}
		return min(lo, hi), max(lo, hi), nil
	}
	v, err := parseUint(p.value, 65535)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: port %q: want a number from 0 to 65535 (service names are not looked up)", ErrSyntax, p.value)
	}
	return v, v, nil
}

// parseUint reads a decimal or 0x-hexadecimal number up to max.
func parseUint(s string, max uint64) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil || v > max {
		return 0, fmt.Errorf("%q: want a number up to %d", s, max)
	}
	return uint32(v), nil
}
