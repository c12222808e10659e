package file

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/rocescope/rocescope/capture"
)

// insert returns b with extra inserted at off.
func insert(b []byte, off int, extra ...byte) []byte {
	out := append([]byte(nil), b[:off]...)
	out = append(out, extra...)
	return append(out, b[off:]...)
}

func TestKeepGoing(t *testing.T) {
	pc, pcWant := basePcap(65535)
	ng, ngWant := basePcapng()
	le := binary.LittleEndian
	two := appendBlock(ng, blockEPB, epbBody(le, 5, 0, nil, 0), le) // block 6: unknown interface
	two = appendBlock(two, blockEPB, epbBody(le, 0, (sec0+9)*1e6, seq(1, 2), 2), le)
	for _, c := range []struct {
		name   string
		files  [][]byte
		want   []frame
		errors uint64
	}{
		{"pcap caplen over limit", [][]byte{patch(pc, 50+8, 0xffff0000)}, []frame{pcWant[0], pcWant[2]}, 1},
		{"pcap garbage between records", [][]byte{insert(pc, 76, 0xff, 0xff, 0xff, 0xff, 0xff)}, pcWant, 1},
		{"pcap truncated", [][]byte{pc[:len(pc)-1]}, pcWant[:2], 1},
		{"pcap header", [][]byte{pc[:20]}, nil, 1},
		{"pcapng bad length", [][]byte{patch(ng, 92+4, 45)}, []frame{ngWant[0], ngWant[2]}, 1},
		{"pcapng trailing length", [][]byte{patch(ng, 92+40, 48)}, []frame{ngWant[0], ngWant[2]}, 1},
		{"pcapng unknown interface", [][]byte{patch(ng, 92+8, 1)}, []frame{ngWant[0], ngWant[2]}, 1},
		{"pcapng garbage between blocks", [][]byte{insert(ng, 92, 1, 2, 3, 4, 5, 6, 7, 8)}, ngWant, 1},
		{"pcapng two damaged blocks", [][]byte{patch(two, 48+4, 12345)}, append(ngWant[1:], frame{seq(1, 2), ns0 + 9e9, 2, 1, 0}), 2},
		{"pcapng bad first section", [][]byte{patch(ng, 8, 0)}, nil, 1},
		{"pcapng truncated", [][]byte{ng[:len(ng)-4]}, ngWant[:2], 1},
		{"files", [][]byte{pc, nil, ng, pc[:60]}, append(append(pcWant[:3:3], ngWant...), pcWant[0]), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, src, err := readFiles(t, &Options{KeepGoing: true, Concat: true}, c.files...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffFrames(c.want, got); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
			if s := src.Stats(); s.Errors != c.errors || s.Received != uint64(len(c.want)) {
				t.Errorf("Stats() = %+v, want %d received and %d errors", s, len(c.want), c.errors)
			}
		})
	}
}

// tenRecords returns a little-endian µs pcap file of ten records, their
// frames and the offset of each record. The frames look like RoCE: an
// Ethernet/IPv4/UDP header, then mostly zero payload bytes, which read as
// record headers would have lengths and times of zero.
func tenRecords() (file []byte, want []frame, offs []int) {
	le := binary.LittleEndian
	file = pcapHeader(le, 0xa1b2c3d4, 65535, 1)
	for i := range 10 {
		data := make([]byte, 60+8*i)
		copy(data, seq(0x10, 14))
		data[12], data[13] = 0x08, 0x00
		data[14] = 0x45
		data[36], data[37] = 0x12, 0xb7 // UDP port 4791
		offs = append(offs, len(file))
		file = pcapRecord(file, le, sec0, uint32(i*1000), data, uint32(len(data)))
		want = append(want, frame{data, ns0 + int64(i)*1e6, uint32(len(data)), 1, 0})
	}
	return file, want, offs
}

// without returns want less the frames at the given indices.
func without(want []frame, skip ...int) []frame {
	var out []frame
	for i, f := range want {
		if !slices.Contains(skip, i) {
			out = append(out, f)
		}
	}
	return out
}

// TestKeepGoingNoPhantoms damages a ten-record pcap file in several ways
// and checks that KeepGoing delivers exactly the undamaged records, no
// phantom frame read out of payload bytes, and counts the skipped records.
func TestKeepGoingNoPhantoms(t *testing.T) {
	file, want, offs := tenRecords()
	zero := func(b []byte, off, n int) []byte {
		b = slices.Clone(b)
		clear(b[off : off+n])
		return b
	}
	for _, c := range []struct {
		name   string
		file   []byte
		want   []frame
		errors uint64
	}{
		{"intact", file, want, 0},
		{"first caplen huge", patch(file, offs[0]+8, 0x7fffffff), without(want, 0), 1},
		{"middle caplen huge", patch(file, offs[4]+8, 0x7fffffff), without(want, 4), 1},
		{"last caplen huge", patch(file, offs[9]+8, 0x7fffffff), without(want, 9), 1},
		{"first header zeroed", zero(file, offs[0], 16), without(want, 0), 1},
		{"two headers zeroed", zero(zero(file, offs[2], 16), offs[6], 16), without(want, 2, 6), 2},
		{"caplen points past the end", patch(file, offs[3]+8, uint32(len(file))), without(want, 3), 1},
		{"garbage between records", insert(file, offs[5], seq(0xff, 37)...), want, 1},
		{"zeros between records", insert(file, offs[5], make([]byte, 64)...), want, 1},
		{"record cut out", slices.Concat(file[:offs[3]+9], file[offs[4]:]), without(want, 3), 1},
		{"two records cut out", slices.Concat(file[:offs[1]+20], file[offs[3]:]), without(want, 1, 2), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, src, err := readFiles(t, &Options{KeepGoing: true}, c.file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffFrames(c.want, got); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
			if s := src.Stats(); s.Errors != c.errors || s.Received != uint64(len(c.want)) {
				t.Errorf("Stats() = %+v, want %d received and %d errors", s, len(c.want), c.errors)
			}
		})
	}
}

// TestKeepGoingNoPhantomsPcapng damages a ten-packet pcapng file whose
// packets are mostly zero bytes and checks that KeepGoing delivers exactly
// the undamaged packets.
func TestKeepGoingNoPhantomsPcapng(t *testing.T) {
	_, want, _ := tenRecords()
	le := binary.LittleEndian
	file := appendBlock(nil, blockSHB, shbBody(le), le)
	file = appendBlock(file, blockIDB, idbBody(le, 1, 0, nil), le)
	var offs []int
	for _, f := range want {
		offs = append(offs, len(file))
		file = appendBlock(file, blockEPB, epbBody(le, 0, uint64(f.Time/1000), f.Data, f.OrigLen), le)
	}
	for _, c := range []struct {
		name   string
		file   []byte
		want   []frame
		errors uint64
	}{
		{"intact", file, want, 0},
		{"first length huge", patch(file, offs[0]+4, 0x7ffffff0), without(want, 0), 1},
		{"middle trailing length", patch(file, offs[5]-4, 12), without(want, 4), 1},
		{"header zeroed", func() []byte { b := slices.Clone(file); clear(b[offs[3] : offs[3]+12]); return b }(), without(want, 3), 1},
		{"zeros between blocks", insert(file, offs[5], make([]byte, 64)...), want, 1},
		{"blocks cut out", slices.Concat(file[:offs[1]+20], file[offs[3]:]), without(want, 1, 2), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, src, err := readFiles(t, &Options{KeepGoing: true}, c.file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffFrames(c.want, got); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
			if s := src.Stats(); s.Errors != c.errors || s.Received != uint64(len(c.want)) {
				t.Errorf("Stats() = %+v, want %d received and %d errors", s, len(c.want), c.errors)
			}
		})
	}
}

// TestNotCapture reads files that are no capture at all (text, and text in
// gzip) alone and after a good file, read one after another and merged,
// with and without KeepGoing: the error names the file whatever KeepGoing
// says, as KeepGoing resynchronises only within a format it knows.
func TestNotCapture(t *testing.T) {
	pc, pcWant := basePcap(65535)
	text := []byte("# not a capture\nhello, world\n")
	for _, c := range []struct {
		name string
		bad  []byte
		tail string // what the error says after the phrase
	}{
		{"text", text, ": first bytes 23 20 6e 6f"},
		{"short text", []byte("hi\n"), ": first bytes 68 69 0a"},
		{"text in gzip", gz(t, text), ": first bytes 23 20 6e 6f in gzip"},
	} {
		for _, keepGoing := range []bool{false, true} {
			for _, concat := range []bool{false, true} {
				name := fmt.Sprintf("%s/KeepGoing=%v/Concat=%v", c.name, keepGoing, concat)
				t.Run(name, func(t *testing.T) {
					opts := &Options{KeepGoing: keepGoing, Concat: concat}
					paths := writeTemp(t, pc, c.bad, pc)
					src, err := Open(paths, opts)
					if err != nil {
						t.Fatal(err)
					}
					defer src.Close()
					got, err := readAll(t, src, 2)
					want := "capture: " + paths[1] + ": not a capture file (pcap, pcapng or gzip of one)" + c.tail
					if err == nil || err.Error() != want || !errors.Is(err, ErrNotCapture) || !errors.Is(err, ErrBadMagic) {
						t.Fatalf("error %v, want %q wrapping ErrBadMagic and ErrBadMagic", err, want)
					}
					// One after another, the first file comes first; merged,
					// every file is opened before any frame.
					wantFrames := pcWant
					if !concat {
						wantFrames = nil
					}
					if diff := diffFrames(wantFrames, got); diff != "" {
						t.Errorf("frames (-want +got):\n%s", diff)
					}
					if s := src.Stats(); s.Errors != 0 {
						t.Errorf("Stats().Errors = %d, want 0: the file is no damage to skip", s.Errors)
					}
				})
			}
		}
	}
}

// TestKeepGoingCutGzip cuts a gzip-compressed pcap and pcapng file of 469
// records at every flush point and in between: KeepGoing must deliver
// every whole record before the cut, as many as a read without KeepGoing
// delivers before its error, and count one damaged region, not the last
// whole record as well.
func TestKeepGoingCutGzip(t *testing.T) {
	le := binary.LittleEndian
	const records = 469
	pc := pcapHeader(le, 0xa1b2c3d4, 65535, 1)
	ng := appendBlock(nil, blockSHB, shbBody(le), le)
	ng = appendBlock(ng, blockIDB, idbBody(le, 1, 100, nil), le)
	for i := range records {
		data := seq(byte(i), 60+i%97)
		pc = pcapRecord(pc, le, sec0+uint32(i/100), uint32(i%100)*1000, data, uint32(len(data)))
		ng = appendBlock(ng, blockEPB, epbBody(le, 0, uint64(sec0)*1e6+uint64(i)*1000, data, uint32(len(data))), le)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"pcap", pc}, {"pcapng", ng}} {
		t.Run(c.name, func(t *testing.T) {
			// Flush often, so that a cut leaves whole records readable.
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			for off := 0; off < len(c.data); off += 1000 {
				zw.Write(c.data[off:min(off+1000, len(c.data))])
				zw.Flush()
			}
			zw.Close()
			full := buf.Bytes()
			checked := 0
			for cut := 100; cut < len(full)-8; cut += 97 {
				path := writeTemp(t, full[:cut])
				strict, strictErr := countFrames(t, path, nil)
				kept, keptErr := countFrames(t, path, &Options{KeepGoing: true})
				if strictErr == nil || keptErr != nil {
					t.Fatalf("cut at %d: errors %v without KeepGoing and %v with it, want an error and none", cut, strictErr, keptErr)
				}
				if kept.frames != strict.frames || kept.errors != 1 {
					t.Errorf("cut at %d of %d: KeepGoing read %d frames and %d damaged regions; without it %d frames before %v",
						cut, len(full), kept.frames, kept.errors, strict.frames, strictErr)
				}
				checked++
			}
			if checked < 10 {
				t.Fatalf("only %d cuts checked", checked)
			}
		})
	}
}

// counted is what countFrames read.
type counted struct{ frames, errors uint64 }

// countFrames reads paths to the end or the first error.
func countFrames(t *testing.T, paths []string, opts *Options) (counted, error) {
	t.Helper()
	src, err := Open(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := capture.NewBatch(64)
	for {
		err := src.Next(b)
		if err == io.EOF {
			err = nil
		}
		if err != nil || len(b.Frames) == 0 {
			st := src.Stats()
			return counted{st.Received, st.Errors}, err
		}
	}
}
