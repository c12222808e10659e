// Package mappedtest is the test kit of the tests that count, page by
// page, the memory internal/mapped commits.
package mappedtest

import (
	"testing"

	"github.com/rocescope/rocescope/internal/mapped"
)

// Need skips t where mapped.Commit commits nothing (off Linux, or a kernel
// without MADV_POPULATE_WRITE, 5.14), and maps arrays in pages of 4 KiB
// for the rest of t, whose pages the tests count.
func Need(t testing.TB) {
	t.Helper()
	if !mapped.Commits() {
		t.Skip("the kernel has no MADV_POPULATE_WRITE (Linux 5.14)")
	}
	mapped.SetHugePages(mapped.HugeOff)
	t.Cleanup(func() { mapped.SetHugePages(mapped.HugeAuto) })
}

// Committed fails t unless, of the pages of 4 KiB that a spans, exactly
// pages 0 to last are committed (none for last -1), as mincore sees them;
// it skips t where mincore says nothing.
func Committed[T any](t testing.TB, what string, a []T, last int) {
	t.Helper()
	in := mapped.Resident(a)
	if in == nil {
		t.Skip("mincore says nothing here")
	}
	for p, r := range in {
		if want := p <= last; r != want {
			t.Fatalf("%s: page %d of %d committed %v, want pages 0-%d", what, p, len(in), r, last)
		}
	}
}
