// Package testframes builds RoCEv2 frames by hand, and a small trace with
// its expected figures counted by hand, for the tests of the metrics
// packages. It is a test kit: nothing outside tests uses it.
package testframes

import (
	"encoding/binary"
	"io"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/frame"
)

// Epoch is the time of the first frame of Trace, in ns since the Unix
// epoch: a window boundary for any window length dividing a second.
const Epoch = int64(1_700_000_000) * int64(time.Second)

// RoCE is an Ethernet/IPv4/UDP/BTH frame to build. Ext holds the extension
// headers the opcode implies; Payload bytes of zeros and the 4-byte ICRC
// follow them.
type RoCE struct {
	Src, Dst [4]byte
	Sport    uint16
	ECN      uint8
	Op       decode.Opcode
	DQP      uint32
	PSN      uint32
	AckReq   bool
	FECN     bool
	Ext      []byte
	Payload  int
}

// Bytes returns the frame, from 02:00:00:00:00:01 to 02:00:00:00:00:02,
// DSCP 26, with a zero IPv4 header checksum (the decoder does not check
// it).
func (f RoCE) Bytes() []byte {
	transport := frame.BTHLen + len(f.Ext) + f.Payload + frame.ICRCLen
	b := make([]byte, frame.EthernetLen+frame.IPv4Len+frame.UDPLen+transport)
	off := frame.PutEthernet(b, &macB, &macA, frame.EtherIPv4)
	ip := frame.IPv4{TOS: 26<<2 | f.ECN, TTL: 64, Proto: 17, Src: &f.Src, Dst: &f.Dst}
	n := frame.PutIPv4(b[off:], &ip, frame.UDPLen+transport)
	b[off+10], b[off+11] = 0, 0
	off += n
	off += frame.PutUDP(b[off:], f.Sport, decode.DefaultRoCEPort, transport)
	off += frame.PutBTH(b[off:], &frame.BTH{Op: uint8(f.Op), FECN: f.FECN, DQP: f.DQP, AckReq: f.AckReq, PSN: f.PSN})
	copy(b[off:], f.Ext) // zeros follow: the payload and the ICRC
	return b
}

// The MAC addresses of RoCE frames.
var (
	macA = [6]byte{0x02, 0, 0, 0, 0, 1}
	macB = [6]byte{0x02, 0, 0, 0, 0, 2}
)

// RETH returns a RETH with virtual address and key 0 and DMA length n.
func RETH(n uint32) []byte {
	b := make([]byte, frame.RETHLen)
	frame.PutRETH(b, 0, 0, n)
	return b
}

// AETH returns an AETH.
func AETH(syndrome uint8, msn uint32) []byte {
	b := make([]byte, frame.AETHLen)
	frame.PutAETH(b, syndrome, msn)
	return b
}

// PFC returns an 802.1Qbb PFC frame of 60 bytes (64 on the wire) from src with class-enable
// vector enable and the pause quanta of each priority.
func PFC(src [6]byte, enable uint8, quanta [8]uint16) []byte {
	b := make([]byte, frame.MinLen)
	frame.PutPFC(b, &src, enable, &quanta)
	return b
}

// Source is a capture.Source over frames made in a test, delivered Per at a
// time (at least one) so that batches end at arbitrary places.
type Source struct {
	Frames []capture.Frame
	Per    int
	Totals capture.Stats // what Stats returns besides Received
}

// Next implements capture.Source.
func (s *Source) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	for len(s.Frames) > 0 && len(b.Frames) < min(max(s.Per, 1), cap(b.Frames)) {
		b.Frames = append(b.Frames, s.Frames[0])
		s.Frames = s.Frames[1:]
	}
	s.Totals.Received += uint64(len(b.Frames))
	if len(b.Frames) == 0 {
		return io.EOF
	}
	return nil
}

// Stats implements capture.Source.
func (s *Source) Stats() capture.Stats { return s.Totals }

// Close implements capture.Source.
func (s *Source) Close() error { return nil }

var _ capture.Source = (*Source)(nil)

// Flow names a flow of Trace: source, destination and destination QP.
type Flow struct {
	Src, Dst [4]byte
	DQP      uint32
}

// HandTrace is a hand-made trace over two one-second windows from Epoch,
// with the figures of each window counted by hand.
type HandTrace struct {
	Frames []capture.Frame
	// Want holds each window's counters under their state names (the
	// report keys, "opcode/N", "pfc_frames/P", "pfc_quanta/P", "nak_code/N",
	// "decode_error/N"); counters not named are zero.
	Want [2]map[string]uint64
	// Flows holds each window's flows with their packets and bytes.
	Flows [2]map[Flow][2]uint64
}

// RC opcodes the tests build frames with (IBTA numbering).
const (
	OpWriteFirst  decode.Opcode = 0x06
	OpWriteMiddle decode.Opcode = 0x07
	OpWriteLast   decode.Opcode = 0x08
	OpWriteOnly   decode.Opcode = 0x0a
	OpReadRequest decode.Opcode = 0x0c
	OpReadFirst   decode.Opcode = 0x0d
	OpReadOnly    decode.Opcode = 0x10
	OpAck         decode.Opcode = 0x11
	OpCNP         decode.Opcode = 0x81
)

// Trace returns the hand-made trace. Window 0: A→B WRITE First/Middle/Last
// (PSN 10-12, AckReq on Last), B ACKs 12; a WRITE Only at 13 marked CE, a
// CNP back to A; 13 again (retransmit); 15 (gap); a READ of 2048 bytes at 16
// answered by First/Last at 16, 17; a NAK and an RNR NAK; C→D a WRITE Only
// with FECN; a PFC frame, a DNS datagram, a frame cut inside the BTH and one
// with a reserved opcode. Window 1: A→B goes on without trouble, C→D sends
// a SEND Only with immediate.
func Trace() *HandTrace {
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	c, d := [4]byte{10, 0, 1, 1}, [4]byte{10, 0, 1, 2}
	const qpA, qpB, qpD = 0x100, 0x200, 0x400
	tr := &HandTrace{}
	for i := range tr.Want {
		tr.Want[i] = map[string]uint64{}
		tr.Flows[i] = map[Flow][2]uint64{}
	}
	t := Epoch
	add := func(win int, data []byte, orig int) {
		t += 1000
		if win == 1 && t < Epoch+int64(time.Second) {
			t = Epoch + int64(time.Second)
		}
		tr.Frames = append(tr.Frames, capture.Frame{Data: data, Time: t, OrigLen: uint32(orig), Link: decode.LinkEthernet})
		tr.Want[win]["packets"]++
		tr.Want[win]["bytes"] += uint64(orig)
	}
	roce := func(win int, f RoCE, count ...string) {
		data := f.Bytes()
		add(win, data, len(data))
		w := tr.Want[win]
		w["roce_packets"]++
		w[opcodeKey(f.Op)]++
		w["payload_bytes"] += uint64(f.Payload)
		for _, c := range count {
			w[c]++
		}
		k := Flow{f.Src, f.Dst, f.DQP}
		pb := tr.Flows[win][k]
		tr.Flows[win][k] = [2]uint64{pb[0] + 1, pb[1] + uint64(len(data))}
	}
	ab := func(op decode.Opcode, psn uint32, ext []byte, payload int) RoCE {
		return RoCE{Src: a, Dst: b, Sport: 50000, Op: op, DQP: qpB, PSN: psn, Ext: ext, Payload: payload}
	}
	ba := func(op decode.Opcode, psn uint32, ext []byte) RoCE {
		return RoCE{Src: b, Dst: a, Sport: 50000, Op: op, DQP: qpA, PSN: psn, Ext: ext}
	}

	roce(0, ab(OpWriteFirst, 10, RETH(3072), 1024))
	roce(0, ab(OpWriteMiddle, 10+1, nil, 1024))
	last := ab(OpWriteLast, 12, nil, 1024)
	last.AckReq = true
	roce(0, last, "messages")
	roce(0, ba(OpAck, 12, AETH(0x1f, 1)), "acks")
	ce := ab(OpWriteOnly, 13, RETH(512), 512)
	ce.ECN = 3
	roce(0, ce, "messages", "ecn_ce")
	roce(0, RoCE{Src: b, Dst: a, Sport: 50000, Op: OpCNP, DQP: qpA, Ext: make([]byte, 16)}, "cnp")
	roce(0, ab(OpWriteOnly, 13, RETH(512), 512), "messages", "retransmits")
	roce(0, ab(OpWriteOnly, 15, RETH(512), 512), "messages", "psn_gaps")
	roce(0, ab(OpReadRequest, 16, RETH(2048), 0), "read_requests")
	roce(0, ba(OpReadFirst, 16, AETH(0x1f, 3)))
	roce(0, RoCE{Src: b, Dst: a, Sport: 50000, Op: 0x0f, DQP: qpA, PSN: 17, Ext: AETH(0x1f, 3), Payload: 1024}, "messages")
	roce(0, ba(OpAck, 17, AETH(0x60, 3)), "naks", "nak_code/0")
	roce(0, ba(OpAck, 17, AETH(0x2e, 3)), "rnr_naks")
	fe := RoCE{Src: c, Dst: d, Sport: 50001, Op: OpWriteOnly, DQP: qpD, PSN: 1, Ext: RETH(64), Payload: 64, FECN: true}
	roce(0, fe, "messages", "fecn")

	// A PFC frame pausing priorities 3 (quanta 0xffff) and 5 (7).
	add(0, PFC([6]byte{0x02, 0, 0, 0, 0, 9}, 0x28, [8]uint16{3: 0xffff, 5: 7}), 64)
	w0 := tr.Want[0]
	w0["other_packets"]++
	w0["pfc_frames/3"]++
	w0["pfc_quanta/3"] += 0xffff
	w0["pfc_frames/5"]++
	w0["pfc_quanta/5"] += 7
	dns := RoCE{Src: a, Dst: b, Sport: 1234, Op: 0, DQP: 1}.Bytes()
	binary.BigEndian.PutUint16(dns[36:], 53)
	add(0, dns, len(dns))
	w0["other_packets"]++
	cut := ab(OpWriteOnly, 20, RETH(64), 64).Bytes()
	add(0, cut[:14+20+8+6], len(cut))
	w0["truncated_packets"]++
	w0[errorKey(decode.ErrTruncated)]++
	bad := ab(0x1f, 21, nil, 64).Bytes()
	add(0, bad, len(bad))
	w0["malformed_packets"]++
	w0[errorKey(decode.ErrOpcode)]++

	roce(1, ab(OpWriteOnly, 18, RETH(4096), 4096), "messages")
	roce(1, ab(OpWriteOnly, 19, RETH(4096), 4096), "messages")
	roce(1, RoCE{Src: c, Dst: d, Sport: 50001, Op: 0x05, DQP: qpD, PSN: 2, Ext: []byte{1, 2, 3, 4}, Payload: 100}, "messages")
	return tr
}

func opcodeKey(op decode.Opcode) string { return "opcode/" + itoa(int(op)) }
func errorKey(e decode.Error) string    { return "decode_error/" + itoa(int(e)) }

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// SplitByConnection splits frames between n parts by UDP source port, the
// way a packet broker keeping both directions of a connection together
// would; frames without UDP go to part 0.
func SplitByConnection(frames []capture.Frame, n int) [][]capture.Frame {
	parts := make([][]capture.Frame, n)
	var p decode.Packet
	for _, f := range frames {
		k := 0
		if p.Decode(f.Data, f.Link); p.Headers&decode.HasUDP != 0 {
			k = int(p.SrcPort) % n
		}
		parts[k] = append(parts[k], f)
	}
	return parts
}
