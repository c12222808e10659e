package clickhouse

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rocescope/rocescope/internal/clickhousetest"
)

// BenchmarkSink measures reports of 1000 flows each written into a
// clickhouse-server the benchmark starts, Close (every insert) included,
// the server's start not: flow rows per second of wall time, and the CPU
// time of this process (the sink's side) per row.
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
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for i := range b.N {
		r.Window.Start = int64(i) * r.Window.Length
		if err := s.Write(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	rows := float64(b.N * len(r.All))
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(rows/b.Elapsed().Seconds(), "flow_rows/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/rows, "sink_cpu_ns/row")
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
	var rw rowWriter
	var bt batch
	for b.Loop() {
		bt.rows[tWindows], bt.rows[tFlows], bt.wins = bt.rows[tWindows][:0], bt.rows[tFlows][:0], bt.wins[:0]
		rw.add(&bt, r, 1)
	}
	b.ReportMetric(float64(b.N*len(r.All))/b.Elapsed().Seconds(), "flow_rows/s")
}
