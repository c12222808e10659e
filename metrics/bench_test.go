package metrics_test

import (
	"context"
	"fmt"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
	"io"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// psnMask keeps PSNs to their 24 bits.
const psnMask = 1<<24 - 1

// benchFrames makes n frames of WRITE traffic over the given number of
// connections, one frame every gap ns, each cut to 128 bytes as a mirror
// with truncation would: WRITE Middle packets with an ACK every eighth
// packet from the responder.
func benchFrames(n, conns int, gap int64) []capture.Frame {
	rng := rand.New(rand.NewPCG(1, 2))
	psn := make([]uint32, conns)
	frames := make([]capture.Frame, n)
	mem := make([]byte, 0, n*128)
	for i := range frames {
		c := rng.IntN(conns)
		src := [4]byte{10, byte(c >> 16), byte(c >> 8), byte(c)}
		dst := [4]byte{11, byte(c >> 16), byte(c >> 8), byte(c)}
		f := testframes.RoCE{Src: src, Dst: dst, Sport: uint16(49152 + c), Op: testframes.OpWriteMiddle, DQP: uint32(c + 1000), PSN: psn[c], Payload: 1024}
		if i%8 == 7 {
			f = testframes.RoCE{Src: dst, Dst: src, Sport: uint16(49152 + c), Op: testframes.OpAck, DQP: uint32(c + 5000), PSN: psn[c] - 1, Ext: testframes.AETH(0x1f, psn[c])}
		} else {
			psn[c] = (psn[c] + 1) & psnMask
		}
		b := f.Bytes()
		orig := len(b)
		b = b[:min(len(b), 128)]
		off := len(mem)
		mem = append(mem, b...)
		frames[i] = capture.Frame{Data: mem[off:len(mem):len(mem)], Time: testframes.Epoch + int64(i)*gap, OrigLen: uint32(orig), Link: decode.LinkEthernet}
	}
	return frames
}

// loopSource replays frames in batches until it has delivered n, each pass
// over them shifted in time past the previous one, so that flows persist as
// on a real link.
type loopSource struct {
	frames []capture.Frame
	n      int // frames to deliver
	pos    int
	pass   int
	sent   int
}

func (s *loopSource) Next(b *capture.Batch) error {
	if s.pos == len(s.frames) {
		s.pos, s.pass = 0, s.pass+1
	}
	if s.sent >= s.n {
		b.Frames = b.Frames[:0]
		return io.EOF
	}
	n := copy(b.Frames[:min(cap(b.Frames), s.n-s.sent)], s.frames[s.pos:])
	b.Frames = b.Frames[:n]
	span := s.frames[len(s.frames)-1].Time - s.frames[0].Time + s.frames[1].Time - s.frames[0].Time
	for i := range b.Frames {
		b.Frames[i].Time += int64(s.pass) * span
	}
	s.pos += n
	s.sent += n
	return nil
}

func (s *loopSource) Stats() capture.Stats { return capture.Stats{Received: uint64(s.sent)} }
func (s *loopSource) Close() error         { return nil }

// BenchmarkEngine measures the whole engine (decode, windows, QP table,
// sketches, reports built for every window) on 128-byte frames from memory,
// at 5 Mpps of frame time in 1 s windows, for 10 k, 100 k and 1 M
// connections (a frame every 200 ns, so a window holds 5 M frames), with 1
// and 2 workers. One op is one frame. A first run of two windows, untimed,
// warms the engine's tables and windows; the timed run then reuses them as a
// long capture would, and inserts each flow once. Run with -benchtime
// 20000000x or more so that several windows close.
func BenchmarkEngine(b *testing.B) {
	for _, conns := range []int{10_000, 100_000, 1_000_000} {
		frames := benchFrames(1<<20, conns, 200)
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("conns=%d/workers=%d", conns, workers), func(b *testing.B) {
				cfg := &metrics.Config{Workers: workers, Host: "bench"}
				e, err := metrics.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				run := func(n int) {
					rp, err := report.NewReporter(cfg)
					if err != nil {
						b.Fatal(err)
					}
					if err := e.Run(context.Background(), []capture.Source{&loopSource{frames: frames, n: n}}, func(w *metrics.Window) error {
						rp.Build(w)
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				run(min(10<<20, 10*b.N)) // two windows, less in a quick -benchtime 1x
				b.ReportAllocs()
				cpu := cpuTime()
				b.ResetTimer()
				run(b.N)
				b.StopTimer()
				reportRates(b, cpuTime()-cpu)
			})
		}
	}
}

// cpuTime returns the CPU time (user and system, all threads) the process
// has used, in ns: on a shared machine it tells more than the wall clock.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportRates reports a frame benchmark's rate in Mpps (wall clock) and its
// CPU time per frame.
func reportRates(b *testing.B, cpu int64) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/frame")
}
