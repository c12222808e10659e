package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// coreRoundTrip returns how long a cache line written on CPU 0 takes to be
// seen on CPU 1 and written back: two threads, pinned one to each, pass a
// counter n times each way through one word, and the total is divided by
// n. On a VM it shows where the host runs the two vCPUs at the moment: on
// the AMD EPYC KVM VM of 2026-11-30 (docs/MEASUREMENTS.md) it was
// 50-100 ns in some minutes and 328-372 ns in others (cores that share a
// last-level cache, and cores that do not), and the same two-worker
// replay of 2 M frames took 0.32-0.36 s of CPU in the first case and
// 0.42 s in the second, its reader handing every event over to a worker's
// core. It returns 0 with fewer than two CPUs.
func coreRoundTrip(n int) time.Duration {
	if runtime.NumCPU() < 2 {
		return 0
	}
	var word atomic.Int64
	var wg sync.WaitGroup
	var took time.Duration
	// Each side on a thread of its own, pinned, which ends with the
	// goroutine (LockOSThread without unlock): no other goroutine runs
	// on a thread left pinned.
	// The first tenth of the passes, which wait for the other thread to
	// start, are not timed.
	warm := int64(n / 10)
	side := func(cpu int, first int64, timeIt bool) {
		defer wg.Done()
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		_ = unix.SchedSetaffinity(0, &set) // unpinned, the figure is of wherever the threads run
		var start time.Time
		for i := first; i < 2*int64(n); i += 2 {
			if i == 2*warm {
				start = time.Now()
			}
			for word.Load() != i {
			}
			word.Store(i + 1)
		}
		if timeIt {
			took = time.Since(start)
		}
	}
	wg.Add(2)
	go side(1, 1, false)
	go side(0, 0, true)
	wg.Wait()
	return took / time.Duration(int64(n)-warm)
}
