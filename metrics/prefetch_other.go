//go:build !amd64

package metrics

// prefetch does nothing where no prefetch instruction is wired up: the
// lines are read when they are used.
func prefetch([]uintptr) {}

// canPrefetchWrite is false where no prefetch instruction is wired up.
const canPrefetchWrite = false

// prefetchWrite is never called where canPrefetchWrite is false.
func prefetchWrite(uintptr) {}
