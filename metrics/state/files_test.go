package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocescope/rocescope/internal/testfifo"
	"github.com/rocescope/rocescope/metrics"
)

// writeStates writes w as the state of host for each of the windows
// starts, into path (a file, or a directory for one file per window).
func writeStates(t *testing.T, path, host string, w *metrics.Window, starts []int64) {
	t.Helper()
	sw, err := NewWriter(path, &metrics.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	c := *w
	c.Hosts = []string{host}
	for _, s := range starts {
		c.From, c.To, c.Start = c.From-c.Start+s, c.To-c.Start+s, s
		if err := sw.Write(&c); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
}

// windowsOut is an Output that hands each merged window to a function.
type windowsOut func(*metrics.Window) error

func (f windowsOut) Write(w *metrics.Window, _ []string) error { return f(w) }
func (windowsOut) Sync(context.Context) error                  { return nil }

// mergeFiles merges the state files paths, read once, and hands each merged
// window to emit, lent until emit returns.
func mergeFiles(ctx context.Context, paths []string, opts *ReadOptions, emit func(*metrics.Window) error) error {
	cfg := &FileInputConfig{}
	if opts != nil {
		cfg.Read = *opts
	}
	_, err := Merge(ctx, NewFileInput(paths, cfg), windowsOut(emit), nil)
	return err
}

// hostPair returns the first window of two hosts that share its start.
func hostPair(t *testing.T) (a, b *metrics.Window) {
	t.Helper()
	a = hostWindows(t, "a", 0, &metrics.Config{Workers: 1})[0]
	b = hostWindows(t, "b", 1, &metrics.Config{Workers: 1})[0]
	if a.Start != b.Start {
		t.Fatalf("the hosts' first windows start at %d and %d", a.Start, b.Start)
	}
	return a, b
}

// TestMergeFilesStreams merges 40 windows of two hosts, one file per host
// and window, listed host by host (the order of a directory listing): each
// window is emitted merged from both hosts, in time order, equal to the
// hand merge, and the windows emitted are a few reused ones, not one per
// window: the merge holds a bounded number of windows, however many the
// files hold.
func TestMergeFilesStreams(t *testing.T) {
	a, b := hostPair(t)
	const windows = 40
	starts := make([]int64, windows)
	for i := range starts {
		starts[i] = a.Start + int64(i)*a.Length
	}
	dir := t.TempDir()
	writeStates(t, dir, "a", a, starts)
	writeStates(t, dir, "b", b, starts)
	paths, err := filepath.Glob(filepath.Join(dir, "*"+Ext))
	if err != nil || len(paths) != 2*windows {
		t.Fatalf("%d state files (%v), want %d", len(paths), err, 2*windows)
	}
	slices.Sort(paths) // a-..., then b-...
	want := handMerge(t, a, b)
	var got []int64
	seen := map[*metrics.Window]bool{}
	err = mergeFiles(context.Background(), paths, nil, func(w *metrics.Window) error {
		got = append(got, w.Start)
		seen[w] = true
		if !bytes.Equal(afterStart(encodeWindow(t, w)), want) {
			t.Errorf("window %d differs from the hand merge of the two hosts", w.Start)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, starts) {
		t.Errorf("emitted windows %v, want %v", got, starts)
	}
	if len(seen) > 2 {
		t.Errorf("the merge emitted %d distinct windows for %d windows, want at most 2 reused ones", len(seen), windows)
	}
}

// handMerge returns the encoding of a merged with b, after the start.
func handMerge(t *testing.T, a, b *metrics.Window) []byte {
	t.Helper()
	var x metrics.Window
	if err := x.UnmarshalBinary(encodeWindow(t, a)); err != nil {
		t.Fatal(err)
	}
	if err := x.Merge(b); err != nil {
		t.Fatal(err)
	}
	x.Normalize()
	return afterStart(encodeWindow(t, &x))
}

// afterStart returns the part of a state encoding after the window start
// and before the checksum, which depend on the start.
func afterStart(enc []byte) []byte { return enc[metrics.StateHeaderLen+8 : len(enc)-4] }

// TestMergeFilesRefuses checks the files MergeFiles refuses, each with an
// error naming the file (and the offset of the state at fault), and quickly:
// a FIFO is refused without blocking.
func TestMergeFilesRefuses(t *testing.T) {
	a, _ := hostPair(t)
	dir := t.TempDir()
	second := int64(len(encodeWindow(t, a))) + 4 // offset of a file's second state
	for _, tc := range []struct {
		name  string
		make  func(path string)
		want  error
		error string
	}{
		{"out of order", func(p string) { writeStates(t, p, "a", a, []int64{a.Start + a.Length, a.Start}) }, ErrOrder,
			fmt.Sprintf("state: %%s: state at offset %d: window %d after window %d: states out of window order%s: invalid window state", second, a.Start, a.Start+a.Length, orderHint)},
		{"window twice", func(p string) { writeStates(t, p, "a", a, []int64{a.Start, a.Start}) }, ErrOrder,
			fmt.Sprintf("state: %%s: state at offset %d: window %d after window %d: states out of window order%s: invalid window state", second, a.Start, a.Start, orderHint)},
		{"empty", func(p string) { os.WriteFile(p, nil, 0o644) }, metrics.ErrState,
			"state: %s: no window state in the file: invalid window state"},
		{"not a state file", func(p string) { os.WriteFile(p, bytes.Repeat([]byte("GIF89a"), 1000), 0o644) }, metrics.ErrState,
			"state: %s: not a rocescope state file: invalid window state"},
		{"fifo", func(p string) {
			if err := testfifo.Make(p); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}, ErrNotRegular, "state: %s: not a regular file (p---------)"},
		{"dangling symlink", func(p string) { os.Symlink(filepath.Join(dir, "gone"), p) }, os.ErrNotExist,
			"state: stat %s: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+Ext)
			tc.make(path)
			emitted := 0
			err := mergeFiles(context.Background(), []string{path}, nil, func(*metrics.Window) error { emitted++; return nil })
			if want := fmt.Sprintf(tc.error, path); !errors.Is(err, tc.want) || err.Error() != want {
				t.Errorf("error %v\nwant  %s, wrapping %v", err, want, tc.want)
			}
			if tc.want == ErrOrder && emitted != 0 {
				t.Errorf("%d windows emitted before the order error, want 0: the first is not complete", emitted)
			}
		})
	}
}

// TestMergeFilesStopsOnCancel: a merge whose context is done stops before
// reading a state.
func TestMergeFilesStopsOnCancel(t *testing.T) {
	a, _ := hostPair(t)
	path := filepath.Join(t.TempDir(), "a"+Ext)
	writeStates(t, path, "a", a, []int64{a.Start})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	err := mergeFiles(ctx, []string{path}, nil, func(*metrics.Window) error { return nil })
	if !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Errorf("%v after %v, want context.Canceled at once", err, time.Since(start))
	}
}

// TestFilesGrowing reads a file while its second state is half written:
// with Growing the file ends before that state, without an error, and
// added again from the offset Next returned it delivers the state once
// complete; without Growing the cut state is an error wrapping
// io.ErrUnexpectedEOF. A file whose first state's header is cut is empty
// for now.
func TestFilesGrowing(t *testing.T) {
	a, _ := hostPair(t)
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole"+Ext)
	writeStates(t, whole, "a", a, []int64{a.Start, a.Start + a.Length})
	data, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	first := len(encodeWindow(t, a)) + 4
	path := filepath.Join(dir, "growing"+Ext)
	if err := os.WriteFile(path, data[:first+first/2], 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	fs := NewFiles(&ReadOptions{Growing: true})
	if err := fs.Add(ctx, path, 0); err != nil {
		t.Fatal(err)
	}
	var w metrics.Window
	if p, off, err := fs.Next(ctx, &w); p != path || off != int64(first) || err != nil || w.Start != a.Start {
		t.Fatalf("first state: %s, offset %d, window %d, %v; want %s, %d, %d", p, off, w.Start, err, path, first, a.Start)
	}
	if _, _, err := fs.Next(ctx, &w); err != io.EOF {
		t.Fatalf("half-written state: %v, want io.EOF", err)
	}
	strict := NewFiles(nil)
	if err := strict.Add(ctx, path, int64(first)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := strict.Next(ctx, &w); !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, metrics.ErrState) {
		t.Fatalf("half-written state without Growing: %v, want io.ErrUnexpectedEOF", err)
	}

	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fs = NewFiles(&ReadOptions{Growing: true})
	if err := fs.Add(ctx, path, int64(first)); err != nil {
		t.Fatal(err)
	}
	if _, off, err := fs.Next(ctx, &w); off != int64(len(data)) || err != nil || w.Start != a.Start+a.Length {
		t.Fatalf("completed state: offset %d, window %d, %v; want %d, %d", off, w.Start, err, len(data), a.Start+a.Length)
	}

	cut := filepath.Join(dir, "cut"+Ext)
	if err := os.WriteFile(cut, data[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewFiles(&ReadOptions{Growing: true}).Add(ctx, cut, 0); err != io.EOF {
		t.Errorf("cut header with Growing: %v, want io.EOF", err)
	}
}
