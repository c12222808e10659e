package metrics

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/sketch"
)

// FlowKey identifies a flow: one direction of a RoCE or InfiniBand
// connection, (source address, destination address, destination QP). The BTH
// carries only the destination QP; the source QP is learned separately. It is
// a comparable value without pointers (40 bytes).
type FlowKey struct {
	Src, Dst decode.Addr
	DQP      uint32
}

// Equal reports whether k and o are the same key, as k == o does, but in
// six loads a side: == compares the first 16 bytes inline and calls the
// runtime's memory comparison for the rest (1.2 % of a replay's samples,
// from the table's lookups). It reads the 38 bytes of the fields and skips
// the two padding bytes before DQP, whose contents Go leaves unspecified.
func (k *FlowKey) Equal(o *FlowKey) bool {
	a, b := unsafe.Pointer(k), unsafe.Pointer(o)
	return *(*[4]uint64)(a) == *(*[4]uint64)(b) &&
		*(*uint16)(unsafe.Add(a, 32)) == *(*uint16)(unsafe.Add(b, 32)) && k.DQP == o.DQP
}

// The layout Equal reads: 34 bytes of addresses from offset 0, DQP at 36.
// Either line fails to compile when the layout changes.
var (
	_ = [1]struct{}{}[unsafe.Offsetof(FlowKey{}.Dst)+unsafe.Sizeof(decode.Addr{})-34]
	_ = [1]struct{}{}[unsafe.Offsetof(FlowKey{}.DQP)-36]
)

// flowKeyLen is the length of the binary form of a FlowKey: two 16-byte
// addresses, their two kinds and the 24-bit QP in four bytes.
const flowKeyLen = 38

// appendBinary appends the binary form of k: Src (16 bytes), Dst (16), the
// two address kinds and DQP (big-endian uint32). The form is stable: it is
// hashed into serialized sketches and written into state files.
func (k FlowKey) appendBinary(b []byte) []byte {
	s, d := k.Src.As16(), k.Dst.As16()
	b = append(b, s[:]...)
	b = append(b, d[:]...)
	b = append(b, byte(k.Src.Kind()), byte(k.Dst.Kind()))
	return binary.BigEndian.AppendUint32(b, k.DQP)
}

// flowKeyFromBinary is the inverse of appendBinary; b holds at least
// flowKeyLen bytes.
func flowKeyFromBinary(b []byte) FlowKey {
	return FlowKey{
		Src: addrFrom(decode.AddrKind(b[32]), [16]byte(b[0:16])),
		Dst: addrFrom(decode.AddrKind(b[33]), [16]byte(b[16:32])),
		DQP: binary.BigEndian.Uint32(b[34:38]),
	}
}

// addrFrom rebuilds an address from its kind and 16 bytes.
func addrFrom(kind decode.AddrKind, b [16]byte) decode.Addr {
	switch kind {
	case decode.AddrIPv4:
		return decode.AddrFrom4([4]byte(b[12:16]))
	case decode.AddrIPv6:
		return decode.AddrFrom16(b)
	case decode.AddrGID:
		return decode.AddrFromGID(b)
	case decode.AddrLID:
		return decode.AddrFromLID(uint16(b[14])<<8 | uint16(b[15]))
	}
	return decode.Addr{}
}

// Hash returns the flow hash every sketch and the QP table use under seed:
// sketch.Hash of the key's binary form, computed from its words in place.
func (k *FlowKey) Hash(seed uint64) uint64 { return hashKey(&k.Src, &k.Dst, k.DQP, seed) }

// hashKey is Hash of the key (src, dst, dqp), for a key not in a FlowKey.
func hashKey(src, dst *decode.Addr, dqp uint32, seed uint64) uint64 {
	s0, s1 := src.Words()
	d0, d1 := dst.Words()
	// Bytes 32-37 of the binary form: the two kinds, then the QP
	// big-endian.
	t := uint64(src.Kind()) | uint64(dst.Kind())<<8 | uint64(bits.ReverseBytes32(dqp))<<16
	return sketch.Hash38(seed, s0, s1, d0, d1, t)
}

// connHash returns a hash that is the same for both directions of a
// connection: the two addresses combined without order, and the UDP source
// port, which RoCEv2 NICs derive from both QP numbers so that it is equal
// both ways. The engine shards on it so that a request and its response meet
// on one worker. sport is 0 for RoCEv1 and native InfiniBand. Which flows
// a full QP table tracks depends on the shard each lands on, so that the
// reports of a run whose flows overflow the table depend on this hash:
// changing it changes them.
func connHash(src, dst *decode.Addr, sport uint16) uint64 {
	// Each address is mixed on its own and the two are added, which is
	// symmetric in src and dst without the collisions a plain XOR of nearby
	// addresses would have.
	return mix64(mixAddr(src) + mixAddr(dst) + uint64(sport))
}

// mixAddr hashes the 16 bytes of an address into 64 bits, reading them in
// place.
func mixAddr(a *decode.Addr) uint64 {
	lo, hi := a.Words()
	return mix64(lo ^ mix64(hi))
}

// mix64 is the SplitMix64 finalizer: a bijective, well-mixed 64-bit hash.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}
