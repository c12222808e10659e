package clickhouse

import (
	"path/filepath"
	"testing"

	"github.com/rocescope/rocescope/internal/clickhousetest"
)

// BenchmarkSink measures reports of 1000 flows each written into a
// clickhouse-server the benchmark starts, Close (every insert) included.
func BenchmarkSink(b *testing.B) {
	addr := clickhousetest.Start(b)
	r := testReport(1)
	for i := range 1000 {
		f := r.Top[0]
		f.Key.DQP = uint32(i)
		r.All = append(r.All, f)
	}
	b.ReportAllocs()
	s, err := New(&Target{Addr: addr, Database: "bench", Spill: filepath.Join(b.TempDir(), "spill")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		r.Window.Start = int64(i) * r.Window.Length
		if err := s.Write(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*len(r.All))/b.Elapsed().Seconds(), "flow_rows/s")
}

// BenchmarkAppendRows measures turning a report of 1000 flows into rows,
// without a server.
func BenchmarkAppendRows(b *testing.B) {
	r := testReport(1)
	for i := range 1000 {
		f := r.Top[0]
		f.Key.DQP = uint32(i)
		r.All = append(r.All, f)
	}
	b.ReportAllocs()
	var win, flows []byte
	for b.Loop() {
		var err error
		if win, flows, err = appendRows(win[:0], flows[:0], r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(r.All))/b.Elapsed().Seconds(), "flow_rows/s")
}
