package metrics

// prefetch asks the processor to bring the cache line of each address into
// the cache, without waiting for any: unlike loads, the instructions retire
// at once, so that many more misses are in flight than the reorder buffer
// would hold loads. An address need not be valid: a prefetch never faults.
// It asks for the second level (PREFETCHT1), whose miss queue is longer
// than the first level's: with the first level (PREFETCHT0) perf put a
// third of handleChunk's own samples on two loads right after its passes,
// of a slot and of a hot part asked for, and on the KVM VM a replay with
// one worker took 0.5-1 % more CPU on the bench's 12 M-frame traces (up
// to 3 % at 100 k connections in other runs); with the passes of 48
// events that the second level allows (see handleChunk), 3.3-5.7 % more.
//
//go:noescape
func prefetch(addrs []uintptr)
