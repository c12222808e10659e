package metrics

import (
	"bytes"
	"errors"
	"github.com/rocescope/rocescope/internal/testframes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/decode"
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
	for _, w := range runEngine(&testing.T{}, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 4}) {
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
