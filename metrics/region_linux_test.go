package metrics

import (
	"testing"
	"unsafe"
)

// TestRegionWholeHugePages checks that an array of a huge page or more
// lives in a mapping of whole huge pages on a huge page boundary, before
// and after it grows, so that every page of it can be a huge one; and
// that a smaller array is mapped at its own size.
func TestRegionWholeHugePages(t *testing.T) {
	const rec = int(unsafe.Sizeof(FlowRecord{}))
	aligned := func(what string, a []FlowRecord, r region, n int) {
		t.Helper()
		if len(a) != n || cap(a) != n {
			t.Fatalf("%s: array of %d/%d records, want %d", what, len(a), cap(a), n)
		}
		if p := uintptr(unsafe.Pointer(&r.b[0])); p%hugePage != 0 || len(r.b)%hugePage != 0 || len(r.b) < n*rec || len(r.b)-n*rec >= hugePage {
			t.Fatalf("%s: mapping of %d bytes at %#x for %d bytes of records; want whole huge pages on a boundary", what, len(r.b), p, n*rec)
		}
	}
	advised := hugeAdvised.Load()
	n := 3*hugePage/rec + 1 // a mapping of 4 MiB would fall short of a huge page
	a, r := makeArray[FlowRecord](n)
	if r.b == nil {
		t.Skip("mmap refused: the array is on the Go heap")
	}
	defer func() { r.free() }()
	aligned("made", a, r, n)
	if hugeAdvised.Load() != advised+1 {
		t.Errorf("hugeAdvised went from %d to %d making one region, want one more", advised, hugeAdvised.Load())
	}
	a[n-1].C[FlowBytes] = 7
	grown, ok := resizeArray[FlowRecord](&r, 5*n)
	if !ok {
		t.Fatal("mremap refused to grow the region")
	}
	aligned("grown", grown, r, 5*n)
	if grown[n-1].C[FlowBytes] != 7 {
		t.Fatalf("growing lost a record's count: %d, want 7", grown[n-1].C[FlowBytes])
	}

	small, sr := makeArray[FlowRecord](10)
	defer sr.free()
	if len(small) != 10 || len(sr.b) != 10*rec {
		t.Fatalf("a region of 10 records maps %d bytes, want %d", len(sr.b), 10*rec)
	}
}
