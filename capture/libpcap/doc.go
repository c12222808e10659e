// Package libpcap captures live frames through libpcap (cgo, via
// github.com/google/gopacket/pcap). It is built only with the build tag
// "pcap" and needs libpcap's headers to build (libpcap-dev); without the tag
// the package is empty.
//
// It is the portable and most general capture path: it opens whatever
// libpcap opens, RDMA devices such as mlx5_0 (link type 247, raw
// InfiniBand, or Ethernet for RoCE) included, and takes the link type from
// the handle. Unless [Config.All] is set, a kernel BPF filter compiled by
// libpcap from [DefaultFilter] keeps only RoCE, RoCEv1, GRE mirror traffic
// and MAC control frames, untagged or under one or two VLAN tags.
//
// # Frames and their lifetime
//
// Open gives one source. libpcap hands out one frame at a time in a buffer
// the next read overwrites, so the source copies each frame into a buffer
// it owns; frames stay valid until the next Next or Close. Next returns
// when the batch is full or when libpcap's read timeout ([Config.Timeout],
// at most 100 ms) passes without a frame, with an empty batch if none came.
// Close may be called from any goroutine; a blocked Next then returns
// os.ErrClosed within one read timeout.
//
// Frame.Time is libpcap's timestamp of each frame. gopacket asks libpcap
// for nanosecond precision; on Linux libpcap reads the same TPACKET_V3
// ring as package afpacket, so each frame has the kernel's software
// receive time in nanoseconds. Where libpcap cannot give nanoseconds (BSD
// and macOS BPF devices, old libpcap) the time is in microseconds.
//
// Stats().Dropped is libpcap's ps_drop plus ps_ifdrop.
package libpcap
