//go:build !linux

package mapped

import "time"

// Make returns an array of n zero Ts from the Go heap.
func Make[T any](n int) ([]T, Memory) { return make([]T, n), Memory{} }

// Free does nothing: the collector frees heap memory.
func (m *Memory) Free() {}

// Populate does nothing: heap memory is committed as the runtime sees fit.
func (m *Memory) Populate() {}

// Commit does nothing: heap memory is committed as the runtime sees fit.
func Commit[T any](a []T) {}

// Commits reports that Commit and Populate commit nothing off Linux.
func Commits() bool { return false }

// Resident does not know off Linux.
func Resident[T any](a []T) []bool { return nil }

// resize cannot resize heap memory in place.
func resize[T any](m *Memory, n int) ([]T, bool) { return nil, false }

// Probe says nothing off Linux, where arrays come from the Go heap and
// /proc/cpuinfo does not exist.
func Probe() Machine { return Machine{} }

// autoHuge is moot off Linux: no mapping asks.
func autoHuge(bool, func() time.Duration) bool { return false }
