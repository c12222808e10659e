package afxdp

import (
	"fmt"
	"math/bits"
	"os"
)

// Config selects queues, sizes and modes. A nil *Config means the defaults.
// Open does not modify it.
type Config struct {
	// Queues are the receive queues to capture, one socket each. Empty
	// means every receive queue of the interface: as many as the driver
	// reports channels (receive-only and combined, as ethtool -l shows),
	// else as /sys/class/net/IFACE/queues/rx-* lists, or queue 0 when
	// neither tells. Open refuses a queue the interface does not have.
	Queues []int
	// All redirects every frame instead of RoCE, GRE and PFC only.
	All bool
	// HostFrames takes also the frames addressed to the interface: to its
	// MAC address, or to a group address (broadcast, multicast). By
	// default the program passes them to the kernel, so that the host
	// keeps receiving its own traffic (its RDMA, ERSPAN sent to it, ARP),
	// and takes only frames addressed to other hosts, which is what a
	// mirror port carries; the caller captures the frames passed another
	// way if it wants them (AF_PACKET sees them). Set it on a port that
	// only receives mirrored traffic addressed to this host, such as
	// ERSPAN to a dedicated collector.
	HostFrames bool
	// FrameSize is the size of one UMEM frame in bytes, a power of two
	// from 2048 to the page size. Default 4096.
	FrameSize int
	// NumFrames is the number of UMEM frames per queue, a power of two.
	// Default 16384 (64 MiB of UMEM with 4 KiB frames). The fill ring has
	// this many entries, so every frame the caller does not hold is always
	// available to the kernel.
	NumFrames int
	// RingSize is the number of entries in the RX ring, a power of two.
	// Default 8192: room for a stall of 0.4 ms at 20 Mpps on the queue,
	// or of 0.3 s at the 30 k frames/s of the live tests on a busy host.
	RingSize int
	// Mode is how the XDP program is attached: "driver" (native),
	// "generic" (skb) or "auto" (driver, else generic). Default "auto".
	Mode string
	// ZeroCopy is how sockets are bound: "on", "off" (copy) or "auto"
	// (zero-copy, else copy). Default "auto".
	ZeroCopy string
	// SnapLen is the most bytes delivered of each frame: the XDP program
	// cuts longer frames to SnapLen bytes before the redirect, and
	// Frame.OrigLen keeps their length on the wire. From 64 to FrameSize
	// minus 256 (the XDP headroom); default 512, enough for every header
	// rocescope decodes (a CM MAD behind IPv6, VLAN tags and ERSPAN).
	SnapLen int
}

// Counters are the XDP program's totals over all CPUs and queues.
type Counters struct {
	Redirected uint64 // frames redirected to a socket
	NoSocket   uint64 // frames matched on a queue without a socket, passed to the kernel
	Passed     uint64 // frames not matched, passed to the kernel
	Host       uint64 // frames matched but addressed to this host, passed to the kernel (see Config.HostFrames)
}

// Defaults of Config.
const (
	DefaultFrameSize = 4096
	DefaultNumFrames = 16384
	DefaultRingSize  = 8192
	DefaultSnapLen   = 512
)

// xdpHeadroom is the room the kernel keeps before the frame in each UMEM
// frame (XDP_PACKET_HEADROOM); the metadata lives in it.
const xdpHeadroom = 256

// withDefaults returns a copy of c with zero fields set to their defaults,
// or an error naming the first invalid field.
func (c *Config) withDefaults() (Config, error) {
	var cfg Config
	if c != nil {
		cfg = *c
		cfg.Queues = append([]int(nil), c.Queues...)
	}
	if cfg.FrameSize == 0 {
		cfg.FrameSize = DefaultFrameSize
	}
	if cfg.NumFrames == 0 {
		cfg.NumFrames = DefaultNumFrames
	}
	if cfg.RingSize == 0 {
		cfg.RingSize = DefaultRingSize
	}
	if cfg.SnapLen == 0 {
		cfg.SnapLen = DefaultSnapLen
	}
	if cfg.Mode == "" {
		cfg.Mode = "auto"
	}
	if cfg.ZeroCopy == "" {
		cfg.ZeroCopy = "auto"
	}
	switch {
	case cfg.FrameSize < 2048 || cfg.FrameSize > os.Getpagesize() || !powerOfTwo(cfg.FrameSize):
		return cfg, fmt.Errorf("afxdp: frame size %d: want a power of two from 2048 to the page size", cfg.FrameSize)
	case cfg.NumFrames < 2 || cfg.NumFrames > 1<<20 || !powerOfTwo(cfg.NumFrames):
		return cfg, fmt.Errorf("afxdp: frame count %d: want a power of two up to %d", cfg.NumFrames, 1<<20)
	case cfg.RingSize < 2 || cfg.RingSize > 1<<20 || !powerOfTwo(cfg.RingSize):
		return cfg, fmt.Errorf("afxdp: ring size %d: want a power of two up to %d", cfg.RingSize, 1<<20)
	case cfg.SnapLen < 64 || cfg.SnapLen > cfg.FrameSize-xdpHeadroom:
		return cfg, fmt.Errorf("afxdp: snap length %d: want 64 to %d (frame size %d less %d bytes of headroom)",
			cfg.SnapLen, cfg.FrameSize-xdpHeadroom, cfg.FrameSize, xdpHeadroom)
	case cfg.Mode != "auto" && cfg.Mode != "driver" && cfg.Mode != "generic":
		return cfg, fmt.Errorf("afxdp: mode %q: want auto, driver or generic", cfg.Mode)
	case cfg.ZeroCopy != "auto" && cfg.ZeroCopy != "on" && cfg.ZeroCopy != "off":
		return cfg, fmt.Errorf("afxdp: zero-copy %q: want auto, on or off", cfg.ZeroCopy)
	}
	seen := make(map[int]bool, len(cfg.Queues))
	for _, q := range cfg.Queues {
		if q < 0 || q > 0xffff {
			return cfg, fmt.Errorf("afxdp: queue %d: out of range 0..65535", q)
		}
		if seen[q] {
			return cfg, fmt.Errorf("afxdp: queue %d listed twice", q)
		}
		seen[q] = true
	}
	return cfg, nil
}

func powerOfTwo(n int) bool { return n > 0 && bits.OnesCount(uint(n)) == 1 }
