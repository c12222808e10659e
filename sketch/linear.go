package sketch

import (
	"fmt"
	"math"
	"math/bits"
)

// Linear Counting bitmap limits and default.
const (
	// DefaultLinearCountingBits is the default bitmap size: 2^22 bits
	// (512 KiB). Its standard error is 0.0375 % at 2 M distinct flows, so
	// the error stays under 0.1 % there with 99 % probability (2.7 sigma);
	// at 100 k flows the standard error is 0.0075 %.
	DefaultLinearCountingBits = 1 << 22
	minLinearCountingLog2     = 6  // one word
	maxLinearCountingLog2     = 28 // 32 MiB
)

// Estimation methods reported in [Estimate.Method].
const (
	MethodLinearCounting = "linear_counting"
	MethodHyperLogLog    = "hyperloglog"
)

// Estimate is a cardinality estimate.
type Estimate struct {
	Value float64 // estimated number of distinct hashes
	// RelErr is the relative standard error (1 sigma) the method states
	// for Value. It is 1 when a Linear Counting bitmap is full: Value is
	// then only a lower bound.
	RelErr float64
	Method string // MethodLinearCounting or MethodHyperLogLog
}

// LinearCountingConfig shapes a [LinearCounting].
type LinearCountingConfig struct {
	// Bits is the bitmap size, a power of two from 64 to 2^28; 0 selects
	// DefaultLinearCountingBits.
	Bits int
	// Seed is the seed of the hashes inserted, recorded so that sketches
	// of different seeds refuse to merge; 0 selects DefaultSeed.
	Seed uint64
}

// LinearCounting counts distinct hashes with a bitmap (Whang et al., 1990):
// each hash sets one bit, and the estimate is m·ln(m/z) for m bits of which
// z are still zero. It is exact under merge: merging ORs the bitmaps, so the
// merge of two sketches equals the sketch of the union of their streams, bit
// for bit. Its error grows with the load n/m; [Distinct] pairs it with
// HyperLogLog for loads past its range.
//
// Make one with NewLinearCounting, or decode one with UnmarshalBinary into a
// zero value: the zero value is usable only as the receiver of
// UnmarshalBinary. Do not copy a LinearCounting after first use; use Clone.
// It is not safe for concurrent use.
type LinearCounting struct {
	words []uint64 // the bitmap, bit i in words[i/64] bit i%64
	log2  uint8    // log2 of the number of bits
	dirty bool     // set by every write since the last Reset; see Reset
	seed  uint64
	ones  int // bits set, so that Zeros costs O(1)
	// touched holds the words Insert or a Merge of a sketch with few words
	// set bits in since the last Reset, while there are few (nt ≤
	// len(touched)), so that Reset clears only those and Merge ORs only
	// those: a window with a handful of flows must not touch 512 KiB.
	touched [16]uint32
	nt      int
}

// NewLinearCounting returns an empty sketch shaped by cfg.
func NewLinearCounting(cfg LinearCountingConfig) (*LinearCounting, error) {
	l := &LinearCounting{}
	if err := l.init(cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// init allocates the bitmap of l for cfg.
func (l *LinearCounting) init(cfg LinearCountingConfig) error {
	if cfg.Bits == 0 {
		cfg.Bits = DefaultLinearCountingBits
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	if cfg.Bits < 1<<minLinearCountingLog2 || cfg.Bits > 1<<maxLinearCountingLog2 || cfg.Bits&(cfg.Bits-1) != 0 {
		return fmt.Errorf("sketch: linear counting bits %d: want a power of two from %d to %d: %w",
			cfg.Bits, 1<<minLinearCountingLog2, 1<<maxLinearCountingLog2, ErrConfig)
	}
	l.log2 = uint8(bits.TrailingZeros(uint(cfg.Bits)))
	l.words = make([]uint64, cfg.Bits/64)
	l.seed, l.dirty, l.ones, l.nt = cfg.Seed, false, 0, 0
	return nil
}

// Insert adds the hash h. It does not allocate.
func (l *LinearCounting) Insert(h uint64) {
	i := h >> (64 - l.log2)
	w := &l.words[i>>6]
	if m := uint64(1) << (i & 63); *w&m == 0 {
		*w |= m
		l.ones++
		if l.nt < len(l.touched) {
			l.touched[l.nt] = uint32(i >> 6)
		}
		l.nt++
	}
	l.dirty = true
}

// recount sets the count of set bits from the bitmap, after a write that
// did not go through Insert; Reset then clears the whole bitmap.
func (l *LinearCounting) recount() {
	l.ones = 0
	for _, w := range l.words {
		l.ones += bits.OnesCount64(w)
	}
	l.nt = len(l.touched) + 1
}

// Bits returns the bitmap size.
func (l *LinearCounting) Bits() int {
	return 1 << l.log2
}

// Zeros returns the number of bits still zero.
func (l *LinearCounting) Zeros() int {
	return len(l.words)*64 - l.ones
}

// Estimate returns the Linear Counting estimate and its standard error.
func (l *LinearCounting) Estimate() Estimate {
	return linearEstimate(l.Bits(), l.Zeros())
}

// linearEstimate returns the estimate m·ln(m/z) for z zero bits of m, and its
// standard error sqrt(m(e^t − t − 1))/n with t = n/m (Whang et al.), where
// e^t = m/z.
func linearEstimate(m, z int) Estimate {
	e := Estimate{Method: MethodLinearCounting}
	if z == m {
		return e
	}
	if z == 0 {
		e.Value, e.RelErr = float64(m)*logDet(float64(m)), 1
		return e
	}
	e.Value, e.RelErr = float64(m)*logDet(float64(m)/float64(z)), linearRelErr(m, z)
	return e
}

// linearRelErr returns the relative standard error of the Linear Counting
// estimate with z zero bits of m, 0 < z < m.
func linearRelErr(m, z int) float64 {
	r := float64(m) / float64(z) // e^t
	t := logDet(r)
	v := r - t - 1
	if v < 0 { // rounding at very low load
		v = 0
	}
	return math.Sqrt(v) / float64(t*math.Sqrt(float64(m)))
}

// Merge ORs o into l. Both must have the same size and seed.
func (l *LinearCounting) Merge(o *LinearCounting) error {
	if err := l.compatible(o); err != nil {
		return err
	}
	if !o.dirty { // o is empty: nothing to OR
		return nil
	}
	l.dirty = true
	if o.nt <= len(o.touched) {
		// o's bits are in the few words it lists: OR those (shard
		// windows with a handful of flows merge at every window close).
		for _, k := range o.touched[:o.nt] {
			old := l.words[k]
			if w := old | o.words[k]; w != old {
				l.ones += bits.OnesCount64(w &^ old)
				l.words[k] = w
				if old == 0 { // a word l's list may not hold yet
					if l.nt < len(l.touched) {
						l.touched[l.nt] = k
					}
					l.nt++
				}
			}
		}
		return nil
	}
	for i, w := range o.words {
		l.words[i] |= w
	}
	l.recount()
	return nil
}

// compatible checks that o can merge into l.
func (l *LinearCounting) compatible(o *LinearCounting) error {
	switch {
	case l.seed != o.seed:
		return fmt.Errorf("sketch: merge %v: seed %#x with %#x: %w", kindLinearCounting, l.seed, o.seed, ErrIncompatible)
	case l.log2 != o.log2:
		return fmt.Errorf("sketch: merge %v: %d bits with %d: %w", kindLinearCounting, 1<<l.log2, 1<<o.log2, ErrIncompatible)
	}
	return nil
}

// Reset empties l, keeping its memory. It costs O(1) when nothing was
// inserted, merged or decoded into l since the last Reset (or since
// NewLinearCounting), and clears the whole bitmap otherwise.
func (l *LinearCounting) Reset() {
	if !l.dirty {
		return
	}
	if l.nt <= len(l.touched) {
		for _, k := range l.touched[:l.nt] {
			l.words[k] = 0
		}
	} else {
		clear(l.words)
	}
	l.ones, l.nt, l.dirty = 0, 0, false
}

// Clone returns a deep copy of l.
func (l *LinearCounting) Clone() *LinearCounting {
	c := *l
	c.words = append([]uint64(nil), l.words...)
	return &c
}

// MemoryBytes returns the size of the bitmap in bytes.
func (l *LinearCounting) MemoryBytes() int {
	return 8 * len(l.words)
}

// AppendBinary appends the encoding of l to b: the common header (see the
// package documentation), the log2 of the bitmap size (one byte) and the
// bitmap as a word array (64 bits per word, bit i in word i/64 bit i%64).
// The encoding is canonical: equal sketches encode to equal bytes.
func (l *LinearCounting) AppendBinary(b []byte) ([]byte, error) {
	b = appendHeader(b, kindLinearCounting, l.seed)
	return l.appendBody(b), nil
}

// appendBody appends what follows the header.
func (l *LinearCounting) appendBody(b []byte) []byte {
	return appendWords(append(b, l.log2), l.words)
}

// MarshalBinary returns the encoding of l (see AppendBinary).
func (l *LinearCounting) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

// UnmarshalBinary sets l to the sketch data encodes, reusing l's memory when
// the size matches. It rejects anything AppendBinary does not write, and
// leaves l unchanged on error.
func (l *LinearCounting) UnmarshalBinary(data []byte) error {
	r, seed, err := readHeader(data, kindLinearCounting)
	if err != nil {
		return err
	}
	body, log2, err := readLinearBody(r)
	if err != nil {
		return err
	}
	if err := r.end(); err != nil {
		return err
	}
	l.words = fillWords(body, l.words, 1<<(log2-6))
	l.log2, l.seed, l.dirty = log2, seed, true
	l.recount()
	return nil
}

// readLinearBody validates the body appendBody writes and returns a reader
// positioned at its word array, and the log2 of the size.
func readLinearBody(r *reader) (*reader, uint8, error) {
	log2, err := r.u8()
	if err != nil {
		return nil, 0, err
	}
	if log2 < minLinearCountingLog2 || log2 > maxLinearCountingLog2 {
		r.off--
		return nil, 0, r.errorf(ErrCorrupt, "bitmap of 2^%d bits", log2)
	}
	words := *r
	if err := r.readWords("bitmap", 1<<(log2-6), func(int, uint64) error { return nil }); err != nil {
		return nil, 0, err
	}
	return &words, log2, nil
}

// fillWords decodes the n-word array at r, which an earlier readWords
// validated, into dst, reusing dst when it has room.
func fillWords(r *reader, dst []uint64, n int) []uint64 {
	if cap(dst) < n {
		dst = make([]uint64, n)
	}
	dst = dst[:n]
	clear(dst)
	_ = r.readWords("", n, func(i int, v uint64) error {
		dst[i] = v
		return nil
	})
	return dst
}

// logDet returns ln x for a positive normal x. Unlike math.Log, whose
// implementation differs between architectures, it uses only IEEE basic
// operations, each explicitly rounded so that no fused multiply-add changes
// the result: the value is the same on every architecture. It is accurate to
// a few ulps.
func logDet(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 // ln 2 rounded to 32 significant bits
		ln2Lo = 1.90821492927058770002e-10 // ln 2 − ln2Hi
	)
	f, e := math.Frexp(x) // x = f·2^e, f in [0.5, 1)
	if f < math.Sqrt2/2 {
		f *= 2
		e--
	}
	// ln f = 2·atanh(s) = 2(s + s³/3 + s⁵/5 + …) with s = (f−1)/(f+1),
	// |s| ≤ 0.172; the terms past s²³ are below 1e-19 of the sum.
	s := (f - 1) / (f + 1)
	s2 := float64(s * s)
	p := 1.0 / 23
	for _, c := range [...]float64{1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1} {
		p = float64(p*s2) + c
	}
	k := float64(e)
	return float64(k*ln2Hi) + (float64(k*ln2Lo) + float64(float64(2*s)*p))
}
