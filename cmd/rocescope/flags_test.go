package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/capture/file"
	"github.com/rocescope/rocescope/internal/mapped"
	"github.com/rocescope/rocescope/internal/testframes"
)

// TestPlainMessages runs command lines that are wrong or name a wrong input
// and checks the exit status and the whole of standard error: one plain
// line naming the flag or file, no Go internals, no doubled prefix.
func TestPlainMessages(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("hello, not a capture\n", 50)), 0o644); err != nil {
		t.Fatal(err)
	}
	const demo = "../../testdata/demo.pcap"
	for _, tc := range []struct {
		args []string
		code int
		want string // standard error, whole
	}{
		{[]string{"replay", "--roce-port", "70000", demo}, 2,
			`rocescope replay: invalid argument "70000" for "--roce-port" flag: want a UDP port from 1 to 65535 (see rocescope replay --help)` + "\n"},
		{[]string{"replay", "--roce-port", "0", demo}, 2,
			`rocescope replay: invalid argument "0" for "--roce-port" flag: want a UDP port from 1 to 65535 (see rocescope replay --help)` + "\n"},
		{[]string{"replay", "--huge-pages", "yes", demo}, 2,
			`rocescope replay: invalid argument "yes" for "--huge-pages" flag: want auto, on or off (see rocescope replay --help)` + "\n"},
		{[]string{"replay", "--top", "0", demo}, 2,
			"rocescope replay: --top 0: want at least 1 (see rocescope replay --help)\n"},
		{[]string{"replay", "--workers", "2", "--table-size", "-1", demo}, 2,
			"rocescope replay: --table-size -1: want between the workers (2) and 268435456 flows (see rocescope replay --help)\n"},
		{[]string{"replay", "--workers", "2", "--table-size", "1", demo}, 2,
			"rocescope replay: --table-size 1: want between the workers (2) and 268435456 flows (see rocescope replay --help)\n"},
		{[]string{"capture", "-i", "nonexist0"}, 1, "rocescope capture: interface nonexist0 not found\n"},
		{[]string{"capture", "-i", "nonexist0", "--mode", "afpacket"}, 1, "rocescope capture: interface nonexist0 not found\n"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != tc.code || stderr != tc.want {
			t.Errorf("%q: exit %d, stderr\n%q\nwant exit %d and\n%q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	// Whether the file reader stops at a file that is not a capture or
	// counts it as damaged with --keep-going, the run fails and says which
	// file.
	code, _, stderr := runCLI(t, "replay", "--keep-going", text)
	if code != 1 || !strings.HasPrefix(stderr, "rocescope replay: ") || !strings.Contains(stderr, text) || strings.Contains(stderr, "replay: replay:") {
		t.Errorf("replay --keep-going of a text file: exit %d, stderr %q; want 1 and the file named", code, stderr)
	}
	// The state reader's own words are its business; the command line
	// adds its name once and names the file.
	code, _, stderr = runCLI(t, "merge", demo)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "rocescope merge: ") ||
		strings.HasPrefix(stderr, "rocescope merge: merge: ") || !strings.Contains(stderr, demo) {
		t.Errorf("merge of a pcap: exit %d, stderr %q; want 1 and one line naming the file", code, stderr)
	}
}

// TestMergeHelpListsItsFlags: merge --help offers the flags merge uses and
// none of the analysis flags it ignores.
func TestMergeHelpListsItsFlags(t *testing.T) {
	_, usage, _ := runCLI(t, "merge", "--help")
	// A flag is listed on a line of its own; the prose may name others.
	listed := func(flag string) bool {
		return regexp.MustCompile(`(?m)^\s+(-\w, )?` + regexp.QuoteMeta(flag) + `\b`).MatchString(usage)
	}
	for _, f := range ignoredByMerge {
		if listed("--" + f.flag) {
			t.Errorf("merge --help lists --%s, which merge ignores", f.flag)
		}
	}
	for _, f := range []string{"--top", "--elephant-rate", "--jitter-rate", "--exact", "--format", "--output", "--config", "--huge-pages", "--follow", "--hosts", "--timeout", "--poll", "--group"} {
		if !listed(f) {
			t.Errorf("merge --help does not list %s", f)
		}
	}
}

// TestExplicitZeros: --lateness 0 closes each window at its end, so that a
// frame of window 0 that comes after one 20ms past its end is late (with
// the default lateness, window/10, it is not); --elephant-rate 0 and
// --jitter-rate 0 mean nothing and are refused, naming the flag.
func TestExplicitZeros(t *testing.T) {
	pcap := filepath.Join(t.TempDir(), "late.pcap")
	f, err := os.Create(pcap)
	if err != nil {
		t.Fatal(err)
	}
	w, err := file.NewWriter(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	frame := testframes.Trace().Frames[0]
	for _, at := range []int64{500e6, 1020e6, 970e6} { // the last, of window 0, comes 20ms after its end
		if err := w.WriteFrame(testframes.Epoch+at, frame.Data, int(frame.OrigLen)); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lateness string
		late     int
	}{{"", 0}, {"0", 1}, {"0s", 1}, {"10ms", 1}, {"100ms", 0}} {
		args := []string{"replay", "--format", "jsonl", "--workers", "1", "--host", "h", pcap}
		if tc.lateness != "" {
			args = append(args, "--lateness", tc.lateness)
		}
		code, out, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		late := strings.Count(out, `"late_packets":1,`)
		if late != tc.late || strings.Count(out, `"late_packets":0,`) != 2-tc.late {
			t.Errorf("--lateness %q: %d windows with a late frame, want %d:\n%s", tc.lateness, late, tc.late, out)
		}
	}
	for _, flag := range []string{"--elephant-rate", "--jitter-rate"} {
		code, _, stderr := runCLI(t, "replay", flag, "0", pcap)
		if want := "rocescope replay: " + flag + " 0: want more than 0 (finite) (see rocescope replay --help)\n"; code != 2 || stderr != want {
			t.Errorf("%s 0: exit %d, stderr %q; want 2 and %q", flag, code, stderr, want)
		}
	}
}

// TestHugePagesFlag: --huge-pages on asks for huge pages for the engine's
// arrays and off for none (mapped.Advised counts the mappings that asked),
// and the reports are the same either way.
func TestHugePagesFlag(t *testing.T) {
	t.Cleanup(func() { mapped.SetHugePages(mapped.HugeAuto) })
	const demo = "../../testdata/demo.pcap"
	var reports [2]string
	for i, policy := range []string{"on", "off"} {
		before := mapped.Advised.Load()
		code, out, stderr := runCLI(t, "replay", "--huge-pages", policy, "--format", "jsonl", "--workers", "2", demo)
		if code != 0 {
			t.Fatalf("replay --huge-pages %s: exit %d: %s", policy, code, stderr)
		}
		reports[i] = out
		advised := mapped.Advised.Load() - before
		if (advised > 0) != (policy == "on") {
			t.Errorf("replay --huge-pages %s: %d mappings asked for huge pages", policy, advised)
		}
	}
	if reports[0] != reports[1] || reports[0] == "" {
		t.Errorf("the reports differ between --huge-pages on and off:\n%s\n%s", reports[0], reports[1])
	}
}
