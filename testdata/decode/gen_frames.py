#!/usr/bin/python3
"""Writes the synthetic RoCE/InfiniBand captures the decode tests use.

The real corpus (../shared/captures) lacks IPv6, VLAN/QinQ, ERSPAN/GRE,
CNP, ECN-CE, PFC, pause, NAK, RNR NAK, atomics, XRC, RD, Linux SLL/SLL2,
raw IP and raw InfiniBand (link type 247) frames; this script builds them
with scapy (scapy.contrib.roce for BTH, AETH, GRH and CNP; the other
extension headers are declared below from the IBTA layouts) and writes one
classic pcap per link type. Run with /usr/bin/python3 (scapy 2.5) from
this directory; the output is deterministic and committed.
"""

import struct

from scapy.all import (ARP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPv6,
                       IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                       IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPOption, Raw)
from scapy.contrib.erspan import (ERSPAN_II, ERSPAN_III,
                                  ERSPAN_PlatformSpecific)
from scapy.contrib.mac_control import (MACControlClassBasedFlowControl,
                                       MACControlPause)
from scapy.contrib.roce import AETH, BTH, GRH, CNPPadding
from scapy.fields import (ByteField, IntField, X3BytesField, XIntField,
                          XLongField)
from scapy.layers.l2 import GRE, CookedLinux, CookedLinuxV2
from scapy.packet import Packet


class DCT(Packet):
    """The 8 bytes ConnectX DC packets carry after the BTH (opaque here)."""
    name = "DCT"
    fields_desc = [XLongField("dct", 0)]


class RDETH(Packet):
    name = "RDETH"
    fields_desc = [ByteField("reserved", 0), X3BytesField("eecnxt", 0)]


class DETH(Packet):
    name = "DETH"
    fields_desc = [XIntField("qkey", 0), ByteField("reserved", 0),
                   X3BytesField("srcqp", 0)]


class XRCETH(Packet):
    name = "XRCETH"
    fields_desc = [ByteField("reserved", 0), X3BytesField("xrcsrq", 0)]


class RETH(Packet):
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0),
                   IntField("dmalen", 0)]


class AtomicETH(Packet):
    name = "AtomicETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0),
                   XLongField("swap", 0), XLongField("cmp", 0)]


class AtomicAckETH(Packet):
    name = "AtomicAckETH"
    fields_desc = [XLongField("orig", 0)]


class ImmDt(Packet):
    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]


class IETH(Packet):
    name = "IETH"
    fields_desc = [XIntField("rkey", 0)]


MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
IP_A, IP_B = "10.0.0.1", "10.0.0.2"
IP6_A, IP6_B = "fd00::1", "fd00::2"
ICRC = 0x11223344  # fixed ICRC where scapy cannot compute one


def payload(n, pad=0):
    """n payload bytes then pad zero bytes."""
    return Raw(bytes((i * 7 + 1) & 0xff for i in range(n)) + b"\0" * pad)


def v4(*layers, tos=0x02, sport=49152, **ip):
    """Ethernet/IPv4/UDP 4791 around the given transport layers."""
    p = Ether(src=MAC_A, dst=MAC_B) / IP(src=IP_A, dst=IP_B, tos=tos, ttl=64,
                                         flags="DF", **ip)
    p = p / UDP(sport=sport, dport=4791, chksum=0)
    for layer in layers:
        p = p / layer
    return p


def transport_frames():
    """One IPv4 RoCEv2 frame per opcode family, with known field values."""
    rc = []
    # RC requests and responses.
    rc.append(v4(BTH(opcode=0x00, dqpn=0x000123, psn=100, ackreq=1), payload(256)))
    rc.append(v4(BTH(opcode=0x03, solicited=1, padcount=3, dqpn=0x123, psn=101),
                 ImmDt(imm=0xCAFEBABE), payload(13, 3)))
    rc.append(v4(BTH(opcode=0x05, dqpn=0x123, psn=102), ImmDt(imm=0x01020304), payload(8)))
    rc.append(v4(BTH(opcode=0x06, dqpn=0xABCDEF, psn=0xFFFFFF, ackreq=0),
                 RETH(va=0x00007F0012345678, rkey=0x1234ABCD, dmalen=8192), payload(1024)))
    rc.append(v4(BTH(opcode=0x07, dqpn=0xABCDEF, psn=0), payload(1024)))
    rc.append(v4(BTH(opcode=0x09, dqpn=0xABCDEF, psn=1, padcount=1),
                 ImmDt(imm=0xDEADBEEF), payload(1023, 1)))
    rc.append(v4(BTH(opcode=0x0B, dqpn=0x42, psn=7), RETH(va=0x1000, rkey=0x99, dmalen=4),
                 ImmDt(imm=0x7), payload(4)))
    rc.append(v4(BTH(opcode=0x0C, dqpn=0x42, psn=8, ackreq=1),
                 RETH(va=0xFFFFFFFFFFFFFFF0, rkey=0xFFFFFFFF, dmalen=0x100000)))
    rc.append(v4(BTH(opcode=0x0D, dqpn=0x41, psn=8), AETH(syndrome=0x1F, msn=5), payload(1024)))
    rc.append(v4(BTH(opcode=0x0E, dqpn=0x41, psn=9), payload(1024)))
    rc.append(v4(BTH(opcode=0x0F, dqpn=0x41, psn=10, padcount=2), AETH(syndrome=0x00, msn=6),
                 payload(14, 2)))
    rc.append(v4(BTH(opcode=0x10, dqpn=0x41, psn=11), AETH(syndrome=0x01, msn=7), payload(64)))
    # ACK, RNR NAK (timer 14), NAK codes 0-4, reserved syndrome.
    for syn in (0x00, 0x1F, 0x2E, 0x60, 0x61, 0x62, 0x63, 0x64, 0x41):
        rc.append(v4(BTH(opcode=0x11, dqpn=0x41, psn=12), AETH(syndrome=syn, msn=0xFFFFFF)))
    rc.append(v4(BTH(opcode=0x12, dqpn=0x41, psn=13), AETH(syndrome=0, msn=8),
                 AtomicAckETH(orig=0x0123456789ABCDEF)))
    rc.append(v4(BTH(opcode=0x13, dqpn=0x42, psn=14, ackreq=1),
                 AtomicETH(va=0x7F0000001000, rkey=0x5555, swap=0xAAAA, cmp=0xBBBB)))
    rc.append(v4(BTH(opcode=0x14, dqpn=0x42, psn=15, ackreq=1),
                 AtomicETH(va=0x7F0000002000, rkey=0x6666, swap=1, cmp=0)))
    rc.append(v4(BTH(opcode=0x16, dqpn=0x42, psn=16), IETH(rkey=0x0BADF00D), payload(32)))
    rc.append(v4(BTH(opcode=0x17, dqpn=0x42, psn=17), IETH(rkey=0x0BADF00E), payload(16)))
    # UC.
    rc.append(v4(BTH(opcode=0x24, dqpn=0x77, psn=1), payload(100)))
    rc.append(v4(BTH(opcode=0x26, dqpn=0x77, psn=2), RETH(va=0x2000, rkey=0x88, dmalen=2048),
                 payload(1024)))
    rc.append(v4(BTH(opcode=0x2B, dqpn=0x77, psn=3), RETH(va=0x3000, rkey=0x89, dmalen=4),
                 ImmDt(imm=0x12345678), payload(4)))
    # RD opcodes, as ConnectX DC sends them: 8 more bytes after the BTH,
    # then RDETH (+ DETH on requests).
    dct = DCT(dct=0x1100903600715001)
    rc.append(v4(BTH(opcode=0x44, dqpn=0x50, psn=1), dct, RDETH(eecnxt=0x10203),
                 DETH(qkey=0x11111111, srcqp=0x51), payload(40)))
    rc.append(v4(BTH(opcode=0x4A, dqpn=0x50, psn=2), dct, RDETH(eecnxt=0x10203),
                 DETH(qkey=0x11111111, srcqp=0x51), RETH(va=0x4000, rkey=0x1, dmalen=16),
                 payload(16)))
    rc.append(v4(BTH(opcode=0x4B, dqpn=0x50, psn=3), dct, RDETH(eecnxt=0x10203),
                 DETH(qkey=0x11111111, srcqp=0x51), RETH(va=0x4000, rkey=0x1, dmalen=4),
                 ImmDt(imm=0x55), payload(4)))
    rc.append(v4(BTH(opcode=0x4E, dqpn=0x51, psn=4), dct, RDETH(eecnxt=0x10203), payload(256)))
    rc.append(v4(BTH(opcode=0x51, dqpn=0x51, psn=5), dct, RDETH(eecnxt=0x10203),
                 AETH(syndrome=0x61, msn=9)))
    rc.append(v4(BTH(opcode=0x52, dqpn=0x51, psn=5), dct, RDETH(eecnxt=0x10203),
                 AETH(syndrome=0, msn=9), AtomicAckETH(orig=42)))
    rc.append(v4(BTH(opcode=0x53, dqpn=0x50, psn=6), dct, RDETH(eecnxt=0x10203),
                 DETH(qkey=0x11111111, srcqp=0x51),
                 AtomicETH(va=0x5000, rkey=0x2, swap=3, cmp=4)))
    rc.append(v4(BTH(opcode=0x55, solicited=1, dqpn=0x50, psn=7), dct, RDETH(eecnxt=0x10203),
                 DETH(qkey=0x11111111, srcqp=0x51)))
    # UD.
    rc.append(v4(BTH(opcode=0x64, dqpn=0x99, psn=1), DETH(qkey=0x80010000, srcqp=0x98),
                 payload(64)))
    rc.append(v4(BTH(opcode=0x65, dqpn=0x99, psn=2), DETH(qkey=0x80010000, srcqp=0x98),
                 ImmDt(imm=0xFEEDFACE), payload(64)))
    # XRC: XRCETH on requests, none on responses.
    rc.append(v4(BTH(opcode=0xA4, dqpn=0x60, psn=1), XRCETH(xrcsrq=0x61), payload(32)))
    rc.append(v4(BTH(opcode=0xAA, dqpn=0x60, psn=2), XRCETH(xrcsrq=0x61),
                 RETH(va=0x6000, rkey=0x3, dmalen=32), payload(32)))
    rc.append(v4(BTH(opcode=0xB1, dqpn=0x62, psn=2), AETH(syndrome=0, msn=1)))
    # CNP (BECN set), FECN, ECN-CE, DSCP 26, a Huawei-style reserved bit.
    rc.append(v4(BTH(opcode=0x81, becn=1, dqpn=0x123, psn=0), CNPPadding(), tos=0x03))
    rc.append(v4(BTH(opcode=0x0A, fecn=1, padcount=1, dqpn=0x123, psn=200),
                 RETH(va=1, rkey=2, dmalen=3), payload(3, 1), tos=(26 << 2) | 3))
    rc.append(v4(BTH(opcode=0x04, resv6=0x10, dqpn=0x123, psn=201, version=0), payload(16),
                 tos=(46 << 2) | 1))
    # IPv4 with options.
    rc.append(v4(BTH(opcode=0x11, dqpn=0x41, psn=12), AETH(syndrome=0x60, msn=3),
                 options=[IPOption(b"\x94\x04\x00\x00")]))
    return rc


def cm_mad(attr, fields):
    """A 256-byte CM MAD: common header, then the attribute's data."""
    hdr = struct.pack(">BBBBHHQHHI", 1, 0x07, 2, 0x03, 0, 0, 0x1122334455667788, attr, 0, 0)
    data = bytearray(232)
    for off, fmt, val in fields:
        struct.pack_into(fmt, data, off, val)
    return hdr + bytes(data)


def cm_frames():
    """CM REQ, REP, RTU, DREQ, DREP, REJ on QP1."""
    def mad(attr, fields, psn):
        return v4(BTH(opcode=0x64, dqpn=1, psn=psn, ackreq=1), DETH(qkey=0x80010000, srcqp=1),
                  Raw(cm_mad(attr, fields)))
    req = [(0, ">I", 0x0A0B0C0D), (8, ">Q", 0x0000000001060000 | 4420),
           (32, ">I", (0x00ABCD << 8) | 0x10), (44, ">I", (0x123456 << 8) | 0x37),
           (48, ">H", 0xFFFF)]
    rep = [(0, ">I", 0x1A1B1C1D), (4, ">I", 0x0A0B0C0D), (12, ">I", 0x00BCDE << 8),
           (20, ">I", 0x654321 << 8)]
    ids = [(0, ">I", 0x0A0B0C0D), (4, ">I", 0x1A1B1C1D)]
    return [mad(0x10, req, 1), mad(0x13, rep, 2), mad(0x14, ids, 3),
            mad(0x15, ids + [(8, ">I", 0x00BCDE << 8)], 4), mad(0x16, ids, 5),
            mad(0x12, ids, 6)]


def ipv6_frames():
    """RoCEv2 over IPv6, with VLAN tags and extension headers."""
    def v6(*layers, tc=0x02, ext=(), tags=()):
        p = Ether(src=MAC_A, dst=MAC_B)
        for t in tags:
            p = p / t
        p = p / IPv6(src=IP6_A, dst=IP6_B, tc=tc, hlim=63, fl=0x12345)
        for e in ext:
            p = p / e
        p = p / UDP(sport=50000, dport=4791, chksum=0)
        for layer in layers:
            p = p / layer
        return p
    send = (BTH(opcode=0x04, dqpn=0x321, psn=5, icrc=ICRC), payload(64))
    return [
        v6(*send),
        v6(*send, tc=0x03, tags=[Dot1Q(vlan=100, prio=3)]),
        v6(*send, tc=(26 << 2) | 2, ext=[IPv6ExtHdrHopByHop(), IPv6ExtHdrDestOpt()]),
        v6(*send, ext=[IPv6ExtHdrRouting(addresses=["fd00::9"]), IPv6ExtHdrFragment(offset=0, m=0, id=7)]),
        v6(BTH(opcode=0x06, dqpn=0x321, psn=6, icrc=ICRC), RETH(va=0xABC, rkey=0xDEF, dmalen=4096),
           payload(1024), tags=[Dot1AD(vlan=10), Dot1Q(vlan=20)]),
        # A non-first fragment: not followed.
        v6(*send, ext=[IPv6ExtHdrFragment(offset=100, m=0, id=8)]),
    ]


def vlan_frames():
    """802.1Q, 802.1ad QinQ and a triple tag around IPv4 RoCEv2."""
    def tagged(tags, **kw):
        p = Ether(src=MAC_A, dst=MAC_B)
        for t in tags:
            p = p / t
        p = p / IP(src=IP_A, dst=IP_B, tos=0x02, flags="DF") / UDP(sport=49153, dport=4791, chksum=0)
        return p / BTH(opcode=0x11, dqpn=0x41, psn=77) / AETH(syndrome=0x00, msn=1)
    triple = Ether(src=MAC_A, dst=MAC_B, type=0x9100) / Dot1Q(vlan=7, type=0x88A8) / \
        Dot1Q(vlan=8, type=0x8100) / Dot1Q(vlan=9) / IP(src=IP_A, dst=IP_B, flags="DF") / \
        UDP(sport=49154, dport=4791, chksum=0) / BTH(opcode=0x11, dqpn=0x41, psn=78) / \
        AETH(syndrome=0x00, msn=2)
    return [tagged([Dot1Q(vlan=42, prio=5)]),
            tagged([Dot1AD(vlan=100, prio=1), Dot1Q(vlan=200, prio=2)]),
            triple]


def mirror_frames():
    """ERSPAN II, ERSPAN III (with and without the platform subheader) and
    plain GRE (transparent Ethernet bridging) around RoCEv2 frames."""
    inner = v4(BTH(opcode=0x06, dqpn=0xABCDEF, psn=500),
               RETH(va=0x7F0012345678, rkey=0x1234ABCD, dmalen=4096), payload(256))
    inner_v6 = ipv6_frames()[1]
    outer = Ether(src="02:00:00:00:01:01", dst="02:00:00:00:01:02") / \
        IP(src="192.0.2.1", dst="192.0.2.2", ttl=255)
    return [
        outer / GRE(seqnum_present=1, sequence_number=9, proto=0x88BE) /
        ERSPAN_II(ver=1, session_id=300, vlan=5, index=0x12345) / inner,
        outer / GRE(proto=0x22EB) / ERSPAN_III(session_id=1023, timestamp=0xABCDEF, ft=0, o=0) / inner,
        outer / GRE(proto=0x22EB) / ERSPAN_III(session_id=7, ft=0, o=1) /
        ERSPAN_PlatformSpecific(platf_id=3, info1=1, info2=2) / inner_v6,
        outer / GRE(proto=0x6558, key_present=1, key=0x77) / inner,
        Ether(src="02:00:00:00:01:01", dst="02:00:00:00:01:02") /
        IPv6(src="2001:db8::1", dst="2001:db8::2") / GRE(seqnum_present=1, sequence_number=1, proto=0x88BE) /
        ERSPAN_II(ver=1, session_id=1) / inner,
    ]


def rocev1_frames():
    """RoCEv1: GRH then BTH in Ethernet (ethertype 0x8915)."""
    sgid = 0xFE800000000000000202C9FFFE0A0B0C
    dgid = 0xFE800000000000000202C9FFFE0D0E0F
    def v1(transport, tclass=0, nh=0x1B):
        body = strip_icrc(transport)
        g = GRH(ipver=6, tclass=tclass, flowlabel=0, paylen=len(body) + 4,
                nexthdr=nh, hoplmt=64, sgid=sgid, dgid=dgid)
        return Ether(src=MAC_A, dst=MAC_B, type=0x8915) / g / Raw(body + struct.pack(">I", ICRC))
    return [
        v1(BTH(opcode=0x0A, dqpn=0x10, psn=1, icrc=0) / RETH(va=0x9000, rkey=0x10, dmalen=64) / payload(64),
           tclass=0x03),
        v1(BTH(opcode=0x11, dqpn=0x11, psn=2, icrc=0) / AETH(syndrome=0x20 | 5, msn=10), tclass=0x68),
    ]


def strip_icrc(p):
    """Bytes of p without the ICRC scapy's BTH appends (the caller adds its own)."""
    return bytes(p)[:-4]


def control_frames():
    """PFC, 802.3x pause, and frames that are not RoCE."""
    pfc = MACControlClassBasedFlowControl(c0_enabled=1, c3_enabled=1, c7_enabled=1,
                                          c0_pause_time=0xFFFF, c3_pause_time=100,
                                          c7_pause_time=1)
    return [
        Ether(src=MAC_A, dst="01:80:c2:00:00:01", type=0x8808) / pfc,
        Ether(src=MAC_A, dst="01:80:c2:00:00:01", type=0x8808) / MACControlPause(pause_time=0x1234),
        Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=IP_A, pdst=IP_B),
        Ether(src=MAC_A, dst=MAC_B) / IP(src=IP_A, dst=IP_B) / UDP(sport=4791, dport=53) / Raw(b"\0" * 12),
        Ether(src=MAC_A, dst=MAC_B) / IP(src=IP_A, dst=IP_B) / TCP(sport=1, dport=4791),
    ]


def ib_frames():
    """Native InfiniBand packets from the LRH (link type 247), VCRC included."""
    def lrh(lnh, body, slid=0x11, dlid=0x22):
        words = (8 + len(body) + 4) // 4
        return struct.pack(">BBHHH", 0x20 | 0, 0x40 | lnh, dlid, words, slid) + body + \
            struct.pack(">IH", ICRC, 0xBEEF)
    grh = bytes(GRH(ipver=6, tclass=0x12, flowlabel=0x54321, paylen=0, nexthdr=0x1B, hoplmt=1,
                    sgid=0xFE80000000000000000000000000AAAA, dgid=0xFE80000000000000000000000000BBBB))
    write = strip_icrc(BTH(opcode=0x06, dqpn=0x55, psn=9, icrc=0) / RETH(va=0x1, rkey=0x2, dmalen=256) / payload(256))
    ack = strip_icrc(BTH(opcode=0x11, dqpn=0x56, psn=9, icrc=0) / AETH(syndrome=0x61, msn=4))
    ud = strip_icrc(BTH(opcode=0x65, dqpn=0x57, psn=1, padcount=2, icrc=0) / DETH(qkey=0x1, srcqp=0x58) /
                    ImmDt(imm=0x99) / payload(30, 2))
    frames = [lrh(2, write), lrh(2, ack), lrh(2, ud)]
    g = bytearray(grh)
    struct.pack_into(">H", g, 4, len(ack) + 4)
    frames.append(lrh(3, bytes(g) + ack))
    return frames


def sll_frames(v2):
    """RoCEv2 frames in Linux cooked captures."""
    frames = []
    for t in transport_frames()[:3] + vlan_frames()[:1]:
        body = bytes(t)[12:]  # ethertype onwards, as a cooked capture keeps it
        proto, rest = struct.unpack(">H", body[:2])[0], body[2:]
        if v2:
            hdr = CookedLinuxV2(proto=proto, ifindex=3, lladdrtype=1, pkttype=4, lladdrlen=6,
                                src=bytes.fromhex("02000000000a") + b"\0\0")
        else:
            hdr = CookedLinux(pkttype=4, lladdrtype=1, lladdrlen=6,
                              src=bytes.fromhex("02000000000a") + b"\0\0", proto=proto)
        frames.append(bytes(hdr) + rest)
    return frames


def erf_frames():
    """ERF records: InfiniBand (type 21), padded to 8 bytes as Endace DAG
    cards write them, one with an extension header, and Ethernet (type 2);
    then two whose record length (rlen) is below the 16-byte header, 8 and
    0, which Wireshark decodes as if it were sound (the pcap record frames
    the ERF record)."""
    out = []
    for i, ib in enumerate(ib_frames()):
        typ = 21
        ext = b""
        if i == 1:
            typ |= 0x80
            ext = struct.pack(">BBHI", 0x03, 0, 0, 0)  # one extension header, no more
        rec = ext + ib
        rlen = 16 + len(rec)
        pad = (-rlen) % 8 if i % 2 == 0 else 0
        hdr = struct.pack("<Q", 0x482B41EF00000000 + i) + struct.pack(">BBHHH", typ, 0x04, rlen + pad, 0, len(ib))
        out.append(hdr + rec + b"\0" * pad)
    eth = bytes(transport_frames()[0])
    hdr = struct.pack("<Q", 0x482B41F000000000) + struct.pack(">BBHHH", 2, 0x04, 16 + 2 + len(eth), 0, len(eth))
    out.append(hdr + b"\0\0" + eth)
    for rlen, rec in ((8, out[0]), (0, out[-1])):
        out.append(rec[:10] + struct.pack(">H", rlen) + rec[12:])
    return out


def write_pcap(name, linktype, frames):
    with open(name, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype))
        for i, fr in enumerate(frames):
            b = bytes(fr)
            f.write(struct.pack("<IIII", 1700000000 + i, 0, len(b), len(b)))
            f.write(b)


def go_bytes(b):
    """b as a Go interpreted string literal."""
    return '"' + "".join("\\x%02x" % c for c in b) + '"'


def write_fuzz_seeds(dirname, seeds):
    """Seeds for FuzzDecode in Go's corpus format: frame, link selector
    (the index into fuzzLinks in decode/fuzz_test.go)."""
    import os
    os.makedirs(dirname, exist_ok=True)
    for name, frame, sel in seeds:
        with open(os.path.join(dirname, name), "w") as f:
            f.write("go test fuzz v1\n[]byte(%s)\nuint8(%d)\n" % (go_bytes(bytes(frame)), sel))


def main():
    write_pcap("ethernet.pcap", 1, transport_frames() + cm_frames() + ipv6_frames() +
               vlan_frames() + mirror_frames() + rocev1_frames() + control_frames())
    write_pcap("sll.pcap", 113, sll_frames(False))
    write_pcap("sll2.pcap", 276, sll_frames(True))
    raw = [bytes(f)[14:] for f in (transport_frames()[3], ipv6_frames()[0])]
    write_pcap("rawip.pcap", 101, raw)
    write_pcap("ipv4.pcap", 228, raw[:1])
    write_pcap("ipv6.pcap", 229, raw[1:])
    write_pcap("infiniband.pcap", 247, ib_frames())
    write_pcap("erf.pcap", 197, erf_frames())
    t, m, ib, erf = transport_frames(), mirror_frames(), ib_frames(), erf_frames()
    write_fuzz_seeds("../../decode/testdata/fuzz/FuzzDecode", [
        ("ethernet-rc-write-first", t[3], 0), ("ethernet-rd-dc-write", t[30], 0),
        ("ethernet-ipv6-vlan", ipv6_frames()[1], 0), ("ethernet-erspan3-platform", m[2], 0),
        ("ethernet-erspan2-outer-ipv6", m[4], 0), ("ethernet-rocev1", rocev1_frames()[0], 0),
        ("ethernet-pfc", control_frames()[0], 0), ("ethernet-cm-req", cm_frames()[0], 0),
        ("raw-ipv6", raw[1], 1), ("sll-send", sll_frames(False)[1], 2), ("erf-ib-ext", erf[1], 3),
        ("erf-ethernet", erf[-3], 3), ("erf-ethernet-rlen-0", erf[-1], 3), ("ib-grh-ack", ib[3], 6), ("sll2-ack", sll_frames(True)[3], 7),
    ])


if __name__ == "__main__":
    main()
