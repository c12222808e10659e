package decode

// InfiniBand constants the decoder uses.
const (
	lenLRH = 8
	lenGRH = 40

	lnhIBALocal  = 2    // LRH next header: BTH follows
	lnhIBAGlobal = 3    // LRH next header: GRH follows
	nxtHdrIBA    = 0x1B // GRH next header: BTH follows

	qpGSI       = 1    // the general services QP, where CM MADs go
	mgmtClassCM = 0x07 // MAD management class of communication management
	lenMADHdr   = 24   // common MAD header before the class data
)

// CM attribute IDs whose fields the decoder reads.
const (
	CMConnectRequest    uint16 = 0x0010 // REQ
	CMConnectReject     uint16 = 0x0012 // REJ
	CMConnectReply      uint16 = 0x0013 // REP
	CMReadyToUse        uint16 = 0x0014 // RTU
	CMDisconnectRequest uint16 = 0x0015 // DREQ
	CMDisconnectReply   uint16 = 0x0016 // DREP
)

// hi24 reads a 24-bit big-endian field stored in the first three of the
// four bytes at b; lo24 one stored in the last three.
func hi24(b []byte) uint32 { return be32(b) >> 8 }
func lo24(b []byte) uint32 { return be32(b) & 0xffffff }

// ParseGRH returns the global route header in the first 40 bytes of b, or
// ErrTruncated when b is shorter.
func ParseGRH(b []byte) (GRH, error) {
	var g GRH
	if len(b) < lenGRH {
		return g, ErrTruncated
	}
	g.read(b)
	return g, nil
}

// The readers below fill a header in place from b, which holds at least
// the header's length. They store field by field: building the struct in a
// temporary and copying it costs a store-forwarding stall per copy. The
// BTH is read the same way inside transport.

// read fills l from the 8 bytes at b.
func (l *LRH) read(b []byte) {
	_ = b[lenLRH-1]
	l.VL, l.LVer = b[0]>>4, b[0]&0x0f
	l.SL, l.LNH = b[1]>>4, b[1]&3
	l.DLID = be16(b[2:4])
	l.PktLen = be16(b[4:6]) & 0x07ff
	l.SLID = be16(b[6:8])
}

// read fills g from the 40 bytes at b.
func (g *GRH) read(b []byte) {
	_ = b[lenGRH-1]
	w := be32(b[0:4])
	g.IPVer, g.TClass, g.FlowLabel = uint8(w>>28), uint8(w>>20), w&0xfffff
	g.PayLen, g.NxtHdr, g.HopLmt = be16(b[4:6]), b[6], b[7]
	g.SGID = [16]byte(b[8:24])
	g.DGID = [16]byte(b[24:40])
}

// rocev1 decodes the payload of a RoCEv1 frame: GRH, then the transport
// packet when the GRH announces one. Src/Dst are the GIDs and DSCP/ECN come
// from the traffic class, as for IPv6.
func (p *Packet) rocev1(b []byte) Error {
	p.Kind = KindRoCEv1
	if len(b) < lenGRH {
		return ErrTruncated
	}
	p.GRH.read(b)
	p.Headers |= HasGRH
	p.Src.setGID(b[8:24])
	p.Dst.setGID(b[24:40])
	p.DSCP, p.ECN = p.GRH.TClass>>2, p.GRH.TClass&3
	p.TTL = p.GRH.HopLmt
	p.IPLen = p.GRH.PayLen
	if p.GRH.NxtHdr != nxtHdrIBA {
		return 0
	}
	return p.transport(b[lenGRH:], int(p.GRH.PayLen), ErrGRH)
}

// lrh decodes a native InfiniBand packet: LRH, GRH when the LRH says so,
// then the transport packet. The LRH packet length (which excludes the
// VCRC) bounds it. Src/Dst are the GIDs when there is a GRH, else the LIDs.
func (p *Packet) lrh(b []byte) Error {
	p.Kind = KindIB
	if len(b) < lenLRH {
		return ErrTruncated
	}
	p.LRH.read(b)
	p.Headers |= HasLRH
	p.Src.setLID(p.LRH.SLID)
	p.Dst.setLID(p.LRH.DLID)
	wire := int(p.LRH.PktLen)*4 - lenLRH
	b = b[lenLRH:]
	switch p.LRH.LNH {
	case lnhIBALocal:
	case lnhIBAGlobal:
		if wire < lenGRH {
			return ErrLRH
		}
		if len(b) < lenGRH {
			return ErrTruncated
		}
		p.GRH.read(b)
		p.Headers |= HasGRH
		p.Src.setGID(b[8:24])
		p.Dst.setGID(b[24:40])
		if p.GRH.NxtHdr != nxtHdrIBA {
			return 0
		}
		b, wire = b[lenGRH:], wire-lenGRH
	default:
		return 0 // raw or IPv6 packet: no transport header
	}
	return p.transport(b, wire, ErrLRH)
}

// transport decodes a BTH, the extension headers its opcode implies (each
// as far as b holds it) and the payload bounds. b holds the captured bytes
// from the BTH on, wire the length from the BTH through the ICRC as the
// enclosing header states it; lenErr is the error for a wire length too
// short for the headers. It is one function, without calls on the way, as
// it runs for every RoCE packet.
func (p *Packet) transport(b []byte, wire int, lenErr Error) Error {
	if wire < lenBTH+lenICRC {
		return lenErr
	}
	b = limit(b, wire)
	if len(b) < lenBTH {
		return ErrTruncated
	}
	t := &p.BTH
	w0, w1, w2 := be32(b[0:4]), be32(b[4:8]), be32(b[8:12])
	opcode, flags, pad := uint8(w0>>24), uint8(w0>>16), int(w0>>20&3)
	t.Opcode, t.PKey = Opcode(opcode), uint16(w0)
	t.SE, t.M, t.PadCnt, t.TVer = flags&0x80 != 0, flags&0x40 != 0, uint8(pad), flags&0x0f
	f := uint8(w1 >> 24)
	t.FECN, t.BECN, t.Resv6a, t.DestQP = f&0x80 != 0, f&0x40 != 0, f&0x3f, w1&0xffffff
	f = uint8(w2 >> 24)
	t.AckReq, t.Resv7, t.PSN = f&0x80 != 0, f&0x7f, w2&0xffffff
	h := p.Headers | HasBTH
	op := &opcodes[opcode]
	if op.svc == ServiceNone {
		p.Headers = h
		return ErrOpcode
	}
	hl := int(op.hlen)
	if wire < hl+lenICRC {
		p.Headers = h
		return lenErr
	}
	// The extension headers, in wire order; h collects their bits and r
	// is what follows the headers read so far.
	e, r := op.eth, b[lenBTH:]
	if len(r) < int(op.skip) {
		goto truncated
	}
	r = r[op.skip:]
	if e&HasRDETH != 0 {
		if len(r) < lenRDETH {
			goto truncated
		}
		p.RDETH = lo24(r[0:4])
		h |= HasRDETH
		r = r[lenRDETH:]
	}
	if e&HasDETH != 0 {
		if len(r) < lenDETH {
			goto truncated
		}
		p.DETH.QKey, p.DETH.SrcQP = be32(r[0:4]), lo24(r[4:8])
		h |= HasDETH
		r = r[lenDETH:]
	}
	if e&HasXRCETH != 0 {
		if len(r) < lenXRCETH {
			goto truncated
		}
		p.XRCETH = lo24(r[0:4])
		h |= HasXRCETH
		r = r[lenXRCETH:]
	}
	if e&HasRETH != 0 {
		if len(r) < lenRETH {
			goto truncated
		}
		p.RETH.VA, p.RETH.RKey, p.RETH.DMALen = be64(r[0:8]), be32(r[8:12]), be32(r[12:16])
		h |= HasRETH
		r = r[lenRETH:]
	}
	if e&HasAtomicETH != 0 {
		if len(r) < lenAtomicETH {
			goto truncated
		}
		a := &p.AtomicETH
		a.VA, a.RKey, a.SwapAdd, a.Compare = be64(r[0:8]), be32(r[8:12]), be64(r[12:20]), be64(r[20:28])
		h |= HasAtomicETH
		r = r[lenAtomicETH:]
	}
	if e&HasAETH != 0 {
		if len(r) < lenAETH {
			goto truncated
		}
		p.AETH.Syndrome, p.AETH.MSN = r[0], lo24(r[0:4])
		h |= HasAETH
		r = r[lenAETH:]
	}
	if e&HasAtomicAckETH != 0 {
		if len(r) < lenAtomicAckETH {
			goto truncated
		}
		p.AtomicAckETH = be64(r[0:8])
		h |= HasAtomicAckETH
		r = r[lenAtomicAckETH:]
	}
	if e&HasImmDt != 0 {
		if len(r) < lenImmDt {
			goto truncated
		}
		p.ImmDt = be32(r[0:4])
		h |= HasImmDt
		r = r[lenImmDt:]
	}
	if e&HasIETH != 0 {
		if len(r) < lenIETH {
			goto truncated
		}
		p.IETH = be32(r[0:4])
		h |= HasIETH
		r = r[lenIETH:]
	}
	{
		// r now starts at the payload: hl bytes into b.
		pay := wire - hl - lenICRC - pad
		if pay < 0 {
			p.Headers = h
			return ErrPad
		}
		p.PayloadLen = uint32(pay)
		p.Payload = limit(r, pay)
		if len(b) == wire {
			p.ICRC = be32(b[wire-lenICRC:])
			h |= HasICRC
		}
		p.Headers = h
		if w1&0xffffff == qpGSI && op.svc == ServiceUD {
			p.cm(p.Payload)
		}
		return 0
	}
truncated:
	p.Headers = h
	return ErrTruncated
}

// cm decodes the connection fields of a CM MAD (management class 0x07) at
// the start of mad, when mad holds them; the IBTA CM message layouts put
// the communication IDs first, the REQ's QPN at 32 and starting PSN at 44,
// the REP's QPN at 12 and starting PSN at 20.
func (p *Packet) cm(mad []byte) {
	if len(mad) < lenMADHdr+8 || mad[1] != mgmtClassCM {
		return
	}
	d := mad[lenMADHdr:]
	c := CM{AttrID: be16(mad[16:18]), LocalCommID: be32(d[0:4])}
	switch c.AttrID {
	case CMConnectRequest:
		if len(d) < 48 {
			return
		}
		c.LocalQPN, c.StartingPSN = hi24(d[32:36]), hi24(d[44:48])
	case CMConnectReply:
		if len(d) < 24 {
			return
		}
		c.RemoteCommID = be32(d[4:8])
		c.LocalQPN, c.StartingPSN = hi24(d[12:16]), hi24(d[20:24])
	case CMConnectReject, CMReadyToUse, CMDisconnectRequest, CMDisconnectReply:
		c.RemoteCommID = be32(d[4:8])
	default:
		return
	}
	p.CM = c
	p.Headers |= HasCM
}
