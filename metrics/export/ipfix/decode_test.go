package ipfix

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/netsampler/goflow2/v2/decoders/netflow"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// recordingConn is a net.Conn that keeps what is written to it, failing
// the writes whose number (from 0) is in fail.
type recordingConn struct {
	net.Conn
	msgs   [][]byte
	writes int
	fail   map[int]bool
}

func (c *recordingConn) Write(b []byte) (int, error) {
	n := c.writes
	c.writes++
	if c.fail[n] {
		return 0, fmt.Errorf("write %d: %w", n, net.ErrClosed)
	}
	c.msgs = append(c.msgs, bytes.Clone(b))
	return len(b), nil
}

func (c *recordingConn) Close() error                       { return nil }
func (c *recordingConn) SetWriteDeadline(t time.Time) error { return nil }

// newRecorded returns an exporter whose messages go to the returned conn
// instead of a socket.
func newRecorded(t testing.TB, network string, o *Options) (*Exporter, *recordingConn) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	e, err := New(&Target{Network: "udp", Addr: pc.LocalAddr().String()}, o)
	if err != nil {
		t.Fatal(err)
	}
	e.conn.Close()
	c := &recordingConn{}
	e.conn, e.t.Network = c, network
	return e, c
}

// fieldKey names an element: its enterprise number (0 for IANA) and ID.
type fieldKey struct {
	pen uint32
	id  uint16
}

// decodedRecord is a data record as goflow2's decoder read it.
type decodedRecord struct {
	template uint16
	msg      int // index of its message
	values   map[fieldKey][]byte
}

// decodedMessage is the header of a message.
type decodedMessage struct {
	length         int
	exportTime     uint32
	seq, domain    uint32
	records        int
	templates      []uint16 // template IDs it carried
	templateFields map[uint16][]fieldKey
}

// goflowDecode decodes messages with goflow2's IPFIX decoder, an
// implementation independent of ours, failing t on any error or any set it
// could not decode. Templates carry over from message to message, as in a
// collector.
func goflowDecode(t testing.TB, msgs [][]byte) ([]decodedMessage, []decodedRecord) {
	t.Helper()
	ts := netflow.CreateTemplateSystem()
	var ms []decodedMessage
	var rs []decodedRecord
	for i, m := range msgs {
		var p netflow.IPFIXPacket
		var v9 netflow.NFv9Packet
		if err := netflow.DecodeMessageVersion(bytes.NewBuffer(m), ts, &v9, &p); err != nil {
			t.Fatalf("message %d: goflow2: %v", i, err)
		}
		if p.Version != 10 || int(p.Length) != len(m) {
			t.Fatalf("message %d: version %d length %d, want 10 and %d", i, p.Version, p.Length, len(m))
		}
		dm := decodedMessage{length: len(m), exportTime: p.ExportTime, seq: p.SequenceNumber, domain: p.ObservationDomainId, templateFields: map[uint16][]fieldKey{}}
		for _, fs := range p.FlowSets {
			switch fs := fs.(type) {
			case netflow.TemplateFlowSet:
				for _, tr := range fs.Records {
					dm.templates = append(dm.templates, tr.TemplateId)
					var keys []fieldKey
					for _, f := range tr.Fields {
						k := fieldKey{id: f.Type}
						if f.PenProvided {
							k.pen = f.Pen
						}
						keys = append(keys, k)
					}
					dm.templateFields[tr.TemplateId] = keys
				}
			case netflow.DataFlowSet:
				for _, dr := range fs.Records {
					r := decodedRecord{template: fs.Id, msg: i, values: map[fieldKey][]byte{}}
					for _, v := range dr.Values {
						k := fieldKey{id: v.Type}
						if v.PenProvided {
							k.pen = v.Pen
						}
						if _, dup := r.values[k]; dup {
							t.Fatalf("message %d: element %v twice in a record", i, k)
						}
						r.values[k] = v.Value.([]byte)
					}
					rs = append(rs, r)
					dm.records++
				}
			default:
				t.Fatalf("message %d: goflow2 could not decode a set: %T %+v", i, fs, fs)
			}
		}
		ms = append(ms, dm)
	}
	return ms, rs
}

// ntpToUnix converts dateTimeNanoseconds as goflow2 does (truncating).
func ntpToUnix(b []byte) int64 {
	v := binary.BigEndian.Uint64(b)
	return (int64(v>>32)-ntpEpochOffset)*1e9 + int64(float64(v&0xffffffff)*1e9/(1<<32))
}

// wantOpFlags classifies an opcode from the IBTA opcode tables, written
// out apart from decode's: the bits rocev2OperationFlags must have.
func wantOpFlags(op uint8) uint16 {
	if op == 0x81 {
		return OpCNP
	}
	low := op & 0x1f
	valid := map[uint8]func(uint8) bool{
		0: func(l uint8) bool { return l <= 0x14 || l == 0x16 || l == 0x17 || l == 0x1c || l == 0x1d },
		1: func(l uint8) bool { return l <= 0x0b },
		2: func(l uint8) bool { return l <= 0x15 },
		3: func(l uint8) bool { return l == 4 || l == 5 },
		5: func(l uint8) bool { return l <= 0x14 || l == 0x16 || l == 0x17 },
	}
	svc := map[uint8]uint16{0: OpRC, 1: OpUC, 2: OpRD, 3: OpUD, 5: OpXRC}
	ok := valid[op>>5]
	if ok == nil || !ok(low) {
		return OpOther
	}
	f := svc[op>>5]
	switch {
	case low <= 5 || low == 0x16 || low == 0x17:
		return f | OpSend
	case low <= 0x0b:
		return f | OpWrite
	case low == 0x0c:
		return f | OpReadRequest
	case low <= 0x10:
		return f | OpReadResponse
	case low == 0x11 || low == 0x12:
		return f | OpAcknowledge
	case low == 0x13 || low == 0x14 || low == 0x1d:
		return f | OpAtomic
	}
	return f | OpOther
}

// wantValues returns the elements a record of flow f must carry, each
// number written out here from the IANA registry and the element list of
// docs/ipfix.md.
func wantValues(f *metrics.FlowRecord, cnp uint64, pen uint32, dport uint16) map[fieldKey][]byte {
	u := func(v uint64, n int) []byte {
		b := binary.BigEndian.AppendUint64(nil, v)
		return b[8-n:]
	}
	iana := func(id uint16) fieldKey { return fieldKey{0, id} }
	ent := func(id uint16) fieldKey { return fieldKey{pen, id} }
	w := map[fieldKey][]byte{}
	src, dst := f.Key.Src.As16(), f.Key.Dst.As16()
	switch f.Key.Src.Kind() {
	case decode.AddrIPv4:
		w[iana(8)], w[iana(12)] = src[12:], dst[12:]
	case decode.AddrIPv6:
		w[iana(27)], w[iana(28)] = src[:], dst[:]
	case decode.AddrGID:
		w[ent(21)], w[ent(22)] = src[:], dst[:]
	case decode.AddrLID:
		w[ent(23)], w[ent(24)] = src[14:], dst[14:]
	}
	if k := f.Key.Src.Kind(); k == decode.AddrIPv4 || k == decode.AddrIPv6 {
		w[iana(7)], w[iana(11)], w[iana(4)] = u(uint64(f.Sport), 2), u(uint64(dport), 2), []byte{17}
	}
	w[iana(1)] = u(f.C[metrics.FlowBytes], 8)
	w[iana(2)] = u(f.C[metrics.FlowPackets], 8)
	w[iana(136)] = []byte{2}
	w[ent(1)] = u(uint64(f.Key.DQP), 4)
	if f.SQPKnown {
		w[ent(2)] = u(uint64(f.SQP), 4)
	}
	var top uint8
	var most uint64
	var flags uint16
	for i, n := range f.Ops.N {
		if n == 0 {
			break
		}
		if n > most {
			top, most = f.Ops.Op[i], n
		}
		flags |= wantOpFlags(f.Ops.Op[i])
	}
	if f.Ops.Other > 0 {
		flags |= OpOther
	}
	w[ent(3)] = []byte{top}
	w[ent(4)] = u(uint64(flags), 2)
	for id, c := range map[uint16]metrics.FlowCounter{5: metrics.FlowPayloadBytes, 6: metrics.FlowMessages,
		8: metrics.FlowECNCE, 9: metrics.FlowFECN, 10: metrics.FlowBECN, 11: metrics.FlowAcks, 12: metrics.FlowNAKs,
		13: metrics.FlowRNRNAKs, 14: metrics.FlowRetransmits, 15: metrics.FlowPSNGaps, 16: metrics.FlowOutOfOrder,
		18: metrics.FlowReadLatencyCount, 20: metrics.FlowAckLatencyCount} {
		w[ent(id)] = u(f.C[c], 8)
	}
	w[ent(7)] = u(cnp, 8)
	meanOf := func(sum, n uint64) uint64 {
		if n == 0 {
			return 0
		}
		// floor((2 sum + n) / 2n), in big integers
		x := new(big.Int).Lsh(new(big.Int).SetUint64(sum), 1)
		x.Add(x, new(big.Int).SetUint64(n))
		return x.Div(x, new(big.Int).Lsh(new(big.Int).SetUint64(n), 1)).Uint64()
	}
	w[ent(17)] = u(meanOf(f.C[metrics.FlowReadLatencySum], f.C[metrics.FlowReadLatencyCount]), 8)
	w[ent(19)] = u(meanOf(f.C[metrics.FlowAckLatencySum], f.C[metrics.FlowAckLatencyCount]), 8)
	return w
}

// checkExport decodes msgs with goflow2 and checks them against the
// reports that made them: every flow of every window is a record with the
// values wantValues gives and the window's span, each message is within
// the size bound, its sequence number counts the records before it, and
// every data set follows its template.
func checkExport(t testing.TB, msgs [][]byte, reports []*report.Report, o Options) {
	t.Helper()
	ms, rs := goflowDecode(t, msgs)
	var seq uint32
	known := map[uint16]bool{}
	for i, m := range ms {
		if m.length > o.MaxMessageBytes {
			t.Errorf("message %d: %d bytes, above the bound %d", i, m.length, o.MaxMessageBytes)
		}
		if m.seq != seq || m.domain != o.Domain {
			t.Errorf("message %d: sequence %d domain %d, want %d and %d", i, m.seq, m.domain, seq, o.Domain)
		}
		seq += uint32(m.records)
		for _, id := range m.templates {
			known[id] = true
		}
	}
	type flowID struct {
		start int64
		key   metrics.FlowKey
	}
	want := map[flowID]map[fieldKey][]byte{}
	spans := map[flowID][2]int64{}
	for _, r := range reports {
		w := r.Window
		from, to := w.From, w.To
		if w.Covered() == 0 {
			from, to = w.Start, w.Start+w.Length
		}
		for i := range w.Flows {
			f := &w.Flows[i]
			id := flowID{from, f.Key}
			want[id] = wantValues(f, r.FlowCNP(i), o.PEN, o.RoCEPort)
			spans[id] = [2]int64{from, to}
		}
	}
	if len(rs) != len(want) {
		t.Errorf("%d data records, want %d (one per flow and window)", len(rs), len(want))
	}
	for i, r := range rs {
		if !known[r.template] {
			t.Fatalf("record %d (message %d): template %d never sent", i, r.msg, r.template)
		}
		start, end := ntpToUnix(r.values[fieldKey{0, 156}]), ntpToUnix(r.values[fieldKey{0, 157}])
		id := flowID{start: start, key: keyOf(t, r.values, o.PEN)}
		w, ok := want[id]
		if !ok {
			t.Fatalf("record %d (message %d): no flow %v in the window from %d", i, r.msg, id.key, start)
		}
		delete(want, id)
		if sp := spans[id]; end != sp[1] {
			t.Errorf("record %d: flow end %d, want %d", i, end, sp[1])
		}
		got := r.values
		delete(got, fieldKey{0, 156})
		delete(got, fieldKey{0, 157})
		for k, v := range w {
			if !bytes.Equal(got[k], v) {
				t.Errorf("record %d (%v): element %v = %x, want %x", i, id.key, k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := w[k]; !ok {
				t.Errorf("record %d: element %v not expected", i, k)
			}
		}
	}
}

// keyOf reads a flow key back from a decoded record.
func keyOf(t testing.TB, v map[fieldKey][]byte, pen uint32) metrics.FlowKey {
	t.Helper()
	var k metrics.FlowKey
	k.DQP = binary.BigEndian.Uint32(v[fieldKey{pen, 1}])
	switch {
	case v[fieldKey{0, 8}] != nil:
		k.Src, k.Dst = decode.AddrFrom4([4]byte(v[fieldKey{0, 8}])), decode.AddrFrom4([4]byte(v[fieldKey{0, 12}]))
	case v[fieldKey{0, 27}] != nil:
		k.Src, k.Dst = decode.AddrFrom16([16]byte(v[fieldKey{0, 27}])), decode.AddrFrom16([16]byte(v[fieldKey{0, 28}]))
	case v[fieldKey{pen, 21}] != nil:
		k.Src, k.Dst = decode.AddrFromGID([16]byte(v[fieldKey{pen, 21}])), decode.AddrFromGID([16]byte(v[fieldKey{pen, 22}]))
	case v[fieldKey{pen, 23}] != nil:
		k.Src = decode.AddrFromLID(binary.BigEndian.Uint16(v[fieldKey{pen, 23}]))
		k.Dst = decode.AddrFromLID(binary.BigEndian.Uint16(v[fieldKey{pen, 24}]))
	default:
		t.Fatalf("record without addresses: %v", v)
	}
	return k
}
