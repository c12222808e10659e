package clickhouse

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/clickhousetest"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// benchReport returns the report of a window of 1000 flows, every one
// listed, with the figures of a RoCE WRITE stream: addresses, QPs,
// opcodes, bytes and ACKs, a few CNPs and CE marks, no trouble.
func benchReport() *report.Report {
	r := testReport(1)
	r.Window.From, r.Window.To = r.Window.Start, r.Window.Start+r.Window.Length
	for i := range 1000 {
		f := report.FlowReport{Rate: 1e9 + float64(i)*1234.5, PrevRate: 1e9, Elephant: i < 50}
		f.Key.Src = decode.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		f.Key.Dst = decode.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		f.Key.DQP, f.SQP, f.SQPKnown, f.Sport = uint32(0x10000+i), uint32(0x20000+i), true, uint16(49152+i)
		f.Ops.Add(6, 100)
		f.Ops.Add(7, 800)
		f.Ops.Add(8, 100)
		for c, v := range map[metrics.FlowCounter]uint64{
			metrics.FlowBytes: 1_000_000 + uint64(i), metrics.FlowPayloadBytes: 950_000, metrics.FlowPackets: 1000,
			metrics.FlowMessages: 100, metrics.FlowAcks: 100, metrics.FlowCNP: uint64(i % 3), metrics.FlowECNCE: uint64(i % 5),
		} {
			f.C[c] = v
		}
		r.All = append(r.All, f)
	}
	r.Top = r.All[:10]
	return r
}

// BenchmarkSink measures reports of 1000 flows each written into a
// clickhouse-server the benchmark starts, Close (every insert) included,
// the server's start not: flow rows per second of wall time, and the CPU
// time of this process (the sink's side) per row.
func BenchmarkSink(b *testing.B) {
	addr := clickhousetest.Start(b)
	r := benchReport()
	b.ReportAllocs()
	s, err := New(&Target{Addr: addr, Database: "bench", Spill: filepath.Join(b.TempDir(), "spill")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for i := range b.N {
		w := r.Window
		w.Start = int64(i) * w.Length
		w.From, w.To = w.Start, w.Start+w.Length
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
	r := benchReport()
	b.ReportAllocs()
	var rw rowWriter
	var bt batch
	for b.Loop() {
		bt.rows[tWindows], bt.rows[tFlows], bt.wins = bt.rows[tWindows][:0], bt.rows[tFlows][:0], bt.wins[:0]
		rw.add(&bt, r, 1)
	}
	b.ReportMetric(float64(b.N*len(r.All))/b.Elapsed().Seconds(), "flow_rows/s")
}
