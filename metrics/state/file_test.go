package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/sketch"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
)

// stateFile runs the engine over the hand-made test trace, writes its
// windows with a Writer into one file and returns the file's bytes.
// The sketches are small, so that decoding a state costs little and a
// fuzzer gets through many.
func stateFile(tb testing.TB) []byte {
	tb.Helper()
	cfg := &fuzzConfig
	path := filepath.Join(tb.TempDir(), "states")
	sw, err := NewWriter(path, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := metrics.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	src := &testframes.Source{Frames: testframes.Trace().Frames, Per: 4}
	if err := errors.Join(e.Run(context.Background(), []capture.Source{src}, sw.Write), sw.Close()); err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// fuzzConfig makes the states of stateFile.
var fuzzConfig = metrics.Config{Workers: 1, Host: "h", CMWidth: 256, DistinctBits: 1 << 12, TopKSize: 64, TableSize: 1 << 10}

// FuzzStateReader reads any bytes as a state file, with a sketch size
// limit of twice the seeds' sketches. Peek must tell the window start of
// the state Next then returns. The encoding of every state Next returns
// must decode and encode to the same bytes (it need not equal the input: a
// state written before a counter was added decodes, and encodes with the
// new counter; the exact round trip of current states is
// TestStateFileRoundTrip's). io.EOF must come exactly at the end of the
// input; any other error must wrap ErrState and name the file and the
// offset of the frame that failed ("not a rocescope state file" for a bad
// magic at offset 0), and wrap io.ErrUnexpectedEOF exactly when the input
// ends inside that state's frame.
func FuzzStateReader(f *testing.F) {
	data := stateFile(f)
	const magic = "RSCOPEWS" // then a version byte, 2 to 4 read
	f.Add(data)
	f.Add(data[:len(data)-1])
	f.Add(append(bytes.Clone(data), 0, 0, 0))
	limit, err := fuzzConfig.SketchBytes()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sr := NewReader(bytes.NewReader(data), "fuzz.states", &ReadOptions{MaxSketchBytes: 2 * limit})
		for off := 0; ; {
			var w metrics.Window
			start, err := sr.Peek()
			if err == nil {
				err = sr.Next(&w)
			}
			if err == io.EOF {
				if off != len(data) {
					t.Fatalf("io.EOF at offset %d of %d", off, len(data))
				}
				return
			}
			if err != nil {
				named := fmt.Sprintf("fuzz.states: state at offset %d:", off)
				header := func(n int) bool { // data holds a prefix of the first n bytes of a state's header at off
					h := data[min(off+4, len(data)):min(off+4+n, len(data))]
					m := min(len(h), len(magic))
					return string(h[:m]) == magic[:m] && (len(h) == m || h[m] >= 2 && h[m] <= 4)
				}
				if off == 0 && !header(8) {
					named = "fuzz.states: not a rocescope state file"
				}
				if !errors.Is(err, metrics.ErrState) || !strings.Contains(err.Error(), named) {
					t.Fatalf("error %q does not wrap ErrState saying %q", err, named)
				}
				rest := len(data) - off
				cut := header(9) && (rest < headLen || rest < 4+int(binary.BigEndian.Uint32(data[off:])) && binary.BigEndian.Uint32(data[off:]) <= maxState)
				if errors.Is(err, io.ErrUnexpectedEOF) != cut {
					t.Fatalf("error %q: wraps io.ErrUnexpectedEOF %v, the input ends inside the state %v", err, !cut, cut)
				}
				return
			}
			if start != w.Start {
				t.Fatalf("state at offset %d: Peek said window %d, Next decoded %d", off, start, w.Start)
			}
			if sz := int64(w.Distinct.MemoryBytes() + w.FlowBytes.MemoryBytes() + w.FlowPackets.MemoryBytes() +
				w.Top.MemoryBytes() + w.ReadLatency.MemoryBytes() + w.AckLatency.MemoryBytes()); sz > 2*limit {
				t.Fatalf("state at offset %d: sketches of %d bytes passed the limit %d", off, sz, 2*limit)
			}
			enc, err := w.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			// Had the decoder lost or changed anything, encoding again
			// would not give the same bytes.
			var again metrics.Window
			if err := again.UnmarshalBinary(enc); err != nil {
				t.Fatalf("state at offset %d: its encoding does not decode: %v", off, err)
			}
			if enc2, _ := again.AppendBinary(nil); !bytes.Equal(enc, enc2) {
				t.Fatalf("state at offset %d: the encoding is not a fixed point", off)
			}
			off += 4 + int(binary.BigEndian.Uint32(data[off:]))
			if sr.Offset() != int64(off) {
				t.Fatalf("Offset %d after the state, want %d", sr.Offset(), off)
			}
		}
	})
}

// TestStateReaderEveryPrefix cuts a state file of several windows at every
// length: the reader returns the whole states before the cut and then an
// ErrState naming the offset of the cut one, or io.EOF when the cut falls
// between states.
func TestStateReaderEveryPrefix(t *testing.T) {
	data := stateFile(t)
	var ends []int // offsets where states end
	for off := 0; off < len(data); {
		off += 4 + int(binary.BigEndian.Uint32(data[off:]))
		ends = append(ends, off)
	}
	if len(ends) < 2 {
		t.Fatalf("the test trace makes %d windows, want several", len(ends))
	}
	for n := range len(data) + 1 {
		sr := NewReader(bytes.NewReader(data[:n]), "cut", nil)
		whole, start := 0, 0
		for _, e := range ends {
			if e <= n {
				whole++
				start = e
			}
		}
		for i := range whole {
			if err := sr.Next(new(metrics.Window)); err != nil {
				t.Fatalf("cut at %d: state %d: %v", n, i, err)
			}
		}
		err := sr.Next(new(metrics.Window))
		switch {
		case n == start:
			if err != io.EOF {
				t.Fatalf("cut at %d, between states: %v, want io.EOF", n, err)
			}
		case !errors.Is(err, metrics.ErrState) || !strings.Contains(err.Error(), fmt.Sprintf("cut: state at offset %d:", start)):
			t.Fatalf("cut at %d: %v, want ErrState at offset %d", n, err, start)
		}
	}
}

// TestStateWriterHostNames writes states of hosts whose names a careless
// escape would confuse into one directory: each gets its own file, which
// holds its own state.
func TestStateWriterHostNames(t *testing.T) {
	w := enginetest.Run(t, &metrics.Config{Workers: 1, Host: "x"}, &testframes.Source{Frames: testframes.Trace().Frames, Per: 4})[0]
	dir := t.TempDir()
	files := map[string]string{ // host → its file name before "-<start>.rsstate"
		"a/b": "a%2Fb", "a_b": "a_b", "a%2Fb": "a%252Fb", "a-1": "a-1", `a\b`: "a%5Cb", "a\x00b": "a%00b", "a": "a",
	}
	for h := range files {
		sw, err := NewWriter(dir, &metrics.Config{Host: h})
		if err != nil {
			t.Fatal(err)
		}
		w.Hosts = []string{h}
		if err := errors.Join(sw.Write(w), sw.Close()); err != nil {
			t.Fatal(err)
		}
	}
	if written, _ := filepath.Glob(filepath.Join(dir, "*"+Ext)); len(written) != len(files) {
		t.Fatalf("%d hosts wrote %d files: %q", len(files), len(written), written)
	}
	for h, prefix := range files {
		name := filepath.Join(dir, fmt.Sprintf("%s-%d%s", prefix, w.Start, Ext))
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("host %q: %v", h, err)
		}
		var got metrics.Window
		if err := NewReader(bytes.NewReader(data), name, nil).Next(&got); err != nil || len(got.Hosts) != 1 || got.Hosts[0] != h {
			t.Errorf("%s holds hosts %q (%v), want [%q]", name, got.Hosts, err, h)
		}
	}
}
func TestStateFileRoundTrip(t *testing.T) {
	tr := testframes.Trace()
	wins := enginetest.Run(t, &metrics.Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 4})
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "states.bin"), dir} {
		sw, err := NewWriter(path, &metrics.Config{Host: "h"})
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
	sr := NewReader(f, "states.bin", nil)
	for i := 0; ; i++ {
		var w metrics.Window
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
	per, _ := filepath.Glob(filepath.Join(dir, "*"+Ext))
	if len(per) != len(wins) {
		t.Errorf("directory holds %d state files, want %d: %v", len(per), len(wins), per)
	}
	// A cut file is an error naming the file and the offset.
	data, _ := os.ReadFile(filepath.Join(dir, "states.bin"))
	sr = NewReader(bytes.NewReader(data[:len(data)-3]), "cut.bin", nil)
	var w metrics.Window
	for err = sr.Next(&w); err == nil; err = sr.Next(&w) {
	}
	if !errors.Is(err, metrics.ErrState) || !bytes.Contains([]byte(err.Error()), []byte("cut.bin: state at offset")) {
		t.Errorf("cut file: %v, want ErrState naming cut.bin and the offset", err)
	}
}

// TestStateWriterMakesDirectory: a --state-out path ending in a slash is a
// directory, created when missing.
func TestStateWriterMakesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "states", "host1") + "/"
	sw, err := NewWriter(dir, &metrics.Config{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	tr := testframes.Trace()
	for _, w := range enginetest.Run(t, &metrics.Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 4}) {
		if err := sw.Write(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*"+Ext)); len(files) != 2 {
		t.Errorf("%d state files in the new directory, want 2", len(files))
	}
}

// TestStateReaderReusesWindows decodes states into one window again and
// again, as merge does with spare windows: each decode equals a fresh one.
func TestStateReaderReusesWindows(t *testing.T) {
	tr := testframes.Trace()
	wins := enginetest.Run(t, &metrics.Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 4})
	var file []byte
	for _, w := range append(wins, wins[0], wins[1]) {
		b := encodeWindow(t, w)
		file = binary.BigEndian.AppendUint32(file, uint32(len(b)))
		file = append(file, b...)
	}
	sr := NewReader(bytes.NewReader(file), "reuse", nil)
	var w metrics.Window
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

// TestStateWriterChecksNames: a writer into a directory fails at once, not
// at its first window, when the host's file names cannot be created there,
// and leaves no file behind when they can.
func TestStateWriterChecksNames(t *testing.T) {
	dir := t.TempDir()
	_, err := NewWriter(dir, &metrics.Config{Host: strings.Repeat("h", 300)})
	if !errors.Is(err, syscall.ENAMETOOLONG) || !strings.HasPrefix(err.Error(), "state: state output: open "+dir) {
		t.Errorf("300-byte host: %v, want ENAMETOOLONG naming the file", err)
	}
	sw, err := NewWriter(dir, &metrics.Config{Host: strings.Repeat("h", 180)})
	if err != nil {
		t.Fatalf("180-byte host: %v", err)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the directory holds %d files after the check, want none", len(ents))
	}
}

// TestStateWriterKeepsEarlierRuns: writers of one host into one directory,
// one after another (a capture restarted), that write the same window
// never replace a file: the first keeps its name, the later ones name
// theirs after their run, and every file holds the state written.
func TestStateWriterKeepsEarlierRuns(t *testing.T) {
	dir := t.TempDir()
	w := hostWindows(t, "a", 0, &metrics.Config{Workers: 1})[0]
	var want [][]byte
	for run := range 3 {
		c := at(t, w, "a", w.Start)
		c.Counters[metrics.Packets] += uint64(run) // a state of its own
		sw, err := NewWriter(dir, &metrics.Config{Host: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(sw.Write(c), sw.Close()); err != nil {
			t.Fatal(err)
		}
		want = append(want, encodeWindow(t, c))
		time.Sleep(time.Millisecond) // runs are named by their start in ns
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) != 3 {
		t.Fatalf("files %q (%v), want 3", files, err)
	}
	plain := filepath.Join(dir, fmt.Sprintf("a-%d%s", w.Start, Ext))
	for _, f := range files {
		if f != plain && !strings.HasPrefix(f, strings.TrimSuffix(plain, Ext)+".r") {
			t.Errorf("file %s: want %s, and names with a run", f, plain)
		}
	}
	if !slices.Contains(files, plain) {
		t.Errorf("files %q: the first run's %s is gone", files, plain)
	}
	var got [][]byte
	for _, f := range files {
		sr, err := Open(context.Background(), f, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var x metrics.Window
		if err := sr.Next(&x); err != nil {
			t.Fatal(err)
		}
		sr.Close()
		got = append(got, encodeWindow(t, &x))
	}
	slices.SortFunc(got, bytes.Compare)
	slices.SortFunc(want, bytes.Compare)
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Error("the files do not hold the three states written")
	}
}
