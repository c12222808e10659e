package metrics

// table is the bounded per-worker QP table: an open-addressing index
// (linear probing, power-of-two size, load ≤ 1/2) over a slab of entries.
// Entries never move, so their slab positions stay valid across index
// growth and can be kept in per-window activity lists. The index grows by
// doubling up to what the capacity needs; the slab grows with use, a chunk
// of up to 8192 entries (4 MiB) at a time, so memory follows the number of
// flows, bounded by the capacity, and growing copies nothing.
type table struct {
	slots  []slot
	mask   uint64
	chunks [][]entry // the slab; each chunk is page-aligned, so entries sit on cache lines
	shift  uint      // log2 of the chunk length
	n      int       // slab positions handed out
	free   []int32   // slab positions of evicted entries, for reuse
	max    int       // capacity in entries
	used   int       // live entries
	hand   int       // next slab position victim looks at
}

// slot is one index position: the slab position + 1 (0 = empty) and the high
// half of the flow hash, to skip most key comparisons.
type slot struct {
	idx uint32
	tag uint32
}

const initialSlots = 1 << 12

// freeEntry marks the lastWin of a slab entry that holds no flow.
const freeEntry = -1 << 63

// maxChunkShift bounds a slab chunk to 2^13 entries.
const maxChunkShift = 13

func newTable(capacity int) *table {
	shift := uint(0)
	for shift < maxChunkShift && 1<<shift < capacity {
		shift++
	}
	return &table{slots: make([]slot, initialSlots), mask: initialSlots - 1, shift: shift, max: capacity}
}

// at returns the entry at slab position i.
func (t *table) at(i int32) *entry {
	return &t.chunks[i>>t.shift][i&(1<<t.shift-1)]
}

// reset empties t, keeping its memory.
func (t *table) reset() {
	clear(t.slots)
	t.n = 0
	t.free = t.free[:0]
	t.used, t.hand = 0, 0
}

// lookup returns the slab position of key, or -1.
func (t *table) lookup(key *FlowKey, h uint64) int32 {
	tag := uint32(h >> 32)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s.idx == 0 {
			return -1
		}
		if s.tag == tag && t.at(int32(s.idx-1)).rec.Key == *key {
			return int32(s.idx - 1)
		}
	}
}

// full reports whether the table holds its capacity.
func (t *table) full() bool { return t.used >= t.max }

// insert adds key, which must be absent, and returns its slab position with
// the entry reset. The table must not be full.
func (t *table) insert(key *FlowKey, h uint64) int32 {
	if 2*(t.used+1) > len(t.slots) {
		t.grow()
	}
	var idx int32
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if t.n == len(t.chunks)<<t.shift {
			t.chunks = append(t.chunks, make([]entry, 1<<t.shift))
		}
		idx = int32(t.n)
		t.n++
	}
	t.at(idx).init(*key, h)
	t.place(uint32(idx), h)
	t.used++
	return idx
}

// place puts slab position idx into the index at the first free slot from
// h's home.
func (t *table) place(idx uint32, h uint64) {
	i := h & t.mask
	for t.slots[i].idx != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = slot{idx: idx + 1, tag: uint32(h >> 32)}
}

// grow doubles the index and re-places every live entry.
func (t *table) grow() {
	old := t.slots
	t.slots = make([]slot, 2*len(old))
	t.mask = uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.idx != 0 {
			t.place(s.idx-1, t.at(int32(s.idx-1)).hash)
		}
	}
}

// remove deletes the entry at slab position idx, with backward-shift
// deletion so no tombstones are needed.
func (t *table) remove(idx int32) {
	h := t.at(idx).hash
	i := h & t.mask
	for t.slots[i].idx != uint32(idx)+1 {
		i = (i + 1) & t.mask
	}
	for {
		t.slots[i] = slot{}
		j := i
		for {
			j = (j + 1) & t.mask
			s := t.slots[j]
			if s.idx == 0 {
				t.free = append(t.free, idx)
				t.at(idx).lastWin = freeEntry
				t.used--
				return
			}
			home := t.at(int32(s.idx-1)).hash & t.mask
			// Move s back into the hole at i unless its home lies
			// cyclically in (i, j].
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				t.slots[i] = s
				i = j
				break
			}
		}
	}
}

// victim returns the slab position of an entry last active before window
// oldest, or -1. It looks at a bounded number of entries from a clock hand
// that moves on with each call, so that an insert into a full table stays
// cheap and successive calls cover the whole slab.
func (t *table) victim(oldest int64) int32 {
	const probes = 64
	n := t.n
	for range min(probes, n) {
		i := t.hand
		t.hand++
		if t.hand >= n {
			t.hand = 0
		}
		if lw := t.at(int32(i)).lastWin; lw != freeEntry && lw < oldest {
			return int32(i)
		}
	}
	return -1
}
