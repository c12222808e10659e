package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSeveralOutputs: -o given twice writes each file in the format of its
// extension, the same bytes as a run with that one output; a YAML config
// lists outputs the same way.
func TestSeveralOutputs(t *testing.T) {
	dir := t.TempDir()
	pcap := filepath.Join("..", "..", "testdata", "demo.pcap")
	jsonl := mustRunInProcess(t, "replay", "--host", "h", "--format", "jsonl", pcap)
	csv := mustRunInProcess(t, "replay", "--host", "h", "--format", "csv", pcap)
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.csv")
	check := func(how string) {
		t.Helper()
		for path, want := range map[string]string{a: jsonl, b: csv} {
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("%s: %s differs from its single-output run (%v)", how, filepath.Base(path), err)
			}
			os.Remove(path)
		}
	}
	if out := mustRunInProcess(t, "replay", "--host", "h", "-o", a, "-o", b, pcap); out != "" {
		t.Errorf("standard output %q, want nothing", out)
	}
	check("-o -o")
	cfg := filepath.Join(dir, "rocescope.yaml")
	if err := os.WriteFile(cfg, []byte("host: h\noutput:\n  - "+a+"\n  - "+b+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRunInProcess(t, "replay", "--config", cfg, pcap)
	check("config list")
}

// TestOutputUsageErrors: outputs that cannot work are usage errors that
// say why, before any input is read.
func TestOutputUsageErrors(t *testing.T) {
	dir := t.TempDir()
	pcap := filepath.Join("..", "..", "testdata", "demo.pcap")
	x := filepath.Join(dir, "x.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "csv", "-o", x}, "the extension says jsonl but --format is csv"},
		{[]string{"-o", x, "-o", x}, "given twice"},
		{[]string{"-o", "-", "--format", "html"}, "give -o FILE.html"},
		{[]string{"-o", "ipfix://h?pen=0"}, "pen="},
		{[]string{"-o", ""}, "want a file, - or a URL"},
	} {
		code, _, stderr := runCLI(t, append(append([]string{"replay"}, tc.args...), pcap)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if _, err := os.Stat(x); err == nil {
		t.Errorf("%s written by a run refused as a usage error", x)
	}
}
