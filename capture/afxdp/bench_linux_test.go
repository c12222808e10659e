package afxdp

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/internal/netnstest"
)

// xdpMD is struct xdp_md, the context BPF_PROG_TEST_RUN takes.
type xdpMD struct {
	Data, DataEnd, DataMeta      uint32
	IngressIfindex, RxQueueIndex uint32
	EgressIfindex                uint32
}

// BenchmarkCaptureLive measures frames per second through one socket. The
// frames do not come from the veth peer, whose packet socket sends one
// frame per system call, but from the kernel itself: BPF_PROG_TEST_RUN in
// live-frames mode runs the group's XDP program b.N times on one RoCE frame
// as if it had arrived on the interface's queue 0, and performs the
// redirects for real. A reader goroutine drains the socket meanwhile.
// Reported: frames/s received, the fraction the kernel dropped (the
// injector can outrun the reader) and the XDP program's own run time per
// frame (kernel BPF statistics), per RX ring size and frame size (a
// small RoCE frame, and one padded to 3000 bytes, about the largest that
// BPF_PROG_TEST_RUN takes), and with the check that leaves frames
// addressed to the host to it (the default; the frame is addressed to
// another host, so the whole check runs and the frame is taken) or without
// (HostFrames).
func BenchmarkCaptureLive(b *testing.B) {
	small := netnstest.Traffic(1, 0, 1)[0]
	large := append(append([]byte(nil), small...), make([]byte, 3000-len(small))...)
	for _, ring := range []int{2048, 8192} {
		for _, frame := range [][]byte{small, large} {
			for _, hostFrames := range []bool{false, true} {
				b.Run(fmt.Sprintf("ring=%d/frame=%d/hostframes=%v", ring, len(frame), hostFrames), func(b *testing.B) {
					benchmarkCapture(b, &Config{Queues: []int{0}, RingSize: ring, NumFrames: 2 * ring, HostFrames: hostFrames}, frame)
				})
			}
		}
	}
}

func benchmarkCapture(b *testing.B, cfg *Config, frame []byte) {
	p := netnstest.New(b)
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, cfg); return err }); err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { g.Close() })
	s := g.Sockets()[0]

	var received atomic.Uint64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		batch := capture.NewBatch(256)
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := s.Next(batch); err != nil {
				done <- err
				return
			}
			received.Add(uint64(len(batch.Frames)))
		}
	}()
	// The kernel's run time statistics of BPF programs give the XDP
	// program's own cost per frame, which the load of the machine changes
	// less than the wall clock time of the whole path.
	bpfStats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enable BPF run time statistics: %v", err)
	}
	defer bpfStats.Close()
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	start := time.Now()
	err = p.Do(p.NSB, func() error {
		_, err := g.objs.Program.Run(&ebpf.RunOptions{
			Data:    frame,
			Repeat:  uint32(b.N),
			Flags:   unix.BPF_F_TEST_XDP_LIVE_FRAMES,
			Context: xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(p.IndexB)},
		})
		return err
	})
	if err != nil {
		b.Fatalf("inject %d frames: %v", b.N, err)
	}
	// Wait until every frame is received or dropped (or 10 s passed).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if received.Load()+s.Stats().Dropped >= uint64(b.N) {
			break
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	close(stop)
	if err := <-done; err != nil {
		b.Fatalf("Next: %v", err)
	}
	st := s.Stats()
	if st.Received+st.Dropped != uint64(b.N) {
		b.Errorf("received %d + dropped %d != %d injected", st.Received, st.Dropped, b.N)
	}
	x, _ := s.XDPStats()
	b.Logf("%d frames: %+v", b.N, x)
	b.ReportMetric(float64(st.Received)/elapsed.Seconds(), "frames/s")
	if ps, err := g.objs.Program.Stats(); err != nil || ps.RunCount < uint64(b.N) {
		b.Errorf("program statistics %+v, %v: want %d runs at least", ps, err, b.N)
	} else {
		b.ReportMetric(float64(ps.Runtime.Nanoseconds())/float64(ps.RunCount), "xdp-ns/frame")
	}
	b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
}
