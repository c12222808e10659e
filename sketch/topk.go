package sketch

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"
)

// Top-k limits and defaults.
const (
	// DefaultTopK is the default number of entries Top returns.
	DefaultTopK = 100
	// DefaultTopKCapacity is the smallest default table: 4096 entries
	// (256 KiB for a 40-byte key), enough for the top 100 of a Zipf 1.0
	// stream over 2 M keys (see the package tests).
	DefaultTopKCapacity = 4096
	// DefaultTopKWays is the default number of entries per bucket.
	DefaultTopKWays = 8
	// MaxTopKWays bounds the entries per bucket.
	MaxTopKWays = 16
	// MaxTopKCapacity bounds the table entries.
	MaxTopKCapacity = 1 << 24
)

// TopKConfig shapes a [TopK].
type TopKConfig struct {
	// K is the number of entries Top returns at most, 1 to the capacity;
	// 0 selects DefaultTopK.
	K int
	// Capacity is the number of table entries, a power of two from Ways to
	// MaxTopKCapacity; 0 selects 4·K rounded up to a power of two, at
	// least DefaultTopKCapacity.
	Capacity int
	// Ways is the number of entries per bucket, a power of two from 1 to
	// MaxTopKWays; 0 selects DefaultTopKWays.
	Ways int
	// Seed is the seed of the hashes updated; the bucket index derives
	// from it. 0 selects DefaultSeed.
	Seed uint64
}

// TopK finds the heaviest keys of a weighted stream with Space-Saving
// (Metwally et al., 2005) run in set-associative buckets: the hash picks a
// bucket of Ways entries; a key already in its bucket adds the weight to its
// count; a new key takes the bucket's free entry, or else replaces the entry
// with the smallest count c, starting at c + weight with an error of c. The
// table is allocated once; Update does not allocate and touches one bucket.
//
// # Error bound
//
// Every entry satisfies Count − Error ≤ true weight ≤ Count, and a key not
// in the table has a true weight of at most the smallest count of its bucket
// (0 while the bucket has a free entry), which is at most the bucket's total
// weight divided by Ways. These bounds hold after Merge too. A key that is
// heavier than every bucket's total weight over Ways is always in the table.
//
// The zero value is an empty sketch with the default configuration; it
// allocates on first use. Do not copy a TopK after first use; use Clone. It
// is not safe for concurrent use.
type TopK[K comparable] struct {
	hashes []uint64 // per entry; bucket b holds entries [b·ways, (b+1)·ways)
	counts []uint64 // 0 marks a free entry
	errs   []uint64
	keys   []K
	k      int
	ways   int
	log2b  uint8 // log2 of the number of buckets
	mul    uint64
	seed   uint64
}

// Entry is a key of a [TopK] with its estimated weight.
type Entry[K comparable] struct {
	Key   K
	Hash  uint64
	Count uint64 // estimated total weight, never below the true weight
	Error uint64 // upper bound on the overestimate: Count − Error ≤ true weight
}

// NewTopK returns an empty sketch shaped by cfg.
func NewTopK[K comparable](cfg TopKConfig) (*TopK[K], error) {
	t := &TopK[K]{}
	if err := t.init(cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// init allocates t for cfg.
func (t *TopK[K]) init(cfg TopKConfig) error {
	if cfg.K == 0 {
		cfg.K = DefaultTopK
	}
	if cfg.Ways == 0 {
		cfg.Ways = DefaultTopKWays
	}
	if cfg.Capacity == 0 && cfg.K > 0 && cfg.K <= MaxTopKCapacity/4 {
		cfg.Capacity = max(DefaultTopKCapacity, 1<<bits.Len(uint(4*cfg.K-1)))
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	if cfg.Ways < 1 || cfg.Ways > MaxTopKWays || cfg.Ways&(cfg.Ways-1) != 0 ||
		cfg.Capacity < cfg.Ways || cfg.Capacity > MaxTopKCapacity || cfg.Capacity&(cfg.Capacity-1) != 0 ||
		cfg.K < 1 || cfg.K > cfg.Capacity {
		return fmt.Errorf("sketch: top-k k=%d capacity=%d ways=%d: want a power-of-two capacity from ways to %d, ways a power of two from 1 to %d, k from 1 to the capacity: %w",
			cfg.K, cfg.Capacity, cfg.Ways, MaxTopKCapacity, MaxTopKWays, ErrConfig)
	}
	t.shape(cfg.K, cfg.Ways, uint8(bits.TrailingZeros(uint(cfg.Capacity/cfg.Ways))), cfg.Seed)
	t.alloc()
	return nil
}

// shape sets the dimensions of t.
func (t *TopK[K]) shape(k, ways int, log2b uint8, seed uint64) {
	t.k, t.ways, t.log2b, t.seed = k, ways, log2b, seed
	t.mul = multiplier(seed, MaxCountMinDepth) // independent of the Count-Min rows
}

// alloc allocates empty tables for the dimensions of t.
func (t *TopK[K]) alloc() {
	n := t.ways << t.log2b
	t.hashes, t.counts, t.errs, t.keys = make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]K, n)
}

// lazy gives a zero value its default configuration.
func (t *TopK[K]) lazy() {
	if t.counts == nil {
		_ = t.init(TopKConfig{})
	}
}

// bucket returns the first entry of the bucket of h.
func (t *TopK[K]) bucket(h uint64) int {
	return int(h*t.mul>>(64-t.log2b)) * t.ways // a shift by 64 gives 0: one bucket
}

// Update adds weight to key, whose hash is h. A weight of 0 is ignored. It
// does not allocate (after the zero value's first use).
func (t *TopK[K]) Update(h uint64, key K, weight uint64) {
	if weight == 0 {
		return
	}
	if t.counts == nil {
		t.lazy()
	}
	base := t.bucket(h)
	end := base + t.ways
	hs, cs, ks := t.hashes[base:end], t.counts[base:end], t.keys[base:end]
	cs, ks = cs[:len(hs)], ks[:len(hs)]
	victim, least := 0, ^uint64(0)
	for i, x := range hs {
		c := cs[i]
		if x == h && c != 0 && ks[i] == key {
			cs[i] = c + weight
			return
		}
		if c < least {
			victim, least = i, c
		}
	}
	hs[victim], cs[victim], ks[victim] = h, least+weight, key
	t.errs[base+victim] = least
}

// Lookup returns the entry of key, whose hash is h, if the table holds it.
func (t *TopK[K]) Lookup(h uint64, key K) (Entry[K], bool) {
	t.lazy()
	base := t.bucket(h)
	for i := base; i < base+t.ways; i++ {
		if t.hashes[i] == h && t.counts[i] != 0 && t.keys[i] == key {
			return t.entry(i), true
		}
	}
	return Entry[K]{}, false
}

// Bound returns the largest true weight a key of hash h that the table does
// not hold can have: the smallest count of its bucket, or 0 while the bucket
// has a free entry.
func (t *TopK[K]) Bound(h uint64) uint64 {
	t.lazy()
	base := t.bucket(h)
	return bucketMin(t.counts[base : base+t.ways])
}

// bucketMin returns the smallest count of a bucket, 0 if it has a free
// entry.
func bucketMin(counts []uint64) uint64 { return slices.Min(counts) }

// entry returns the entry at index i.
func (t *TopK[K]) entry(i int) Entry[K] {
	return Entry[K]{Key: t.keys[i], Hash: t.hashes[i], Count: t.counts[i], Error: t.errs[i]}
}

// K returns the number of entries Top returns at most.
func (t *TopK[K]) K() int {
	t.lazy()
	return t.k
}

// Top appends to dst the K heaviest entries, by Count descending, ties by
// Hash ascending and then by table position, and returns the extended
// slice. It does not allocate when dst has room for every entry the table
// holds (its capacity).
func (t *TopK[K]) Top(dst []Entry[K]) []Entry[K] {
	t.lazy()
	start := len(dst)
	for i, c := range t.counts {
		if c != 0 {
			dst = append(dst, t.entry(i))
		}
	}
	all := dst[start:]
	slices.SortStableFunc(all, compareEntries[K])
	return dst[:start+min(len(all), t.k)]
}

// compareEntries orders entries by Count descending, then Hash ascending.
func compareEntries[K comparable](a, b Entry[K]) int {
	return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Hash, b.Hash))
}

// Merge adds o to t, bucket by bucket, keeping the bounds stated in [TopK]
// (the mergeable summaries of Agarwal et al., 2012): a key in both buckets
// adds counts and errors; a key in one bucket only adds the other bucket's
// smallest count to both, as its weight there may be up to that; of the
// union, the Ways heaviest stay, ordered by count descending, hash
// ascending, t's entries first. A bucket that o leaves empty is unchanged.
// Both must have the same dimensions and seed.
func (t *TopK[K]) Merge(o *TopK[K]) error {
	if err := t.compatible(o); err != nil {
		return err
	}
	for base := 0; base < len(t.counts); base += t.ways {
		t.mergeBucket(o, base, false)
	}
	return nil
}

// compatible checks that o can merge into t.
func (t *TopK[K]) compatible(o *TopK[K]) error {
	t.lazy()
	o.lazy()
	switch {
	case t.seed != o.seed:
		return fmt.Errorf("sketch: merge %v: seed %#x with %#x: %w", kindTopK, t.seed, o.seed, ErrIncompatible)
	case t.k != o.k || t.ways != o.ways || t.log2b != o.log2b:
		return fmt.Errorf("sketch: merge %v: k=%d capacity=%d ways=%d with k=%d capacity=%d ways=%d: %w", kindTopK,
			t.k, len(t.counts), t.ways, o.k, len(o.counts), o.ways, ErrIncompatible)
	}
	return nil
}

// MergeDisjoint adds o to t when no key was updated in both, such as the
// sketches of workers that shard the stream by key: a key in one bucket
// only then has weight 0 in the other, so its count and error do not grow
// (Merge would add the other bucket's smallest count to both). The bounds
// stated in [TopK] hold for the merge as long as the key sets are disjoint;
// a key found in both is added up as Merge does. Both must have the same
// dimensions and seed.
func (t *TopK[K]) MergeDisjoint(o *TopK[K]) error {
	if err := t.compatible(o); err != nil {
		return err
	}
	for base := 0; base < len(t.counts); base += t.ways {
		t.mergeBucket(o, base, true)
	}
	return nil
}

// mergeBucket merges o's bucket starting at base into t's; see Merge and
// MergeDisjoint.
func (t *TopK[K]) mergeBucket(o *TopK[K], base int, disjoint bool) {
	end := base + t.ways
	oc := o.counts[base:end]
	if slices.Max(oc) == 0 {
		return
	}
	tc := t.counts[base:end]
	if slices.Max(tc) == 0 {
		copy(t.hashes[base:end], o.hashes[base:end])
		copy(tc, oc)
		copy(t.errs[base:end], o.errs[base:end])
		copy(t.keys[base:end], o.keys[base:end])
		return
	}
	tmin, omin := bucketMin(tc), bucketMin(oc)
	if disjoint {
		tmin, omin = 0, 0
	}
	var union [2 * MaxTopKWays]Entry[K]
	var matched [MaxTopKWays]bool
	n := 0
	for i := base; i < end; i++ {
		if t.counts[i] == 0 {
			continue
		}
		e := t.entry(i)
		count, errs := omin, omin
		for j := base; j < end; j++ {
			if o.counts[j] != 0 && o.hashes[j] == e.Hash && o.keys[j] == e.Key {
				count, errs = o.counts[j], o.errs[j]
				matched[j-base] = true
				break
			}
		}
		e.Count += count
		e.Error += errs
		union[n] = e
		n++
	}
	for j := base; j < end; j++ {
		if o.counts[j] != 0 && !matched[j-base] {
			e := o.entry(j)
			e.Count += tmin
			e.Error += tmin
			union[n] = e
			n++
		}
	}
	slices.SortStableFunc(union[:n], compareEntries[K])
	var zero K
	for i := range t.ways {
		if i < n {
			e := &union[i]
			t.hashes[base+i], t.counts[base+i], t.errs[base+i], t.keys[base+i] = e.Hash, e.Count, e.Error, e.Key
		} else {
			t.hashes[base+i], t.counts[base+i], t.errs[base+i], t.keys[base+i] = 0, 0, 0, zero
		}
	}
}

// Reset empties t, keeping its memory.
func (t *TopK[K]) Reset() {
	t.lazy()
	clear(t.hashes)
	clear(t.counts)
	clear(t.errs)
	clear(t.keys)
}

// Clone returns a deep copy of t.
func (t *TopK[K]) Clone() *TopK[K] {
	t.lazy()
	c := *t
	c.hashes = slices.Clone(t.hashes)
	c.counts = slices.Clone(t.counts)
	c.errs = slices.Clone(t.errs)
	c.keys = slices.Clone(t.keys)
	return &c
}

// MemoryBytes returns the bytes of the table.
func (t *TopK[K]) MemoryBytes() int {
	t.lazy()
	var k K
	return len(t.counts) * (24 + int(unsafe.Sizeof(k)))
}

// AppendBinary appends the encoding of t to b, with appendKey appending the
// binary form of a key, which must have the same length for every key
// (ErrKeyCodec otherwise). The encoding: the common header; K as a uvarint,
// Ways and the log2 of the number of buckets as one byte each, the key
// length as a uvarint; the number of occupied entries as a uvarint, and for
// each, in table order: the gap to the previous entry's index (the index
// for the first) as a uvarint, the hash as a big-endian uint64, count and
// error as uvarints, and the key. The encoding is canonical when the key
// codec is.
func (t *TopK[K]) AppendBinary(b []byte, appendKey func(K, []byte) []byte) ([]byte, error) {
	t.lazy()
	start := len(b)
	var zero K
	keyLen := len(appendKey(zero, b)) - start
	b = appendHeader(b, kindTopK, t.seed)
	b = binary.AppendUvarint(b, uint64(t.k))
	b = append(b, byte(t.ways), t.log2b)
	b = binary.AppendUvarint(b, uint64(keyLen))
	n := 0
	for _, c := range t.counts {
		if c != 0 {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	last := -1
	for i, c := range t.counts {
		if c == 0 {
			continue
		}
		b = binary.AppendUvarint(b, uint64(i-last-1))
		b = binary.BigEndian.AppendUint64(b, t.hashes[i])
		b = binary.AppendUvarint(b, c)
		b = binary.AppendUvarint(b, t.errs[i])
		k := len(b)
		if b = appendKey(t.keys[i], b); len(b)-k != keyLen {
			return b[:start], fmt.Errorf("sketch: encode %v: entry %d: key of %d bytes, the zero key has %d: %w", kindTopK, i, len(b)-k, keyLen, ErrKeyCodec)
		}
		last = i
	}
	return b, nil
}

// UnmarshalBinary sets t to the sketch data encodes, with readKey decoding a
// key from its keyLen bytes. It rejects anything AppendBinary does not write
// (including a key length other than keyLen, an entry outside its hash's
// bucket, an error not below its count, and a key twice in a bucket) and
// leaves t unchanged on error.
func (t *TopK[K]) UnmarshalBinary(data []byte, keyLen int, readKey func([]byte) K) error {
	r, seed, err := readHeader(data, kindTopK)
	if err != nil {
		return err
	}
	k, err := r.uvarint()
	if err != nil {
		return err
	}
	dims, err := r.bytes(2)
	if err != nil {
		return err
	}
	ways, log2b := int(dims[0]), dims[1]
	if ways < 1 || ways > MaxTopKWays || ways&(ways-1) != 0 || log2b > 24 || ways<<log2b > MaxTopKCapacity || k < 1 || k > uint64(ways<<log2b) {
		r.off -= 2
		return r.errorf(ErrCorrupt, "top-k k=%d ways=%d buckets=2^%d", k, ways, log2b)
	}
	kl, err := r.uvarint()
	if err != nil {
		return err
	}
	if kl != uint64(keyLen) {
		return r.errorf(ErrCorrupt, "keys of %d bytes, want %d", kl, keyLen)
	}
	capacity := ways << log2b
	n, err := r.count("entries", uint64(capacity), uint64(11+keyLen))
	if err != nil {
		return err
	}
	var tmp TopK[K]
	tmp.shape(int(k), ways, log2b, seed)
	tmp.alloc()
	next := 0
	for range n {
		gap, err := r.uvarint()
		if err != nil {
			return err
		}
		if gap >= uint64(capacity-next) {
			return r.errorf(ErrCorrupt, "entry index %d+%d beyond %d entries", next, gap, capacity)
		}
		i := next + int(gap)
		h, err := r.u64()
		if err != nil {
			return err
		}
		if base := tmp.bucket(h); i < base || i >= base+ways {
			return r.errorf(ErrCorrupt, "entry %d holds a hash of bucket %d", i, base/ways)
		}
		c, err := r.uvarint()
		if err != nil {
			return err
		}
		e, err := r.uvarint()
		if err != nil {
			return err
		}
		if c == 0 || e >= c {
			return r.errorf(ErrCorrupt, "entry %d: count %d, error %d", i, c, e)
		}
		kb, err := r.bytes(keyLen)
		if err != nil {
			return err
		}
		key := readKey(kb)
		if _, dup := tmp.Lookup(h, key); dup {
			return r.errorf(ErrCorrupt, "entry %d: key twice in its bucket", i)
		}
		tmp.hashes[i], tmp.counts[i], tmp.errs[i], tmp.keys[i] = h, c, e, key
		next = i + 1
	}
	if err := r.end(); err != nil {
		return err
	}
	*t = tmp
	return nil
}
