package sketch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/axiomhq/hyperloglog"
)

// HyperLogLog precision limits and default.
const (
	// DefaultHLLPrecision gives 2^14 registers (16 KiB), a standard error
	// of 1.04/√(2^14) = 0.81 %.
	DefaultHLLPrecision = 14
	minHLLPrecision     = 4
	maxHLLPrecision     = 18
)

// DistinctConfig shapes a [Distinct].
type DistinctConfig struct {
	// Bits is the Linear Counting bitmap size, a power of two from 64 to
	// 2^28; 0 selects DefaultLinearCountingBits (2^22 bits, 512 KiB),
	// sized for ≤ 0.1 % error up to 2 M flows.
	Bits int
	// HLLPrecision is the HyperLogLog precision p (2^p one-byte registers),
	// from 4 to 18; 0 selects DefaultHLLPrecision (14).
	HLLPrecision uint8
	// Seed is the seed of the hashes inserted; 0 selects DefaultSeed.
	Seed uint64
}

// Distinct counts distinct flows with a [LinearCounting] bitmap and a
// HyperLogLog (github.com/axiomhq/hyperloglog, dense registers) fed the same
// hashes. [Distinct.Estimate] reports the Linear Counting estimate while the
// bitmap's load keeps its standard error below HyperLogLog's, and the
// HyperLogLog estimate past that: with the defaults, Linear Counting until
// 144 bits of 2^22 are left zero, about 43 M flows (standard error 0.0375 %
// at 2 M flows, 0.81 % at 43 M), and HyperLogLog (0.81 %) beyond.
//
// Merge is exact: the bitmaps are ORed and the registers maxed, so the
// merge of two sketches equals, byte for byte, the sketch of the union of
// their streams, and so does its estimate.
//
// Make one with NewDistinct, or decode one with UnmarshalBinary into a zero value:
// the zero value is usable only as the receiver of UnmarshalBinary. Do not
// copy a Distinct after first use; use Clone.
// It is not safe for concurrent use.
type Distinct struct {
	lc  LinearCounting
	hll *hyperloglog.Sketch
	p   uint8
	// zmin is the smallest number of zero bits at which the Linear
	// Counting estimate is used.
	zmin int
}

// NewDistinct returns an empty sketch shaped by cfg.
func NewDistinct(cfg DistinctConfig) (*Distinct, error) {
	d := &Distinct{}
	if err := d.init(cfg); err != nil {
		return nil, err
	}
	return d, nil
}

// init allocates d for cfg.
func (d *Distinct) init(cfg DistinctConfig) error {
	if cfg.HLLPrecision == 0 {
		cfg.HLLPrecision = DefaultHLLPrecision
	}
	if cfg.HLLPrecision < minHLLPrecision || cfg.HLLPrecision > maxHLLPrecision {
		return fmt.Errorf("sketch: hyperloglog precision %d: want %d to %d: %w", cfg.HLLPrecision, minHLLPrecision, maxHLLPrecision, ErrConfig)
	}
	if err := d.lc.init(LinearCountingConfig{Bits: cfg.Bits, Seed: cfg.Seed}); err != nil {
		return err
	}
	d.hll, _ = hyperloglog.NewSketch(cfg.HLLPrecision, false)
	d.p = cfg.HLLPrecision
	d.zmin = switchZeros(d.lc.Bits(), cfg.HLLPrecision)
	return nil
}

// hllRelErr returns the standard error of HyperLogLog with precision p.
func hllRelErr(p uint8) float64 { return 1.04 / math.Sqrt(float64(uint64(1)<<p)) }

// switchZeros returns the smallest number of zero bits z of an m-bit Linear
// Counting bitmap at which its standard error is at most HyperLogLog's at
// precision p. The error grows as z falls, so a binary search finds it.
func switchZeros(m int, p uint8) int {
	target := hllRelErr(p)
	lo, hi := 1, m-1 // the answer is in [lo, hi+1]; at z = m the error is 0
	for lo <= hi {
		z := lo + (hi-lo)/2
		if linearRelErr(m, z) <= target {
			hi = z - 1
		} else {
			lo = z + 1
		}
	}
	return lo
}

// Insert adds the hash h to both estimators. It does not allocate.
func (d *Distinct) Insert(h uint64) {
	d.lc.Insert(h)
	d.hll.InsertHash(h)
}

// Estimate returns the Linear Counting estimate while at least a load-
// dependent number of bitmap bits are zero (see [Distinct]), else the
// HyperLogLog estimate, saying which.
func (d *Distinct) Estimate() Estimate {
	if z := d.lc.Zeros(); z >= d.zmin {
		return linearEstimate(d.lc.Bits(), z)
	}
	return Estimate{Value: float64(d.hll.Estimate()), RelErr: hllRelErr(d.p), Method: MethodHyperLogLog}
}

// LinearCounting returns the estimate of the Linear Counting bitmap alone.
func (d *Distinct) LinearCounting() Estimate {
	return d.lc.Estimate()
}

// HyperLogLog returns the estimate of the HyperLogLog alone.
func (d *Distinct) HyperLogLog() Estimate {
	return Estimate{Value: float64(d.hll.Estimate()), RelErr: hllRelErr(d.p), Method: MethodHyperLogLog}
}

// Merge adds o to d. Both must have the same bitmap size, precision and
// seed.
func (d *Distinct) Merge(o *Distinct) error {
	if d.p != o.p {
		return fmt.Errorf("sketch: merge %v: hyperloglog precision %d with %d: %w", kindDistinct, d.p, o.p, ErrIncompatible)
	}
	if !o.lc.dirty { // o is empty
		return d.lc.compatible(&o.lc)
	}
	if err := d.lc.Merge(&o.lc); err != nil {
		return err
	}
	return d.hll.Merge(o.hll) // same precision, both dense: cannot fail
}

// Reset empties d, keeping its memory. It costs O(1) when nothing was
// inserted, merged or decoded into d since the last Reset (or since
// NewDistinct): every write to d marks its bitmap dirty, so a clean
// bitmap means clean registers too.
func (d *Distinct) Reset() {
	if !d.lc.dirty {
		return
	}
	d.lc.Reset()
	d.hll.Reset()
}

// Clone returns a deep copy of d.
func (d *Distinct) Clone() *Distinct {
	return &Distinct{lc: *d.lc.Clone(), hll: d.hll.Clone(), p: d.p, zmin: d.zmin}
}

// MemoryBytes returns the bytes of the bitmap and the registers.
func (d *Distinct) MemoryBytes() int {
	return d.lc.MemoryBytes() + 1<<d.p
}

// AppendBinary appends the encoding of d to b: the common header, the
// bitmap as in the encoding of a [LinearCounting] (the log2 of its size, one
// byte, and its word array), the HyperLogLog precision p (one byte) and the
// 2^p registers, eight to a big-endian word, as a word array. The encoding
// is canonical.
func (d *Distinct) AppendBinary(b []byte) ([]byte, error) {
	enc, err := d.hll.AppendBinary(nil)
	if err != nil {
		return b, fmt.Errorf("sketch: encode %v: %w", kindDistinct, err)
	}
	regs := enc[8:] // the version 2 dense layout: 8-byte header, 2^p registers
	b = appendHeader(b, kindDistinct, d.lc.seed)
	b = append(d.lc.appendBody(b), d.p)
	words := make([]uint64, len(regs)/8)
	for i := range words {
		words[i] = binary.BigEndian.Uint64(regs[8*i:])
	}
	return appendWords(b, words), nil
}

// MarshalBinary returns the encoding of d (see AppendBinary).
func (d *Distinct) MarshalBinary() ([]byte, error) { return d.AppendBinary(nil) }

// UnmarshalBinary sets d to the sketch data encodes. It rejects anything
// AppendBinary does not write, and leaves d unchanged on error.
func (d *Distinct) UnmarshalBinary(data []byte) error {
	r, seed, err := readHeader(data, kindDistinct)
	if err != nil {
		return err
	}
	bitmap, log2, err := readLinearBody(r)
	if err != nil {
		return err
	}
	p, err := r.u8()
	if err != nil {
		return err
	}
	if p < minHLLPrecision || p > maxHLLPrecision {
		r.off--
		return r.errorf(ErrCorrupt, "hyperloglog precision %d", p)
	}
	// Rebuild the registers in axiomhq's version 2 dense encoding: version,
	// p, two zero bytes, the register count (uint32), the registers.
	maxRho := 64 - p + 1 // the largest register value axiomhq accepts
	enc := make([]byte, 8+1<<p)
	enc[0], enc[1] = 2, p
	binary.BigEndian.PutUint32(enc[4:], 1<<p)
	err = r.readWords("registers", 1<<(p-3), func(i int, v uint64) error {
		binary.BigEndian.PutUint64(enc[8+8*i:], v)
		for j, x := range enc[8+8*i : 16+8*i] {
			if x > maxRho {
				return r.errorf(ErrCorrupt, "register %d = %d exceeds %d", 8*i+j, x, maxRho)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := r.end(); err != nil {
		return err
	}
	hll := new(hyperloglog.Sketch)
	if err := hll.UnmarshalBinary(enc); err != nil {
		return fmt.Errorf("sketch: decode %v: registers: %w: %w", kindDistinct, ErrCorrupt, err)
	}
	d.lc.words = fillWords(bitmap, d.lc.words, 1<<(log2-6))
	d.lc.log2, d.lc.seed, d.lc.dirty = log2, seed, true
	d.lc.recount()
	d.hll, d.p = hll, p
	d.zmin = switchZeros(1<<log2, p)
	return nil
}
