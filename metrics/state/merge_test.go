package state

import (
	"bytes"
	"errors"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
	"slices"
	"strings"
	"testing"
)

// hostWindows runs the engine as host over frames and returns its windows.
func hostWindows(t *testing.T, host string, part int, cfg *metrics.Config) []*metrics.Window {
	t.Helper()
	c := *cfg
	c.Host = host
	return enginetest.Run(t, &c, &testframes.Source{Frames: testframes.SplitByConnection(testframes.Trace().Frames, 2)[part], Per: 5})
}

// TestMergerAlignsHosts adds two hosts' windows in a scrambled order and
// takes them back in time order, each merged from the hosts that had it,
// equal to merging the windows by hand with Window.Merge.
func TestMergerAlignsHosts(t *testing.T) {
	a := hostWindows(t, "a", 0, &metrics.Config{Workers: 1})
	b := hostWindows(t, "b", 1, &metrics.Config{Workers: 1})
	if len(a) < 2 || len(b) < 2 {
		t.Fatalf("hosts have %d and %d windows, want at least 2 each", len(a), len(b))
	}
	// b loses its first window.
	b = b[1:]
	m := NewMerger()
	want := map[int64][]byte{}
	wantHosts := map[int64][]string{}
	for _, w := range a {
		enc := encodeWindow(t, w)
		var x metrics.Window
		if err := x.UnmarshalBinary(enc); err != nil {
			t.Fatal(err)
		}
		for _, o := range b {
			if o.Start == w.Start {
				if err := x.Merge(o); err != nil {
					t.Fatal(err)
				}
			}
		}
		x.Normalize()
		want[w.Start] = encodeWindow(t, &x)
		wantHosts[w.Start] = x.Hosts
	}
	for _, w := range slices.Concat(b, a) {
		if err := m.Add("src-"+w.Hosts[0], w); err != nil {
			t.Fatal(err)
		}
	}
	var starts []int64
	for _, w := range a {
		starts = append(starts, w.Start)
	}
	if got := m.Pending(); !slices.Equal(got, starts) {
		t.Errorf("pending %v, want %v", got, starts)
	}
	if m.Has(a[0].Start, "b") || !m.Has(a[0].Start, "a") || !m.Has(a[1].Start, "b") {
		t.Error("Has does not tell which hosts delivered the windows")
	}
	for _, s := range starts {
		w := m.Take()
		if w == nil || w.Start != s {
			t.Fatalf("took %v, want window %d", w, s)
		}
		if !slices.Equal(w.Hosts, wantHosts[s]) || !bytes.Equal(encodeWindow(t, w), want[s]) {
			t.Errorf("window %d: taken window differs from the hand merge (hosts %q, want %q)", s, w.Hosts, wantHosts[s])
		}
	}
	if w := m.Take(); w != nil || len(m.Pending()) != 0 {
		t.Errorf("a window is left after taking all: %v", w)
	}
}

// TestMergerRefuses checks every state the Merger must not merge: each
// error wraps its sentinel, names the source, and merges nothing.
func TestMergerRefuses(t *testing.T) {
	a := hostWindows(t, "a", 0, &metrics.Config{Workers: 1})
	fresh := func(host string) *metrics.Window {
		w := hostWindows(t, host, 0, &metrics.Config{Workers: 1})[0]
		return w
	}
	for _, tc := range []struct {
		name   string
		second func() *metrics.Window
		want   error
	}{
		{"same host twice", func() *metrics.Window { return fresh("a") }, ErrDuplicate},
		{"host among others twice", func() *metrics.Window { w := fresh("a"); w.Hosts = []string{"a", "c"}; return w }, ErrDuplicate},
		{"no host", func() *metrics.Window { w := fresh("b"); w.Hosts = nil; return w }, metrics.ErrState},
		{"host listed twice", func() *metrics.Window { w := fresh("b"); w.Hosts = []string{"b", "b"}; return w }, metrics.ErrState},
		{"hosts out of order", func() *metrics.Window { w := fresh("b"); w.Hosts = []string{"c", "b"}; return w }, metrics.ErrState},
		{"window length", func() *metrics.Window { w := fresh("b"); w.Length *= 2; w.Start -= w.Start % w.Length; return w }, metrics.ErrMismatch},
		{"sketch seed", func() *metrics.Window { return hostWindows(t, "b", 0, &metrics.Config{Workers: 1, Seed: 7})[0] }, metrics.ErrMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMerger()
			first := encodeWindow(t, a[0])
			if err := m.Add("first.rsstate", a[0]); err != nil {
				t.Fatal(err)
			}
			err := m.Add("second.rsstate", tc.second())
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "second.rsstate") {
				t.Fatalf("error %v, want %v naming second.rsstate", err, tc.want)
			}
			if got := m.Take(); !bytes.Equal(encodeWindow(t, got), first) {
				t.Error("the refused state changed the pending window")
			}
		})
	}
	t.Run("late", func(t *testing.T) {
		m := NewMerger()
		for _, w := range a[:2] {
			if err := m.Add("a.rsstate", w); err != nil {
				t.Fatal(err)
			}
		}
		m.Take()
		err := m.Add("b.rsstate", fresh("b"))
		if !errors.Is(err, ErrLate) || !strings.Contains(err.Error(), "b.rsstate") {
			t.Fatalf("error %v, want ErrLate naming b.rsstate", err)
		}
		if w := m.Take(); w == nil || w.Start != a[1].Start {
			t.Errorf("the late state disturbed the pending windows: took %v", w)
		}
	})
	// After a clock step back, a host delivers a window again from the
	// next segment of its capture: other frames, which merge; the same
	// segment twice is still a duplicate.
	t.Run("segments", func(t *testing.T) {
		m := NewMerger()
		if err := m.Add("a.rsstate", fresh("a")); err != nil {
			t.Fatal(err)
		}
		again := fresh("a")
		again.Segment = 1
		if err := m.Add("a.s1.rsstate", again); err != nil {
			t.Fatalf("segment 1 of the window: %v", err)
		}
		dup := fresh("a")
		dup.Segment = 1
		err := m.Add("copy.rsstate", dup)
		if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), "host a already delivered it (segment 1 of its capture) in a.s1.rsstate") {
			t.Fatalf("error %v, want ErrDuplicate naming segment 1 and a.s1.rsstate", err)
		}
		w := m.Take()
		if one := fresh("a"); w.Counters[metrics.Packets] != 2*one.Counters[metrics.Packets] || !slices.Equal(w.Hosts, []string{"a"}) {
			t.Errorf("merged %d packets of hosts %q, want %d of [a]", w.Counters[metrics.Packets], w.Hosts, 2*one.Counters[metrics.Packets])
		}
	})
}

// at returns a copy of w moved to the window that starts at start, of
// host.
func at(t *testing.T, w *metrics.Window, host string, start int64) *metrics.Window {
	t.Helper()
	var c metrics.Window
	if err := c.UnmarshalBinary(encodeWindow(t, w)); err != nil {
		t.Fatal(err)
	}
	c.From, c.To, c.Start = c.From-c.Start+start, c.To-c.Start+start, start
	c.Hosts = []string{host}
	return &c
}

// encodeWindow returns the state encoding of w.
func encodeWindow(tb testing.TB, w *metrics.Window) []byte {
	tb.Helper()
	b, err := w.AppendBinary(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestMergerAddsRunsOfAHost: a host's states of one window that cover
// parts of it apart in time (the last window of a capture and the first of
// the capture that restarted it) merge; a state that overlaps one of them
// is a duplicate, named after the state it overlaps.
func TestMergerAddsRunsOfAHost(t *testing.T) {
	w := hostWindows(t, "a", 0, &metrics.Config{Workers: 1})[1]
	part := func(from, to float64) *metrics.Window {
		c := at(t, w, "a", w.Start)
		c.From, c.To = w.Start+int64(from*float64(w.Length)), w.Start+int64(to*float64(w.Length))
		return c
	}
	m := NewMerger()
	if err := m.Add("run1", part(0, 0.4)); err != nil {
		t.Fatal(err)
	}
	if err := m.Add("run2", part(0.6, 1)); err != nil {
		t.Fatalf("the restarted run's state: %v", err)
	}
	err := m.Add("copy", part(0.3, 0.5))
	if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), "host a already delivered it in run1") {
		t.Errorf("overlapping state: %v, want ErrDuplicate naming run1", err)
	}
	got := m.Take()
	if got.Counters[metrics.Packets] != 2*w.Counters[metrics.Packets] || !slices.Equal(got.Hosts, []string{"a"}) || got.Covered() != w.Length {
		t.Errorf("merged %d packets of hosts %q covering %d ns, want %d of [a] covering %d", got.Counters[metrics.Packets], got.Hosts, got.Covered(), 2*w.Counters[metrics.Packets], w.Length)
	}
}

// TestMergerTakesEarlyWindows: windows of 1811 (and of any time a state
// can hold) are not taken for late by a Merger that took none yet.
func TestMergerTakesEarlyWindows(t *testing.T) {
	w := hostWindows(t, "a", 0, &metrics.Config{Workers: 1})[0]
	m := NewMerger()
	for _, s := range []int64{-5_000_000_000_000_000_000, -5_000_000_000_000_000_000 + w.Length} {
		if err := m.Add("old", at(t, w, "a", s)); err != nil {
			t.Fatalf("window %d: %v", s, err)
		}
	}
	if got := m.Take(); got == nil || got.Start != -5_000_000_000_000_000_000 {
		t.Errorf("took %v, want the window of 1811", got)
	}
}
