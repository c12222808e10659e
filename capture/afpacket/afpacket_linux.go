package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/filter"
	"github.com/rocescope/rocescope/capture/internal/netdev"
	"github.com/rocescope/rocescope/decode"
	"golang.org/x/sys/unix"
)

var _ capture.Source = (*Source)(nil)

// pollTimeout is the longest Next waits for a block before it returns an
// empty batch.
const pollTimeout = 100 * time.Millisecond

// minScratch is the least scratch space a source keeps for rebuilding
// VLAN-tagged frames.
const minScratch = 1 << 20

// Offsets in a TPACKET_V3 block descriptor (struct tpacket_block_desc:
// version, offset_to_priv, then struct tpacket_hdr_v1).
const (
	blockStatusOff = 8  // block_status
	blockNumOff    = 12 // num_pkts
	blockFirstOff  = 16 // offset_to_first_pkt
)

// Group is the set of sockets Open opened on one interface, one
// [Source] per socket.
type Group struct {
	iface   string
	set     settings
	sources []*Source
}

// Source is one socket of a [Group] and its receive ring. It implements
// capture.Source; see the package documentation for the lifetime of the
// frames it returns.
type Source struct {
	fd, efd   int    // packet socket; eventfd that Close signals
	ring      []byte // the mapped ring: numBlocks blocks of blockSize bytes
	blockSize uint32
	numBlocks int
	link      decode.LinkType
	port      uint16
	iface     string
	ifindex   int32
	name      unix.RawSockaddrLinklayer // getsockname's answer, kept here so that asking allocates nothing

	// Read position, owned by Next (under mu).
	cur     int    // block being read
	left    uint32 // frames not yet read in block cur; 0: cur not started
	next    uint32 // offset of the next frame in block cur
	held    int    // fully read blocks before cur not yet given back
	scratch []byte // VLAN-tagged frames, rebuilt with their tag
	used    int    // bytes of scratch in the current batch
	pfd     [2]unix.PollFd
	gone    error // the interface disappeared: Next returns this once the ring is read

	mu     sync.Mutex  // held by Next while it uses the ring, and by Close
	closed atomic.Bool // set by Close before it waits for mu

	received atomic.Uint64
	errs     atomic.Uint64
	statsMu  sync.Mutex // guards fd against Close while Stats reads it, and dropped
	dropped  uint64
}

// Open opens cfg.Sockets AF_PACKET sockets on iface, each with its own
// TPACKET_V3 ring, and joins them in one fanout group. A nil cfg means the
// defaults. On failure everything opened so far is closed again.
func Open(iface string, cfg *Config) (*Group, error) {
	set, err := validate(cfg, os.Getpagesize())
	if err != nil {
		return nil, err
	}
	index, err := netdev.Index(iface)
	if err != nil {
		return nil, err
	}
	g := &Group{iface: iface, set: set}
	fanoutID := -1 // chosen by the kernel when the first socket joins
	for i := range set.Sockets {
		s, err := open(iface, index, i, &set, &fanoutID)
		if err != nil {
			return nil, errors.Join(err, g.Close())
		}
		g.sources = append(g.sources, s)
	}
	return g, nil
}

// Sources returns the group's sources, one per socket; source i gives its
// frames Port i.
func (g *Group) Sources() []capture.Source {
	out := make([]capture.Source, len(g.sources))
	for i, s := range g.sources {
		out[i] = s
	}
	return out
}

// Close closes every source. It is idempotent.
func (g *Group) Close() error {
	var errs []error
	for _, s := range g.sources {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// Filter returns the capture filter expression the kernel runs
// (Config.Filter), or nil.
func (g *Group) Filter() *filter.Expr { return g.set.Filter }

// Describe says how the group captures, such as "AF_PACKET TPACKET_V3 on
// eth1, 2 sockets, fanout hash, filter roce, ring 32 x 4096 KiB per socket".
func (g *Group) Describe() string { return g.set.describe() }

// open opens socket number port of a group. The socket drops everything
// until it has joined the fanout group, so that no frame reaches two
// sockets. *fanoutID is the group's fanout ID, -1 until the first socket
// has joined.
func open(iface string, index, port int, set *settings, fanoutID *int) (_ *Source, err error) {
	fail := func(op string, err error) error {
		return &OpError{Op: op, Iface: iface, Socket: port, Err: err}
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: no frames before bind
	if err != nil {
		return nil, fail("socket", err)
	}
	s := &Source{fd: fd, efd: -1, port: uint16(port), iface: iface, ifindex: int32(index),
		blockSize: uint32(set.BlockSize), numBlocks: set.NumBlocks}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.destroy())
		}
	}()
	if s.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fail("eventfd", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, fail("setsockopt PACKET_VERSION", err)
	}
	req := unix.TpacketReq3{
		Block_size:     uint32(set.BlockSize),
		Block_nr:       uint32(set.NumBlocks),
		Frame_size:     uint32(set.FrameSize),
		Frame_nr:       uint32(set.BlockSize / set.FrameSize * set.NumBlocks),
		Retire_blk_tov: uint32(set.BlockTimeout / time.Millisecond),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fail("setsockopt PACKET_RX_RING", err)
	}
	ring, err := unix.Mmap(fd, 0, set.BlockSize*set.NumBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fail(fmt.Sprintf("mmap %d bytes", set.BlockSize*set.NumBlocks), err)
	}
	s.ring = ring
	if err := attach(fd, snapFilter(0)); err != nil {
		return nil, fail("attach filter", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: index}); err != nil {
		return nil, fail("bind", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, fail("getsockname", err)
	}
	if s.link, err = linkType(sa.(*unix.SockaddrLinklayer).Hatype); err != nil {
		return nil, fail("link type", err)
	}
	if !set.NoPromisc {
		mreq := unix.PacketMreq{Ifindex: int32(index), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return nil, fail("promiscuous mode", err)
		}
	}
	if set.Inbound {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return nil, fail("setsockopt PACKET_IGNORE_OUTGOING", err)
		}
	}
	if set.Sockets > 1 {
		if err := joinFanout(fd, set.fanoutMode, fanoutID); err != nil {
			return nil, fail("setsockopt PACKET_FANOUT", err)
		}
	}
	keep := keepAll(uint32(set.SnapLen))
	if set.Filter != nil {
		if keep, err = exprSteps(set.Filter, s.link, uint32(set.SnapLen)); err != nil {
			return nil, fail("compile filter", err)
		}
	}
	prog, err := assemble(keep)
	if !set.All {
		prog, err = roceFilter(keep)
	}
	if err != nil {
		return nil, err
	}
	if err := attach(fd, prog); err != nil {
		return nil, fail("attach filter", err)
	}
	s.scratch = make([]byte, max(minScratch, min(set.SnapLen, set.BlockSize)+4))
	s.pfd = [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(s.efd), Events: unix.POLLIN}}
	return s, nil
}

// joinFanout adds fd to the fanout group *id with the given mode, or, when
// *id is -1, makes a new group with an ID the kernel picks (which may be 0)
// and stores it in *id.
func joinFanout(fd int, mode uint16, id *int) error {
	if *id >= 0 {
		return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, *id|int(mode)<<16)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, int(mode|unix.PACKET_FANOUT_FLAG_UNIQUEID)<<16); err != nil {
		return err
	}
	v, err := unix.GetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
	if err != nil {
		return err
	}
	*id = v & 0xffff // low 16 bits: the ID
	return nil
}

// attach sets fd's socket filter to prog, replacing any earlier one.
func attach(fd int, prog []unix.SockFilter) error {
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
}

// linkType maps an interface's ARPHRD_ hardware type to the link type of
// the frames a SOCK_RAW packet socket reads from it.
func linkType(hatype uint16) (decode.LinkType, error) {
	switch hatype {
	case unix.ARPHRD_ETHER, unix.ARPHRD_LOOPBACK:
		return decode.LinkEthernet, nil
	case unix.ARPHRD_NONE, unix.ARPHRD_RAWIP:
		return decode.LinkRaw, nil
	}
	return 0, fmt.Errorf("hardware type %d (ARPHRD_*) not supported; try libpcap", hatype)
}

// htons converts a 16-bit protocol number to network byte order, as
// AF_PACKET wants it.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// blockStatus returns the status word of block i, which the kernel and
// the reader hand the block over with.
func (s *Source) blockStatus(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&s.ring[i*int(s.blockSize)+blockStatusOff]))
}

// Next fills b with the frames of the blocks the kernel has handed over,
// after giving back the blocks of the previous batch. When no block is
// ready it waits up to 100 ms, then returns an empty batch and nil, or,
// when the interface has disappeared, an error wrapping
// capture.ErrInterfaceGone, and that error at every later call once the
// ring is read. It returns os.ErrClosed after Close.
func (s *Source) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	if cap(b.Frames) == 0 {
		return capture.ErrNoRoom
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() || s.fd < 0 {
		return os.ErrClosed
	}
	s.giveBack()
	s.fill(b)
	if len(b.Frames) == 0 {
		if s.gone != nil {
			// Said again without a poll: a poll that a signal or an
			// event of the dead socket ends would return nil.
			return s.gone
		}
		if err := s.wait(); err != nil {
			return err
		}
		s.fill(b)
	}
	s.received.Add(uint64(len(b.Frames)))
	return nil
}

// giveBack hands the blocks of the previous batch back to the kernel and
// frees the scratch space. The block being read stays.
func (s *Source) giveBack() {
	for k := 1; k <= s.held; k++ {
		atomic.StoreUint32(s.blockStatus((s.cur-k+s.numBlocks)%s.numBlocks), unix.TP_STATUS_KERNEL)
	}
	s.held, s.used = 0, 0
}

// wait polls the socket and the eventfd until a block is ready, Close is
// called or the poll timeout passes. When nothing arrived it checks that
// the interface still exists.
func (s *Source) wait() error {
	n, err := unix.Poll(s.pfd[:], int(pollTimeout/time.Millisecond))
	switch {
	case s.closed.Load():
		return os.ErrClosed
	case err == unix.EINTR:
		return nil
	case n == 0:
		return s.bound()
	case err != nil:
		return &OpError{Op: "poll", Iface: s.iface, Socket: int(s.port), Err: err}
	case s.pfd[0].Revents&unix.POLLERR != 0:
		// A link that went down (ENETDOWN) is not the end of a capture:
		// the ring stays and frames resume when the link comes back. A
		// deleted interface reports ENETDOWN too.
		serr, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil || serr != 0 && unix.Errno(serr) != unix.ENETDOWN {
			return &OpError{Op: "poll", Iface: s.iface, Socket: int(s.port), Err: errors.Join(err, unix.Errno(serr))}
		}
		return s.bound()
	}
	return nil
}

// bound returns nil while the socket is bound to its interface, and an
// error wrapping capture.ErrInterfaceGone once the kernel has unbound it
// because the interface was deleted (or moved to another network
// namespace): getsockname then reports interface index -1. It keeps that
// error (s.gone) and allocates nothing else.
func (s *Source) bound() error {
	n := uint32(unsafe.Sizeof(s.name))
	_, _, e := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(s.fd), uintptr(unsafe.Pointer(&s.name)), uintptr(unsafe.Pointer(&n)))
	switch {
	case e != 0:
		return &OpError{Op: "getsockname", Iface: s.iface, Socket: int(s.port), Err: e}
	case s.name.Ifindex != s.ifindex:
		s.gone = fmt.Errorf("afpacket: socket %d: %w", s.port, &capture.InterfaceError{Iface: s.iface, Err: capture.ErrInterfaceGone})
		return s.gone
	}
	return nil
}

// fill appends to b the frames of ready blocks, from the read position on,
// until b is full, the next block is not ready, or the scratch space for
// VLAN-tagged frames runs out.
func (s *Source) fill(b *capture.Batch) {
	bs := s.blockSize
	for len(b.Frames) < cap(b.Frames) {
		base := s.cur * int(bs)
		if s.left == 0 {
			if s.held == s.numBlocks || atomic.LoadUint32(s.blockStatus(s.cur))&unix.TP_STATUS_USER == 0 {
				return
			}
			s.left = binary.NativeEndian.Uint32(s.ring[base+blockNumOff:])
			s.next = binary.NativeEndian.Uint32(s.ring[base+blockFirstOff:])
			if s.left == 0 {
				s.nextBlock()
				continue
			}
		}
		const hdrLen = uint32(unsafe.Sizeof(unix.Tpacket3Hdr{}))
		if s.next > bs-hdrLen {
			s.skipBlock()
			continue
		}
		h := (*unix.Tpacket3Hdr)(unsafe.Pointer(&s.ring[base+int(s.next)]))
		start := uint64(s.next) + uint64(h.Mac)
		end := start + uint64(h.Snaplen)
		if end > uint64(bs) {
			s.skipBlock()
			continue
		}
		data := s.ring[base+int(start) : base+int(end) : base+int(end)]
		orig := h.Len
		if h.Status&unix.TP_STATUS_VLAN_VALID != 0 && len(data) >= 12 {
			if s.used+len(data)+4 > len(s.scratch) {
				return // scratch full: this frame starts the next batch
			}
			tpid := uint16(0x8100)
			if h.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 && h.Hv1.Vlan_tpid != 0 {
				tpid = h.Hv1.Vlan_tpid
			}
			data = s.tagged(data, tpid, uint16(h.Hv1.Vlan_tci))
			orig += 4
		}
		b.Frames = capture.AppendFrame(b.Frames, data, int64(h.Sec)*1e9+int64(h.Nsec), orig, s.link, s.port)
		s.left--
		switch {
		case s.left == 0:
			s.nextBlock()
		case h.Next_offset == 0 || uint64(s.next)+uint64(h.Next_offset) > uint64(bs):
			s.skipBlock()
		default:
			s.next += h.Next_offset
		}
	}
}

// tagged copies frame into the scratch space with an 802.1Q/802.1ad tag
// (tpid, tci) inserted after the MAC addresses, and returns the copy. The
// caller has checked that it fits.
func (s *Source) tagged(frame []byte, tpid, tci uint16) []byte {
	n := len(frame) + 4
	out := s.scratch[s.used : s.used+n : s.used+n]
	s.used += n
	copy(out, frame[:12])
	binary.BigEndian.PutUint16(out[12:], tpid)
	binary.BigEndian.PutUint16(out[14:], tci)
	copy(out[16:], frame[12:])
	return out
}

// nextBlock moves the read position to the start of the next block,
// keeping the finished one until the next batch.
func (s *Source) nextBlock() {
	s.left = 0
	s.held++
	s.cur = (s.cur + 1) % s.numBlocks
}

// skipBlock counts the rest of a block whose layout is inconsistent as
// errors and moves on.
func (s *Source) skipBlock() {
	s.errs.Add(uint64(s.left))
	s.nextBlock()
}

// Stats returns the frames delivered, the kernel's drop counter (tp_drops)
// summed since Open, and the frames skipped in inconsistent blocks. It is safe to
// call concurrently with Next, also after Close.
func (s *Source) Stats() capture.Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	s.readDrops()
	return capture.Stats{Received: s.received.Load(), Dropped: s.dropped, Errors: s.errs.Load()}
}

// readDrops adds the kernel's drop counter, which reading resets, to
// s.dropped. The caller holds statsMu. A failed read leaves the counter in
// the kernel for the next one.
//
// tp_freeze_q_cnt is not added: it counts the times the ring filled up
// (events), and the frames lost then are already in tp_drops; adding it
// would count lost frames twice (TestDropsLive shows received + tp_drops
// equal to the frames sent).
func (s *Source) readDrops() {
	if s.fd < 0 {
		return
	}
	st, err := unix.GetsockoptTpacketStatsV3(s.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err == nil {
		s.dropped += uint64(st.Drops)
	}
}

// Close wakes a blocked Next, waits until it has returned, then unmaps the
// ring and closes the socket. Frames of the last batch are invalid after
// it. Close is idempotent and safe to call from any goroutine.
func (s *Source) Close() error {
	if !s.closed.Swap(true) {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		unix.Write(s.efd, one[:]) // cannot fail but for a full counter, which still wakes poll
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.destroy()
}

// destroy releases whatever the source holds. The caller holds mu or owns
// the source alone.
func (s *Source) destroy() error {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if s.fd < 0 {
		return nil
	}
	s.readDrops()
	var errs []error
	if s.ring != nil {
		errs = append(errs, unix.Munmap(s.ring))
		s.ring = nil
	}
	if s.efd >= 0 {
		errs = append(errs, unix.Close(s.efd))
	}
	errs = append(errs, unix.Close(s.fd))
	s.fd, s.efd = -1, -1
	if err := errors.Join(errs...); err != nil {
		return &OpError{Op: "close", Iface: s.iface, Socket: int(s.port), Err: err}
	}
	return nil
}
