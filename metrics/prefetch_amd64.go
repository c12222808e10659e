package metrics

// prefetch asks the processor to bring the cache line of each address into
// the cache, without waiting for any: unlike loads, the instructions retire
// at once, so that many more misses are in flight than the reorder buffer
// would hold loads. An address need not be valid: a prefetch never faults.
//
//go:noescape
func prefetch(addrs []uintptr)

// prefetchWrite asks for the two cache lines from addr, to be written
// (PREFETCHW): a line the other core wrote or read last arrives owned, so
// that the stores to it do not wait. The Go assembler has no mnemonic for
// PREFETCHW, so prefetch_amd64.s spells out its bytes.
//
//go:noescape
func prefetchWrite(addr uintptr)
