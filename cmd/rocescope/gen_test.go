package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestGenSaysHowBig: gen prints the size of the file before it writes it,
// and the file has that size to the byte, for whole and cut frames, few
// and many connections, and a long, sparse trace. (Its estimate from the
// first 20000 frames missed by up to 7 %.)
func TestGenSaysHowBig(t *testing.T) {
	dir := t.TempDir()
	for i, args := range [][]string{
		{"--packets", "20000"},
		{"--packets", "20000", "--snaplen", "128"},
		{"--packets", "20000", "--snaplen", "2000"},
		{"--packets", "20000", "--flows", "10"},
		{"--packets", "20000", "--flows", "20000"},
		{"--packets", "20000", "--duration", "24h", "--seed", "7"},
	} {
		path := filepath.Join(dir, "g"+strconv.Itoa(i)+".pcap")
		code, _, stderr := runCLI(t, append([]string{"gen", "-o", path}, args...)...)
		if code != 0 {
			t.Fatalf("gen %q: exit %d: %s", args, code, stderr)
		}
		m := regexp.MustCompile(`^rocescope gen: writing ` + args[1] + ` frames to ` + regexp.QuoteMeta(path) + `: [0-9.]+ (kB|MB) \(([0-9]+) bytes\)\n$`).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("gen %q: stderr %q has no size", args, stderr)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if m[2] != strconv.FormatInt(st.Size(), 10) {
			t.Errorf("gen %s: says %s bytes, wrote %d", strings.Join(args, " "), m[2], st.Size())
		}
	}
}
