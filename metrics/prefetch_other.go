//go:build !amd64

package metrics

// prefetch does nothing where no prefetch instruction is wired up: the
// lines are read when they are used.
func prefetch([]uintptr) {}
