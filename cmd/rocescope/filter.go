package main

import (
	"errors"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture/filter"
)

// filterHelp teaches the filters in the --help of replay, capture and dump.
const filterHelp = `
Filters (frames they remove are counted in "filtered", never lost):
  -f, --filter EXPR   a capture filter in tcpdump's syntax, on the frames'
                      bytes: 'udp port 4791 and host 10.0.0.5', 'vlan 100',
                      'not arp', 'ip6 net fd00::/16' (capture also takes it
                      as trailing arguments, as tcpdump does)
  --src, --dst, --addr ADDR[/LEN],...   RoCE frames from, to, or from or to
                      these addresses (IPv4, IPv6, GIDs; also RoCEv1 and
                      InfiniBand frames, and frames inside ERSPAN)
  --qp QP,...         RoCE frames to these QPs (BTH destination QP) or from
                      them (DETH source QP, UD); hex as Wireshark shows them
                      (0x4bdaaf) or decimal. Both directions of an RC
                      connection: both QPs, --qp 0x4bdaaf,0x9d5d7d
  --op CLASS,...      RoCE frames of these opcode classes: send, write,
                      read (requests and responses), atomic, ack (ACK, NAK,
                      atomic ACK), cnp; or opcode numbers (0x11)
  Each RoCE filter flag takes a list, any of whose values matches; given
  together they must all match, and then only RoCE frames pass (PFC, ARP
  and other frames are filtered). Frames that fail to decode stay counted
  as malformed or truncated.`

// filterOptions are the filter flags.
type filterOptions struct {
	expr string
	roce filter.RoCE
}

// bind registers the filter flags on fs.
func (o *filterOptions) bind(fs *pflag.FlagSet) {
	fs.StringVarP(&o.expr, "filter", "f", "", "capture filter in tcpdump's syntax, such as 'udp port 4791 and host 10.0.0.5' (see Filters)")
	fs.Var(prefixesFlag{&o.roce.Src}, "src", "RoCE frames from these addresses or networks, separated by commas")
	fs.Var(prefixesFlag{&o.roce.Dst}, "dst", "RoCE frames to these addresses or networks")
	fs.Var(prefixesFlag{&o.roce.Addr}, "addr", "RoCE frames from or to these addresses or networks")
	fs.Var(qpsFlag{&o.roce.QPs}, "qp", "RoCE frames to or from these QPs, hex (0x4bdaaf) or decimal, separated by commas")
	fs.Var(opsFlag{&o.roce.Ops}, "op", "RoCE frames of these opcode classes: send, write, read, atomic, ack, cnp, or opcode numbers")
}

// set compiles the filters; expr is the expression of --filter or of a
// capture's trailing arguments. It returns nil when no filter is given.
func (o *filterOptions) set(expr string) (*filter.Set, error) {
	s := &filter.Set{}
	if expr != "" {
		e, err := filter.Compile(expr)
		if err != nil {
			return nil, usagef("filter %q: %s", expr, strings.TrimPrefix(err.Error(), "filter: "))
		}
		s.Expr = e
	}
	if !o.roce.IsZero() {
		s.RoCE = &o.roce
	}
	if s.Empty() {
		return nil, nil
	}
	return s, nil
}

// describeFilter says what a set selects, for the start-up line.
func describeFilter(s *filter.Set) string {
	if s.Empty() {
		return ""
	}
	var parts []string
	if s.Expr != nil {
		parts = append(parts, "'"+s.Expr.String()+"'")
	}
	if !s.RoCE.IsZero() {
		parts = append(parts, s.RoCE.String())
	}
	return strings.Join(parts, " and ")
}

// prefixesFlag is a list of addresses or networks; each use adds to it.
type prefixesFlag struct{ p *[]netip.Prefix }

func (f prefixesFlag) String() string {
	if f.p == nil {
		return ""
	}
	s := make([]string, len(*f.p))
	for i, p := range *f.p {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (f prefixesFlag) Type() string { return "addrs" }

func (f prefixesFlag) Set(s string) error {
	ps, err := filter.ParsePrefixes(s)
	if err != nil {
		return err
	}
	*f.p = append(*f.p, ps...)
	return nil
}

// qpsFlag is a list of QP numbers; each use adds to it.
type qpsFlag struct{ q *[]uint32 }

func (f qpsFlag) String() string {
	if f.q == nil || len(*f.q) == 0 {
		return ""
	}
	return (&filter.RoCE{QPs: *f.q}).String()[len("--qp "):]
}

func (f qpsFlag) Type() string { return "qps" }

func (f qpsFlag) Set(s string) error {
	qps, err := filter.ParseQPs(s)
	if err != nil {
		return err
	}
	*f.q = append(*f.q, qps...)
	return nil
}

// opsFlag is a set of opcode classes and opcodes; each use adds to it.
type opsFlag struct{ o *filter.Ops }

func (f opsFlag) String() string {
	if f.o == nil {
		return ""
	}
	return f.o.String()
}

func (f opsFlag) Type() string { return "ops" }

func (f opsFlag) Set(s string) error {
	ops, err := filter.ParseOps(s)
	if err != nil {
		return err
	}
	f.o.Add(ops)
	return nil
}

// errFilterTwice is the mistake of giving a capture filter both ways.
var errFilterTwice = errors.New("give the capture filter once: as --filter or as trailing arguments, not both")
