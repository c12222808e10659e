package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
		{[]string{"replay", "--top", "0", demo}, 2,
			"rocescope replay: --top 0: want at least 1 (see rocescope replay --help)\n"},
		{[]string{"replay", "--workers", "2", "--table-size", "-1", demo}, 2,
			"rocescope replay: --table-size -1: want between --workers (2) and 268435456 flows (see rocescope replay --help)\n"},
		{[]string{"replay", "--workers", "2", "--table-size", "1", demo}, 2,
			"rocescope replay: --table-size 1: want between --workers (2) and 268435456 flows (see rocescope replay --help)\n"},
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
	for _, f := range []string{"--top", "--elephant-rate", "--jitter-rate", "--exact", "--format", "--output", "--config", "--follow", "--hosts", "--timeout", "--poll", "--group"} {
		if !listed(f) {
			t.Errorf("merge --help does not list %s", f)
		}
	}
}
