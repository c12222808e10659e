package afpacket

import (
	"errors"
	"fmt"
	"time"

	"github.com/rocescope/rocescope/capture/filter"
)

// ErrUnsupported is returned by Open on systems without AF_PACKET.
var ErrUnsupported = errors.New("afpacket: AF_PACKET capture needs Linux")

// Defaults for the zero fields of a [Config]. With them each socket maps
// DefaultBlockSize*DefaultNumBlocks = 128 MiB of ring memory; past
// DefaultRingSockets sockets the default rings share 1 GiB (32 MiB each at
// least).
const (
	DefaultBlockSize    = 4 << 20 // bytes per ring block
	DefaultNumBlocks    = 32      // blocks per ring
	DefaultFrameSize    = 2048    // frame slot size the kernel checks the ring layout with
	DefaultSnapLen      = 262144  // bytes kept per frame: whole frames
	DefaultBlockTimeout = 10 * time.Millisecond
	DefaultFanout       = "hash"
	DefaultRingSockets  = 8 // sockets that get DefaultNumBlocks each by default
)

// Config says how to open a capture. The zero value (or a nil *Config)
// means one socket, the RoCE filter, promiscuous mode and the defaults
// above. Open does not modify it.
type Config struct {
	// Sockets is the number of sockets (and sources) in the fanout group;
	// 0 means 1.
	Sockets int
	// All captures every frame: no filter is attached, so that non-RoCE
	// frames can be counted.
	All bool
	// BlockSize is the size of a ring block in bytes: a power of two and a
	// multiple of the page size. 0 means DefaultBlockSize. A frame larger
	// than a block is truncated to it.
	BlockSize int
	// NumBlocks is the number of blocks per ring; 0 means DefaultNumBlocks
	// for up to DefaultRingSockets sockets and fewer (at least 8) beyond,
	// so that many sockets do not map gigabytes. Each socket maps
	// BlockSize*NumBlocks bytes.
	NumBlocks int
	// FrameSize is the frame slot size of the ring request, a multiple of
	// 16 that divides BlockSize. TPACKET_V3 packs frames of any size into
	// blocks; the kernel uses it only to check the layout. 0 means
	// DefaultFrameSize.
	FrameSize int
	// SnapLen is the most bytes kept of each frame; 0 means
	// DefaultSnapLen (whole frames).
	SnapLen int
	// Filter is a capture filter expression the kernel runs on every
	// frame, after the RoCE filter unless All is set: the socket receives
	// only the frames it matches. The kernel counts none of the frames it
	// removes. The kernel shows the filter a frame without the VLAN tag
	// the NIC took out of it (as tcpdump sees frames live), so an
	// expression with a vlan primitive does not mean here what it means on
	// the frame's bytes ([filter.Expr.VLAN]).
	Filter *filter.Expr
	// Inbound captures only frames the interface receives, not those the
	// host sends on it (PACKET_IGNORE_OUTGOING, Linux 4.20).
	Inbound bool
	// NoPromisc leaves the interface's promiscuous mode alone. By default
	// each socket turns it on while it is open (the kernel counts users),
	// as a mirror port's frames are addressed to other hosts.
	NoPromisc bool
	// Fanout is how the kernel spreads frames over the sockets: "hash"
	// (by flow hash, the default: a flow stays on one socket), "cpu" (by
	// the CPU that received the frame), "lb" (round robin) or "qm" (by the
	// NIC's receive queue). It matters only with more than one socket.
	Fanout string
	// BlockTimeout is how long the kernel fills a block before handing it
	// over partly full; 0 means DefaultBlockTimeout. It bounds the delay of
	// frames at low rates. The kernel counts it in whole milliseconds.
	BlockTimeout time.Duration
}

// fanoutModes maps Config.Fanout names to PACKET_FANOUT_* modes.
var fanoutModes = map[string]uint16{
	"hash": 0, // PACKET_FANOUT_HASH
	"lb":   1, // PACKET_FANOUT_LB
	"cpu":  2, // PACKET_FANOUT_CPU
	"qm":   5, // PACKET_FANOUT_QM
}

// settings is a validated Config with every default filled in.
type settings struct {
	Config
	fanoutMode uint16
}

// validate returns cfg with defaults filled in, or an error naming the
// first bad field. pageSize is the system's page size.
func validate(cfg *Config, pageSize int) (settings, error) {
	var s settings
	if cfg != nil {
		s.Config = *cfg
	}
	c := &s.Config
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Sockets, 1)
	def(&c.BlockSize, DefaultBlockSize)
	def(&c.NumBlocks, min(DefaultNumBlocks, max(8, DefaultRingSockets*DefaultNumBlocks/max(c.Sockets, 1))))
	def(&c.FrameSize, DefaultFrameSize)
	def(&c.SnapLen, DefaultSnapLen)
	if c.BlockTimeout == 0 {
		c.BlockTimeout = DefaultBlockTimeout
	}
	if c.Fanout == "" {
		c.Fanout = DefaultFanout
	}
	mode, ok := fanoutModes[c.Fanout]
	switch {
	case c.Sockets < 0 || c.Sockets > 1024:
		return s, fmt.Errorf("afpacket: Sockets %d: want 1 to 1024", c.Sockets)
	case c.BlockSize < pageSize || c.BlockSize%pageSize != 0 || c.BlockSize&(c.BlockSize-1) != 0 || c.BlockSize > 1<<30:
		return s, fmt.Errorf("afpacket: BlockSize %d: want a power of two from the page size (%d) to 1 GiB", c.BlockSize, pageSize)
	case c.NumBlocks < 1 || int64(c.NumBlocks)*int64(c.BlockSize) > 1<<36:
		return s, fmt.Errorf("afpacket: NumBlocks %d: want 1 or more, with at most 64 GiB per ring", c.NumBlocks)
	case c.FrameSize < 64 || c.FrameSize%16 != 0 || c.BlockSize%c.FrameSize != 0:
		return s, fmt.Errorf("afpacket: FrameSize %d: want a multiple of 16, at least 64, dividing BlockSize %d", c.FrameSize, c.BlockSize)
	case c.SnapLen < 0 || c.SnapLen > DefaultSnapLen:
		return s, fmt.Errorf("afpacket: SnapLen %d: want 0 to %d", c.SnapLen, DefaultSnapLen)
	case c.BlockTimeout < time.Millisecond || c.BlockTimeout > time.Minute:
		return s, fmt.Errorf("afpacket: BlockTimeout %v: want 1ms to 1m", c.BlockTimeout)
	case !ok:
		return s, fmt.Errorf("afpacket: Fanout %q: want hash, cpu, lb or qm", c.Fanout)
	}
	s.fanoutMode = mode
	return s, nil
}

// describe is the text of Group.Describe for an interface opened with s;
// like the other capture modes', it does not name the interface.
func (s *settings) describe() string {
	filter := "roce"
	switch {
	case s.All && s.Filter != nil:
		filter = fmt.Sprintf("%q in the kernel", s.Filter)
	case s.All:
		filter = "none (all frames)"
	case s.Filter != nil:
		filter = fmt.Sprintf("roce and %q in the kernel", s.Filter)
	}
	plural := "s"
	if s.Sockets == 1 {
		plural = ""
	}
	fanout := ""
	if s.Sockets > 1 {
		fanout = ", fanout " + s.Fanout
	}
	inbound := ""
	if s.Inbound {
		inbound = ", received frames only"
	}
	return fmt.Sprintf("AF_PACKET TPACKET_V3, %d socket%s%s, filter %s%s, ring %d x %d KiB per socket",
		s.Sockets, plural, fanout, filter, inbound, s.NumBlocks, s.BlockSize>>10)
}
