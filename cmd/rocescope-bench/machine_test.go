package main

import (
	"testing"
	"time"

	"github.com/rocescope/rocescope/internal/mapped"
)

// TestMachineLine: the line names the processor, a VM, the kernel and the
// huge pages, and what --huge-pages auto does at the measured first-touch
// cost, in a VM by that cost and on a bare machine always; what could not
// be read is left out.
func TestMachineLine(t *testing.T) {
	for _, tc := range []struct {
		kernel, thp string
		m           mapped.Machine
		want        string
	}{
		{"Linux 6.18.44", "madvise", mapped.Machine{Model: "AMD EPYC", VM: true, FirstTouch: 1940 * time.Nanosecond},
			"machine: AMD EPYC (virtual); Linux 6.18.44; transparent huge pages madvise; first touch of a 4 KiB page 1.9µs of CPU: --huge-pages auto maps 4 KiB pages"},
		{"Linux 6.1.0", "always", mapped.Machine{Model: "AMD EPYC", VM: true, FirstTouch: 14 * time.Microsecond},
			"machine: AMD EPYC (virtual); Linux 6.1.0; transparent huge pages always; first touch of a 4 KiB page 14µs of CPU: --huge-pages auto maps huge pages"},
		{"Linux 6.8.0", "never", mapped.Machine{Model: "Intel(R) Xeon(R) Gold 6338", FirstTouch: 300 * time.Nanosecond},
			"machine: Intel(R) Xeon(R) Gold 6338; Linux 6.8.0; transparent huge pages never; first touch of a 4 KiB page 300ns of CPU: --huge-pages auto maps huge pages"},
		{"Darwin 24.1.0", "", mapped.Machine{},
			"machine: an unknown processor; Darwin 24.1.0"},
	} {
		if got := machineLine(tc.kernel, tc.thp, tc.m); got != tc.want {
			t.Errorf("machineLine(%q, %q, %+v) =\n%s\nwant\n%s", tc.kernel, tc.thp, tc.m, got, tc.want)
		}
	}
}

// TestThpMode reads the bracketed mode of the kernel's setting.
func TestThpMode(t *testing.T) {
	for text, want := range map[string]string{
		"always [madvise] never\n": "madvise",
		"[always] madvise never\n": "always",
		"always madvise [never]\n": "never",
		"":                         "",
		"always [madvise never":    "",
	} {
		if got := thpMode(text); got != want {
			t.Errorf("thpMode(%q) = %q, want %q", text, got, want)
		}
	}
}
