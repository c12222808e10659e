package metrics

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestCanPrefetchWrite checks the CPUID flag against the Linux kernel's
// reading of it, the "3dnowprefetch" flag of /proc/cpuinfo.
func TestCanPrefetchWrite(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("no /proc/cpuinfo to compare with: %v", err)
	}
	for line := range strings.Lines(string(info)) {
		name, flags, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != "flags" {
			continue
		}
		if want := slices.Contains(strings.Fields(flags), "3dnowprefetch"); canPrefetchWrite != want {
			t.Errorf("canPrefetchWrite = %v, /proc/cpuinfo has 3dnowprefetch: %v", canPrefetchWrite, want)
		}
		return
	}
	t.Skip("/proc/cpuinfo lists no flags")
}
