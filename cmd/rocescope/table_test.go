package main

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files of the table tests")

// demoTable replays testdata/demo.pcap as a table at the given width
// ($COLUMNS) with thresholds that give elephants and jitter flows.
func demoTable(t *testing.T, width int, extra ...string) string {
	t.Helper()
	t.Setenv("COLUMNS", strconv.Itoa(width))
	args := append([]string{"replay", "--format", "table", "--host", "demo", "--workers", "1",
		"--elephant-rate", "4M", "--jitter-rate", "1M"}, extra...)
	code, out, stderr := runCLI(t, append(args, "../../testdata/demo.pcap")...)
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	return out
}

// TestTableGolden compares the table of testdata/demo.pcap at 80 and 132
// columns with its golden file (go test -run TestTableGolden -update
// rewrites them) and checks that no line is wider than the terminal.
func TestTableGolden(t *testing.T) {
	for _, width := range []int{80, 132} {
		got := demoTable(t, width)
		for i, line := range strings.Split(got, "\n") {
			if n := utf8.RuneCountInString(line); n > width {
				t.Errorf("width %d: line %d has %d columns: %q", width, i+1, n, line)
			}
		}
		golden := filepath.Join("testdata", "demo-table-"+strconv.Itoa(width)+".golden")
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), got); diff != "" {
			t.Errorf("width %d: table differs from %s (-want +got):\n%s", width, golden, diff)
		}
	}
}

// TestTableExact: with --exact the table lists every flow the window
// tracked, says so, and shows the sketches' measured error.
func TestTableExact(t *testing.T) {
	out := demoTable(t, 80, "--exact")
	windows := strings.Split(strings.TrimSpace(out), "\n\n")
	if len(windows) != 3 {
		t.Fatalf("%d windows, want 3:\n%s", len(windows), out)
	}
	for _, w := range windows {
		var tracked, rows int
		inFlows := false
		for _, line := range strings.Split(w, "\n") {
			if _, after, ok := strings.Cut(line, "tracked "); ok {
				tracked, _ = strconv.Atoi(strings.TrimSuffix(strings.Fields(after)[0], ","))
			}
			switch {
			case strings.HasPrefix(line, "  src "):
				inFlows = true
			case inFlows:
				rows++
			}
		}
		if tracked == 0 || rows != tracked || !strings.Contains(w, "all "+strconv.Itoa(tracked)+" (--exact)") || !strings.Contains(w, "sketch error:") {
			t.Errorf("tracked %d, %d flow rows; want all of them, the heading and the sketch error:\n%s", tracked, rows, w)
		}
	}
}

// TestReadmeFirstCommands runs the README's first two commands (as JSON
// lines) and checks that they show what the README says: the first, with
// nothing but the demo file, reports its three windows and, at the default
// thresholds, no elephant or jitter flow; the second, with thresholds to the
// trace's scale, shows some of each.
func TestReadmeFirstCommands(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rest := string(readme)
	for i, wantFlagged := range []bool{false, true} {
		var block string
		_, block, _ = strings.Cut(rest, "```sh\n")
		cmdline, after, _ := strings.Cut(block, "\n")
		rest = after
		args, ok := strings.CutPrefix(cmdline, "go run ./cmd/rocescope ")
		if !ok {
			t.Fatalf("the README's command %d is %q", i+1, cmdline)
		}
		fields := strings.Fields(args)
		fields[len(fields)-1] = filepath.Join("../..", fields[len(fields)-1])
		code, out, stderr := runCLI(t, append(fields[:1], append([]string{"--format", "jsonl"}, fields[1:]...)...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", cmdline, code, stderr)
		}
		var windows, elephants, jitter int
		for _, r := range reports(t, out) {
			windows++
			elephants += len(r["elephants"].([]any))
			jitter += len(r["jitter"].([]any))
		}
		if windows != 3 || (elephants > 0 && jitter > 0) != wantFlagged || (elephants+jitter > 0) != wantFlagged {
			t.Errorf("%s: %d windows, %d elephants and %d jitter flows; want 3 windows, and elephants and jitter flows: %t", cmdline, windows, elephants, jitter, wantFlagged)
		}
	}
}

// TestReadmeSampleOutput: the README's sample of the second command's
// output (on an 80-column terminal, on host vm) is what the command prints:
// its lines before "..." begin the third window's table, and its lines
// after it follow each other in that table.
func TestReadmeSampleOutput(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "Its third window begins:\n\n```\n")
	sample, _, ok2 := strings.Cut(after, "```\n")
	head, tail, ok3 := strings.Cut(sample, "  ...\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal("the README has no sample of the third window, with a line of ...")
	}
	t.Setenv("COLUMNS", "80")
	code, out, stderr := runCLI(t, "replay", "--format", "table", "--host", "vm", "--elephant-rate", "4M", "--jitter-rate", "1M", "../../testdata/demo.pcap")
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	windows := strings.Split(out, "\n\n")
	if len(windows) < 3 {
		t.Fatalf("%d windows", len(windows))
	}
	third := windows[2] + "\n"
	if !strings.HasPrefix(third, head) {
		t.Errorf("the README's sample does not begin the third window (-README +replay):\n%s", cmp.Diff(head, third[:min(len(third), len(head))]))
	}
	if !strings.Contains(third, tail) {
		t.Errorf("the README's sample after ... is not in the third window:\n%s\nwindow:\n%s", tail, third)
	}
}
