package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

var _ capture.Source = (*Socket)(nil)

// pollTimeout bounds how long Next waits before it returns an empty batch.
const pollTimeout = 100 // ms

// clockRefresh is how often, in ns of the monotonic clock, Next measures
// again the offset between CLOCK_REALTIME and CLOCK_MONOTONIC, so that a
// step or slew of the wall clock shows in frame times within a second.
const clockRefresh = 1e9

// completionRingSize is the size of the completion ring. The kernel
// requires one on the socket that registers the UMEM even for receive-only
// use; nothing is ever transmitted, so it stays empty and is not mapped.
const completionRingSize = 64

// Socket is one AF_XDP socket bound to one receive queue. It implements
// capture.Source; see the package documentation for the lifetime of the
// frames it lends.
type Socket struct {
	iface    string
	queue    int
	zeroCopy bool

	// mu is held by Next and by Close while it tears down, so the mappings
	// never go away under a running Next.
	mu        sync.Mutex
	umem      []byte
	frameMask uint64 // FrameSize-1: clears the offset within a frame
	fill      ring   // fill ring, entries are uint64 UMEM addresses
	rx        ring   // RX ring, entries are unix.XDPDesc
	held      uint32 // RX descriptors lent out by the last Next
	pfd       [2]unix.PollFd
	clock     clock

	// fdMu guards fd and wake against Stats while Close closes them.
	fdMu  sync.RWMutex
	fd    int
	wake  int                // eventfd that Close signals to end a poll
	final unix.XDPStatistics // kernel counters read just before Close

	closed   atomic.Bool
	received atomic.Uint64
	errors   atomic.Uint64
	noMeta   atomic.Uint64
	dropped  atomic.Uint64 // Dropped of the last Stats that read the kernel counters
}

// clock converts the program's CLOCK_MONOTONIC timestamps to Unix ns.
type clock struct {
	offset int64            // CLOCK_REALTIME - CLOCK_MONOTONIC, ns
	until  int64            // monotonic ns after which to measure offset again
	ts     [3]unix.Timespec // readings, kept here so that measuring allocates nothing
}

// measure reads the monotonic clock on both sides of the wall clock and
// takes their mean as the moment of the wall clock reading: the offset is
// then off by at most half the time between the two monotonic readings. Of
// three tries it keeps the one with the shortest time between them (a few
// hundred ns: a system call each).
func (c *clock) measure() {
	best := int64(-1)
	for range 3 {
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &c.ts[0])
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &c.ts[1])
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &c.ts[2])
		m1, m2 := c.ts[0].Nano(), c.ts[2].Nano()
		if best < 0 || m2-m1 < best {
			best = m2 - m1
			c.offset = c.ts[1].Nano() - (m1+m2)/2
			c.until = m2 + clockRefresh
		}
	}
}

// unix returns the Unix time of the monotonic time mono, measuring the
// offset again when it is older than clockRefresh.
func (c *clock) unix(mono int64) int64 {
	if mono > c.until {
		c.measure()
	}
	return mono + c.offset
}

// ring is a single-producer single-consumer ring shared with the kernel.
// The producer and consumer indices run freely and wrap at 2^32; the entry
// of index i is at i&mask.
type ring struct {
	mem      []byte // the mapping
	producer *uint32
	consumer *uint32
	flags    *uint32
	entries  unsafe.Pointer
	mask     uint32
	// cached is our own index: the consumer index of a ring we consume,
	// the producer index of a ring we produce.
	cached uint32
}

// mapRing maps the ring at pgoff whose offsets the kernel reported in off.
func mapRing(fd int, pgoff int64, off *unix.XDPRingOffset, size, entrySize int) (ring, error) {
	n := int(off.Desc) + size*entrySize
	mem, err := unix.Mmap(fd, pgoff, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, err
	}
	base := unsafe.Pointer(&mem[0])
	return ring{
		mem:      mem,
		producer: (*uint32)(unsafe.Add(base, off.Producer)),
		consumer: (*uint32)(unsafe.Add(base, off.Consumer)),
		flags:    (*uint32)(unsafe.Add(base, off.Flags)),
		entries:  unsafe.Add(base, off.Desc),
		mask:     uint32(size - 1),
	}, nil
}

// desc returns RX ring entry i.
func (r *ring) desc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.entries, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

// addr returns fill ring entry i.
func (r *ring) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.entries, uintptr(i&r.mask)*8))
}

// newSocket creates a socket on queue of ifindex with its UMEM and rings,
// fills the fill ring and binds with flags (XDP_ZEROCOPY or XDP_COPY). On
// error everything it made is released.
func newSocket(ifindex, queue int, cfg *Config, flags uint16) (_ *Socket, err error) {
	s := &Socket{queue: queue, fd: -1, wake: -1}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	if s.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if s.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	size := cfg.FrameSize * cfg.NumFrames
	if s.umem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("mmap %d bytes of UMEM: %w", size, err)
	}
	s.frameMask = uint64(cfg.FrameSize - 1)
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))),
		Len:  uint64(size),
		Size: uint32(cfg.FrameSize),
	}
	if err = setsockopt(s.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return nil, fmt.Errorf("register UMEM: %w", err)
	}
	for _, o := range []struct {
		opt, size int
	}{
		{unix.XDP_UMEM_FILL_RING, cfg.NumFrames},
		{unix.XDP_UMEM_COMPLETION_RING, completionRingSize},
		{unix.XDP_RX_RING, cfg.RingSize},
	} {
		n := uint32(o.size)
		if err = setsockopt(s.fd, o.opt, unsafe.Pointer(&n), 4); err != nil {
			return nil, fmt.Errorf("set ring size (option %d) to %d: %w", o.opt, n, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err = getsockopt(s.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return nil, fmt.Errorf("read ring offsets: %w", err)
	}
	if s.fill, err = mapRing(s.fd, unix.XDP_UMEM_PGOFF_FILL_RING, &off.Fr, cfg.NumFrames, 8); err != nil {
		return nil, fmt.Errorf("mmap fill ring: %w", err)
	}
	if s.rx, err = mapRing(s.fd, unix.XDP_PGOFF_RX_RING, &off.Rx, cfg.RingSize, int(unsafe.Sizeof(unix.XDPDesc{}))); err != nil {
		return nil, fmt.Errorf("mmap RX ring: %w", err)
	}
	// Every frame starts in the fill ring, which has room for all.
	for i := range uint32(cfg.NumFrames) {
		*s.fill.addr(i) = uint64(i) * uint64(cfg.FrameSize)
	}
	s.fill.cached = uint32(cfg.NumFrames)
	atomic.StoreUint32(s.fill.producer, s.fill.cached)

	sa := &unix.SockaddrXDP{Flags: flags | unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(ifindex), QueueID: uint32(queue)}
	if err = unix.Bind(s.fd, sa); err != nil {
		return nil, fmt.Errorf("bind: %w", err)
	}
	var opts uint32
	if err = getsockopt(s.fd, unix.XDP_OPTIONS, unsafe.Pointer(&opts), 4); err != nil {
		return nil, fmt.Errorf("read socket options: %w", err)
	}
	s.zeroCopy = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	s.pfd = [2]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(s.wake), Events: unix.POLLIN}}
	s.clock.measure()
	return s, nil
}

// setsockopt sets the SOL_XDP option opt from the n bytes at p.
func setsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

// getsockopt reads the SOL_XDP option opt into the n bytes at p.
func getsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	l := uint32(n)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// Queue returns the receive queue the socket is bound to.
func (s *Socket) Queue() int { return s.queue }

// ZeroCopy reports whether the kernel bound the socket in zero-copy mode.
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// Next returns the frames lent by the previous call to the kernel, then
// fills b with up to cap(b.Frames) frames from the RX ring, waiting up to
// 100 ms for some to arrive; it returns an empty batch and nil when none
// did, unless the interface has disappeared: then it returns an error
// wrapping capture.ErrInterfaceGone (checked after each empty poll, so
// within 100 ms). Each frame gets the time and the wire length the XDP
// program recorded in its metadata; a frame without metadata gets the
// time Next found it and its captured length (see [Socket.NoMetadata]).
// It returns os.ErrClosed after Close and capture.ErrNoRoom when b has no
// capacity.
func (s *Socket) Next(b *capture.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.Frames = b.Frames[:0]
	if s.closed.Load() {
		return os.ErrClosed
	}
	if cap(b.Frames) == 0 {
		return capture.ErrNoRoom
	}
	if err := s.recycle(); err != nil {
		return err
	}
	n := atomic.LoadUint32(s.rx.producer) - s.rx.cached
	if n == 0 {
		if err := s.wait(); err != nil {
			return err
		}
		if s.closed.Load() {
			return os.ErrClosed
		}
		if n = atomic.LoadUint32(s.rx.producer) - s.rx.cached; n == 0 {
			return s.bound()
		}
	}
	n = min(n, uint32(cap(b.Frames)))
	var now int64 // for frames without metadata, read when the first one comes
	for i := range n {
		d := s.rx.desc(s.rx.cached + i)
		end := d.Addr + uint64(d.Len)
		if d.Addr > end || end > uint64(len(s.umem)) {
			s.errors.Add(1) // cannot happen with a sane kernel; counted, not trusted
			continue
		}
		// The metadata is in the UMEM frame's headroom, before the data.
		var t int64
		orig, meta := d.Len, false
		if d.Addr&s.frameMask >= metaLen {
			m := s.umem[d.Addr-metaLen : d.Addr : d.Addr]
			if binary.NativeEndian.Uint32(m[metaMagic:]) == metaMagicValue {
				binary.NativeEndian.PutUint32(m[metaMagic:], 0) // not to be taken for the next frame's
				t = s.clock.unix(int64(binary.NativeEndian.Uint64(m[metaTime:])))
				orig = max(d.Len, binary.NativeEndian.Uint32(m[metaWireLen:]))
				meta = true
			}
		}
		if !meta {
			if now == 0 {
				now = time.Now().UnixNano()
			}
			t = now
			s.noMeta.Add(1)
		}
		b.Frames = capture.AppendFrame(b.Frames, s.umem[d.Addr:end:end], t, orig, decode.LinkEthernet, uint16(s.queue))
	}
	s.held = n
	s.received.Add(uint64(len(b.Frames)))
	return nil
}

// recycle hands the frames lent by the last Next back to the fill ring and
// releases their RX descriptors, each in one store. The fill ring has an
// entry for every UMEM frame, so it always has room for them.
func (s *Socket) recycle() error {
	if s.held == 0 {
		return nil
	}
	for i := range s.held {
		*s.fill.addr(s.fill.cached + i) = s.rx.desc(s.rx.cached+i).Addr &^ s.frameMask
	}
	s.fill.cached += s.held
	s.rx.cached += s.held
	s.held = 0
	atomic.StoreUint32(s.fill.producer, s.fill.cached)
	atomic.StoreUint32(s.rx.consumer, s.rx.cached)
	if atomic.LoadUint32(s.fill.flags)&unix.XDP_RING_NEED_WAKEUP == 0 {
		return nil
	}
	// The driver sleeps until told that the fill ring has buffers again.
	switch err := s.recv(); err {
	case 0, unix.EAGAIN, unix.EINTR, unix.ENETDOWN: // down: the link may come back
		return nil
	case unix.ENXIO:
		return s.gone()
	default:
		return fmt.Errorf("afxdp: %s: queue %d: wake up driver: %w", s.iface, s.queue, err)
	}
}

// recv makes a recvfrom call without a buffer and without waiting, which
// wakes a driver that waits for it and tells whether the socket is still
// bound (ENXIO when not). It allocates nothing.
func (s *Socket) recv() unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// bound returns nil while the socket is bound to its queue, and an error
// wrapping capture.ErrInterfaceGone once the kernel unbound it because its
// interface was deleted (or moved to another network namespace). A link
// that is merely down keeps the socket bound.
func (s *Socket) bound() error {
	if s.recv() == unix.ENXIO {
		return s.gone()
	}
	return nil
}

// gone returns the error that says the interface disappeared.
func (s *Socket) gone() error {
	return fmt.Errorf("afxdp: queue %d: %w", s.queue, &capture.InterfaceError{Iface: s.iface, Err: capture.ErrInterfaceGone})
}

// wait polls the socket and the close eventfd for up to pollTimeout. Polling
// the socket also wakes a driver that waits for it.
func (s *Socket) wait() error {
	_, err := unix.Poll(s.pfd[:], pollTimeout)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("afxdp: queue %d: poll: %w", s.queue, err)
	}
	return nil
}

// XDPStats are the kernel's counters of one socket (struct xdp_statistics).
type XDPStats struct {
	RxDropped            uint64 // dropped for other reasons (no room in UMEM frame, wrong queue...)
	RxInvalidDescs       uint64 // dropped because of an invalid descriptor
	TxInvalidDescs       uint64 // always 0: nothing is sent
	RxRingFull           uint64 // dropped because the RX ring was full
	RxFillRingEmptyDescs uint64 // times the fill ring was found empty (the frame may then be dropped and counted in RxDropped)
	TxRingEmptyDescs     uint64 // always 0: nothing is sent
}

// XDPStats reads the socket's kernel counters. After Close it returns the
// values read just before the socket was closed.
func (s *Socket) XDPStats() (XDPStats, error) {
	s.fdMu.RLock()
	defer s.fdMu.RUnlock()
	x := s.final
	if s.fd >= 0 {
		if err := getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&x), unsafe.Sizeof(x)); err != nil {
			return XDPStats{}, fmt.Errorf("afxdp: queue %d: read statistics: %w", s.queue, err)
		}
	}
	return XDPStats{
		RxDropped:            x.Rx_dropped,
		RxInvalidDescs:       x.Rx_invalid_descs,
		TxInvalidDescs:       x.Tx_invalid_descs,
		RxRingFull:           x.Rx_ring_full,
		RxFillRingEmptyDescs: x.Rx_fill_ring_empty_descs,
		TxRingEmptyDescs:     x.Tx_ring_empty_descs,
	}, nil
}

// NoMetadata returns how many frames Next delivered without the XDP
// program's metadata, which happens only with a driver that does not
// support XDP metadata: such frames are whole (and dropped by the kernel
// when longer than FrameSize minus 256 bytes), and their Time is when Next
// found them. It is safe to call concurrently with Next.
func (s *Socket) NoMetadata() uint64 { return s.noMeta.Load() }

// Stats returns the frames delivered, the frames the kernel dropped
// (RxDropped + RxRingFull + RxInvalidDescs of [Socket.XDPStats]) and the
// descriptors skipped as invalid. A failure to read the kernel counters is
// counted in Errors, and Dropped is then the last total read: a total
// that fell to zero would look like a reset to whoever counts its growth,
// and the next good read would count every drop again.
func (s *Socket) Stats() capture.Stats {
	x, err := s.XDPStats()
	st := capture.Stats{
		Received: s.received.Load(),
		Dropped:  x.RxDropped + x.RxRingFull + x.RxInvalidDescs,
		Errors:   s.errors.Load(),
	}
	if err != nil {
		st.Dropped = s.dropped.Load()
		st.Errors++
	} else {
		s.dropped.Store(st.Dropped)
	}
	return st
}

// Close closes the socket, which also removes it from the XSKMAP, and
// unmaps its memory. A Next waiting in another goroutine returns
// os.ErrClosed at once. Close is idempotent.
func (s *Socket) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	one := uint64(1)
	// Wake a Next blocked in poll; the eventfd cannot overflow at one write.
	_, _ = unix.Write(s.wake, (*[8]byte)(unsafe.Pointer(&one))[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release()
}

// release reads the final counters and frees everything newSocket made.
func (s *Socket) release() error {
	var errs []error
	s.fdMu.Lock()
	if s.fd >= 0 {
		_ = getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&s.final), unsafe.Sizeof(s.final))
		errs = append(errs, unix.Close(s.fd))
		s.fd = -1
	}
	if s.wake >= 0 {
		errs = append(errs, unix.Close(s.wake))
		s.wake = -1
	}
	s.fdMu.Unlock()
	for _, m := range []*[]byte{&s.rx.mem, &s.fill.mem, &s.umem} {
		if *m != nil {
			errs = append(errs, unix.Munmap(*m))
			*m = nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("afxdp: queue %d: close: %w", s.queue, err)
	}
	return nil
}
