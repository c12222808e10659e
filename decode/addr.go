package decode

import (
	"encoding/binary"
	"net/netip"
	"strconv"
)

// AddrKind says what an [Addr] holds. The zero value, AddrNone, means no
// address.
type AddrKind uint8

// Address kinds.
const (
	AddrNone AddrKind = iota // no address
	AddrIPv4                 // RoCEv2 over IPv4
	AddrIPv6                 // RoCEv2 over IPv6
	AddrGID                  // InfiniBand GID from a GRH (RoCEv1, native IB)
	AddrLID                  // InfiniBand LID from an LRH without GRH
)

// Addr is the address of one end of a RoCE or InfiniBand flow: an IPv4 or
// IPv6 address, a 128-bit GID or a 16-bit LID. It is a small comparable value
// without pointers (17 bytes), usable as a map key and cheap to hash. The
// zero value is the "no address" value.
//
// IPv4 addresses are stored IPv4-mapped (::ffff:a.b.c.d) in the 16 bytes, so
// [Addr.As16] is the same form netip uses; LIDs are stored big-endian in the
// last two bytes.
type Addr struct {
	b    [16]byte
	kind AddrKind
}

// AddrFrom4 returns the IPv4 address a.
func AddrFrom4(a [4]byte) Addr {
	var x Addr
	x.b[10], x.b[11] = 0xff, 0xff
	copy(x.b[12:], a[:])
	x.kind = AddrIPv4
	return x
}

// AddrFrom16 returns the IPv6 address a.
func AddrFrom16(a [16]byte) Addr { return Addr{b: a, kind: AddrIPv6} }

// AddrFromGID returns the InfiniBand GID g.
func AddrFromGID(g [16]byte) Addr { return Addr{b: g, kind: AddrGID} }

// AddrFromLID returns the InfiniBand LID l.
func AddrFromLID(l uint16) Addr {
	var x Addr
	x.b[14], x.b[15] = byte(l>>8), byte(l)
	x.kind = AddrLID
	return x
}

// Kind reports what a holds. It reads a in place, as Words does: with a
// value receiver the compiler copies all 17 bytes to read one.
func (a *Addr) Kind() AddrKind { return a.kind }

// IsValid reports whether a holds an address.
func (a Addr) IsValid() bool { return a.kind != AddrNone }

// As16 returns the 16 address bytes: IPv4-mapped for IPv4, the GID for GIDs,
// the LID in the last two bytes for LIDs.
func (a Addr) As16() [16]byte { return a.b }

// Words returns the 16 bytes of As16 as two little-endian 64-bit words,
// bytes 0-7 and 8-15, read in place: a hash over the address needs no copy.
func (a *Addr) Words() (lo, hi uint64) {
	return binary.LittleEndian.Uint64(a.b[0:8]), binary.LittleEndian.Uint64(a.b[8:16])
}

// LID returns the LID of an AddrLID address, and 0 for other kinds.
func (a Addr) LID() uint16 {
	if a.kind != AddrLID {
		return 0
	}
	return uint16(a.b[14])<<8 | uint16(a.b[15])
}

// Netip returns a as a netip.Addr: the IPv4 or IPv6 address, or the GID in
// IPv6 form. LIDs and the zero Addr give the zero netip.Addr.
func (a Addr) Netip() netip.Addr {
	switch a.kind {
	case AddrIPv4:
		return netip.AddrFrom4([4]byte(a.b[12:]))
	case AddrIPv6, AddrGID:
		return netip.AddrFrom16(a.b)
	}
	return netip.Addr{}
}

// AppendTo appends the text form of a to b: dotted IPv4, RFC 5952 IPv6 (also
// for GIDs, as Wireshark shows them), "lid:N" for LIDs, nothing for the zero
// Addr.
func (a Addr) AppendTo(b []byte) []byte {
	switch a.kind {
	case AddrIPv4, AddrIPv6, AddrGID:
		return a.Netip().AppendTo(b)
	case AddrLID:
		return strconv.AppendUint(append(b, "lid:"...), uint64(a.LID()), 10)
	}
	return b
}

// String returns the text form of a; see [Addr.AppendTo].
func (a Addr) String() string { return string(a.AppendTo(nil)) }

// MarshalText implements encoding.TextMarshaler with the form of
// [Addr.AppendTo].
func (a Addr) MarshalText() ([]byte, error) { return a.AppendTo(nil), nil }
