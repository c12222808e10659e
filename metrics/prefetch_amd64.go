package metrics

// prefetch asks the processor to bring the cache line of each address into
// the cache, without waiting for any: unlike loads, the instructions retire
// at once, so that many more misses are in flight than the reorder buffer
// would hold loads. An address need not be valid: a prefetch never faults.
//
//go:noescape
func prefetch(addrs []uintptr)
