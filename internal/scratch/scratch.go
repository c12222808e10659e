// Package scratch holds the scratch arrays that are refilled for each
// window: a QP table's lists of the flows that sent in a window, a flow
// list's sort items, a report's rates of the flows, its directory of flows
// by hash and its incast links.
package scratch

import (
	"runtime"
	"unsafe"

	"github.com/rocescope/rocescope/internal/mapped"
)

// Array is a scratch array of Ts, a type without pointers, in memory
// mapped from the kernel (package mapped): one of half a huge page or
// more is in huge pages where they pay, it grows in place or moves without
// a copy, and its pages, once written, stay committed from window to
// window. A Go heap array that grows is copied into fresh pages, zeroed
// first, and one freed and made again may have gone back to the kernel in
// between (issue 25: a page first touched costs 1.5-15 µs of CPU on the
// VMs measured). The mapping is freed when the Array is collected. An
// Array is used by one goroutine at a time.
type Array[T any] struct {
	s    []T
	mem  *mapped.Memory
	done int // elements whose pages are committed
}

// NewArray returns an empty Array.
func NewArray[T any]() *Array[T] {
	a := &Array[T]{mem: new(mapped.Memory)}
	runtime.AddCleanup(a, (*mapped.Memory).Free, a.mem)
	return a
}

// Resize returns the array with n elements; those below the length it had
// keep their values, the others are unspecified, as the caller overwrites
// them. Beyond its capacity it grows to n and a quarter more, so that
// lists whose length wanders from window to window stop growing soon, and
// to a page at least: the kernel maps whole pages, and a list that grows
// an element at a time from empty would otherwise ask it for each size.
// The pages of elements the array never had are committed before the
// caller writes them, at least commitBytes of them at a time
// (mapped.Commit): cheaper than a fault a page.
func (a *Array[T]) Resize(n int) []T {
	var zero T
	size := max(int(unsafe.Sizeof(zero)), 1)
	if n > cap(a.s) {
		// Grow keeps the pages of the elements it copies or remaps: those
		// of the length, at least.
		a.done = min(a.done, len(a.s))
		a.s = mapped.Grow(a.mem, a.s, max(n+n/4, mapped.PageSize/size))
	}
	if n > a.done {
		to := min(cap(a.s), max(n, a.done+commitBytes/size))
		mapped.Commit(a.s[a.done:to])
		a.done = to
	}
	a.s = a.s[:n]
	return a.s
}

// commitBytes is the least an Array commits at once: an Array that grows an
// element at a time asks the kernel once every 64 KiB.
const commitBytes = 64 << 10

// Append adds v after the array's elements, growing it as Resize does.
func (a *Array[T]) Append(v T) {
	n := len(a.s)
	a.Resize(n + 1)[n] = v
}

// Slice returns the array's elements: what the last Resize or Append left.
func (a *Array[T]) Slice() []T { return a.s }
