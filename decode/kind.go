package decode

import "strconv"

var kindNames = [...]string{"other", "rocev2", "rocev1", "ib", "pfc", "pause"}

// String returns the name rocescope dump uses for k: "other", "rocev2",
// "rocev1", "ib", "pfc" or "pause".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

var mirrorNames = [...]string{"none", "erspan2", "erspan3", "gre"}

// String returns the name rocescope dump uses for m: "none", "erspan2",
// "erspan3" or "gre".
func (m Mirror) String() string {
	if int(m) < len(mirrorNames) {
		return mirrorNames[m]
	}
	return "Mirror(" + strconv.Itoa(int(m)) + ")"
}

// IsRoCE reports whether p is a RoCEv2, RoCEv1 or InfiniBand packet with a
// base transport header.
func (p *Packet) IsRoCE() bool {
	return p.Headers&HasBTH != 0 && (p.Kind == KindRoCEv2 || p.Kind == KindRoCEv1 || p.Kind == KindIB)
}

// ECNCE reports whether p's IP header (or the traffic class of a RoCEv1
// GRH) carries the ECN codepoint Congestion Experienced (binary 11).
func (p *Packet) ECNCE() bool { return p.ECN == 3 && p.hasECN() }

// hasECN reports whether p.DSCP and p.ECN are defined: an IPv4 or IPv6
// header, or the GRH of a RoCEv1 frame.
func (p *Packet) hasECN() bool {
	return p.Headers&(HasIPv4|HasIPv6) != 0 || (p.Kind == KindRoCEv1 && p.Headers&HasGRH != 0)
}
