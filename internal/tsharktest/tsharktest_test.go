package tsharktest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTshark puts a shell script named tshark first on PATH. It logs each
// run's arguments to a file, prints "v1" for --version, and otherwise the
// bytes of the file after -r; it exits with status 2 when the file starts
// with "bad". It returns the log's path.
func fakeTshark(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "runs")
	script := `#!/bin/sh
echo "$*" >> ` + log + `
if [ "$1" = --version ]; then echo "TShark v1"; echo more; exit 0; fi
cat "$2"
case "$(head -c 3 "$2")" in bad) echo "damaged" >&2; exit 2;; esac
`
	if err := os.WriteFile(filepath.Join(dir, "tshark"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("ROCESCOPE_TSHARK_CACHE", filepath.Join(dir, "cache"))
	return log
}

// runs returns the logged runs.
func runs(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

func TestRunCaches(t *testing.T) {
	log := fakeTshark(t)
	dir := t.TempDir()
	a, b, bad := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "bad")
	for p, s := range map[string]string{a: "frames", b: "frames", bad: "bad file"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []struct {
		path string
		args []string
		out  string
		fail bool
		runs int // runs logged after this call
	}{
		{a, []string{"-T", "fields"}, "frames", false, 2}, // --version, then the run
		{a, []string{"-T", "fields"}, "frames", false, 2}, // cached
		{b, []string{"-T", "fields"}, "frames", false, 2}, // same bytes, other path: cached
		{a, []string{"-T", "json"}, "frames", false, 3},   // other arguments
		{a, []string{"-T", "fi", "elds"}, "frames", false, 4},
		{bad, nil, "bad file", true, 5},
		{bad, nil, "bad file", true, 5}, // the failure is cached too
	} {
		out, err := Run(t, c.path, c.args...)
		var f *Failure
		if string(out) != c.out || errors.As(err, &f) != c.fail || (err != nil) != c.fail {
			t.Errorf("call %d: %q, %v; want %q, failure %v", i, out, err, c.out, c.fail)
		}
		if c.fail && (f.Status != 2 || f.Stderr != "damaged\n") {
			t.Errorf("call %d: failure %+v, want status 2 and standard error %q", i, f, "damaged\n")
		}
		if got := runs(t, log); len(got) != c.runs {
			t.Errorf("call %d: tshark ran %d times in all (%q), want %d", i, len(got), got, c.runs)
		}
	}
	if err := os.WriteFile(a, []byte("other frames"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := Run(t, a, "-T", "fields"); string(out) != "other frames" || len(runs(t, log)) != 6 {
		t.Errorf("changed file: %q after %d runs, want a new run", out, len(runs(t, log)))
	}
}

func TestRunCacheOff(t *testing.T) {
	log := fakeTshark(t)
	t.Setenv("ROCESCOPE_TSHARK_CACHE", "off")
	path := filepath.Join(t.TempDir(), "a")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if out, err := Run(t, path); string(out) != "x" || err != nil {
			t.Fatalf("%q, %v", out, err)
		}
	}
	if got := runs(t, log); len(got) != 3 {
		t.Errorf("tshark ran %d times (%q), want --version and 2 uncached runs", len(got), got)
	}
}
