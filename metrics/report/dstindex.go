package report

import (
	"math/bits"

	"github.com/rocescope/rocescope/decode"
)

// dstIndex finds a destination of the incast search (Reporter.dsts) by its
// address. addDst looks up the destination of every flow of every window,
// two hundred thousand a window at 100 k connections: a Go map spent 1.2 %
// of a replay's CPU there, hashing the 17-byte key with the runtime's
// generic hash and comparing it out of line. This is an open-addressing
// table (linear probing, load at most 1/2) of positions in dsts, which
// hold the keys; a window has few destinations, so that clearing it is
// cheap.
type dstIndex struct {
	slots []int32 // position in dsts + 1; 0 for an empty slot
	shift uint    // 64 - log2(len(slots)): the home slot is the hash's top bits
}

// minDstSlots is the size of a new index.
const minDstSlots = 64

// reset empties x.
func (x *dstIndex) reset() {
	if x.slots == nil {
		x.resize(minDstSlots)
	}
	clear(x.slots)
}

// resize makes x empty with n slots, a power of two.
func (x *dstIndex) resize(n int) {
	x.slots = make([]int32, n)
	x.shift = uint(64 - bits.TrailingZeros(uint(n)))
}

// home returns the home slot of a: the top bits of a multiplicative hash
// of its two words and kind, which every bit of them reaches.
func (x *dstIndex) home(a *decode.Addr) uint64 {
	lo, hi := a.Words()
	return ((lo ^ bits.RotateLeft64(hi, 31) ^ uint64(a.Kind())<<56) * 0x9E3779B97F4A7C15) >> x.shift
}

// find returns the position in dsts of the destination a, else -1 and the
// empty slot where it goes (add).
func (x *dstIndex) find(dsts []dstAgg, a *decode.Addr) (pos int32, slot uint64) {
	mask := uint64(len(x.slots) - 1)
	for i := x.home(a); ; i = (i + 1) & mask {
		p := x.slots[i]
		if p == 0 {
			return -1, i
		}
		if dsts[p-1].addr == *a {
			return p - 1, i
		}
	}
}

// add records that dsts[pos], whose address find did not find, is at the
// slot find returned; dsts must hold pos + 1 destinations.
func (x *dstIndex) add(dsts []dstAgg, pos int32, slot uint64) {
	if 2*len(dsts) <= len(x.slots) {
		x.slots[slot] = pos + 1
		return
	}
	// Grown past half full: every destination is placed again.
	x.resize(2 * len(x.slots))
	for p := range dsts {
		_, s := x.find(dsts[:p], &dsts[p].addr)
		x.slots[s] = int32(p) + 1
	}
}
