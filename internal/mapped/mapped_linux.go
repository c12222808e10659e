package mapped

import (
	"bufio"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Make returns an array of n zero Ts, a type without pointers, and the
// mapping it lives in, for the caller to free when nothing refers to the
// array any more; the array is on the Go heap, and the Memory zero, when
// mmap refuses.
func Make[T any](n int) ([]T, Memory) {
	var zero T
	size := int(unsafe.Sizeof(zero)) * n
	if size == 0 {
		return make([]T, n), Memory{}
	}
	b, err := unix.Mmap(-1, 0, hugeRounded(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return make([]T, n), Memory{}
	}
	advice := unix.MADV_NOHUGEPAGE
	if useHuge() {
		advice = unix.MADV_HUGEPAGE
	}
	if unix.Madvise(b, advice) == nil && advice == unix.MADV_HUGEPAGE {
		Advised.Add(1)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), Memory{b: b}
}

// hugeRounded returns the length of the mapping for an array of size bytes:
// size itself below hugeFrom; else size rounded up to whole huge pages.
// The kernel places a mapping of whole huge pages on a huge page boundary
// (mmap, and mremap when it moves one), so every page of the array can be
// a huge one. A mapping of another length goes anywhere, and only the
// huge pages that happen to fit whole inside it could be; the rest fault
// 4 KiB at a time.
func hugeRounded(size int) int {
	if size < hugeFrom {
		return size
	}
	return (size + HugePage - 1) &^ (HugePage - 1)
}

// hugeFrom is the size of the smallest array whose mapping is rounded up to
// a huge page: half of one, which costs about what the first touch of its
// 256 pages of 4 KiB would. On the VM of issue 25, in runs 2.5 s apart,
// memory first touched cost 3.4-3.9 ms a MiB in pages of 4 KiB and
// 1.5-2.0 ms a MiB in huge pages.
const hugeFrom = HugePage / 2

// Free returns m's memory to the kernel; m holds none after.
func (m *Memory) Free() {
	if m.b != nil {
		_ = unix.Munmap(m.b)
		m.b = nil
	}
}

// Populate commits every page of m at once, writable (madvise
// MADV_POPULATE_WRITE, Linux 5.14 and later; a kernel without it leaves
// the pages to fault as they are touched). It is for an array whose every
// page is touched soon and read before it is written: a read of a page
// never written maps the kernel's shared zero page, which the first write
// then replaces with a page of its own, two faults for one, and the second
// makes the kernel interrupt the process's threads on other CPUs to flush
// their TLBs of the zero page.
func (m *Memory) Populate() { Commit(m.b) }

// Commit commits the pages of a, an array in a mapping Make made or on
// the Go heap, at once and writable (MADV_POPULATE_WRITE, Linux 5.14 and
// later): for a range the caller is about to write from one end to the
// other, which would otherwise fault a page at a time. On the KVM VM of
// issue 25 a page committed so costs about half a microsecond less CPU
// than one faulted in by a write. The pages a's ends share with their
// neighbours are committed too; pages already committed cost a look at
// their page table entries.
func Commit[T any](a []T) {
	if base, n := pages(a); n > 0 {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, base, n, unix.MADV_POPULATE_WRITE)
	}
}

// Commits reports whether Commit and Populate commit pages here: whether
// the kernel knows MADV_POPULATE_WRITE (Linux 5.14 and later), which it
// asks once, of a page of its own.
var Commits = sync.OnceValue(func() bool {
	b, err := unix.Mmap(-1, 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return false
	}
	defer unix.Munmap(b)
	return unix.Madvise(b, unix.MADV_POPULATE_WRITE) == nil
})

// Resident reports, page by page of 4 KiB, whether the pages a spans are
// committed (mincore), for tests of what commits them; nil when the
// kernel does not say.
func Resident[T any](a []T) []bool {
	base, n := pages(a)
	if n == 0 {
		return nil
	}
	vec := make([]byte, n/PageSize)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, base, n, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return nil
	}
	in := make([]bool, len(vec))
	for i, v := range vec {
		in[i] = v&1 != 0
	}
	return in
}

// pages returns the address and length of the whole pages of 4 KiB that a
// spans, 0 bytes for none: numbers for the kernel, as the first page may
// begin before a's allocation (on the Go heap), where no Go pointer may
// point.
func pages[T any](a []T) (base, n uintptr) {
	if len(a) == 0 {
		return 0, 0
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	end := start + uintptr(len(a))*unsafe.Sizeof(a[0])
	base = start &^ (PageSize - 1)
	return base, (end - base + PageSize - 1) &^ (PageSize - 1)
}

// resize resizes the array of Ts in m to n, in place or moved (mremap
// MREMAP_MAYMOVE: no byte is copied, the pages written stay committed),
// and returns it; false when m holds no mapping or the kernel refuses,
// with m unchanged. It refuses too when the mapping is smaller than
// hugeFrom and the array would not be: such a mapping starts anywhere, and
// grown in place it could hold a huge page only where one happens to fit
// whole, so that the rest of it would fault 4 KiB at a time; a new mapping
// (Grow) starts on a huge page boundary, for the cost of copying less than
// half a huge page.
func resize[T any](m *Memory, n int) ([]T, bool) {
	var zero T
	size := hugeRounded(int(unsafe.Sizeof(zero)) * n)
	if m.b == nil || len(m.b) < hugeFrom && size >= hugeFrom {
		return nil, false
	}
	b, err := unix.Mremap(m.b, size, unix.MREMAP_MAYMOVE)
	if err != nil {
		return nil, false
	}
	m.b = b
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), true
}

// useHuge reports whether a mapping asks for huge pages, deciding under
// HugeAuto the first time.
func useHuge() bool {
	huge.Lock()
	defer huge.Unlock()
	if !huge.decided {
		huge.use, huge.decided = decideHuge(huge.policy), true
	}
	return huge.use
}

// autoHuge is HugeAuto's decision: huge pages unless the machine is a
// virtual one whose 4 KiB pages cost less than hugeWorthFrom each on
// first touch (perPage measures that; it is asked only in a virtual
// machine).
//
// A first touch costs what the kernel spends zeroing the page and, in a
// virtual machine, what the host spends backing it again when it took the
// memory back. The hosts that report free guest memory back to the host
// (virtio-balloon free page reporting) take back whole free blocks of 8
// MiB and more, and a huge page comes from such a block: on the two AMD
// EPYC VMs rocescope was measured on (issue 25), a huge page's first touch
// cost 1.5-2.5 ms a MiB of CPU (6-10 µs a 4 KiB) in every large
// allocation. A 4 KiB page comes from the small free blocks the host still
// backs: on one VM (PVM) a first touch cost 13-15 µs all the same, the
// fault being a trip to the hypervisor, and huge pages saved half of it;
// on the other (KVM) 1.5-3 µs, and huge pages cost a 1 M-connection
// replay 17 % more CPU (3.66 -> 4.40 s, 12 M frames). On a bare machine a
// huge page costs its zeroing alone (about 0.1 ms a MiB: what one the host
// still backed cost on the KVM VM; no bare machine was measured) and maps
// 2 MiB in one TLB entry: worth it.
func autoHuge(vm bool, perPage func() time.Duration) bool {
	return !vm || perPage() >= hugeWorthFrom
}

// hugeWorthFrom is the first-touch cost of a 4 KiB page from which huge
// pages are cheaper in a virtual machine: 4 µs (1 ms a MiB), half what a
// huge page costs there per 4 KiB, and a third of the dearer of the 4 KiB
// costs measured (see autoHuge).
const hugeWorthFrom = 4 * time.Microsecond

// decideHuge reports whether mappings ask for huge pages under policy p.
func decideHuge(p HugePages) bool {
	switch p {
	case HugeOn:
		return true
	case HugeOff:
		return false
	}
	return autoHuge(inVM(), touchCost)
}

// Probe measures this machine as HugeAuto does, the first touch also on a
// bare machine, where HugeAuto does not ask, and names its processor: for
// a benchmark to name the machine it ran on.
func Probe() Machine {
	m := readCPUInfo()
	m.FirstTouch = touchCost()
	return m
}

// inVM reports whether /proc/cpuinfo says the machine is a virtual one;
// false when it cannot be read, as on a bare machine.
func inVM() bool { return readCPUInfo().VM }

// readCPUInfo reads the processor's model and the hypervisor flag from
// /proc/cpuinfo; neither when it cannot be read.
func readCPUInfo() Machine {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return Machine{}
	}
	defer f.Close()
	return cpuInfo(f)
}

// cpuInfo reads a /proc/cpuinfo text: the first processor's model name
// ("" where none is named, as on arm64) and whether the first flags line
// names the hypervisor flag (x86: CPUID says the processor is a virtual
// one).
func cpuInfo(r io.Reader) Machine {
	var m Machine
	model, flags := false, false
	sc := bufio.NewScanner(r)
	for sc.Scan() && !(model && flags) {
		name, value, ok := strings.Cut(sc.Text(), ":")
		switch name = strings.TrimSpace(name); {
		case !ok:
		case name == "model name" && !model:
			m.Model, model = strings.TrimSpace(value), true
		case name == "flags" && !flags:
			m.VM, flags = slices.Contains(strings.Fields(value), "hypervisor"), true
		}
	}
	return m
}

// touchGroups and touchPages: touchCost times the first touch of
// touchGroups groups of touchPages pages of 4 KiB, 0.1 ms of CPU where a
// page costs 1.5-2 µs and 1 ms where it costs 15.
const (
	touchGroups = 8
	touchPages  = 8
)

// touchCost returns the CPU time, user and system, of the first touch of
// a 4 KiB page in a fresh mapping that asks for no huge pages: the median
// over touchGroups groups of the mean of touchPages, so that an interrupt
// or a page the host must back again does not decide (on the KVM VM 4
// groups of 112 cost 8-17 µs a page and one 4.1 µs where the rest cost
// 1.6-3.1; the mean of all 64 pages passed hugeWorthFrom in one process
// of sixteen); hugeWorthFrom when it cannot tell.
func touchCost() time.Duration {
	const page = 4 << 10
	b, err := unix.Mmap(-1, 0, touchGroups*touchPages*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return hugeWorthFrom
	}
	defer func() { _ = unix.Munmap(b) }()
	_ = unix.Madvise(b, unix.MADV_NOHUGEPAGE)
	// The thread's own CPU clock: the goroutine must stay on it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var costs [touchGroups]time.Duration
	for g := range costs {
		var from, to unix.Timespec
		if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &from) != nil {
			return hugeWorthFrom
		}
		for i := g * touchPages * page; i < (g+1)*touchPages*page; i += page {
			b[i] = 1
		}
		if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &to) != nil {
			return hugeWorthFrom
		}
		costs[g] = time.Duration(to.Nano()-from.Nano()) / touchPages
	}
	slices.Sort(costs[:])
	return (costs[touchGroups/2-1] + costs[touchGroups/2]) / 2
}
