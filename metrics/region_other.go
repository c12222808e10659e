//go:build !linux

package metrics

// makeArray returns an array of n zero Ts from the Go heap.
func makeArray[T any](n int) ([]T, region) { return make([]T, n), region{} }

// free does nothing: the collector frees heap memory.
func (r region) free() {}
