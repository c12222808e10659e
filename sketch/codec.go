package sketch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Errors. Every error the package returns wraps one of them.
var (
	// ErrIncompatible is wrapped by Merge when the two sketches differ in
	// kind, encoding version, dimensions or seed.
	ErrIncompatible = errors.New("incompatible sketches")
	// ErrCorrupt is wrapped by UnmarshalBinary when the encoding is not one
	// the package writes.
	ErrCorrupt = errors.New("corrupt encoding")
	// ErrTruncated is wrapped by UnmarshalBinary when the encoding ends
	// before what its header declares. It wraps ErrCorrupt.
	ErrTruncated = fmt.Errorf("truncated: %w", ErrCorrupt)
	// ErrConfig is wrapped by the constructors for an invalid configuration.
	ErrConfig = errors.New("invalid configuration")
	// ErrKeyCodec is wrapped by the key-carrying sketches' AppendBinary when
	// the key codec does not append the same number of bytes for every key.
	ErrKeyCodec = errors.New("key codec appends a variable length")
)

// encodingVersion is the first byte of every encoding.
const encodingVersion = 1

// kind names the sketch type in an encoding header.
type kind uint8

// Sketch kinds. Zero is invalid.
const (
	kindLinearCounting kind = iota + 1
	kindDistinct
	kindCountMin
	kindTopK
	kindQuantile
	// kindJitterRetired was the jitter detector, whose encodings are no
	// longer written: every decoder rejects one as the encoding of another
	// kind (ErrCorrupt). The number stays reserved so that it is never
	// reused for another sketch.
	kindJitterRetired
)

// String returns the name the error messages use.
func (k kind) String() string {
	switch k {
	case kindLinearCounting:
		return "linear counting"
	case kindDistinct:
		return "distinct"
	case kindCountMin:
		return "count-min"
	case kindTopK:
		return "top-k"
	case kindQuantile:
		return "quantile"
	case kindJitterRetired:
		return "retired jitter"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// headerLen is the length of the common header: version, kind, hash version
// and the seed.
const headerLen = 11

// appendHeader appends the common header of every encoding:
//
//	byte 0      encoding version (1)
//	byte 1      kind (1 linear counting, 2 distinct, 3 count-min, 4 top-k,
//	            5 quantile; 6 was the jitter detector, no longer written,
//	            and stays reserved)
//	byte 2      HashVersion
//	bytes 3-10  seed, big-endian
//
// The kind-specific dimensions follow.
func appendHeader(b []byte, k kind, seed uint64) []byte {
	b = append(b, encodingVersion, byte(k), HashVersion)
	return binary.BigEndian.AppendUint64(b, seed)
}

// reader decodes an encoding with bounds checks; its errors name the kind
// and the offset.
type reader struct {
	data []byte
	off  int
	kind kind
}

// readHeader checks the common header of data for kind k and returns a
// reader positioned after it, and the seed.
func readHeader(data []byte, k kind) (*reader, uint64, error) {
	r := &reader{data: data, kind: k}
	if err := r.need(headerLen); err != nil {
		return nil, 0, err
	}
	switch {
	case data[0] != encodingVersion:
		return nil, 0, r.errorf(ErrCorrupt, "encoding version %d, want %d", data[0], encodingVersion)
	case kind(data[1]) != k:
		return nil, 0, r.errorf(ErrCorrupt, "encoding of a %v sketch", kind(data[1]))
	case data[2] != HashVersion:
		return nil, 0, r.errorf(ErrCorrupt, "hash version %d, want %d", data[2], HashVersion)
	}
	r.off = headerLen
	return r, binary.BigEndian.Uint64(data[3:]), nil
}

// errorf returns an error wrapping err that names the sketch and the offset.
func (r *reader) errorf(err error, format string, args ...any) error {
	return fmt.Errorf("sketch: decode %v at offset %d: %s: %w", r.kind, r.off, fmt.Sprintf(format, args...), err)
}

// need checks that n more bytes are left.
func (r *reader) need(n uint64) error {
	if have := uint64(len(r.data) - r.off); have < n {
		return r.errorf(ErrTruncated, "need %d bytes, have %d", n, have)
	}
	return nil
}

// u8 reads one byte.
func (r *reader) u8() (byte, error) {
	if err := r.need(1); err != nil {
		return 0, err
	}
	r.off++
	return r.data[r.off-1], nil
}

// u64 reads a big-endian uint64.
func (r *reader) u64() (uint64, error) {
	if err := r.need(8); err != nil {
		return 0, err
	}
	r.off += 8
	return binary.BigEndian.Uint64(r.data[r.off-8:]), nil
}

// uvarint reads a minimally encoded uvarint.
func (r *reader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.data[r.off:])
	switch {
	case n == 0:
		return 0, r.errorf(ErrTruncated, "unterminated uvarint")
	case n < 0:
		return 0, r.errorf(ErrCorrupt, "uvarint overflows 64 bits")
	case n != uvarintLen(v):
		return 0, r.errorf(ErrCorrupt, "uvarint %d not minimally encoded", v)
	}
	r.off += n
	return v, nil
}

// count reads a uvarint that counts items of at least minLen bytes each and
// checks that it is at most limit and that the rest of the encoding can
// hold that many items.
func (r *reader) count(what string, limit uint64, minLen uint64) (int, error) {
	n, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, r.errorf(ErrCorrupt, "%s %d exceeds %d", what, n, limit)
	}
	if err := r.need(n * minLen); err != nil {
		return 0, err
	}
	return int(n), nil
}

// bytes reads n bytes, aliasing the input.
func (r *reader) bytes(n int) ([]byte, error) {
	if err := r.need(uint64(n)); err != nil {
		return nil, err
	}
	r.off += n
	return r.data[r.off-n : r.off], nil
}

// end checks that the whole encoding was read.
func (r *reader) end() error {
	if n := len(r.data) - r.off; n != 0 {
		return r.errorf(ErrCorrupt, "%d trailing bytes", n)
	}
	return nil
}

// uvarintLen returns the length of the uvarint encoding of v.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// Word array modes. An array of n uint64 words is encoded as a mode byte and
// a payload:
//
//	0 fixed   n big-endian uint64s
//	1 varint  n uvarints
//	2 sparse  uvarint c, the number of non-zero words, then c pairs of
//	          uvarint gap and uvarint value (non-zero). The first gap is the
//	          word's index; each further gap is the distance to the
//	          previous index minus one.
//
// The encoder uses the shortest mode, the lowest-numbered one on a tie, and
// the decoder accepts nothing else, so that the encoding is canonical.
const (
	wordsFixed = iota
	wordsVarint
	wordsSparse
)

// wordSizes accumulates, over the non-zero words of an array of n words
// given to add in index order, what the canonical mode depends on.
type wordSizes struct {
	n       int // words
	nonzero int // non-zero words
	varint  int // varint payload, counting the zeros' bytes
	sparse  int // sparse pairs, without the count
	last    int // index of the last non-zero word, -1 before the first
}

func newWordSizes(n int) wordSizes { return wordSizes{n: n, varint: n, last: -1} }

// add accounts for the non-zero word v at index i, after those before it.
func (s *wordSizes) add(i int, v uint64) {
	gap := i
	if s.last >= 0 {
		gap = i - s.last - 1
	}
	s.nonzero++
	s.varint += uvarintLen(v) - 1
	s.sparse += uvarintLen(uint64(gap)) + uvarintLen(v)
	s.last = i
}

// mode returns the canonical mode.
func (s *wordSizes) mode() byte {
	fixed, varint, sparse := 8*s.n, s.varint, s.sparse+uvarintLen(uint64(s.nonzero))
	switch {
	case fixed <= varint && fixed <= sparse:
		return wordsFixed
	case varint <= sparse:
		return wordsVarint
	}
	return wordsSparse
}

// appendWords appends the canonical encoding of w.
func appendWords(b []byte, w []uint64) []byte {
	s := newWordSizes(len(w))
	for i, v := range w {
		if v != 0 {
			s.add(i, v)
		}
	}
	mode := s.mode()
	b = append(b, mode)
	switch mode {
	case wordsFixed:
		for _, v := range w {
			b = binary.BigEndian.AppendUint64(b, v)
		}
	case wordsVarint:
		for _, v := range w {
			b = binary.AppendUvarint(b, v)
		}
	default:
		b = binary.AppendUvarint(b, uint64(s.nonzero))
		last := -1
		for i, v := range w {
			if v != 0 {
				b = binary.AppendUvarint(b, uint64(i-last-1))
				b = binary.AppendUvarint(b, v)
				last = i
			}
		}
	}
	return b
}

// readWords decodes an array of n words written by appendWords and calls
// visit with each non-zero word in index order. It rejects an encoding that
// is not canonical. visit may reject a word by returning an error, which
// readWords returns unchanged.
func (r *reader) readWords(what string, n int, visit func(i int, v uint64) error) error {
	start := r.off
	mode, err := r.u8()
	if err != nil {
		return err
	}
	s := newWordSizes(n)
	one := func(i int, v uint64) error {
		if v == 0 {
			return nil
		}
		s.add(i, v)
		return visit(i, v)
	}
	switch mode {
	case wordsFixed:
		if err := r.need(8 * uint64(n)); err != nil {
			return err
		}
		for i := range n {
			v, _ := r.u64()
			if err := one(i, v); err != nil {
				return err
			}
		}
	case wordsVarint:
		if err := r.need(uint64(n)); err != nil {
			return err
		}
		for i := range n {
			v, err := r.uvarint()
			if err != nil {
				return err
			}
			if err := one(i, v); err != nil {
				return err
			}
		}
	case wordsSparse:
		c, err := r.count(what+" non-zero words", uint64(n), 2)
		if err != nil {
			return err
		}
		next := uint64(0) // smallest index the next word may have
		for range c {
			gap, err := r.uvarint()
			if err != nil {
				return err
			}
			if gap >= uint64(n)-next {
				return r.errorf(ErrCorrupt, "%s: word index %d+%d beyond %d words", what, next, gap, n)
			}
			i := next + gap
			v, err := r.uvarint()
			if err != nil {
				return err
			}
			if v == 0 {
				return r.errorf(ErrCorrupt, "%s: sparse word %d is zero", what, i)
			}
			if err := one(int(i), v); err != nil {
				return err
			}
			next = i + 1
		}
	default:
		r.off = start
		return r.errorf(ErrCorrupt, "%s: word array mode %d", what, mode)
	}
	if want := s.mode(); mode != want {
		r.off = start
		return r.errorf(ErrCorrupt, "%s: word array in mode %d, canonical mode is %d", what, mode, want)
	}
	return nil
}
