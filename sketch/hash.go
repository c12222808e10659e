package sketch

import (
	"encoding/binary"
	"math/bits"
)

// HashVersion identifies the algorithm of [Hash]. It is written into every
// encoding, and decoders reject other versions: a sketch is only meaningful
// under the hash that filled it. Any change to Hash's output, for any input,
// requires a new version.
const HashVersion = 1

// DefaultSeed is the seed rocescope hashes flow keys with when none is
// configured. Sketches filled with hashes of different seeds do not merge.
const DefaultSeed uint64 = 0x726F636573636F70 // "rocescop" in ASCII

// Hash constants: the first 64 bits of the fractional parts of the golden
// ratio and of the square roots of 2, 3 and 5.
const (
	hc0 = 0x9E3779B97F4A7C15
	hc1 = 0x6A09E667F3BCC908
	hc2 = 0xBB67AE8584CAA73B
	hc3 = 0x3C6EF372FE94F82B
)

// Hash returns the 64-bit hash of b under seed, version [HashVersion]:
// the hash rocescope computes once per packet over the flow key and hands to
// every sketch. It does not allocate, keeps no state and is safe for
// concurrent use. It is fast rather than cryptographic: an adversary who
// knows the seed can make keys collide.
//
// The algorithm, with mix(a, b) the XOR of the high and low halves of the
// 128-bit product a·b, and w(i) the little-endian 64-bit word at byte i
// (w4 the 32-bit word), n = len(b):
//
//	s := seed ^ hc0
//	n == 0:       x, y = 0, 0
//	n <= 3:       x, y = b[0]<<16 | b[n/2]<<8 | b[n-1], 0
//	n <= 7:       x, y = w4(0), w4(n-4)
//	n <= 16:      x, y = w(0), w(n-8)
//	n > 16:       p := 0
//	              while n-p > 32: s = mix(w(p)^hc1, w(p+8)^s) ^ mix(w(p+16)^hc2, w(p+24)^s); p += 32
//	              if n-p > 16:    s = mix(w(p)^hc1, w(p+8)^s)
//	              x, y = w(n-16), w(n-8)
//	return mix(mix(x^hc1, y^s) ^ hc2, n ^ hc3)
//
// testdata/sketch/hashref.py implements the same algorithm independently;
// the tests compare the two.
func Hash(seed uint64, b []byte) uint64 {
	n := len(b)
	s := seed ^ hc0
	var x, y uint64
	switch {
	case n > 16:
		p := b
		for len(p) > 32 {
			s = mix(binary.LittleEndian.Uint64(p)^hc1, binary.LittleEndian.Uint64(p[8:])^s) ^
				mix(binary.LittleEndian.Uint64(p[16:])^hc2, binary.LittleEndian.Uint64(p[24:])^s)
			p = p[32:]
		}
		if len(p) > 16 {
			s = mix(binary.LittleEndian.Uint64(p)^hc1, binary.LittleEndian.Uint64(p[8:])^s)
		}
		x = binary.LittleEndian.Uint64(b[n-16:])
		y = binary.LittleEndian.Uint64(b[n-8:])
	case n >= 8:
		x = binary.LittleEndian.Uint64(b)
		y = binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		x = uint64(binary.LittleEndian.Uint32(b))
		y = uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		x = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	return mix(mix(x^hc1, y^s)^hc2, uint64(n)^hc3)
}

// Hash38 returns Hash(seed, b) for a 38-byte b given as words, without b
// in memory: a0, a1, b0 and b1 are the little-endian words at bytes 0, 8,
// 16 and 24, and the low 48 bits of t are bytes 32-37, little-endian. It
// serves keys of two 16-byte addresses and 6 more bytes, such as
// rocescope's flow keys, whose bytes would otherwise be copied into an
// array on every packet.
func Hash38(seed, a0, a1, b0, b1, t uint64) uint64 {
	s := seed ^ hc0
	s = mix(a0^hc1, a1^s) ^ mix(b0^hc2, b1^s)
	x := b0>>48 | b1<<16 // bytes 22-29
	y := b1>>48 | t<<16  // bytes 30-37
	return mix(mix(x^hc1, y^s)^hc2, 38^hc3)
}

// mix folds the 128-bit product of a and b into 64 bits.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// splitmix returns the SplitMix64 output for state x: a bijective,
// well-mixed function sketches use to derive their per-row constants from
// the seed.
func splitmix(x uint64) uint64 {
	x += hc0
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// multiplier returns the odd multiplier that multiply-shift hashing uses for
// the i-th derived index of seed: (h·multiplier) >> (64-k) maps a hash to k
// bits, independently for each i.
func multiplier(seed uint64, i int) uint64 {
	return splitmix(seed^splitmix(uint64(i)+1)) | 1
}
