package decode

import "strconv"

// AppendJSON appends the members of p's JSON object for rocescope dump to
// b, without the enclosing braces, and returns the extended buffer. The
// first member is "kind"; the others appear only when their header is
// present, in this order: src, dst (strings: IPv4, IPv6, GID in IPv6 form,
// "lid:N"), sport, dport, ecn, dscp, vlan [ids], mirror {type, session,
// src, dst}, lrh {vl, lver, sl, lnh, dlid, slid, pktlen}, grh {ipver,
// tclass, flowlabel, paylen, nxthdr, hoplmt, sgid, dgid}, bth {opcode, se,
// m, pad, tver, pkey, fecn, becn, dqp, a, psn}, rdeth, deth {qkey, sqp},
// xrceth, reth {va, rkey, len}, atomic {va, rkey, swap, cmp}, aeth
// {syndrome, msn}, atomic_ack {orig}, immdt, ieth, cm {attr, local_comm_id,
// remote_comm_id, local_qpn, starting_psn}, pfc {enable, quanta [8]} or
// pause {quanta}, payload_len, icrc, opcode_name, error. Numbers are
// decimal JSON numbers and flags JSON booleans. It allocates only to grow b.
func (p *Packet) AppendJSON(b []byte) []byte {
	h := p.Headers
	b = append(b, `"kind":"`...)
	b = append(b, p.Kind.String()...)
	b = append(b, '"')
	if h&(HasIPv4|HasIPv6|HasLRH|HasGRH) != 0 {
		b = appendAddr(b, `,"src":`, p.Src)
		b = appendAddr(b, `,"dst":`, p.Dst)
	}
	if h&HasUDP != 0 {
		b = appendUint(b, `,"sport":`, uint64(p.SrcPort))
		b = appendUint(b, `,"dport":`, uint64(p.DstPort))
	}
	if p.hasECN() {
		b = appendUint(b, `,"ecn":`, uint64(p.ECN))
		b = appendUint(b, `,"dscp":`, uint64(p.DSCP))
	}
	if h&HasVLAN != 0 {
		b = append(b, `,"vlan":[`...)
		for i := 0; i < int(p.NumVLAN) && i < len(p.VLANs); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(p.VLANs[i]), 10)
		}
		b = append(b, ']')
	}
	if h&HasMirror != 0 {
		b = append(b, `,"mirror":{"type":"`...)
		b = append(b, p.Mirror.String()...)
		b = append(b, '"')
		b = appendUint(b, `,"session":`, uint64(p.MirrorSession))
		b = appendAddr(b, `,"src":`, p.MirrorSrc)
		b = appendAddr(b, `,"dst":`, p.MirrorDst)
		b = append(b, '}')
	}
	if h&HasLRH != 0 {
		l := &p.LRH
		b = appendUint(b, `,"lrh":{"vl":`, uint64(l.VL))
		b = appendUint(b, `,"lver":`, uint64(l.LVer))
		b = appendUint(b, `,"sl":`, uint64(l.SL))
		b = appendUint(b, `,"lnh":`, uint64(l.LNH))
		b = appendUint(b, `,"dlid":`, uint64(l.DLID))
		b = appendUint(b, `,"slid":`, uint64(l.SLID))
		b = appendUint(b, `,"pktlen":`, uint64(l.PktLen))
		b = append(b, '}')
	}
	if h&HasGRH != 0 {
		g := &p.GRH
		b = appendUint(b, `,"grh":{"ipver":`, uint64(g.IPVer))
		b = appendUint(b, `,"tclass":`, uint64(g.TClass))
		b = appendUint(b, `,"flowlabel":`, uint64(g.FlowLabel))
		b = appendUint(b, `,"paylen":`, uint64(g.PayLen))
		b = appendUint(b, `,"nxthdr":`, uint64(g.NxtHdr))
		b = appendUint(b, `,"hoplmt":`, uint64(g.HopLmt))
		b = appendAddr(b, `,"sgid":`, AddrFromGID(g.SGID))
		b = appendAddr(b, `,"dgid":`, AddrFromGID(g.DGID))
		b = append(b, '}')
	}
	if h&HasBTH != 0 {
		t := &p.BTH
		b = appendUint(b, `,"bth":{"opcode":`, uint64(t.Opcode))
		b = appendBool(b, `,"se":`, t.SE)
		b = appendBool(b, `,"m":`, t.M)
		b = appendUint(b, `,"pad":`, uint64(t.PadCnt))
		b = appendUint(b, `,"tver":`, uint64(t.TVer))
		b = appendUint(b, `,"pkey":`, uint64(t.PKey))
		b = appendBool(b, `,"fecn":`, t.FECN)
		b = appendBool(b, `,"becn":`, t.BECN)
		b = appendUint(b, `,"dqp":`, uint64(t.DestQP))
		b = appendBool(b, `,"a":`, t.AckReq)
		b = appendUint(b, `,"psn":`, uint64(t.PSN))
		b = append(b, '}')
	}
	if h&HasRDETH != 0 {
		b = appendUint(b, `,"rdeth":`, uint64(p.RDETH))
	}
	if h&HasDETH != 0 {
		b = appendUint(b, `,"deth":{"qkey":`, uint64(p.DETH.QKey))
		b = appendUint(b, `,"sqp":`, uint64(p.DETH.SrcQP))
		b = append(b, '}')
	}
	if h&HasXRCETH != 0 {
		b = appendUint(b, `,"xrceth":`, uint64(p.XRCETH))
	}
	if h&HasRETH != 0 {
		b = appendUint(b, `,"reth":{"va":`, p.RETH.VA)
		b = appendUint(b, `,"rkey":`, uint64(p.RETH.RKey))
		b = appendUint(b, `,"len":`, uint64(p.RETH.DMALen))
		b = append(b, '}')
	}
	if h&HasAtomicETH != 0 {
		a := &p.AtomicETH
		b = appendUint(b, `,"atomic":{"va":`, a.VA)
		b = appendUint(b, `,"rkey":`, uint64(a.RKey))
		b = appendUint(b, `,"swap":`, a.SwapAdd)
		b = appendUint(b, `,"cmp":`, a.Compare)
		b = append(b, '}')
	}
	if h&HasAETH != 0 {
		b = appendUint(b, `,"aeth":{"syndrome":`, uint64(p.AETH.Syndrome))
		b = appendUint(b, `,"msn":`, uint64(p.AETH.MSN))
		b = append(b, '}')
	}
	if h&HasAtomicAckETH != 0 {
		b = appendUint(b, `,"atomic_ack":{"orig":`, p.AtomicAckETH)
		b = append(b, '}')
	}
	if h&HasImmDt != 0 {
		b = appendUint(b, `,"immdt":`, uint64(p.ImmDt))
	}
	if h&HasIETH != 0 {
		b = appendUint(b, `,"ieth":`, uint64(p.IETH))
	}
	if h&HasCM != 0 {
		c := &p.CM
		b = appendUint(b, `,"cm":{"attr":`, uint64(c.AttrID))
		b = appendUint(b, `,"local_comm_id":`, uint64(c.LocalCommID))
		b = appendUint(b, `,"remote_comm_id":`, uint64(c.RemoteCommID))
		b = appendUint(b, `,"local_qpn":`, uint64(c.LocalQPN))
		b = appendUint(b, `,"starting_psn":`, uint64(c.StartingPSN))
		b = append(b, '}')
	}
	if h&HasPFC != 0 {
		b = appendUint(b, `,"pfc":{"enable":`, uint64(p.Pause.Enable))
		b = append(b, `,"quanta":[`...)
		for i, q := range p.Pause.Quanta {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(q), 10)
		}
		b = append(b, "]}"...)
	}
	if h&HasPause != 0 {
		b = appendUint(b, `,"pause":{"quanta":`, uint64(p.Pause.Quanta[0]))
		b = append(b, '}')
	}
	if h&HasBTH != 0 && p.Err == 0 {
		b = appendUint(b, `,"payload_len":`, uint64(p.PayloadLen))
	}
	if h&HasICRC != 0 {
		b = appendUint(b, `,"icrc":`, uint64(p.ICRC))
	}
	if h&HasBTH != 0 {
		b = append(b, `,"opcode_name":"`...)
		b = p.BTH.Opcode.appendName(b)
		b = append(b, '"')
	}
	if p.Err != 0 {
		b = append(b, `,"error":"`...)
		b = append(b, p.Err.Error()...)
		b = append(b, '"')
	}
	return b
}

// appendUint appends key (which includes its quotes, colon and leading
// comma) and v in decimal.
func appendUint(b []byte, key string, v uint64) []byte {
	return strconv.AppendUint(append(b, key...), v, 10)
}

// appendBool appends key and v as a JSON boolean.
func appendBool(b []byte, key string, v bool) []byte {
	return strconv.AppendBool(append(b, key...), v)
}

// appendAddr appends key and a as a JSON string.
func appendAddr(b []byte, key string, a Addr) []byte {
	b = append(append(b, key...), '"')
	return append(a.AppendTo(b), '"')
}
