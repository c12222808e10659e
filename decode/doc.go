// Package decode decodes RoCE and InfiniBand frames without allocating.
//
// [Packet.Decode] reads a frame of a given [LinkType] (Ethernet with VLAN
// tags and ERSPAN/GRE mirror encapsulation, Linux SLL/SLL2, raw IP, ERF
// records, raw InfiniBand) down through IPv4/IPv6 and UDP to the
// InfiniBand base transport header and every extension header its opcode
// implies, and also RoCEv1, native InfiniBand, PFC and 802.3x pause frames
// and CM MADs. It fills a caller-owned [Packet]; only Packet.Payload points
// into the frame.
//
// A Packet must not be used by two goroutines at once; distinct Packets are
// independent.
package decode
