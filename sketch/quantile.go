package sketch

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// Quantile sketch limits and defaults.
const (
	// DefaultQuantileAccuracy is the default relative accuracy: 1 %.
	DefaultQuantileAccuracy = 0.01
	// DefaultQuantileMin and DefaultQuantileMax bound the default range
	// of values with relative accuracy: 1 ns to 1000 s, in ns. The
	// defaults take 40 octaves of 50 buckets: 16 KB.
	DefaultQuantileMin = 1
	DefaultQuantileMax = 1e12
	maxQuantileSub     = 1 << 11 // sub-buckets per octave
	maxQuantileBuckets = 1 << 20
	mantissaBits       = 52
	exponentBias       = 1023
)

// QuantileConfig shapes a [Quantile].
type QuantileConfig struct {
	// RelativeAccuracy is the largest relative error α of a quantile
	// within [MinValue, MaxValue], from 1/4096 to 0.5 (exclusive); 0
	// selects DefaultQuantileAccuracy.
	RelativeAccuracy float64
	// MinValue and MaxValue bound the values kept with relative accuracy;
	// the range extends to whole octaves [2^e, 2^(e+1)). They must be
	// positive, finite and normal, MinValue ≤ MaxValue; 0 selects
	// DefaultQuantileMin and DefaultQuantileMax respectively.
	MinValue, MaxValue float64
}

// Quantile estimates quantiles of a stream of values, such as latencies in
// ns, to a relative accuracy, like DDSketch (Masson et al., 2019), in a fixed
// array of buckets. Its buckets are log-linear: each octave [2^e, 2^(e+1)) is
// split into S equal sub-buckets, S = ⌈(1−α)/(2α)⌉, so that a bucket's
// upper bound is at most (1+α)/(1−α) times its lower bound, and a value's
// bucket comes from its exponent and mantissa bits by integer arithmetic.
// The quantile of rank r reported is the harmonic midpoint of the bucket
// holding the value of rank r, which is within a relative α of that value
// (α is [Quantile.RelativeAccuracy]). Values below the range count in an
// underflow bucket and are reported as Min (absolute error below MinValue);
// values above it count in an overflow bucket and are reported as Max. NaN
// is ignored. Count, Min and Max are exact.
//
// Everything serialized or compared is computed with integers, and the
// reported values with explicitly rounded IEEE operations, so results are
// the same on every architecture. Merge is exact: the merge of two sketches
// equals, byte for byte, the sketch of the concatenated streams.
//
// Make one with NewQuantile, or decode one with UnmarshalBinary into a zero value:
// the zero value is usable only as the receiver of UnmarshalBinary. Do not
// copy a Quantile after first use; use Clone.
// It is not safe for concurrent use.
type Quantile struct {
	counts      []uint64 // octaves·sub buckets, octave by octave
	sub         int      // S, sub-buckets per octave
	emin        int      // exponent of the lowest octave
	octaves     int
	lo, hi      float64 // 2^emin and 2^(emin+octaves)
	under, over uint64  // values below lo and at or above hi
	count       uint64
	min, max    float64 // +Inf and −Inf while empty
	dirty       bool    // set by every write since the last Reset; see Reset
}

// NewQuantile returns an empty sketch shaped by cfg.
func NewQuantile(cfg QuantileConfig) (*Quantile, error) {
	q := &Quantile{}
	if err := q.init(cfg); err != nil {
		return nil, err
	}
	return q, nil
}

// init allocates q for cfg.
func (q *Quantile) init(cfg QuantileConfig) error {
	if cfg.RelativeAccuracy == 0 {
		cfg.RelativeAccuracy = DefaultQuantileAccuracy
	}
	if cfg.MinValue == 0 {
		cfg.MinValue = DefaultQuantileMin
	}
	if cfg.MaxValue == 0 {
		cfg.MaxValue = DefaultQuantileMax
	}
	a := cfg.RelativeAccuracy
	if !(a >= 1.0/4096 && a < 0.5) || !(cfg.MinValue >= 0x1p-1022 && cfg.MinValue <= cfg.MaxValue && cfg.MaxValue <= math.MaxFloat64) {
		return fmt.Errorf("sketch: quantile accuracy %g over [%g, %g]: want accuracy in [1/4096, 0.5) over a finite positive normal range: %w",
			a, cfg.MinValue, cfg.MaxValue, ErrConfig)
	}
	sub := int(math.Ceil((1 - a) / (2 * a)))
	emin, emax := exponent(cfg.MinValue), exponent(cfg.MaxValue)
	if (emax-emin+1)*sub > maxQuantileBuckets {
		return fmt.Errorf("sketch: quantile accuracy %g over [%g, %g] needs %d buckets, more than %d: %w",
			a, cfg.MinValue, cfg.MaxValue, (emax-emin+1)*sub, maxQuantileBuckets, ErrConfig)
	}
	q.shape(sub, emin, emax-emin+1)
	q.counts = make([]uint64, q.octaves*q.sub)
	q.clearCounts()
	return nil
}

// exponent returns e with 2^e ≤ v < 2^(e+1) for a positive normal v.
func exponent(v float64) int { return int(math.Float64bits(v)>>mantissaBits) - exponentBias }

// shape sets the dimensions of q.
func (q *Quantile) shape(sub, emin, octaves int) {
	q.sub, q.emin, q.octaves = sub, emin, octaves
	q.lo, q.hi = math.Ldexp(1, emin), math.Ldexp(1, emin+octaves)
}

// clearCounts empties q, keeping the bucket array.
func (q *Quantile) clearCounts() {
	clear(q.counts)
	q.under, q.over, q.count = 0, 0, 0
	q.min, q.max = math.Inf(1), math.Inf(-1)
	q.dirty = false
}

// Add adds the value v. It does not allocate.
func (q *Quantile) Add(v float64) {
	if v != v {
		return
	}
	if v == 0 {
		v = 0 // −0 counts as +0, so that Min and Max do not depend on order
	}
	q.dirty = true
	q.count++
	q.min, q.max = min(q.min, v), max(q.max, v)
	switch i := q.bucket(v); {
	case i < 0:
		q.under++
	case i >= len(q.counts):
		q.over++
	default:
		q.counts[i]++
	}
}

// AddNanos adds a duration in ns.
func (q *Quantile) AddNanos(ns int64) { q.Add(float64(ns)) }

// bucket returns the bucket of v: −1 below the range, the number of buckets
// above it.
func (q *Quantile) bucket(v float64) int {
	switch {
	case v < q.lo:
		return -1
	case v >= q.hi:
		return q.octaves * q.sub
	}
	b := math.Float64bits(v)
	e := int(b>>mantissaBits) - exponentBias - q.emin
	j := int((b & (1<<mantissaBits - 1)) * uint64(q.sub) >> mantissaBits)
	return e*q.sub + j
}

// Count returns the number of values added.
func (q *Quantile) Count() uint64 {
	return q.count
}

// Min returns the smallest value added, 0 when empty.
func (q *Quantile) Min() float64 {
	if q.count == 0 {
		return 0
	}
	return q.min
}

// Max returns the largest value added, 0 when empty.
func (q *Quantile) Max() float64 {
	if q.count == 0 {
		return 0
	}
	return q.max
}

// RelativeAccuracy returns the relative accuracy the buckets give,
// 1/(2S+1), which is at most the configured one.
func (q *Quantile) RelativeAccuracy() float64 {
	return 1 / float64(2*q.sub+1)
}

// Quantile returns the estimated p-quantile, 0 ≤ p ≤ 1: the estimate of the
// value of rank ⌊p·(Count−1)⌋ (0-based) in sorted order, exact for the first
// and the last rank (Min and Max). It returns 0 when the sketch is empty and
// NaN for p outside [0, 1].
func (q *Quantile) Quantile(p float64) float64 {
	if !(p >= 0 && p <= 1) {
		return math.NaN()
	}
	if q.count == 0 {
		return 0
	}
	rank := uint64(float64(p * float64(q.count-1)))
	switch {
	case rank == 0 || rank < q.under:
		return q.min
	case rank == q.count-1:
		return q.max
	}
	seen := q.under
	for i, c := range q.counts {
		if seen += c; rank < seen {
			return min(max(q.value(i), q.min), q.max)
		}
	}
	return q.max
}

// value returns the harmonic midpoint 2ab/(a+b) of bucket i's bounds a and
// b, which is within a relative 1/(2S+1) of both.
func (q *Quantile) value(i int) float64 {
	e, j := q.emin+i/q.sub, i%q.sub
	a, b := float64(q.sub+j), float64(q.sub+j+1) // bounds in units of 2^e/S
	mid := float64(2*a*b) / (a + b)              // 2ab is exact
	return float64(math.Ldexp(mid, e)) / float64(q.sub)
}

// Merge adds o to q. Both must have the same buckets.
func (q *Quantile) Merge(o *Quantile) error {
	if q.sub != o.sub || q.emin != o.emin || q.octaves != o.octaves {
		return fmt.Errorf("sketch: merge %v: %d octaves from 2^%d of %d buckets with %d octaves from 2^%d of %d buckets: %w",
			kindQuantile, q.octaves, q.emin, q.sub, o.octaves, o.emin, o.sub, ErrIncompatible)
	}
	if !o.dirty { // o is empty: nothing to add
		return nil
	}
	q.dirty = true
	for i, c := range o.counts {
		q.counts[i] += c
	}
	q.under += o.under
	q.over += o.over
	q.count += o.count
	q.min, q.max = min(q.min, o.min), max(q.max, o.max)
	return nil
}

// Reset empties q, keeping its memory. It costs O(1) when nothing was
// added, merged or decoded into q since the last Reset (or since
// NewQuantile), and clears every bucket otherwise.
func (q *Quantile) Reset() {
	if !q.dirty {
		return
	}
	q.clearCounts()
}

// Clone returns a deep copy of q.
func (q *Quantile) Clone() *Quantile {
	c := *q
	c.counts = append([]uint64(nil), q.counts...)
	return &c
}

// MemoryBytes returns the bytes of the buckets.
func (q *Quantile) MemoryBytes() int {
	return 8 * len(q.counts)
}

// AppendBinary appends the encoding of q to b: the common header (seed 0),
// S and the number of octaves as uvarints and the lowest octave's exponent
// as a varint; the underflow and overflow counts as uvarints, the buckets as
// a word array, and, when q is not empty, Min and Max as big-endian IEEE
// 754 bits. The encoding is canonical.
func (q *Quantile) AppendBinary(b []byte) ([]byte, error) {
	b = appendHeader(b, kindQuantile, 0)
	b = binary.AppendUvarint(b, uint64(q.sub))
	b = binary.AppendUvarint(b, uint64(q.octaves))
	b = binary.AppendVarint(b, int64(q.emin))
	b = binary.AppendUvarint(b, q.under)
	b = binary.AppendUvarint(b, q.over)
	b = appendWords(b, q.counts)
	if q.count > 0 {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(q.min))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(q.max))
	}
	return b, nil
}

// MarshalBinary returns the encoding of q (see AppendBinary).
func (q *Quantile) MarshalBinary() ([]byte, error) { return q.AppendBinary(nil) }

// UnmarshalBinary sets q to the sketch data encodes, reusing q's memory when
// the buckets match. It rejects anything AppendBinary does not write,
// including a Min or Max outside the lowest or highest occupied bucket, and
// leaves q unchanged on error.
func (q *Quantile) UnmarshalBinary(data []byte) error {
	r, seed, err := readHeader(data, kindQuantile)
	if err != nil {
		return err
	}
	if seed != 0 {
		return r.errorf(ErrCorrupt, "seed %#x, want 0", seed)
	}
	var dims [2]uint64
	for i := range dims {
		if dims[i], err = r.uvarint(); err != nil {
			return err
		}
	}
	emin, n := binary.Varint(r.data[r.off:])
	switch {
	case n == 0:
		return r.errorf(ErrTruncated, "unterminated varint")
	case n < 0 || n != uvarintLen(uint64(emin<<1)^uint64(emin>>63)):
		return r.errorf(ErrCorrupt, "varint not minimally encoded")
	}
	r.off += n
	sub, octaves := dims[0], dims[1]
	if sub < 1 || sub > maxQuantileSub || octaves < 1 || octaves > maxQuantileBuckets || sub*octaves > maxQuantileBuckets ||
		emin < -1022 || emin+int64(octaves) > 1024 {
		return r.errorf(ErrCorrupt, "%d octaves from 2^%d of %d buckets", octaves, emin, sub)
	}
	var tmp Quantile
	tmp.shape(int(sub), int(emin), int(octaves))
	if tmp.under, err = r.uvarint(); err != nil {
		return err
	}
	if tmp.over, err = r.uvarint(); err != nil {
		return err
	}
	count, carry := bits.Add64(tmp.under, tmp.over, 0)
	first, last := -2, -2 // the lowest and highest occupied bucket, −1 for underflow
	if tmp.under > 0 {
		first, last = -1, -1
	}
	counts := *r
	nb := int(sub * octaves)
	err = r.readWords("buckets", nb, func(i int, v uint64) error {
		var c uint64
		count, c = bits.Add64(count, v, 0)
		carry |= c
		if first == -2 {
			first = i
		}
		last = i
		return nil
	})
	if err != nil {
		return err
	}
	if carry != 0 {
		return r.errorf(ErrCorrupt, "counts overflow")
	}
	if tmp.over > 0 {
		last = nb
		if first == -2 {
			first = nb
		}
	}
	tmp.count = count
	tmp.min, tmp.max = math.Inf(1), math.Inf(-1)
	if count > 0 {
		var mm [2]float64
		for i := range mm {
			u, err := r.u64()
			if err != nil {
				return err
			}
			if mm[i] = math.Float64frombits(u); mm[i] != mm[i] || u == 1<<63 {
				return r.errorf(ErrCorrupt, "min or max %v", mm[i])
			}
		}
		tmp.min, tmp.max = mm[0], mm[1]
		if tmp.min > tmp.max || (count == 1 && tmp.min != tmp.max) || tmp.bucket(tmp.min) != first || tmp.bucket(tmp.max) != last {
			return r.errorf(ErrCorrupt, "min %v and max %v outside the occupied buckets", tmp.min, tmp.max)
		}
	}
	if err := r.end(); err != nil {
		return err
	}
	q.counts = fillWords(&counts, q.counts, nb)
	q.sub, q.emin, q.octaves, q.lo, q.hi = tmp.sub, tmp.emin, tmp.octaves, tmp.lo, tmp.hi
	q.under, q.over, q.count, q.min, q.max = tmp.under, tmp.over, tmp.count, tmp.min, tmp.max
	q.dirty = true
	return nil
}
