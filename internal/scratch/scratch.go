// Package scratch sizes the scratch slices that are refilled whole for each
// window: a flow list's sort items, a report's rates of the flows, its
// directory of flows by hash and its incast links.
package scratch

// Resize returns s resliced to n elements when its capacity holds them;
// else a new slice of n elements with a quarter more capacity, so that
// lists whose length wanders from window to window stop growing soon. The
// elements' values are unspecified, as the caller overwrites them: unlike
// slices.Grow on s[:0], which copies the whole old array into the new one
// and then clears the rest, it copies nothing, and a new array's pages are
// first touched by the caller's own writes.
func Resize[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}
