package metrics

import "unsafe"

// streamEvent copies *src to *dst with streaming (non-temporal) stores
// where dst is 16-byte aligned, as every event of a batch is (batchMem's
// memory is page aligned and an event is 96 bytes): they write dst's lines
// without reading them first, so that a line another core holds is not
// fetched to be overwritten. Other addresses take plain stores. Streaming
// stores are ordered with no other store: storeFence before dst is handed
// to another goroutine.
//
//go:noescape
func streamEvent(dst, src *event)

// storeFence waits for the streaming stores before it (SFENCE).
func storeFence()

// streamEvent copies 96 bytes: this fails to compile when an event is not
// that size.
var _ = [1]struct{}{}[unsafe.Sizeof(event{})-96]
