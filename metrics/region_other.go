//go:build !linux

package metrics

// makeArray returns an array of n zero Ts from the Go heap.
func makeArray[T any](n int) ([]T, region) { return make([]T, n), region{} }

// free does nothing: the collector frees heap memory.
func (r region) free() {}

// holds reports whether the array a lives in r: never, off Linux.
func (r *region) holds(a []FlowRecord) bool { return false }

// resizeArray cannot resize heap memory in place.
func resizeArray[T any](r *region, n int) ([]T, bool) { return nil, false }
