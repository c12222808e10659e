package sketch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// codec is one sketch type's decoder and encoder over byte slices, so that
// the encoding tests run over every type alike.
type codec struct {
	name string
	// samples returns small encodings of the type: empty and filled
	// sketches of a few configurations.
	samples func() [][]byte
	// decode decodes data into a fresh receiver and returns its
	// re-encoding.
	decode func(data []byte) ([]byte, error)
	// receiver returns a filled receiver, its decode function and its
	// encoder, to check that a failed decode leaves it unchanged.
	receiver func() (decode func([]byte) error, encode func() []byte)
}

// fill feeds n pseudo-random hashes (from seed) to insert.
func fill(seed uint64, n int, insert func(h uint64, i int)) {
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := range n {
		insert(rng.Uint64(), i)
	}
}

func must[T any](x T, err error) T {
	if err != nil {
		panic(err)
	}
	return x
}

func encOf(s encoder) []byte { return must(s.MarshalBinary()) }

func keyedEncOf(s interface {
	AppendBinary([]byte, func(uint32, []byte) []byte) ([]byte, error)
}) []byte {
	return must(s.AppendBinary(nil, appendUint32))
}

func lcSamples() []*LinearCounting {
	a := must(NewLinearCounting(LinearCountingConfig{Bits: 64, Seed: 5}))
	b := must(NewLinearCounting(LinearCountingConfig{Bits: 1024, Seed: 5}))
	fill(1, 100, func(h uint64, _ int) { b.Insert(h) })
	c := must(NewLinearCounting(LinearCountingConfig{Bits: 256}))
	fill(2, 2000, func(h uint64, _ int) { c.Insert(h) })
	return []*LinearCounting{a, b, c}
}

func distinctSamples() []*Distinct {
	a := must(NewDistinct(DistinctConfig{Bits: 64, HLLPrecision: 4, Seed: 5}))
	b := must(NewDistinct(DistinctConfig{Bits: 256, HLLPrecision: 6}))
	fill(3, 50, func(h uint64, _ int) { b.Insert(h) })
	c := must(NewDistinct(DistinctConfig{Bits: 64, HLLPrecision: 7}))
	fill(4, 3000, func(h uint64, _ int) { c.Insert(h) })
	return []*Distinct{a, b, c}
}

func countMinSamples() []*CountMin {
	a := must(NewCountMin(CountMinConfig{Depth: 1, Width: 2, Seed: 5}))
	b := must(NewCountMin(CountMinConfig{Depth: 3, Width: 16}))
	fill(5, 40, func(h uint64, i int) { b.Add(h, uint64(i*i)) })
	c := must(NewCountMin(CountMinConfig{Depth: 2, Width: 8, Conservative: true}))
	fill(6, 40, func(h uint64, i int) { c.Add(h%5, uint64(1+i)) })
	d := must(NewCountMin(CountMinConfig{Depth: 2, Width: 4}))
	fill(7, 40, func(h uint64, i int) { d.Add(h, h) }) // counters that wrap
	return []*CountMin{a, b, c, d}
}

func topKSamples() []*TopK[uint32] {
	a := must(NewTopK[uint32](TopKConfig{K: 1, Capacity: 8, Seed: 5}))
	b := must(NewTopK[uint32](TopKConfig{K: 4, Capacity: 16}))
	fill(8, 60, func(h uint64, i int) { k := uint32(h % 23); b.Update(testHash(k), k, uint64(1+i%7)) })
	c := must(NewTopK[uint32](TopKConfig{K: 2, Capacity: 16}))
	fill(9, 5, func(h uint64, i int) { c.Update(h, uint32(i), 1<<40) })
	return []*TopK[uint32]{a, b, c}
}

func quantileSamples() []*Quantile {
	a := must(NewQuantile(QuantileConfig{RelativeAccuracy: 0.25, MinValue: 1, MaxValue: 4}))
	b := must(NewQuantile(QuantileConfig{RelativeAccuracy: 0.1, MinValue: 1, MaxValue: 1000}))
	for _, v := range []float64{-3, 0, 0.5, 1, 1.5, 2, 100, 999, 1024, 5000, math.Inf(1)} {
		b.Add(v)
	}
	c := must(NewQuantile(QuantileConfig{RelativeAccuracy: 0.05, MinValue: 1e-3, MaxValue: 1}))
	c.Add(0.25)
	d := must(NewQuantile(QuantileConfig{RelativeAccuracy: 0.05, MinValue: 1e-3, MaxValue: 1}))
	d.Add(math.Inf(-1))
	d.Add(0.125)
	return []*Quantile{a, b, c, d}
}

// encodings maps a slice of sketches to their encodings.
func encodings[S any](ss []S, enc func(S) []byte) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, enc(s))
	}
	return out
}

// codecs are the codecs of every sketch type.
var codecs = []codec{{
	name:    "linear counting",
	samples: func() [][]byte { return encodings(lcSamples(), func(s *LinearCounting) []byte { return encOf(s) }) },
	decode: func(data []byte) ([]byte, error) {
		var s LinearCounting
		err := s.UnmarshalBinary(data)
		return reencode(err, &s)
	},
	receiver: func() (func([]byte) error, func() []byte) {
		s := lcSamples()[1]
		return s.UnmarshalBinary, func() []byte { return encOf(s) }
	},
}, {
	name:    "distinct",
	samples: func() [][]byte { return encodings(distinctSamples(), func(s *Distinct) []byte { return encOf(s) }) },
	decode: func(data []byte) ([]byte, error) {
		var s Distinct
		err := s.UnmarshalBinary(data)
		return reencode(err, &s)
	},
	receiver: func() (func([]byte) error, func() []byte) {
		s := distinctSamples()[1]
		return s.UnmarshalBinary, func() []byte { return encOf(s) }
	},
}, {
	name:    "count-min",
	samples: func() [][]byte { return encodings(countMinSamples(), func(s *CountMin) []byte { return encOf(s) }) },
	decode: func(data []byte) ([]byte, error) {
		var s CountMin
		err := s.UnmarshalBinary(data)
		return reencode(err, &s)
	},
	receiver: func() (func([]byte) error, func() []byte) {
		s := countMinSamples()[1]
		return s.UnmarshalBinary, func() []byte { return encOf(s) }
	},
}, {
	name: "top-k",
	samples: func() [][]byte {
		return encodings(topKSamples(), func(s *TopK[uint32]) []byte { return keyedEncOf(s) })
	},
	decode: func(data []byte) ([]byte, error) {
		var s TopK[uint32]
		if err := s.UnmarshalBinary(data, 4, readUint32); err != nil {
			return nil, err
		}
		return s.AppendBinary(nil, appendUint32)
	},
	receiver: func() (func([]byte) error, func() []byte) {
		s := topKSamples()[1]
		return func(d []byte) error { return s.UnmarshalBinary(d, 4, readUint32) }, func() []byte { return keyedEncOf(s) }
	},
}, {
	name:    "quantile",
	samples: func() [][]byte { return encodings(quantileSamples(), func(s *Quantile) []byte { return encOf(s) }) },
	decode: func(data []byte) ([]byte, error) {
		var s Quantile
		err := s.UnmarshalBinary(data)
		return reencode(err, &s)
	},
	receiver: func() (func([]byte) error, func() []byte) {
		s := quantileSamples()[1]
		return s.UnmarshalBinary, func() []byte { return encOf(s) }
	},
}}

// reencode returns the encoding of s after a decode that returned err.
func reencode(err error, s encoder) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return s.MarshalBinary()
}

// checkDecode decodes data with c and checks the contract: a successful
// decode re-encodes to data (the encoding is canonical); a failed one wraps
// ErrCorrupt and leaves a filled receiver unchanged.
func checkDecode(t *testing.T, c codec, data []byte) error {
	t.Helper()
	got, err := c.decode(data)
	if err == nil {
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: decoded %x, re-encoded %x", c.name, data, got)
		}
		return nil
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: decode %x: %v does not wrap ErrCorrupt", c.name, data, err)
	}
	dec, enc := c.receiver()
	before := enc()
	if err2 := dec(data); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("%s: decode %x into a filled receiver: %v, into an empty one: %v", c.name, data, err2, err)
	}
	if !bytes.Equal(before, enc()) {
		t.Fatalf("%s: failed decode of %x changed the receiver", c.name, data)
	}
	return err
}

// TestRoundTrip decodes every sample encoding into an empty receiver and
// into a filled one of other dimensions, and checks that it re-encodes to
// the same bytes.
func TestRoundTrip(t *testing.T) {
	for _, c := range codecs {
		for i, data := range c.samples() {
			if err := checkDecode(t, c, data); err != nil {
				t.Errorf("%s sample %d: %v", c.name, i, err)
			}
			dec, enc := c.receiver()
			if err := dec(data); err != nil {
				t.Fatalf("%s sample %d into a filled receiver: %v", c.name, i, err)
			}
			if got := enc(); !bytes.Equal(got, data) {
				t.Errorf("%s sample %d into a filled receiver re-encodes to %x, want %x", c.name, i, got, data)
			}
		}
	}
}

// TestRoundTripState checks that decoded sketches answer like the originals.
func TestRoundTripState(t *testing.T) {
	for _, s := range distinctSamples() {
		var d Distinct
		if err := d.UnmarshalBinary(encOf(s)); err != nil {
			t.Fatal(err)
		}
		if d.Estimate() != s.Estimate() || d.HyperLogLog() != s.HyperLogLog() {
			t.Errorf("distinct estimate %+v, want %+v", d.Estimate(), s.Estimate())
		}
	}
	for _, s := range countMinSamples() {
		var c CountMin
		if err := c.UnmarshalBinary(encOf(s)); err != nil {
			t.Fatal(err)
		}
		fill(5, 40, func(h uint64, _ int) {
			if c.Estimate(h) != s.Estimate(h) {
				t.Errorf("count-min estimate of %#x: %d, want %d", h, c.Estimate(h), s.Estimate(h))
			}
		})
		if c.Total() != s.Total() || c.Depth() != s.Depth() || c.Width() != s.Width() {
			t.Errorf("count-min %d×%d total %d, want %d×%d total %d", c.Depth(), c.Width(), c.Total(), s.Depth(), s.Width(), s.Total())
		}
	}
	for _, s := range topKSamples() {
		var x TopK[uint32]
		if err := x.UnmarshalBinary(keyedEncOf(s), 4, readUint32); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.Top(nil), x.Top(nil)); diff != "" {
			t.Errorf("top-k Top (-want +got):\n%s", diff)
		}
	}
	for _, s := range quantileSamples() {
		var q Quantile
		if err := q.UnmarshalBinary(encOf(s)); err != nil {
			t.Fatal(err)
		}
		for _, p := range []float64{0, 0.3, 0.5, 0.9, 1} {
			if g, w := q.Quantile(p), s.Quantile(p); g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Errorf("quantile %g: %g, want %g", p, g, w)
			}
		}
		if q.Count() != s.Count() || q.Min() != s.Min() || q.Max() != s.Max() {
			t.Errorf("quantile count/min/max %d %g %g, want %d %g %g", q.Count(), q.Min(), q.Max(), s.Count(), s.Min(), s.Max())
		}
	}
}

// TestPrefixes checks that every proper prefix of every sample encoding is
// rejected as truncated, leaving the receiver unchanged.
func TestPrefixes(t *testing.T) {
	for _, c := range codecs {
		for i, data := range c.samples() {
			for n := range len(data) {
				if err := checkDecode(t, c, data[:n]); !errors.Is(err, ErrTruncated) {
					t.Errorf("%s sample %d, prefix of %d of %d bytes: %v, want ErrTruncated", c.name, i, n, len(data), err)
				}
			}
		}
	}
}

// TestCorrupt checks that damaged encodings are rejected with ErrCorrupt
// (and not as truncated), leaving the receiver unchanged.
func TestCorrupt(t *testing.T) {
	// set returns data with byte i set to v.
	set := func(data []byte, i int, v byte) []byte {
		d := bytes.Clone(data)
		d[i] = v
		return d
	}
	common := func(data []byte) map[string][]byte {
		return map[string][]byte{
			"version":       set(data, 0, 2),
			"kind":          set(data, 1, data[1]%6+1),
			"hash version":  set(data, 2, HashVersion+1),
			"trailing byte": append(bytes.Clone(data), 0),
		}
	}
	lc := encOf(lcSamples()[1]) // 1024 bits, 100 hashes: sparse words
	ds := distinctSamples()[1]
	dst := encOf(ds)
	distinctPOff := len(ds.lc.appendBody(appendHeader(nil, kindDistinct, ds.lc.seed))) // the precision byte
	cm := encOf(countMinSamples()[1])
	tk := keyedEncOf(topKSamples()[2]) // 5 entries of 1<<40
	qu := encOf(quantileSamples()[2])  // one value
	cases := map[string]map[string][]byte{
		"linear counting": {
			"bits 2^5":       set(lc, 11, 5),
			"bits 2^29":      set(lc, 11, 29),
			"word mode":      set(lc, 12, 3),
			"fixed mode":     append(append(lc[:12:12], 0), make([]byte, 8*16)...),
			"varint zeros":   append(append(lc[:12:12], 1), make([]byte, 16)...),
			"sparse zero":    append(lc[:12:12], 2, 1, 0, 0),
			"sparse beyond":  append(lc[:12:12], 2, 1, 16, 1),
			"sparse count":   append(lc[:12:12], 2, 17),
			"long uvarint":   append(lc[:12:12], 2, 1, 0x80, 0, 1),
			"uvarint > 2^64": append(lc[:12:12], 2, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
		},
		"distinct": {
			"bits 2^30":    set(dst, 11, 30),
			"precision 3":  set(dst, distinctPOff, 3),
			"precision 19": set(dst, distinctPOff, 19),
			"register":     append(append(dst[:len(dst)-1:len(dst)-1], 60), 0),
		},
		"count-min": {
			"depth 0":      set(cm, 11, 0),
			"depth 17":     set(cm, 11, 17),
			"width 2^0":    set(cm, 12, 0),
			"cells":        set(cm, 12, 24),
			"flags":        set(cm, 13, 2),
			"total":        set(cm, 14, cm[14]^1),
			"row sum":      cmRowSum(),
			"conservative": cmConservative(),
		},
		"top-k": {
			"k 0":         set(tk, 11, 0),
			"k 17":        set(tk, 11, 17),
			"buckets":     set(tk, 12, 22),
			"key length":  set(tk, 13, 8),
			"entries":     set(tk, 14, 17),
			"entry index": set(tk, 15, 16),
			"bucket":      set(tk, 16, tk[16]^0x80),
			"count 0":     append(append(tk[:24:24], 0), tk[30:]...), // the first count, 1<<40, is 6 bytes at 24
			"error":       topKEdit(func(b *topKBucket[uint32], i int) { b.errs[i] = b.counts[i] }),
			"same hash": topKEdit(func(b *topKBucket[uint32], i int) {
				b.hashes[i^1], b.counts[i^1], b.keys[i^1] = b.hashes[i], 1, b.keys[i]
			}),
		},
		"quantile": {
			"seed":          set(qu, 10, 1),
			"sub 0":         set(qu, 11, 0),
			"octaves 0":     set(qu, 12, 0),
			"emin":          set(qu, 13, 0x7f),
			"min":           set(qu, len(qu)-16+1, qu[len(qu)-16+1]^0x40),
			"max":           set(qu, len(qu)-1, qu[len(qu)-1]^1),
			"min above max": quantileEdit(1, func(q *Quantile) { q.min, q.max = q.max, q.min }),
			"min bucket":    quantileEdit(2, func(q *Quantile) { q.min, q.max = 0.3, 0.3 }),
			"max bucket":    quantileEdit(1, func(q *Quantile) { q.max = 500 }),
			"one value":     quantileEdit(2, func(q *Quantile) { q.min = 0.2501 }),
			"negative zero": quantileEdit(1, func(q *Quantile) { q.min = math.Copysign(0, -1) }),
			"nan":           append(qu[:len(qu)-8:len(qu)-8], 0x7f, 0xf8, 0, 0, 0, 0, 0, 0),
		},
	}
	for _, c := range codecs {
		var sample []byte
		switch c.name {
		case "linear counting":
			sample = lc
		case "distinct":
			sample = dst
		case "count-min":
			sample = cm
		case "top-k":
			sample = tk
		case "quantile":
			sample = qu
		}
		if err := checkDecode(t, c, sample); err != nil {
			t.Fatalf("%s: sample: %v", c.name, err)
		}
		all := common(sample)
		for k, v := range cases[c.name] {
			all[k] = v
		}
		for name, data := range all {
			err := checkDecode(t, c, data)
			t.Logf("%s, %s: %v", c.name, name, err)
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated) {
				t.Errorf("%s, %s: %v, want ErrCorrupt", c.name, name, err)
			}
		}
	}
}

// topKEdit returns the encoding of topKSamples()[2] after edit changed the
// first entry i of its first occupied bucket b.
func topKEdit(edit func(b *topKBucket[uint32], i int)) []byte {
	x := topKSamples()[2]
	for bi := range x.buckets {
		b := &x.buckets[bi]
		if i := slices.IndexFunc(b.counts[:], func(c uint64) bool { return c != 0 }); i >= 0 {
			edit(b, i)
			break
		}
	}
	return keyedEncOf(x)
}

// quantileEdit returns the encoding of quantileSamples()[i] after edit.
func quantileEdit(i int, edit func(q *Quantile)) []byte {
	q := quantileSamples()[i]
	edit(q)
	return encOf(q)
}

// cmRowSum returns the encoding of a Count-Min whose first row does not sum
// to the total.
func cmRowSum() []byte {
	c := countMinSamples()[1]
	c.counters[0]++
	c.total += uint64(c.Width()) // not a multiple of what one row gains
	return encOf(c)
}

// cmConservative returns the encoding of a conservative Count-Min whose row
// sums exceed the total.
func cmConservative() []byte {
	c := countMinSamples()[2]
	c.counters[0] += c.total + 1
	return encOf(c)
}

// TestLinearCountingBytes checks an encoding written out by hand: 64 bits,
// seed 1, bits 0 and 5 set.
func TestLinearCountingBytes(t *testing.T) {
	l := must(NewLinearCounting(LinearCountingConfig{Bits: 64, Seed: 1}))
	l.Insert(0)
	l.Insert(5 << 58)
	l.Insert(5<<58 | 12345) // the same bit
	want := []byte{
		1, 1, HashVersion, 0, 0, 0, 0, 0, 0, 0, 1, // header: version, kind, hash version, seed
		6,       // log2 bits
		1, 0x21, // one word, varint mode (1 byte, against 8 fixed and 3 sparse)
	}
	if got := encOf(l); !bytes.Equal(got, want) {
		t.Errorf("encoding %x, want %x", got, want)
	}
	if z := l.Zeros(); z != 62 {
		t.Errorf("Zeros = %d, want 62", z)
	}
}

// TestWords checks the word array codec's choice of mode and its round trip
// over arrays of various densities.
func TestWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, c := range []struct {
		name string
		gen  func(i int) uint64
		mode byte
	}{
		{"zeros", func(int) uint64 { return 0 }, wordsSparse},
		{"one", func(i int) uint64 { return uint64(i / 99) }, wordsSparse},
		{"small", func(i int) uint64 { return uint64(1 + i%100) }, wordsVarint},
		{"random", func(int) uint64 { return rng.Uint64() }, wordsFixed},
		{"tenth", func(int) uint64 {
			if rng.IntN(10) == 0 {
				return rng.Uint64() >> 40
			}
			return 0
		}, wordsSparse},
	} {
		w := make([]uint64, 100)
		for i := range w {
			w[i] = c.gen(i)
		}
		b := appendWords([]byte{0xAA}, w)
		if b[0] != 0xAA || b[1] != c.mode {
			t.Errorf("%s: mode %d, want %d", c.name, b[1], c.mode)
		}
		r := &reader{data: b, off: 1, kind: kindCountMin}
		got := fillWords(r, nil, len(w))
		if !slices64Equal(got, w) || r.off != len(b) {
			t.Errorf("%s: round trip %v, want %v", c.name, got, w)
		}
	}
}

func slices64Equal(a, b []uint64) bool { return cmp.Equal(a, b) }

// TestUnmarshalKeyCodec checks the key-length checks of the key-carrying
// sketches.
func TestUnmarshalKeyCodec(t *testing.T) {
	tk := topKSamples()[1]
	var x TopK[uint32]
	if err := x.UnmarshalBinary(keyedEncOf(tk), 8, readUint32); !errors.Is(err, ErrCorrupt) {
		t.Errorf("top-k with the wrong key length: %v", err)
	}
	bad := func(k uint32, b []byte) []byte {
		if k == 0 {
			return b
		}
		return binary.BigEndian.AppendUint32(b, k)
	}
	if _, err := tk.AppendBinary(nil, bad); !errors.Is(err, ErrKeyCodec) {
		t.Errorf("top-k with a variable-length codec: %v", err)
	}
}

// TestRetiredJitterKind checks that kind 6, the jitter detector's, stays
// reserved: an encoding the detector wrote (an empty one, seed 5, 4-byte
// keys) and a header of kind 6 on any other sketch's body are rejected by
// every decoder as corrupt, naming the retired kind.
func TestRetiredJitterKind(t *testing.T) {
	if kindJitterRetired != 6 || kindQuantile != 5 {
		t.Fatalf("kind numbers moved: jitter %d, quantile %d", kindJitterRetired, kindQuantile)
	}
	jitter := []byte("\x01\x06\x01\x00\x00\x00\x00\x00\x00\x00\x05A\xcd\xcde\x00\x00\x00\x00A\xcd\xcde\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x04\x00\x00\x00")
	for _, c := range codecs {
		relabelled := bytes.Clone(c.samples()[0])
		relabelled[1] = 6
		for name, data := range map[string][]byte{"jitter encoding": jitter, "relabelled " + c.name: relabelled} {
			err := checkDecode(t, c, data)
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "retired jitter") {
				t.Errorf("%s: decode %s: %v, want ErrCorrupt naming the retired jitter kind", c.name, name, err)
			}
		}
	}
}
