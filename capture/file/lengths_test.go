package file

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/tsharktest"
)

// lengthFiles returns crafted files whose records libpcap and Wireshark
// read although they exceed a snap length or their own original length,
// each with the (frame.len, frame.cap_len) pairs tshark shows for them.
func lengthFiles() map[string]struct {
	file []byte
	lens [][2]int
} {
	le := binary.LittleEndian
	big := seq(7, DefaultSnapLimit)
	pc := pcapHeader(le, 0xa1b2c3d4, 40, 1) // snap length 40
	pc = pcapRecord(pc, le, sec0, 0, seq(1, 60), 60)
	pc = pcapRecord(pc, le, sec0, 1, seq(2, 60), 20) // caplen > orig_len
	pc = pcapRecord(pc, le, sec0, 2, big, uint32(len(big)))
	pc = pcapRecord(pc, le, sec0, 3, seq(3, 1), 9000)

	ng := appendBlock(nil, blockSHB, shbBody(le), le)
	ng = appendBlock(ng, blockIDB, idbBody(le, 1, 40, nil), le) // snap length 40
	ng = appendBlock(ng, blockEPB, epbBody(le, 0, uint64(sec0)*1e6, seq(1, 60), 60), le)
	ng = appendBlock(ng, blockEPB, epbBody(le, 0, uint64(sec0)*1e6+1, seq(2, 60), 20), le)
	ng = appendBlock(ng, blockEPB, epbBody(le, 0, uint64(sec0)*1e6+2, big, uint32(len(big))), le)
	ng = appendBlock(ng, blockPB, pbBody(le, 0, uint64(sec0)*1e6+3, seq(3, 50), 10), le)
	lens := [][2]int{{60, 60}, {20, 60}, {len(big), len(big)}}
	return map[string]struct {
		file []byte
		lens [][2]int
	}{
		"over.pcap":   {pc, append(lens, [2]int{9000, 1})},
		"over.pcapng": {ng, append(lens, [2]int{10, 50})},
	}
}

// tsharkLens returns tshark's frame.len and frame.cap_len for each frame of
// path, and whether tshark read the file without an error.
func tsharkLens(t *testing.T, path string) ([][2]int, bool) {
	t.Helper()
	out, err := tsharktest.Run(t, path, "-T", "fields", "-e", "frame.len", "-e", "frame.cap_len")
	var lens [][2]int
	for line := range strings.Lines(string(out)) {
		l, c, _ := strings.Cut(strings.TrimSpace(line), "\t")
		a, err1 := strconv.Atoi(l)
		b, err2 := strconv.Atoi(c)
		if err1 != nil || err2 != nil {
			t.Fatalf("tshark %s: line %q", path, line)
		}
		lens = append(lens, [2]int{a, b})
	}
	return lens, err == nil
}

// TestLengthsAgainstTshark reads records longer than their file's or
// interface's snap length, records with a captured length above their
// original length, and records of 262144 bytes, which tshark reads, and
// checks that the reader delivers the same frames with the lengths tshark
// shows: OrigLen is the original length as the file says. A record of
// 262145 bytes is refused by both.
func TestLengthsAgainstTshark(t *testing.T) {
	tsharktest.Require(t)
	dir := t.TempDir()
	for name, c := range lengthFiles() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, c.file, 0o644); err != nil {
				t.Fatal(err)
			}
			ts, ok := tsharkLens(t, path)
			if !ok || !slices.Equal(ts, c.lens) {
				t.Fatalf("tshark shows (len, caplen) %v (read ok %v), want %v", ts, ok, c.lens)
			}
			var got [][2]int
			for _, f := range readPath(t, path) {
				got = append(got, [2]int{int(f.OrigLen), len(f.Data)})
			}
			if !slices.Equal(got, c.lens) {
				t.Errorf("reader: (OrigLen, len(Data)) %v, tshark %v", got, ts)
			}
		})
	}
	t.Run("over 262144", func(t *testing.T) {
		le := binary.LittleEndian
		pc := pcapHeader(le, 0xa1b2c3d4, 0, 1)
		pc = pcapRecord(pc, le, sec0, 0, seq(1, 60), 60)
		pc = pcapRecord(pc, le, sec0, 0, seq(1, DefaultSnapLimit+1), DefaultSnapLimit+1)
		path := filepath.Join(dir, "toolarge.pcap")
		if err := os.WriteFile(path, pc, 0o644); err != nil {
			t.Fatal(err)
		}
		if ts, ok := tsharkLens(t, path); ok || !slices.Equal(ts, [][2]int{{60, 60}}) {
			t.Fatalf("tshark: %v, read ok %v; want one frame, then an error", ts, ok)
		}
		src, err := Open([]string{path}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		got, err := readAll(t, src, 4)
		if len(got) != 1 || !errors.Is(err, ErrRecordTooLarge) {
			t.Errorf("%d frames and error %v, want 1 and %v", len(got), err, ErrRecordTooLarge)
		}
	})
}

// TestManyInterfaces reads a section of 65537 interfaces: frames of
// interfaces from 65535 on get Port 65535 and their own interface's link
// type. A section with more than 2^20 interfaces is refused.
func TestManyInterfaces(t *testing.T) {
	le := binary.LittleEndian
	many := func(n int) []byte {
		f := appendBlock(nil, blockSHB, shbBody(le), le)
		idb := appendBlock(nil, blockIDB, idbBody(le, 1, 0, nil), le)
		for i := range n {
			if i == n-1 {
				idb = appendBlock(nil, blockIDB, idbBody(le, 228, 0, nil), le)
			}
			f = append(f, idb...)
		}
		return f
	}
	f := many(1<<16 + 1)
	var want []frame
	for i, id := range []uint32{0, 65534, 65535, 65536} {
		ts := uint64(sec0+i) * 1e6
		f = appendBlock(f, blockEPB, epbBody(le, id, ts, seq(byte(i), 20), 20), le)
		link := decode.LinkType(1)
		if id == 65536 {
			link = 228
		}
		want = append(want, frame{seq(byte(i), 20), ns0 + int64(i)*1e9, 20, link, uint16(min(id, 65535))})
	}
	got, _, err := readFiles(t, nil, f)
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffFrames(want, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}

	_, _, err = readFiles(t, nil, many(maxInterfaces+1))
	if !errors.Is(err, ErrBadBlock) || !strings.Contains(err.Error(), "more than 1048576 interfaces") {
		t.Errorf("error %v, want %v for more than 2^20 interfaces", err, ErrBadBlock)
	}
}
