package mapped

import (
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
	if unix.Madvise(b, unix.MADV_HUGEPAGE) == nil {
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
