package ipfix

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// discardConn is a net.Conn that drops what is written to it.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error)        { return len(b), nil }
func (discardConn) Close() error                       { return nil }
func (discardConn) SetWriteDeadline(t time.Time) error { return nil }

// BenchmarkAppendRecord is the cost of encoding one flow record.
func BenchmarkAppendRecord(b *testing.B) {
	r := handWindow()
	tmpl := makeTemplates(DefaultPEN)
	s := span{start: ntpTime(r.Window.From), end: ntpTime(r.Window.To), dport: 4791}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f := &r.Window.Flows[i%len(r.Window.Flows)]
		t, _ := templateOf(f)
		buf = appendRecord(buf[:0], &tmpl[t], f, 3, &s)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkWrite is the cost per record of exporting whole windows of a
// synthetic trace (templates, sets, message headers, the report's CNP
// lookup), with the socket write replaced by nothing.
func BenchmarkWrite(b *testing.B) {
	for _, conns := range []int{1000, 20000} {
		b.Run(strconv.Itoa(2*conns)+"flows", func(b *testing.B) {
			rs := synthReports(b, 20*conns, conns)
			var records int
			for _, r := range rs {
				records += len(r.Window.Flows)
			}
			e, _ := newRecorded(b, "udp", nil)
			e.conn = discardConn{}
			write := func() {
				for _, r := range rs {
					if err := e.Write(r); err != nil {
						b.Fatal(err)
					}
				}
			}
			write() // grow the buffers
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				write()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
			b.ReportMetric(0, "ns/op")
		})
	}
}
