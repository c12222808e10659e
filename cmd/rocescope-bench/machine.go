package main

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rocescope/rocescope/internal/mapped"
)

// machine names the machine the benchmark runs on, as its figures depend
// on it: the processor, whether it is a virtual one, the kernel, the
// transparent huge pages, and what the first touch of a 4 KiB page costs,
// which decides what --huge-pages auto maps (issue 25: 1.5-3 µs on one
// AMD EPYC VM, 13-15 µs on another).
func machine() string {
	kernel := ""
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return machineLine(kernel, thpMode(string(thp)), mapped.Probe())
}

// machineLine is machine's line from what it read; empty fields are
// left out.
func machineLine(kernel, thp string, m mapped.Machine) string {
	model := m.Model
	if model == "" {
		model = "an unknown processor"
	}
	parts := []string{model}
	if m.VM {
		parts[0] += " (virtual)"
	}
	if kernel != "" {
		parts = append(parts, kernel)
	}
	if thp != "" {
		parts = append(parts, "transparent huge pages "+thp)
	}
	if m.FirstTouch > 0 {
		pages := "4 KiB"
		if m.AutoHuge() {
			pages = "huge"
		}
		parts = append(parts, fmt.Sprintf("first touch of a 4 KiB page %v of CPU: --huge-pages auto maps %s pages", m.FirstTouch.Round(100), pages))
	}
	return "machine: " + strings.Join(parts, "; ")
}

// thpMode returns the mode in force in the text of
// /sys/kernel/mm/transparent_hugepage/enabled (the bracketed one), "" for
// none.
func thpMode(s string) string {
	_, rest, ok := strings.Cut(s, "[")
	mode, _, closed := strings.Cut(rest, "]")
	if !ok || !closed {
		return ""
	}
	return mode
}
