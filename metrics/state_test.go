package metrics

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/testframes"
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

func TestStateRoundTrip(t *testing.T) {
	tr := testframes.Trace()
	for _, w := range runEngine(t, &Config{Workers: 2, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 4}) {
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

// TestStateVersions: a window of any segment is written as a version 4
// state with its segment, and decodes to what was written. States of
// versions 2 and 3 (testdata/state-v2.bin and state-v3.bin, the two windows
// of the hand-made trace as the engine of commit ac4ba8c wrote them, the
// second in segment 3) still decode, with the counters and flow records the
// engine finds now and no diagnoses' state, and encode again as version 4;
// a version 3 state of segment 0 (built here by hand from the version 2
// one: version byte 3, a segment byte 0 after start, length and the covered
// part, the checksum computed again) is refused as not canonical.
func TestStateVersions(t *testing.T) {
	wins := runEngine(t, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: testframes.Trace().Frames, Per: 4})
	w := wins[0]
	for _, seg := range []uint32{0, 7} {
		w.Segment = seg
		b := encodeWindow(t, w)
		if v := b[len(stateMagic)]; v != stateVersion {
			t.Errorf("segment %d: version %d, want %d", seg, v, stateVersion)
		}
		got := Window{Segment: 9}
		if err := got.UnmarshalBinary(b); err != nil || got.Segment != seg || !bytes.Equal(encodeWindow(t, &got), b) {
			t.Errorf("segment %d decodes as segment %d (%v), or encodes to other bytes", seg, got.Segment, err)
		}
	}
	w.Segment = 0
	var v2 []byte
	for i, name := range []string{"state-v2.bin", "state-v3.bin"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			v2 = b
		}
		var old Window
		if err := old.UnmarshalBinary(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := wins[i]
		flows := slices.Clone(want.Flows)
		for k := range flows {
			flows[k].Act = Activity{}
		}
		if old.Segment != uint32(3*i) || old.Burst != 0 || old.Counters != want.Counters || len(old.Pauses)+len(old.Retrans) != 0 ||
			!cmp.Equal(old.Flows, flows, addrEqual) {
			t.Errorf("%s: segment %d, burst %d, %d pause and %d retransmission records, or counters or flows differ from the engine's",
				name, old.Segment, old.Burst, len(old.Pauses), len(old.Retrans))
		}
		var again Window
		if err := again.UnmarshalBinary(encodeWindow(t, &old)); err != nil || !cmp.Equal(again.Flows, old.Flows, addrEqual) || again.Counters != old.Counters {
			t.Errorf("%s encoded as version %d: %v, or flows or counters differ", name, stateVersion, err)
		}
	}
	at := StateHeaderLen + 16
	for range 2 { // from and to, uvarints
		_, n := binary.Uvarint(v2[at:])
		at += n
	}
	v3 := append(append(append([]byte(nil), v2[:at]...), 0), v2[at:len(v2)-4]...)
	v3[len(stateMagic)] = 3
	v3 = binary.BigEndian.AppendUint32(v3, crc32.Checksum(v3, castagnoli))
	if err := new(Window).UnmarshalBinary(v3); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "segment 0 in a version 3 state") {
		t.Errorf("version 3 state of segment 0: %v, want ErrState naming segment 0", err)
	}
}

// TestStateMergeEqualsOneHost splits the trace between hosts by
// connection, merges their windows and compares with one host that saw
// everything: counters, flow records and the exactly mergeable sketches must
// be identical.
func TestStateMergeEqualsOneHost(t *testing.T) {
	tr := testframes.Trace()
	whole := runEngine(t, &Config{Workers: 1, Host: "all"}, &testframes.Source{Frames: tr.Frames, Per: 8})
	for hosts := 2; hosts <= 3; hosts++ {
		merged := map[int64]*Window{}
		for i, part := range testframes.SplitByConnection(testframes.Trace().Frames, hosts) {
			if len(part) == 0 {
				continue
			}
			for _, w := range runEngine(t, &Config{Workers: 2, Host: string(rune('a' + i))}, &testframes.Source{Frames: part, Per: 3}) {
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
	tr := testframes.Trace()
	w := runEngine(t, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 4})[0]
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

// TestStateRejectsRepeatedOpcode: a flow whose opcode mix names an opcode
// twice is damage (the encoder writes each once), not two counts to add.
func TestStateRejectsRepeatedOpcode(t *testing.T) {
	tr := testframes.Trace()
	w := runEngine(t, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 4})[0]
	w.Flows[0].Ops = OpMix{Op: [maxFlowOps]uint8{0x06, 0x06}, N: [maxFlowOps]uint64{1, 2}}
	err := new(Window).UnmarshalBinary(encodeWindow(t, w))
	if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "opcode 6 twice in a flow") {
		t.Errorf("%v, want ErrState saying opcode 6 twice in a flow", err)
	}
	w.Flows[0].Ops = OpMix{Op: [maxFlowOps]uint8{0x07, 0x06}, N: [maxFlowOps]uint64{1, 2}}
	var d Window
	if err := d.UnmarshalBinary(encodeWindow(t, w)); err != nil {
		t.Fatalf("opcodes out of order: %v, want them put in order", err)
	}
	if want := (OpMix{Op: [maxFlowOps]uint8{0x06, 0x07}, N: [maxFlowOps]uint64{2, 1}}); d.Flows[0].Ops != want {
		t.Errorf("opcodes out of order decode as %+v, want %+v", d.Flows[0].Ops, want)
	}
}

func TestMergeRejectsMismatch(t *testing.T) {
	tr := testframes.Trace()
	base := runEngine(t, &Config{Workers: 1, Host: "a"}, &testframes.Source{Frames: tr.Frames, Per: 4})
	for name, cfg := range map[string]*Config{
		"count-min width": {Workers: 1, Host: "b", CMWidth: 1 << 10},
		"seed":            {Workers: 1, Host: "b", Seed: 99},
		"top-k size":      {Workers: 1, Host: "b", TopKSize: 64},
	} {
		other := runEngine(t, cfg, &testframes.Source{Frames: testframes.Trace().Frames, Per: 4})
		if err := base[0].Merge(other[0]); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: merge error %v, want ErrMismatch", name, err)
		}
	}
	if err := base[0].Merge(base[1]); !errors.Is(err, ErrMismatch) {
		t.Errorf("different windows: merge error %v, want ErrMismatch", err)
	}
}

// FuzzWindowState checks that any input either decodes to a window that
// encodes back to the same bytes, or fails with ErrState.
func FuzzWindowState(f *testing.F) {
	tr := testframes.Trace()
	for i, w := range runEngine(&testing.T{}, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 4}) {
		w.Segment = uint32(i)
		f.Add(encodeWindow(f, w))
	}
	for _, name := range []string{"state-v2.bin", "state-v3.bin"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
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
		again := encodeWindow(t, &w)
		if data[len(stateMagic)] == stateVersion {
			if !bytes.Equal(again, data) {
				t.Fatalf("accepted state does not encode back to its bytes")
			}
			return
		}
		// An older version encodes as the current one, which encodes
		// back to its bytes.
		var x Window
		if err := x.UnmarshalBinary(again); err != nil || !bytes.Equal(encodeWindow(t, &x), again) {
			t.Fatalf("a version %d state encoded as version %d: %v, or does not encode back to its bytes", data[len(stateMagic)], stateVersion, err)
		}
	})
}

// TestSketchBytes holds the sketch size computed from a configuration
// together with what the sketches of such a window take.
func TestSketchBytes(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{DistinctBits: 1 << 12, CMWidth: 256, TopKSize: 64},
		{DistinctBits: 1 << 24, CMDepth: 8, CMWidth: 1 << 18, TopKSize: 5000},
		{TopKSize: 1},
	} {
		d, err := cfg.WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		w := mustValid(newWindow(&d))
		var want int64
		for _, s := range w.sketches() {
			want += int64(s.bytes())
		}
		if got, err := cfg.SketchBytes(); got != want || err != nil {
			t.Errorf("%+v: SketchBytes %d, %v; the sketches take %d bytes", cfg, got, err, want)
		}
	}
}

// TestStateSizeLimit decodes a state whose sketches are larger than the
// limit: it is refused with ErrStateSize, naming the sizes, before the
// sketches are allocated; at the limit it decodes.
func TestStateSizeLimit(t *testing.T) {
	cfg := &Config{Workers: 1, Host: "h", CMWidth: 1 << 18}
	w := runEngine(t, cfg, &testframes.Source{Frames: testframes.Trace().Frames, Per: 4})[0]
	b := encodeWindow(t, w)
	size, err := cfg.SketchBytes()
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = new(Window).UnmarshalReusing(b, size-1)
	runtime.ReadMemStats(&after)
	want := fmt.Sprintf("sketches of %d bytes (0 distinct bits, count-min 4×262144, top-k 1024), the limit is %d: state too large: invalid window state", size, size-1)
	if !errors.Is(err, ErrStateSize) || !errors.Is(err, ErrState) || !strings.Contains(err.Error(), want) {
		t.Fatalf("limit %d: %v, want ErrStateSize saying %q", size-1, err, want)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > uint64(len(b))+1<<16 {
		t.Errorf("the refused decode allocated %d bytes, for a state of %d", n, len(b))
	}
	if err := new(Window).UnmarshalReusing(b, size); err != nil {
		t.Errorf("limit %d, the state's size: %v", size, err)
	}
}

// TestStateRefusesShapeMismatch: a state whose sketch encoding has another
// shape than its declared configuration is refused, so that a merge with
// it cannot fail half-way.
func TestStateRefusesShapeMismatch(t *testing.T) {
	w := runEngine(t, &Config{Workers: 1, Host: "h", CMWidth: 256}, &testframes.Source{Frames: testframes.Trace().Frames, Per: 4})[0]
	w.sketchConfig.CMWidth = 512 // declared, while the sketches hold 256 columns
	err := new(Window).UnmarshalBinary(encodeWindow(t, w))
	if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "flow_bytes: sketch of another shape than the configuration declares") {
		t.Errorf("%v, want ErrState for the flow_bytes sketch's shape", err)
	}
}

// TestStateErrorsReadOnce: decode errors carry no package prefix of their
// own, and a sketch's error names the sketch once.
func TestStateErrorsReadOnce(t *testing.T) {
	w := runEngine(t, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: testframes.Trace().Frames, Per: 4})[0]
	b := encodeWindow(t, w)
	b[len(b)-1] ^= 1
	sum := binary.BigEndian.Uint32(b[len(b)-4:])
	got := new(Window).UnmarshalBinary(b)
	if want := fmt.Sprintf("checksum %08x, want %08x: invalid window state", sum^1, sum); got == nil || got.Error() != want {
		t.Errorf("flipped checksum: %v, want %q", got, want)
	}
	for _, v := range []byte{1, 5} {
		want := fmt.Sprintf("state version %d, this rocescope reads versions 2 to 4: invalid window state", v)
		if got := new(Window).UnmarshalBinary([]byte("RSCOPEWS" + string(v))); got == nil || got.Error() != want {
			t.Errorf("version %d: %v, want %q", v, got, want)
		}
	}
	if got := new(Window).UnmarshalBinary([]byte("GIF89a....")); got == nil || got.Error() != "not a rocescope window state (bad magic): invalid window state" {
		t.Errorf("not a state: %v", got)
	}
}
