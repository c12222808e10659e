package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildRocescope builds the command in this directory with the given build
// tags into a directory everyone may read, so that it can also run as an
// unprivileged user. It returns the binary's path and the build's output
// on failure.
func buildRocescope(t *testing.T, tags string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatalf("chmod %s: %v", d, err)
		}
	}
	bin := filepath.Join(dir, "rocescope")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s .: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}
