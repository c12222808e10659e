package metrics

import (
	"slices"
	"testing"
	"unsafe"
)

// TestPrefetch asks for lines of valid, null and unmapped addresses, and
// for none: a prefetch never faults.
func TestPrefetch(t *testing.T) {
	var x [128]byte
	prefetch(nil)
	prefetch([]uintptr{uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&x[64])), 0, 1 << 46})
	var l lines
	l.add(unsafe.Pointer(&x[0]))
	l.fetch()
	if len(l) != 0 {
		t.Errorf("lines after fetch: %d, want 0", len(l))
	}
}

// spanBuf is TestLinesSpan's buffer. A global never moves: a buffer on the
// test's stack would move when the stack grows (under the race detector it
// did), leaving the lines computed before as stale integers.
var spanBuf [1024]byte

// TestLinesSpan checks the lines of byte ranges against hand-counted ones:
// a 352-byte record 0x30 into a line spans 7 lines, one at a line's start
// 6, a byte 1, the last byte of a line and the first of the next 2.
func TestLinesSpan(t *testing.T) {
	buf := spanBuf[:]
	base := int(-uintptr(unsafe.Pointer(&buf[0])) & 63) // the offset of the first line in buf
	line0 := uintptr(unsafe.Pointer(&buf[base]))
	for _, c := range []struct {
		at, size int
		want     []uintptr // lines from line0
	}{
		{0x30, 352, []uintptr{0, 0x40, 0x80, 0xc0, 0x100, 0x140, 0x180}},
		{0, 352, []uintptr{0, 0x40, 0x80, 0xc0, 0x100, 0x140}},
		{0x7f, 1, []uintptr{0x40}},
		{0x7f, 2, []uintptr{0x40, 0x80}},
	} {
		var l lines
		l.span(unsafe.Pointer(&buf[base+c.at]), uintptr(c.size))
		got := make([]uintptr, len(l))
		for i, a := range l {
			got[i] = a - line0
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("span(%#x, %d) = %#x, want %#x", c.at, c.size, got, c.want)
		}
	}
}
