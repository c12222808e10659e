// Package capture provides sources of frames for rocescope: capture files
// (pcap, pcapng, ERF-in-pcap as ibdump writes, gzip), live interfaces
// (AF_XDP, AF_PACKET, libpcap behind the build tag "pcap") and, in
// sub-package synth, synthetic RoCE traffic with exact ground truth. It also
// writes pcap files.
//
// Every source implements [Source]: the caller owns a [Batch], the source
// fills it with frames whose bytes it lends until the next call.
package capture
