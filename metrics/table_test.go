package metrics

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/rocescope/rocescope/decode"
)

func testKey(i uint32) FlowKey {
	return FlowKey{
		Src: decode.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}),
		Dst: decode.AddrFrom4([4]byte{10, 1, 0, byte(i % 7)}),
		DQP: i,
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
			tab.remove(idx)
			delete(want, k)
		case !ok && !tab.full():
			idx := tab.insert(&k, h)
			if tab.at(idx).rec.Key != k || tab.at(idx).hash != h || tab.at(idx).peer != -1 {
				t.Fatalf("step %d: inserted entry %+v", step, *tab.at(idx))
			}
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
		tab.at(idx).lastWin = int64(10 + i)
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
		if v := tab.victim(11); v < 0 || tab.at(v).rec.Key != keys[0] {
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
		seen[tab.at(v).rec.Key]++
	}
	if seen[keys[0]] != 2 || seen[keys[1]] != 2 {
		t.Errorf("victims before window 12: %v, want keys 1 and 2 twice each", seen)
	}
}

// TestEntryLayout checks the cache-line layout handleBatch's fetches rely
// on.
func TestEntryLayout(t *testing.T) {
	var e entry
	line := func(off uintptr) uintptr { return off / 64 }
	if s := unsafe.Sizeof(e); s != entrySize {
		t.Errorf("entry is %d bytes, want %d", s, entrySize)
	}
	for _, c := range []struct {
		name string
		off  uintptr
		want uintptr
	}{
		{"hash", unsafe.Offsetof(e.hash), 0},
		{"key", unsafe.Offsetof(e.rec) + unsafe.Offsetof(e.rec.Key), 0},
		{"key end", unsafe.Offsetof(e.rec) + unsafe.Offsetof(e.rec.Key) + unsafe.Sizeof(e.rec.Key) - 1, 0},
		{"activity", unsafe.Offsetof(e.rec) + unsafe.Offsetof(e.rec.Act), 1},
		{"activity end", unsafe.Offsetof(e.rec) + unsafe.Offsetof(e.rec.Act) + unsafe.Sizeof(e.rec.Act) - 1, 1},
		{"opcode mix", unsafe.Offsetof(e.rec) + unsafe.Offsetof(e.rec.Ops), 2},
		{"packets", unsafe.Offsetof(e.rec) + unsafe.Offsetof(e.rec.C) + 8*uintptr(FlowPackets), 3},
		{"bytes", unsafe.Offsetof(e.rec) + unsafe.Offsetof(e.rec.C) + 8*uintptr(FlowBytes), 3},
		{"slot", unsafe.Offsetof(e.slot), 6},
		{"epsn", unsafe.Offsetof(e.epsn), 6},
		{"peer", unsafe.Offsetof(e.peer), 6},
		{"flags", unsafe.Offsetof(e.flags), 6},
		{"pmtu", unsafe.Offsetof(e.pmtu), 6},
		{"lastReq", unsafe.Offsetof(e.lastReq), 6},
	} {
		if got := line(c.off); got != c.want {
			t.Errorf("%s at offset %d, line %d, want line %d", c.name, c.off, got, c.want)
		}
	}
}
