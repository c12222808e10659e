package decode_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/tsharktest"
)

// The reference for every field the decoder reads is Wireshark's
// infiniband dissector, run as tshark 4.0. These tests decode each frame of
// a capture and compare it with what tshark prints for the same frame,
// field by field, in both directions: a header the decoder found must be
// in tshark's output with the same values, and a header tshark shows must
// have been found by the decoder. Where Wireshark is wrong, the difference
// is a named exception below, with the reason, and the test checks that
// Wireshark shows exactly the wrong thing the reason predicts.

// tsharkFields are the fields read from tshark, in output column order.
var tsharkFields = []string{
	"frame.number", "frame.len", "frame.cap_len", "frame.protocols",
	"eth.src", "eth.dst", "sll.src.eth", "vlan.id", "ieee8021ad.id", "vlan.priority", "ieee8021ad.priority",
	"ip.src", "ip.dst", "ip.dsfield.dscp", "ip.dsfield.ecn", "ip.ttl", "ip.len",
	"ipv6.src", "ipv6.dst", "ipv6.tclass.dscp", "ipv6.tclass.ecn", "ipv6.hlim", "ipv6.plen",
	"udp.srcport", "udp.dstport", "udp.length",
	"gre.proto", "erspan.spanid",
	"macc.opcode", "macc.pause_time", "macc.cbfc.enbv",
	"macc.cbfc.pause_time.c0", "macc.cbfc.pause_time.c1", "macc.cbfc.pause_time.c2", "macc.cbfc.pause_time.c3",
	"macc.cbfc.pause_time.c4", "macc.cbfc.pause_time.c5", "macc.cbfc.pause_time.c6", "macc.cbfc.pause_time.c7",
	"infiniband.lrh.vl", "infiniband.lrh.lver", "infiniband.lrh.sl", "infiniband.lrh.lnh",
	"infiniband.lrh.dlid", "infiniband.lrh.pktlen", "infiniband.lrh.slid",
	"infiniband.grh.ipver", "infiniband.grh.tclass", "infiniband.grh.flowlabel", "infiniband.grh.paylen",
	"infiniband.grh.nxthdr", "infiniband.grh.hoplmt", "infiniband.grh.sgid", "infiniband.grh.dgid",
	"infiniband.bth", "infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt",
	"infiniband.bth.tver", "infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.a",
	"infiniband.bth.reserved7", "infiniband.bth.psn",
	"infiniband.rdeth.eecnxt", "infiniband.deth.q_key", "infiniband.deth.srcqp",
	"infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
	"infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
	"infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.atomicacketh.origremdt",
	"infiniband.immdt", "infiniband.ieth", "infiniband.invariant.crc",
	"infiniband.mad.mgmtclass", "infiniband.mad.attributeid",
	"infiniband.cm.req", "infiniband.cm.req.localqpn", "infiniband.cm.req.startpsn",
	"infiniband.cm.rep", "infiniband.cm.rep.remotecommid", "infiniband.cm.rep.localqpn", "infiniband.cm.rep.startpsn",
	"infiniband.cm.rtu.localcommid", "infiniband.cm.rtu.remotecommid",
	"infiniband.cm.dreq.localcommid", "infiniband.cm.dreq.remotecommid",
	"infiniband.cm.drsp.localcommid", "infiniband.cm.drsp.remotecommid",
	"infiniband.cm.rej.localcommid", "infiniband.cm.rej.remotecommid",
}

// tsharkArgs are the options every run uses. rpcordma, nvme-rdma and tftp
// are disabled because they misdissect RoCE frames: rpcordma marks SENDs
// malformed, nvme-rdma claims CM MADs, and Wireshark's UDP dissector tries
// the lower port first, so RoCE frames from source port 69 (oferby_proxy)
// would be shown as TFTP.
var tsharkArgs = []string{
	"--disable-protocol", "rpcordma", "--disable-protocol", "nvme-rdma", "--disable-protocol", "tftp",
	"-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=|",
}

// tsFrame is one frame of tshark output: every occurrence of each field.
type tsFrame map[string][]string

// has reports whether tshark printed field.
func (f tsFrame) has(field string) bool { return len(f[field]) > 0 }

// first returns the first occurrence of field, or "".
func (f tsFrame) first(field string) string {
	if v := f[field]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// last returns the last occurrence of field, or "".
func (f tsFrame) last(field string) string {
	if v := f[field]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// runTshark returns tshark's fields for every frame of path, indexed by
// frame number - 1, from one tshark run per file, whose output
// tsharktest caches. A file of link type 247 (raw InfiniBand), which
// tshark 4.0 cannot open, is copied with link type 147 (USER0) mapped to
// the infiniband dissector.
func runTshark(tb testing.TB, path string, link decode.LinkType) []tsFrame {
	tb.Helper()
	var args []string
	if link == decode.LinkInfiniBand {
		b, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		b = bytes.Clone(b)
		b[20], b[21], b[22], b[23] = 147, 0, 0, 0 // little-endian header written by writePcap/gen_frames.py
		user0 := filepath.Join(tb.TempDir(), "user0.pcap")
		if err := os.WriteFile(user0, b, 0o644); err != nil {
			tb.Fatal(err)
		}
		path, args = user0, []string{"-o", `uat:user_dlts:"User 0 (DLT=147)","infiniband","0","","0",""`}
	}
	args = append(args, tsharkArgs...)
	for _, f := range tsharkFields {
		args = append(args, "-e", f)
	}
	out, err := tsharktest.Run(tb, path, args...)
	if err != nil {
		tb.Fatalf("tshark %s: %v", path, err)
	}
	var frames []tsFrame
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != len(tsharkFields) {
			tb.Fatalf("tshark %s: %d columns, want %d: %q", path, len(cols), len(tsharkFields), sc.Text())
		}
		f := tsFrame{}
		for i, c := range cols {
			if c != "" {
				f[tsharkFields[i]] = strings.Split(c, "|")
			}
		}
		if n, _ := strconv.Atoi(f.first("frame.number")); n != len(frames)+1 {
			tb.Fatalf("tshark %s: frame number %q at line %d", path, f.first("frame.number"), len(frames)+1)
		}
		frames = append(frames, f)
	}
	return frames
}

// exception is a field where Wireshark 4.0 is wrong, with the reason. When
// applies says it covers a frame, the fields are not compared; instead
// check, if set, verifies that Wireshark shows what the reason predicts.
type exception struct {
	name    string
	reason  string
	fields  []string
	applies func(p *decode.Packet, f tsFrame) bool
	check   func(p *decode.Packet, rec record, f tsFrame) error
}

// opcodeIn returns a predicate for frames whose BTH opcode is in [lo, hi].
func opcodeIn(lo, hi decode.Opcode) func(p *decode.Packet, f tsFrame) bool {
	return func(p *decode.Packet, _ tsFrame) bool {
		return p.Headers&decode.HasBTH != 0 && p.BTH.Opcode >= lo && p.BTH.Opcode <= hi
	}
}

// ethFields are the extension header fields, the ICRC and the CM fields:
// what a dissector that does not know an opcode cannot show.
var ethFields = []string{
	"infiniband.rdeth.eecnxt", "infiniband.deth.q_key", "infiniband.deth.srcqp",
	"infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
	"infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
	"infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.atomicacketh.origremdt",
	"infiniband.immdt", "infiniband.ieth", "infiniband.invariant.crc", "payload_len",
}

var exceptions = []exception{
	{
		name: "WiresharkNoXRC",
		reason: "Wireshark 4.0's opcode table (packet-infiniband.c find_next_header_sequence) has no XRC " +
			"opcodes 0xA0-0xB7 (IBTA annex A14), so it shows 'Unknown OpCode', no XRCETH or other " +
			"extension header, and no ICRC (the bytes after the BTH become vendor data)",
		fields:  ethFields,
		applies: opcodeIn(0xA0, 0xBF),
		check:   showsNoExtensions,
	},
	{
		name: "WiresharkNoCNP",
		reason: "Wireshark 4.0 does not know the RoCEv2 CNP opcode 0x81 (annex A17): it shows the 16 " +
			"reserved bytes and the ICRC as vendor data, so there is no ICRC field",
		fields:  ethFields,
		applies: opcodeIn(0x81, 0x81),
		check:   showsNoExtensions,
	},
	{
		name:    "WiresharkNoFlushAtomicWrite",
		reason:  "RDMA FLUSH (0x1C) and ATOMIC WRITE (0x1D), added by IBTA 1.5, are unknown to Wireshark 4.0",
		fields:  ethFields,
		applies: opcodeIn(0x1C, 0x1D),
		check:   showsNoExtensions,
	},
	{
		name: "WiresharkDCAckSkipsRDETH",
		reason: "for the RD (DC) Acknowledge 0x51, packet-infiniband.c case RDETH_AETH calls parse_AETH " +
			"without parse_RDETH (both RDETH lines are commented out there, unlike RDETH_AETH_PAYLD and " +
			"RDETH_AETH_ATOMICACKETH), so Wireshark reads the RDETH as the AETH: its syndrome is the " +
			"RDETH reserved byte and its MSN the EE context; the real AETH is not shown, and as the " +
			"case skips parse_PAYLOAD, neither is the ICRC",
		fields: []string{"infiniband.rdeth.eecnxt", "infiniband.aeth.syndrome", "infiniband.aeth.msn",
			"infiniband.invariant.crc", "payload_len"},
		applies: opcodeIn(0x51, 0x51),
		check: func(p *decode.Packet, _ record, f tsFrame) error {
			if f.has("infiniband.rdeth.eecnxt") || parseNum(f.first("infiniband.aeth.msn")) != uint64(p.RDETH) {
				return fmt.Errorf("want no RDETH and AETH MSN = our RDETH %d, tshark shows rdeth %q aeth.msn %q",
					p.RDETH, f.first("infiniband.rdeth.eecnxt"), f.first("infiniband.aeth.msn"))
			}
			return nil
		},
	},
	{
		name: "WiresharkDCConnect",
		reason: "for opcode 0x55 (RD RESYNC, used by ConnectX DC) Wireshark reads no RDETH and DETH: it " +
			"skips a 16-byte 'DCCETH' when SE is clear and shows the rest as payload when SE is set, " +
			"while both the RD layout and the DC frames in the corpus carry RDETH and DETH there",
		fields:  []string{"infiniband.rdeth.eecnxt", "infiniband.deth.q_key", "infiniband.deth.srcqp", "payload_len"},
		applies: opcodeIn(0x55, 0x55),
		check: func(p *decode.Packet, _ record, f tsFrame) error {
			if f.has("infiniband.rdeth.eecnxt") || f.has("infiniband.deth.q_key") {
				return fmt.Errorf("tshark shows RDETH/DETH for opcode 0x55")
			}
			return nil
		},
	},
	{
		name: "WiresharkMADOnDatagramQP",
		reason: "Wireshark's parse_PAYLOAD dissects the payload of any packet whose DETH source QP or " +
			"BTH destination QP is 0 or 1 as a management datagram (the DC frames in the corpus carry " +
			"source QP 0 in their DETH); for a payload that is no MAD of a class it parses to the " +
			"end, the offset stays at the payload start (or the MAD parse throws), so the ICRC is not " +
			"shown",
		fields: []string{"infiniband.invariant.crc"},
		applies: func(p *decode.Packet, f tsFrame) bool {
			return p.Headers&decode.HasBTH != 0 && p.Headers&decode.HasCM == 0 && !f.has("infiniband.invariant.crc") &&
				(p.BTH.DestQP <= 1 || p.Headers&decode.HasDETH != 0 && p.DETH.SrcQP <= 1)
		},
	},
	{
		name: "WiresharkICRCOfCutFrame",
		reason: "when a frame is cut short but its pcap record claims the cut length as the wire " +
			"length (rdma-nccl2.pcap: 243 bytes, IP length 4140), Wireshark bounds the UDP payload by " +
			"the frame and shows its last 4 bytes, which are payload, as the ICRC; the decoder keeps " +
			"the UDP length and reports no ICRC",
		fields: []string{"infiniband.invariant.crc"},
		applies: func(p *decode.Packet, _ tsFrame) bool {
			return p.Headers&decode.HasBTH != 0 && p.Headers&decode.HasICRC == 0 && len(p.Payload) < int(p.PayloadLen)
		},
		check: func(_ *decode.Packet, rec record, f tsFrame) error {
			tail := rec.data[len(rec.data)-4:]
			if got := parseNum(f.first("infiniband.invariant.crc")); got != uint64(tail[0])<<24|uint64(tail[1])<<16|uint64(tail[2])<<8|uint64(tail[3]) {
				return fmt.Errorf("tshark ICRC %#x is not the last 4 captured bytes % x", got, tail)
			}
			return nil
		},
	},
}

// showsNoExtensions checks that tshark shows no extension header and no
// ICRC for an opcode it does not know.
func showsNoExtensions(_ *decode.Packet, _ record, f tsFrame) error {
	for _, field := range ethFields {
		if f.has(field) {
			return fmt.Errorf("tshark shows %s=%s for an opcode it does not know", field, f.first(field))
		}
	}
	return nil
}

// parseNum parses a tshark number: decimal, or hex with 0x.
func parseNum(s string) uint64 {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 1<<64 - 1 // never equal to a decoded value below 2^64-1 in practice
	}
	return v
}

// parseHexBytes parses a tshark FT_BYTES value as a big-endian number.
func parseHexBytes(s string) uint64 {
	b, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
	if err != nil || len(b) > 8 {
		return 1<<64 - 1
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// comparison accumulates the result of comparing frames with tshark.
type comparison struct {
	frames, fields int
	values         int            // fields both sides show, compared by value
	excepted       map[string]int // exception name → fields not compared
	diffs          []string
}

// field is one tshark field compared with the decoder's value.
type field struct {
	name    string
	present bool   // the decoder found the header holding the field
	want    string // the decoder's value, as text; numbers in decimal
	num     bool   // compare as numbers (tshark prints some in hex)
	occ     func(f tsFrame, name string) string
}

// compareFrame compares one decoded frame with tshark's fields for it.
func (c *comparison) compareFrame(file string, n int, rec record, link decode.LinkType, p *decode.Packet, f tsFrame) {
	c.frames++
	var skip = map[string]string{}
	for _, e := range exceptions {
		if !e.applies(p, f) {
			continue
		}
		for _, name := range e.fields {
			skip[name] = e.name
		}
		if e.check != nil {
			if err := e.check(p, rec, f); err != nil {
				c.diffs = append(c.diffs, fmt.Sprintf("%s frame %d: exception %s: %v", file, n, e.name, err))
			}
		}
	}
	for _, fl := range expectedFields(rec, link, p, f) {
		if e, ok := skip[fl.name]; ok {
			if c.excepted == nil {
				c.excepted = map[string]int{}
			}
			c.excepted[e]++
			continue
		}
		occ := fl.occ
		if occ == nil {
			occ = tsFrame.first
		}
		got := occ(f, fl.name)
		if fl.name == "payload_len" {
			got = tsharkPayloadLen(f)
		}
		c.fields++
		if fl.present && got != "" {
			c.values++
		}
		switch {
		case !fl.present && got == "":
		case !fl.present:
			c.diffs = append(c.diffs, fmt.Sprintf("%s frame %d: %s: tshark %q, decoder has no such header", file, n, fl.name, got))
		case got == "":
			c.diffs = append(c.diffs, fmt.Sprintf("%s frame %d: %s: decoder %q, tshark shows none", file, n, fl.name, fl.want))
		case fl.num && parseNum(got) != parseNum(fl.want):
			c.diffs = append(c.diffs, fmt.Sprintf("%s frame %d: %s: tshark %s, decoder %s", file, n, fl.name, got, fl.want))
		case !fl.num && got != fl.want:
			c.diffs = append(c.diffs, fmt.Sprintf("%s frame %d: %s: tshark %q, decoder %q", file, n, fl.name, got, fl.want))
		}
	}
}

// tsharkPayloadLen computes the RDMA payload length from tshark's fields
// alone: the length the enclosing header gives, less the BTH, the 8 bytes
// Wireshark adds to the BTH of DC opcodes, the extension headers tshark
// shows, the pad and the ICRC.
func tsharkPayloadLen(f tsFrame) string {
	var n int
	switch {
	case !f.has("infiniband.bth.opcode"):
		return ""
	case f.has("infiniband.lrh.pktlen"):
		n = int(parseNum(f.first("infiniband.lrh.pktlen")))*4 - 8
		if f.has("infiniband.grh.paylen") {
			n -= 40
		}
	case f.has("infiniband.grh.paylen"):
		n = int(parseNum(f.first("infiniband.grh.paylen")))
	case f.has("udp.length"):
		n = int(parseNum(f.last("udp.length"))) - 8
	default:
		return ""
	}
	n -= 12 + 4 + int(parseNum(f.first("infiniband.bth.padcnt")))
	if parseNum(f.first("infiniband.bth.opcode"))>>5 == 2 {
		n -= 8
	}
	for _, h := range []struct {
		field string
		n     int
	}{
		{"infiniband.rdeth.eecnxt", 4}, {"infiniband.deth.q_key", 8}, {"infiniband.aeth.msn", 4},
		{"infiniband.atomicacketh.origremdt", 8}, {"infiniband.immdt", 4}, {"infiniband.ieth", 4},
	} {
		if f.has(h.field) {
			n -= h.n
		}
	}
	switch {
	case f.has("infiniband.atomiceth.swapdt"):
		n -= 28
	case f.has("infiniband.reth.va"):
		n -= 16
	}
	return strconv.Itoa(n)
}

// expectedFields lists every tshark field with the decoder's value for it.
func expectedFields(rec record, link decode.LinkType, p *decode.Packet, f tsFrame) []field {
	h := p.Headers
	has := func(x decode.Header) bool { return h&x != 0 }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	num := func(name string, present bool, v uint64) field {
		return field{name: name, present: present, want: u(v), num: true}
	}
	lastNum := func(name string, present bool, v uint64) field {
		return field{name: name, present: present, want: u(v), num: true, occ: tsFrame.last}
	}
	var fs []field
	if link != decode.LinkERF { // tshark's ERF frames start after the ERF header
		fs = append(fs, num("frame.len", true, uint64(rec.origLen)), num("frame.cap_len", true, uint64(len(rec.data))))
	}
	isIB := p.Kind == decode.KindRoCEv2 || p.Kind == decode.KindRoCEv1 || p.Kind == decode.KindIB
	fs = append(fs, field{name: "infiniband", present: true, want: b(isIB), occ: func(f tsFrame, _ string) string {
		return b(slices.Contains(strings.Split(f.first("frame.protocols"), ":"), "infiniband"))
	}})

	// Link layer: the innermost Ethernet header (or the cooked header).
	mac := func(m [6]byte) string {
		return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
	}
	if link == decode.LinkLinuxSLL || link == decode.LinkLinuxSLL2 {
		fs = append(fs, field{name: "sll.src.eth", present: has(decode.HasEthernet), want: mac(p.SrcMAC)})
	} else if link != decode.LinkERF {
		fs = append(fs,
			field{name: "eth.src", present: has(decode.HasEthernet), want: mac(p.SrcMAC), occ: tsFrame.last},
			field{name: "eth.dst", present: has(decode.HasEthernet), want: mac(p.DstMAC), occ: tsFrame.last})
	}
	if !has(decode.HasMirror) {
		// Tags are compared as a count and a set: tshark shows 802.1Q and
		// 802.1ad tags in different fields, and the decoder keeps two.
		ours, n := []string{}, 0
		if has(decode.HasVLAN) {
			n = int(p.NumVLAN)
			for i := 0; i < n && i < len(p.VLANs); i++ {
				ours = append(ours, u(uint64(p.VLANs[i])))
			}
		}
		fs = append(fs, field{name: "vlan tags", present: true, want: fmt.Sprint(n, ours),
			occ: func(f tsFrame, _ string) string {
				tags := append(slices.Clone(f["vlan.id"]), f["ieee8021ad.id"]...)
				seen := []string{}
				for _, o := range ours {
					if slices.ContainsFunc(tags, func(t string) bool { return u(parseNum(t)) == o }) {
						seen = append(seen, o)
					}
				}
				return fmt.Sprint(len(tags), seen)
			}})
	}

	// Network and transport. In RoCEv1 and InfiniBand frames any IP
	// header tshark shows is inside the transport payload (IPoIB), which the
	// decoder does not read.
	addr := func(a decode.Addr) string { return a.Netip().String() }
	ipv4, ipv6 := has(decode.HasIPv4), has(decode.HasIPv6)
	if p.Kind != decode.KindRoCEv1 && p.Kind != decode.KindIB {
		fs = append(fs,
			field{name: "ip.src", present: ipv4, want: addr(p.Src), occ: tsFrame.last},
			field{name: "ip.dst", present: ipv4, want: addr(p.Dst), occ: tsFrame.last},
			lastNum("ip.dsfield.dscp", ipv4, uint64(p.DSCP)), lastNum("ip.dsfield.ecn", ipv4, uint64(p.ECN)),
			lastNum("ip.ttl", ipv4, uint64(p.TTL)), lastNum("ip.len", ipv4, uint64(p.IPLen)),
			field{name: "ipv6.src", present: ipv6, want: addr(p.Src), occ: tsFrame.last},
			field{name: "ipv6.dst", present: ipv6, want: addr(p.Dst), occ: tsFrame.last},
			lastNum("ipv6.tclass.dscp", ipv6, uint64(p.DSCP)), lastNum("ipv6.tclass.ecn", ipv6, uint64(p.ECN)),
			lastNum("ipv6.hlim", ipv6, uint64(p.TTL)), lastNum("ipv6.plen", ipv6, uint64(p.IPLen)),
			lastNum("udp.srcport", has(decode.HasUDP), uint64(p.SrcPort)),
			lastNum("udp.dstport", has(decode.HasUDP), uint64(p.DstPort)),
			lastNum("udp.length", has(decode.HasUDP), uint64(p.UDPLen)),
		)
	}
	if has(decode.HasMirror) {
		// The outer addresses are the first occurrence; when the inner
		// frame has no header of the outer family, drop the inner fields
		// of that family, which would see the outer header.
		outer := "ip."
		if p.MirrorSrc.Kind() == decode.AddrIPv6 {
			outer = "ipv6."
		}
		if !has(map[string]decode.Header{"ip.": decode.HasIPv4, "ipv6.": decode.HasIPv6}[outer]) {
			fs = slices.DeleteFunc(fs, func(x field) bool { return strings.HasPrefix(x.name, outer) })
		}
		outer += "src"
		fs = append(fs,
			field{name: outer, present: true, want: addr(p.MirrorSrc)},
			field{name: strings.Replace(outer, "src", "dst", 1), present: true, want: addr(p.MirrorDst)},
			num("gre.proto", true, map[decode.Mirror]uint64{decode.MirrorERSPAN2: 0x88BE, decode.MirrorERSPAN3: 0x22EB, decode.MirrorGRE: 0x6558}[p.Mirror]))
	}
	fs = append(fs, num("erspan.spanid", has(decode.HasMirror) && p.Mirror != decode.MirrorGRE, uint64(p.MirrorSession)))

	// Pause and PFC.
	pause := has(decode.HasPause) || has(decode.HasPFC)
	fs = append(fs, num("macc.opcode", pause, uint64(p.Pause.Opcode)),
		num("macc.pause_time", has(decode.HasPause), uint64(p.Pause.Quanta[0])),
		num("macc.cbfc.enbv", has(decode.HasPFC), uint64(p.Pause.Enable)))
	for i, q := range p.Pause.Quanta {
		fs = append(fs, num("macc.cbfc.pause_time.c"+strconv.Itoa(i), has(decode.HasPFC), uint64(q)))
	}

	// InfiniBand routing headers.
	lrh, grh := has(decode.HasLRH), has(decode.HasGRH)
	fs = append(fs,
		num("infiniband.lrh.vl", lrh, uint64(p.LRH.VL)), num("infiniband.lrh.lver", lrh, uint64(p.LRH.LVer)),
		num("infiniband.lrh.sl", lrh, uint64(p.LRH.SL)), num("infiniband.lrh.lnh", lrh, uint64(p.LRH.LNH)),
		num("infiniband.lrh.dlid", lrh, uint64(p.LRH.DLID)), num("infiniband.lrh.pktlen", lrh, uint64(p.LRH.PktLen)),
		num("infiniband.lrh.slid", lrh, uint64(p.LRH.SLID)),
		num("infiniband.grh.ipver", grh, uint64(p.GRH.IPVer)), num("infiniband.grh.tclass", grh, uint64(p.GRH.TClass)),
		num("infiniband.grh.flowlabel", grh, uint64(p.GRH.FlowLabel)), num("infiniband.grh.paylen", grh, uint64(p.GRH.PayLen)),
		num("infiniband.grh.nxthdr", grh, uint64(p.GRH.NxtHdr)), num("infiniband.grh.hoplmt", grh, uint64(p.GRH.HopLmt)),
		field{name: "infiniband.grh.sgid", present: grh, want: netip.AddrFrom16(p.GRH.SGID).String()},
		field{name: "infiniband.grh.dgid", present: grh, want: netip.AddrFrom16(p.GRH.DGID).String()},
	)

	// BTH, with FECN, BECN and the reserved bits from the raw byte 4.
	bth := has(decode.HasBTH)
	t := &p.BTH
	byte4 := func(f tsFrame, _ string) string {
		raw := f.first("infiniband.bth")
		if len(raw) < 10 {
			return ""
		}
		return u(parseHexBytes(raw[8:10]))
	}
	var ours4 uint64
	if t.FECN {
		ours4 |= 0x80
	}
	if t.BECN {
		ours4 |= 0x40
	}
	ours4 |= uint64(t.Resv6a)
	fs = append(fs,
		num("infiniband.bth.opcode", bth, uint64(t.Opcode)), num("infiniband.bth.se", bth, uint64(boolNum(t.SE))),
		num("infiniband.bth.m", bth, uint64(boolNum(t.M))), num("infiniband.bth.padcnt", bth, uint64(t.PadCnt)),
		num("infiniband.bth.tver", bth, uint64(t.TVer)), num("infiniband.bth.p_key", bth, uint64(t.PKey)),
		field{name: "bth byte 4 (FECN, BECN, reserved)", present: bth, want: u(ours4), num: true, occ: byte4},
		num("infiniband.bth.destqp", bth, uint64(t.DestQP)), num("infiniband.bth.a", bth, uint64(boolNum(t.AckReq))),
		num("infiniband.bth.reserved7", bth, uint64(t.Resv7)), num("infiniband.bth.psn", bth, uint64(t.PSN)),
	)

	// Extension headers. Wireshark shows the AtomicETH's VA and R_Key with
	// the RETH's fields.
	va, rkey := p.RETH.VA, uint64(p.RETH.RKey)
	if has(decode.HasAtomicETH) {
		va, rkey = p.AtomicETH.VA, uint64(p.AtomicETH.RKey)
	}
	immdt := func(name string, present bool, v uint32) field {
		return field{name: name, present: present, want: u(uint64(v)), num: true, occ: func(f tsFrame, _ string) string {
			if s := f.first(name); s != "" {
				return u(parseHexBytes(s))
			}
			return ""
		}}
	}
	fs = append(fs,
		num("infiniband.rdeth.eecnxt", has(decode.HasRDETH), uint64(p.RDETH)),
		num("infiniband.deth.q_key", has(decode.HasDETH), uint64(p.DETH.QKey)),
		num("infiniband.deth.srcqp", has(decode.HasDETH), uint64(p.DETH.SrcQP)),
		num("infiniband.reth.va", has(decode.HasRETH|decode.HasAtomicETH), va),
		num("infiniband.reth.r_key", has(decode.HasRETH|decode.HasAtomicETH), rkey),
		num("infiniband.reth.dmalen", has(decode.HasRETH), uint64(p.RETH.DMALen)),
		num("infiniband.atomiceth.swapdt", has(decode.HasAtomicETH), p.AtomicETH.SwapAdd),
		num("infiniband.atomiceth.cmpdt", has(decode.HasAtomicETH), p.AtomicETH.Compare),
		num("infiniband.aeth.syndrome", has(decode.HasAETH), uint64(p.AETH.Syndrome)),
		num("infiniband.aeth.msn", has(decode.HasAETH), uint64(p.AETH.MSN)),
		num("infiniband.atomicacketh.origremdt", has(decode.HasAtomicAckETH), p.AtomicAckETH),
		immdt("infiniband.immdt", has(decode.HasImmDt), p.ImmDt),
		immdt("infiniband.ieth", has(decode.HasIETH), p.IETH),
		num("infiniband.invariant.crc", has(decode.HasICRC), uint64(p.ICRC)),
		num("payload_len", bth && p.Err == 0, uint64(p.PayloadLen)),
	)

	// CM MADs.
	cm := func(attr uint16) bool { return has(decode.HasCM) && p.CM.AttrID == attr }
	c := &p.CM
	fs = append(fs,
		num("infiniband.mad.attributeid", has(decode.HasCM), uint64(c.AttrID)),
		num("infiniband.cm.req", cm(decode.CMConnectRequest), uint64(c.LocalCommID)),
		num("infiniband.cm.req.localqpn", cm(decode.CMConnectRequest), uint64(c.LocalQPN)),
		num("infiniband.cm.req.startpsn", cm(decode.CMConnectRequest), uint64(c.StartingPSN)),
		num("infiniband.cm.rep", cm(decode.CMConnectReply), uint64(c.LocalCommID)),
		num("infiniband.cm.rep.remotecommid", cm(decode.CMConnectReply), uint64(c.RemoteCommID)),
		num("infiniband.cm.rep.localqpn", cm(decode.CMConnectReply), uint64(c.LocalQPN)),
		num("infiniband.cm.rep.startpsn", cm(decode.CMConnectReply), uint64(c.StartingPSN)),
	)
	for _, m := range []struct {
		prefix string
		attr   uint16
	}{
		{"rtu", decode.CMReadyToUse}, {"dreq", decode.CMDisconnectRequest},
		{"drsp", decode.CMDisconnectReply}, {"rej", decode.CMConnectReject},
	} {
		fs = append(fs,
			num("infiniband.cm."+m.prefix+".localcommid", cm(m.attr), uint64(c.LocalCommID)),
			num("infiniband.cm."+m.prefix+".remotecommid", cm(m.attr), uint64(c.RemoteCommID)))
	}
	if f.first("infiniband.mad.mgmtclass") != "" && parseNum(f.first("infiniband.mad.mgmtclass")) != 7 {
		// A MAD of another class (subnet management, ...): not decoded.
		fs = slices.DeleteFunc(fs, func(x field) bool { return x.name == "infiniband.mad.attributeid" })
	}
	return fs
}

func boolNum(v bool) int {
	if v {
		return 1
	}
	return 0
}

// compareFile decodes every frame of path and compares it with tshark.
func compareFile(t *testing.T, c *comparison, path string) {
	t.Helper()
	link, recs, err := readPcap(path)
	if err != nil {
		t.Fatal(err)
	}
	ts := runTshark(t, path, link)
	if len(ts) != len(recs) {
		t.Fatalf("%s: tshark shows %d frames, the file has %d", path, len(ts), len(recs))
	}
	var p decode.Packet
	for i, rec := range recs {
		_ = p.Decode(rec.data, link)
		c.compareFrame(filepath.Base(path), i+1, rec, link, &p, ts[i])
	}
}

// report fails the test on differences and logs the totals.
func (c *comparison) report(t *testing.T) {
	t.Helper()
	for _, d := range c.diffs {
		t.Error(d)
	}
	names := make([]string, 0, len(c.excepted))
	for n := range c.excepted {
		names = append(names, n)
	}
	sort.Strings(names)
	var ex []string
	for _, n := range names {
		ex = append(ex, fmt.Sprintf("%s: %d", n, c.excepted[n]))
	}
	t.Logf("compared %d frames with tshark: %d fields (%d values both show, the rest absent on both sides); "+
		"%d differences; fields under exceptions: %s", c.frames, c.fields, c.values, len(c.diffs), strings.Join(ex, ", "))
}

// capturesDir returns the shared corpus directory: $ROCESCOPE_CAPTURES, or
// ../shared/captures beside the module root.
func capturesDir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("ROCESCOPE_CAPTURES"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "captures")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// corpusFiles returns the capture files of the shared corpus, skipping the
// test when there are none.
func corpusFiles(tb testing.TB) []string {
	tb.Helper()
	files := corpusFilesIfAny(tb)
	if len(files) == 0 {
		tb.Skipf("no capture corpus in %s (set ROCESCOPE_CAPTURES)", capturesDir(tb))
	}
	return files
}

// corpusFilesIfAny returns the capture files of the shared corpus, if any.
func corpusFilesIfAny(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(capturesDir(tb), "*", "*.pcap"))
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// testdataFiles returns the synthetic captures in ../testdata/decode.
func testdataFiles(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "decode", "*.pcap"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no synthetic captures in ../testdata/decode: %v", err)
	}
	return files
}

func TestCorpusAgainstTshark(t *testing.T) {
	files := corpusFiles(t)
	tsharktest.Require(t)
	var c comparison
	for _, f := range files {
		compareFile(t, &c, f)
	}
	c.report(t)
}

func TestSyntheticAgainstTshark(t *testing.T) {
	tsharktest.Require(t)
	var c comparison
	for _, f := range testdataFiles(t) {
		compareFile(t, &c, f)
	}
	c.report(t)
}

// TestHandFramesAgainstTshark writes the hand-made frames of decodeCases
// (the well-formed ones on the default RoCE port: Wireshark shows the
// headers of malformed ones anyway) into one capture per link type and
// compares them with tshark as well.
func TestHandFramesAgainstTshark(t *testing.T) {
	tsharktest.Require(t)
	byLink := map[decode.LinkType][][]byte{}
	for _, c := range decodeCases(t) {
		if c.port == 0 && c.want.Err == 0 && decode.Supported(c.link) {
			byLink[c.link] = append(byLink[c.link], c.frame)
		}
	}
	var c comparison
	dir := t.TempDir()
	for link, frames := range byLink {
		compareFile(t, &c, writePcap(t, dir, fmt.Sprintf("link%d.pcap", link), link, frames))
	}
	c.report(t)
}
