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
// PREFETCHW, so prefetch_amd64.s spells out its bytes. Call it only when
// canPrefetchWrite.
func prefetchWrite(addr uintptr)

// canPrefetchWrite reports whether the processor has PREFETCHW: every
// AMD64 processor and Intel's since Broadwell say so in CPUID.
var canPrefetchWrite = cpuPrefetchWrite()

// cpuPrefetchWrite reports the PREFETCHW flag of CPUID.
func cpuPrefetchWrite() bool
