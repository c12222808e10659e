//go:build !linux

package mapped

// Make returns an array of n zero Ts from the Go heap.
func Make[T any](n int) ([]T, Memory) { return make([]T, n), Memory{} }

// Free does nothing: the collector frees heap memory.
func (m *Memory) Free() {}

// resize cannot resize heap memory in place.
func resize[T any](m *Memory, n int) ([]T, bool) { return nil, false }
