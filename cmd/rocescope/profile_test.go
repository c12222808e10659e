package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfile checks that --cpu-profile writes a pprof CPU profile (a
// gzip-compressed protocol buffer whose string table names the sample
// type, cpu in nanoseconds) and that a file it cannot create fails the run
// with an error naming the flag and the file.
func TestCPUProfile(t *testing.T) {
	const demo = "../../testdata/demo.pcap"
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu.pprof")
	if code, _, stderr := runCLI(t, "replay", "--format", "jsonl", "--cpu-profile", path, demo); code != 0 {
		t.Fatalf("replay --cpu-profile: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	z, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the profile is not gzip: %v", err)
	}
	pb, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"cpu", "nanoseconds", "samples"} {
		if !bytes.Contains(pb, []byte(s)) {
			t.Errorf("the profile's strings lack %q", s)
		}
	}

	missing := filepath.Join(dir, "no", "cpu.pprof")
	code, _, stderr := runCLI(t, "replay", "--format", "jsonl", "--cpu-profile", missing, demo)
	if code != 1 || !strings.Contains(stderr, "--cpu-profile") || !strings.Contains(stderr, missing) {
		t.Errorf("--cpu-profile in a missing directory: exit %d: %s", code, stderr)
	}
}
