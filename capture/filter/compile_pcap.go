//go:build pcap

package filter

import (
	"fmt"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"
	"golang.org/x/net/bpf"

	"github.com/rocescope/rocescope/decode"
)

// dlts are libpcap's data link types (DLT_*) of the link types an
// expression applies to, where they differ from the pcap link type.
var dlts = map[decode.LinkType]layers.LinkType{decode.LinkRaw: 12} // DLT_RAW on Linux

// compile compiles with libpcap (pcap_compile), which takes every
// expression tcpdump takes. A link type libpcap refuses the expression
// for (ether host on raw IP) never matches it; an expression refused for
// Ethernet is an error. gopacket passes libpcap link types below 256
// only: for SLL2 (276) the pure-Go program is used, when the expression
// is in its subset.
func compile(text string) (*Expr, error) {
	pure, perr := compilePure(text)
	e := &Expr{text: text, vlan: containsWord(text, "vlan"), progs: make(map[decode.LinkType]*program, len(links))}
	for _, link := range links {
		dlt, ok := dlts[link]
		if !ok && link > 255 {
			if perr == nil {
				e.progs[link] = pure.progs[link]
			}
			continue
		}
		if !ok {
			dlt = layers.LinkType(link)
		}
		raw, err := pcap.CompileBPFFilter(dlt, Accept, text)
		if err != nil {
			if link == decode.LinkEthernet {
				return nil, fmt.Errorf("%w: libpcap: %v", ErrSyntax, err)
			}
			continue
		}
		insns := make([]bpf.RawInstruction, len(raw))
		for i, r := range raw {
			insns[i] = bpf.RawInstruction{Op: r.Code, Jt: r.Jt, Jf: r.Jf, K: r.K}
		}
		prog, ok := bpf.Disassemble(insns)
		if !ok {
			return nil, fmt.Errorf("filter: %q: libpcap's program for link type %d has instructions golang.org/x/net/bpf does not run", text, link)
		}
		if err := e.add(link, prog); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// containsWord reports whether text has word as a word of its own.
func containsWord(text, word string) bool {
	for _, w := range tokenize(text) {
		if w == word {
			return true
		}
	}
	return false
}
