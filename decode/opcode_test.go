package decode_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rocescope/rocescope/decode"
)

// specOp is one row of the opcode table as the specifications define it,
// written out here independently of the decoder's table: the IBTA release
// 1.4 base transport opcodes (with RESYNC), RDMA FLUSH and ATOMIC WRITE
// from release 1.5, XRC from annex A14 and CNP from the RoCEv2 annex A17.
// skip is the bytes after the BTH that no field holds: the 8-byte DC
// extension ConnectX puts on RD opcodes (see the decoder's doc), the FETH
// of RDMA FLUSH, the 16 reserved bytes of a CNP. props: req (requester to
// responder, consumes a PSN), end (ends a SEND/WRITE/READ response
// message), rreq, rresp, ack, atomic, cnp.
type specOp struct {
	op    decode.Opcode
	name  string
	eth   string
	skip  int
	props string
}

var specOpcodes = []specOp{
	{0x00, "RC SEND First", "", 0, "req"},
	{0x01, "RC SEND Middle", "", 0, "req"},
	{0x02, "RC SEND Last", "", 0, "req end"},
	{0x03, "RC SEND Last with Immediate", "ImmDt", 0, "req end"},
	{0x04, "RC SEND Only", "", 0, "req end"},
	{0x05, "RC SEND Only with Immediate", "ImmDt", 0, "req end"},
	{0x06, "RC RDMA WRITE First", "RETH", 0, "req"},
	{0x07, "RC RDMA WRITE Middle", "", 0, "req"},
	{0x08, "RC RDMA WRITE Last", "", 0, "req end"},
	{0x09, "RC RDMA WRITE Last with Immediate", "ImmDt", 0, "req end"},
	{0x0A, "RC RDMA WRITE Only", "RETH", 0, "req end"},
	{0x0B, "RC RDMA WRITE Only with Immediate", "RETH ImmDt", 0, "req end"},
	{0x0C, "RC RDMA READ Request", "RETH", 0, "req rreq"},
	{0x0D, "RC RDMA READ response First", "AETH", 0, "rresp"},
	{0x0E, "RC RDMA READ response Middle", "", 0, "rresp"},
	{0x0F, "RC RDMA READ response Last", "AETH", 0, "rresp end"},
	{0x10, "RC RDMA READ response Only", "AETH", 0, "rresp end"},
	{0x11, "RC Acknowledge", "AETH", 0, "ack"},
	{0x12, "RC ATOMIC Acknowledge", "AETH AtomicAckETH", 0, "ack"},
	{0x13, "RC CmpSwap", "AtomicETH", 0, "req atomic"},
	{0x14, "RC FetchAdd", "AtomicETH", 0, "req atomic"},
	{0x16, "RC SEND Last with Invalidate", "IETH", 0, "req end"},
	{0x17, "RC SEND Only with Invalidate", "IETH", 0, "req end"},
	{0x1C, "RC RDMA FLUSH", "RETH", 4, "req"},
	{0x1D, "RC ATOMIC WRITE", "RETH", 0, "req atomic"},
	{0x20, "UC SEND First", "", 0, "req"},
	{0x21, "UC SEND Middle", "", 0, "req"},
	{0x22, "UC SEND Last", "", 0, "req end"},
	{0x23, "UC SEND Last with Immediate", "ImmDt", 0, "req end"},
	{0x24, "UC SEND Only", "", 0, "req end"},
	{0x25, "UC SEND Only with Immediate", "ImmDt", 0, "req end"},
	{0x26, "UC RDMA WRITE First", "RETH", 0, "req"},
	{0x27, "UC RDMA WRITE Middle", "", 0, "req"},
	{0x28, "UC RDMA WRITE Last", "", 0, "req end"},
	{0x29, "UC RDMA WRITE Last with Immediate", "ImmDt", 0, "req end"},
	{0x2A, "UC RDMA WRITE Only", "RETH", 0, "req end"},
	{0x2B, "UC RDMA WRITE Only with Immediate", "RETH ImmDt", 0, "req end"},
	{0x40, "RD SEND First", "RDETH DETH", 8, "req"},
	{0x41, "RD SEND Middle", "RDETH DETH", 8, "req"},
	{0x42, "RD SEND Last", "RDETH DETH", 8, "req end"},
	{0x43, "RD SEND Last with Immediate", "RDETH DETH ImmDt", 8, "req end"},
	{0x44, "RD SEND Only", "RDETH DETH", 8, "req end"},
	{0x45, "RD SEND Only with Immediate", "RDETH DETH ImmDt", 8, "req end"},
	{0x46, "RD RDMA WRITE First", "RDETH DETH RETH", 8, "req"},
	{0x47, "RD RDMA WRITE Middle", "RDETH DETH", 8, "req"},
	{0x48, "RD RDMA WRITE Last", "RDETH DETH", 8, "req end"},
	{0x49, "RD RDMA WRITE Last with Immediate", "RDETH DETH ImmDt", 8, "req end"},
	{0x4A, "RD RDMA WRITE Only", "RDETH DETH RETH", 8, "req end"},
	{0x4B, "RD RDMA WRITE Only with Immediate", "RDETH DETH RETH ImmDt", 8, "req end"},
	{0x4C, "RD RDMA READ Request", "RDETH DETH RETH", 8, "req rreq"},
	{0x4D, "RD RDMA READ response First", "RDETH AETH", 8, "rresp"},
	{0x4E, "RD RDMA READ response Middle", "RDETH", 8, "rresp"},
	{0x4F, "RD RDMA READ response Last", "RDETH AETH", 8, "rresp end"},
	{0x50, "RD RDMA READ response Only", "RDETH AETH", 8, "rresp end"},
	{0x51, "RD Acknowledge", "RDETH AETH", 8, "ack"},
	{0x52, "RD ATOMIC Acknowledge", "RDETH AETH AtomicAckETH", 8, "ack"},
	{0x53, "RD CmpSwap", "RDETH DETH AtomicETH", 8, "req atomic"},
	{0x54, "RD FetchAdd", "RDETH DETH AtomicETH", 8, "req atomic"},
	{0x55, "RD RESYNC", "RDETH DETH", 8, "req"},
	{0x64, "UD SEND Only", "DETH", 0, "req end"},
	{0x65, "UD SEND Only with Immediate", "DETH ImmDt", 0, "req end"},
	{0x81, "CNP", "", 16, "cnp"},
	{0xA0, "XRC SEND First", "XRCETH", 0, "req"},
	{0xA1, "XRC SEND Middle", "XRCETH", 0, "req"},
	{0xA2, "XRC SEND Last", "XRCETH", 0, "req end"},
	{0xA3, "XRC SEND Last with Immediate", "XRCETH ImmDt", 0, "req end"},
	{0xA4, "XRC SEND Only", "XRCETH", 0, "req end"},
	{0xA5, "XRC SEND Only with Immediate", "XRCETH ImmDt", 0, "req end"},
	{0xA6, "XRC RDMA WRITE First", "XRCETH RETH", 0, "req"},
	{0xA7, "XRC RDMA WRITE Middle", "XRCETH", 0, "req"},
	{0xA8, "XRC RDMA WRITE Last", "XRCETH", 0, "req end"},
	{0xA9, "XRC RDMA WRITE Last with Immediate", "XRCETH ImmDt", 0, "req end"},
	{0xAA, "XRC RDMA WRITE Only", "XRCETH RETH", 0, "req end"},
	{0xAB, "XRC RDMA WRITE Only with Immediate", "XRCETH RETH ImmDt", 0, "req end"},
	{0xAC, "XRC RDMA READ Request", "XRCETH RETH", 0, "req rreq"},
	{0xAD, "XRC RDMA READ response First", "AETH", 0, "rresp"},
	{0xAE, "XRC RDMA READ response Middle", "", 0, "rresp"},
	{0xAF, "XRC RDMA READ response Last", "AETH", 0, "rresp end"},
	{0xB0, "XRC RDMA READ response Only", "AETH", 0, "rresp end"},
	{0xB1, "XRC Acknowledge", "AETH", 0, "ack"},
	{0xB2, "XRC ATOMIC Acknowledge", "AETH AtomicAckETH", 0, "ack"},
	{0xB3, "XRC CmpSwap", "XRCETH AtomicETH", 0, "req atomic"},
	{0xB4, "XRC FetchAdd", "XRCETH AtomicETH", 0, "req atomic"},
	{0xB6, "XRC SEND Last with Invalidate", "XRCETH IETH", 0, "req end"},
	{0xB7, "XRC SEND Only with Invalidate", "XRCETH IETH", 0, "req end"},
}

// specHeaders maps the extension header names of specOpcodes to their bit
// and length.
var specHeaders = map[string]struct {
	h decode.Header
	n int
}{
	"RDETH": {decode.HasRDETH, 4}, "DETH": {decode.HasDETH, 8}, "XRCETH": {decode.HasXRCETH, 4},
	"RETH": {decode.HasRETH, 16}, "AtomicETH": {decode.HasAtomicETH, 28}, "AETH": {decode.HasAETH, 4},
	"AtomicAckETH": {decode.HasAtomicAckETH, 8}, "ImmDt": {decode.HasImmDt, 4}, "IETH": {decode.HasIETH, 4},
}

// specOf returns the row of op, or false.
func specOf(op decode.Opcode) (specOp, bool) {
	for _, s := range specOpcodes {
		if s.op == op {
			return s, true
		}
	}
	return specOp{}, false
}

// headers returns the extension header bits and the bytes from the BTH
// start to the payload.
func (s specOp) headers() (decode.Header, int) {
	h, n := decode.Header(0), 12+s.skip
	for _, name := range strings.Fields(s.eth) {
		h |= specHeaders[name].h
		n += specHeaders[name].n
	}
	return h, n
}

func TestOpcodeMethods(t *testing.T) {
	services := map[string]decode.Service{"RC": decode.ServiceRC, "UC": decode.ServiceUC, "RD": decode.ServiceRD,
		"UD": decode.ServiceUD, "CNP": decode.ServiceCNP, "XRC": decode.ServiceXRC}
	valid := 0
	for i := 0; i < 256; i++ {
		op := decode.Opcode(i)
		s, ok := specOf(op)
		type facts struct {
			Name                                                      string
			Service                                                   decode.Service
			Valid, Ends, ReadReq, ReadResp, Ack, Atomic, Request, CNP bool
		}
		want := facts{Name: fmt.Sprintf("Opcode(0x%02x)", i)}
		if ok {
			valid++
			p := " " + s.props + " "
			has := func(x string) bool { return strings.Contains(p, " "+x+" ") }
			want = facts{Name: s.name, Service: services[strings.Fields(s.name)[0]], Valid: true,
				Ends: has("end"), ReadReq: has("rreq"), ReadResp: has("rresp"), Ack: has("ack"),
				Atomic: has("atomic"), Request: has("req"), CNP: has("cnp")}
		}
		got := facts{op.String(), op.Service(), op.Valid(), op.EndsMessage(), op.IsReadRequest(),
			op.IsReadResponse(), op.IsAcknowledge(), op.IsAtomic(), op.IsRequest(), op.IsCNP()}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("opcode %#02x (-want +got):\n%s", i, diff)
		}
	}
	if valid != 85 {
		t.Errorf("%d valid opcodes in the spec table, want 85", valid)
	}
}

func TestServiceString(t *testing.T) {
	for s, want := range map[decode.Service]string{decode.ServiceNone: "none", decode.ServiceRC: "RC",
		decode.ServiceUC: "UC", decode.ServiceRD: "RD", decode.ServiceUD: "UD", decode.ServiceCNP: "CNP",
		decode.ServiceXRC: "XRC", 7: "Service(7)"} {
		if got := s.String(); got != want {
			t.Errorf("Service(%d).String() = %q, want %q", s, got, want)
		}
	}
}

// TestOpcodeHeaders decodes one RoCEv2 packet per opcode with 20 payload
// bytes and pad 1, and checks the extension headers and payload length
// against the spec table.
func TestOpcodeHeaders(t *testing.T) {
	for i := 0; i < 256; i++ {
		op := decode.Opcode(i)
		s, ok := specOf(op)
		h, n := s.headers()
		transport := cat(bth(uint8(op), false, false, 1, 0, 0x10, false, 7), make([]byte, n-12), payload(19), []byte{0}, icrc)
		var p decode.Packet
		err := p.Decode(roceV4(0, transport), decode.LinkEthernet)
		if !ok {
			if !errors.Is(err, decode.ErrOpcode) || p.Headers != eth|ip4|udpH|bthH || p.Kind != decode.KindRoCEv2 {
				t.Errorf("reserved opcode %#02x: error %v, headers %b", i, err, p.Headers)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		const ethBits = decode.HasRDETH | decode.HasDETH | decode.HasXRCETH | decode.HasRETH | decode.HasAtomicETH |
			decode.HasAETH | decode.HasAtomicAckETH | decode.HasImmDt | decode.HasIETH
		if got := p.Headers & ethBits; got != h || p.PayloadLen != 19 || len(p.Payload) != 19 || p.Headers&crc == 0 {
			t.Errorf("%s: headers %b, want %b; payload %d (%d captured), want 19", s.name, got, h, p.PayloadLen, len(p.Payload))
		}
	}
}

func TestAETH(t *testing.T) {
	for _, c := range []struct {
		syndrome uint8
		kind     decode.AckKind
		low      uint8
		code     string
	}{
		{0x00, decode.AckACK, 0, "PSN sequence error"},
		{0x1f, decode.AckACK, 31, "reserved"},
		{0x2e, decode.AckRNRNAK, 14, "reserved"},
		{0x41, decode.AckReserved, 1, "invalid request"},
		{0x60, decode.AckNAK, 0, "PSN sequence error"},
		{0x61, decode.AckNAK, 1, "invalid request"},
		{0x62, decode.AckNAK, 2, "remote access error"},
		{0x63, decode.AckNAK, 3, "remote operational error"},
		{0x64, decode.AckNAK, 4, "invalid RD request"},
		{0x65, decode.AckNAK, 5, "reserved"},
		{0xe0, decode.AckNAK, 0, "PSN sequence error"}, // bit 7 is reserved
	} {
		a := decode.AETH{Syndrome: c.syndrome, MSN: 1}
		if a.Kind() != c.kind || a.Credit() != c.low || a.Timer() != c.low || uint8(a.NAKCode()) != c.low || a.NAKCode().String() != c.code {
			t.Errorf("syndrome %#02x: kind %v credit %d timer %d code %d %q, want %v, %d, %q",
				c.syndrome, a.Kind(), a.Credit(), a.Timer(), a.NAKCode(), a.NAKCode(), c.kind, c.low, c.code)
		}
	}
	for k, want := range map[decode.AckKind]string{decode.AckNone: "none", decode.AckACK: "ACK",
		decode.AckRNRNAK: "RNR NAK", decode.AckReserved: "reserved", decode.AckNAK: "NAK", 9: "AckKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("AckKind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

func TestError(t *testing.T) {
	for e, want := range map[decode.Error]string{
		decode.ErrTruncated: "decode: truncated", decode.ErrLinkType: "decode: unsupported link type",
		decode.ErrERF: "decode: bad ERF record", decode.ErrIPVersion: "decode: bad IP version",
		decode.ErrIPv4: "decode: bad IPv4 header", decode.ErrIPv6: "decode: bad IPv6 header or extension header chain",
		decode.ErrUDP: "decode: bad UDP length", decode.ErrMirror: "decode: bad GRE or ERSPAN header",
		decode.ErrLRH: "decode: bad LRH packet length", decode.ErrGRH: "decode: bad GRH payload length",
		decode.ErrOpcode: "decode: reserved or unknown BTH opcode", decode.ErrPad: "decode: pad count larger than the payload",
		0: "decode: error 0", 200: "decode: error 200",
	} {
		if got := e.Error(); got != want {
			t.Errorf("Error(%d).Error() = %q, want %q", e, got, want)
		}
		if e.Truncated() != (e == decode.ErrTruncated) {
			t.Errorf("Error(%d).Truncated() = %v", e, e.Truncated())
		}
	}
}

func TestSupported(t *testing.T) {
	for l := decode.LinkType(0); l < 300; l++ {
		want := map[decode.LinkType]bool{0: true, 1: true, 101: true, 113: true, 197: true, 228: true, 229: true, 247: true, 276: true}[l]
		if got := decode.Supported(l); got != want {
			t.Errorf("Supported(%d) = %v, want %v", l, got, want)
		}
		var p decode.Packet
		if err := p.Decode([]byte{0}, l); errors.Is(err, decode.ErrLinkType) == want {
			t.Errorf("link type %d: Decode error %v, Supported %v", l, err, want)
		}
	}
}

func TestKindMirrorString(t *testing.T) {
	got := fmt.Sprint(decode.KindOther, decode.KindRoCEv2, decode.KindRoCEv1, decode.KindIB, decode.KindPFC,
		decode.KindPause, decode.Kind(6), decode.MirrorNone, decode.MirrorERSPAN2, decode.MirrorERSPAN3,
		decode.MirrorGRE, decode.Mirror(4))
	if want := "other rocev2 rocev1 ib pfc pause Kind(6) none erspan2 erspan3 gre Mirror(4)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
