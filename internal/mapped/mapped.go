// Package mapped provides arrays of values without pointers in memory
// mapped from the kernel rather than taken from the Go heap, so that it
// can ask for transparent huge pages (madvise MADV_HUGEPAGE, on Linux):
// the first touch of each 2 MiB then costs one page fault rather than 512.
// On the virtual machines rocescope was measured on (issue 25) a page
// first touched costs about 14 µs of CPU in 4 KiB pages and 8 µs a 4 KiB
// in huge pages, as the host backs it again; memory that stays mapped is
// touched once, where a Go heap array that grows is copied into fresh
// pages, and one freed and taken again may have gone back to the kernel.
//
// Pages are committed as they are first touched (MAP_NORESERVE), so an
// array reserved at a capacity costs memory only for what is written in
// it. Where huge pages are switched off (transparent_hugepage = never) the
// advice is ignored and the mapping works with 4 KiB pages; where mmap
// fails, and off Linux, the array comes from the Go heap. The Go collector
// neither scans nor frees a mapping: what lives in one must hold no
// pointers, and its owner frees it (Memory.Free). A Memory is used by one
// goroutine at a time.
package mapped

import (
	"sync/atomic"
	"unsafe"
)

// Memory is the mapping an array lives in; the zero Memory holds none
// (an array on the Go heap).
type Memory struct {
	b []byte
}

// HugePage is the size of a transparent huge page on x86-64 and of the
// usual arm64 configuration.
const HugePage = 2 << 20

// Advised counts the mappings the kernel took the huge-page advice for
// (tests read it).
var Advised atomic.Int64

// Holds reports whether the array a lives in m.
func Holds[T any](m *Memory, a []T) bool {
	return m.b != nil && cap(a) > 0 && unsafe.Pointer(unsafe.SliceData(a)) == unsafe.Pointer(&m.b[0])
}

// Grow returns an array of n Ts, n ≥ len(a), that begins with the
// elements of a, in m: a's own mapping resized when m holds a (mremap: no
// byte copied, the pages written stay committed), else a new mapping the
// elements are copied into, m's old mapping freed.
func Grow[T any](m *Memory, a []T, n int) []T {
	if Holds(m, a) {
		if s, ok := resize[T](m, n); ok {
			return s
		}
	}
	s, nm := Make[T](n)
	copy(s, a)
	m.Free()
	*m = nm
	return s
}
