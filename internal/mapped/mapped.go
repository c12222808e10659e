// Package mapped provides arrays of values without pointers in memory
// mapped from the kernel rather than taken from the Go heap, so that it
// can ask for transparent huge pages (madvise MADV_HUGEPAGE, on Linux):
// the first touch of each 2 MiB then costs one page fault rather than 512.
// Whether it asks is a policy (SetHugePages): by default it asks except in
// a virtual machine whose 4 KiB pages are cheap to touch first (autoHuge
// says why). Memory that stays mapped is touched once, where a Go heap
// array that grows is copied into fresh pages, and one freed and taken
// again may have gone back to the kernel.
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
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// HugePages says whether the arrays ask for transparent huge pages.
type HugePages uint8

// The huge-page policies.
const (
	// HugeAuto asks for huge pages on a bare machine, and in a virtual
	// machine only where a first touch of a 4 KiB page costs the CPU as
	// much as hugeWorthFrom says, measured once, at the first mapping.
	HugeAuto HugePages = iota
	// HugeOn always asks for huge pages.
	HugeOn
	// HugeOff asks for none (madvise MADV_NOHUGEPAGE, so that also a
	// system whose transparent_hugepage is always gives 4 KiB pages).
	HugeOff
)

// String returns the policy's name: auto, on or off.
func (h HugePages) String() string {
	switch h {
	case HugeOn:
		return "on"
	case HugeOff:
		return "off"
	}
	return "auto"
}

// huge is the policy and, once a mapping needed it, the decision.
var huge struct {
	sync.Mutex
	policy  HugePages
	decided bool
	use     bool
}

// SetHugePages sets the policy of the mappings made after it. Setting the
// policy in force changes nothing: HugeAuto's decision stands.
func SetHugePages(p HugePages) {
	huge.Lock()
	if p != huge.policy {
		huge.policy, huge.decided = p, false
	}
	huge.Unlock()
}

// Machine is what HugeAuto decides from, and the processor's name.
type Machine struct {
	Model string // the processor's model name, "" when unknown
	VM    bool   // the processor says it is a virtual one (x86: the hypervisor flag)
	// FirstTouch is the CPU time the first touch of a 4 KiB page costs,
	// as HugeAuto measures it; 0 where it cannot be measured (off Linux).
	FirstTouch time.Duration
}

// AutoHuge reports whether HugeAuto asks for huge pages on m.
func (m Machine) AutoHuge() bool {
	return autoHuge(m.VM, func() time.Duration { return m.FirstTouch })
}

// Memory is the mapping an array lives in; the zero Memory holds none
// (an array on the Go heap).
type Memory struct {
	b []byte
}

// HugePage is the size of a transparent huge page on x86-64 and of the
// usual arm64 configuration.
const HugePage = 2 << 20

// PageSize is the size of a page of the smallest kind.
const PageSize = 4096

// Advised counts the mappings the kernel took the advice to use huge pages
// for (tests read it).
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
