package filter

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/rocescope/rocescope/decode"
)

// RoCE selects RoCE frames (with a BTH) by what their decoded headers
// say. A nil or zero RoCE matches every frame; otherwise only RoCE frames
// for which every non-empty field has a matching value.
type RoCE struct {
	Src  []netip.Prefix // the source address is in one of these
	Dst  []netip.Prefix // the destination address is in one of these
	Addr []netip.Prefix // the source or the destination address is
	// QPs are queue pair numbers: the BTH's destination QP, or the DETH's
	// source QP (UD), is one of them.
	QPs []uint32
	Ops Ops // the opcode is of one of these classes
}

// Ops is a set of opcode classes, a bit each, and single opcodes.
type Ops struct {
	classes uint8
	codes   [4]uint64 // opcodes named by number, a bit each
}

// Opcode classes.
const (
	opSend   = 1 << iota // SEND First/Middle/Last/Only, with immediate or invalidate (RC, UC, RD, UD, XRC)
	opWrite              // RDMA WRITE First/Middle/Last/Only, with immediate
	opRead               // RDMA READ request and response
	opAtomic             // compare-and-swap, fetch-and-add, atomic write, and the atomic acknowledgement
	opAck                // Acknowledge (ACK, NAK, RNR NAK) and atomic acknowledge
	opCNP                // congestion notification packet
)

// opClasses names the classes for ParseOps.
var opClasses = []struct {
	name string
	bit  uint8
}{{"send", opSend}, {"write", opWrite}, {"read", opRead}, {"atomic", opAtomic}, {"ack", opAck}, {"cnp", opCNP}}

// Add adds the classes and opcodes of x to o.
func (o *Ops) Add(x Ops) {
	o.classes |= x.classes
	for i := range o.codes {
		o.codes[i] |= x.codes[i]
	}
}

// IsZero reports whether no class or opcode is in the set.
func (o Ops) IsZero() bool { return o == Ops{} }

// Has reports whether opcode op is in the set, by class or by number.
func (o Ops) Has(op decode.Opcode) bool {
	if o.codes[op>>6]&(1<<(op&63)) != 0 {
		return true
	}
	c := o.classes
	if c == 0 {
		return false
	}
	low := op & 0x1f
	svc := op.Service()
	switch {
	case c&opCNP != 0 && op.IsCNP(),
		c&opRead != 0 && (op.IsReadRequest() || op.IsReadResponse()),
		c&opAtomic != 0 && (op.IsAtomic() || low == 0x12 && op.IsAcknowledge()),
		c&opAck != 0 && op.IsAcknowledge():
		return true
	case svc == decode.ServiceNone || svc == decode.ServiceCNP:
		return false
	case c&opSend != 0 && (low <= 0x05 || low == 0x16 || low == 0x17):
		return true
	case c&opWrite != 0 && low >= 0x06 && low <= 0x0b:
		return true
	}
	return false
}

// ParseOps reads a list of opcode classes and opcodes separated by
// commas: send, write, read, atomic, ack, cnp, or an opcode number
// (decimal or 0x hexadecimal, 0 to 255), as in "read,write,0x81".
func ParseOps(s string) (Ops, error) {
	var o Ops
	for part := range strings.SplitSeq(s, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		found := false
		for _, c := range opClasses {
			if part == c.name {
				o.classes |= c.bit
				found = true
			}
		}
		if found {
			continue
		}
		v, err := strconv.ParseUint(part, 0, 8)
		if err != nil {
			return Ops{}, fmt.Errorf("%q: want send, write, read, atomic, ack, cnp or an opcode from 0 to 255, separated by commas", part)
		}
		o.codes[v>>6] |= 1 << (v & 63)
	}
	return o, nil
}

// String lists the set as ParseOps reads it.
func (o Ops) String() string {
	var parts []string
	for _, c := range opClasses {
		if o.classes&c.bit != 0 {
			parts = append(parts, c.name)
		}
	}
	for op := range 256 {
		if o.codes[op>>6]&(1<<(op&63)) != 0 {
			parts = append(parts, fmt.Sprintf("0x%02x", op))
		}
	}
	return strings.Join(parts, ",")
}

// ParseQPs reads queue pair numbers separated by commas, each decimal or
// 0x hexadecimal (as Wireshark shows them), up to 0xffffff.
func ParseQPs(s string) ([]uint32, error) {
	var qps []uint32
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		v, err := strconv.ParseUint(part, 0, 32)
		if err != nil || v > 0xffffff {
			return nil, fmt.Errorf("%q: want a QP number up to 0xffffff, decimal or 0x hexadecimal (0x4bdaaf), separated by commas", part)
		}
		qps = append(qps, uint32(v))
	}
	return qps, nil
}

// ParsePrefixes reads IPv4 or IPv6 addresses, or networks (address/length),
// separated by commas. A GID is written as an IPv6 address.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if strings.Contains(part, "/") {
			p, err := netip.ParsePrefix(part)
			if err != nil {
				return nil, fmt.Errorf("%q: want an address or a network such as 10.0.0.0/24: %w", part, err)
			}
			ps = append(ps, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("%q: want an IPv4 or IPv6 address (or GID), or a network such as 10.0.0.0/24", part)
		}
		a = a.Unmap().WithZone("")
		ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
	}
	return ps, nil
}

// IsZero reports whether r selects nothing out: nil, or no field set.
func (r *RoCE) IsZero() bool {
	return r == nil || len(r.Src) == 0 && len(r.Dst) == 0 && len(r.Addr) == 0 && len(r.QPs) == 0 && r.Ops.IsZero()
}

// Match reports whether the decoded frame p matches. p must have decoded
// without error.
func (r *RoCE) Match(p *decode.Packet) bool {
	if r.IsZero() {
		return true
	}
	if !p.IsRoCE() {
		return false
	}
	if len(r.QPs) > 0 && !r.qp(p) {
		return false
	}
	if !r.Ops.IsZero() && !r.Ops.Has(p.BTH.Opcode) {
		return false
	}
	if len(r.Src) == 0 && len(r.Dst) == 0 && len(r.Addr) == 0 {
		return true
	}
	src, dst := p.Src.Netip(), p.Dst.Netip()
	return (len(r.Src) == 0 || in(r.Src, src)) &&
		(len(r.Dst) == 0 || in(r.Dst, dst)) &&
		(len(r.Addr) == 0 || in(r.Addr, src) || in(r.Addr, dst))
}

// qp reports whether p's destination QP, or its DETH's source QP, is one
// of r.QPs.
func (r *RoCE) qp(p *decode.Packet) bool {
	for _, q := range r.QPs {
		if p.BTH.DestQP == q || p.Headers&decode.HasDETH != 0 && p.DETH.SrcQP == q {
			return true
		}
	}
	return false
}

// in reports whether a is in one of ps.
func in(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// String describes the filter as the flags that set it would.
func (r *RoCE) String() string {
	if r.IsZero() {
		return ""
	}
	var parts []string
	list := func(flag string, ps []netip.Prefix) {
		if len(ps) == 0 {
			return
		}
		s := make([]string, len(ps))
		for i, p := range ps {
			if p.Bits() == p.Addr().BitLen() {
				s[i] = p.Addr().String()
			} else {
				s[i] = p.String()
			}
		}
		parts = append(parts, flag+" "+strings.Join(s, ","))
	}
	list("--src", r.Src)
	list("--dst", r.Dst)
	list("--addr", r.Addr)
	if len(r.QPs) > 0 {
		s := make([]string, len(r.QPs))
		for i, q := range r.QPs {
			s[i] = fmt.Sprintf("0x%x", q)
		}
		parts = append(parts, "--qp "+strings.Join(s, ","))
	}
	if !r.Ops.IsZero() {
		parts = append(parts, "--op "+r.Ops.String())
	}
	return strings.Join(parts, " ")
}

// Set is the filters of a run: an expression on the frames' bytes and a
// RoCE filter on the decoded frames. Nil fields select every frame.
type Set struct {
	Expr *Expr
	RoCE *RoCE
}

// Frame reports whether the frame's bytes match the expression.
func (s *Set) Frame(data []byte, link decode.LinkType) bool {
	return s == nil || s.Expr == nil || s.Expr.Match(data, link)
}

// Packet reports whether the decoded frame p matches the RoCE filter.
func (s *Set) Packet(p *decode.Packet) bool {
	return s == nil || s.RoCE.Match(p)
}

// Empty reports whether the set selects every frame.
func (s *Set) Empty() bool { return s == nil || s.Expr == nil && s.RoCE.IsZero() }
