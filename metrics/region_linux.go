package metrics

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// makeArray returns an array of n zero Ts, a type without pointers, and
// the region it lives in, to be freed when nothing refers to the array any
// more.
func makeArray[T any](n int) ([]T, region) {
	var zero T
	size := int(unsafe.Sizeof(zero)) * n
	if size == 0 {
		return make([]T, n), region{}
	}
	b, err := unix.Mmap(-1, 0, hugeRounded(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return make([]T, n), region{}
	}
	if unix.Madvise(b, unix.MADV_HUGEPAGE) == nil {
		hugeAdvised.Add(1)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), region{b: b}
}

// hugeRounded returns the length of the mapping for an array of size bytes:
// size itself below a huge page, which no huge page could back; else size
// rounded up to whole huge pages. The kernel places a mapping of whole
// huge pages on a huge page boundary (mmap, and mremap when it moves one),
// so every page of the array can be a huge one. A mapping of another
// length goes anywhere, and only the huge pages that happen to fit whole
// inside it could be; the rest fault 4 KiB at a time, each fault costing
// about 17 µs of CPU on the virtual machines measured (issue 25).
func hugeRounded(size int) int {
	if size < hugePage {
		return size
	}
	return (size + hugePage - 1) &^ (hugePage - 1)
}

// free returns the region's memory to the kernel.
func (r region) free() {
	if r.b != nil {
		_ = unix.Munmap(r.b)
	}
}

// holds reports whether the array a lives in r.
func (r *region) holds(a []FlowRecord) bool {
	return r.b != nil && cap(a) > 0 && unsafe.Pointer(unsafe.SliceData(a)) == unsafe.Pointer(&r.b[0])
}

// resizeArray resizes the array of Ts in r to n, in place or moved (mremap
// MREMAP_MAYMOVE: no byte is copied), and returns it; false when the
// kernel refuses, with r unchanged.
func resizeArray[T any](r *region, n int) ([]T, bool) {
	var zero T
	b, err := unix.Mremap(r.b, hugeRounded(int(unsafe.Sizeof(zero))*n), unix.MREMAP_MAYMOVE)
	if err != nil {
		return nil, false
	}
	r.b = b
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), true
}
