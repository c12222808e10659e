package sketch

import (
	"encoding/binary"
	"fmt"
	"math/bits"
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
	counters     []uint64 // depth rows of width counters, row-major
	mul          [MaxCountMinDepth]uint64
	depth        int
	log2w        uint8
	conservative bool
	dirty        bool // set by every write since the last Reset; see Reset
	seed         uint64
	total        uint64 // sum of the weights added
}

// NewCountMin returns an empty sketch shaped by cfg.
func NewCountMin(cfg CountMinConfig) (*CountMin, error) {
	c := &CountMin{}
	if err := c.init(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// init allocates c for cfg.
func (c *CountMin) init(cfg CountMinConfig) error {
	if cfg.Depth == 0 {
		cfg.Depth = DefaultCountMinDepth
	}
	if cfg.Width == 0 {
		cfg.Width = DefaultCountMinWidth
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	if cfg.Depth < 1 || cfg.Depth > MaxCountMinDepth || cfg.Width < 2 || cfg.Width&(cfg.Width-1) != 0 || cfg.Depth*cfg.Width > MaxCountMinCells {
		return fmt.Errorf("sketch: count-min %d×%d: want 1 to %d rows of a power of two ≥ 2 counters, at most %d in all: %w",
			cfg.Depth, cfg.Width, MaxCountMinDepth, MaxCountMinCells, ErrConfig)
	}
	c.shape(cfg.Depth, uint8(bits.TrailingZeros(uint(cfg.Width))), cfg.Conservative, cfg.Seed)
	c.counters = make([]uint64, cfg.Depth*cfg.Width)
	c.total, c.dirty = 0, false
	return nil
}

// shape sets the dimensions of c and derives the row multipliers.
func (c *CountMin) shape(depth int, log2w uint8, conservative bool, seed uint64) {
	c.depth, c.log2w, c.conservative, c.seed = depth, log2w, conservative, seed
	c.mul = [MaxCountMinDepth]uint64{}
	for i := range depth {
		c.mul[i] = multiplier(seed, i)
	}
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
	cnt, w, s := c.counters, c.log2w&63, (64-c.log2w)&63
	for i, m := range c.mul[:c.depth] {
		cnt[i<<w|int(h*m>>s)] += v
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
	for i, v := range o.counters {
		c.counters[i] += v
	}
	c.total += o.total
	return nil
}

// Reset empties c, keeping its memory. It costs O(1) when nothing was
// added, merged or decoded into c since the last Reset (or since NewCountMin),
// such as in the windows of an idle link, and clears every counter
// otherwise.
func (c *CountMin) Reset() {
	if !c.dirty {
		return
	}
	clear(c.counters)
	c.total, c.dirty = 0, false
}

// Clone returns a deep copy of c.
func (c *CountMin) Clone() *CountMin {
	n := *c
	n.counters = append([]uint64(nil), c.counters...)
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
	c.total, c.dirty = total, true
	return nil
}
