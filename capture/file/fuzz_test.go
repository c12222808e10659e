package file

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// fuzzLimit is the snap limit of the fuzz tests: small, so that length
// checks trigger often.
const fuzzLimit = 1000

// sentinels are the errors every read error must wrap.
var sentinels = []error{ErrTruncated, ErrBadMagic, ErrRecordTooLarge, ErrBadBlock, ErrBadGzip}

// sentinelOf returns the sentinel err wraps, nil for nil, or fails.
func sentinelOf(t *testing.T, err error) error {
	t.Helper()
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	t.Fatalf("error %v wraps none of the sentinels", err)
	return nil
}

// fuzzRead reads data as a file (4 MiB buffers) and as standard input
// (through the smallest read buffers, smaller still if small), checks that both give the same frames
// and error, and returns them with the frames read with KeepGoing. It also reads with KeepGoing and checks that
// no error comes out, that damage was counted when there was some, and
// that the frames are the same when no damage was counted. (KeepGoing may
// count damage where a plain read finds none: a classic pcap record that
// fails the resynchronisation checks.)
func fuzzRead(t *testing.T, data []byte, small bool) (frames, keptFrames []frame, err error) {
	path := filepath.Join(t.TempDir(), "fuzz")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(stdin bool, keep bool) ([]frame, capture.Stats, error) {
		opts := &Options{SnapLimit: fuzzLimit, KeepGoing: keep}
		paths := []string{path}
		if stdin {
			paths = []string{"-"}
		}
		src, err := open(paths, opts, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if stdin {
			// The smallest buffers the limits allow (the default of 4
			// MiB makes fuzzing slow).
			src.win.size = fuzzLimit + blockOverhead
			if small {
				src.win.size = 2*fuzzLimit + 64
			}
		}
		got, err := readAll(t, src, 3)
		return got, src.Stats(), err
	}
	whole, _, err := read(false, false)
	var keptWhole []frame
	sentinel := sentinelOf(t, err)
	streamed, _, err2 := read(true, false)
	if diff := diffFrames(whole, streamed); diff != "" {
		t.Fatalf("file and standard input differ (-file +stdin):\n%s", diff)
	}
	if s := sentinelOf(t, err2); s != sentinel {
		t.Fatalf("file: %v; standard input: %v", err, err2)
	}
	for _, stdin := range []bool{false, true} {
		kept, st, kerr := read(stdin, true)
		if errors.Is(err, ErrNotCapture) {
			// No capture at all: KeepGoing fails alike.
			if !errors.Is(kerr, ErrNotCapture) || len(kept) != 0 || len(whole) != 0 || st.Errors != 0 {
				t.Fatalf("not a capture: KeepGoing read %d frames (%+v) and error %v", len(kept), st, kerr)
			}
			continue
		}
		if kerr != nil {
			t.Fatalf("KeepGoing: error %v", kerr)
		}
		if st.Received != uint64(len(kept)) {
			t.Fatalf("KeepGoing: %d frames, Stats %+v", len(kept), st)
		}
		if err != nil && st.Errors == 0 {
			t.Fatalf("KeepGoing counted no errors; without it the error was %v", err)
		}
		if st.Errors == 0 && diffFrames(whole, kept) != "" {
			t.Fatalf("KeepGoing counted no damage but read other frames (-plain +KeepGoing):\n%s", diffFrames(whole, kept))
		}
		if !stdin {
			keptWhole = kept
		}
	}
	return whole, keptWhole, err
}

// parsePcap is an independent, plain reading of a classic pcap file: the
// records before the first damage and the sentinel of that damage. ok is
// false when data does not start with a pcap magic.
func parsePcap(data []byte) (frames []frame, err error, ok bool) {
	if len(data) < 4 {
		return nil, nil, false
	}
	var bo binary.ByteOrder
	var unit int64
	switch {
	case binary.LittleEndian.Uint32(data) == 0xa1b2c3d4:
		bo, unit = binary.LittleEndian, 1000
	case binary.BigEndian.Uint32(data) == 0xa1b2c3d4:
		bo, unit = binary.BigEndian, 1000
	case binary.LittleEndian.Uint32(data) == 0xa1b23c4d:
		bo, unit = binary.LittleEndian, 1
	case binary.BigEndian.Uint32(data) == 0xa1b23c4d:
		bo, unit = binary.BigEndian, 1
	default:
		return nil, nil, false
	}
	if len(data) < 24 {
		return nil, ErrTruncated, true
	}
	if bo.Uint16(data[4:]) != 2 {
		return nil, ErrBadMagic, true
	}
	limit := uint64(fuzzLimit) // the header's snap length is no limit
	link := decode.LinkType(bo.Uint32(data[20:]))
	rest := data[24:]
	for len(rest) > 0 {
		if len(rest) < 16 {
			return frames, ErrTruncated, true
		}
		capLen, origLen := uint64(bo.Uint32(rest[8:])), uint64(bo.Uint32(rest[12:]))
		if capLen > limit {
			return frames, ErrRecordTooLarge, true
		}
		if uint64(len(rest)-16) < capLen {
			return frames, ErrTruncated, true
		}
		frames = append(frames, frame{
			Data:    rest[16 : 16+capLen],
			Time:    int64(bo.Uint32(rest[0:]))*1e9 + int64(bo.Uint32(rest[4:]))*unit,
			OrigLen: uint32(origLen),
			Link:    link,
		})
		rest = rest[16+capLen:]
	}
	return frames, nil, true
}

// FuzzPcap reads arbitrary input: it must not panic, must fail only with
// the sentinels, and for classic pcap must return what a plain independent
// parse finds, and with KeepGoing only plausible records of the input.
func FuzzPcap(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzPcap.
	f.Fuzz(func(t *testing.T, data []byte) {
		// Small read buffers hold classic pcap records only.
		got, kept, err := fuzzRead(t, data, len(data) >= 4 && isPcapMagic(data))
		want, wantErr, ok := parsePcap(data)
		if !ok {
			return
		}
		for i, fr := range kept {
			if fr.OrigLen == 0 || fr.OrigLen > maxOrigLen || uint32(len(fr.Data)) > fr.OrigLen || !bytes.Contains(data, fr.Data) {
				t.Fatalf("KeepGoing frame %d: %d bytes of %d: not a plausible record of the input", i+1, len(fr.Data), fr.OrigLen)
			}
		}
		if s := sentinelOf(t, err); s != wantErr {
			t.Fatalf("error %v, the plain parse finds %v", err, wantErr)
		}
		if diff := diffFrames(want, got); diff != "" {
			t.Fatalf("frames (-plain +reader):\n%s", diff)
		}
	})
}

// FuzzPcapng reads arbitrary input, most usefully pcapng: it must not
// panic and must fail only with the sentinels, and every frame must be
// bytes of the input no longer than the limit.
func FuzzPcapng(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzPcapng.
	f.Fuzz(func(t *testing.T, data []byte) {
		got, _, _ := fuzzRead(t, data, false)
		for i, fr := range got {
			if len(fr.Data) > fuzzLimit {
				t.Fatalf("frame %d: %d bytes, limit %d", i+1, len(fr.Data), fuzzLimit)
			}
			if len(data) > 2 && data[0] != 0x1f && !bytes.Contains(data, fr.Data) {
				t.Fatalf("frame %d: data not in the input", i+1)
			}
		}
	})
}

// FuzzMerge merges two or three classic pcap files (the second one gzip)
// whose record times come from the input, few and close so that they tie
// and go backwards within a file, and compares the frames with those of a
// plain merge of the files read one by one: the next frame, over and over,
// of the file whose next frame is the earliest, the first such file on a
// tie. The batch size comes from the input too.
func FuzzMerge(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, uint8(3), uint8(2))
	f.Add([]byte{5, 5, 5, 5, 1, 1, 9, 0, 0, 7}, uint8(1), uint8(3))
	f.Add([]byte{}, uint8(0), uint8(2))
	f.Fuzz(func(t *testing.T, times []byte, batch, nfiles uint8) {
		n := 2 + int(nfiles)%2
		files := make([][]frame, n)
		for i, v := range times {
			k := i % n
			files[k] = append(files[k], frame{
				Data:    []byte{byte(k), byte(i), byte(i >> 8)},
				Time:    ns0 + int64(v%16)*1000,
				OrigLen: 60,
				Link:    decode.LinkEthernet,
			})
		}
		var want []frame
		heads := make([]int, n)
		for {
			m := -1
			for k := range n {
				if heads[k] < len(files[k]) && (m < 0 || files[k][heads[k]].Time < files[m][heads[m]].Time) {
					m = k
				}
			}
			if m < 0 {
				break
			}
			want = append(want, files[m][heads[m]])
			heads[m]++
		}
		var data [][]byte
		for k, fs := range files {
			b := pcapBytes(t, fs)
			if k == 1 {
				b = gz(t, b)
			}
			data = append(data, b)
		}
		paths := writeTemp(t, data...)
		src, err := Open(paths, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		got, err := readAll(t, src, 1+int(batch)%9)
		if err != nil {
			t.Fatal(err)
		}
		if diff := diffFrames(want, got); diff != "" {
			t.Fatalf("frames (-plain merge +reader):\n%s", diff)
		}
	})
}
