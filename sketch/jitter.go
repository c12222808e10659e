package sketch

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// Jitter defaults and limits.
const (
	// DefaultElephantRate and DefaultJitterRate are 1 Gb/s.
	DefaultElephantRate = 1e9
	DefaultJitterRate   = 1e9
	// DefaultJitterCapacity is the default number of flows per window.
	DefaultJitterCapacity = 1 << 12
	// MaxJitterCapacity bounds the flows per window.
	MaxJitterCapacity = 1 << 20
)

// JitterConfig shapes a [Jitter]. Rates are in bits/s.
type JitterConfig struct {
	// ElephantRate is the rate at or above which a flow is an elephant; 0
	// selects DefaultElephantRate.
	ElephantRate float64
	// AbsRate is the smallest change of rate between adjacent windows that
	// flags an elephant; 0 selects DefaultJitterRate.
	AbsRate float64
	// RelChange, when not 0, also requires the change to be at least
	// RelChange times the previous window's rate (0.5: by half).
	RelChange float64
	// Capacity is the number of flows each window holds, 1 to
	// MaxJitterCapacity; 0 selects DefaultJitterCapacity. Flows observed
	// past it are counted by Dropped.
	Capacity int
	// Seed is the seed of the hashes observed; 0 selects DefaultSeed.
	Seed uint64
}

// Jitter detects flows whose rate swings between adjacent windows: a flow
// is flagged when it is an elephant (rate ≥ ElephantRate) in either window
// and its rate changed by at least AbsRate (and by RelChange of its previous
// rate, when set). A flow missing from a window has rate 0 there, so flows
// that appear or vanish are compared too.
//
// It runs once per window, off the packet path: the caller observes the
// rates of the window's flows (the heavy flows of a [TopK], or the exact
// flow records), calls Detect to compare them with the previous window's,
// and Advance to move on. Its two tables are allocated once; Observe,
// Detect (given room in dst) and Advance do not allocate. Observing only
// the flows at or above [Jitter.MinRate] gives the same flags as observing
// all of them.
//
// Make one with NewJitter, or decode one with UnmarshalBinary into a zero value:
// the zero value is usable only as the receiver of UnmarshalBinary. Do not
// copy a Jitter after first use; use Clone.
// It is not safe for concurrent use.
type Jitter[K comparable] struct {
	cfg     JitterConfig // with defaults filled in
	win     [2]jitterTable[K]
	cur     int // index of the current window in win
	dropped uint64
}

// JitterFlow is a flow flagged by [Jitter.Detect].
type JitterFlow[K comparable] struct {
	Key       K
	Hash      uint64
	Prev, Cur float64 // rates in the previous and the current window, bits/s
}

// jitterTable maps flows to rates with open addressing.
type jitterTable[K comparable] struct {
	slots   []int32 // 0 free, else entry index + 1; a power of two ≥ 2·capacity
	entries []jitterEntry[K]
}

type jitterEntry[K comparable] struct {
	hash uint64
	key  K
	rate float64
}

// NewJitter returns an empty detector shaped by cfg.
func NewJitter[K comparable](cfg JitterConfig) (*Jitter[K], error) {
	j := &Jitter[K]{}
	if err := j.init(cfg); err != nil {
		return nil, err
	}
	return j, nil
}

// init allocates j for cfg.
func (j *Jitter[K]) init(cfg JitterConfig) error {
	if cfg.ElephantRate == 0 {
		cfg.ElephantRate = DefaultElephantRate
	}
	if cfg.AbsRate == 0 {
		cfg.AbsRate = DefaultJitterRate
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultJitterCapacity
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	if err := checkJitterConfig(&cfg); err != nil {
		return err
	}
	j.cfg = cfg
	for i := range j.win {
		j.win[i] = newJitterTable[K](cfg.Capacity)
	}
	j.cur, j.dropped = 0, 0
	return nil
}

// checkJitterConfig validates a configuration with its defaults filled in.
func checkJitterConfig(cfg *JitterConfig) error {
	finite := func(v float64) bool { return v >= 0 && v <= math.MaxFloat64 }
	if !finite(cfg.ElephantRate) || !finite(cfg.AbsRate) || !finite(cfg.RelChange) || cfg.Capacity < 1 || cfg.Capacity > MaxJitterCapacity {
		return fmt.Errorf("sketch: jitter elephant rate %g, change %g and %g relative, capacity %d: want finite rates ≥ 0 and a capacity from 1 to %d: %w",
			cfg.ElephantRate, cfg.AbsRate, cfg.RelChange, cfg.Capacity, MaxJitterCapacity, ErrConfig)
	}
	return nil
}

// newJitterTable returns an empty table for capacity flows.
func newJitterTable[K comparable](capacity int) jitterTable[K] {
	n := 2
	for n < 2*capacity {
		n <<= 1
	}
	return jitterTable[K]{slots: make([]int32, n), entries: make([]jitterEntry[K], 0, capacity)}
}

// find returns the slot of (h, key): its entry index + 1, or 0 and the free
// slot where it would go.
func (t *jitterTable[K]) find(h uint64, key K) (entry int32, slot int) {
	mask := len(t.slots) - 1
	for i := int(h>>32) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, i
		}
		if e := &t.entries[s-1]; e.hash == h && e.key == key {
			return s, i
		}
	}
}

// rate returns the rate of (h, key), 0 when absent.
func (t *jitterTable[K]) rate(h uint64, key K) float64 {
	if s, _ := t.find(h, key); s != 0 {
		return t.entries[s-1].rate
	}
	return 0
}

// add adds rate to (h, key), and reports false when the table is full.
func (t *jitterTable[K]) add(h uint64, key K, rate float64) bool {
	s, slot := t.find(h, key)
	if s != 0 {
		t.entries[s-1].rate += rate
		return true
	}
	if len(t.entries) == cap(t.entries) {
		return false
	}
	t.entries = append(t.entries, jitterEntry[K]{hash: h, key: key, rate: rate})
	t.slots[slot] = int32(len(t.entries))
	return true
}

// reset empties t, keeping its memory.
func (t *jitterTable[K]) reset() {
	clear(t.slots)
	clear(t.entries) // drop references held by keys
	t.entries = t.entries[:0]
}

// clone returns a deep copy of t.
func (t *jitterTable[K]) clone() jitterTable[K] {
	e := make([]jitterEntry[K], len(t.entries), cap(t.entries))
	copy(e, t.entries)
	return jitterTable[K]{slots: slices.Clone(t.slots), entries: e}
}

// Observe adds rate (bits/s) to the current window's rate of key, whose hash
// is h. Rates that are not positive and finite are ignored. When the window
// already holds Capacity flows, a new flow is counted by Dropped instead. It
// does not allocate.
func (j *Jitter[K]) Observe(h uint64, key K, rate float64) {
	if !(rate > 0 && rate <= math.MaxFloat64) {
		return
	}
	if !j.win[j.cur].add(h, key, rate) {
		j.dropped++
	}
}

// Dropped returns the number of observations of new flows that found the
// window full, since the detector was made or reset.
func (j *Jitter[K]) Dropped() uint64 {
	return j.dropped
}

// IsJitter reports whether a flow whose rate went from prev to cur is
// flagged.
func (j *Jitter[K]) IsJitter(prev, cur float64) bool {
	d := math.Abs(cur - prev)
	return max(prev, cur) >= j.cfg.ElephantRate && d >= j.cfg.AbsRate && (j.cfg.RelChange == 0 || d >= float64(j.cfg.RelChange*prev))
}

// MinRate returns the rate below which observations cannot change a flag: a
// flow below it in one window and at or above ElephantRate in the other is
// flagged whether or not its small rate is known. It is
// max(0, min(E − A, E/(1+R), (1−R)·E)) for elephant rate E, change A and
// relative change R, the last term only when 0 < R ≤ 1.
func (j *Jitter[K]) MinRate() float64 {
	e, r := j.cfg.ElephantRate, j.cfg.RelChange
	m := e - j.cfg.AbsRate
	if r > 0 {
		m = min(m, e/(1+r))
		if r <= 1 {
			m = min(m, float64((1-r)*e))
		}
	}
	return max(m, 0)
}

// Detect appends to dst the flows flagged between the previous window and the
// current one, by the size of the change descending, then by hash, and
// returns the extended slice. It does not change j.
func (j *Jitter[K]) Detect(dst []JitterFlow[K]) []JitterFlow[K] {
	prev, cur := &j.win[j.cur^1], &j.win[j.cur]
	start := len(dst)
	for _, e := range prev.entries {
		if c := cur.rate(e.hash, e.key); j.IsJitter(e.rate, c) {
			dst = append(dst, JitterFlow[K]{Key: e.key, Hash: e.hash, Prev: e.rate, Cur: c})
		}
	}
	for _, e := range cur.entries {
		if s, _ := prev.find(e.hash, e.key); s == 0 && j.IsJitter(0, e.rate) {
			dst = append(dst, JitterFlow[K]{Key: e.key, Hash: e.hash, Cur: e.rate})
		}
	}
	slices.SortStableFunc(dst[start:], func(a, b JitterFlow[K]) int {
		return cmp.Or(cmp.Compare(math.Abs(b.Cur-b.Prev), math.Abs(a.Cur-a.Prev)), cmp.Compare(a.Hash, b.Hash))
	})
	return dst
}

// Advance ends the current window: it becomes the previous one, and an empty
// window starts.
func (j *Jitter[K]) Advance() {
	j.cur ^= 1
	j.win[j.cur].reset()
}

// Merge adds o's rates to j's, window by window: use it to combine the
// detectors of shards or hosts that observed parts of the same windows. Both
// must have the same configuration.
func (j *Jitter[K]) Merge(o *Jitter[K]) error {
	if j.cfg != o.cfg {
		return fmt.Errorf("sketch: merge %v: configuration %+v with %+v: %w", kindJitter, j.cfg, o.cfg, ErrIncompatible)
	}
	for w := range 2 {
		dst, src := &j.win[j.cur^w], &o.win[o.cur^w]
		for _, e := range src.entries {
			if !dst.add(e.hash, e.key, e.rate) {
				j.dropped++
			}
		}
	}
	j.dropped += o.dropped
	return nil
}

// Reset empties both windows and the drop count, keeping the memory.
func (j *Jitter[K]) Reset() {
	for i := range j.win {
		j.win[i].reset()
	}
	j.dropped = 0
}

// Clone returns a deep copy of j.
func (j *Jitter[K]) Clone() *Jitter[K] {
	c := *j
	for i := range j.win {
		c.win[i] = j.win[i].clone()
	}
	return &c
}

// MemoryBytes returns the bytes of the two tables.
func (j *Jitter[K]) MemoryBytes() int {
	var e jitterEntry[K]
	n := 0
	for i := range j.win {
		n += 4*len(j.win[i].slots) + int(unsafe.Sizeof(e))*cap(j.win[i].entries)
	}
	return n
}

// AppendBinary appends the encoding of j to b, with appendKey appending the
// binary form of a key, which must have the same length for every key
// (ErrKeyCodec otherwise). The encoding: the common header; the elephant
// rate, the change and the relative change as big-endian IEEE 754 bits; the
// capacity, the key length and the drop count as uvarints; then the
// previous and the current window, each as the number of flows (uvarint)
// and per flow, ordered by hash and then key bytes: the hash (big-endian
// uint64), the rate (IEEE 754 bits) and the key. The encoding is canonical
// when the key codec is.
func (j *Jitter[K]) AppendBinary(b []byte, appendKey func(K, []byte) []byte) ([]byte, error) {
	start := len(b)
	var zero K
	keyLen := len(appendKey(zero, b)) - start
	b = appendHeader(b, kindJitter, j.cfg.Seed)
	for _, v := range [...]float64{j.cfg.ElephantRate, j.cfg.AbsRate, j.cfg.RelChange} {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	}
	b = binary.AppendUvarint(b, uint64(j.cfg.Capacity))
	b = binary.AppendUvarint(b, uint64(keyLen))
	b = binary.AppendUvarint(b, j.dropped)
	var ka, kb []byte
	for w := 1; w >= 0; w-- {
		t := &j.win[j.cur^w]
		order := make([]int, len(t.entries))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(x, y int) int {
			ex, ey := &t.entries[x], &t.entries[y]
			if c := cmp.Compare(ex.hash, ey.hash); c != 0 {
				return c
			}
			ka, kb = appendKey(ex.key, ka[:0]), appendKey(ey.key, kb[:0])
			return bytes.Compare(ka, kb)
		})
		b = binary.AppendUvarint(b, uint64(len(order)))
		for _, i := range order {
			e := &t.entries[i]
			b = binary.BigEndian.AppendUint64(b, e.hash)
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.rate))
			k := len(b)
			if b = appendKey(e.key, b); len(b)-k != keyLen {
				return b[:start], fmt.Errorf("sketch: encode %v: key of %d bytes, the zero key has %d: %w", kindJitter, len(b)-k, keyLen, ErrKeyCodec)
			}
		}
	}
	return b, nil
}

// UnmarshalBinary sets j to the detector data encodes, with readKey decoding
// a key from its keyLen bytes. It rejects anything AppendBinary does not
// write (including a key length other than keyLen, flows out of order, a key
// twice in a window, and rates that are not positive and finite) and leaves
// j unchanged on error.
func (j *Jitter[K]) UnmarshalBinary(data []byte, keyLen int, readKey func([]byte) K) error {
	r, seed, err := readHeader(data, kindJitter)
	if err != nil {
		return err
	}
	cfg := JitterConfig{Seed: seed}
	for _, p := range [...]*float64{&cfg.ElephantRate, &cfg.AbsRate, &cfg.RelChange} {
		u, err := r.u64()
		if err != nil {
			return err
		}
		*p = math.Float64frombits(u)
	}
	var dims [3]uint64
	for i := range dims {
		if dims[i], err = r.uvarint(); err != nil {
			return err
		}
	}
	if dims[0] > MaxJitterCapacity {
		return r.errorf(ErrCorrupt, "capacity %d exceeds %d", dims[0], MaxJitterCapacity)
	}
	cfg.Capacity = int(dims[0])
	if err := checkJitterConfig(&cfg); err != nil || seed == 0 || cfg.ElephantRate == 0 || cfg.AbsRate == 0 {
		return r.errorf(ErrCorrupt, "configuration %+v", cfg)
	}
	if dims[1] != uint64(keyLen) {
		return r.errorf(ErrCorrupt, "keys of %d bytes, want %d", dims[1], keyLen)
	}
	tmp := Jitter[K]{cfg: cfg, dropped: dims[2]}
	for w := 1; w >= 0; w-- {
		n, err := r.count("flows", uint64(cfg.Capacity), uint64(16+keyLen))
		if err != nil {
			return err
		}
		t := newJitterTable[K](cfg.Capacity)
		var last []byte
		for i := range n {
			at := r.off
			h, _ := r.u64()
			u, _ := r.u64()
			kb, err := r.bytes(keyLen)
			if err != nil {
				return err
			}
			rate := math.Float64frombits(u)
			if !(rate > 0 && rate <= math.MaxFloat64) {
				return r.errorf(ErrCorrupt, "flow %d: rate %v", i, rate)
			}
			if i > 0 {
				prev := binary.BigEndian.Uint64(last)
				if h < prev || h == prev && bytes.Compare(kb, last[16:]) <= 0 {
					return r.errorf(ErrCorrupt, "flow %d out of order", i)
				}
			}
			last = data[at:r.off]
			key := readKey(kb)
			if s, _ := t.find(h, key); s != 0 {
				return r.errorf(ErrCorrupt, "flow %d: key twice", i)
			}
			t.add(h, key, rate)
		}
		tmp.win[w] = t
	}
	if err := r.end(); err != nil {
		return err
	}
	*j = tmp
	return nil
}
