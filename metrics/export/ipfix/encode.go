package ipfix

import (
	"encoding/binary"
	"slices"

	"github.com/rocescope/rocescope/metrics"
)

// Wire constants of RFC 7011.
const (
	version          = 10 // message header version
	headerLen        = 16 // message header
	setHeaderLen     = 4  // set ID and length
	templateSetID    = 2  // set ID of template sets
	enterpriseBit    = 0x8000
	maxMessageLength = 65535 // the header's length field
)

// ntpEpochOffset is the seconds from 1900-01-01 (the NTP epoch of
// dateTimeNanoseconds) to the Unix epoch.
const ntpEpochOffset = 2208988800

// ntpTime returns ns since the Unix epoch as dateTimeNanoseconds: seconds
// since 1900 in the high 32 bits (wrapping in 2036, as NTP's era 0 does),
// the fraction of a second in units of 2^-32 s in the low 32. The fraction
// is rounded up, so that a collector that converts it back and truncates
// (goflow2, Wireshark) reads the same nanosecond.
func ntpTime(ns int64) uint64 {
	sec, frac := ns/1e9, ns%1e9
	if frac < 0 {
		sec, frac = sec-1, frac+1e9
	}
	f := (uint64(frac)<<32 + 1e9 - 1) / 1e9
	return uint64(uint32(sec+ntpEpochOffset))<<32 | f
}

// template is one template, encoded: its ID, fields, the length of its
// data records and its template record.
type template struct {
	id     uint16
	fields []field
	recLen int
	record []byte // template ID, field count, field specifiers
}

// makeTemplates returns every template, with enterprise elements under pen.
func makeTemplates(pen uint32) [numTemplates]template {
	var ts [numTemplates]template
	for t := range ts {
		fs := templateFields(t)
		tp := template{id: uint16(firstTemplateID + t), fields: fs}
		tp.record = binary.BigEndian.AppendUint16(tp.record, tp.id)
		tp.record = binary.BigEndian.AppendUint16(tp.record, uint16(len(fs)))
		for _, f := range fs {
			tp.recLen += int(f.el.Length)
			if f.el.Enterprise {
				tp.record = binary.BigEndian.AppendUint16(tp.record, f.el.ID|enterpriseBit)
				tp.record = binary.BigEndian.AppendUint16(tp.record, f.el.Length)
				tp.record = binary.BigEndian.AppendUint32(tp.record, pen)
			} else {
				tp.record = binary.BigEndian.AppendUint16(tp.record, f.el.ID)
				tp.record = binary.BigEndian.AppendUint16(tp.record, f.el.Length)
			}
		}
		ts[t] = tp
	}
	return ts
}

// span is what the records of one window share.
type span struct {
	start, end uint64 // dateTimeNanoseconds
	dport      uint16
}

// appendRecord appends the data record of flow f with template tp; cnp is
// the CNPs attributed to f. It writes exactly the template's record length
// and allocates nothing when b has room.
func appendRecord(b []byte, tp *template, f *metrics.FlowRecord, cnp uint64, s *span) []byte {
	n := len(b)
	b = slices.Grow(b, tp.recLen)[:n+tp.recLen]
	out := b[n:]
	ops, top := operations(&f.Ops)
	for i := range tp.fields {
		fd := &tp.fields[i]
		var v uint64
		switch fd.src {
		case srcSrcAddr, srcDstAddr:
			a := &f.Key.Src
			if fd.src == srcDstAddr {
				a = &f.Key.Dst
			}
			a16 := a.As16()
			out = out[copy(out, a16[16-fd.el.Length:]):]
			continue
		case srcSport:
			v = uint64(f.Sport)
		case srcDport:
			v = uint64(s.dport)
		case srcProtocol:
			v = 17
		case srcCounter:
			v = f.C[fd.counter]
		case srcStart:
			v = s.start
		case srcEnd:
			v = s.end
		case srcEndReason:
			v = 2 // active timeout
		case srcDQP:
			v = uint64(f.Key.DQP)
		case srcSQP:
			v = uint64(f.SQP)
		case srcOpcode:
			v = uint64(top)
		case srcOperations:
			v = uint64(ops)
		case srcCNP:
			v = cnp
		case srcReadLatencyMean:
			v = mean(f.C[metrics.FlowReadLatencySum], f.C[metrics.FlowReadLatencyCount])
		case srcAckLatencyMean:
			v = mean(f.C[metrics.FlowAckLatencySum], f.C[metrics.FlowAckLatencyCount])
		}
		switch fd.el.Length {
		case 1:
			out[0] = byte(v)
		case 2:
			binary.BigEndian.PutUint16(out, uint16(v))
		case 4:
			binary.BigEndian.PutUint32(out, uint32(v))
		default:
			binary.BigEndian.PutUint64(out, v)
		}
		out = out[fd.el.Length:]
	}
	return b
}

// mean returns sum/n rounded to the nearest integer (halves up), 0 when
// n is 0.
func mean(sum, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	q, r := sum/n, sum%n
	if r >= n-r {
		q++
	}
	return q
}

// message is an IPFIX message being built: a header, then sets. The zero
// value is unusable; call begin.
type message struct {
	buf     []byte
	set     int    // offset of the open set's header, or -1
	setID   uint16 // ID of the open set
	records uint32 // data records in the message
	// templates has bit t set when the message carries template t.
	templates uint16
}

// begin empties m for a new message, keeping its memory.
func (m *message) begin() {
	m.buf = append(m.buf[:0], make([]byte, headerLen)...)
	m.set, m.setID, m.records, m.templates = -1, 0, 0, 0
}

// openSet closes the open set and opens one with ID id.
func (m *message) openSet(id uint16) {
	m.closeSet()
	m.set, m.setID = len(m.buf), id
	m.buf = append(m.buf, byte(id>>8), byte(id), 0, 0)
}

// closeSet writes the open set's length, if a set is open.
func (m *message) closeSet() {
	if m.set >= 0 {
		binary.BigEndian.PutUint16(m.buf[m.set+2:], uint16(len(m.buf)-m.set))
		m.set = -1
	}
}

// finish closes the open set, writes the header and returns the message.
// seq is the data records sent before this message in the observation
// domain's stream (RFC 7011 section 3.1).
func (m *message) finish(exportTime, seq, domain uint32) []byte {
	m.closeSet()
	h := m.buf[:headerLen]
	binary.BigEndian.PutUint16(h[0:], version)
	binary.BigEndian.PutUint16(h[2:], uint16(len(m.buf)))
	binary.BigEndian.PutUint32(h[4:], exportTime)
	binary.BigEndian.PutUint32(h[8:], seq)
	binary.BigEndian.PutUint32(h[12:], domain)
	return m.buf
}
