package file

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rocescope/rocescope/capture"
)

// benchRecords is how many records the benchmark files hold.
const benchRecords = 1 << 20

// benchSnap is the captured length of every benchmark record.
const benchSnap = 128

var (
	benchOnce  sync.Once
	benchDir   string
	benchFiles map[string]string
)

// benchFile returns the path of a benchmark file of the given kind ("pcap"
// or "pcapng"), made once per test binary run.
func benchFile(b *testing.B, kind string) string {
	b.Helper()
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rocescope-file-bench")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = dir
		benchFiles = map[string]string{
			"pcap":      filepath.Join(dir, "bench.pcap"),
			"pcap-next": filepath.Join(dir, "bench-next.pcap"),
			"pcapng":    filepath.Join(dir, "bench.pcapng"),
		}
		writeBenchFile(b, benchFiles["pcap"], func(w io.Writer) error { return writeBenchPcap(w, 0) })
		writeBenchFile(b, benchFiles["pcap-next"], func(w io.Writer) error { return writeBenchPcap(w, benchRecords*1000) })
		writeBenchFile(b, benchFiles["pcapng"], writeBenchPcapng)
	})
	return benchFiles[kind]
}

// writeBenchFile creates path and fills it with body.
func writeBenchFile(b *testing.B, path string, body func(w io.Writer) error) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	if err := body(bw); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// writeBenchPcap writes benchRecords records of benchSnap bytes as classic
// pcap with the writer, 1 µs apart from start ns on.
func writeBenchPcap(w io.Writer, start int64) error {
	pw, err := NewWriter(w, &WriterOptions{SnapLen: benchSnap})
	if err != nil {
		return err
	}
	data := make([]byte, 1500)
	for i := range benchRecords {
		if err := pw.WriteFrame(start+int64(i)*1000, data, len(data)); err != nil {
			return err
		}
	}
	return pw.Flush()
}

// writeBenchPcapng writes benchRecords enhanced packet blocks of benchSnap
// bytes.
func writeBenchPcapng(w io.Writer) error {
	var blk []byte
	blk = appendBlock(blk[:0], blockSHB, shbBody(binary.LittleEndian), binary.LittleEndian)
	blk = appendBlock(blk, blockIDB, idbBody(binary.LittleEndian, 1, 0, nil), binary.LittleEndian)
	if _, err := w.Write(blk); err != nil {
		return err
	}
	data := make([]byte, benchSnap)
	for i := range benchRecords {
		blk = appendBlock(blk[:0], blockEPB, epbBody(binary.LittleEndian, 0, uint64(i), data, 1500), binary.LittleEndian)
		if _, err := w.Write(blk); err != nil {
			return err
		}
	}
	return nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchRead reads the file of the given kind over and over, opened by
// path or (byPath false) as standard input, as a pipe would be; one b.N is
// one record.
func benchRead(b *testing.B, kind string, byPath bool, batch int) {
	path := benchFile(b, kind)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	bt := capture.NewBatch(batch)
	b.SetBytes(fi.Size() / benchRecords)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var (
		src *Source
		f   *os.File
	)
	for i := 0; i < b.N; {
		if src == nil {
			if byPath {
				src, err = Open([]string{path}, nil)
			} else if f, err = os.Open(path); err == nil {
				src, err = open([]string{"-"}, nil, f)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		switch err := src.Next(bt); err {
		case nil:
			i += len(bt.Frames)
		case io.EOF:
			src.Close()
			src = nil
			if f != nil {
				f.Close()
			}
		default:
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if src != nil {
		src.Close()
	}
	if f != nil {
		f.Close()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/record")
}

// benchReadPaths reads the files over and over with opts; one b.N
// is one record.
func benchReadPaths(b *testing.B, paths []string, opts *Options, batch int) {
	var size int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		size += fi.Size()
	}
	bt := capture.NewBatch(batch)
	b.SetBytes(size / int64(len(paths)*benchRecords))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var src *Source
	for i := 0; i < b.N; {
		if src == nil {
			var err error
			if src, err = Open(paths, opts); err != nil {
				b.Fatal(err)
			}
		}
		switch err := src.Next(bt); err {
		case nil:
			i += len(bt.Frames)
		case io.EOF:
			src.Close()
			src = nil
		default:
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if src != nil {
		src.Close()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/record")
}

// BenchmarkReadFiles reads two pcap files: one after another
// (Concat), merged when they follow each other in time (a rotated
// capture), and merged when they hold the same times (two mirrors), where
// the merge alternates between the files at every frame.
func BenchmarkReadFiles(b *testing.B) {
	for _, c := range []struct {
		name  string
		kinds []string
		opts  *Options
	}{
		{"concat", []string{"pcap", "pcap-next"}, &Options{Concat: true}},
		{"merge-rotated", []string{"pcap", "pcap-next"}, nil},
		{"merge-mirrors", []string{"pcap", "pcap"}, nil},
	} {
		for _, n := range []int{64, 1024} {
			b.Run(fmt.Sprintf("%s/batch=%d", c.name, n), func(b *testing.B) {
				var paths []string
				for _, k := range c.kinds {
					paths = append(paths, benchFile(b, k))
				}
				benchReadPaths(b, paths, c.opts, n)
			})
		}
	}
}

// benchReadAll runs benchRead for a file and standard input and several batch
// sizes.
func benchReadAll(b *testing.B, kind string) {
	for _, byPath := range []bool{true, false} {
		mode := map[bool]string{true: "file", false: "stdin"}[byPath]
		for _, n := range []int{64, 256, 1024} {
			b.Run(fmt.Sprintf("%s/batch=%d", mode, n), func(b *testing.B) { benchRead(b, kind, byPath, n) })
		}
	}
}

// BenchmarkReadPcap reads classic pcap records of 128 captured bytes from a
// file in the page cache.
func BenchmarkReadPcap(b *testing.B) { benchReadAll(b, "pcap") }

// BenchmarkReadPcapng reads enhanced packet blocks of 128 captured bytes
// from a file in the page cache.
func BenchmarkReadPcapng(b *testing.B) { benchReadAll(b, "pcapng") }

// BenchmarkWrite writes 128-byte frames to io.Discard.
func BenchmarkWrite(b *testing.B) {
	w, err := NewWriter(io.Discard, nil)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, benchSnap)
	b.SetBytes(pcapRecordHeaderLen + benchSnap)
	b.ReportAllocs()
	for i := range b.N {
		if err := w.WriteFrame(int64(i), data, 1500); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
}
