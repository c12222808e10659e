package metrics

import (
	"math/bits"
	"runtime"
	"unsafe"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/mapped"
)

// table is the bounded per-worker QP table: a slab of flow entries and an
// open-addressing index over it. An entry is in two parts at the same slab
// position of two arrays: hot, the two cache lines every frame of the flow
// reads and writes, and cold, what only a new window, requests, responses,
// NAKs and pairing touch. Entries never move, so their slab positions stay
// valid across index growth and can be kept in per-window activity lists.
// Both arrays are reserved at the capacity up front in regions that ask for
// huge pages where they pay; their pages are committed as entries are
// first used, so memory follows the number of flows, bounded by the
// capacity.
type table struct {
	index
	conns conns
	hot   []hot
	cold  []cold
	fresh int     // slab positions below it have been used: above, entries are still zero
	n     int     // slab positions handed out
	free  []int32 // slab positions of evicted entries, for reuse
	max   int     // capacity in entries
	used  int     // live entries
	hand  int     // next slab position victim looks at
	mem   *tableMem
}

// tableMem is the memory of a table's arrays, freed when the table is
// collected.
type tableMem struct{ hot, cold, index, conns region }

func (m *tableMem) free() {
	m.hot.free()
	m.cold.free()
	m.index.free()
	m.conns.free()
}

// freeEntry marks the lastWin of a slab entry that holds no flow.
const freeEntry = -1 << 63

func newTable(capacity int) *table {
	t := &table{max: capacity, mem: new(tableMem)}
	t.alloc()
	runtime.AddCleanup(t, (*tableMem).free, t.mem)
	return t
}

// alloc maps t's arrays.
func (t *table) alloc() {
	t.hot, t.mem.hot = makeArray[hot](t.max)
	t.cold, t.mem.cold = makeArray[cold](t.max)
	t.index.init(initialSlots, &t.mem.index)
	t.conns.init(initialSlots, &t.mem.conns)
}

// release returns t's memory to the kernel; t holds no flow after, and a
// reset maps its arrays anew.
func (t *table) release() {
	t.mem.free()
	*t = table{max: t.max, mem: t.mem, free: t.free[:0]}
}

// reset empties t, keeping its memory, or mapping it anew after a
// release.
func (t *table) reset() {
	if t.hot == nil {
		t.alloc()
		return
	}
	clear(t.slots)
	clear(t.conns.slots)
	t.conns.n = 0
	t.n = 0
	t.free = t.free[:0]
	t.used, t.hand = 0, 0
}

// lookup returns the slab position of key, or -1.
func (t *table) lookup(key *FlowKey, h uint64) int32 {
	tag := uint32(h >> 32)
	for i := t.home(h); ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s.idx == 0 {
			return -1
		}
		if s.tag == tag && t.hot[s.idx-1].key.Equal(key) {
			return int32(s.idx - 1)
		}
	}
}

// lookupAt is lookup for a key whose entry is likely at slab position
// hint-1 (table.probe's answer some inserts and removals ago, 0 for none):
// that entry's key is compared first, without reading the index. Slab
// positions do not move, and a removed entry is marked in its hot part, so
// a match is the key's entry.
func (t *table) lookupAt(hint uint32, key *FlowKey, h uint64) int32 {
	if hint != 0 {
		if e := &t.hot[hint-1]; e.win != freeEntry && e.key.Equal(key) {
			return int32(hint - 1)
		}
	}
	return t.lookup(key, h)
}

// probe returns the slab position + 1 of the first entry from the home
// slot of hash h whose tag is h's, or 0 when an empty slot comes first:
// the entry a lookup of h compares first, which handleChunk loads ahead.
func (x *index) probe(h uint64) uint32 {
	tag := uint32(h >> 32)
	for i := x.home(h); ; i = (i + 1) & x.mask {
		if s := x.slots[i]; s.idx == 0 || s.tag == tag {
			return s.idx
		}
	}
}

// full reports whether the table holds its capacity.
func (t *table) full() bool { return t.used >= t.max }

// insert adds key, which must be absent, and returns its slab position with
// the entry reset. The table must not be full.
func (t *table) insert(key *FlowKey, h uint64) int32 {
	if 2*(t.used+1) > len(t.slots) {
		t.grow(&t.mem.index)
	}
	var idx int32
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		idx = int32(t.n)
		t.n++
		if idx%slabCommit == 0 && int(idx) >= t.fresh {
			t.commit(int(idx))
		}
	}
	// Zeroed in place, then set: a composite literal is staged on the
	// stack and copied with loads that wait for its stores.
	e := &t.hot[idx]
	*e = hot{}
	e.key, e.win, e.peer, e.hash = *key, noWindow, -1, h
	c := &t.cold[idx]
	if int(idx) < t.fresh {
		*c = cold{}
	}
	t.fresh = max(t.fresh, int(idx)+1)
	c.lastWin, c.prevList, c.epAt = noWindow, 0, -1
	t.place(uint32(idx), h)
	t.used++
	return idx
}

// slabCommit is how many slab entries the table commits at once, as the
// first of them is first used (table.commit): 64 KiB of hot parts and 128
// KiB of cold ones. At 1 M connections, 2 M frames, stretches of 128 to
// 4096 entries saved one worker 8 to 24 ms of CPU, the more the longer;
// two workers' wall time was best at 512 (-8 ms) and worse than without
// at 4096 (+9 ms), presumably a worker held in the kernel that long while
// the reader filled its queue and the other worker ran dry.
const slabCommit = 512

// commit commits the pages of the slab entries from position from on,
// slabCommit of them, which inserts are about to use in turn: a page
// committed by one call costs less than one faulted in by a write.
func (t *table) commit(from int) {
	to := min(from+slabCommit, len(t.hot))
	mapped.Commit(t.hot[from:to])
	mapped.Commit(t.cold[from:to])
}

// entryHashes are what an entry is indexed by: its flow hash (in the
// index) and its connection hash (pairHash, in the connection index; 0
// for a flow without a UDP source port).
type entryHashes struct{ flow, conn uint64 }

// hashesOf returns the hashes of the entry at slab position idx.
func (t *table) hashesOf(idx int32) entryHashes {
	e := &t.hot[idx]
	hs := entryHashes{flow: e.hash}
	if e.sport != 0 {
		hs.conn = pairHash(&e.key.Src, &e.key.Dst, e.sport)
	}
	return hs
}

// remove deletes the entry at slab position idx, whose flow hash is h.
func (t *table) remove(idx int32, h uint64) {
	t.index.remove(uint32(idx), h)
	t.free = append(t.free, idx)
	t.hot[idx].win = freeEntry
	t.cold[idx].lastWin = freeEntry
	t.used--
}

// conns is the index of the connections of a RoCEv2 table's flows: one
// flow per (source, destination, UDP source port), the first seen with
// them, by which a new flow finds its reverse direction. It compares the
// keys in the entries' hot parts.
type conns struct {
	index
	n int // flows in the index
}

// pairHash is the hash of the connection index: of one direction, unlike
// connHash.
func pairHash(src, dst *decode.Addr, sport uint16) uint64 {
	return pairMix(mixAddr(src), mixAddr(dst), sport)
}

// pairMix is pairHash of the addresses' mixes (mixAddr).
func pairMix(src, dst uint64, sport uint16) uint64 {
	return mix64(src ^ mix64(dst+uint64(sport)))
}

// connHashes are the connection index hashes (pairHash) of a new flow's
// direction and of its reverse, which handleChunk needs three times and
// admit twice: computed once, from one mix of each address.
type connHashes struct{ own, rev uint64 }

// newConnHashes returns the connection index hashes of the flow of key
// with UDP source port sport.
func newConnHashes(key *FlowKey, sport uint16) connHashes {
	s, d := mixAddr(&key.Src), mixAddr(&key.Dst)
	return connHashes{own: pairMix(s, d, sport), rev: pairMix(d, s, sport)}
}

// connLines adds to l the slots of the connection index that admitting a
// flow with connection hashes p reads first: the home slots of its reverse
// direction's connection and of its own (addConn).
func (t *table) connLines(p *connHashes, l *lines) {
	x := &t.conns
	l.add(unsafe.Pointer(&x.slots[x.home(p.rev)]))
	l.add(unsafe.Pointer(&x.slots[x.home(p.own)]))
}

// connHashed returns the slab position of the flow the connection index
// holds for (src, dst, sport), whose connection hash is h, or -1.
func (t *table) connHashed(src, dst *decode.Addr, sport uint16, h uint64) int32 {
	tag := uint32(h >> 32)
	x := &t.conns
	for i := x.home(h); ; i = (i + 1) & x.mask {
		s := x.slots[i]
		if s.idx == 0 {
			return -1
		}
		if e := &t.hot[s.idx-1]; s.tag == tag && e.sport == sport && e.key.Src == *src && e.key.Dst == *dst {
			return int32(s.idx - 1)
		}
	}
}

// addConn adds the flow at slab position idx, whose connection hash is h,
// to the connection index unless it holds one of the flow's connection
// already.
func (t *table) addConn(idx int32, h uint64) {
	e := &t.hot[idx]
	if t.connHashed(&e.key.Src, &e.key.Dst, e.sport, h) >= 0 {
		return
	}
	x := &t.conns
	if 2*(x.n+1) > len(x.slots) {
		x.grow(&t.mem.conns)
	}
	x.place(uint32(idx), h)
	x.n++
}

// removeConn removes the flow at slab position idx, whose connection hash
// is h, from the connection index if it is the one held there.
func (t *table) removeConn(idx int32, h uint64) {
	e := &t.hot[idx]
	if e.sport == 0 {
		return
	}
	if t.connHashed(&e.key.Src, &e.key.Dst, e.sport, h) != idx {
		return
	}
	t.conns.remove(uint32(idx), h)
	t.conns.n--
}

// idleBefore reports whether slab position i holds a flow last active
// before window oldest.
func (t *table) idleBefore(i int32, oldest int64) bool {
	lw := t.cold[i].lastWin
	return lw != freeEntry && lw < oldest
}

// idle returns how many flows the table holds that were last active before
// window oldest.
func (t *table) idle(oldest int64) int {
	n := 0
	for i := range int32(t.n) {
		if t.idleBefore(i, oldest) {
			n++
		}
	}
	return n
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
		if t.idleBefore(int32(i), oldest) {
			return int32(i)
		}
	}
	return -1
}

// index is an open-addressing hash index of slab positions (linear
// probing, power-of-two size, load ≤ 1/2) in a region of its own; the
// table and the shard's connection index use it. A position's home slot
// is given by the high bits of its hash, which the slot keeps as its tag,
// so that growing the index and deleting from it read no entry: the slots
// alone say where each position belongs.
type index struct {
	slots []slot
	mask  uint64
	shift uint // 64 - log2(len(slots)): h >> shift is the home slot of hash h
}

// slot is one index position: the slab position + 1 (0 = empty) and the high
// half of the hash, to skip most key comparisons and to find the slot's
// home.
type slot struct {
	idx uint32
	tag uint32
}

const initialSlots = 1 << 12

// init makes x empty with n slots, a power of two from 2 to 2^32, in a
// new region, kept in *r, which it frees.
func (x *index) init(n int, r *region) {
	r.free()
	x.slots, *r = makeArray[slot](n)
	r.mem.Populate() // put reads a slot before it writes one
	x.mask = uint64(n - 1)
	x.shift = uint(64 - bits.Len64(x.mask))
}

// home returns the home slot of hash h.
func (x *index) home(h uint64) uint64 { return h >> x.shift }

// homeOf returns the home slot of the position a slot holds.
func (x *index) homeOf(s slot) uint64 { return x.home(uint64(s.tag) << 32) }

// place puts slab position idx into the index at the first free slot from
// h's home.
func (x *index) place(idx uint32, h uint64) {
	x.put(slot{idx: idx + 1, tag: uint32(h >> 32)})
}

// put puts s at the first free slot from its home.
func (x *index) put(s slot) {
	i := x.homeOf(s)
	for x.slots[i].idx != 0 {
		i = (i + 1) & x.mask
	}
	x.slots[i] = s
}

// grow makes the index larger, in a new region kept in *r, and re-places
// every position from its tag: four times larger while the new index fits
// a huge page, then twice. The indexes below half a huge page (package
// mapped) fault 4 KiB at a time, each page costing about 14 µs of CPU on
// the virtual machines measured (issue 25), and every one of their pages
// is touched: skipping two sizes of three touches a third of those pages.
func (x *index) grow(r *region) {
	old, oldMem := x.slots, *r
	*r = region{}
	n := 2 * len(old)
	if 4*len(old)*int(unsafe.Sizeof(slot{})) <= hugePage {
		n = 4 * len(old)
	}
	x.init(n, r)
	for _, s := range old {
		if s.idx != 0 {
			x.put(s)
		}
	}
	oldMem.free()
}

// remove deletes slab position idx, whose hash is h, with backward-shift
// deletion so no tombstones are needed.
func (x *index) remove(idx uint32, h uint64) {
	i := x.home(h)
	for x.slots[i].idx != idx+1 {
		i = (i + 1) & x.mask
	}
	for {
		x.slots[i] = slot{}
		j := i
		for {
			j = (j + 1) & x.mask
			s := x.slots[j]
			if s.idx == 0 {
				return
			}
			home := x.homeOf(s)
			// Move s back into the hole at i unless its home lies
			// cyclically in (i, j].
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				x.slots[i] = s
				i = j
				break
			}
		}
	}
}
