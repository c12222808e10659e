package ipfix

import (
	"encoding/binary"
	"testing"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// fuzzReader hands out the fuzz input as numbers, zeros past its end.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) bytes(n int) []byte {
	out := make([]byte, n)
	copy(out, r.b)
	r.b = r.b[min(n, len(r.b)):]
	return out
}

func (r *fuzzReader) u8() uint8   { return r.bytes(1)[0] }
func (r *fuzzReader) u16() uint16 { return binary.BigEndian.Uint16(r.bytes(2)) }
func (r *fuzzReader) u64() uint64 { return binary.BigEndian.Uint64(r.bytes(8)) }

// FuzzExport encodes windows of flows made from the input (every address
// kind, any counters, opcodes and source QPs, any message bound and PEN)
// and decodes the messages with goflow2's decoder: every flow must come
// back as one record with every element right, every message within its
// bound, the sequence numbers counting the records.
func FuzzExport(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x05\x00\x10\x00\x00\x00\x2a\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := &fuzzReader{b: in}
		o := Options{
			PEN:             uint32(r.u16()) + 1,
			MaxMessageBytes: minMessageBytes() + int(r.u16())%9000,
			Domain:          uint32(r.u8()) + 1,
			RoCEPort:        r.u16() | 1,
		}
		var reports []*report.Report
		for win := range 1 + int(r.u8()%3) {
			w := &metrics.Window{Length: 1e9, Start: int64(r.u16())*1e9 + int64(win)*1e12}
			w.From, w.To = w.Start+int64(r.u16()), w.Start+1e9-int64(r.u16())
			for range int(r.u8() % 64) {
				var fl metrics.FlowRecord
				var a, b [16]byte
				copy(a[:], r.bytes(16))
				copy(b[:], r.bytes(16))
				switch r.u8() % 4 {
				case 0:
					fl.Key.Src, fl.Key.Dst = decode.AddrFrom4([4]byte(a[:4])), decode.AddrFrom4([4]byte(b[:4]))
				case 1:
					fl.Key.Src, fl.Key.Dst = decode.AddrFrom16(a), decode.AddrFrom16(b)
				case 2:
					fl.Key.Src, fl.Key.Dst = decode.AddrFromGID(a), decode.AddrFromGID(b)
				case 3:
					fl.Key.Src, fl.Key.Dst = decode.AddrFromLID(uint16(a[0])<<8|uint16(a[1])), decode.AddrFromLID(uint16(b[0])<<8|uint16(b[1]))
				}
				fl.Key.DQP = uint32(r.u64()) & 0xffffff
				fl.SQP, fl.SQPKnown = uint32(r.u64())&0xffffff, r.u8()%2 == 0
				fl.Sport = r.u16()
				for c := range fl.C {
					if r.u8()%2 == 0 {
						fl.C[c] = r.u64()
					}
				}
				for range int(r.u8() % 12) {
					fl.Ops.Add(r.u8(), uint64(r.u16())+1)
				}
				w.Flows = append(w.Flows, fl)
			}
			// A window holds each key once.
			seen := map[metrics.FlowKey]bool{}
			flows := w.Flows[:0]
			for _, fl := range w.Flows {
				if !seen[fl.Key] {
					seen[fl.Key] = true
					flows = append(flows, fl)
				}
			}
			w.Flows = flows
			reports = append(reports, &report.Report{Window: w})
		}
		e, c := newRecorded(t, "udp", &o)
		for _, rp := range reports {
			if err := e.Write(rp); err != nil {
				t.Fatal(err)
			}
		}
		checkExport(t, c.msgs, reports, e.o)
	})
}
