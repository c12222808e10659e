package metrics

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// benchFrames makes n frames of WRITE traffic over the given number of
// connections, one frame every 50 ns (20 Mpps), each cut to 128 bytes as a
// mirror with truncation would: WRITE Middle packets with an ACK every
// eighth packet from the responder.
func benchFrames(n, conns int) []capture.Frame {
	rng := rand.New(rand.NewPCG(1, 2))
	psn := make([]uint32, conns)
	frames := make([]capture.Frame, n)
	mem := make([]byte, 0, n*128)
	for i := range frames {
		c := rng.IntN(conns)
		src := [4]byte{10, 0, byte(c >> 8), byte(c)}
		dst := [4]byte{10, 1, byte(c >> 8), byte(c)}
		f := roceFrame{src: src, dst: dst, sport: uint16(49152 + c), op: opWriteMiddle, dqp: uint32(c + 1000), psn: psn[c], payload: 1024}
		if i%8 == 7 {
			f = roceFrame{src: dst, dst: src, sport: uint16(49152 + c), op: opAck, dqp: uint32(c + 5000), psn: psn[c] - 1, ext: aeth(0x1f, psn[c])}
		} else {
			psn[c] = (psn[c] + 1) & psnMask
		}
		b := f.bytes()
		orig := len(b)
		b = b[:min(len(b), 128)]
		off := len(mem)
		mem = append(mem, b...)
		frames[i] = capture.Frame{Data: mem[off:len(mem):len(mem)], Time: testEpoch + int64(i)*50, OrigLen: uint32(orig), Link: decode.LinkEthernet}
	}
	return frames
}

// loopSource replays frames in batches, loops times, each pass shifted in
// time past the previous one, so that flows persist as on a real link.
type loopSource struct {
	frames []capture.Frame
	loops  int
	pos    int
	pass   int
	n      int
}

func (s *loopSource) Next(b *capture.Batch) error {
	if s.pos == len(s.frames) {
		s.pos, s.pass = 0, s.pass+1
	}
	if s.pass >= s.loops {
		b.Frames = b.Frames[:0]
		return io.EOF
	}
	n := copy(b.Frames[:cap(b.Frames)], s.frames[s.pos:])
	b.Frames = b.Frames[:n]
	span := s.frames[len(s.frames)-1].Time - s.frames[0].Time + 50
	for i := range b.Frames {
		b.Frames[i].Time += int64(s.pass) * span
	}
	s.pos += n
	s.n += n
	return nil
}

func (s *loopSource) Stats() capture.Stats { return capture.Stats{Received: uint64(s.n)} }
func (s *loopSource) Close() error         { return nil }

// BenchmarkEngine measures the whole engine (decode, windows, QP table,
// sketches, reports) over 4 M frames of 10 k connections from memory (a
// 1 M-frame trace played four times in a row, one frame every 50 ns, in
// windows of 100 ms: 2 M frames and 20 k flows each), with 1 and 2 workers.
// The reported figures are frames per second and ns per frame.
func BenchmarkEngine(b *testing.B) {
	frames := benchFrames(1<<20, 10000)
	const loops = 4
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			e, err := New(&Config{Workers: workers, Host: "bench", Window: 100 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			rp, err := NewReporter(&Config{Host: "bench", Window: 100 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := e.Run(context.Background(), []capture.Source{&loopSource{frames: frames, loops: loops}}, func(w *Window) error {
					rp.Build(w)
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(len(frames)) * loops * float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "frames/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/frame")
		})
	}
}
