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
	// TopKWays is the number of entries per bucket: the hashes of a bucket
	// fill one cache line, its counts the next.
	TopKWays = 8
	// MaxTopKCapacity bounds the table entries (64 MiB for a 40-byte key).
	MaxTopKCapacity = 1 << 20
	// maxTopKLog2Buckets is log2(MaxTopKCapacity / TopKWays).
	maxTopKLog2Buckets = 17
)

// TopKConfig shapes a [TopK].
type TopKConfig struct {
	// K is the number of entries Top returns at most, 1 to the capacity;
	// 0 selects DefaultTopK.
	K int
	// Capacity is the number of table entries, a power of two from
	// TopKWays to MaxTopKCapacity; 0 selects 4·K rounded up to a power of
	// two, at least DefaultTopKCapacity.
	Capacity int
	// Seed is the seed of the hashes updated; the bucket index derives
	// from it. 0 selects DefaultSeed.
	Seed uint64
}

// TopK finds the heaviest keys of a weighted stream with Space-Saving
// (Metwally et al., 2005) run in set-associative buckets: the hash picks a
// bucket of TopKWays entries; a key already in its bucket adds the weight to
// its count; a new key takes the bucket's free entry, or else replaces the
// entry with the smallest count c, starting at c + weight with an error of c.
// The table is allocated once; Update does not allocate and touches one
// bucket.
//
// # Error bound
//
// Every entry satisfies Count − Error ≤ true weight ≤ Count, and a key not
// in the table has a true weight of at most the smallest count of its bucket
// (0 while the bucket has a free entry), which is at most the bucket's total
// weight divided by TopKWays. These bounds hold after Merge too. A key that
// is heavier than every bucket's total weight over TopKWays is always in the
// table.
//
// Keys are told apart by their 64-bit hash only, as in the other sketches:
// keys of equal hash count as one key, reported under the key that entered
// the table first. For n distinct keys this happens with probability about
// n²/2^65 (1e-7 for 2 M keys). Comparing only hashes keeps Update to the
// cache line of a bucket's hashes and the one of its counts.
//
// Make one with NewTopK, or decode one with UnmarshalBinary into a zero
// value: the zero value is usable only as the receiver of UnmarshalBinary.
// Do not copy a TopK after first use; use Clone. It is not safe for
// concurrent use.
type TopK[K comparable] struct {
	buckets []topKBucket[K]
	ranks   []topKRank // Top's scratch
	k       int
	log2b   uint8 // log2 of the number of buckets
	dirty   bool  // set by every write since the last Reset; see Reset
	mul     uint64
	seed    uint64
}

// topKBucket holds TopKWays entries; a count of 0 marks a free entry.
type topKBucket[K comparable] struct {
	hashes [TopKWays]uint64
	counts [TopKWays]uint64
	errs   [TopKWays]uint64
	keys   [TopKWays]K
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
	if cfg.K == 0 {
		cfg.K = DefaultTopK
	}
	if cfg.Capacity == 0 && cfg.K > 0 && cfg.K <= MaxTopKCapacity/4 {
		cfg.Capacity = max(DefaultTopKCapacity, 1<<bits.Len(uint(4*cfg.K-1)))
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	if cfg.Capacity < TopKWays || cfg.Capacity > MaxTopKCapacity || cfg.Capacity&(cfg.Capacity-1) != 0 || cfg.K < 1 || cfg.K > cfg.Capacity {
		return nil, fmt.Errorf("sketch: top-k k=%d capacity=%d: want a power-of-two capacity from %d to %d and k from 1 to the capacity: %w",
			cfg.K, cfg.Capacity, TopKWays, MaxTopKCapacity, ErrConfig)
	}
	t := &TopK[K]{}
	t.shape(cfg.K, uint8(bits.TrailingZeros(uint(cfg.Capacity/TopKWays))), cfg.Seed)
	t.buckets = make([]topKBucket[K], 1<<t.log2b)
	return t, nil
}

// shape sets the dimensions of t.
func (t *TopK[K]) shape(k int, log2b uint8, seed uint64) {
	t.k, t.log2b, t.seed = k, log2b, seed
	t.mul = multiplier(seed, MaxCountMinDepth) // independent of the Count-Min rows
}

// bucket returns the bucket of h: the top log2b bits of a multiply-shift
// hash of h.
func (t *TopK[K]) bucket(h uint64) *topKBucket[K] {
	i, _ := bits.Mul64(h*t.mul, uint64(len(t.buckets)))
	return &t.buckets[i]
}

// Update adds weight to key, whose hash is h. A weight of 0 is ignored. It
// does not allocate.
func (t *TopK[K]) Update(h uint64, key K, weight uint64) { t.UpdateRef(h, &key, weight) }

// UpdateRef is Update with the key read where it is, and only when it
// enters the table. A large key passed by value is copied to the stack
// first, two overlapping 16-byte stores for a 40-byte key, which the loads
// that copy it on wait for: BenchmarkTopKUpdate, 40-byte keys, 12.4 ns an
// update of a new key and 5.1 of a known one by value, 8.9 and 2.1 by
// reference (Update now passes its own copy by reference).
func (t *TopK[K]) UpdateRef(h uint64, key *K, weight uint64) {
	t.dirty = true
	b := t.bucket(h)
	for i, x := range &b.hashes {
		if x == h && b.counts[i] != 0 {
			b.counts[i] += weight
			return
		}
	}
	b.replace(h, key, weight)
}

// replace puts *key, of hash h, into b in place of its first entry of the
// smallest count (a free entry has count 0), with that count plus weight and
// an error of that count; it ignores a weight of 0. The key is copied in a
// statement of its own: a tuple assignment staged it on the stack.
func (b *topKBucket[K]) replace(h uint64, key *K, weight uint64) {
	if weight == 0 {
		return
	}
	victim, least := 0, b.counts[0]
	for i, c := range &b.counts {
		if c < least {
			victim, least = i, c
		}
	}
	b.hashes[victim], b.counts[victim], b.errs[victim] = h, least+weight, least
	b.keys[victim] = *key
}

// least returns the smallest count of b, 0 if it has a free entry.
func (b *topKBucket[K]) least() uint64 { return slices.Min(b.counts[:]) }

// find returns the way of hash h in b, or -1.
func (b *topKBucket[K]) find(h uint64) int {
	for i, x := range &b.hashes {
		if x == h && b.counts[i] != 0 {
			return i
		}
	}
	return -1
}

// entry returns the entry in way i of b.
func (b *topKBucket[K]) entry(i int) Entry[K] {
	return Entry[K]{Key: b.keys[i], Hash: b.hashes[i], Count: b.counts[i], Error: b.errs[i]}
}

// Lookup returns the entry of hash h, if the table holds it.
func (t *TopK[K]) Lookup(h uint64) (Entry[K], bool) {
	b := t.bucket(h)
	if i := b.find(h); i >= 0 {
		return b.entry(i), true
	}
	return Entry[K]{}, false
}

// Bound returns the largest true weight a key of hash h that the table does
// not hold can have: the smallest count of its bucket, or 0 while the bucket
// has a free entry.
func (t *TopK[K]) Bound(h uint64) uint64 { return t.bucket(h).least() }

// K returns the number of entries Top returns at most.
func (t *TopK[K]) K() int { return t.k }

// Top appends to dst the K heaviest entries, by Count descending, ties by
// Hash ascending, and returns the extended slice. (No two entries have the
// same hash, so the order is total.) It allocates only on its first call and
// when dst has no room for K more entries.
func (t *TopK[K]) Top(dst []Entry[K]) []Entry[K] {
	t.ranks = t.ranks[:0]
	for bi := range t.buckets {
		b := &t.buckets[bi]
		for i, c := range &b.counts {
			if c != 0 {
				t.ranks = append(t.ranks, topKRank{count: c, hash: b.hashes[i], slot: uint32(bi*TopKWays + i)})
			}
		}
	}
	slices.SortFunc(t.ranks, func(a, b topKRank) int {
		return cmp.Or(cmp.Compare(b.count, a.count), cmp.Compare(a.hash, b.hash))
	})
	for _, r := range t.ranks[:min(len(t.ranks), t.k)] {
		dst = append(dst, t.buckets[r.slot/TopKWays].entry(int(r.slot%TopKWays)))
	}
	return dst
}

// topKRank is what Top sorts: an occupied entry's count, hash and index.
type topKRank struct {
	count, hash uint64
	slot        uint32
}

// compareEntries orders entries by Count descending, then Hash ascending.
func compareEntries[K comparable](a, b Entry[K]) int {
	return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Hash, b.Hash))
}

// Merge adds o to t, bucket by bucket, keeping the bounds stated in [TopK]
// (the mergeable summaries of Agarwal et al., 2012): a key in both buckets
// adds counts and errors; a key in one bucket only adds the other bucket's
// smallest count to both, as its weight there may be up to that; of the
// union, the TopKWays heaviest stay, ordered by count descending, then hash
// ascending. A bucket that o leaves empty is unchanged.
// Both must have the same dimensions and seed.
func (t *TopK[K]) Merge(o *TopK[K]) error { return t.merge(o, false) }

// MergeDisjoint adds o to t when no key was updated in both, such as the
// sketches of workers that shard the stream by key: a key in one bucket
// only then has weight 0 in the other, so its count and error do not grow
// (Merge would add the other bucket's smallest count to both). The bounds
// stated in [TopK] hold for the merge as long as the key sets are disjoint;
// a key found in both is added up as Merge does. Both must have the same
// dimensions and seed.
func (t *TopK[K]) MergeDisjoint(o *TopK[K]) error { return t.merge(o, true) }

// merge is Merge, or MergeDisjoint when disjoint is set.
func (t *TopK[K]) merge(o *TopK[K], disjoint bool) error {
	switch {
	case t.seed != o.seed:
		return fmt.Errorf("sketch: merge %v: seed %#x with %#x: %w", kindTopK, t.seed, o.seed, ErrIncompatible)
	case t.k != o.k || len(t.buckets) != len(o.buckets):
		return fmt.Errorf("sketch: merge %v: k=%d capacity=%d with k=%d capacity=%d: %w", kindTopK,
			t.k, len(t.buckets)*TopKWays, o.k, len(o.buckets)*TopKWays, ErrIncompatible)
	}
	if !o.dirty { // o is empty: every bucket would be left unchanged
		return nil
	}
	t.dirty = true
	for i := range t.buckets {
		t.buckets[i].merge(&o.buckets[i], disjoint)
	}
	return nil
}

// merge merges o into b; see Merge and MergeDisjoint.
func (b *topKBucket[K]) merge(o *topKBucket[K], disjoint bool) {
	if slices.Max(o.counts[:]) == 0 {
		return
	}
	if slices.Max(b.counts[:]) == 0 {
		*b = *o
		return
	}
	bmin, omin := b.least(), o.least()
	if disjoint {
		bmin, omin = 0, 0
	}
	var union [2 * TopKWays]Entry[K]
	var matched [TopKWays]bool
	n := 0
	for i, c := range &b.counts {
		if c == 0 {
			continue
		}
		e := b.entry(i)
		count, errs := omin, omin
		if j := o.find(e.Hash); j >= 0 {
			count, errs = o.counts[j], o.errs[j]
			matched[j] = true
		}
		e.Count += count
		e.Error += errs
		union[n] = e
		n++
	}
	for j, c := range &o.counts {
		if c != 0 && !matched[j] {
			e := o.entry(j)
			e.Count += bmin
			e.Error += bmin
			union[n] = e
			n++
		}
	}
	slices.SortFunc(union[:n], compareEntries[K]) // hashes are distinct: a total order
	*b = topKBucket[K]{}
	for i := range min(n, TopKWays) {
		e := &union[i]
		b.hashes[i], b.counts[i], b.errs[i], b.keys[i] = e.Hash, e.Count, e.Error, e.Key
	}
}

// Reset empties t, keeping its memory. It costs O(1) when nothing was
// updated, merged or decoded into t since the last Reset (or since NewTopK),
// and clears the whole table otherwise.
func (t *TopK[K]) Reset() {
	if !t.dirty {
		return
	}
	clear(t.buckets)
	t.dirty = false
}

// Clone returns a deep copy of t.
func (t *TopK[K]) Clone() *TopK[K] {
	c := *t
	c.buckets = slices.Clone(t.buckets)
	c.ranks = nil
	return &c
}

// MemoryBytes returns the bytes of the table (Top adds a scratch array of 24
// bytes per entry on its first call).
func (t *TopK[K]) MemoryBytes() int {
	var b topKBucket[K]
	return len(t.buckets) * int(unsafe.Sizeof(b))
}

// AppendBinary appends the encoding of t to b, with appendKey appending the
// binary form of a key, which must have the same length for every key
// (ErrKeyCodec otherwise). The encoding: the common header; K as a uvarint,
// the log2 of the number of buckets as a byte, the key length as a uvarint;
// the number of occupied entries as a uvarint, and for each, in table order
// (bucket by bucket, way by way): the gap to the previous entry's index (the
// index for the first) as a uvarint, the hash as a big-endian uint64, count
// and error as uvarints, and the key. The encoding is canonical when the key
// codec is.
func (t *TopK[K]) AppendBinary(b []byte, appendKey func(K, []byte) []byte) ([]byte, error) {
	start := len(b)
	var zero K
	keyLen := len(appendKey(zero, b)) - start
	b = appendHeader(b, kindTopK, t.seed)
	b = binary.AppendUvarint(b, uint64(t.k))
	b = append(b, t.log2b)
	b = binary.AppendUvarint(b, uint64(keyLen))
	n := 0
	for bi := range t.buckets {
		for _, c := range &t.buckets[bi].counts {
			if c != 0 {
				n++
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	last := -1
	for bi := range t.buckets {
		bk := &t.buckets[bi]
		for w, c := range &bk.counts {
			if c == 0 {
				continue
			}
			i := bi*TopKWays + w
			b = binary.AppendUvarint(b, uint64(i-last-1))
			b = binary.BigEndian.AppendUint64(b, bk.hashes[w])
			b = binary.AppendUvarint(b, c)
			b = binary.AppendUvarint(b, bk.errs[w])
			k := len(b)
			if b = appendKey(bk.keys[w], b); len(b)-k != keyLen {
				return b[:start], fmt.Errorf("sketch: encode %v: entry %d: key of %d bytes, the zero key has %d: %w", kindTopK, i, len(b)-k, keyLen, ErrKeyCodec)
			}
			last = i
		}
	}
	return b, nil
}

// UnmarshalBinary sets t to the sketch data encodes, with readKey decoding a
// key from its keyLen bytes. It rejects anything AppendBinary does not write
// (including a key length other than keyLen, an entry outside its hash's
// bucket, an error not below its count, and a hash twice in a bucket) and
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
	log2b, err := r.u8()
	if err != nil {
		return err
	}
	if log2b > maxTopKLog2Buckets || k < 1 || k > uint64(TopKWays)<<log2b {
		r.off--
		return r.errorf(ErrCorrupt, "top-k k=%d buckets=2^%d", k, log2b)
	}
	kl, err := r.uvarint()
	if err != nil {
		return err
	}
	if kl != uint64(keyLen) {
		return r.errorf(ErrCorrupt, "keys of %d bytes, want %d", kl, keyLen)
	}
	capacity := TopKWays << log2b
	n, err := r.count("entries", uint64(capacity), uint64(11+keyLen))
	if err != nil {
		return err
	}
	var tmp TopK[K]
	tmp.shape(int(k), log2b, seed)
	tmp.buckets = make([]topKBucket[K], 1<<log2b)
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
		b := tmp.bucket(h)
		if b != &tmp.buckets[i/TopKWays] {
			return r.errorf(ErrCorrupt, "entry %d holds a hash of another bucket", i)
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
		if b.find(h) >= 0 {
			return r.errorf(ErrCorrupt, "entry %d: hash twice in its bucket", i)
		}
		w := i % TopKWays
		b.hashes[w], b.counts[w], b.errs[w], b.keys[w] = h, c, e, readKey(kb)
		next = i + 1
	}
	if err := r.end(); err != nil {
		return err
	}
	tmp.dirty = true
	*t = tmp
	return nil
}
