package metrics

import "unsafe"

// lines collects the addresses of cache lines for prefetch, in a scratch
// slice kept from batch to batch.
type lines []uintptr

// add adds the line of p.
func (l *lines) add(p unsafe.Pointer) { *l = append(*l, uintptr(p)) }

// span adds the lines of the size bytes at p.
func (l *lines) span(p unsafe.Pointer, size uintptr) {
	const line = 64
	a := uintptr(p)
	for at := a &^ (line - 1); at < a+size; at += line {
		*l = append(*l, at)
	}
}

// hot adds both lines of the hot part h of an entry (see hot).
func (l *lines) hot(h *hot) {
	l.add(unsafe.Pointer(h))
	l.add(unsafe.Pointer(&h.lastReq))
}

// fetch asks for the lines and empties l.
func (l *lines) fetch() {
	prefetch(*l)
	*l = (*l)[:0]
}
