package scratch

import (
	"testing"

	"github.com/rocescope/rocescope/internal/mappedtest"
)

// TestArray grows an Array past a huge page and back: the elements below
// its length keep their values as it grows, its capacity grows by a
// quarter more than asked, and shrinking keeps the array.
func TestArray(t *testing.T) {
	a := NewArray[uint64]()
	s := a.Resize(3)
	if len(s) != 3 || cap(s) != 512 {
		t.Fatalf("Resize(3): len %d cap %d, want 3, a page (512)", len(s), cap(s))
	}
	if r := a.Resize(4); &r[0] != &s[0] {
		t.Fatal("Resize within the first page moved the array")
	}
	s[0], s[2] = 7, 9
	g := a.Resize(1 << 20) // 8 MiB
	if len(g) != 1<<20 || cap(g) != 1<<20+1<<18 || g[0] != 7 || g[2] != 9 {
		t.Fatalf("Resize(1<<20): len %d cap %d, first %d, third %d; want %d, %d, 7, 9", len(g), cap(g), g[0], g[2], 1<<20, 1<<20+1<<18)
	}
	g[1<<20-1] = 5
	if r := a.Resize(10); &r[0] != &g[0] || r[2] != 9 {
		t.Fatal("Resize to fewer elements moved the array or lost a value")
	}
	if r := a.Resize(1 << 20); r[1<<20-1] != 5 {
		t.Fatal("Resize within the capacity lost a value")
	}
}

// TestArrayAppend appends past a page: the elements are the ones appended,
// in order, and Resize(0) empties the array for the next window's.
func TestArrayAppend(t *testing.T) {
	a := NewArray[int32]()
	for i := range int32(5000) {
		a.Append(i * 3)
	}
	s := a.Slice()
	if len(s) != 5000 {
		t.Fatalf("%d elements after 5000 appends", len(s))
	}
	for i, v := range s {
		if v != int32(i)*3 {
			t.Fatalf("element %d is %d, want %d", i, v, i*3)
		}
	}
	a.Resize(0)
	a.Append(-1)
	if s := a.Slice(); len(s) != 1 || s[0] != -1 {
		t.Fatalf("after Resize(0) and one append: %v", s)
	}
}

// TestArrayCommits checks which pages Resize commits before the caller
// writes them, as mincore sees them: those of the elements asked for, at
// least 64 KiB of them past the ones committed before, never past the
// capacity; none again for a length within them.
func TestArrayCommits(t *testing.T) {
	mappedtest.Need(t)
	a := NewArray[uint64]()
	s := a.Resize(100_000)[:cap(a.Slice())] // 800 000 bytes asked, capacity 125 000 elements
	// Elements 0 to 99 999 end in page 195 of the 245 of the capacity.
	mappedtest.Committed(t, "Resize(100 000)", s, 195)
	// One more element commits 64 KiB of elements from the 100 000th:
	// to element 108 191, in page 211.
	a.Resize(100_001)
	mappedtest.Committed(t, "Resize(100 001)", s, 211)
	a.Resize(108_192)
	mappedtest.Committed(t, "Resize(108 192)", s, 211)
	// Past the commit, what is asked when it is more than 64 KiB, and
	// then no further than the capacity.
	a.Resize(120_000)
	mappedtest.Committed(t, "Resize(120 000)", s, 234)
	a.Resize(120_001)
	mappedtest.Committed(t, "Resize(120 001)", s, 244)
}
