package file

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/rocescope/rocescope/capture"
)

// pipe returns a reader that delivers b in chunks of n bytes through an
// io.Pipe, as standard input connected to a pipe would.
func pipe(t testing.TB, b []byte, n int) io.Reader {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		for len(b) > 0 {
			k := min(n, len(b))
			if _, err := pw.Write(b[:k]); err != nil {
				return
			}
			b = b[k:]
		}
		pw.Close()
	}()
	t.Cleanup(func() { pr.Close() })
	return pr
}

func TestStdin(t *testing.T) {
	ng, ngWant := basePcapng()
	pc, pcWant := basePcap(65535)
	for _, c := range []struct {
		name string
		file []byte
		want []frame
	}{
		{"pcap", pc, pcWant},
		{"pcapng", ng, ngWant},
		{"gzip", gz(t, ng), ngWant},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := writeTemp(t, pc)[0]
			src, err := open([]string{"-", file}, &Options{Concat: true}, pipe(t, c.file, 7))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			got, err := readAll(t, src, 2)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffFrames(append(c.want, pcWant...), got); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
		})
	}
}

// manyRecords returns a pcap and a pcapng file of n records of random
// lengths up to maxLen, and their frames.
func manyRecords(n, maxLen int) (pcap, pcapng []byte, want []frame) {
	rnd := rand.New(rand.NewPCG(1, 2))
	le := binary.LittleEndian
	pcap = pcapHeader(le, 0xa1b23c4d, 0, 1)
	pcapng = appendBlock(nil, blockSHB, shbBody(le), le)
	pcapng = appendBlock(pcapng, blockIDB, idbBody(le, 1, 0, option(le, optTSResol, []byte{9})), le)
	for i := range n {
		data := seq(byte(i), rnd.IntN(maxLen+1))
		orig := uint32(len(data) + 1 + rnd.IntN(2)) // KeepGoing takes no record of 0 bytes on the wire
		pcap = pcapRecord(pcap, le, sec0, uint32(i), data, orig)
		pcapng = appendBlock(pcapng, blockEPB, epbBody(le, 0, ns0+uint64(i), data, orig), le)
		want = append(want, frame{data, ns0 + int64(i), orig, 1, 0})
	}
	return pcap, pcapng, want
}

// TestSmallBuffers reads through read buffers of a few records, fed one
// byte per read, so that refills switch buffers and batches end where both
// buffers hold lent frames. readAll checks that no frame is overwritten
// before its batch is returned.
func TestSmallBuffers(t *testing.T) {
	pc, ng, want := manyRecords(500, 60)
	damaged := append([]byte(nil), pc...)
	binary.LittleEndian.PutUint32(damaged[24+8:], 1000) // record 1: caplen over the limit
	// Block 3, the first packet, with a total length that is no multiple
	// of 4: the search for the next block starts 4 bytes into it.
	ngDamaged := patch(ng, 28+32+4, 1001) // after the 28-byte section and 32-byte interface blocks
	for _, c := range []struct {
		name   string
		file   []byte
		opts   Options
		want   []frame
		errors uint64
	}{
		{"pcap", pc, Options{SnapLimit: 100}, want, 0},
		{"pcapng", ng, Options{SnapLimit: 100}, want, 0},
		{"gzip", gz(t, pc), Options{SnapLimit: 100}, want, 0},
		{"pcap resync", damaged, Options{SnapLimit: 100, KeepGoing: true}, want[1:], 1},
		{"pcapng resync", ngDamaged, Options{SnapLimit: 100, KeepGoing: true}, want[1:], 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := open([]string{"-"}, &c.opts, iotest.OneByteReader(bytes.NewReader(c.file)))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			src.win.size = 200
			b := capture.NewBatch(50)
			var got []frame
			short := 0
			for {
				err := src.Next(b)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(b.Frames) < cap(b.Frames) {
					short++
				}
				got = copyFrames(got, b)
			}
			if diff := diffFrames(c.want, got); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
			if short < 2 {
				t.Errorf("%d short batches, want the buffers to have run out of room", short)
			}
			if s := src.Stats(); s.Errors != c.errors {
				t.Errorf("Stats() = %+v, want %d errors", s, c.errors)
			}
		})
	}
}

func TestClose(t *testing.T) {
	pc, _ := basePcap(65535)
	src, err := Open(writeTemp(t, pc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Next(&capture.Batch{}); !errors.Is(err, capture.ErrNoRoom) {
		t.Errorf("Next with a batch of no room = %v, want capture.ErrNoRoom", err)
	}
	b := capture.NewBatch(1)
	if err := src.Next(b); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := src.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := src.Next(b); !errors.Is(err, os.ErrClosed) || len(b.Frames) != 0 {
		t.Errorf("Next after Close: %d frames, error %v, want none and os.ErrClosed", len(b.Frames), err)
	}
	if s := src.Stats(); s.Received != 1 {
		t.Errorf("Stats() after Close = %+v, want 1 received", s)
	}
}

// TestCloseDuringNext closes the source while Next waits for standard
// input: Next must return os.ErrClosed once its read returns.
func TestCloseDuringNext(t *testing.T) {
	pc, _ := basePcap(65535)
	pr, pw := io.Pipe()
	src, err := open([]string{"-"}, nil, pr)
	if err != nil {
		t.Fatal(err)
	}
	written := make(chan error)
	go func() {
		_, err := pw.Write(pc[:30]) // header and part of a record
		written <- err
	}()
	done := make(chan error)
	b := capture.NewBatch(4)
	go func() { done <- src.Next(b) }()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	// Next has read the 30 bytes and waits for more.
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; !errors.Is(err, os.ErrClosed) || len(b.Frames) != 0 {
		t.Errorf("Next: %d frames, error %v, want none and os.ErrClosed", len(b.Frames), err)
	}
}

// allocSink keeps the compiler from optimising away what a no-allocation
// test reads.
var allocSink int

// TestNoAllocs proves that Next allocates nothing per call once running,
// for mapped pcap and pcapng files, for read (unmapped) input, and for the
// two files merged.
func TestNoAllocs(t *testing.T) {
	pc, ng, _ := manyRecords(20000, 100)
	paths := writeTemp(t, pc, ng)
	stream, err := os.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for _, c := range []struct {
		name  string
		paths []string
		stdin io.Reader
	}{
		{"pcap", paths[:1], nil},
		{"pcapng", paths[1:], nil},
		{"read", []string{"-"}, stream},
		{"merged", paths, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := open(c.paths, nil, c.stdin)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			b := capture.NewBatch(32)
			if err := src.Next(b); err != nil { // opens the file
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(200, func() {
				if err := src.Next(b); err != nil {
					t.Fatal(err)
				}
				allocSink += len(b.Frames[0].Data)
			})
			if allocs != 0 {
				t.Errorf("Next allocates %v times per call, want 0", allocs)
			}
		})
	}
}

// TestProgressGzip checks that progress in gzip input counts compressed
// bytes against the compressed size.
func TestProgressGzip(t *testing.T) {
	pc, _, _ := manyRecords(3000, 200)
	z := gz(t, pc)
	src, err := Open(writeTemp(t, z), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := capture.NewBatch(1)
	if err := src.Next(b); err != nil {
		t.Fatal(err)
	}
	if p := src.Progress(); p.File != 1 || p.Total != int64(len(z)) || p.Done <= 0 || p.Done > p.Total {
		t.Errorf("Progress() after one frame = %+v, want 0 < Done <= Total = %d", p, len(z))
	}
	if _, err := readAll(t, src, 100); err != nil {
		t.Fatal(err)
	}
	if p := src.Progress(); p.Done != int64(len(z)) || p.Total != int64(len(z)) {
		t.Errorf("Progress() at the end = %+v, want Done = Total = %d", p, len(z))
	}
}

// TestSnapLimit reads a record of 300 KiB, over the default limit, mapped
// and through the read buffers.
func TestSnapLimit(t *testing.T) {
	le := binary.LittleEndian
	big := seq(0, 300<<10)
	file := pcapRecord(pcapHeader(le, 0xa1b2c3d4, 0, 1), le, sec0, 0, big, uint32(len(big)))
	want := []frame{{big, ns0, uint32(len(big)), 1, 0}}
	for _, in := range [][]byte{file, gz(t, file)} {
		if _, _, err := readFiles(t, nil, in); !errors.Is(err, ErrRecordTooLarge) {
			t.Errorf("default limit: error %v, want ErrRecordTooLarge", err)
		}
		got, _, err := readFiles(t, &Options{SnapLimit: 1 << 20}, in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := diffFrames(want, got); diff != "" {
			t.Errorf("frames (-want +got):\n%s", diff)
		}
	}
}

// TestLongBlock skips a custom block longer than the window between two
// packets, mapped, from gzip and through small read buffers; and reports a
// cut or inconsistent one.
func TestLongBlock(t *testing.T) {
	le := binary.LittleEndian
	ng, want := basePcapng()
	long := appendBlock(nil, blockCustom, make([]byte, 1<<20), le) // at offset 92
	file := insert(ng, 92, long...)
	for _, in := range [][]byte{file, gz(t, file)} {
		got, _, err := readFiles(t, nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := diffFrames(want, got); diff != "" {
			t.Errorf("frames (-want +got):\n%s", diff)
		}
	}
	src, err := open([]string{"-"}, nil, iotest.OneByteReader(bytes.NewReader(file)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	src.win.size = 200
	got, err := readAll(t, src, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffFrames(want, got); diff != "" {
		t.Errorf("small buffers: frames (-want +got):\n%s", diff)
	}

	n := len(long)
	for _, c := range []struct {
		name  string
		file  []byte
		err   error
		where string
	}{
		{"cut", file[:92+n-10], ErrTruncated, "block 4 at offset 92: truncated input: input ends after 1048578 of 1048588 bytes"},
		{"cut in trailer", file[:92+n-2], ErrTruncated, "block 4 at offset 92: truncated input: input ends after 1048586 of 1048588 bytes"},
		{"trailing length", patch(file, 92+n-4, 12), ErrBadBlock, "block 4 at offset 92: bad pcapng block: block of 1048588 bytes has trailing length 12"},
	} {
		got, _, err := readFiles(t, nil, c.file)
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.where) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.where)
		}
		if len(got) != 1 {
			t.Errorf("%s: %d frames before the error, want 1", c.name, len(got))
		}
	}
	// With KeepGoing, reading goes on after the bad trailer.
	got, src2, err := readFiles(t, &Options{KeepGoing: true}, patch(file, 92+n-4, 12))
	if err != nil || len(got) != 3 || src2.Stats().Errors != 1 {
		t.Errorf("KeepGoing: %d frames, %+v, error %v; want 3 frames and 1 error", len(got), src2.Stats(), err)
	}
}
