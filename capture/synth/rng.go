package synth

import "math/bits"

// rng is xoshiro256** seeded through splitmix64. The generator uses its own
// generator rather than math/rand so that a seed gives the same trace with
// every Go release.
type rng struct{ s [4]uint64 }

// newRNG returns a generator whose state is derived from seed.
func newRNG(seed uint64) rng {
	var r rng
	for i := range r.s {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		r.s[i] = z ^ z>>31
	}
	return r
}

// next returns 64 random bits.
func (r *rng) next() uint64 {
	s := &r.s
	out := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return out
}

// below returns a number in [0, n) for n > 0 (multiply-shift; the bias is
// below 2^-32 for the ranges used here).
func (r *rng) below(n uint64) uint64 {
	hi, _ := bits.Mul64(r.next(), n)
	return hi
}

// intn returns a number in [0, n) for n > 0.
func (r *rng) intn(n int) int { return int(r.below(uint64(n))) }

// between returns a number in [lo, hi].
func (r *rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

// prob is a probability as a threshold on 53 random bits, so that drawing
// compares integers only and is the same on every architecture.
type prob uint64

// probOf converts p, clamped to [0, 1], to a prob.
func probOf(p float64) prob {
	switch {
	case p <= 0:
		return 0
	case p >= 1:
		return 1 << 53
	}
	return prob(p * (1 << 53))
}

// chance reports true with probability p.
func (r *rng) chance(p prob) bool { return prob(r.next()>>11) < p }
