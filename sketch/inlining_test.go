package sketch

import (
	"os/exec"
	"strings"
	"testing"
)

// TestInlining checks that the compiler inlines the small hot functions:
// the Linear Counting insert, the Count-Min estimate, the quantile bucket
// index and the hash's mixing step.
func TestInlining(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool: %v", err)
	}
	out, err := exec.Command(gotool, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go build -gcflags=-m: %v\n%s", err, out)
	}
	want := map[string]bool{
		"(*LinearCounting).Insert": false,
		"(*CountMin).Estimate":     false,
		"(*Quantile).bucket":       false,
		"(*Quantile).AddNanos":     false,
		"mix":                      false,
	}
	for _, line := range strings.Split(string(out), "\n") {
		if _, f, ok := strings.Cut(line, ": can inline "); ok {
			if _, w := want[f]; w {
				want[f] = true
			}
		}
	}
	for f, ok := range want {
		if !ok {
			t.Errorf("%s is not inlinable", f)
		}
	}
}
