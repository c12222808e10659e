package metrics

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/sketch"
)

// addrEqual lets cmp compare decode.Addr, whose fields are unexported.
// addrEqual compares addresses by value and flow records with their
// cached hash.
var addrEqual = cmp.Options{cmp.Comparer(func(a, b decode.Addr) bool { return a == b }), cmp.AllowUnexported(FlowRecord{})}

// encodeWindow returns the state encoding of w.
func encodeWindow(t testing.TB, w *Window) []byte {
	t.Helper()
	b, err := w.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// splitByConnection splits frames between n hosts by UDP source port, the
// way a packet broker keeping both directions of a connection together
// would; frames without UDP go to host 0.
func splitByConnection(frames []capture.Frame, n int) [][]capture.Frame {
	parts := make([][]capture.Frame, n)
	var p decode.Packet
	for _, f := range frames {
		k := 0
		if p.Decode(f.Data, f.Link); p.Headers&decode.HasUDP != 0 {
			k = int(p.SrcPort) % n
		}
		parts[k] = append(parts[k], f)
	}
	return parts
}

func TestStateRoundTrip(t *testing.T) {
	tr := makeTestTrace()
	for _, w := range runEngine(t, &Config{Workers: 2, Host: "h"}, &frameSource{frames: tr.frames, per: 4}) {
		b := encodeWindow(t, w)
		var got Window
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if again := encodeWindow(t, &got); !bytes.Equal(again, b) {
			t.Error("decode and encode again changed the state")
		}
		if got.Start != w.Start || got.Counters != w.Counters || !cmp.Equal(got.Flows, w.Flows, addrEqual) {
			t.Error("decoded window differs")
		}
	}
}

// TestStateMergeEqualsOneHost splits the trace between hosts by
// connection, merges their windows and compares with one host that saw
// everything: counters, flow records and the exactly mergeable sketches must
// be identical.
func TestStateMergeEqualsOneHost(t *testing.T) {
	tr := makeTestTrace()
	whole := runEngine(t, &Config{Workers: 1, Host: "all"}, &frameSource{frames: tr.frames, per: 8})
	for hosts := 2; hosts <= 3; hosts++ {
		merged := map[int64]*Window{}
		for i, part := range splitByConnection(makeTestTrace().frames, hosts) {
			if len(part) == 0 {
				continue
			}
			for _, w := range runEngine(t, &Config{Workers: 2, Host: string(rune('a' + i))}, &frameSource{frames: part, per: 3}) {
				if m, ok := merged[w.Start]; ok {
					if err := m.Merge(w); err != nil {
						t.Fatal(err)
					}
				} else {
					merged[w.Start] = w
				}
			}
		}
		if len(merged) != len(whole) {
			t.Fatalf("%d hosts: %d windows, want %d", hosts, len(merged), len(whole))
		}
		for _, w := range whole {
			m := merged[w.Start]
			m.Normalize()
			if m.Counters != w.Counters {
				t.Errorf("%d hosts: window %d counters differ", hosts, w.Start)
			}
			if diff := cmp.Diff(w.Flows, m.Flows, addrEqual); diff != "" {
				t.Errorf("%d hosts: window %d flows (-one host +merged):\n%s", hosts, w.Start, diff)
			}
			for _, pair := range [][2]interface{ MarshalBinary() ([]byte, error) }{
				{w.Distinct, m.Distinct}, {w.FlowBytes, m.FlowBytes}, {w.FlowPackets, m.FlowPackets},
				{w.ReadLatency, m.ReadLatency}, {w.AckLatency, m.AckLatency},
			} {
				a, _ := pair[0].MarshalBinary()
				b, _ := pair[1].MarshalBinary()
				if !bytes.Equal(a, b) {
					t.Errorf("%d hosts: window %d: a merged sketch differs from the one host's", hosts, w.Start)
				}
			}
		}
	}
}

func TestStateRejectsDamage(t *testing.T) {
	tr := makeTestTrace()
	w := runEngine(t, &Config{Workers: 1, Host: "h"}, &frameSource{frames: tr.frames, per: 4})[0]
	b := encodeWindow(t, w)
	for n := range len(b) {
		if err := new(Window).UnmarshalBinary(b[:n]); !errors.Is(err, ErrState) {
			t.Fatalf("prefix of %d bytes: %v, want ErrState", n, err)
		}
	}
	for _, i := range []int{0, 8, 20, len(b) / 2, len(b) - 5, len(b) - 1} {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if err := new(Window).UnmarshalBinary(c); !errors.Is(err, ErrState) {
			t.Errorf("byte %d flipped: %v, want ErrState", i, err)
		}
	}
	if err := new(Window).UnmarshalBinary(append(bytes.Clone(b), 0)); !errors.Is(err, ErrState) {
		t.Errorf("trailing byte: %v, want ErrState", err)
	}
}

func TestMergeRejectsMismatch(t *testing.T) {
	tr := makeTestTrace()
	base := runEngine(t, &Config{Workers: 1, Host: "a"}, &frameSource{frames: tr.frames, per: 4})
	for name, cfg := range map[string]*Config{
		"count-min width": {Workers: 1, Host: "b", CMWidth: 1 << 10},
		"seed":            {Workers: 1, Host: "b", Seed: 99},
		"top-k size":      {Workers: 1, Host: "b", TopKSize: 64},
	} {
		other := runEngine(t, cfg, &frameSource{frames: makeTestTrace().frames, per: 4})
		if err := base[0].Merge(other[0]); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: merge error %v, want ErrMismatch", name, err)
		}
	}
	if err := base[0].Merge(base[1]); !errors.Is(err, ErrMismatch) {
		t.Errorf("different windows: merge error %v, want ErrMismatch", err)
	}
}

func TestStateFileRoundTrip(t *testing.T) {
	tr := makeTestTrace()
	wins := runEngine(t, &Config{Workers: 1, Host: "h"}, &frameSource{frames: tr.frames, per: 4})
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "states.bin"), dir} {
		sw, err := NewStateWriter(path, &Config{Host: "h"})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wins {
			if err := sw.Write(w); err != nil {
				t.Fatal(err)
			}
		}
		if err := sw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The single file holds every window in order.
	f, err := os.Open(filepath.Join(dir, "states.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sr := NewStateReader(f, "states.bin")
	for i := 0; ; i++ {
		var w Window
		err := sr.Next(&w)
		if err == io.EOF {
			if i != len(wins) {
				t.Fatalf("read %d states, want %d", i, len(wins))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(encodeWindow(t, &w), encodeWindow(t, wins[i])) {
			t.Errorf("state %d differs after the file round trip", i)
		}
	}
	// The directory holds one file per window.
	per, _ := filepath.Glob(filepath.Join(dir, "*"+StateExt))
	if len(per) != len(wins) {
		t.Errorf("directory holds %d state files, want %d: %v", len(per), len(wins), per)
	}
	// A cut file is an error naming the file and the offset.
	data, _ := os.ReadFile(filepath.Join(dir, "states.bin"))
	sr = NewStateReader(bytes.NewReader(data[:len(data)-3]), "cut.bin")
	var w Window
	for err = sr.Next(&w); err == nil; err = sr.Next(&w) {
	}
	if !errors.Is(err, ErrState) || !bytes.Contains([]byte(err.Error()), []byte("cut.bin: state at offset")) {
		t.Errorf("cut file: %v, want ErrState naming cut.bin and the offset", err)
	}
}

// FuzzWindowState checks that any input either decodes to a window that
// encodes back to the same bytes, or fails with ErrState.
func FuzzWindowState(f *testing.F) {
	tr := makeTestTrace()
	for _, w := range runEngine(&testing.T{}, &Config{Workers: 1, Host: "h"}, &frameSource{frames: tr.frames, per: 4}) {
		f.Add(encodeWindow(f, w))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var w Window
		err := w.UnmarshalBinary(data)
		if err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error %v does not wrap ErrState", err)
			}
			return
		}
		if again := encodeWindow(t, &w); !bytes.Equal(again, data) {
			t.Fatalf("accepted state does not encode back to its bytes")
		}
	})
}

// TestStateWriterMakesDirectory: a --state-out path ending in a slash is a
// directory, created when missing.
func TestStateWriterMakesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "states", "host1") + "/"
	sw, err := NewStateWriter(dir, &Config{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	tr := makeTestTrace()
	for _, w := range runEngine(t, &Config{Workers: 1, Host: "h"}, &frameSource{frames: tr.frames, per: 4}) {
		if err := sw.Write(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*"+StateExt)); len(files) != 2 {
		t.Errorf("%d state files in the new directory, want 2", len(files))
	}
}

// TestStateReaderReusesWindows decodes states into one window again and
// again, as merge does with spare windows: each decode equals a fresh one.
func TestStateReaderReusesWindows(t *testing.T) {
	tr := makeTestTrace()
	wins := runEngine(t, &Config{Workers: 1, Host: "h"}, &frameSource{frames: tr.frames, per: 4})
	var file []byte
	for _, w := range append(wins, wins[0], wins[1]) {
		b := encodeWindow(t, w)
		file = binary.BigEndian.AppendUint32(file, uint32(len(b)))
		file = append(file, b...)
	}
	sr := NewStateReader(bytes.NewReader(file), "reuse")
	var w Window
	var sketchesOf *sketch.CountMin
	for i := range 4 {
		if err := sr.Next(&w); err != nil {
			t.Fatal(err)
		}
		if got, want := encodeWindow(t, &w), encodeWindow(t, wins[i%2]); !bytes.Equal(got, want) {
			t.Errorf("state %d decoded into a used window differs from the original", i)
		}
		if i > 0 && w.FlowBytes != sketchesOf {
			t.Errorf("state %d: the sketches were not reused", i)
		}
		sketchesOf = w.FlowBytes
	}
}
