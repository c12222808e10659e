package sketch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"unsafe"
)

// Count-Min limits and defaults.
const (
	// DefaultCountMinDepth and DefaultCountMinWidth give 4 rows of 2^16
	// 64-bit counters: 2 MiB.
	DefaultCountMinDepth = 4
	DefaultCountMinWidth = 1 << 16
	// MaxCountMinDepth bounds the rows.
	MaxCountMinDepth = 16
	// MaxCountMinCells bounds depth × width (128 MiB of counters).
	MaxCountMinCells     = 1 << 24
	maxCountMinLog2Width = 24
	// countMinBlockLog2 is the log2 of the counters of a block, the unit
	// of the dirty marks: 512 counters, 4 KiB.
	countMinBlockLog2 = 9
)

// CountMinConfig shapes a [CountMin].
type CountMinConfig struct {
	// Depth is the number of rows, 1 to MaxCountMinDepth; 0 selects
	// DefaultCountMinDepth.
	Depth int
	// Width is the number of counters per row, a power of two from 2 with
	// Depth×Width ≤ MaxCountMinCells; 0 selects DefaultCountMinWidth.
	Width int
	// Seed is the seed of the hashes added; the row indexes derive from
	// it. 0 selects DefaultSeed.
	Seed uint64
	// Conservative selects conservative update: a row's counter only rises
	// as far as the new minimum needs, which cuts the overestimate several
	// fold on skewed streams but makes the sketch depend on the order of
	// the stream, so that merging is no longer exact (see Merge).
	Conservative bool
}

// CountMin estimates the total weight added per hash (Cormode and
// Muthukrishnan, 2005): Depth rows of Width counters; each row maps the hash
// to one counter with its own multiply-shift function of the one 64-bit
// hash, Add adds the weight to the counter of every row, and Estimate
// returns the smallest of them. The estimate never falls short of the true
// weight; it exceeds it by at most e·Total()/Width with probability at least
// 1 − e^−Depth.
//
// Make one with NewCountMin, or decode one with UnmarshalBinary into a zero value:
// the zero value is usable only as the receiver of UnmarshalBinary. Do not
// copy a CountMin after first use; use Clone.
// It is not safe for concurrent use.
type CountMin struct {
	counters []uint64 // depth rows of width counters, row-major
	// blocks[b] is 1 when block b (counters b·512 to b·512+511) may hold
	// a non-zero counter, 0 when it holds none: Reset and Merge visit only
	// the blocks of 1. A byte a block, as a plain store costs Add less
	// than setting a bit (about 1 ns against 3, measured).
	blocks       []uint8
	mul          [MaxCountMinDepth]uint64
	depth        int
	log2w        uint8
	conservative bool
	dirty        bool // set by every write since the last Reset; see Reset
	seed         uint64
	total        uint64 // sum of the weights added
	// To 256 bytes, a multiple of the cache line: every Add writes total
	// and dirty, and sketches counted on two goroutines (the engine's
	// bytes and packets per flow) would otherwise share the line where
	// one's fields end and the next one's begin.
	_ [48]byte
}

// NewCountMin returns an empty sketch shaped by cfg.
func NewCountMin(cfg CountMinConfig) (*CountMin, error) { return NewCountMinIn(cfg, nil) }

// NewCountMinIn is NewCountMin with the counters in memory the caller
// provides: counters holds Depth×Width zeros (after the defaults), such as
// an array the caller mapped itself to ask for huge pages, and stays the
// sketch's for as long as the sketch is used. A nil counters is
// NewCountMin's own array.
func NewCountMinIn(cfg CountMinConfig, counters []uint64) (*CountMin, error) {
	c := &CountMin{}
	if err := c.init(cfg, counters); err != nil {
		return nil, err
	}
	return c, nil
}

// withDefaults returns cfg with its zero fields set to the defaults.
func (cfg CountMinConfig) withDefaults() CountMinConfig {
	if cfg.Depth == 0 {
		cfg.Depth = DefaultCountMinDepth
	}
	if cfg.Width == 0 {
		cfg.Width = DefaultCountMinWidth
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	return cfg
}

// Counters returns the number of counters of a sketch shaped by cfg,
// Depth×Width after the defaults: what NewCountMinIn takes. A shape
// NewCountMin refuses is its error.
func (cfg CountMinConfig) Counters() (int, error) {
	cfg = cfg.withDefaults()
	if cfg.Depth < 1 || cfg.Depth > MaxCountMinDepth || cfg.Width < 2 || cfg.Width&(cfg.Width-1) != 0 || cfg.Width > MaxCountMinCells/cfg.Depth {
		return 0, fmt.Errorf("sketch: count-min %d×%d: want 1 to %d rows of a power of two ≥ 2 counters, at most %d in all: %w",
			cfg.Depth, cfg.Width, MaxCountMinDepth, MaxCountMinCells, ErrConfig)
	}
	return cfg.Depth * cfg.Width, nil
}

// init shapes c for cfg, with counters as its counters, or an array of its
// own when nil.
func (c *CountMin) init(cfg CountMinConfig, counters []uint64) error {
	cfg = cfg.withDefaults()
	n, err := cfg.Counters()
	if err != nil {
		return err
	}
	switch {
	case counters == nil:
		counters = make([]uint64, n)
	case len(counters) != n:
		return fmt.Errorf("sketch: count-min %d×%d in %d counters: %w", cfg.Depth, cfg.Width, len(counters), ErrConfig)
	}
	c.shape(cfg.Depth, uint8(bits.TrailingZeros(uint(cfg.Width))), cfg.Conservative, cfg.Seed)
	c.counters = counters
	c.blocks = make([]uint8, countMinBlocks(len(c.counters)))
	c.total, c.dirty = 0, false
	return nil
}

// countMinBlocks returns the number of blocks of n counters.
func countMinBlocks(n int) int {
	return (n + 1<<countMinBlockLog2 - 1) >> countMinBlockLog2
}

// shape sets the dimensions of c and derives the row multipliers.
func (c *CountMin) shape(depth int, log2w uint8, conservative bool, seed uint64) {
	c.depth, c.log2w, c.conservative, c.seed = depth, log2w, conservative, seed
	c.mul = [MaxCountMinDepth]uint64{}
	for i := range depth {
		c.mul[i] = multiplier(seed, i)
	}
}

// Cells appends to dst the address of each row's counter of hash h, the
// counters Add and Estimate read: a caller adding many hashes can ask the
// processor for them ahead (a sketch of megabytes misses the caches on
// most of them). The addresses are valid while c is.
func (c *CountMin) Cells(h uint64, dst []uintptr) []uintptr {
	cnt, w, s := c.counters, c.log2w&63, (64-c.log2w)&63
	for i, m := range c.mul[:c.depth] {
		dst = append(dst, uintptr(unsafe.Pointer(&cnt[i<<w|int(h*m>>s)])))
	}
	return dst
}

// Add adds weight v to hash h. It does not allocate.
func (c *CountMin) Add(h uint64, v uint64) {
	c.total += v
	c.dirty = true
	if c.conservative {
		c.addConservative(h, v)
		return
	}
	// Locals, and shift counts masked to 6 bits, keep the loop free of
	// reloads and of the checks for shifts past 63.
	cnt, blk, w, s := c.counters, c.blocks, c.log2w&63, (64-c.log2w)&63
	for i, m := range c.mul[:c.depth] {
		j := uint(i<<w) | uint(h*m>>s)
		cnt[j] += v
		blk[j>>countMinBlockLog2] = 1
	}
}

// addConservative raises each row's counter of h to at least the current
// estimate plus v.
func (c *CountMin) addConservative(h uint64, v uint64) {
	var idx [MaxCountMinDepth]int
	cnt, w, s := c.counters, c.log2w&63, (64-c.log2w)&63
	est := ^uint64(0)
	for i, m := range c.mul[:c.depth] {
		idx[i] = i<<w | int(h*m>>s)
		est = min(est, cnt[idx[i]])
	}
	target := est + v
	for _, j := range idx[:c.depth] {
		cnt[j] = max(cnt[j], target)
		c.blocks[uint(j)>>countMinBlockLog2] = 1
	}
}

// Estimate returns the estimated total weight of h: never less than the
// true total.
func (c *CountMin) Estimate(h uint64) uint64 {
	cnt, w, s := c.counters, c.log2w&63, (64-c.log2w)&63
	est := ^uint64(0)
	for i, m := range c.mul[:c.depth] {
		est = min(est, cnt[i<<w|int(h*m>>s)])
	}
	return est
}

// Total returns the sum of all weights added.
func (c *CountMin) Total() uint64 {
	return c.total
}

// Depth returns the number of rows.
func (c *CountMin) Depth() int {
	return c.depth
}

// Width returns the number of counters per row.
func (c *CountMin) Width() int {
	return 1 << c.log2w
}

// Merge adds o to c. Both must have the same dimensions, seed and update
// rule. For the standard rule the merge is exact: it equals, byte for byte,
// the sketch of the concatenated streams. For conservative update it is
// not: the sum of two conservative sketches still never underestimates, and
// never exceeds the standard sketch of the concatenated streams, but it
// generally exceeds the conservative sketch of the concatenated streams.
func (c *CountMin) Merge(o *CountMin) error {
	switch {
	case c.seed != o.seed:
		return fmt.Errorf("sketch: merge %v: seed %#x with %#x: %w", kindCountMin, c.seed, o.seed, ErrIncompatible)
	case c.depth != o.depth || c.log2w != o.log2w:
		return fmt.Errorf("sketch: merge %v: %d×%d with %d×%d: %w", kindCountMin, c.depth, 1<<c.log2w, o.depth, 1<<o.log2w, ErrIncompatible)
	case c.conservative != o.conservative:
		return fmt.Errorf("sketch: merge %v: conservative update %t with %t: %w", kindCountMin, c.conservative, o.conservative, ErrIncompatible)
	}
	if !o.dirty { // o is empty: nothing to add
		return nil
	}
	c.dirty = true
	for b, d := range o.blocks { // the blocks o wrote to
		if d == 0 {
			continue
		}
		c.blocks[b] = 1
		lo, hi := c.block(b)
		dst, src := c.counters[lo:hi], o.counters[lo:hi]
		src = src[:len(dst)]
		for i := range dst {
			dst[i] += src[i]
		}
	}
	c.total += o.total
	return nil
}

// Reset empties c, keeping its memory. It costs O(1) when nothing was
// added, merged or decoded into c since the last Reset (or since
// NewCountMin), such as in the windows of an idle link. Otherwise it clears
// the 4 KiB blocks of counters that Add or Merge wrote to (every block
// after UnmarshalBinary), and the whole array at once when they are most
// of it: a window of a few flows clears a few blocks of each row.
func (c *CountMin) Reset() {
	if !c.dirty {
		return
	}
	// One clear of the whole array is faster than a clear per block once
	// most blocks are marked.
	if n := bytes.Count(c.blocks, dirtyBlock[:]); 2*n >= len(c.blocks) {
		clear(c.counters)
		clear(c.blocks)
	} else {
		for b, d := range c.blocks {
			if d != 0 {
				lo, hi := c.block(b)
				clear(c.counters[lo:hi])
				c.blocks[b] = 0
			}
		}
	}
	c.total, c.dirty = 0, false
}

// dirtyBlock is the mark of a dirty block in CountMin.blocks.
var dirtyBlock = [1]byte{1}

// block returns the bounds of block b of the counters.
func (c *CountMin) block(b int) (lo, hi int) {
	lo = b << countMinBlockLog2
	return lo, min(lo+1<<countMinBlockLog2, len(c.counters))
}

// markAll marks every block of c dirty, sizing the marks for the counters.
func (c *CountMin) markAll() {
	if n := countMinBlocks(len(c.counters)); cap(c.blocks) < n {
		c.blocks = make([]uint8, n)
	} else {
		c.blocks = c.blocks[:n]
	}
	for i := range c.blocks {
		c.blocks[i] = 1
	}
}

// Clone returns a deep copy of c.
func (c *CountMin) Clone() *CountMin {
	n := *c
	n.counters = append([]uint64(nil), c.counters...)
	n.blocks = append([]uint8(nil), c.blocks...)
	return &n
}

// MemoryBytes returns the bytes of the counters.
func (c *CountMin) MemoryBytes() int {
	return 8 * len(c.counters)
}

// AppendBinary appends the encoding of c to b: the common header, the depth,
// the log2 of the width and the flags (bit 0: conservative update), one byte
// each, the total weight as a uvarint, and the counters, row by row, as one
// word array. The encoding is canonical.
func (c *CountMin) AppendBinary(b []byte) ([]byte, error) {
	b = appendHeader(b, kindCountMin, c.seed)
	flags := byte(0)
	if c.conservative {
		flags = 1
	}
	b = append(b, byte(c.depth), c.log2w, flags)
	b = binary.AppendUvarint(b, c.total)
	return appendWords(b, c.counters), nil
}

// MarshalBinary returns the encoding of c (see AppendBinary).
func (c *CountMin) MarshalBinary() ([]byte, error) { return c.AppendBinary(nil) }

// UnmarshalBinary sets c to the sketch data encodes, reusing c's memory when
// the dimensions match. It rejects anything AppendBinary does not write,
// including counters that cannot result from adding weights (for the
// standard rule every row sums to the total; for conservative update no row
// exceeds it), and leaves c unchanged on error.
func (c *CountMin) UnmarshalBinary(data []byte) error {
	r, seed, err := readHeader(data, kindCountMin)
	if err != nil {
		return err
	}
	dims, err := r.bytes(3)
	if err != nil {
		return err
	}
	depth, log2w, flags := int(dims[0]), dims[1], dims[2]
	if depth < 1 || depth > MaxCountMinDepth || log2w < 1 || log2w > maxCountMinLog2Width || depth<<log2w > MaxCountMinCells || flags > 1 {
		r.off -= 3
		return r.errorf(ErrCorrupt, "count-min %d×2^%d, flags %#x", depth, log2w, flags)
	}
	total, err := r.uvarint()
	if err != nil {
		return err
	}
	counters := *r
	n := depth << log2w
	var sums [MaxCountMinDepth]uint64
	var carry uint64
	err = r.readWords("counters", n, func(i int, v uint64) error {
		var c uint64
		row := i >> log2w
		sums[row], c = bits.Add64(sums[row], v, 0)
		carry |= c
		return nil
	})
	if err != nil {
		return err
	}
	for row, s := range sums[:depth] {
		switch {
		case flags == 0 && s != total: // modulo 2^64, as the counters wrap with the total
			return r.errorf(ErrCorrupt, "row %d sums to %d, total %d", row, s, total)
		case flags == 1 && (s > total || carry != 0):
			return r.errorf(ErrCorrupt, "conservative row %d sums past the total %d", row, total)
		}
	}
	if err := r.end(); err != nil {
		return err
	}
	c.counters = fillWords(&counters, c.counters, n)
	c.shape(depth, log2w, flags == 1, seed)
	c.markAll()
	c.total, c.dirty = total, true
	return nil
}
