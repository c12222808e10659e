package metrics

import "slices"

// Window indices no window has, the sentinels of every stage: noWindow is
// below every window index (indices are times divided by a window length
// of at least a millisecond, so they lie within ±2^63/10^6), allWindows
// above every one, the close mark that closes them all.
const (
	noWindow   int64 = -1 << 62
	allWindows int64 = 1<<62 - 1
)

// indexed is a window of a stage: a reader's counters or a shard's window.
type indexed interface {
	comparable
	Index() int64
}

// ring holds a stage's open windows, at most two (the newest and the one
// before it), each in the slot of its index's parity, with that index,
// taken once when the window opens: get runs for every frame, and a
// Window's index is a division. The zero ring is empty.
type ring[W indexed] struct {
	w   [2]W // the zero W for an empty slot
	idx [2]int64
}

// get returns the open window w, or the zero W.
func (r *ring[W]) get(w int64) W {
	var none W
	if r.idx[w&1] == w {
		return r.w[w&1]
	}
	return none
}

// free reports whether the slot of window w is empty.
func (r *ring[W]) free(w int64) bool {
	var none W
	return r.w[w&1] == none
}

// put opens x in the slot of its parity.
func (r *ring[W]) put(x W) {
	i := x.Index()
	r.w[i&1], r.idx[i&1] = x, i
}

// remove empties the slot of x.
func (r *ring[W]) remove(x W) {
	var none W
	i := x.Index() & 1
	r.w[i], r.idx[i] = none, noWindow
}

// oldest returns the open window with the smallest index, or the zero W.
func (r *ring[W]) oldest() W {
	var none W
	a, b := r.w[0], r.w[1]
	if a == none || b != none && r.idx[1] < r.idx[0] {
		return b
	}
	return a
}

// closeMarks are the close marks of several stages (readers, or shards):
// stage i closed every window ≤ its mark.
type closeMarks []int64

func newCloseMarks(n int) closeMarks {
	m := make(closeMarks, n)
	for i := range m {
		m[i] = noWindow
	}
	return m
}

// mark records that stage i closed every window ≤ through.
func (m closeMarks) mark(i int, through int64) { m[i] = max(m[i], through) }

// through returns the index through which every stage closed every window.
func (m closeMarks) through() int64 { return slices.Min(m) }
