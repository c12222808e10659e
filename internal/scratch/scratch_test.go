package scratch

import "testing"

func TestResize(t *testing.T) {
	s := make([]int, 3, 8)
	s[0] = 7
	r := Resize(s, 8)
	if len(r) != 8 || &r[0] != &s[0] || r[0] != 7 {
		t.Fatalf("Resize within capacity: len %d, moved %v, first %d; want 8, same array, 7", len(r), &r[0] != &s[0], r[0])
	}
	g := Resize(s, 100)
	if len(g) != 100 || cap(g) != 125 || &g[0] == &s[0] {
		t.Fatalf("Resize beyond capacity: len %d cap %d, moved %v; want 100, 125, a new array", len(g), cap(g), &g[0] != &s[0])
	}
	if z := Resize[int](nil, 0); len(z) != 0 {
		t.Fatalf("Resize(nil, 0) has %d elements", len(z))
	}
}
