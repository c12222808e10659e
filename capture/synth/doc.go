// Package synth generates realistic synthetic RoCEv2 traffic from a seed,
// together with its exact ground truth, for testing rocescope end to end.
//
// A [Source] implements capture.Source: Next fills batches with Ethernet
// frames in time order and returns io.EOF after Config.Packets frames;
// [Source.Truth] then returns the [Truth], which encodes with
// encoding/json (rocescope gen --truth writes it). The trace is a pure
// function of the [Config], seed included: the same Config gives the same
// bytes, times and truth with any batch size, Go release or architecture
// (the generator has its own random number generator, draws with integers
// only, and its few floating-point expressions cannot be fused; a test pins
// the hashes of one trace and truth, on amd64 and 386 alike).
//
// A Source is owned by one goroutine; Stats and Close may be called from
// any goroutine. Frame bytes are valid until the next Next or Close.
//
// # Traffic
//
// Config.Flows RC connections run between Config.Hosts hosts. Each has a
// requester QP A and a responder QP B (distinct 24-bit QP numbers across
// the trace), a path MTU of 1024 or 4096 (or Config.PMTU), IPv4 or IPv6,
// optionally an 802.1Q tag (priority 3), and a UDP source port and IPv6
// flow label derived from the QP pair as Linux does
// (rdma_calc_flow_label), the same in both directions. RoCE packets carry
// DSCP Config.DSCP and ECN ECT(0), or CE when marked; P_Key 0xffff; UDP
// checksum 0; a real ICRC (CRC-32 over the invariant fields, checked
// against captures of real NICs in the tests), or none when the snap
// length cuts it.
//
// A→B carries RDMA WRITE, SEND (First/Middle/Last/Only, a quarter of them
// with immediate data) and RDMA READ requests; RETH on WRITE First/Only and
// READ requests, AckReq on every Last and Only. Message sizes (up to 2^20
// packets) and the connections' shares of the frames are Zipf-distributed
// (Config.ZipfS) so that a few connections are elephants; one message in
// eight is a small control message of 1 to 64 bytes. B→A carries
// coalesced ACKs (on AckReq and at least every 8 packets), READ responses
// (a READ of L bytes consumes max(1, ceil(L/PMTU)) PSNs, and its responses
// carry them, with AETH on First, Last and Only), NAKs and RNR NAKs. PSNs
// start at random (one connection in eight just below the 24-bit wrap) and
// wrap.
//
// Loss (Config.LossProb) hits new request packets. A packet lost after the
// mirror is in the trace; one lost before it (Config.LossBeforeMirror) is
// not. The responder NAKs (PSN sequence error) the next packet that
// arrives, discards what follows, and the requester, having sent a few
// more packets, goes back N: it resends every packet from the lost PSN,
// with the same PSNs, transport headers and payload bytes. An RNR NAK
// (Config.RNRProb, on SEND First/Only) is handled the same way from the
// refused packet (the RNR timer is not modelled: the requester resends at
// its next turn). A CE-marked packet (requests, and READ responses) makes
// its receiver send a CNP back (opcode 0x81, BECN set, DSCP 48 and not
// ECN-capable, priority 6 when tagged, dest QP the sender's QP, 16 zero
// bytes), at most one pending per direction. A
// requester that receives a CNP halves its sending rate (a simplified
// DCQCN: down to 1/64 at most, recovering linearly over 5 ms); the slots
// it gives up go to other connections, as the trace keeps its length. Some
// connections (Config.JitterFlows) alternate between a busy window and a
// quiet one (a tenth of the busy rate). The rest of the frames are PFC
// pause frames (ethertype 0x8808, opcode 0x0101, to 01:80:c2:00:00:01) and
// background ARP, UDP and TCP (ports 20000-29999, text payload, valid
// checksums) between the hosts; one background UDP datagram in sixteen
// comes from port 4791, which does not make it RoCE.
//
// With Config.ERSPAN set, every frame arrives as a switch's mirror session
// sends it to a collector: Ethernet, IPv4 from 192.0.2.1 to 192.0.2.100,
// GRE with a sequence number, and an ERSPAN type II or III header
// (session 7), then the frame. The truth then counts the mirrored frames'
// on-wire lengths, and keys flows by the inner addresses.
//
// # Truth
//
// The truth is defined by what a passive observer sees in the trace, the
// frames as Next returns them; the tests recompute it from decoded frames
// alone. Windows are aligned to multiples of Config.Window since the Unix
// epoch by frame time (index floor(Time/Window)); only windows with frames
// are listed. Per window:
//
//   - packets: frames; bytes: the sum of their on-wire lengths (OrigLen).
//   - roce_packets: frames with a BTH (UDP destination port 4791);
//     other_packets: every other frame, PFC frames included.
//   - payload_bytes: the sum of RDMA payload lengths: UDP length - 8 - BTH
//     and extension headers - pad - 4 (ICRC), also when the snap length
//     cut the payload.
//   - opcodes: RoCE packets by BTH opcode (decimal keys in JSON).
//   - messages: packets whose opcode ends a message, by
//     decode.Opcode.EndsMessage: Last and Only of SEND, RDMA WRITE and READ
//     response, retransmissions included.
//   - cnp: packets with opcode 0x81; becn, fecn: packets with the BTH BECN
//     or FECN bit (the generator sets BECN only on CNPs, FECN never).
//   - ecn_ce: RoCE packets with IP ECN 3.
//   - acks, rnr_naks, naks: opcode 0x11 (Acknowledge) packets whose AETH
//     syndrome says ACK, RNR NAK or NAK. READ responses are not counted.
//   - retransmits, psn_gaps: each flow keeps an expected PSN, unset until
//     its first request packet (decode.Opcode.IsRequest). A request with
//     PSN q is a retransmit when (q - expected) mod 2^24 >= 2^23 (behind;
//     the expected PSN is kept), a gap when it is in (0, 2^23) (ahead), and
//     in sequence when it equals it; after a gap or an in-sequence packet
//     the expected PSN becomes q + n mod 2^24, with n = 1, or for a READ
//     request max(1, ceil(DMA length/PMTU)). Without loss before the
//     mirror, the retransmits are exactly the requests repeating a PSN
//     already seen on the flow, and there are no gaps.
//   - pfc: per priority whose bit is set in a PFC frame's class-enable
//     vector, frames and the sum of that priority's quanta.
//   - flows: the number of flows with at least one RoCE packet in the
//     window; per_flow lists them.
//
// A flow is one direction of a connection, keyed by (source IP,
// destination IP, BTH destination QP): the A→B requests (with the CNPs A
// sends for CE-marked READ responses) and the B→A ACKs, responses and CNPs
// are two flows. Per flow: sqp (the QP that sends it),
// packets, bytes, rate_bps (bytes*8/window seconds; [Truth.RateBPS]),
// payload_bytes, messages, ecn_ce, retransmits and psn_gaps as above, and
// cnp_received: the CNPs carried in the window by the reverse flow (whose
// destination QP is this flow's sqp), which throttle this one. A CNP whose
// throttled flow sent no RoCE packet in the window counts in the window's
// cnp_unattributed instead.
//
// Truth.Total sums the windows, except flows, which counts the distinct
// flows of the whole trace; Truth.PerFlow sums each flow's window entries
// (without rates). Truth.JitterFlows lists the A→B flows of the jitter
// connections.
//
// # Scenarios
//
// Config.Scenario injects troubles, and healthy traffic that looks like
// them, each once, on top of the Packets frames of the traffic (which stay
// frame for frame what they are without it: the scenarios draw from a
// random number generator of their own). Each scenario has its own hosts
// (02:00:00:fa:hh:ll, 10.250.hh.ll, apart from the traffic's) and RC
// connections (IPv4, path MTU 4096), or its own source MAC (0c:42:a1:...),
// and a slot of time spread evenly over the duration (the storm 350 ms, the
// others 60 ms each, each but the storm within one window). The troubles,
// listed in Truth.Events under the kind of event a report names them:
//
//   - pfc_storm: XOFF frames (quanta 0xffff) for priority 4 every 50 µs for
//     300 ms, then an XON: paused all along at any link rate from 10 to 400
//     Gb/s; from the first XOFF to the XON.
//   - incast: 16 senders, each on its own host, send WRITE messages of 16
//     packets at about 10 Gb/s each into one destination for 3 ms (1 in 20
//     packets CE-marked after the first millisecond, answered by a CNP at
//     most every 50 µs, and an ACK per message); from the first packet to
//     the last.
//   - retransmission, cause nak: of a 32-packet WRITE, packet 10 is lost
//     after the mirror; the responder NAKs it (PSN sequence error) 3 µs
//     after packet 11, the requester, having sent up to packet 14, sends
//     10 to 31 from 6 µs after the NAK: 5 frames resent, from the NAK.
//   - retransmission, cause timeout: a message is ACKed, the last packet of
//     the next is lost after the mirror, and after 16 ms of silence the
//     requester sends all 8 packets again: from the last frame before the
//     silence.
//   - retransmission, cause rnr: a SEND Only is refused with an RNR NAK
//     (timer 14) and sent again 1.28 ms later.
//   - ce_without_cnp: 50 WRITE messages of 8 packets 100 µs apart, every
//     fourth packet CE-marked (100 marks), each ACKed, no CNP; from the
//     first mark to the last.
//
// The look-alikes, in Truth.LookAlikes, which must raise no event: fan_in,
// 64 senders at 0.5 Gb/s each into one destination for 20 ms (32 Gb/s);
// isolated_pauses, 10 XOFF frames 10 ms apart; psn_wrap, WRITEs whose PSNs
// run through 0; read_responses, four READs of 256 KiB (64 PSNs each) with
// their responses, then a WRITE at the PSN after the last READ's span.
//
// # Snap length
//
// With Config.SnapLen set (at least [MinSnapLen], plus the ERSPAN headers
// when mirrored, so that every header is captured), frames are cut: Data holds the first SnapLen bytes and OrigLen
// the on-wire length. The decoder reads such frames without error, with
// the RDMA payload length from the UDP length, so the truth is unchanged.
package synth
