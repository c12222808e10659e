//go:build !linux

package mapped

// Make returns an array of n zero Ts from the Go heap.
func Make[T any](n int) ([]T, Memory) { return make([]T, n), Memory{} }

// Free does nothing: the collector frees heap memory.
func (m *Memory) Free() {}

// Populate does nothing: heap memory is committed as the runtime sees fit.
func (m *Memory) Populate() {}

// resize cannot resize heap memory in place.
func resize[T any](m *Memory, n int) ([]T, bool) { return nil, false }
