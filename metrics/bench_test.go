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
// packet from the responder. It returns, per frame, how far the PSNs of
// its connection advance in one pass over the frames.
func benchFrames(n, conns int, gap int64) ([]capture.Frame, []uint32) {
	rng := rand.New(rand.NewPCG(1, 2))
	psn := make([]uint32, conns)
	frames := make([]capture.Frame, n)
	conn := make([]int32, n)
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
		conn[i] = int32(c)
	}
	step := make([]uint32, n)
	for i, c := range conn {
		step[i] = psn[c]
	}
	return frames, step
}

// loopSource replays frames in batches until it has delivered n, each pass
// over them shifted in time past the previous one, and their PSNs past the
// previous pass's (by step, per frame), so that flows persist as on a real
// link, sending new PSNs.
type loopSource struct {
	frames []capture.Frame
	step   []uint32 // per frame: how far its connection's PSNs advance in a pass
	n      int      // frames to deliver
	pos    int
	pass   int
	sent   int
	base   []uint32 // the frames' PSNs of the first pass
}

// psnAt is the offset of the BTH PSN in the frames of benchFrames
// (Ethernet, IPv4, UDP, then the PSN in the BTH's last three bytes).
const psnAt = 14 + 20 + 8 + 9

func (s *loopSource) Next(b *capture.Batch) error {
	if s.pos == len(s.frames) {
		s.pos, s.pass = 0, s.pass+1
	}
	if s.sent >= s.n {
		b.Frames = b.Frames[:0]
		return io.EOF
	}
	if s.base == nil {
		s.base = make([]uint32, len(s.frames))
		for i, f := range s.frames {
			s.base[i] = uint32(f.Data[psnAt])<<16 | uint32(f.Data[psnAt+1])<<8 | uint32(f.Data[psnAt+2])
		}
	}
	n := copy(b.Frames[:min(cap(b.Frames), s.n-s.sent)], s.frames[s.pos:])
	b.Frames = b.Frames[:n]
	span := s.frames[len(s.frames)-1].Time - s.frames[0].Time + s.frames[1].Time - s.frames[0].Time
	for i := range b.Frames {
		b.Frames[i].Time += int64(s.pass) * span
		// The frame's bytes are the same memory in every pass: its PSN
		// is written for this one.
		j := s.pos + i
		psn := (s.base[j] + uint32(s.pass)*s.step[j]) & psnMask
		d := b.Frames[i].Data[psnAt : psnAt+3]
		d[0], d[1], d[2] = byte(psn>>16), byte(psn>>8), byte(psn)
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
		frames, step := benchFrames(1<<20, conns, 200)
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
					if err := e.Run(context.Background(), []capture.Source{&loopSource{frames: frames, step: step, n: n}}, func(w *metrics.Window) error {
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
