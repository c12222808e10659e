//go:build pcap

package libpcap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket/pcap"
	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

var _ capture.Source = (*Source)(nil)

// roceTerms is one alternative of DefaultFilter: the frames rocescope
// analyzes after the tags.
const roceTerms = "udp dst port 4791 or ether proto 0x8915 or ip proto 47 or ip6 proto 47 or ether proto 0x8808"

// DefaultFilter is the BPF expression Open uses unless Config.Filter or
// Config.All is set: RoCEv2 (UDP destination port 4791), RoCEv1 (ethertype
// 0x8915), GRE mirror traffic (IP protocol 47) and MAC control frames (PFC
// and pause), untagged or under one or two VLAN tags. The tagged cases are
// nested because each "vlan" moves libpcap's header offsets for the rest of
// the expression (pcap-filter(7)).
const DefaultFilter = roceTerms + " or (vlan and (" + roceTerms + " or (vlan and (" + roceTerms + "))))"

// Defaults for the zero fields of a [Config].
const (
	DefaultSnapLen    = 262144 // whole frames
	DefaultTimeout    = 20 * time.Millisecond
	DefaultBufferSize = 64 << 20 // kernel ring bytes
	minArena          = 4 << 20  // least copy buffer per source
)

// Config says how to open a capture. The zero value (or a nil *Config)
// means the RoCE filter, promiscuous mode and the defaults above. Open does
// not modify it.
type Config struct {
	// SnapLen is the most bytes kept of each frame; 0 means DefaultSnapLen.
	SnapLen int
	// NoPromisc leaves the interface's promiscuous mode alone. By default
	// it is turned on while the capture is open, as a mirror port's frames
	// are addressed to other hosts.
	NoPromisc bool
	// Filter is a BPF expression (pcap-filter(7)) replacing DefaultFilter.
	Filter string
	// All captures every frame (no filter), so that non-RoCE frames can be
	// counted. Filter must then be empty.
	All bool
	// Timeout is libpcap's read timeout: how long Next waits for a frame
	// before it returns what it has. 0 means DefaultTimeout; at most 100 ms.
	Timeout time.Duration
	// BufferSize is the size of libpcap's kernel buffer in bytes; 0 means
	// DefaultBufferSize.
	BufferSize int
}

// settings returns cfg with the defaults filled in, or an error naming the
// first bad field.
func settings(cfg *Config) (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.SnapLen == 0 {
		c.SnapLen = DefaultSnapLen
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.Filter == "" && !c.All {
		c.Filter = DefaultFilter
	}
	switch {
	case c.SnapLen < 0 || c.SnapLen > DefaultSnapLen:
		return c, fmt.Errorf("libpcap: SnapLen %d: want 0 to %d", c.SnapLen, DefaultSnapLen)
	case c.Timeout < time.Millisecond || c.Timeout > 100*time.Millisecond:
		return c, fmt.Errorf("libpcap: Timeout %v: want 1ms to 100ms", c.Timeout)
	case c.BufferSize < 0:
		return c, fmt.Errorf("libpcap: BufferSize %d: want 0 or more", c.BufferSize)
	case c.All && c.Filter != "":
		return c, fmt.Errorf("libpcap: Filter %q: not with All", c.Filter)
	}
	return c, nil
}

// Group is a libpcap capture on one interface: one [Source].
type Group struct {
	src      *Source
	describe string
}

// Source is a libpcap handle as a capture.Source.
type Source struct {
	iface string
	link  decode.LinkType

	mu     sync.Mutex // held by Next while it reads, by Stats and by Close
	h      *pcap.Handle
	closed atomic.Bool
	arena  []byte // frame copies of the current batch
	used   int
	last   pcap.Stats // libpcap's counters at the last Stats or Close
	gone   error      // the interface disappeared: what every later Next returns

	received atomic.Uint64
}

// Open opens iface with libpcap. A nil cfg means the defaults.
func Open(iface string, cfg *Config) (*Group, error) {
	c, err := settings(cfg)
	if err != nil {
		return nil, err
	}
	in, err := pcap.NewInactiveHandle(iface)
	if err != nil {
		return nil, fmt.Errorf("libpcap: open %s: %w", iface, err)
	}
	defer in.CleanUp()
	for _, set := range []struct {
		what string
		err  error
	}{
		{"snap length", in.SetSnapLen(c.SnapLen)},
		{"promiscuous mode", in.SetPromisc(!c.NoPromisc)},
		{"timeout", in.SetTimeout(c.Timeout)},
		{"buffer size", in.SetBufferSize(c.BufferSize)},
	} {
		if set.err != nil {
			return nil, fmt.Errorf("libpcap: open %s: %s: %w", iface, set.what, set.err)
		}
	}
	h, err := in.Activate()
	if err != nil {
		if err.Error() == "Permission Denied" {
			return nil, fmt.Errorf("libpcap: open %s: %w (capturing needs root or CAP_NET_RAW): %w", iface, os.ErrPermission, err)
		}
		return nil, fmt.Errorf("libpcap: open %s: %w", iface, err)
	}
	link := decode.LinkType(h.LinkType())
	if !decode.Supported(link) {
		h.Close()
		return nil, fmt.Errorf("libpcap: open %s: link type %d (%s) not supported by the decoder", iface, link, pcap.DatalinkValToName(int(link)))
	}
	if c.Filter != "" {
		if err := h.SetBPFFilter(c.Filter); err != nil {
			h.Close()
			return nil, fmt.Errorf("libpcap: open %s: filter %q: %w", iface, c.Filter, err)
		}
	}
	filter := "roce"
	switch {
	case c.All:
		filter = "none (all frames)"
	case c.Filter != DefaultFilter:
		filter = fmt.Sprintf("%q", c.Filter)
	}
	return &Group{
		src: &Source{iface: iface, link: link, h: h, arena: make([]byte, max(minArena, 2*c.SnapLen))},
		describe: fmt.Sprintf("libpcap %s, link type %s, filter %s",
			pcap.Version(), pcap.DatalinkValToName(int(link)), filter),
	}, nil
}

// Sources returns the group's one source; its frames have Port 0.
func (g *Group) Sources() []capture.Source { return []capture.Source{g.src} }

// Close closes the capture. It is idempotent.
func (g *Group) Close() error { return g.src.Close() }

// Describe says how the group captures, such as "libpcap version 1.10.4
// on eth1, link type EN10MB, filter roce".
func (g *Group) Describe() string { return g.describe }

// ifaceGone is libpcap's error text (pcap-linux.c) for a
// read from an interface that was deleted.
const ifaceGone = "The interface disappeared"

// Next fills b with copies of the frames libpcap has, until b is full or a
// read times out. It returns os.ErrClosed after Close, and an error
// wrapping capture.ErrInterfaceGone, from then on, once the interface has
// disappeared.
func (s *Source) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	if cap(b.Frames) == 0 {
		return capture.ErrNoRoom
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Every frame handed out is counted, also those returned with an
	// error or with os.ErrClosed.
	defer func() { s.received.Add(uint64(len(b.Frames))) }()
	s.used = 0
	for len(b.Frames) < cap(b.Frames) {
		if s.closed.Load() {
			return os.ErrClosed
		}
		if s.gone != nil {
			return fmt.Errorf("libpcap: %w", s.gone)
		}
		data, ci, err := s.h.ZeroCopyReadPacketData()
		switch {
		case err == pcap.NextErrorTimeoutExpired:
			return nil
		case errors.Is(err, io.EOF) && s.closed.Load():
			return os.ErrClosed
		case err == pcap.NextErrorReadError:
			why := s.h.Error()
			if why != nil && why.Error() == ifaceGone {
				s.gone = &capture.InterfaceError{Iface: s.iface, Err: capture.ErrInterfaceGone}
				return fmt.Errorf("libpcap: %w", s.gone)
			}
			return fmt.Errorf("libpcap: %s: read after %d frames: %w: %v", s.iface, s.received.Load()+uint64(len(b.Frames)), err, why)
		case err != nil:
			return fmt.Errorf("libpcap: %s: read after %d frames: %w", s.iface, s.received.Load()+uint64(len(b.Frames)), err)
		}
		if s.used+len(data) > len(s.arena) {
			// Frames already in b keep the old buffer.
			s.arena, s.used = make([]byte, max(2*len(s.arena), len(data))), 0
		}
		f := s.arena[s.used : s.used+len(data) : s.used+len(data)]
		s.used += copy(f, data)
		b.Frames = capture.AppendFrame(b.Frames, f, ci.Timestamp.UnixNano(), uint32(ci.Length), s.link, 0)
	}
	return nil
}

// Stats returns the frames delivered and libpcap's drop counters. It is
// safe to call concurrently with Next, but waits for a running read (at
// most one read timeout).
func (s *Source) Stats() capture.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readStats()
	return capture.Stats{Received: s.received.Load(), Dropped: uint64(s.last.PacketsDropped) + uint64(s.last.PacketsIfDropped)}
}

// readStats keeps libpcap's counters, which run from Open, in s.last. The
// caller holds mu. A failed read keeps the previous counters.
func (s *Source) readStats() {
	if s.h == nil {
		return
	}
	if st, err := s.h.Stats(); err == nil {
		s.last = *st
	}
}

// Close makes a running Next return os.ErrClosed (after at most one read
// timeout), then closes the handle. Frames of the last batch are invalid
// after it. Close is idempotent and safe to call from any goroutine.
func (s *Source) Close() error {
	s.closed.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h != nil {
		s.readStats()
		s.h.Close()
		s.h = nil
	}
	return nil
}
