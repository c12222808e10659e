package decode

import "encoding/binary"

// DefaultRoCEPort is the UDP destination port IANA assigned to RoCEv2.
const DefaultRoCEPort = 4791

// Decoder decodes frames into Packets. The zero value is ready to use and
// decodes RoCEv2 on UDP destination port 4791. Decoding never modifies a
// Decoder, so one Decoder may serve any number of goroutines, each with its
// own Packet.
type Decoder struct {
	// RoCEPort is the UDP destination port that carries RoCEv2; 0 means
	// DefaultRoCEPort. Only the destination port counts: a datagram from
	// port 4791 to another port is not RoCEv2.
	RoCEPort uint16
}

// port returns the UDP destination port that carries RoCEv2.
func (d *Decoder) port() uint16 {
	if d.RoCEPort == 0 {
		return DefaultRoCEPort
	}
	return d.RoCEPort
}

// defaultDecoder serves [Packet.Decode].
var defaultDecoder Decoder

// Supported reports whether the decoder understands frames of link type
// link. Decoding any other link type fails with ErrLinkType.
func Supported(link LinkType) bool {
	switch link {
	case LinkNull, LinkEthernet, LinkRaw, LinkIPv4, LinkIPv6, LinkLinuxSLL,
		LinkLinuxSLL2, LinkERF, LinkInfiniBand:
		return true
	}
	return false
}

// Decode decodes frame, of link type link, into p with the default
// Decoder (RoCEv2 on UDP port 4791). See [Decoder.Decode].
func (p *Packet) Decode(frame []byte, link LinkType) error {
	return defaultDecoder.Decode(p, frame, link)
}

// Decode decodes frame, of link type link, into p, and returns nil or an
// [Error] (also stored in p.Err).
//
// It resets p first: Headers, Kind, Err, PayloadLen and Payload always, and
// every other field whenever the bit of its header is set in p.Headers; a
// field whose header bit is clear keeps stale bytes and must not be read.
// Payload aliases frame. Decode reads only inside frame, never allocates and
// never panics, whatever the bytes.
//
// A frame that ends before a header it announces returns ErrTruncated with
// the headers before the cut decoded; a payload cut short by the capture's
// snap length is not an error (PayloadLen stays the on-wire length and
// HasICRC is clear). Frames that are neither RoCE, InfiniBand nor pause
// frames decode with a nil error and KindOther.
func (d *Decoder) Decode(p *Packet, frame []byte, link LinkType) error {
	p.Headers, p.Kind, p.Err, p.PayloadLen, p.Payload = 0, KindOther, 0, 0, nil
	port := d.port()
	var e Error
	switch link {
	case LinkEthernet:
		if e, ok := p.fastRoCEv2(frame, port); ok {
			if e != 0 {
				p.Err = e
				return e
			}
			return nil
		}
		e = p.ethernet(frame, port)
	case LinkNull:
		e = p.null(frame, port)
	case LinkRaw:
		e = p.rawIP(frame, port)
	case LinkIPv4:
		e = p.ipv4(frame, port)
	case LinkIPv6:
		e = p.ipv6(frame, port)
	case LinkLinuxSLL:
		e = p.sll(frame, port)
	case LinkLinuxSLL2:
		e = p.sll2(frame, port)
	case LinkERF:
		e = p.erf(frame, port)
	case LinkInfiniBand:
		e = p.lrh(frame)
	default:
		e = ErrLinkType
	}
	if e != 0 {
		p.Err = e
		return e
	}
	return nil
}

// DecodeTransport decodes b as one InfiniBand transport packet: a BTH, the
// extension headers its opcode implies, payload, pad and ICRC, all of it
// present (as in the UDP payload of a RoCEv2 datagram). It resets p as
// [Decoder.Decode] does, sets only the transport fields and leaves Kind
// KindOther, since the encapsulation is unknown. It returns nil or an Error
// (ErrUDP when b is too short for the headers its opcode implies).
func (p *Packet) DecodeTransport(b []byte) error {
	p.Headers, p.Kind, p.Err, p.PayloadLen, p.Payload = 0, KindOther, 0, 0, nil
	if e := p.transport(b, len(b), ErrUDP); e != 0 {
		p.Err = e
		return e
	}
	return nil
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
func be64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// Ethertypes and IP protocols the decoder follows.
const (
	etherTypeIPv4       = 0x0800
	etherTypeIPv6       = 0x86DD
	etherTypeVLAN       = 0x8100
	etherTypeQinQ       = 0x88A8
	etherTypeQinQOld    = 0x9100
	etherTypeRoCEv1     = 0x8915
	etherTypeMACControl = 0x8808

	protoUDP = 17
	protoGRE = 47
)

// roceFrame locates the headers of a frame of the most common shape:
// Ethernet, with one 802.1Q tag or none, then IPv4 without options or
// fragmentation or IPv6 without extension headers, then UDP to the RoCE
// port, with a UDP length the IP length holds.
type roceFrame struct {
	l3   int    // offset of the IP header
	hl   int    // its length: 20 (IPv4) or 40 (IPv6)
	ulen int    // the UDP length
	et   uint16 // the ethertype after the tag
}

// roceShape reports whether b is a frame of that shape, and where its
// headers are.
func roceShape(b []byte, port uint16) (s roceFrame, ok bool) {
	if len(b) < 14 {
		return s, false
	}
	s.l3, s.et = 14, be16(b[12:14])
	if s.et == etherTypeVLAN {
		if len(b) < 18 {
			return s, false
		}
		s.l3, s.et = 18, be16(b[16:18])
	}
	l3 := b[s.l3:]
	var ipLen int // the length the IP header says follows it
	switch s.et {
	case etherTypeIPv4:
		if len(l3) < 20+8 || l3[0] != 0x45 || l3[9] != protoUDP || be16(l3[6:8])&0x3fff != 0 {
			return s, false
		}
		s.hl, ipLen = 20, int(be16(l3[2:4]))-20
	case etherTypeIPv6:
		if len(l3) < 40+8 || l3[0]>>4 != 6 || l3[6] != protoUDP {
			return s, false
		}
		s.hl, ipLen = 40, int(be16(l3[4:6]))
	default:
		return s, false
	}
	u := l3[s.hl:]
	s.ulen = int(be16(u[4:6]))
	return s, be16(u[2:4]) == port && s.ulen >= 8 && s.ulen <= ipLen
}

// fastRoCEv2 decodes the frames roceShape takes at their fixed offsets. It
// uses the general path's field setters and transport decoder, and reports
// ok false, having written nothing, for any frame of another shape, which
// the general path then decodes.
func (p *Packet) fastRoCEv2(b []byte, port uint16) (e Error, ok bool) {
	s, ok := roceShape(b, port)
	if !ok {
		return 0, false
	}
	l3 := b[s.l3:]
	p.setEthernet(b)
	p.Headers, p.Kind = HasEthernet|HasUDP, KindRoCEv2
	p.NumVLAN, p.EtherType = 0, s.et
	if s.l3 == 18 {
		p.addVLAN(be16(b[14:16]))
	}
	if s.hl == 20 {
		p.setIPv4(l3)
		p.Headers |= HasIPv4
	} else {
		p.setIPv6(l3)
		p.Headers |= HasIPv6
	}
	u := l3[s.hl:]
	p.setUDP(u)
	return p.transport(u[8:], s.ulen-8, ErrUDP), true
}

// setEthernet fills the addresses of the Ethernet header at b; the caller
// sets HasEthernet.
func (p *Packet) setEthernet(b []byte) {
	p.DstMAC = [6]byte(b[0:6])
	p.SrcMAC = [6]byte(b[6:12])
}

// ethernet decodes an Ethernet II frame.
func (p *Packet) ethernet(b []byte, port uint16) Error {
	if len(b) < 14 {
		return ErrTruncated
	}
	p.setEthernet(b)
	p.Headers |= HasEthernet
	return p.etherType(be16(b[12:14]), b[14:], port)
}

// etherType decodes the 802.1Q/802.1ad tags at the start of b when et is a
// tag protocol, then what the innermost ethertype announces.
func (p *Packet) etherType(et uint16, b []byte, port uint16) Error {
	p.NumVLAN = 0
	for et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeQinQOld {
		if len(b) < 4 {
			p.EtherType = et
			return ErrTruncated
		}
		p.addVLAN(be16(b))
		et = be16(b[2:4])
		b = b[4:]
	}
	p.EtherType = et
	switch et {
	case etherTypeIPv4:
		return p.ipv4(b, port)
	case etherTypeIPv6:
		return p.ipv6(b, port)
	case etherTypeRoCEv1:
		return p.rocev1(b)
	case etherTypeMACControl:
		return p.macControl(b)
	}
	return 0
}

// addVLAN records the next of the frame's 802.1Q/802.1ad tags, whose tag
// control information is tci.
func (p *Packet) addVLAN(tci uint16) {
	n := p.NumVLAN
	if n == 0 {
		p.PCP = uint8(tci >> 13)
		p.Headers |= HasVLAN
	}
	if n < uint8(len(p.VLANs)) {
		p.VLANs[n] = tci & 0x0fff
	}
	if n < 255 {
		p.NumVLAN = n + 1
	}
}

// sll decodes a Linux cooked capture (v1) header: packet type, ARPHRD type,
// address length, 8 address bytes, protocol.
func (p *Packet) sll(b []byte, port uint16) Error {
	if len(b) < 16 {
		return ErrTruncated
	}
	return p.cooked(b[6:14], int(be16(b[4:6])), be16(b[14:16]), b[16:], port)
}

// sll2 decodes a Linux cooked capture v2 header: protocol, reserved,
// interface index, ARPHRD type, packet type, address length, 8 address bytes.
func (p *Packet) sll2(b []byte, port uint16) Error {
	if len(b) < 20 {
		return ErrTruncated
	}
	return p.cooked(b[12:20], int(b[11]), be16(b[0:2]), b[20:], port)
}

// cooked fills the Ethernet fields from a Linux cooked header, whose only
// address is the sender's, and decodes what the protocol announces.
func (p *Packet) cooked(addr []byte, alen int, proto uint16, rest []byte, port uint16) Error {
	p.DstMAC = [6]byte{}
	p.SrcMAC = [6]byte{}
	if alen == 6 {
		p.SrcMAC = [6]byte(addr[:6])
	}
	p.Headers |= HasEthernet
	return p.etherType(proto, rest, port)
}

// erf decodes an ERF record: a 16-byte header, extension headers, then an
// InfiniBand packet (type 21) or an Ethernet frame behind two pad bytes
// (type 2). The wire length bounds the packet, so the padding that rounds
// records to 8 bytes is never read as packet bytes. The header's record
// length is not used: the capture record that holds the ERF record frames
// it, and Wireshark, too, decodes a record whose length field is below
// the header.
func (p *Packet) erf(b []byte, port uint16) Error {
	const (
		erfTypeEthernet   = 2
		erfTypeInfiniBand = 21
	)
	if len(b) < 16 {
		return ErrTruncated
	}
	typ, wlen := b[8], int(be16(b[14:16]))
	off := 16
	for more := typ&0x80 != 0; more; off += 8 {
		if len(b) < off+8 {
			return ErrTruncated
		}
		more = b[off]&0x80 != 0
	}
	switch typ & 0x7f {
	case erfTypeInfiniBand:
		return p.lrh(limit(b[off:], wlen))
	case erfTypeEthernet:
		if len(b) < off+2 {
			return ErrTruncated
		}
		return p.ethernet(limit(b[off+2:], wlen), port)
	}
	return 0
}

// limit returns b cut to at most n bytes.
func limit(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// BSD address families of the loopback header: AF_INET, and AF_INET6 as
// NetBSD/OpenBSD, FreeBSD/DragonFly and Darwin number it.
const (
	afInet         = 2
	afInet6BSD     = 24
	afInet6FreeBSD = 28
	afInet6Darwin  = 30
)

// null decodes a BSD loopback header (link type 0): the address family as
// a 32-bit number in the byte order of the host that captured, which
// tells IPv4 from IPv6. A family with any of its upper 16 bits set was
// written in the other byte order, as Wireshark also reasons. Frames of
// other families decode as KindOther.
func (p *Packet) null(b []byte, port uint16) Error {
	if len(b) < 4 {
		return ErrTruncated
	}
	family := binary.LittleEndian.Uint32(b)
	if family&0xffff0000 != 0 {
		family = be32(b)
	}
	switch family {
	case afInet:
		return p.ipv4(b[4:], port)
	case afInet6BSD, afInet6FreeBSD, afInet6Darwin:
		return p.ipv6(b[4:], port)
	}
	return 0
}

// rawIP decodes an IPv4 or IPv6 packet, telling them apart by the version.
func (p *Packet) rawIP(b []byte, port uint16) Error {
	if len(b) < 1 {
		return ErrTruncated
	}
	switch b[0] >> 4 {
	case 4:
		return p.ipv4(b, port)
	case 6:
		return p.ipv6(b, port)
	}
	return ErrIPVersion
}

// ipv4 decodes an IPv4 header (with options) and what its protocol
// announces. A fragment (MF set or a non-zero offset) sets HasFragment and
// is not followed: the decoder does not reassemble.
func (p *Packet) ipv4(b []byte, port uint16) Error {
	if len(b) < 20 {
		return ErrTruncated
	}
	vihl := b[0]
	hl := int(vihl&0x0f) * 4
	total := int(be16(b[2:4]))
	if vihl>>4 != 4 || hl < 20 || total < hl {
		return ErrIPv4
	}
	p.setIPv4(b)
	p.Headers |= HasIPv4
	if len(b) < hl {
		return ErrTruncated
	}
	if be16(b[6:8])&0x3fff != 0 {
		p.Headers |= HasFragment // MF set or a non-zero offset
		return 0
	}
	return p.ipPayload(b[9], limit(b, total)[hl:], total-hl, port)
}

// setIPv4 fills the fields of the 20-byte IPv4 header at b; the caller
// sets HasIPv4.
func (p *Packet) setIPv4(b []byte) {
	tos := ipv4Addrs(b, &p.Src, &p.Dst)
	p.DSCP, p.ECN, p.TTL, p.IPLen = tos>>2, tos&3, b[8], be16(b[2:4])
}

// ipv4Addrs sets src and dst to the addresses of the 20-byte IPv4 header
// at b and returns its type of service byte (DSCP and ECN).
func ipv4Addrs(b []byte, src, dst *Addr) (tos uint8) {
	_ = b[19]
	src.set4(b[12:16])
	dst.set4(b[16:20])
	return b[1]
}

// ipv6 decodes an IPv6 header, its hop-by-hop, routing, fragment and
// destination options extension headers, and what the last one announces.
// A fragment header with M set or a non-zero offset sets HasFragment and
// ends decoding (no reassembly); an atomic fragment (neither) is a whole
// datagram and is followed.
func (p *Packet) ipv6(b []byte, port uint16) Error {
	if len(b) < 40 {
		return ErrTruncated
	}
	if b[0]>>4 != 6 {
		return ErrIPv6
	}
	p.setIPv6(b)
	p.Headers |= HasIPv6
	nh, wire := b[6], int(p.IPLen)
	b = limit(b[40:], wire)
	for {
		var hl int
		switch nh {
		case 0, 43, 60: // hop-by-hop options, routing, destination options
			if wire < 8 {
				return ErrIPv6
			}
			if len(b) < 2 {
				return ErrTruncated
			}
			hl = (int(b[1]) + 1) * 8
		case 44: // fragment
			if wire < 8 {
				return ErrIPv6
			}
			if len(b) < 8 {
				return ErrTruncated
			}
			if be16(b[2:4])&0xfff9 != 0 {
				p.Headers |= HasFragment // M set or a non-zero offset
				return 0
			}
			hl = 8
		default:
			return p.ipPayload(nh, b, wire, port)
		}
		if hl > wire {
			return ErrIPv6
		}
		if len(b) < hl {
			return ErrTruncated
		}
		nh, b, wire = b[0], b[hl:], wire-hl
	}
}

// setIPv6 fills the fields of the 40-byte IPv6 header at b; the caller
// sets HasIPv6.
func (p *Packet) setIPv6(b []byte) {
	_ = b[39]
	tc := uint8(be16(b[0:2]) >> 4)
	p.DSCP, p.ECN, p.IPLen, p.TTL = tc>>2, tc&3, be16(b[4:6]), b[7]
	p.Src.set16(b[8:24], AddrIPv6)
	p.Dst.set16(b[24:40], AddrIPv6)
}

// ipPayload decodes what follows an IP header: b holds the captured bytes
// of the IP payload, wire its length on the wire.
func (p *Packet) ipPayload(proto uint8, b []byte, wire int, port uint16) Error {
	switch proto {
	case protoUDP:
		return p.udp(b, wire, port)
	case protoGRE:
		return p.gre(b, port)
	}
	return 0
}

// udp decodes a UDP header and, on the RoCEv2 port, the transport packet.
func (p *Packet) udp(b []byte, wire int, port uint16) Error {
	if wire < 8 {
		return ErrUDP
	}
	if len(b) < 8 {
		return ErrTruncated
	}
	p.setUDP(b)
	p.Headers |= HasUDP
	if p.DstPort != port {
		return 0
	}
	p.Kind = KindRoCEv2
	n := int(p.UDPLen)
	if n < 8 || n > wire {
		return ErrUDP
	}
	return p.transport(limit(b, n)[8:], n-8, ErrUDP)
}

// setUDP fills the fields of the UDP header at b; the caller sets HasUDP.
func (p *Packet) setUDP(b []byte) {
	_ = b[7]
	p.SrcPort, p.DstPort, p.UDPLen = be16(b[0:2]), be16(b[2:4]), be16(b[4:6])
}

// GRE flags and protocols of switch mirror encapsulations.
const (
	greChecksum = 0x8000
	greRouting  = 0x4000
	greKey      = 0x2000
	greSequence = 0x1000
	greVersion  = 0x0007

	greProtoTEB     = 0x6558 // transparent Ethernet bridging
	greProtoERSPAN2 = 0x88BE // ERSPAN type II (type I without a sequence number)
	greProtoERSPAN3 = 0x22EB // ERSPAN type III
)

// gre decodes a GRE header carrying a mirrored frame (ERSPAN II, ERSPAN III
// or transparent Ethernet bridging), moves the outer addresses to
// MirrorSrc/MirrorDst and decodes the inner frame. GRE carrying anything
// else, or a mirror inside a mirror, is not followed.
func (p *Packet) gre(b []byte, port uint16) Error {
	if len(b) < 4 {
		return ErrTruncated
	}
	flags := be16(b[0:2])
	var m Mirror
	switch be16(b[2:4]) {
	case greProtoTEB:
		m = MirrorGRE
	case greProtoERSPAN2:
		m = MirrorERSPAN2
	case greProtoERSPAN3:
		m = MirrorERSPAN3
	default:
		return 0
	}
	if p.Headers&HasMirror != 0 {
		return 0
	}
	if flags&(greRouting|greVersion) != 0 {
		return ErrMirror
	}
	hl := 4
	for _, f := range [...]uint16{greChecksum, greKey, greSequence} {
		if flags&f != 0 {
			hl += 4
		}
	}
	if len(b) < hl {
		return ErrTruncated
	}
	b = b[hl:]
	var session uint16
	ip := false // the mirrored frame is an IP packet, not an Ethernet frame
	switch {
	case m == MirrorERSPAN2 && flags&greSequence != 0:
		if len(b) < 8 {
			return ErrTruncated
		}
		if b[0]>>4 != 1 {
			return ErrMirror
		}
		session, b = be16(b[2:4])&0x3ff, b[8:]
	case m == MirrorERSPAN3:
		if len(b) < 12 {
			return ErrTruncated
		}
		if b[0]>>4 != 2 {
			return ErrMirror
		}
		frameType, n := b[10]>>2&0x1f, 12
		if b[11]&1 != 0 {
			n += 8 // platform-specific subheader
		}
		if len(b) < n {
			return ErrTruncated
		}
		switch frameType {
		case 0: // Ethernet
		case 2:
			ip = true
		default:
			return 0
		}
		session, b = be16(b[2:4])&0x3ff, b[n:]
	}
	// ERSPAN type I (0x88BE without a sequence number) and plain GRE have
	// no header of their own: the frame follows the GRE header.
	p.Mirror, p.MirrorSession = m, session
	p.MirrorSrc, p.MirrorDst = p.Src, p.Dst
	p.Headers = p.Headers&^(HasEthernet|HasVLAN|HasIPv4|HasIPv6) | HasMirror
	if ip {
		return p.rawIP(b, port)
	}
	return p.ethernet(b, port)
}

// macControl decodes an 802.3x pause or 802.1Qbb PFC frame.
func (p *Packet) macControl(b []byte) Error {
	const (
		opPause = 0x0001
		opPFC   = 0x0101
	)
	if len(b) < 2 {
		return ErrTruncated
	}
	switch op := be16(b[0:2]); op {
	case opPause:
		p.Kind = KindPause
		if len(b) < 4 {
			return ErrTruncated
		}
		p.Pause = Pause{Opcode: op, Quanta: [8]uint16{be16(b[2:4])}}
		p.Headers |= HasPause
	case opPFC:
		p.Kind = KindPFC
		if len(b) < 20 {
			return ErrTruncated
		}
		p.Pause = Pause{Opcode: op, Enable: b[3]}
		for i := range p.Pause.Quanta {
			p.Pause.Quanta[i] = be16(b[4+2*i:])
		}
		p.Headers |= HasPFC
	}
	return 0
}
