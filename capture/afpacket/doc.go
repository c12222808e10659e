// Package afpacket captures live frames from a network interface through
// AF_PACKET sockets with TPACKET_V3 memory-mapped receive rings.
//
// [Open] opens [Config.Sockets] sockets on one interface, joined in one
// fanout group so that the kernel spreads frames over them (by flow hash by
// default, so each flow stays on one socket). Each socket is one
// capture.Source, meant to be owned by one worker goroutine. Unless
// [Config.All] is set, a classic BPF filter in the kernel keeps only the
// traffic rocescope analyzes: RoCEv2 (UDP destination port 4791 over IPv4 or
// IPv6, under zero, one or two VLAN tags; behind up to six IPv6 hop-by-hop,
// routing, destination options and first-fragment headers), RoCEv1
// (ethertype 0x8915), GRE-encapsulated mirror traffic (IP protocol 47) and
// MAC control frames (ethertype 0x8808: PFC and pause).
//
// # Frames and their lifetime
//
// Frames point into the ring the kernel writes: no copy is made, except for
// frames whose outermost VLAN tag the kernel took out of the frame (it always
// does on receive). Those are rebuilt with the tag in a per-source scratch
// buffer, so every frame is exactly what was on the wire (up to the snap
// length). A batch's frames stay valid until the next call to Next or Close
// on the same source; the ring blocks they live in are handed back to the
// kernel then.
//
// Frame.Time is the kernel's software receive time of each frame
// (CLOCK_REALTIME: skb->tstamp, stamped when the frame entered the
// kernel's receive path after the driver, or, when nothing asked for
// stamps, the time the packet socket's receive hook ran, in the same
// path), which TPACKET_V3 reports per frame in nanoseconds: a frame's own
// time, microseconds after it reached the host, not the time its block
// was handed over.
//
// # Timeouts and closing
//
// Next waits at most 100 ms for traffic and then returns an empty batch, so
// the caller can follow the clock. Close may be called from any goroutine:
// it wakes a blocked Next, which returns os.ErrClosed, waits for it to leave
// the ring, and then unmaps the ring and closes the socket.
//
// # Drops
//
// Stats().Dropped is the kernel's tp_drops counter (frames that passed the
// filter and found the ring full), read with PACKET_STATISTICS; the kernel
// resets it on every read, so the source accumulates it. tp_freeze_q_cnt is
// not added: it counts how often the ring filled up, not frames, and those
// frames are already in tp_drops.
//
// Capturing needs root or CAP_NET_RAW. The package works on Linux only;
// elsewhere Open returns [ErrUnsupported].
package afpacket
