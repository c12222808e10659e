package metrics

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/mapped"
	"github.com/rocescope/rocescope/internal/mappedtest"
)

func testKey(i uint32) FlowKey {
	return FlowKey{
		Src: decode.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}),
		Dst: decode.AddrFrom4([4]byte{10, 1, 0, byte(i % 7)}),
		DQP: i,
	}
}

// TestIndexGrowth fills a table past a huge page of index and checks each
// size the index grows to: four times larger while the new index fits a
// huge page (its pages fault 4 KiB at a time, all of them touched), then
// twice; and every key still found.
func TestIndexGrowth(t *testing.T) {
	const n = 200000
	tab := newTable(n)
	var sizes []int
	for i := range uint32(n) {
		k := testKey(i)
		tab.insert(&k, k.Hash(1))
		if len(sizes) == 0 || sizes[len(sizes)-1] != len(tab.slots) {
			sizes = append(sizes, len(tab.slots))
		}
	}
	want := []int{initialSlots, 4 * initialSlots, 16 * initialSlots, 64 * initialSlots, 128 * initialSlots}
	if !slices.Equal(sizes, want) {
		t.Fatalf("index sizes %v, want %v", sizes, want)
	}
	if s := 64 * initialSlots * int(unsafe.Sizeof(slot{})); s != hugePage {
		t.Fatalf("the last index grown four times is %d bytes, want a huge page", s)
	}
	for i := range uint32(n) {
		k := testKey(i)
		if got := tab.lookup(&k, k.Hash(1)); got != int32(i) {
			t.Fatalf("lookup(%v) = %d, want %d", k, got, i)
		}
	}
}

// TestTableAgainstMap inserts, looks up and removes random keys and checks
// every step against a Go map.
func TestTableAgainstMap(t *testing.T) {
	const capacity = 5000
	tab := newTable(capacity)
	want := make(map[FlowKey]int32)
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 200000 {
		k := testKey(uint32(rng.IntN(8000)))
		h := k.Hash(1)
		got := tab.lookup(&k, h)
		idx, ok := want[k]
		if !ok && got != -1 || ok && got != idx {
			t.Fatalf("step %d: lookup(%v) = %d, want %d (present %v)", step, k, got, idx, ok)
		}
		switch {
		case ok && rng.IntN(3) == 0:
			tab.remove(idx, h)
			delete(want, k)
		case !ok && !tab.full():
			idx := tab.insert(&k, h)
			if e, c := &tab.hot[idx], &tab.cold[idx]; e.key != k || e.peer != -1 || e.win != noWindow ||
				c.lastWin != noWindow || c.prevList != 0 || c.epAt != -1 || c.pendKey != [pendSize]uint32{} || c.pendT != [pendSize]int64{} {
				t.Fatalf("step %d: inserted entry %+v %+v", step, *e, *c)
			}
			// Dirty the entry as a flow would, so that a reuse of
			// its slab position must reset it.
			tab.cold[idx].pendT[3], tab.hot[idx].bytes = 5, 7
			want[k] = idx
		case !ok && len(want) != capacity:
			t.Fatalf("step %d: table full with %d of %d entries", step, len(want), capacity)
		}
		if tab.used != len(want) {
			t.Fatalf("step %d: used %d, want %d", step, tab.used, len(want))
		}
	}
	if 2*tab.used > len(tab.slots) {
		t.Errorf("load %d/%d above one half", tab.used, len(tab.slots))
	}
	for k, idx := range want {
		if got := tab.lookup(&k, k.Hash(1)); got != idx {
			t.Errorf("final lookup(%v) = %d, want %d", k, got, idx)
		}
	}
}

func TestTableVictim(t *testing.T) {
	tab := newTable(4)
	keys := []FlowKey{testKey(1), testKey(2), testKey(3), testKey(4)}
	for i, k := range keys {
		idx := tab.insert(&k, k.Hash(1))
		tab.cold[idx].lastWin = int64(10 + i)
	}
	if !tab.full() {
		t.Fatal("table of capacity 4 with 4 entries is not full")
	}
	// Every entry was active in window 10 or later.
	if v := tab.victim(10); v != -1 {
		t.Errorf("victim with every entry active: %d, want -1", v)
	}
	// Only the entry idle since window 10 is older than window 11, and the
	// clock hand finds it wherever it stands.
	for range 2 * len(keys) {
		if v := tab.victim(11); v < 0 || tab.hot[v].key != keys[0] {
			t.Fatalf("victim before window 11 = %d, want the entry of %v", v, keys[0])
		}
	}
	// Two idle entries: successive calls return both, in slab order.
	seen := map[FlowKey]int{}
	for range 4 {
		v := tab.victim(12)
		if v < 0 {
			t.Fatal("victim before window 12 = -1")
		}
		seen[tab.hot[v].key]++
	}
	if seen[keys[0]] != 2 || seen[keys[1]] != 2 {
		t.Errorf("victims before window 12: %v, want keys 1 and 2 twice each", seen)
	}
}

// TestEntryLayout checks the cache-line layout handle and handleBatch
// rely on: what a data packet or an ACK of a known flow reads and writes
// on the two lines of the hot part, the activity profile on a line of its
// own in the cold part.
func TestEntryLayout(t *testing.T) {
	var h hot
	var c cold
	if s := unsafe.Sizeof(h); s != hotSize {
		t.Errorf("hot part is %d bytes, want %d", s, hotSize)
	}
	if s := unsafe.Sizeof(c); s != coldSize {
		t.Errorf("cold part is %d bytes, want %d", s, coldSize)
	}
	line := func(off uintptr) uintptr { return off / 64 }
	for _, f := range []struct {
		name     string
		off, end uintptr // the field is at [off, end)
		want     uintptr
	}{
		{"key", unsafe.Offsetof(h.key), unsafe.Offsetof(h.key) + unsafe.Sizeof(h.key), 0},
		{"win", unsafe.Offsetof(h.win), unsafe.Offsetof(h.win) + 8, 0},
		{"bytes", unsafe.Offsetof(h.bytes), unsafe.Offsetof(h.bytes) + 4, 0},
		{"payload", unsafe.Offsetof(h.payload), unsafe.Offsetof(h.payload) + 4, 0},
		{"packets", unsafe.Offsetof(h.packets), unsafe.Offsetof(h.packets) + 2, 0},
		{"msgs", unsafe.Offsetof(h.msgs), unsafe.Offsetof(h.msgs) + 2, 0},
		{"acks", unsafe.Offsetof(h.acks), unsafe.Offsetof(h.acks) + 2, 0},
		{"flags", unsafe.Offsetof(h.flags), unsafe.Offsetof(h.flags) + 1, 0},
		{"acts", unsafe.Offsetof(h.acts), unsafe.Offsetof(h.acts) + 1, 0},
		{"lastReq", unsafe.Offsetof(h.lastReq), unsafe.Offsetof(h.lastReq) + 8, 1},
		{"cur", unsafe.Offsetof(h.cur), unsafe.Offsetof(h.minGap) + 2, 1},
		{"epsn", unsafe.Offsetof(h.epsn), unsafe.Offsetof(h.epsn) + 4, 1},
		{"peer", unsafe.Offsetof(h.peer), unsafe.Offsetof(h.peer) + 4, 1},
		{"pmtu", unsafe.Offsetof(h.pmtu), unsafe.Offsetof(h.pmtuMin) + 2, 1},
		{"opcode mix", unsafe.Offsetof(h.ops), unsafe.Offsetof(h.ops) + unsafe.Sizeof(h.ops), 1},
		{"hash", unsafe.Offsetof(h.hash), unsafe.Offsetof(h.hash) + 8, 1},
		{"activity", unsafe.Offsetof(c.act), unsafe.Offsetof(c.act) + unsafe.Sizeof(c.act), 0},
		{"lastWin", unsafe.Offsetof(c.lastWin), unsafe.Offsetof(c.lastWin) + 8, 1},
		{"prevList", unsafe.Offsetof(c.prevList), unsafe.Offsetof(c.prevRec) + 4, 1},
		{"rec", unsafe.Offsetof(c.rec), unsafe.Offsetof(c.rec) + 4, 1},
		{"pendKey", unsafe.Offsetof(c.pendKey), unsafe.Offsetof(c.pendKey) + unsafe.Sizeof(c.pendKey), 2},
		{"latencies", unsafe.Offsetof(c.latN), unsafe.Offsetof(c.latSum) + unsafe.Sizeof(c.latSum), 2},
	} {
		if a, b := line(f.off), line(f.end-1); a != f.want || b != f.want {
			t.Errorf("%s at [%d, %d), lines %d-%d, want line %d", f.name, f.off, f.end, a, b, f.want)
		}
	}
	// The arrays start on a 128-byte boundary, so that each hot part is
	// a pair of lines the processors fetch together.
	tab := newTable(3)
	if a := uintptr(unsafe.Pointer(&tab.hot[0])); a%128 != 0 {
		t.Errorf("hot array at %#x, not on 128 bytes", a)
	}
	if a := uintptr(unsafe.Pointer(&tab.cold[0])); a%64 != 0 {
		t.Errorf("cold array at %#x, not on a cache line", a)
	}
}

// TestConnsAgainstMap adds and removes the connections of random flows
// and checks every lookup of the connection index against a Go map of the
// first flow seen with each (source, destination, UDP source port).
func TestConnsAgainstMap(t *testing.T) {
	type conn struct {
		src, dst decode.Addr
		sport    uint16
	}
	const capacity = 6000
	tab := newTable(capacity)
	first := make(map[conn]int32)
	live := make(map[FlowKey]int32)
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 100000 {
		// Few addresses and ports, so that connections hold several flows.
		k := FlowKey{Src: decode.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(40))}),
			Dst: decode.AddrFrom4([4]byte{10, 0, 1, byte(rng.IntN(40))}), DQP: uint32(rng.IntN(4))}
		sport := uint16(49152 + rng.IntN(3))
		h := k.Hash(1)
		if idx, ok := live[k]; ok {
			if rng.IntN(2) == 0 {
				c := conn{k.Src, k.Dst, tab.hot[idx].sport}
				hs := entryHashes{flow: h, conn: pairHash(&c.src, &c.dst, c.sport)}
				if got := tab.hashesOf(idx); got != hs {
					t.Fatalf("step %d: hashesOf(%v) = %+v, want %+v", step, k, got, hs)
				}
				tab.removeConn(idx, hs.conn)
				tab.remove(idx, hs.flow)
				delete(live, k)
				if first[c] == idx {
					delete(first, c)
				}
			}
		} else if !tab.full() {
			idx := tab.insert(&k, h)
			tab.hot[idx].sport = sport
			tab.addConn(idx, newConnHashes(&k, sport).own)
			live[k] = idx
			if _, ok := first[conn{k.Src, k.Dst, sport}]; !ok {
				first[conn{k.Src, k.Dst, sport}] = idx
			}
		}
		q := conn{decode.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(40))}), decode.AddrFrom4([4]byte{10, 0, 1, byte(rng.IntN(40))}), uint16(49152 + rng.IntN(3))}
		want, ok := first[q]
		if !ok {
			want = -1
		}
		p := newConnHashes(&FlowKey{Src: q.dst, Dst: q.src}, q.sport) // of the reverse direction
		if p.own != pairHash(&q.dst, &q.src, q.sport) || p.rev != pairHash(&q.src, &q.dst, q.sport) {
			t.Fatalf("step %d: newConnHashes(%v) = %+v, want the pairHash of both directions", step, q, p)
		}
		if got := tab.connHashed(&q.src, &q.dst, q.sport, p.rev); got != want {
			t.Fatalf("step %d: conn(%v) = %d, want %d", step, q, got, want)
		}
		if tab.conns.n != len(first) {
			t.Fatalf("step %d: %d connections indexed, want %d", step, tab.conns.n, len(first))
		}
	}
	if 2*tab.conns.n > len(tab.conns.slots) {
		t.Errorf("load %d/%d above one half", tab.conns.n, len(tab.conns.slots))
	}
}

// TestTableProbe checks the entry handleBatch loads ahead of a lookup: the
// first from the home slot whose tag (the hash's top 32 bits) matches, past
// a flow with the same home slot, and none when an empty slot comes first.
func TestTableProbe(t *testing.T) {
	tab := newTable(16)
	k1, k2 := testKey(1), testKey(2)
	h1, h2 := uint64(0xabc00001)<<32, uint64(0xabc00002)<<32 // one home slot, two tags
	i1, i2 := tab.insert(&k1, h1), tab.insert(&k2, h2)
	for _, c := range []struct {
		h    uint64
		want uint32
	}{
		{h1, uint32(i1) + 1},
		{h2, uint32(i2) + 1},
		{h2 | 5, uint32(i2) + 1},      // the low bits are not in the tag
		{uint64(0xabc00003) << 32, 0}, // the same home, an unknown tag
		{uint64(0x12300001) << 32, 0}, // another home, empty
	} {
		if got := tab.probe(c.h); got != c.want {
			t.Errorf("probe(%#x) = %d, want %d", c.h, got, c.want)
		}
	}
	if got := tab.lookup(&k2, h2); got != i2 {
		t.Errorf("lookup(k2) = %d, want %d", got, i2)
	}
}

// TestLookupAt checks the lookup that compares a hinted entry first: a
// right hint, a hint at another flow's entry and no hint find the key's
// entry; a hint at the entry of a removed flow, whose key is still in the
// slab, finds nothing, and after the position is reused for the same key,
// that entry.
func TestLookupAt(t *testing.T) {
	tab := newTable(16)
	k1, k2 := testKey(1), testKey(2)
	h1, h2 := k1.Hash(1), k2.Hash(1)
	i1, i2 := tab.insert(&k1, h1), tab.insert(&k2, h2)
	for _, c := range []struct {
		hint uint32
		key  *FlowKey
		h    uint64
		want int32
	}{
		{uint32(i1) + 1, &k1, h1, i1},
		{uint32(i2) + 1, &k1, h1, i1}, // another flow's entry
		{0, &k2, h2, i2},
	} {
		if got := tab.lookupAt(c.hint, c.key, c.h); got != c.want {
			t.Errorf("lookupAt(%d, %v) = %d, want %d", c.hint, *c.key, got, c.want)
		}
	}
	tab.remove(i1, h1)
	if got := tab.lookupAt(uint32(i1)+1, &k1, h1); got != -1 {
		t.Errorf("lookupAt(the removed entry, its key) = %d, want -1", got)
	}
	if again := tab.insert(&k1, h1); again != i1 {
		t.Fatalf("insert after remove took position %d, not the freed %d", again, i1)
	}
	if got := tab.lookupAt(uint32(i1)+1, &k1, h1); got != i1 {
		t.Errorf("lookupAt(the reused entry, its key) = %d, want %d", got, i1)
	}
}

// TestTableRelease checks that a released table holds no memory, that a
// second release does nothing, and that a reset makes it a working empty
// table again: the engine releases its workers' tables at the end of a
// segment and resets them for the next one.
func TestTableRelease(t *testing.T) {
	const capacity = 3000
	tab := newTable(capacity)
	for i := range uint32(2000) {
		k := testKey(i)
		tab.insert(&k, k.Hash(1))
	}
	hot, cold, slots, conns := tab.hot, tab.cold, tab.slots, tab.conns.slots
	tab.release()
	m := tab.mem
	if mapped.Holds(&m.hot.mem, hot) || mapped.Holds(&m.cold.mem, cold) || mapped.Holds(&m.index.mem, slots) || mapped.Holds(&m.conns.mem, conns) {
		t.Error("released table still holds memory")
	}
	if tab.hot != nil || tab.cold != nil || tab.slots != nil || tab.used != 0 || tab.n != 0 {
		t.Errorf("released table: %d hot, %d cold, %d slots, used %d, n %d; want none", len(tab.hot), len(tab.cold), len(tab.slots), tab.used, tab.n)
	}
	tab.release() // nothing left to unmap
	tab.reset()
	if len(tab.hot) != capacity || len(tab.cold) != capacity {
		t.Fatalf("reset after release: %d hot, %d cold entries, want %d", len(tab.hot), len(tab.cold), capacity)
	}
	for i := range uint32(2000) {
		k := testKey(i)
		if got := tab.lookup(&k, k.Hash(1)); got != -1 {
			t.Fatalf("reset table finds %v at %d", k, got)
		}
	}
	for i := range uint32(capacity) {
		k := testKey(i)
		if idx := tab.insert(&k, k.Hash(1)); tab.lookup(&k, k.Hash(1)) != idx || tab.hot[idx].key != k {
			t.Fatalf("reset table: %v inserted at %d, not found there", k, idx)
		}
	}
	if !tab.full() {
		t.Errorf("reset table not full with %d flows", capacity)
	}
}

// TestTableCommitsSlab checks, page by page as mincore sees them, that the
// table commits its slab's hot and cold parts slabCommit entries at a time
// as inserts first reach them, and not again for entries a reset table
// uses a second time.
func TestTableCommitsSlab(t *testing.T) {
	mappedtest.Need(t)
	tab := newTable(4 * slabCommit)
	committed := func(what string, entries int) {
		t.Helper()
		mappedtest.Committed(t, what+", hot parts", tab.hot, entries*int(unsafe.Sizeof(hot{}))/mapped.PageSize-1)
		mappedtest.Committed(t, what+", cold parts", tab.cold, entries*int(unsafe.Sizeof(cold{}))/mapped.PageSize-1)
	}
	committed("new table", 0)
	insert := func(from, to uint32) {
		for i := from; i < to; i++ {
			k := testKey(i)
			tab.insert(&k, k.Hash(1))
		}
	}
	insert(0, 1)
	committed("one flow", slabCommit)
	insert(1, slabCommit)
	committed("a commit's flows", slabCommit)
	insert(slabCommit, slabCommit+1)
	committed("one more", 2*slabCommit)
	tab.reset()
	insert(0, slabCommit+10)
	committed("reset, the same again", 2*slabCommit)
}
