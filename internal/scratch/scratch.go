// Package scratch sizes the scratch slices that are refilled whole for each
// window: a flow list's sort items, a report's rates of the flows.
package scratch

// Resize returns s resliced to n elements when its capacity holds them;
// else a new slice of n elements with a quarter more capacity, so that
// lists whose length wanders from window to window stop growing soon. The
// elements' values are unspecified: unlike slices.Grow on s[:0], it copies
// nothing and clears nothing, as the caller overwrites them (each new page
// the kernel hands out is zero already).
func Resize[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}
