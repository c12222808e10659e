package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestGenSaysHowBig: gen prints its size estimate before it writes, and
// the estimate is within 10% of the file it writes, for whole and cut
// frames.
func TestGenSaysHowBig(t *testing.T) {
	dir := t.TempDir()
	for _, snap := range []string{"0", "128"} {
		path := filepath.Join(dir, "g"+snap+".pcap")
		code, _, stderr := runCLI(t, "gen", "--packets", "60000", "--snaplen", snap, "-o", path)
		if code != 0 {
			t.Fatalf("gen: exit %d: %s", code, stderr)
		}
		m := regexp.MustCompile(`^rocescope gen: writing 60000 frames to ` + regexp.QuoteMeta(path) + `: about ([0-9.]+) (kB|MB)\n$`).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("snaplen %s: stderr %q has no size estimate", snap, stderr)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		est := v * map[string]float64{"kB": 1e3, "MB": 1e6}[m[2]]
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if ratio := est / float64(st.Size()); ratio < 0.9 || ratio > 1.1 {
			t.Errorf("snaplen %s: estimate %s %s, file %d bytes (ratio %.3f)", snap, m[1], m[2], st.Size(), ratio)
		}
	}
}
