package metrics

import "github.com/rocescope/rocescope/internal/mapped"

// region is memory for the QP table's arrays and the windows' flow lists,
// mapped with a request for huge pages where they pay (package mapped),
// and how much of a flow list's region has been written.
type region struct {
	mem  mapped.Memory
	high int // of a flow list's region: the records written in it so far, whose pages are committed
}

// hugePage is the size of a transparent huge page.
const hugePage = mapped.HugePage

// makeArray returns an array of n zero Ts, a type without pointers, and
// the region it lives in, to be freed when nothing refers to the array any
// more.
func makeArray[T any](n int) ([]T, region) {
	a, m := mapped.Make[T](n)
	return a, region{mem: m}
}

// free returns the region's memory to the kernel; r holds none after, so
// that a second free does nothing, and has no record written.
func (r *region) free() {
	r.high = 0
	r.mem.Free()
}

// holds reports whether the array a lives in r.
func (r *region) holds(a []FlowRecord) bool { return mapped.Holds(&r.mem, a) }
