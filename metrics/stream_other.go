//go:build !amd64

package metrics

// streamEvent copies *src to *dst where no streaming store is wired up.
func streamEvent(dst, src *event) { *dst = *src }

// storeFence does nothing where streamEvent takes plain stores, which the
// hand-over of their batch orders.
func storeFence() {}
