// Package sketch holds the bounded-memory, mergeable summaries rocescope
// keeps per window: distinct flows ([LinearCounting], and [Distinct], which
// adds HyperLogLog past Linear Counting's range), weights per flow
// ([CountMin]), the heaviest flows ([TopK]) and latency quantiles
// ([Quantile]).
//
// # Hashing
//
// A flow key is hashed once per packet with [Hash] under a seed (normally
// [DefaultSeed]); every sketch takes that 64-bit hash and derives what it
// needs from it (bit index, row indexes, bucket) without hashing again.
// Hash's algorithm is fixed by [HashVersion], which every encoding records,
// so sketches written by different hosts or versions combine only when they
// were filled with the same hash function and seed.
//
// # Lifetime and concurrency
//
// The sketches are single-writer values: none is safe for concurrent use,
// and none may be copied after first use (use Clone). A sketch is allocated
// once, by its constructor (NewX, whose zero config selects the defaults) or
// by UnmarshalBinary, and is reused across windows with Reset, which keeps
// its memory. Every sketch tracks whether anything was added, merged or
// decoded into it since the last Reset, so that Reset costs O(1) on a
// sketch left empty, such as those of the windows of an idle link, and a
// Merge of an empty sketch returns at once. A zero value is not a usable
// sketch, only a receiver for UnmarshalBinary: the update methods stay free
// of the check that would cost them their inlining. The update methods
// (Insert, Add, AddNanos, Update) do not allocate.
//
// # Merging
//
// Merge adds another sketch of the same kind into the receiver. It checks
// that the two have the same dimensions and seed, and otherwise returns an
// error wrapping [ErrIncompatible] without changing the receiver.
// [LinearCounting], [Distinct], [CountMin] (standard update) and [Quantile]
// merge exactly: the merge of the sketches of two streams equals, byte for
// byte, the sketch of the concatenated stream. [TopK] merges within its
// stated error bounds; conservative [CountMin] merges to an overestimate.
//
// # Encoding
//
// Every sketch has AppendBinary, MarshalBinary and UnmarshalBinary (the
// key-carrying [TopK] takes a key codec instead of implementing
// encoding.BinaryMarshaler). An encoding starts with an 11-byte header:
// the encoding version (1), the kind, [HashVersion] and the seed
// (big-endian); the dimensions follow, then the state. Arrays of counters
// are written in the shortest of three forms (fixed 8-byte words, uvarints,
// or sparse index-gap and value pairs). Encodings are canonical: equal
// sketches encode to equal bytes, and the decoders accept only what the
// encoders write. UnmarshalBinary bounds every count of items by the bytes
// left before allocating, rejects trailing bytes, wraps [ErrCorrupt] (or
// [ErrTruncated], which wraps it) on bad input, never panics, and leaves the
// receiver unchanged on error. A large, mostly empty sketch has a short
// encoding, so decoding allocates the sketch's full size, which the
// dimension limits bound: 32 MiB for a Linear Counting bitmap
// (2^28 bits), 128 MiB for Count-Min ([MaxCountMinCells]), 64 MiB for a
// top-k of 40-byte keys ([MaxTopKCapacity]), 8 MiB for quantile buckets.
// Kind 6 was the jitter detector: its encodings are no longer written, the
// decoders reject them (ErrCorrupt), and the number is never reused.
//
// # Determinism
//
// Everything that is serialized or compared (bit and bucket indexes,
// counters, the Linear Counting estimate and its error, the quantile
// values) is computed with integer arithmetic or with explicitly rounded
// IEEE operations (no math.Log or math.Exp, whose results vary between
// architectures, and no fused multiply-add), so it is the same on every
// architecture. The HyperLogLog estimate is computed by
// github.com/axiomhq/hyperloglog, whose float code gives no such promise.
package sketch
