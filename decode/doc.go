// Package decode decodes RoCE and InfiniBand frames without allocating.
//
// [Packet.Decode] reads a frame of a given [LinkType] (Ethernet with VLAN
// tags and ERSPAN/GRE mirror encapsulation, Linux SLL/SLL2, BSD loopback,
// raw IP of link types 101, 228 and 229, ERF records, raw InfiniBand)
// down through IPv4/IPv6 and UDP to the
// InfiniBand base transport header and every extension header its opcode
// implies, and also RoCEv1, native InfiniBand, PFC and 802.3x pause frames
// and CM MADs. It fills a caller-owned [Packet]; only Packet.Payload points
// into the frame. [Packet.AppendJSON] writes the decoded fields for
// rocescope dump. The sub-package iblayers offers the same decoding as
// gopacket layers.
//
// A Packet must not be used by two goroutines at once; distinct Packets are
// independent. A [Decoder] is read-only and may be shared.
//
// # Contract
//
// Decode resets Headers, Kind, Err, PayloadLen and Payload, and writes every
// field of each header whose bit it sets in Headers; fields of headers whose
// bit is clear keep stale values. It reads only inside the frame, never
// allocates and never panics. It returns nil or an [Error], a one-byte code:
// [ErrTruncated] when the frame ends before a header it announces (the
// headers before the cut are decoded), any other code when a header is
// malformed. A payload cut short by the snap length is not an error:
// PayloadLen is the on-wire length, Payload the captured part, and HasICRC
// is clear. Frames that are neither RoCE, InfiniBand nor pause frames
// decode with a nil error and KindOther.
//
// # Definitions
//
//   - RoCEv2 is UDP to the Decoder's port (4791 by default); the source port
//     does not count. Fragments of IPv4 or IPv6 datagrams are not followed.
//   - Src and Dst are the IP addresses, the GRH GIDs (RoCEv1, and native IB
//     with a GRH) or the LRH LIDs. DSCP and ECN come from the IPv4 TOS, the
//     IPv6 traffic class or, for RoCEv1, the GRH traffic class; TTL from the
//     IPv4 TTL, IPv6 hop limit or GRH hop limit. IPLen is the length field
//     as carried: IPv4 total length, IPv6 payload length, GRH PayLen.
//   - Mirrored frames: the outer IP addresses go to MirrorSrc/MirrorDst and
//     the inner frame fills the other fields. ERSPAN type I (GRE 0x88BE
//     without a sequence number) is reported as MirrorERSPAN2 with session
//     0. A mirror inside a mirror is not followed.
//   - PayloadLen is the enclosing length (UDP length, GRH PayLen or LRH
//     PktLen, which excludes the VCRC) less the transport headers, the pad
//     and the ICRC.
//   - CM MADs are read from UD packets to QP 1 whose management class is
//     0x07: REQ, REJ, REP, RTU, DREQ and DREP.
//   - The BTH version (TVer) and reserved bits are reported, not checked, as
//     Wireshark accepts any value; a reserved or vendor-specific opcode is
//     malformed (ErrOpcode), since the headers after its BTH are unknown.
//
// # Agreement with Wireshark
//
// The tests compare every field with tshark 4.0 over a corpus of real
// captures and synthetic frames. Where the decoder differs, Wireshark is
// wrong and the tests name the case: the RD (DC) Acknowledge read without
// its RDETH, opcode 0x55 read as a DC connect header, the XRC, CNP, RDMA
// FLUSH and ATOMIC WRITE opcodes it does not know, the ICRC of frames cut
// short whose record claims the cut length, and the ICRC of packets whose
// DETH source QP is 0 or 1, which it parses as management datagrams.
//
// Like Wireshark, the decoder reads opcodes 0x40-0x5F (reliable datagram)
// with 8 bytes after the BTH before the RDETH: RD was never implemented by
// an adapter, and the packets with these opcodes on real fabrics are NVIDIA
// ConnectX Dynamically Connected (DC) transport packets, which carry them.
package decode
