package decode

// Brief is what a flow analyzer needs of a RoCE frame: its flow (addresses
// and destination QP), the BTH fields it counts by, the payload length, and
// the three extension header fields that pair requests with answers and
// name the sender. [Decoder.DecodeBrief] fills it straight from the bytes
// of a RoCEv2 frame of the common shape; [Packet.Brief] from a decoded
// packet of any shape. A field of an extension header is defined only when
// Headers has that header's bit.
type Brief struct {
	Src, Dst   Addr
	DestQP     uint32
	PSN        uint32
	PayloadLen uint32 // as Packet.PayloadLen
	DMALen     uint32 // RETH DMA length, when HasRETH
	SrcQP      uint32 // DETH source QP, when HasDETH
	Headers    Header // of HasUDP, HasRETH, HasDETH, HasAETH and HasCM, those the frame has
	SrcPort    uint16 // UDP source port; 0 without UDP (RoCEv1, InfiniBand)
	Opcode     Opcode
	Syndrome   uint8 // AETH syndrome, when HasAETH
	CE         bool  // the IP header (or RoCEv1 GRH) carries ECN Congestion Experienced
	FECN       bool
	BECN       bool
	AckReq     bool
}

// briefHeaders are the Header bits a Brief keeps.
const briefHeaders = HasUDP | HasRETH | HasDETH | HasAETH | HasCM

// Brief sets b from p, a decoded RoCE packet (IsRoCE).
func (p *Packet) Brief(b *Brief) {
	t := &p.BTH
	b.Src, b.Dst, b.DestQP, b.PSN = p.Src, p.Dst, t.DestQP, t.PSN
	b.PayloadLen, b.DMALen, b.SrcQP = p.PayloadLen, p.RETH.DMALen, p.DETH.SrcQP
	b.Headers, b.SrcPort, b.Opcode, b.Syndrome = p.Headers&briefHeaders, 0, t.Opcode, p.AETH.Syndrome
	if p.Headers&HasUDP != 0 {
		b.SrcPort = p.SrcPort
	}
	b.CE, b.FECN, b.BECN, b.AckReq = p.ECNCE(), t.FECN, t.BECN, t.AckReq
}

// DecodeBrief decodes frame, of link type link, into b when it is a RoCEv2
// frame of the shape most traffic has and would decode without error: what
// fastRoCEv2 takes, a known opcode with all its headers captured and
// consistent lengths, and not a CM MAD. It reports false, with b in some
// state, for every other frame, which Decode then decodes in full. For a
// frame it takes, b holds what [Packet.Brief] gives after Decode.
func (d *Decoder) DecodeBrief(b *Brief, frame []byte, link LinkType) bool {
	if link != LinkEthernet {
		return false
	}
	s, ok := roceShape(frame, d.port())
	if !ok {
		return false
	}
	l3 := frame[s.l3:]
	var tc uint8 // the type of service or traffic class: DSCP and ECN
	if s.hl == 20 {
		tc = ipv4Addrs(l3, &b.Src, &b.Dst)
	} else {
		// As setIPv6, which fills more (a shared helper does not inline).
		tc = uint8(be16(l3[0:2]) >> 4)
		b.Src.set16(l3[8:24], AddrIPv6)
		b.Dst.set16(l3[24:40], AddrIPv6)
	}
	u := l3[s.hl:]
	b.SrcPort, b.CE = be16(u[0:2]), tc&3 == 3
	return b.transport(u[8:], s.ulen-8)
}

// transport is the transport part of DecodeBrief: the BTH at the start of
// tr, wire bytes long on the wire, and the extension headers at the offsets
// its opcode gives.
func (b *Brief) transport(tr []byte, wire int) bool {
	tr = limit(tr, wire)
	if len(tr) < lenBTH {
		return false
	}
	w0, w1, w2 := be32(tr[0:4]), be32(tr[4:8]), be32(tr[8:12])
	op := &opcodes[w0>>24]
	hl := int(op.hlen)
	pay := wire - hl - lenICRC - int(w0>>20&3)
	if op.svc == ServiceNone || len(tr) < hl || pay < 0 || w1&0xffffff == qpGSI && op.svc == ServiceUD {
		return false
	}
	b.Opcode, b.DestQP, b.PSN, b.PayloadLen = Opcode(w0>>24), w1&0xffffff, w2&0xffffff, uint32(pay)
	b.FECN, b.BECN, b.AckReq = w1&(1<<31) != 0, w1&(1<<30) != 0, w2&(1<<31) != 0
	b.Headers = HasUDP | op.eth&briefHeaders
	if o := op.reth; o != 0 {
		b.DMALen = be32(tr[o+12 : o+16])
	}
	if o := op.deth; o != 0 {
		b.SrcQP = lo24(tr[o+4 : o+8])
	}
	if o := op.aeth; o != 0 {
		b.Syndrome = tr[o]
	}
	return true
}
