package file

import (
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// basePcap returns a little-endian µs pcap file with snap length snap and
// three records of ten bytes at offsets 24, 50 and 76, and its frames.
func basePcap(snap uint32) ([]byte, []frame) {
	le := binary.LittleEndian
	f := pcapHeader(le, 0xa1b2c3d4, snap, 1)
	var want []frame
	for i := range 3 {
		f = pcapRecord(f, le, sec0+uint32(i), 0, seq(0xf0, 10), 10)
		want = append(want, frame{seq(0xf0, 10), ns0 + int64(i)*1e9, 10, 1, 0})
	}
	return f, want
}

// basePcapng returns a pcapng file: section header at 0, interface at 28,
// and enhanced packet blocks of ten bytes at 48, 92 and 136; and its frames.
func basePcapng() ([]byte, []frame) {
	le := binary.LittleEndian
	f := appendBlock(nil, blockSHB, shbBody(le), le)
	f = appendBlock(f, blockIDB, idbBody(le, 1, 100, nil), le)
	var want []frame
	for i := range 3 {
		f = appendBlock(f, blockEPB, epbBody(le, 0, uint64(sec0+i)*1e6, seq(0xf0, 10), 10), le)
		want = append(want, frame{seq(0xf0, 10), ns0 + int64(i)*1e9, 10, 1, 0})
	}
	return f, want
}

// patch returns a copy of b with v written little-endian at off.
func patch(b []byte, off int, v uint32) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(b[off:], v)
	return b
}

func TestErrors(t *testing.T) {
	pc, pcWant := basePcap(65535)
	ng, ngWant := basePcapng()
	for _, c := range []struct {
		name   string
		file   []byte
		opts   *Options
		frames int    // frames before the error
		err    error  // sentinel
		where  string // text after "capture: <path>: "
	}{
		{"empty", nil, nil, 0, ErrTruncated, "empty file"},
		{"inside magic", pc[:3], nil, 0, ErrTruncated, "truncated input: file of 3 bytes ends inside the magic d4 c3 b2 a1"},
		{"gzip inside magic", []byte{0x1f}, nil, 0, ErrTruncated, "truncated input: file of 1 bytes ends inside the magic 1f 8b"},
		{"bad magic", []byte("hello, world"), nil, 0, ErrNotCapture, "not a capture file (pcap, pcapng or gzip of one): first bytes 68 65 6c 6c"},
		{"short file header", pc[:23], nil, 0, ErrTruncated, "file header at offset 0: truncated input: input ends after 23 of 24 bytes"},
		{"pcap version", patch(pc, 4, 3), nil, 0, ErrBadMagic, "file header at offset 0: unknown file format: pcap version 3, want 2"},
		{"short record header", pc[:50+15], nil, 1, ErrTruncated, "record 2 at offset 50: truncated input: input ends after 15 of 16 bytes"},
		{"short record", pc[:76+16+9], nil, 2, ErrTruncated, "record 3 at offset 76: truncated input: input ends after 25 of 26 bytes"},
		{"over SnapLimit", pc, &Options{SnapLimit: 9}, 0, ErrRecordTooLarge, "record 1 at offset 24: record too large: captured length 10 exceeds the limit 9"},
		{"pcapng short block", ng[:136+43], nil, 2, ErrTruncated, "block 5 at offset 136: truncated input: input ends after 43 of 44 bytes"},
		{"pcapng short block header", ng[:136+11], nil, 2, ErrTruncated, "block 5 at offset 136: truncated input: input ends after 11 of 12 bytes"},
		{"pcapng byte-order magic", patch(ng, 8, 0x01020304), nil, 0, ErrBadMagic, "block 1 at offset 0: unknown file format: section header byte-order magic 04 03 02 01"},
		{"pcapng version", patch(ng, 12, 2), nil, 0, ErrBadMagic, "block 1 at offset 0: unknown file format: pcapng version 2, want 1"},
		{"pcapng length not a multiple of 4", patch(ng, 92+4, 45), nil, 1, ErrBadBlock, "block 4 at offset 92: bad pcapng block: block type 0x6 has total length 45"},
		{"pcapng length too small", patch(ng, 92+4, 8), nil, 1, ErrBadBlock, "block 4 at offset 92: bad pcapng block: block type 0x6 has total length 8"},
		{"pcapng length too large", patch(ng, 92+4, 1<<30), nil, 1, ErrBadBlock, "block 4 at offset 92: bad pcapng block: block type 0x6 has total length 1073741824 (want a multiple of 4 from 12 to 327680)"},
		{"pcapng trailing length", patch(ng, 92+40, 40), nil, 1, ErrBadBlock, "block 4 at offset 92: bad pcapng block: block type 0x6 has total length 44 but trailing length 40"},
		{"pcapng unknown interface", patch(ng, 92+8, 1), nil, 1, ErrBadBlock, "block 4 at offset 92: bad pcapng block: interface 1 not described (section has 1)"},
		{"pcapng over SnapLimit", ng, &Options{SnapLimit: 9}, 0, ErrRecordTooLarge, "block 3 at offset 48: record too large: captured length 10 exceeds the limit 9"},
		{"pcapng data overruns block", patch(ng, 92+20, 13), nil, 1, ErrBadBlock, "block 4 at offset 92: bad pcapng block: captured length 13 overruns the 12 bytes of packet data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			paths := writeTemp(t, c.file)
			src, err := Open(paths, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			got, err := readAll(t, src, 2)
			if !errors.Is(err, c.err) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			if want := "capture: " + paths[0] + ": " + c.where; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q,\nwant it to start with %q", err, want)
			}
			if len(got) != c.frames {
				t.Errorf("%d frames before the error, want %d", len(got), c.frames)
			}
			want := pcWant[:c.frames]
			if c.file != nil && c.file[0] == 0x0a {
				want = ngWant[:c.frames]
			}
			if diff := diffFrames(want, got); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
			// The error sticks.
			if _, again := readAll(t, src, 2); again != err {
				t.Errorf("next error %v, want the same %v", again, err)
			}
		})
	}
}

// TestErrorsGzip checks that offsets in gzip input are decompressed
// offsets, and that a cut gzip stream is truncated input.
func TestErrorsGzip(t *testing.T) {
	pc, _ := basePcap(65535)
	z := gz(t, pc[:50+15])
	_, _, err := readFiles(t, nil, z)
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "record 2 at offset 50: truncated input: input ends after 15 of 16 bytes") {
		t.Errorf("error %v, want record 2 at offset 50 truncated", err)
	}
	full := gz(t, pc)
	_, _, err = readFiles(t, nil, full[:len(full)-10])
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("cut gzip: error %v, want ErrTruncated", err)
	}
	_, _, err = readFiles(t, nil, full[:5])
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "gzip header") {
		t.Errorf("cut gzip header: error %v, want ErrTruncated in the gzip header", err)
	}
	crc := patch(full, len(full)-8, 0x12345678) // the trailer: CRC-32, then size
	got, _, err := readFiles(t, nil, crc)
	if !errors.Is(err, ErrBadGzip) || !errors.Is(err, gzip.ErrChecksum) || len(got) != 3 {
		t.Errorf("bad gzip checksum: %d frames and error %v, want 3 and ErrBadGzip wrapping gzip.ErrChecksum", len(got), err)
	}
	flags := append([]byte(nil), full...)
	flags[2] = 7 // compression method: only 8, deflate, exists
	if _, _, err = readFiles(t, nil, flags); !errors.Is(err, ErrBadGzip) || !strings.Contains(err.Error(), "gzip header") {
		t.Errorf("bad gzip header: error %v, want ErrBadGzip in the gzip header", err)
	}
}

func TestOpenErrors(t *testing.T) {
	pc, _ := basePcap(65535)
	good := writeTemp(t, pc)[0]
	missing := good + ".missing"
	_, err := Open([]string{good, missing}, nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Open(missing) error %v, want fs.ErrNotExist naming %s", err, missing)
	}
	for _, c := range []struct {
		paths []string
		opts  *Options
		want  string
	}{
		{nil, nil, "capture: no input files"},
		{[]string{"-", good, "-"}, nil, `capture: standard input ("-") named more than once`},
		{[]string{good}, &Options{SnapLimit: -1}, "capture: snap limit -1 out of range 1..67108864"},
		{[]string{good}, &Options{SnapLimit: 64<<20 + 1}, "capture: snap limit 67108865 out of range 1..67108864"},
	} {
		if _, err := Open(c.paths, c.opts); err == nil || err.Error() != c.want {
			t.Errorf("Open(%q, %+v) error %v, want %q", c.paths, c.opts, err, c.want)
		}
	}
	// A file that goes away after Open fails when its turn comes: read one
	// after another, after the frames of the first file; merged, at once,
	// as every file is opened at the first Next.
	for _, concat := range []bool{true, false} {
		paths := writeTemp(t, pc, pc)
		src, err := Open(paths, &Options{Concat: concat})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if err := os.Remove(paths[1]); err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, src, 2)
		want := map[bool]int{true: 3, false: 0}[concat]
		if len(got) != want || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), paths[1]) {
			t.Errorf("Concat %v: read %d frames and error %v, want %d and fs.ErrNotExist naming %s", concat, len(got), err, want, paths[1])
		}
	}
}

// TestPrefixes cuts valid files at every length: each prefix either ends at
// a record or block boundary and reads the records before it, or fails with
// ErrTruncated.
func TestPrefixes(t *testing.T) {
	pc, pcWant := basePcap(65535)
	ng, ngWant := basePcapng()
	le := binary.LittleEndian
	isb := appendBlock(ng, blockISB, isbBody(le, 0, 0, counters(le, 3, 4)), le)
	for _, c := range []struct {
		name   string
		file   []byte
		want   []frame
		bounds map[int]int // boundary offset: frames before it
	}{
		{"pcap", pc, pcWant, map[int]int{24: 0, 50: 1, 76: 2}},
		{"pcapng", ng, ngWant, map[int]int{28: 0, 48: 0, 92: 1, 136: 2}},
		{"pcapng statistics", isb, ngWant, map[int]int{28: 0, 48: 0, 92: 1, 136: 2, 180: 3}},
	} {
		for n := range len(c.file) {
			t.Run(fmt.Sprintf("%s/%d", c.name, n), func(t *testing.T) {
				got, _, err := readFiles(t, nil, c.file[:n])
				k, boundary := c.bounds[n]
				switch {
				case boundary && err != nil:
					t.Fatalf("cut at boundary %d: error %v", n, err)
				case !boundary && !errors.Is(err, ErrTruncated):
					t.Fatalf("cut at %d: error %v, want ErrTruncated", n, err)
				case !boundary:
					k = len(got)
				}
				if diff := diffFrames(c.want[:k], got); diff != "" {
					t.Errorf("frames (-want +got):\n%s", diff)
				}
			})
		}
	}
}
