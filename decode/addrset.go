package decode

import "encoding/binary"

// The setters below fill an Addr in place, as AddrFrom4, AddrFrom16,
// AddrFromGID and AddrFromLID would return it, with two 8-byte stores:
// assigning the returned value costs a store-forwarding stall on the copy.

// set4 sets a to the IPv4 address in the 4 bytes at ip.
func (a *Addr) set4(ip []byte) {
	binary.LittleEndian.PutUint64(a.b[0:8], 0)
	binary.LittleEndian.PutUint64(a.b[8:16], 0xffff<<16|uint64(binary.LittleEndian.Uint32(ip))<<32)
	a.kind = AddrIPv4
}

// set16 sets a to the 16-byte address at ip, of kind k.
func (a *Addr) set16(ip []byte, k AddrKind) {
	_ = ip[15]
	binary.LittleEndian.PutUint64(a.b[0:8], binary.LittleEndian.Uint64(ip[0:8]))
	binary.LittleEndian.PutUint64(a.b[8:16], binary.LittleEndian.Uint64(ip[8:16]))
	a.kind = k
}

// setGID sets a to the GID at gid.
func (a *Addr) setGID(gid []byte) { a.set16(gid, AddrGID) }

// setLID sets a to the LID l.
func (a *Addr) setLID(l uint16) {
	binary.BigEndian.PutUint64(a.b[0:8], 0)
	binary.BigEndian.PutUint64(a.b[8:16], uint64(l))
	a.kind = AddrLID
}
