package report

import (
	"math/rand/v2"
	"testing"

	"github.com/rocescope/rocescope/decode"
)

// TestDstIndex checks the positions dstIndex gives against a map from the
// same addresses, over windows of many destinations of every kind (the
// index grows), and that reset empties it.
func TestDstIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	addr := func() decode.Addr {
		var b [16]byte
		switch rng.IntN(4) {
		case 0:
			return decode.AddrFrom4([4]byte{10, 0, byte(rng.IntN(4)), byte(rng.IntN(256))})
		case 1:
			b[15] = byte(rng.IntN(256))
			return decode.AddrFrom16(b)
		case 2:
			b[0], b[15] = 0xfe, byte(rng.IntN(256))
			return decode.AddrFromGID(b)
		default:
			return decode.AddrFromLID(uint16(rng.IntN(256)))
		}
	}
	var x dstIndex
	var dsts []dstAgg
	for window, n := range []int{10, 3000, 0, 500} {
		x.reset()
		dsts = dsts[:0]
		want := map[decode.Addr]int32{}
		for range n {
			a := addr()
			got, slot := x.find(dsts, &a)
			w, ok := want[a]
			if !ok {
				w = -1
			}
			if got != w {
				t.Fatalf("window %d: %v at %d, want %d", window, a, got, w)
			}
			if got < 0 {
				want[a] = int32(len(dsts))
				dsts = append(dsts, dstAgg{addr: a})
				x.add(dsts, int32(len(dsts)-1), slot)
			}
		}
		for a, w := range want {
			if got, _ := x.find(dsts, &a); got != w {
				t.Fatalf("window %d: %v at %d after the window, want %d", window, a, got, w)
			}
		}
		if window == 1 && len(want) < 1000 {
			t.Fatalf("window 1 has %d destinations: too few to grow the index", len(want))
		}
	}
}
