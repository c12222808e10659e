package filter

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrSyntax is wrapped by every error of an expression Compile cannot
// read; the message says where and what.
var ErrSyntax = errors.New("filter: syntax error")

// ErrUnsupported is wrapped by the error for a part of pcap-filter(7) that
// is outside the subset the pure-Go compiler reads (see the package
// documentation); a build with the pcap tag takes it.
var ErrUnsupported = errors.New("filter: not in the subset this rocescope compiles (build with -tags pcap for libpcap's compiler)")

// node is a parsed expression: and, or, not, or a primitive.
type node interface{ isNode() }

type (
	andNode struct{ a, b node }
	orNode  struct{ a, b node }
	notNode struct{ a node }
	// prim is one primitive with its qualifiers: proto ("" or ether, ip,
	// ip6, arp, rarp, tcp, udp, sctp, icmp, icmp6), dir ("", src, dst),
	// kind ("" for a protocol alone, or host, net, port, portrange,
	// proto, vlan) and the value, if any. tags is the number of vlan
	// primitives before it in the expression: it looks behind that many
	// tags, as libpcap's code does.
	prim struct {
		proto, dir, kind, value string
		tags                    int
	}
)

func (andNode) isNode() {}
func (orNode) isNode()  {}
func (notNode) isNode() {}
func (prim) isNode()    {}

// parser reads an expression's tokens.
type parser struct {
	toks []string
	pos  int
	last *prim // the primitive before, whose qualifiers a bare value takes
	tags int   // vlan primitives so far
}

// tokenize splits an expression into words, parentheses and the
// operators !, && and ||.
func tokenize(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')':
			toks = append(toks, s[i:i+1])
			i++
		case c == '!' && !strings.HasPrefix(s[i:], "!="):
			toks = append(toks, "!")
			i++
		case strings.HasPrefix(s[i:], "&&"), strings.HasPrefix(s[i:], "||"):
			toks = append(toks, s[i:i+2])
			i += 2
		default: // a word: at least this byte ("!=" starts one)
			j := i + 1
			for j < len(s) && !strings.ContainsRune(" \t\n\r()!", rune(s[j])) && !strings.HasPrefix(s[j:], "&&") && !strings.HasPrefix(s[j:], "||") {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks
}

// parse reads a whole expression.
func parse(s string) (node, error) {
	p := &parser{toks: tokenize(s)}
	if len(p.toks) == 0 {
		return nil, fmt.Errorf("%w: empty expression", ErrSyntax)
	}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, p.errorf("unexpected %q", p.toks[p.pos])
	}
	return n, nil
}

func (p *parser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *parser) next() string {
	t := p.peek()
	if t != "" {
		p.pos++
	}
	return t
}

func (p *parser) errorf(format string, a ...any) error {
	return fmt.Errorf("%w: at word %d: %s", ErrSyntax, p.pos+1, fmt.Sprintf(format, a...))
}

// expr reads terms joined by and and or, which group from the left with
// the same precedence.
func (p *parser) expr() (node, error) {
	n, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		var or bool
		switch p.peek() {
		case "and", "&&":
		case "or", "||":
			or = true
		default:
			return n, nil
		}
		p.next()
		m, err := p.term()
		if err != nil {
			return nil, err
		}
		if or {
			n = orNode{n, m}
		} else {
			n = andNode{n, m}
		}
	}
}

// term reads a negation, a parenthesized expression or a primitive.
func (p *parser) term() (node, error) {
	switch t := p.peek(); t {
	case "":
		return nil, p.errorf("expression ends where a primitive is expected")
	case "not", "!":
		p.next()
		n, err := p.term()
		if err != nil {
			return nil, err
		}
		return notNode{n}, nil
	case "(":
		p.next()
		n, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.next() != ")" {
			return nil, p.errorf("missing )")
		}
		return n, nil
	case ")", "and", "&&", "or", "||":
		return nil, p.errorf("unexpected %q", t)
	}
	return p.primitive()
}

// Words of the grammar.
var (
	protos = map[string]bool{"ether": true, "ip": true, "ip6": true, "arp": true, "rarp": true,
		"tcp": true, "udp": true, "sctp": true, "icmp": true, "icmp6": true}
	kinds = map[string]bool{"host": true, "net": true, "port": true, "portrange": true, "proto": true}
	// outside lists words of pcap-filter(7) outside the subset.
	outside = map[string]bool{"gateway": true, "less": true, "greater": true, "len": true, "broadcast": true,
		"multicast": true, "mpls": true, "pppoed": true, "pppoes": true, "geneve": true, "protochain": true,
		"inbound": true, "outbound": true, "ifname": true, "on": true, "rnr": true, "reason": true, "rset": true,
		"ruleset": true, "srnr": true, "subrule": true, "action": true, "wlan": true, "type": true, "subtype": true,
		"dir": true, "atalk": true, "aarp": true, "decnet": true, "iso": true, "stp": true, "ipx": true,
		"netbeui": true, "lat": true, "moprc": true, "mopdl": true, "fddi": true, "tr": true, "ah": true, "esp": true,
		"vrrp": true, "carp": true, "igmp": true, "igrp": true, "pim": true, "llc": true, "ra": true, "ta": true,
		"addr1": true, "addr2": true, "addr3": true, "addr4": true, "link": true, "slip": true, "clnp": true,
		"esis": true, "isis": true, "l1": true, "l2": true, "iih": true, "lsp": true, "snp": true, "csnp": true, "psnp": true}
)

// primitive reads one primitive: [proto] [dir] [kind] [value], or vlan
// [ID], or a value alone that takes the qualifiers of the one before.
func (p *parser) primitive() (node, error) {
	start := p.pos
	t := p.next()
	if t == "vlan" {
		pr := prim{kind: "vlan", tags: p.tags}
		if v := p.peek(); v != "" && isNumber(v) {
			pr.value = p.next()
		}
		p.tags++
		return pr, nil
	}
	if outside[t] || strings.ContainsAny(t, "[]=<>") {
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, t)
	}
	var pr prim
	if protos[t] {
		pr.proto = t
		t = p.next()
	}
	if t == "src" || t == "dst" {
		pr.dir = t
		if w := p.peek(); (w == "or" || w == "and") && p.pos+1 < len(p.toks) && p.toks[p.pos+1] == "dst" {
			return nil, fmt.Errorf("%w: \"src %s dst\" (leave out src and dst for either)", ErrUnsupported, w)
		}
		t = p.next()
	}
	if kinds[t] {
		pr.kind = t
		t = p.next()
	}
	switch {
	case pr.kind == "" && pr.dir == "" && pr.proto != "" && (t == "" || isOperator(t)):
		// A protocol alone: "udp", "ip6".
		if t != "" {
			p.pos--
		}
		pr.tags = p.tags
		p.last = nil
		return pr, nil
	case t == "" || isOperator(t) || protos[t] || kinds[t] || t == "src" || t == "dst":
		end := p.pos
		if t != "" {
			end--
		}
		words := strings.Join(p.toks[start:end], " ")
		p.pos = start
		return nil, p.errorf("a value is missing after %q", words)
	case outside[t]:
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, t)
	}
	pr.value = t
	if start == p.pos-1 && p.last != nil {
		// A value alone: the qualifiers of the primitive before.
		pr.proto, pr.dir, pr.kind = p.last.proto, p.last.dir, p.last.kind
	}
	if pr.kind == "" {
		// An address without host or net: "src 10.0.0.1", "ether dst MAC".
		switch _, err := netip.ParseAddr(pr.value); {
		case strings.Contains(pr.value, "/"):
			pr.kind = "net"
		case err == nil, pr.proto == "ether":
			pr.kind = "host"
		default:
			p.pos = start
			return nil, p.errorf("%q: want host, net, port or portrange before it", pr.value)
		}
	}
	pr.tags = p.tags
	last := pr
	p.last = &last
	return pr, nil
}

// isOperator reports whether t joins or closes primitives.
func isOperator(t string) bool {
	switch t {
	case "and", "&&", "or", "||", ")", "not", "!", "(":
		return true
	}
	return false
}

// isNumber reports whether t is a decimal or 0x hexadecimal number.
func isNumber(t string) bool {
	_, err := parseUint(t, 1<<32-1)
	return err == nil
}
