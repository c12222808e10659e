package metrics

import "sync/atomic"

// region is memory for the QP table's arrays taken from the kernel with
// mmap rather than from the Go heap, so that it can ask for transparent
// huge pages (madvise MADV_HUGEPAGE, on Linux): the first touch of each
// 2 MiB then costs one page fault rather than 512. Pages are committed as
// they are first touched (MAP_NORESERVE), so an array reserved at the
// table's capacity costs memory only for the flows it holds. Where huge
// pages are switched off (transparent_hugepage = never) the advice is
// ignored and the region works with 4 KiB pages; where mmap fails, and off
// Linux, the array comes from the Go heap. The Go collector does not scan
// a region: what lives in one must hold no pointers.
type region struct {
	b    []byte // the mapping; nil for heap memory
	high int    // of a flow list's region: the records written in it so far, whose pages are committed
}

// hugePage is the size of a transparent huge page on x86-64 and of the
// usual arm64 configuration.
const hugePage = 2 << 20

// hugeAdvised counts the regions the kernel took the huge-page advice for
// (TestRegionWholeHugePages reads it).
var hugeAdvised atomic.Int64
