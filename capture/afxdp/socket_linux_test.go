package afxdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// fakeKernel plays the kernel's side of a Socket whose rings and UMEM are
// ordinary Go memory, so the ring logic runs without privileges.
type fakeKernel struct {
	s        *Socket
	rxMem    []uint64 // producer, consumer, flags, pad, then descriptors
	fillMem  []uint64 // producer, consumer, flags, pad, then addresses
	rxProd   uint32
	fillCons uint32
}

// fakeRing lays a ring over mem: indices at bytes 0, 8 and 16, entries
// from byte 32.
func fakeRing(mem []uint64, size int, start uint32) ring {
	base := unsafe.Pointer(&mem[0])
	r := ring{
		producer: (*uint32)(base),
		consumer: (*uint32)(unsafe.Add(base, 8)),
		flags:    (*uint32)(unsafe.Add(base, 16)),
		entries:  unsafe.Add(base, 32),
		mask:     uint32(size - 1),
		cached:   start,
	}
	*r.producer, *r.consumer = start, start
	return r
}

// newFake makes a socket on queue 3 whose ring indices start at start (to
// test wrap-around) with every frame in the fill ring, as newSocket leaves
// it.
func newFake(frameSize, numFrames, ringSize int, start uint32) *fakeKernel {
	k := &fakeKernel{
		rxMem:   make([]uint64, 4+2*ringSize),
		fillMem: make([]uint64, 4+numFrames),
		rxProd:  start, fillCons: start,
	}
	s := &Socket{queue: 3, fd: -1, wake: -1, frameMask: uint64(frameSize - 1)}
	s.umem = make([]byte, frameSize*numFrames)
	s.rx = fakeRing(k.rxMem, ringSize, start)
	s.fill = fakeRing(k.fillMem, numFrames, start)
	for i := range uint32(numFrames) {
		*s.fill.addr(start + i) = uint64(i * uint32(frameSize))
	}
	s.fill.cached = start + uint32(numFrames)
	*s.fill.producer = s.fill.cached
	s.pfd = [2]unix.PollFd{{Fd: -1}, {Fd: -1}}
	k.s = s
	return k
}

// receive takes a buffer from the fill ring, copies frame into it at
// offset 256 (the headroom copy mode leaves) and posts the descriptor.
func (k *fakeKernel) receive(frame []byte) uint64 {
	s := k.s
	if atomic.LoadUint32(s.fill.producer) == k.fillCons {
		panic("fake kernel: fill ring empty")
	}
	addr := *s.fill.addr(k.fillCons) + 256
	k.fillCons++
	atomic.StoreUint32(s.fill.consumer, k.fillCons)
	copy(s.umem[addr:], frame)
	k.post(unix.XDPDesc{Addr: addr, Len: uint32(len(frame))})
	return addr
}

// post writes a descriptor to the RX ring.
func (k *fakeKernel) post(d unix.XDPDesc) {
	*k.s.rx.desc(k.rxProd) = d
	k.rxProd++
	atomic.StoreUint32(k.s.rx.producer, k.rxProd)
}

// receiveMeta is receive with the metadata the XDP program writes: the
// CLOCK_MONOTONIC time mono and the wire length wire.
func (k *fakeKernel) receiveMeta(frame []byte, mono int64, wire uint32) uint64 {
	s := k.s
	addr := *s.fill.addr(k.fillCons) + 256
	m := s.umem[addr-metaLen : addr]
	binary.NativeEndian.PutUint64(m[metaTime:], uint64(mono))
	binary.NativeEndian.PutUint32(m[metaWireLen:], wire)
	binary.NativeEndian.PutUint32(m[metaMagic:], metaMagicValue)
	return k.receive(frame)
}

// monotonic reads CLOCK_MONOTONIC in ns.
func monotonic(t testing.TB) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestNextMetadata checks frames with and without the program's metadata:
// with it, a frame gets its own time converted to the wall clock and its
// wire length, and the magic is cleared, so that a later frame without
// metadata in the same UMEM frame is not taken for one with; that one gets
// the time Next ran and its captured length, and is counted.
func TestNextMetadata(t *testing.T) {
	k := newFake(2048, 2, 4, 0)
	s := k.s
	s.clock.offset, s.clock.until = 1, 0 // bogus, and due: the first frame measures again
	wallBefore := time.Now().UnixNano()
	mono := monotonic(t)
	addr := k.receiveMeta(testFrame(1), mono, 4200)
	k.receiveMeta(testFrame(2), mono+1500, 9014)
	b := capture.NewBatch(4)
	if err := s.Next(b); err != nil || len(b.Frames) != 2 {
		t.Fatalf("Next = %d frames, %v", len(b.Frames), err)
	}
	wallAfter := time.Now().UnixNano()
	f0, f1 := b.Frames[0], b.Frames[1]
	if f0.OrigLen != 4200 || f1.OrigLen != 9014 || !bytes.Equal(f0.Data, testFrame(1)) {
		t.Errorf("OrigLen %d and %d, want 4200 and 9014 from the metadata", f0.OrigLen, f1.OrigLen)
	}
	if f0.Time < wallBefore-clockError || f0.Time > wallAfter+clockError {
		t.Errorf("Time %d not between %d and %d: offset not measured again", f0.Time, wallBefore, wallAfter)
	}
	if f1.Time-f0.Time != 1500 {
		t.Errorf("frames %d ns apart, want 1500 as the metadata says", f1.Time-f0.Time)
	}
	if m := s.umem[addr-metaLen : addr]; binary.NativeEndian.Uint32(m[metaMagic:]) != 0 {
		t.Error("magic not cleared after use")
	}
	if n := s.NoMetadata(); n != 0 {
		t.Errorf("NoMetadata = %d, want 0", n)
	}
	// The same UMEM frame again (two frames only), without metadata.
	if err := s.Next(b); err != nil || len(b.Frames) != 0 {
		t.Fatalf("Next on an empty ring = %d frames, %v", len(b.Frames), err)
	}
	if got := k.receive(testFrame(3)); got != addr {
		t.Fatalf("fake kernel used UMEM address %#x, want %#x again", got, addr)
	}
	before := time.Now().UnixNano()
	if err := s.Next(b); err != nil || len(b.Frames) != 1 {
		t.Fatalf("Next = %d frames, %v", len(b.Frames), err)
	}
	if f := b.Frames[0]; f.OrigLen != uint32(len(testFrame(3))) || f.Time < before || f.Time > time.Now().UnixNano() {
		t.Errorf("frame without metadata: OrigLen %d, Time %d; want %d and the time of Next", f.OrigLen, f.Time, len(testFrame(3)))
	}
	if n := s.NoMetadata(); n != 1 {
		t.Errorf("NoMetadata = %d, want 1", n)
	}
}

func testFrame(i int) []byte {
	f := bytes.Repeat([]byte{byte(i)}, 60+i)
	f[0] = 0xee
	return f
}

func TestNextRing(t *testing.T) {
	k := newFake(2048, 8, 4, 0xffff_fffe) // indices wrap after two entries
	s := k.s
	var addrs []uint64
	for i := range 3 {
		addrs = append(addrs, k.receive(testFrame(i)))
	}
	b := capture.NewBatch(2)
	if err := s.Next(b); err != nil {
		t.Fatalf("Next: %v", err)
	}
	if len(b.Frames) != 2 {
		t.Fatalf("Next filled %d frames, want 2 (the batch capacity)", len(b.Frames))
	}
	for i, f := range b.Frames {
		if !bytes.Equal(f.Data, testFrame(i)) || f.OrigLen != uint32(60+i) || f.Port != 3 || f.Link != decode.LinkEthernet || f.Time != b.Frames[0].Time || f.Time == 0 {
			t.Errorf("frame %d = %+v", i, f)
		}
	}
	// The lent frames are still the kernel's to wait for: nothing returned.
	if got := atomic.LoadUint32(s.rx.consumer); got != 0xffff_fffe {
		t.Errorf("RX consumer %#x before the next Next, want %#x", got, uint32(0xffff_fffe))
	}
	if err := s.Next(b); err != nil {
		t.Fatalf("second Next: %v", err)
	}
	if len(b.Frames) != 1 || !bytes.Equal(b.Frames[0].Data, testFrame(2)) {
		t.Fatalf("second Next = %d frames, want frame 2", len(b.Frames))
	}
	// The first two buffers went back to the fill ring, at their frame
	// start, and the RX consumer moved past them, across the wrap.
	if got, want := atomic.LoadUint32(s.rx.consumer), uint32(0); got != want {
		t.Errorf("RX consumer %#x, want %#x", got, want)
	}
	start := uint32(0xffff_fffe)
	if got, want := atomic.LoadUint32(s.fill.producer), start+8+2; got != want {
		t.Errorf("fill producer %#x, want %#x", got, want)
	}
	for i := range 2 {
		if got, want := *s.fill.addr(start + 8 + uint32(i)), addrs[i]-256; got != want {
			t.Errorf("fill entry %d = %#x, want %#x", i, got, want)
		}
	}
	if st := s.Stats(); st != (capture.Stats{Received: 3}) {
		t.Errorf("Stats = %+v, want 3 received", st)
	}
}

func TestNextInvalidDescriptor(t *testing.T) {
	k := newFake(2048, 4, 4, 0)
	k.receive(testFrame(1))
	k.post(unix.XDPDesc{Addr: 4*2048 - 10, Len: 11}) // runs past the UMEM
	k.post(unix.XDPDesc{Addr: 1<<64 - 2, Len: 100})  // wraps around
	k.receive(testFrame(2))
	b := capture.NewBatch(8)
	if err := k.s.Next(b); err != nil {
		t.Fatalf("Next: %v", err)
	}
	if len(b.Frames) != 2 || !bytes.Equal(b.Frames[0].Data, testFrame(1)) || !bytes.Equal(b.Frames[1].Data, testFrame(2)) {
		t.Fatalf("Next = %d frames, want frames 1 and 2 around the invalid descriptors", len(b.Frames))
	}
	if got := k.s.errors.Load(); got != 2 {
		t.Errorf("errors = %d, want 2", got)
	}
	if err := k.s.Next(b); err != nil || len(b.Frames) != 0 {
		t.Errorf("Next on an empty ring = %d frames, %v; want an empty batch after the poll timeout", len(b.Frames), err)
	}
	if got := atomic.LoadUint32(k.s.rx.consumer); got != 4 {
		t.Errorf("RX consumer %d, want 4: all descriptors released", got)
	}
}

func TestNextNoRoom(t *testing.T) {
	k := newFake(2048, 4, 4, 0)
	if err := k.s.Next(&capture.Batch{}); !errors.Is(err, capture.ErrNoRoom) {
		t.Errorf("Next(zero Batch) = %v, want ErrNoRoom", err)
	}
}

// TestNextWakeup checks that Next kicks the driver when the fill ring asks
// for it: the socket has no descriptor, so the kick fails with EBADF.
func TestNextWakeup(t *testing.T) {
	k := newFake(2048, 4, 4, 0)
	k.receive(testFrame(1))
	b := capture.NewBatch(4)
	if err := k.s.Next(b); err != nil {
		t.Fatalf("Next: %v", err)
	}
	k.receive(testFrame(2))
	if err := k.s.Next(b); err != nil {
		t.Fatalf("Next without the wake-up flag: %v", err)
	}
	atomic.StoreUint32(k.s.fill.flags, unix.XDP_RING_NEED_WAKEUP)
	k.receive(testFrame(3))
	if err := k.s.Next(b); !errors.Is(err, unix.EBADF) {
		t.Errorf("Next with the wake-up flag = %v, want the kick's EBADF", err)
	}
}

// TestNextRandom runs the ring against the fake kernel with random batch
// sizes and arrivals and checks that frames come out in order, byte for
// byte, and that every buffer comes back to the fill ring.
func TestNextRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	k := newFake(2048, 16, 8, 0xffff_ff00)
	sent, got := 0, 0
	room := make([]capture.Frame, 16)
	b := &capture.Batch{}
	for range 2000 {
		// The kernel fills the RX ring up to the consumer index published;
		// Next has frames to return when some are neither lent nor taken.
		inRing := int(k.rxProd - atomic.LoadUint32(k.s.rx.consumer))
		free := int(atomic.LoadUint32(k.s.fill.producer) - k.fillCons)
		for n := rng.IntN(8); n > 0 && inRing < 8 && free > 0; n-- {
			k.receive(testFrame(sent % 200))
			sent, inRing, free = sent+1, inRing+1, free-1
		}
		if k.rxProd == k.s.rx.cached+k.s.held {
			continue // Next would wait for the poll timeout
		}
		b.Frames = room[: 0 : 1+rng.IntN(16)]
		if err := k.s.Next(b); err != nil {
			t.Fatalf("Next: %v", err)
		}
		for _, f := range b.Frames {
			if !bytes.Equal(f.Data, testFrame(got%200)) {
				t.Fatalf("frame %d: wrong bytes", got)
			}
			got++
		}
	}
	if left := int(k.rxProd - k.s.rx.cached - k.s.held); got < 1000 || got+left != sent {
		t.Errorf("got %d frames, %d still in the ring, sent %d", got, left, sent)
	}
}

// BenchmarkNext measures batches of 64 frames: the fake kernel copying
// 64-byte frames into the UMEM (with and without the XDP program's
// metadata in front) and posting them, then Next recycling the previous
// batch and lending this one.
func BenchmarkNext(b *testing.B) {
	for _, meta := range []bool{false, true} {
		b.Run(fmt.Sprintf("metadata=%v", meta), func(b *testing.B) {
			const n = 64
			k := newFake(2048, 256, 128, 0)
			k.s.clock.measure()
			frame := testFrame(4)
			batch := capture.NewBatch(n)
			mono := monotonic(b)
			b.ReportAllocs()
			for b.Loop() {
				for range n {
					if meta {
						k.receiveMeta(frame, mono, 4200)
					} else {
						k.receive(frame)
					}
				}
				if err := k.s.Next(batch); err != nil || len(batch.Frames) != n {
					b.Fatalf("Next = %d frames, %v", len(batch.Frames), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/frame")
		})
	}
}

// TestStatsReadFailure checks that a failed read of the kernel counters
// counts an error and keeps the last total dropped: were it zero, a reader
// counting the total's growth would take it for a reset and count every
// drop again at the next good read.
func TestStatsReadFailure(t *testing.T) {
	s := newFake(2048, 4, 4, 0).s
	s.final = unix.XDPStatistics{Rx_dropped: 200, Rx_ring_full: 30, Rx_invalid_descs: 3}
	if st := s.Stats(); st.Dropped != 233 || st.Errors != 0 {
		t.Fatalf("Stats = %+v, want 233 dropped, no error", st)
	}
	// A UDP socket has no XDP statistics: the read fails.
	udp, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Skipf("no UDP socket: %v", err)
	}
	defer unix.Close(udp)
	s.fd = udp
	if _, err := s.XDPStats(); err == nil {
		t.Fatal("XDPStats of a UDP socket did not fail")
	}
	if st := s.Stats(); st.Dropped != 233 || st.Errors != 1 {
		t.Fatalf("Stats after a failed read = %+v, want the last 233 dropped and 1 error", st)
	}
	s.fd = -1
	s.final.Rx_ring_full = 40
	if st := s.Stats(); st.Dropped != 243 || st.Errors != 0 {
		t.Fatalf("Stats after a good read = %+v, want 243 dropped, no error", st)
	}
}
