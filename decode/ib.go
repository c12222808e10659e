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
	if len(b) < lenGRH {
		return GRH{}, ErrTruncated
	}
	return readGRH(b), nil
}

// readLRH reads an LRH from b, which holds at least 8 bytes.
func readLRH(b []byte) LRH {
	_ = b[lenLRH-1]
	return LRH{
		VL: b[0] >> 4, LVer: b[0] & 0x0f,
		SL: b[1] >> 4, LNH: b[1] & 3,
		DLID:   be16(b[2:4]),
		PktLen: be16(b[4:6]) & 0x07ff,
		SLID:   be16(b[6:8]),
	}
}

// readGRH reads a GRH from b, which holds at least 40 bytes.
func readGRH(b []byte) GRH {
	_ = b[lenGRH-1]
	w := be32(b[0:4])
	return GRH{
		IPVer: uint8(w >> 28), TClass: uint8(w >> 20), FlowLabel: w & 0xfffff,
		PayLen: be16(b[4:6]), NxtHdr: b[6], HopLmt: b[7],
		SGID: [16]byte(b[8:24]), DGID: [16]byte(b[24:40]),
	}
}

// readBTH reads a BTH from b, which holds at least 12 bytes.
func readBTH(b []byte) BTH {
	_ = b[lenBTH-1]
	return BTH{
		Opcode: Opcode(b[0]),
		SE:     b[1]&0x80 != 0, M: b[1]&0x40 != 0, PadCnt: b[1] >> 4 & 3, TVer: b[1] & 0x0f,
		PKey: be16(b[2:4]),
		FECN: b[4]&0x80 != 0, BECN: b[4]&0x40 != 0, Resv6a: b[4] & 0x3f,
		DestQP: lo24(b[4:8]),
		AckReq: b[8]&0x80 != 0, Resv7: b[8] & 0x7f,
		PSN: lo24(b[8:12]),
	}
}

// rocev1 decodes the payload of a RoCEv1 frame: GRH, then the transport
// packet when the GRH announces one. Src/Dst are the GIDs and DSCP/ECN come
// from the traffic class, as for IPv6.
func (p *Packet) rocev1(b []byte) Error {
	p.Kind = KindRoCEv1
	if len(b) < lenGRH {
		return ErrTruncated
	}
	p.GRH = readGRH(b)
	p.Headers |= HasGRH
	p.Src, p.Dst = AddrFromGID(p.GRH.SGID), AddrFromGID(p.GRH.DGID)
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
	p.LRH = readLRH(b)
	p.Headers |= HasLRH
	p.Src, p.Dst = AddrFromLID(p.LRH.SLID), AddrFromLID(p.LRH.DLID)
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
		p.GRH = readGRH(b)
		p.Headers |= HasGRH
		p.Src, p.Dst = AddrFromGID(p.GRH.SGID), AddrFromGID(p.GRH.DGID)
		if p.GRH.NxtHdr != nxtHdrIBA {
			return 0
		}
		b, wire = b[lenGRH:], wire-lenGRH
	default:
		return 0 // raw or IPv6 packet: no transport header
	}
	return p.transport(b, wire, ErrLRH)
}

// transport decodes a BTH, the extension headers its opcode implies and
// the payload bounds. b holds the captured bytes from the BTH on, wire the
// length from the BTH through the ICRC as the enclosing header states it;
// lenErr is the error for a wire length too short for the headers.
func (p *Packet) transport(b []byte, wire int, lenErr Error) Error {
	if wire < lenBTH+lenICRC {
		return lenErr
	}
	b = limit(b, wire)
	if len(b) < lenBTH {
		return ErrTruncated
	}
	p.BTH = readBTH(b)
	p.Headers |= HasBTH
	op := &opcodes[b[0]]
	if op.svc == ServiceNone {
		return ErrOpcode
	}
	hl := int(op.hlen)
	if wire < hl+lenICRC {
		return lenErr
	}
	if e := p.extensions(b, op); e != 0 {
		return e
	}
	if len(b) < hl {
		return ErrTruncated
	}
	pay := wire - hl - lenICRC - int(p.BTH.PadCnt)
	if pay < 0 {
		return ErrPad
	}
	p.PayloadLen = uint32(pay)
	p.Payload = limit(b[hl:], pay)
	if len(b) == wire {
		p.ICRC = be32(b[wire-lenICRC:])
		p.Headers |= HasICRC
	}
	if p.BTH.DestQP == qpGSI && op.svc == ServiceUD {
		p.cm(p.Payload)
	}
	return 0
}

// extensions decodes the extension headers op implies from b, which starts
// with the BTH, each as far as b holds it.
func (p *Packet) extensions(b []byte, op *opInfo) Error {
	h, off := op.eth, lenBTH+int(op.skip)
	if h&HasRDETH != 0 {
		if len(b) < off+lenRDETH {
			return ErrTruncated
		}
		p.RDETH = lo24(b[off:])
		p.Headers |= HasRDETH
		off += lenRDETH
	}
	if h&HasDETH != 0 {
		if len(b) < off+lenDETH {
			return ErrTruncated
		}
		p.DETH = DETH{QKey: be32(b[off:]), SrcQP: lo24(b[off+4:])}
		p.Headers |= HasDETH
		off += lenDETH
	}
	if h&HasXRCETH != 0 {
		if len(b) < off+lenXRCETH {
			return ErrTruncated
		}
		p.XRCETH = lo24(b[off:])
		p.Headers |= HasXRCETH
		off += lenXRCETH
	}
	if h&HasRETH != 0 {
		if len(b) < off+lenRETH {
			return ErrTruncated
		}
		s := b[off : off+lenRETH]
		p.RETH = RETH{VA: be64(s[0:8]), RKey: be32(s[8:12]), DMALen: be32(s[12:16])}
		p.Headers |= HasRETH
		off += lenRETH
	}
	if h&HasAtomicETH != 0 {
		if len(b) < off+lenAtomicETH {
			return ErrTruncated
		}
		s := b[off : off+lenAtomicETH]
		p.AtomicETH = AtomicETH{VA: be64(s[0:8]), RKey: be32(s[8:12]), SwapAdd: be64(s[12:20]), Compare: be64(s[20:28])}
		p.Headers |= HasAtomicETH
		off += lenAtomicETH
	}
	if h&HasAETH != 0 {
		if len(b) < off+lenAETH {
			return ErrTruncated
		}
		p.AETH = AETH{Syndrome: b[off], MSN: lo24(b[off:])}
		p.Headers |= HasAETH
		off += lenAETH
	}
	if h&HasAtomicAckETH != 0 {
		if len(b) < off+lenAtomicAckETH {
			return ErrTruncated
		}
		p.AtomicAckETH = be64(b[off:])
		p.Headers |= HasAtomicAckETH
		off += lenAtomicAckETH
	}
	if h&HasImmDt != 0 {
		if len(b) < off+lenImmDt {
			return ErrTruncated
		}
		p.ImmDt = be32(b[off:])
		p.Headers |= HasImmDt
		off += lenImmDt
	}
	if h&HasIETH != 0 {
		if len(b) < off+lenIETH {
			return ErrTruncated
		}
		p.IETH = be32(b[off:])
		p.Headers |= HasIETH
	}
	return 0
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
