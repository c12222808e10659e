package html

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testWindow returns a one-second window with index idx, packets counted
// and a Gb/s figure, and the given top list.
func testWindow(idx int64, packets uint64, gbps float64, top ...flowSample) window {
	w := window{start: idx * 1e9, length: 1e9, hosts: []string{"h"}, exact: true, top: top}
	w.windows = 1
	for i := range w.max {
		w.max[i] = absent
	}
	w.sum[sumPackets] = packets
	w.max[maxGbps] = gbps
	w.min[minGbps] = gbps
	return w
}

func flow(name string, bytes uint64) flowSample {
	return flowSample{id: flowID{src: name, dst: "d", dqp: 1}, bytes: bytes, rate: float64(bytes) * 8}
}

func mustNewPage(t *testing.T, o *Options) *Page {
	t.Helper()
	p, err := NewPage(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPointsMergeInPairs adds windows 0..9 to a page of 4 points: each point
// must then cover 4 windows, summing counts and keeping the largest and
// smallest rate;
// a window missing from a point leaves it out, and a point no window fell
// into has no figure.
func TestPointsMergeInPairs(t *testing.T) {
	p := mustNewPage(t, &Options{MaxPoints: 4})
	for idx := range int64(10) {
		if idx == 5 {
			continue
		}
		if err := p.add(testWindow(100+idx, uint64(idx+1), float64((idx*3)%7+1), flow("a", uint64(idx)))); err != nil {
			t.Fatal(err)
		}
	}
	if p.width != 4 {
		t.Fatalf("width %d; want 4", p.width)
	}
	type pt struct {
		Windows          int
		Packets          uint64
		GbpsMax, GbpsMin float64
	}
	var got []pt
	for _, f := range p.points {
		got = append(got, pt{f.windows, f.sum[sumPackets], f.max[maxGbps], f.min[minGbps]})
	}
	want := []pt{{4, 1 + 2 + 3 + 4, 7, 1}, {3, 5 + 7 + 8, 6, 1}, {2, 9 + 10, 7, 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
	s := p.flows[0].samples
	if len(s) != 3 || s[0].rate != 3*8 || s[1].rate != 7*8 || s[2].rate != 9*8 {
		t.Errorf("flow samples %+v; want the largest rate of each point: 24, 56, 72", s)
	}

	// Windows 0..9 and 14 fit 16 points unmerged; points 10..13 stay
	// without a figure.
	q := mustNewPage(t, &Options{MaxPoints: 16})
	for _, idx := range []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 14} {
		if err := q.add(testWindow(100+idx, 1, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if q.width != 1 || len(q.points) != 15 {
		t.Fatalf("width %d, %d points; want 1 and 15", q.width, len(q.points))
	}
	d := q.data()
	for i, v := range d.Series["packets"] {
		if empty := i >= 10 && i < 14; empty != math.IsNaN(v) || empty != math.IsNaN(d.Series["gbps"][i]) {
			t.Errorf("point %d: packets %v, gbps %v; want a figure only where a window fell", i, v, d.Series["gbps"][i])
		}
	}
}

// TestNoRateChangeWithoutAPreviousWindow: a flow's rate change is charted
// from the window before, so the first window of a run, and a window after
// a gap, have none (null in the page), whatever the report's prev_rate_bps
// (0: the rate would plot as its own change); merged points keep the
// change of the windows that have one.
func TestNoRateChangeWithoutAPreviousWindow(t *testing.T) {
	p := mustNewPage(t, nil)
	a := func(rate, delta float64) flowSample {
		f := flow("a", uint64(rate/8))
		f.delta = delta
		return f
	}
	for _, w := range []struct {
		idx         int64
		rate, delta float64
	}{{10, 800, 800}, {11, 1600, 800}, {15, 2400, 2400}, {16, 800, 1600}} {
		if err := p.add(testWindow(w.idx, 1, 0, a(w.rate, w.delta))); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, s := range p.data().Flows[0].Samples {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	want := []string{"[0,800,null,0,0]", "[1,1600,800,0,0]", "[5,2400,null,0,0]", "[6,800,1600,0,0]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	p.halve() // points 0+1, 2+3 (none), 4+5, 6+7
	if d := p.flows[0].samples; len(d) != 3 || d[0].delta != 800 || !math.IsNaN(d[1].delta) || d[2].delta != 1600 {
		t.Errorf("after merging points in pairs: %+v; want changes 800, none, 1600", d)
	}
}

// TestFlowCapKeepsTheLargest fills a page of two flows: a larger newcomer
// replaces the smallest flow, a smaller one is left out.
func TestFlowCapKeepsTheLargest(t *testing.T) {
	p := mustNewPage(t, &Options{MaxFlows: 2})
	for i, top := range [][]flowSample{
		{flow("a", 100), flow("b", 50)},
		{flow("c", 70)},  // replaces b (50)
		{flow("d", 10)},  // left out: c (70) is the smallest
		{flow("b", 60)},  // left out again
		{flow("c", 200)}, // adds to c
	} {
		if err := p.add(testWindow(int64(i), 1, 0, top...)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]uint64{}
	for _, f := range p.flows {
		got[f.id.src] = f.bytes
	}
	if diff := cmp.Diff(map[string]uint64{"a": 100, "c": 270}, got); diff != "" {
		t.Errorf("charted flows (-want +got):\n%s", diff)
	}
	if p.evicted != 1 || p.refused != 2 {
		t.Errorf("evicted %d, refused %d; want 1 and 2", p.evicted, p.refused)
	}
	if len(p.index) != 2 || p.index[flowID{"c", "d", 1}] != 1 {
		t.Errorf("index %v; want a at 0 and c at 1", p.index)
	}
}

func TestWriteRejectsWindowsOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		next window
	}{
		{"same window", testWindow(5, 1, 0)},
		{"earlier window", testWindow(4, 1, 0)},
		{"other length", window{start: 6e9, length: 2e9}},
		{"no length", window{start: 6e9}},
	} {
		p := mustNewPage(t, nil)
		if err := p.add(testWindow(5, 1, 0)); err != nil {
			t.Fatal(err)
		}
		if err := p.add(tc.next); !errors.Is(err, ErrOrder) {
			t.Errorf("%s: %v; want ErrOrder", tc.name, err)
		}
		if p.windows != 1 || p.last != 5 || p.points[0].windows != 1 {
			t.Errorf("%s: the rejected window changed the page: %d windows, last %d", tc.name, p.windows, p.last)
		}
	}
}

func TestNewPageRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{MaxPoints: 1}, {MaxPoints: -5}, {MaxFlows: -1}, {ElephantRate: -1}} {
		if _, err := NewPage(&o); err == nil {
			t.Errorf("NewPage(%+v) accepted it", o)
		}
	}
}

// TestFileFlushWritesWhenWindowsCame checks that Flush writes the page at
// once (even empty), leaves it alone when nothing came since, and
// rewrites it after a window, leaving no temporary file behind.
func TestFileFlushWritesWhenWindowsCame(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.html")
	f, err := NewFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	empty, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Flush without new windows wrote the page again (%v)", err)
	}
	f.dirty = true // as Write does
	if err := f.page.add(testWindow(time.Now().Unix(), 7, 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) <= len(empty) {
		t.Errorf("page with a window has %d bytes, the empty one %d", len(full), len(empty))
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d files in the directory; want the page alone", len(ents))
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("page mode %v, %v; want 0644", st.Mode(), err)
	}
}

// TestFileSync checks that Sync writes the page when windows came (as Flush
// does, without a Flush before it), makes a page Flush wrote durable
// without writing it again, and does nothing when the page is durable.
func TestFileSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.html")
	f, err := NewFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil || f.dirty || !f.synced {
		t.Fatalf("after Sync: %v, dirty %v, synced %v; want the page written, durable", err, f.dirty, f.synced)
	}
	f.dirty = true // as Write does
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if f.synced {
		t.Error("Flush made the page durable")
	}
	written, _ := os.Stat(path)
	if err := f.Sync(context.Background()); err != nil || !f.synced {
		t.Fatalf("Sync after Flush: %v, synced %v", err, f.synced)
	}
	if now, err := os.Stat(path); err != nil || !os.SameFile(now, written) {
		t.Errorf("Sync after Flush wrote the page again (%v)", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Sync of a durable page wrote it again (%v)", err)
	}
}

// TestFileFlushFailsOnAMissingDirectory names the page in the error.
func TestFileFlushFailsOnAMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "r.html")
	f, err := NewFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Flush into a missing directory: %v; want ErrNotExist", err)
	}
}

// TestPageEmbedsTheVendoredUPlot checks that VERSION, the package's
// package.json and the banner of the script the page embeds name one
// version, and that the page holds the library's script and style whole.
func TestPageEmbedsTheVendoredUPlot(t *testing.T) {
	v, err := os.ReadFile("vendor/uplot/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	pkg, err := os.ReadFile("vendor/uplot/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct{ Name, Version string }
	if err := json.Unmarshal(pkg, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Name != "uplot" || meta.Version != version {
		t.Errorf("package.json: %s %s; VERSION says %s", meta.Name, meta.Version, version)
	}
	if banner := "/*! https://github.com/leeoniya/uPlot (v" + version + ") */"; !strings.HasPrefix(uplotJS, banner) {
		t.Errorf("embedded script does not start with %q", banner)
	}
	var b strings.Builder
	if _, err := mustNewPage(t, nil).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for name, part := range map[string]string{"uPlot.iife.min.js": uplotJS, "uPlot.min.css": uplotCSS, "report.js": reportJS, "report.css": reportCSS} {
		if !strings.Contains(b.String(), part) {
			t.Errorf("page lacks %s", name)
		}
	}
}
