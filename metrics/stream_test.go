package metrics

import (
	"testing"
	"unsafe"
)

// TestStreamEvent copies an event with every byte set into an aligned slot
// of a batch and into slots 8 bytes off alignment and compares the bytes.
func TestStreamEvent(t *testing.T) {
	var src event
	b := unsafe.Slice((*byte)(unsafe.Pointer(&src)), unsafe.Sizeof(src))
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	m := newBatchMem(1)
	defer m.free()
	evs := m.batch().evs[:3]
	if a := uintptr(unsafe.Pointer(&evs[0])); a%16 != 0 {
		t.Fatalf("a batch's first event at %#x: not 16-byte aligned, so it takes plain stores", a)
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&evs[0])), 3*unsafe.Sizeof(src))
	for _, off := range []uintptr{0, unsafe.Sizeof(src), 8, 2*unsafe.Sizeof(src) - 8} {
		clear(raw)
		streamEvent((*event)(unsafe.Pointer(&raw[off])), &src)
		storeFence()
		for i, c := range raw {
			want := byte(0)
			if j := uintptr(i) - off; uintptr(i) >= off && j < uintptr(len(b)) {
				want = b[j]
			}
			if c != want {
				t.Fatalf("copy to offset %d: byte %d = %#x, want %#x", off, i, c, want)
			}
		}
	}
}
