// Package afxdp captures RoCE traffic live from a network interface over
// AF_XDP sockets, one per receive queue.
//
// [Open] loads a small XDP program, assembled in Go with
// github.com/cilium/ebpf/asm (no C compiler, no pre-built object), attaches
// it to the interface and binds one AF_XDP socket per queue. The program
// redirects to the sockets only the frames rocescope analyzes and passes
// everything else to the kernel stack, so the host keeps working normally:
//
//   - RoCEv2: IPv4 (any header length, first fragments only) or IPv6 with
//     UDP destination port 4791. Behind the IPv6 header, up to six
//     hop-by-hop, routing, destination options and fragment headers are
//     walked (a fragment header only at fragment offset 0, whose fragment
//     carries the UDP header); a frame with more of them, or with another
//     extension header (authentication, ESP), is passed.
//   - RoCEv1: EtherType 0x8915.
//   - GRE (IP protocol 47 over IPv4, or over IPv6 behind the extension
//     headers above), which carries ERSPAN and plain GRE mirror traffic.
//   - PFC and 802.3x pause: EtherType 0x8808.
//
// Up to two VLAN tags (0x8100 or 0x88a8, in any order) are skipped before
// the EtherType is examined; a frame with a third tag is passed. With
// [Config.All] every frame is redirected.
//
// # The host's own frames
//
// A frame redirected to a socket never reaches the kernel's stack, nor
// any other packet socket (tcpdump, an AF_PACKET capture). So that a
// capture on an interface the host also uses takes nothing from it, the
// program redirects only frames addressed to other hosts, which is what a
// mirror port carries, and passes to the kernel those addressed to this
// one: to the interface's MAC address (read when the group is opened) or to
// a group address (broadcast, multicast, PFC). It counts them in
// [Counters].Host. The host's RDMA (soft-RoCE on UDP port 4791), ERSPAN
// sent to it and ARP keep working; a caller that wants those frames
// captures them from the kernel, as rocescope does with an AF_PACKET socket
// that receives exactly the frames the program did not take. Frames to
// another MAC address the host answers to (a macvlan on top of the
// interface) are taken. [Config.HostFrames] takes the host's frames too,
// for a port that only receives ERSPAN sent to this collector: the check
// costs a dozen instructions per frame the program matches (see
// BenchmarkCaptureLive).
//
// The program redirects with bpf_redirect_map(xsks_map, rx_queue_index,
// XDP_PASS): a frame that arrives on a queue without a socket is passed to
// the kernel instead of dropped. A per-CPU array counts frames redirected,
// matched on a queue without a socket, and passed ([Group.Counters]).
//
// # Frames, lengths and times
//
// Before the redirect the program writes 16 bytes of XDP metadata
// (bpf_xdp_adjust_meta) in front of the frame: the time it ran
// (bpf_ktime_get_ns, CLOCK_MONOTONIC) and the frame's length. Then it cuts
// a frame longer than [Config.SnapLen] (default 512 bytes: every header
// rocescope decodes, CM MADs included) to that length with
// bpf_xdp_adjust_tail. So frames of any length up to the MTU (9216 and
// beyond) fit in a UMEM frame and are counted, and the socket delivers
// Frame.Data = the first SnapLen bytes and Frame.OrigLen = the length on
// the wire.
//
// Frame.Time is the program's timestamp converted to Unix ns with the
// offset between CLOCK_REALTIME and CLOCK_MONOTONIC, which each socket
// measures when it is made and again at most a second later whenever
// frames arrive (a wall clock step shows in frame times within a
// second). Precision: nanoseconds, taken when the XDP hook ran, in the
// driver's receive path (driver mode) or where the kernel's receive path
// starts (generic mode), so after the NIC's interrupt coalescing and, in
// generic mode, the driver's own receive work; the offset adds an error
// under a microsecond (half the time between two clock_gettime calls).
//
// A driver that does not support XDP metadata makes bpf_xdp_adjust_meta
// fail. The program then redirects the frame whole and without metadata:
// it gets the time Next found it, and a frame longer than FrameSize minus
// 256 bytes (the XDP headroom the kernel keeps in each UMEM frame) does
// not fit and is dropped by the kernel (counted in Dropped).
// [Socket.NoMetadata] counts such frames. [Open] fails with a reason on a
// kernel whose XDP programs lack one of the helpers (Linux before 5.18),
// so that the caller can fall back to AF_PACKET.
//
// # Sources
//
// Each socket is a capture.Source ([Socket]). Next lends frames that point
// into the socket's UMEM: they stay valid until the next call to Next or
// Close, which hands the buffers back to the kernel's fill ring in one batch.
// Frame.Port is the queue index and Frame.Link is Ethernet. Once the
// interface is deleted (the kernel unbinds the socket), Next returns an
// error wrapping capture.ErrInterfaceGone.
//
// A Socket is owned by one goroutine. Stats may be called from any
// goroutine; Close may too, and makes a Next that waits in poll return
// os.ErrClosed at once.
//
// # Modes
//
// The program is attached through a BPF link in driver (native) mode when
// the driver supports it, in generic (skb) mode otherwise; sockets are bound
// in zero-copy mode when the driver supports it, in copy mode otherwise.
// [Group.Describe] tells which were used and why the faster one was not,
// and the snap length. Drivers refuse driver mode to a program that does
// not handle multi-buffer frames, as this one does not, when the MTU is
// larger than a page holds (about 3.5 kB): a veth with MTU 9000 does
// (ERANGE), and the program then runs in generic mode, where frames of any
// length are linear.
//
// # veth
//
// Measured on Linux 6.18 with the live tests: both modes deliver every
// frame on the receiving end of a veth pair. Driver mode needs no XDP
// program on the peer and no GRO setting: attaching a program to a veth
// switches its receive path to NAPI by itself. (The peer needs a program
// only when frames are redirected into a veth, which this package does not
// do.) Zero-copy bind fails on veth with EOPNOTSUPP, so copy mode is used.
//
// Opening needs root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF
// (CAP_IPC_LOCK too if the memlock limit is lower than the UMEM); without
// them Open returns an [OpError] that says so. On other systems than
// Linux [Open] returns [ErrUnsupported].
package afxdp
