// Package capture provides sources of frames for rocescope: capture files
// (pcap, pcapng, ERF-in-pcap as ibdump writes, gzip), live interfaces
// (AF_XDP, AF_PACKET, libpcap behind the build tag "pcap") and, in
// sub-package synth, synthetic RoCE traffic with exact ground truth. It also
// writes pcap files.
//
// Every source implements [Source]: the caller owns a [Batch], the source
// fills it with frames whose bytes it lends until the next call.
//
// # Timestamps
//
// Frame.Time is in ns since the Unix epoch. Every live source gives each
// frame its own time, taken by the kernel when the frame was received;
// the package documentation of each says where and how precisely:
//
//   - AF_XDP (afxdp): bpf_ktime_get_ns() in the XDP program, in the
//     driver's receive path or at the start of the stack's (generic mode),
//     converted from CLOCK_MONOTONIC with an offset measured each second
//     (error under a microsecond).
//   - AF_PACKET (afpacket): the kernel's software receive time, which
//     TPACKET_V3 reports per frame in nanoseconds.
//   - libpcap: the same as AF_PACKET on Linux (nanoseconds); microseconds
//     where libpcap cannot give nanoseconds.
//
// File sources give the times the file records, synth those of its model.
//
// # Interfaces
//
// A live source's Open returns an [InterfaceError] wrapping
// [ErrInterfaceNotFound] for an interface that does not exist, and its
// Next one wrapping [ErrInterfaceGone] once the interface has been deleted
// (AF_XDP, AF_PACKET and libpcap).
package capture
