package sketch

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestHashVectors compares Hash with the independent Python implementation
// in testdata/sketch/hashref.py, over every input length from 0 to 100 and
// four seeds.
func TestHashVectors(t *testing.T) {
	f, err := os.Open("../testdata/sketch/hash_vectors.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("line %d: %q", n+1, sc.Text())
		}
		seed, err1 := strconv.ParseUint(fields[0], 16, 64)
		in, err2 := hex.DecodeString(strings.TrimPrefix(fields[1], "-"))
		want, err3 := strconv.ParseUint(fields[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("line %d: %q", n+1, sc.Text())
		}
		if got := Hash(seed, in); got != want {
			t.Errorf("Hash(%#x, %x) = %#016x, want %#016x", seed, in, got, want)
		}
	}
	if n != 404 {
		t.Fatalf("read %d vectors, want 404", n)
	}
}

// flowKey returns a 38-byte key laid out like a RoCE flow key (two
// IPv4-mapped addresses, their kinds, a QP number), made from i so that
// consecutive i differ in few bits: the structured input hashes must spread.
func flowKey(i uint32) [38]byte {
	var k [38]byte
	k[10], k[11], k[26], k[27] = 0xff, 0xff, 0xff, 0xff
	binary.BigEndian.PutUint32(k[12:], 10<<24|i>>4)
	binary.BigEndian.PutUint32(k[28:], 10<<24|200<<16|i>>12)
	k[32], k[33] = 1, 1
	binary.BigEndian.PutUint32(k[34:], 0x100+i&0xf)
	return k
}

// TestHashAvalanche checks that flipping any one input or seed bit flips
// each output bit with probability close to 1/2, for 38-byte keys.
func TestHashAvalanche(t *testing.T) {
	const trials = 2000
	rng := rand.New(rand.NewPCG(1, 2))
	var flips [38*8 + 64][64]int
	for range trials {
		var k [38]byte
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		seed := rng.Uint64()
		h := Hash(seed, k[:])
		for bit := range 38 * 8 {
			k[bit/8] ^= 1 << (bit % 8)
			d := h ^ Hash(seed, k[:])
			k[bit/8] ^= 1 << (bit % 8)
			for o := range 64 {
				flips[bit][o] += int(d >> o & 1)
			}
		}
		for bit := range 64 {
			d := h ^ Hash(seed^1<<bit, k[:])
			for o := range 64 {
				flips[38*8+bit][o] += int(d >> o & 1)
			}
		}
	}
	// 1/2 ± 0.06 is 5.4 standard deviations at 2000 trials.
	worst := 0.0
	for in := range flips {
		for o, n := range flips[in] {
			p := float64(n) / trials
			worst = max(worst, math.Abs(p-0.5))
			if math.Abs(p-0.5) > 0.06 {
				t.Errorf("input bit %d flips output bit %d with probability %.3f", in, o, p)
			}
		}
	}
	t.Logf("largest bias %.4f", worst)
}

// TestHashSpread checks, with a chi-square test, that the high and the low
// 10 bits of the hashes of 1 M consecutive structured keys are uniform, and
// that no two of them collide.
func TestHashSpread(t *testing.T) {
	const n, cells = 1 << 20, 1 << 10
	var hi, lo [cells]int
	seen := make(map[uint64]bool, n)
	for i := range uint32(n) {
		k := flowKey(i)
		h := Hash(DefaultSeed, k[:])
		hi[h>>54]++
		lo[h&(cells-1)]++
		if seen[h] {
			t.Fatalf("key %d collides", i)
		}
		seen[h] = true
	}
	for name, c := range map[string]*[cells]int{"high": &hi, "low": &lo} {
		chi := 0.0
		for _, x := range c {
			d := float64(x) - n/cells
			chi += d * d / (n / cells)
		}
		// 1023 degrees of freedom: mean 1023, sd 45; 1250 is 5 sd.
		if chi > 1250 {
			t.Errorf("%s bits: chi-square %.0f over %d cells", name, chi, cells)
		}
		t.Logf("%s bits: chi-square %.0f (1023 degrees of freedom)", name, chi)
	}
}

// TestHashLengthsDiffer checks that inputs that are prefixes of one another
// or differ only in a byte the short paths read twice hash differently.
func TestHashLengthsDiffer(t *testing.T) {
	var b [100]byte
	seen := map[uint64]int{}
	for n := range len(b) + 1 {
		h := Hash(DefaultSeed, b[:n])
		if m, ok := seen[h]; ok {
			t.Errorf("zero inputs of %d and %d bytes collide", m, n)
		}
		seen[h] = n
	}
}

func TestMultiplierOdd(t *testing.T) {
	for i := range MaxCountMinDepth + 1 {
		if m := multiplier(DefaultSeed, i); m&1 == 0 || bits.OnesCount64(m) < 16 {
			t.Errorf("multiplier %d = %#x", i, m)
		}
	}
}

var hashSink uint64

func TestHashNoAlloc(t *testing.T) {
	k := flowKey(7)
	if n := testing.AllocsPerRun(100, func() { hashSink = Hash(DefaultSeed, k[:]) }); n != 0 {
		t.Errorf("Hash allocates %v times", n)
	}
}

func BenchmarkHash(b *testing.B) {
	for _, n := range []int{8, 16, 38, 40, 48, 64} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			// Distinct keys, prepared before the timer: writing a byte
			// of the key just before hashing it would measure a failed
			// store-to-load forwarding instead.
			keys := make([]byte, 1024*n)
			for i := range keys {
				keys[i] = byte(i * 13)
			}
			b.ReportAllocs()
			b.SetBytes(int64(n))
			var h uint64
			for i := 0; b.Loop(); i++ {
				j := i & 1023 * n
				h += Hash(DefaultSeed, keys[j:j+n])
			}
			hashSink = h
		})
	}
}

// TestHash38MatchesHash checks the word form against Hash over the bytes.
func TestHash38MatchesHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 38))
	var b [38]byte
	for i := range 10000 {
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%3 == 0 {
			clear(b[:12]) // IPv4-mapped addresses start with zeros
		}
		seed := rng.Uint64()
		le := binary.LittleEndian.Uint64
		var tail [8]byte
		copy(tail[:], b[32:])
		got := Hash38(seed, le(b[0:]), le(b[8:]), le(b[16:]), le(b[24:]), le(tail[:]))
		if want := Hash(seed, b[:]); got != want {
			t.Fatalf("Hash38 of %x = %#x, Hash = %#x", b, got, want)
		}
	}
}
