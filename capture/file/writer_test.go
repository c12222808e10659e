package file

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// TestWriterBytes checks the writer's output byte by byte against the
// pcap format.
func TestWriterBytes(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, &WriterOptions{LinkType: decode.LinkInfiniBand, SnapLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	// 1700000000.123456789 s = 0x6553f100 s + 0x075bcd15 ns.
	if err := w.WriteFrame(ns0+123456789, []byte{1, 2, 3, 4, 5, 6}, 60); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFrame(5, []byte{9}, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "4d3cb2a1" + "0200" + "0400" + "00000000" + "00000000" + "04000000" + "f7000000" +
		"00f15365" + "15cd5b07" + "04000000" + "3c000000" + "01020304" +
		"00000000" + "05000000" + "01000000" + "01000000" + "09"
	if got := hex.EncodeToString(buf.Bytes()); got != want {
		t.Errorf("output\n%s\nwant\n%s", got, want)
	}
}

// TestRoundTrip writes frames of every link type the decoder knows and
// reads them back: every byte, time, original length and link type.
func TestRoundTrip(t *testing.T) {
	for _, link := range []decode.LinkType{decode.LinkEthernet, decode.LinkRaw, decode.LinkLinuxSLL, decode.LinkERF, decode.LinkIPv4, decode.LinkIPv6, decode.LinkInfiniBand, decode.LinkLinuxSLL2} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, &WriterOptions{LinkType: link, SnapLen: 100})
		if err != nil {
			t.Fatal(err)
		}
		b := capture.NewBatch(300)
		var want []frame
		for i := range 300 {
			data := seq(byte(i), i%150)
			b.Frames = append(b.Frames, capture.Frame{Data: data, Time: ns0 + int64(i)*999_999_937, OrigLen: uint32(len(data) + i%3), Link: link})
			want = append(want, frame{data[:min(len(data), 100)], ns0 + int64(i)*999_999_937, uint32(len(data) + i%3), link, 0})
		}
		if err := w.WriteBatch(b); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, z := range []bool{false, true} {
			file := buf.Bytes()
			if z {
				file = gz(t, file)
			}
			got, _, err := readFiles(t, nil, file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffFrames(want, got); diff != "" {
				t.Errorf("link %d, gzip %v: frames (-want +got):\n%s", link, z, diff)
			}
		}
	}
}

// failWriter fails every write.
type failWriter struct{}

var errWrite = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriterErrors(t *testing.T) {
	if _, err := NewWriter(&bytes.Buffer{}, &WriterOptions{SnapLen: -1}); err == nil {
		t.Error("NewWriter with snap length -1 succeeded")
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		t      int64
		data   []byte
		orig   int
		want   string
		target error
	}{
		{-1, nil, 0, "capture: pcap writer: frame time -1 ns: time outside 1970..2106", errTimeRange},
		{(1 << 32) * 1e9, nil, 0, "capture: pcap writer: frame time 4294967296000000000 ns: time outside 1970..2106", errTimeRange},
		{0, []byte{1, 2}, 1, "capture: pcap writer: original length 1 with 2 bytes of data: record too large", ErrRecordTooLarge},
		{0, nil, 1 << 32, "capture: pcap writer: original length 4294967296 with 0 bytes of data: record too large", ErrRecordTooLarge},
	} {
		err := w.WriteFrame(c.t, c.data, c.orig)
		if !errors.Is(err, c.target) || err.Error() != c.want {
			t.Errorf("WriteFrame(%d, %d bytes, %d) = %v, want %q", c.t, len(c.data), c.orig, err, c.want)
		}
	}
	b := capture.NewBatch(2)
	b.Frames = append(b.Frames, capture.Frame{Link: decode.LinkEthernet}, capture.Frame{Link: decode.LinkRaw})
	if err := w.WriteBatch(b); err == nil || !strings.Contains(err.Error(), "frame 1 of the batch has link type 101, the file 1") {
		t.Errorf("WriteBatch with a raw frame in an Ethernet file: %v", err)
	}
	// Refused frames wrote nothing: the header and the one good frame.
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 24+16 {
		t.Errorf("wrote %d bytes, want %d", buf.Len(), 24+16)
	}

	// A failing writer: the error shows at Flush and then sticks.
	w, err = NewWriter(failWriter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); !errors.Is(err, errWrite) {
		t.Fatalf("Flush = %v, want %v", err, errWrite)
	}
	if err := w.WriteFrame(0, nil, 0); !errors.Is(err, errWrite) {
		t.Errorf("WriteFrame after a failed Flush = %v, want %v", err, errWrite)
	}
	// A large frame goes straight through to the failing writer.
	w, _ = NewWriter(failWriter{}, &WriterOptions{SnapLen: 4 << 20})
	if err := w.WriteFrame(0, make([]byte, 3<<20), 3<<20); !errors.Is(err, errWrite) {
		t.Errorf("WriteFrame of 3 MiB to a failing writer = %v, want %v", err, errWrite)
	}
}

func TestWriterNoAllocs(t *testing.T) {
	var buf bytes.Buffer
	buf.Grow(64 << 20)
	w, err := NewWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := capture.NewBatch(4)
	for range 4 {
		b.Frames = append(b.Frames, capture.Frame{Data: make([]byte, 1500), Time: ns0, OrigLen: 1500, Link: decode.LinkEthernet})
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := w.WriteBatch(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("WriteBatch allocates %v times per call, want 0", allocs)
	}
}
