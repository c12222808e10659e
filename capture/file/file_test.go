package file

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// frame is a capture.Frame with its bytes copied.
type frame struct {
	Data    []byte
	Time    int64
	OrigLen uint32
	Link    decode.LinkType
	Port    uint16
}

// readAll reads src with batches of n frames until io.EOF or an error, and
// returns the frames and the error (nil at io.EOF). It checks that every
// frame of a batch is intact after Next returns.
func readAll(t testing.TB, src *Source, n int) ([]frame, error) {
	t.Helper()
	b := capture.NewBatch(n)
	var got []frame
	for {
		err := src.Next(b)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			if len(b.Frames) != 0 {
				t.Errorf("Next returned %d frames with error %v", len(b.Frames), err)
			}
			return got, err
		}
		if len(b.Frames) == 0 || len(b.Frames) > n {
			t.Fatalf("Next returned %d frames into a batch of %d", len(b.Frames), n)
		}
		for _, f := range b.Frames {
			if cap(f.Data) != len(f.Data) {
				t.Errorf("frame data has capacity %d beyond its length %d", cap(f.Data), len(f.Data))
			}
			got = append(got, frame{bytes.Clone(f.Data), f.Time, f.OrigLen, f.Link, f.Port})
		}
	}
}

// writeTemp writes each of files to its own file in a temporary directory
// and returns their paths.
func writeTemp(t testing.TB, files ...[]byte) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, b := range files {
		p := filepath.Join(dir, string(rune('a'+i))+".cap")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// readFiles opens the files and reads them all.
func readFiles(t testing.TB, opts *Options, files ...[]byte) ([]frame, *Source, error) {
	t.Helper()
	src, err := Open(writeTemp(t, files...), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	got, err := readAll(t, src, 7)
	return got, src, err
}

// gz compresses b.
func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// seq returns n bytes counting up from start.
func seq(start byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

const (
	sec0 = 1_700_000_000 // 2023-11-14T22:13:20Z
	ns0  = sec0 * 1_000_000_000
)

// pcapCase is a classic pcap file built by hand and the frames in it.
type pcapCase struct {
	name string
	file []byte
	want []frame
}

// pcapCases returns classic pcap files in both resolutions and byte orders.
func pcapCases() []pcapCase {
	var cases []pcapCase
	for _, v := range []struct {
		name  string
		o     binary.AppendByteOrder
		magic uint32
		frac  uint32 // fraction of the first record
		ns    int64  // the fraction in ns
	}{
		{"micro-le", binary.LittleEndian, 0xa1b2c3d4, 123456, 123456000},
		{"micro-be", binary.BigEndian, 0xa1b2c3d4, 999999, 999999000},
		{"nano-le", binary.LittleEndian, 0xa1b23c4d, 123456789, 123456789},
		{"nano-be", binary.BigEndian, 0xa1b23c4d, 999999999, 999999999},
	} {
		f := pcapHeader(v.o, v.magic, 65535, 247)
		f = pcapRecord(f, v.o, sec0, v.frac, seq(1, 60), 60)
		f = pcapRecord(f, v.o, sec0+1, 0, seq(9, 4), 1500)
		f = pcapRecord(f, v.o, sec0+2, 1, nil, 0)
		unit := int64(1000)
		if v.magic == 0xa1b23c4d {
			unit = 1
		}
		cases = append(cases, pcapCase{v.name, f, []frame{
			{seq(1, 60), ns0 + v.ns, 60, decode.LinkInfiniBand, 0},
			{seq(9, 4), ns0 + 1e9, 1500, decode.LinkInfiniBand, 0},
			{[]byte{}, ns0 + 2e9 + unit, 0, decode.LinkInfiniBand, 0},
		}})
	}
	return cases
}

// pcapngFile returns a pcapng file of two sections built by hand and the
// frames in it. The first, little-endian, describes three interfaces with
// different link types and resolutions and holds enhanced, simple and
// obsolete packet blocks among blocks the reader skips; the second is
// big-endian.
func pcapngFile() ([]byte, []frame) {
	le, be := binary.LittleEndian, binary.BigEndian
	var f []byte
	f = appendBlock(f, blockSHB, shbBody(le), le)
	// Interface 0: Ethernet, default resolution (µs), snap length 64.
	f = appendBlock(f, blockIDB, idbBody(le, 1, 64, nil), le)
	f = appendBlock(f, 0x80000001, []byte("local use block, skipped"), le)
	// Interface 1: raw InfiniBand in ns.
	f = appendBlock(f, blockIDB, idbBody(le, 247, 0, option(le, optTSResol, []byte{9})), le)
	// Interface 2: ERF in units of 2^-10 s, 100 s behind.
	opts := append(option(le, 2, []byte("eth9")), option(le, optTSResol, []byte{0x8a})...)
	opts = append(opts, option(le, optTSOffset, le.AppendUint64(nil, 100))...)
	f = appendBlock(f, blockIDB, idbBody(le, 197, 0, opts), le)
	f = appendBlock(f, blockEPB, epbBody(le, 0, sec0*1e6+123456, seq(1, 61), 61), le)
	f = appendBlock(f, blockEPB, epbBody(le, 1, ns0+123456789, seq(2, 3), 1000), le)
	f = appendBlock(f, blockNRB, []byte{0, 0, 0, 0}, le)
	f = appendBlock(f, blockEPB, epbBody(le, 2, sec0<<10+512, seq(3, 8), 8), le)
	f = appendBlock(f, blockISB, make([]byte, 12), le)
	// A simple packet block: interface 0, cut to its snap length of 64.
	f = appendBlock(f, blockSPB, spbBody(le, seq(4, 64), 100), le)
	f = appendBlock(f, blockPB, pbBody(le, 1, ns0+5, seq(5, 5), 5), le)
	// Section 2: big-endian, Linux SLL, default resolution; the
	// interfaces of section 1 are gone.
	f = appendBlock(f, blockSHB, shbBody(be), be)
	f = appendBlock(f, blockIDB, idbBody(be, 113, 0, nil), be)
	f = appendBlock(f, blockEPB, epbBody(be, 0, (sec0+7)*1e6, seq(6, 16), 16), be)
	return f, []frame{
		{seq(1, 61), ns0 + 123456000, 61, decode.LinkEthernet, 0},
		{seq(2, 3), ns0 + 123456789, 1000, decode.LinkInfiniBand, 1},
		{seq(3, 8), ns0 + 100e9 + 500_000_000, 8, decode.LinkERF, 2},
		{seq(4, 64), ns0 + 100e9 + 500_000_000, 100, decode.LinkEthernet, 0},
		{seq(5, 5), ns0 + 5, 5, decode.LinkInfiniBand, 1},
		{seq(6, 16), ns0 + 7e9, 16, decode.LinkLinuxSLL, 0},
	}
}

func TestPcap(t *testing.T) {
	for _, c := range pcapCases() {
		for _, z := range []bool{false, true} {
			name, file := c.name, c.file
			if z {
				name, file = name+"-gzip", gz(t, file)
			}
			t.Run(name, func(t *testing.T) {
				got, src, err := readFiles(t, nil, file)
				if err != nil {
					t.Fatal(err)
				}
				if diff := diffFrames(c.want, got); diff != "" {
					t.Errorf("frames (-want +got):\n%s", diff)
				}
				if s := src.Stats(); s != (capture.Stats{Received: 3}) {
					t.Errorf("Stats() = %+v, want 3 received", s)
				}
			})
		}
	}
}

func TestPcapng(t *testing.T) {
	file, want := pcapngFile()
	for _, z := range []bool{false, true} {
		name := "plain"
		in := file
		if z {
			name, in = "gzip", gz(t, file)
		}
		t.Run(name, func(t *testing.T) {
			got, _, err := readFiles(t, nil, in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffFrames(want, got); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolution(t *testing.T) {
	for _, c := range []struct {
		resol byte
		ts    uint64
		want  int64
	}{
		{0, 3, 3e9},                        // seconds
		{3, 1500, 1_500_000_000},           // ms
		{6, 1, 1000},                       // µs
		{9, 7, 7},                          // ns
		{12, 7_999, 7},                     // ps, truncated
		{19, 10_000_000_000, 1},            // 10^-19 s
		{0x80, 2, 2e9},                     // 2^0 s
		{0x81, 3, 1_500_000_000},           // 2^-1 s
		{0x94, 1 << 20, 1e9},               // 2^-20 s
		{0xa0, 3 << 31, 1_500_000_000},     // 2^-32 s
		{0xc0, 1 << 63, 500_000_000},       // 2^-64 s: the 128-bit product matters
		{0xff, ^uint64(0), 0},              // 2^-127 s
		{0x8a, sec0<<10 + 256, ns0 + 25e7}, // 2^-10 s
	} {
		var f iface
		if !f.setResolution(c.resol) {
			t.Fatalf("setResolution(%#x) failed", c.resol)
		}
		if got := f.ns(c.ts); got != c.want {
			t.Errorf("resolution %#x: ns(%d) = %d, want %d", c.resol, c.ts, got, c.want)
		}
	}
	var f iface
	if f.setResolution(20) {
		t.Error("setResolution(20) succeeded, want failure: 10^20 does not fit")
	}
}

// copyFrames appends copies of the frames of b to dst.
func copyFrames(dst []frame, b *capture.Batch) []frame {
	for _, f := range b.Frames {
		dst = append(dst, frame{bytes.Clone(f.Data), f.Time, f.OrigLen, f.Link, f.Port})
	}
	return dst
}

// TestFiles reads several files one after another (Concat), of every
// format, and checks the progress over all files reported on the way.
func TestFiles(t *testing.T) {
	ng, ngWant := pcapngFile()
	pc := pcapCases()
	files := [][]byte{pc[0].file, ng, gz(t, pc[3].file), pc[1].file}
	var want []frame
	for _, w := range [][]frame{pc[0].want, ngWant, pc[3].want, pc[1].want} {
		want = append(want, w...)
	}
	var size int64
	for _, f := range files {
		size += int64(len(f))
	}
	src, err := Open(writeTemp(t, files...), &Options{Concat: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if p := src.Progress(); p != (Progress{Files: 4, Total: size}) {
		t.Errorf("Progress() before Next = %+v", p)
	}
	var got []frame
	b := capture.NewBatch(1)
	if err := src.Next(b); err != nil {
		t.Fatal(err)
	}
	got = copyFrames(got, b)
	// One record of 60 bytes read from the first file.
	if p, want := src.Progress(), (Progress{File: 1, Files: 4, Done: 24 + 16 + 60, Total: size}); p != want {
		t.Errorf("Progress() after one frame = %+v, want %+v", p, want)
	}
	// A batch of 4 takes the two frames left in the first file and goes on
	// into the second.
	b = capture.NewBatch(4)
	if err := src.Next(b); err != nil {
		t.Fatal(err)
	}
	got = copyFrames(got, b)
	if p := src.Progress(); p.File != 2 || p.Total != size || p.Done <= int64(len(files[0])) || p.Done >= int64(len(files[0])+len(ng)) {
		t.Errorf("Progress() in the second file = %+v, want file 2 of 4 partly read", p)
	}
	rest, err := readAll(t, src, 5)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, rest...)
	if diff := diffFrames(want, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
	if p, want := src.Progress(), (Progress{File: 4, Files: 4, Done: size, Total: size}); p != want {
		t.Errorf("Progress() at the end = %+v, want %+v", p, want)
	}
	if s := src.Stats(); s.Received != uint64(len(want)) || s.Errors != 0 {
		t.Errorf("Stats() = %+v, want %d received", s, len(want))
	}
}

// diffFrames returns "" when want and got hold the same frames (nil and
// empty data are the same), else their differences, "(-want +got)".
func diffFrames(want, got []frame) string {
	if slices.EqualFunc(want, got, func(a, b frame) bool {
		return bytes.Equal(a.Data, b.Data) && a.Time == b.Time && a.OrigLen == b.OrigLen && a.Link == b.Link && a.Port == b.Port
	}) {
		return ""
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		return d
	}
	return "frames differ, but cmp.Diff finds no difference"
}
