package afpacket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/netnstest"
	"golang.org/x/sys/unix"
)

// Layout of a TPACKET_V3 block as the kernel writes it (linux/if_packet.h,
// net/packet/af_packet.c): a 48-byte block descriptor, then frames, each a
// 48-byte struct tpacket3_hdr followed at tp_mac by the frame bytes, frames
// 16-byte aligned and chained by tp_next_offset.
const (
	testBlockHdr = 48
	testMacOff   = 80 // TPACKET_ALIGN(hdrlen) + 16 + room the kernel leaves for a sockaddr_ll
)

// wireFrame is a frame as it was on the wire and how the kernel reports it.
type wireFrame struct {
	wire      []byte // with every tag
	stripped  bool   // kernel took the outermost tag out (TP_STATUS_VLAN_VALID)
	sec, nsec uint32
}

// putBlock writes frames into block i of ring as the kernel does, and hands
// the block to user space. It returns how many frames fit.
func putBlock(ring []byte, blockSize, i int, frames []wireFrame) int {
	blk := ring[i*blockSize : (i+1)*blockSize]
	clear(blk)
	ne := binary.NativeEndian
	off, n := testBlockHdr, 0
	prev := -1
	for _, f := range frames {
		data, status := f.wire, uint32(unix.TP_STATUS_USER)
		var tci uint32
		var tpid uint16
		if f.stripped {
			tpid, tci = binary.BigEndian.Uint16(f.wire[12:]), uint32(binary.BigEndian.Uint16(f.wire[14:]))
			data = append(append([]byte(nil), f.wire[:12]...), f.wire[16:]...)
			status |= unix.TP_STATUS_VLAN_VALID | unix.TP_STATUS_VLAN_TPID_VALID
		}
		if off+testMacOff+len(data) > blockSize {
			break
		}
		if prev >= 0 {
			ne.PutUint32(blk[prev:], uint32(off-prev)) // tp_next_offset
		}
		h := blk[off:]
		ne.PutUint32(h[4:], f.sec)
		ne.PutUint32(h[8:], f.nsec)
		ne.PutUint32(h[12:], uint32(len(data))) // tp_snaplen
		ne.PutUint32(h[16:], uint32(len(data))) // tp_len
		ne.PutUint32(h[20:], status)
		ne.PutUint16(h[24:], testMacOff) // tp_mac
		ne.PutUint32(h[32:], tci)        // hv1.tp_vlan_tci
		ne.PutUint16(h[36:], tpid)       // hv1.tp_vlan_tpid
		copy(h[testMacOff:], data)
		prev = off
		off += (testMacOff + len(data) + 15) &^ 15
		n++
	}
	ne.PutUint32(blk[0:], unix.TPACKET_V3)
	ne.PutUint32(blk[12:], uint32(n))          // num_pkts
	ne.PutUint32(blk[16:], testBlockHdr)       // offset_to_first_pkt
	ne.PutUint32(blk[20:], uint32(off))        // blk_len
	ne.PutUint32(blk[8:], unix.TP_STATUS_USER) // block_status last
	return n
}

// ringSource returns a Source over an anonymous mapping standing in for a
// kernel ring, with a socket standing in for the packet socket (it never
// becomes readable, so Next times out when no block is ready).
func ringSource(t testing.TB, blockSize, numBlocks int) *Source {
	t.Helper()
	ring, err := unix.Mmap(-1, 0, blockSize*numBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	// The socket's stand-in is one end of a datagram socket pair: nobody
	// writes to it, so it never becomes readable, and its name carries no
	// interface index (0, as the Source's), so the check that the
	// interface still exists passes.
	pair, err1 := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	efd, err2 := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	fd := pair[0]
	t.Cleanup(func() { unix.Close(pair[1]) })
	s := &Source{fd: fd, efd: efd, ring: ring, blockSize: uint32(blockSize), numBlocks: numBlocks,
		link: decode.LinkEthernet, port: 3, iface: "fake0", scratch: make([]byte, minScratch)}
	s.pfd = [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
	t.Cleanup(func() { s.Close() })
	return s
}

func testFrames(n int) []wireFrame {
	var out []wireFrame
	for i, f := range netnstest.Traffic(n*3/4, n-n*3/4, 5) {
		et := binary.BigEndian.Uint16(f[12:])
		out = append(out, wireFrame{wire: f, stripped: et == 0x8100 || et == 0x88a8, sec: 1700000000 + uint32(i), nsec: uint32(i) * 1000})
	}
	return out
}

// TestRingRead fills a fake ring, reads it in small batches, and checks
// every frame byte for byte (tags back in place), its length, time, port
// and link type, and that blocks go back to the kernel one batch later.
func TestRingRead(t *testing.T) {
	const blockSize, numBlocks = 8192, 4
	s := ringSource(t, blockSize, numBlocks)
	frames := testFrames(200)
	var inRing []wireFrame
	for i, rest := 0, frames; i < numBlocks; i++ {
		n := putBlock(s.ring, blockSize, i, rest)
		inRing, rest = append(inRing, rest[:n]...), rest[n:]
	}
	if len(inRing) < 30 {
		t.Fatalf("only %d frames fit", len(inRing))
	}
	b := capture.NewBatch(7)
	var got []capture.Frame
	for {
		if err := s.Next(b); err != nil {
			t.Fatal(err)
		}
		if len(b.Frames) == 0 {
			break
		}
		// Blocks before the one being read were handed back by this Next.
		for i := range numBlocks {
			status := *s.blockStatus(i)
			if before := i < s.cur-s.held; before && status != unix.TP_STATUS_KERNEL {
				t.Errorf("block %d (reading %d, %d held) still has status %#x", i, s.cur, s.held, status)
			}
		}
		for _, f := range b.Frames {
			f.Data = bytes.Clone(f.Data)
			got = append(got, f)
		}
	}
	if len(got) != len(inRing) {
		t.Fatalf("read %d frames, want %d", len(got), len(inRing))
	}
	tagged := 0
	for i, f := range got {
		w := inRing[i]
		if !bytes.Equal(f.Data, w.wire) {
			t.Errorf("frame %d:\n got % x\nwant % x", i, f.Data, w.wire)
		}
		if w.stripped {
			tagged++
		}
		if f.OrigLen != uint32(len(w.wire)) || f.Time != int64(w.sec)*1e9+int64(w.nsec) || f.Port != 3 || f.Link != decode.LinkEthernet {
			t.Errorf("frame %d: OrigLen %d Time %d Port %d Link %d, want %d %d 3 1", i, f.OrigLen, f.Time, f.Port, f.Link, len(w.wire), int64(w.sec)*1e9+int64(w.nsec))
		}
	}
	if tagged == 0 {
		t.Error("no tagged frame in the test")
	}
	if st := s.Stats(); st.Received != uint64(len(inRing)) || st.Errors != 0 {
		t.Errorf("Stats = %+v, want %d received, no errors", st, len(inRing))
	}
	// The ring is empty and every block is the kernel's again.
	for i := range numBlocks {
		if status := *s.blockStatus(i); status != unix.TP_STATUS_KERNEL {
			t.Errorf("block %d: status %#x after reading everything", i, status)
		}
	}
}

// TestRingWholeRingBatch checks that a batch larger than the ring reads
// every block once and stops rather than reading its own blocks again.
func TestRingWholeRingBatch(t *testing.T) {
	const blockSize, numBlocks = 4096, 3
	s := ringSource(t, blockSize, numBlocks)
	frames := testFrames(100)
	total := 0
	for i := range numBlocks {
		n := putBlock(s.ring, blockSize, i, frames)
		frames = frames[n:]
		total += n
	}
	b := capture.NewBatch(1000)
	if err := s.Next(b); err != nil || len(b.Frames) != total {
		t.Fatalf("Next: %d frames, %v; want %d", len(b.Frames), err, total)
	}
	for i := range numBlocks {
		if status := *s.blockStatus(i); status&unix.TP_STATUS_USER == 0 {
			t.Errorf("block %d given back while its frames are in the batch", i)
		}
	}
	if err := s.Next(b); err != nil || len(b.Frames) != 0 {
		t.Fatalf("second Next: %d frames, %v; want an empty batch", len(b.Frames), err)
	}
}

// TestRingScratchFull checks that a batch ends when the scratch space for
// tagged frames is full, and the next batch goes on with the same frame.
func TestRingScratchFull(t *testing.T) {
	const blockSize = 8192
	s := ringSource(t, blockSize, 1)
	var frames []wireFrame
	for _, f := range testFrames(100) {
		if f.stripped {
			frames = append(frames, f)
		}
	}
	n := putBlock(s.ring, blockSize, 0, frames)
	s.scratch = make([]byte, len(frames[0].wire)+len(frames[1].wire)+len(frames[2].wire)-1)
	b := capture.NewBatch(64)
	var got [][]byte
	for range 3 * n {
		if err := s.Next(b); err != nil {
			t.Fatal(err)
		}
		for _, f := range b.Frames {
			got = append(got, bytes.Clone(f.Data))
		}
		// The batch ended because the next frame would not fit.
		if len(got) < n && s.used+len(frames[len(got)].wire) <= len(s.scratch) {
			t.Fatalf("batch of %d ended with %d of %d scratch bytes used, next frame %d bytes",
				len(b.Frames), s.used, len(s.scratch), len(frames[len(got)].wire))
		}
		if len(got) == 2 && s.used != len(frames[0].wire)+len(frames[1].wire) {
			t.Fatalf("first batch used %d scratch bytes for 2 frames", s.used)
		}
		if len(got) == n {
			break
		}
	}
	if len(got) != n {
		t.Fatalf("read %d frames, want %d", len(got), n)
	}
	for i := range got {
		if !bytes.Equal(got[i], frames[i].wire) {
			t.Errorf("frame %d differs", i)
		}
	}
}

// TestRingBadBlock checks that a block whose frame chain leaves the block
// counts its remaining frames as errors and reading goes on in the next
// block.
func TestRingBadBlock(t *testing.T) {
	const blockSize = 4096
	s := ringSource(t, blockSize, 2)
	frames := testFrames(20)
	n0 := putBlock(s.ring, blockSize, 0, frames)
	n1 := putBlock(s.ring, blockSize, 1, frames[n0:])
	if n0 < 3 {
		t.Fatalf("%d frames in block 0", n0)
	}
	// Point the second frame of block 0 past the end of the block.
	binary.NativeEndian.PutUint32(s.ring[testBlockHdr:], blockSize)
	b := capture.NewBatch(100)
	if err := s.Next(b); err != nil {
		t.Fatal(err)
	}
	if len(b.Frames) != 1+n1 {
		t.Errorf("read %d frames, want 1 from block 0 and %d from block 1", len(b.Frames), n1)
	}
	if st := s.Stats(); st.Errors != uint64(n0-1) {
		t.Errorf("Errors = %d, want %d", st.Errors, n0-1)
	}
}

// TestNextEmptyAndClose checks that Next returns an empty batch when no
// block is ready, that Close wakes a blocked Next with os.ErrClosed, and
// that Close is idempotent.
func TestNextEmptyAndClose(t *testing.T) {
	s := ringSource(t, 4096, 2)
	b := capture.NewBatch(8)
	if err := s.Next(b); err != nil || len(b.Frames) != 0 {
		t.Fatalf("Next on an empty ring: %d frames, %v", len(b.Frames), err)
	}
	if err := s.Next(capture.NewBatch(0)); err == nil {
		t.Error("Next accepted a batch without room")
	}
	done := make(chan error)
	go func() {
		for {
			if err := s.Next(b); err != nil {
				done <- err
				return
			}
		}
	}()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Errorf("blocked Next returned %v, want os.ErrClosed", err)
	}
	if err := s.Next(b); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Next after Close returned %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_ = s.Stats()
}

// FuzzRingBlock reads a one-block ring holding arbitrary bytes marked ready:
// the reader must not fault, and every frame the block claims is either
// delivered or counted as an error.
func FuzzRingBlock(f *testing.F) {
	const blockSize = 4096
	seed := make([]byte, blockSize)
	putBlock(seed, blockSize, 0, testFrames(12))
	f.Add(bytes.Clone(seed))
	f.Add(seed[:200])
	f.Fuzz(func(t *testing.T, data []byte) {
		s := ringSource(t, blockSize, 1)
		copy(s.ring, data)
		*(*uint32)(unsafe.Pointer(&s.ring[8])) = unix.TP_STATUS_USER
		claimed := binary.NativeEndian.Uint32(s.ring[12:])
		b := capture.NewBatch(64)
		delivered := 0
		for {
			s.fill(b)
			if len(b.Frames) == 0 {
				break
			}
			delivered += len(b.Frames)
			b.Frames = b.Frames[:0]
		}
		if got := uint64(delivered) + s.errs.Load(); got != uint64(claimed) {
			t.Errorf("block claims %d frames; delivered %d, errors %d", claimed, delivered, s.errs.Load())
		}
	})
}

// BenchmarkRing measures Next over a fake ring refilled between batches:
// the cost of walking the blocks and building frames, per frame.
func BenchmarkRing(b *testing.B) {
	for _, c := range []struct {
		name string
		keep func(wireFrame) bool
	}{
		{"untagged", func(f wireFrame) bool { return !f.stripped }},
		{"tagged", func(f wireFrame) bool { return f.stripped }},
	} {
		b.Run(c.name, func(b *testing.B) {
			const blockSize, numBlocks = 1 << 20, 4
			s := ringSource(b, blockSize, numBlocks)
			var frames []wireFrame
			for _, f := range testFrames(20000) {
				if c.keep(f) {
					frames = append(frames, f)
				}
			}
			images := make([][]byte, numBlocks)
			perBlock := 0
			for i := range numBlocks {
				perBlock = putBlock(s.ring, blockSize, i, frames)
				images[i] = bytes.Clone(s.ring[i*blockSize : (i+1)*blockSize])
			}
			batch := capture.NewBatch(256)
			b.ReportAllocs()
			b.SetBytes(int64(len(frames[0].wire)))
			b.ResetTimer()
			for n := 0; n < b.N; n += len(batch.Frames) {
				if s.left == 0 && (s.held == numBlocks || *s.blockStatus(s.cur) == unix.TP_STATUS_KERNEL) {
					b.StopTimer() // the ring is drained: the kernel fills it again
					s.giveBack()
					for i := range numBlocks {
						copy(s.ring[i*blockSize:], images[i])
					}
					b.StartTimer()
				}
				if err := s.Next(batch); err != nil || len(batch.Frames) == 0 {
					b.Fatalf("Next: %d frames, %v", len(batch.Frames), err)
				}
			}
			b.ReportMetric(float64(perBlock), "frames/block")
		})
	}
}
