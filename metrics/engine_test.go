package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/sketch"
)

// handRoCE is the first frame of the hand-made trace, a RoCE frame whole.
var handRoCE = testframes.Trace().Frames[0].Data

// roceAt returns handRoCE captured at time t: what the tests of the clock
// replay at the times they test.
func roceAt(t int64) capture.Frame { return frameAt(t, handRoCE) }

// runEngine runs an engine over sources and returns its windows, copied.
func runEngine(t *testing.T, cfg *Config, sources ...capture.Source) []*Window {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Window
	err = e.Run(context.Background(), sources, func(w *Window) error {
		b, err := w.AppendBinary(nil)
		if err != nil {
			return err
		}
		var c Window
		if err := c.UnmarshalBinary(b); err != nil {
			return err
		}
		out = append(out, &c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEngineCountsHandMadeTrace(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		tr := testframes.Trace()
		wins := runEngine(t, &Config{Workers: workers, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 3})
		if len(wins) != 2 {
			t.Fatalf("%d workers: %d windows, want 2", workers, len(wins))
		}
		for i, w := range wins {
			if w.Start != testframes.Epoch+int64(i)*int64(time.Second) || w.Length != int64(time.Second) {
				t.Errorf("%d workers: window %d is %d+%d", workers, i, w.Start, w.Length)
			}
			got := map[string]uint64{}
			for c, v := range w.Counters {
				if v != 0 {
					got[counterName(c)] = v
				}
			}
			// Acks of the ACK opcode with a NAK syndrome are not ACKs:
			// the hand count above says which.
			if diff := cmp.Diff(tr.Want[i], got); diff != "" {
				t.Errorf("%d workers: window %d counters (-want +got):\n%s", workers, i, diff)
			}
			flows := map[testframes.Flow][2]uint64{}
			for _, f := range w.Flows {
				s, d := f.Key.Src.As16(), f.Key.Dst.As16()
				flows[testframes.Flow{Src: [4]byte(s[12:]), Dst: [4]byte(d[12:]), DQP: f.Key.DQP}] = [2]uint64{f.C[FlowPackets], f.C[FlowBytes]}
			}
			if diff := cmp.Diff(tr.Flows[i], flows); diff != "" {
				t.Errorf("%d workers: window %d flows (-want +got):\n%s", workers, i, diff)
			}
			if est := w.Distinct.Estimate().Value; int(est+0.5) != len(tr.Flows[i]) {
				t.Errorf("%d workers: window %d distinct flows %.2f, want %d", workers, i, est, len(tr.Flows[i]))
			}
		}
	}
}

// TestEngineSourcesAndWorkersAgree checks that splitting the input by
// connection over several sources, and the work over several workers,
// gives the same windows byte for byte.
func TestEngineSourcesAndWorkersAgree(t *testing.T) {
	encode := func(ws []*Window) [][]byte {
		var out [][]byte
		for _, w := range ws {
			b, err := w.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	tr := testframes.Trace()
	want := encode(runEngine(t, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: tr.Frames, Per: 64}))
	var ab, rest []capture.Frame
	var p decode.Packet
	for _, f := range testframes.Trace().Frames {
		p.Decode(f.Data, f.Link)
		if p.Headers&decode.HasUDP != 0 && p.SrcPort == 50000 {
			ab = append(ab, f)
		} else {
			rest = append(rest, f)
		}
	}
	for _, workers := range []int{1, 3} {
		got := encode(runEngine(t, &Config{Workers: workers, Host: "h"},
			&testframes.Source{Frames: ab, Per: 2}, &testframes.Source{Frames: rest, Per: 5}))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("two sources, %d workers: states differ (-one source +two):\n%s", workers, diff)
		}
	}
}

// idleSource delivers one frame stamped with the time it is delivered, then
// nothing for a while (empty batches, as a live source does), then a frame
// stamped just after the first one.
type idleSource struct {
	frames []capture.Frame
	step   int
	idle   time.Duration
}

func (s *idleSource) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	s.step++
	switch {
	case s.step == 1:
		s.frames[0].Time = time.Now().UnixNano()
		s.frames[1].Time = s.frames[0].Time + 1
		b.Frames = append(b.Frames, s.frames[0])
	case s.step == 2:
		time.Sleep(s.idle)
	case s.step == 3:
		b.Frames = append(b.Frames, s.frames[1])
	default:
		return io.EOF
	}
	return nil
}

func (s *idleSource) Stats() capture.Stats { return capture.Stats{} }
func (s *idleSource) Close() error         { return nil }

// TestEngineLiveFrameInClosedWindow: after an idle gap in a live capture
// closed every window by the clock, a frame stamped in a closed window is
// counted late in the first window still open, not lost and no crash.
func TestEngineLiveFrameInClosedWindow(t *testing.T) {
	tr := testframes.Trace()
	for _, workers := range []int{1, 2} {
		src := &idleSource{frames: []capture.Frame{tr.Frames[0], tr.Frames[1]}, idle: 60 * time.Millisecond}
		wins := runEngine(t, &Config{Workers: workers, Host: "h", Live: true, Window: 10 * time.Millisecond}, src)
		var total Counters
		for _, w := range wins {
			total.Add(&w.Counters)
		}
		if total[Packets] != 2 || total[LatePackets] != 1 || total[RoCEPackets] != 2 {
			t.Errorf("%d workers: packets %d, late %d, roce %d; want 2, 1, 2", workers, total[Packets], total[LatePackets], total[RoCEPackets])
		}
		for i := 1; i < len(wins); i++ {
			if wins[i].Start <= wins[i-1].Start {
				t.Errorf("%d workers: windows out of order: %d after %d", workers, wins[i].Start, wins[i-1].Start)
			}
		}
	}
}

// backlogSource delivers, in order, frames stamped from 300 ms before its
// first batch on, a millisecond apart, 25 a batch: a live capture whose
// reader runs behind the link by more than the windows' lateness, as when
// the capture host is busy.
type backlogSource struct {
	frame capture.Frame
	n     int
	from  int64
	sent  int
}

func (s *backlogSource) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	if s.sent == 0 {
		s.from = time.Now().Add(-300 * time.Millisecond).UnixNano()
	}
	for s.sent < s.n && len(b.Frames) < 25 {
		f := s.frame
		f.Time = s.from + int64(s.sent)*int64(time.Millisecond)
		b.Frames = append(b.Frames, f)
		s.sent++
	}
	if len(b.Frames) == 0 {
		return io.EOF
	}
	return nil
}

func (s *backlogSource) Stats() capture.Stats { return capture.Stats{} }
func (s *backlogSource) Close() error         { return nil }

// TestEngineLiveBacklog: frames a live capture takes late but in order,
// older than every window the wall clock left open, are late frames, not a
// step back of the clock: every frame is counted, in one segment. (Taken
// for steps, they started a new segment every jumpConfirm frames.)
func TestEngineLiveBacklog(t *testing.T) {
	for _, workers := range []int{1, 2} {
		src := &backlogSource{frame: testframes.Trace().Frames[0], n: 10 * jumpConfirm}
		// Small sketches: the run emits a window every 10 ms of the wall
		// clock, each copied whole by runEngine, also under the race
		// detector, where megabytes a window added up to gigabytes.
		wins := runEngine(t, &Config{Workers: workers, Host: "h", Live: true, Window: 10 * time.Millisecond,
			TableSize: 1 << 12, DistinctBits: 1 << 12, CMWidth: 256, TopKSize: 64}, src)
		var total Counters
		segments := map[uint32]bool{}
		for _, w := range wins {
			total.Add(&w.Counters)
			segments[w.Segment] = true
		}
		if total[Packets] != uint64(src.n) || len(segments) != 1 || total[TimeJumps] != 0 || total[LatePackets] == 0 {
			t.Errorf("%d workers: %d packets (%d late, %d time jumps) in %d segments; want %d packets, some late, in 1 segment",
				workers, total[Packets], total[LatePackets], total[TimeJumps], len(segments), src.n)
		}
	}
}

// endlessSource delivers the same frames forever, like a busy live link. It
// records a Close that comes while the frames of its last batch are still
// lent to the caller: on a mapped file or a ring that frees their memory.
type endlessSource struct {
	frames   []capture.Frame
	t        int64
	lent     atomic.Bool
	unsafe   atomic.Bool
	closed   atomic.Bool
	batches  atomic.Int64
	blocking bool        // Next blocks until Close, like a silent pipe
	waiting  atomic.Bool // a blocking Next has been entered
}

func (s *endlessSource) Next(b *capture.Batch) error {
	s.lent.Store(false)
	b.Frames = b.Frames[:0]
	if s.blocking {
		s.waiting.Store(true)
		for !s.closed.Load() {
			time.Sleep(time.Millisecond)
		}
	}
	if s.closed.Load() {
		return os.ErrClosed
	}
	for len(b.Frames) < cap(b.Frames) {
		f := s.frames[len(b.Frames)%len(s.frames)]
		s.t += 1000
		f.Time = s.t
		b.Frames = append(b.Frames, f)
	}
	s.batches.Add(1)
	s.lent.Store(true)
	return nil
}

func (s *endlessSource) Stats() capture.Stats { return capture.Stats{} }
func (s *endlessSource) Close() error {
	if s.lent.Load() {
		s.unsafe.Store(true)
	}
	s.closed.Store(true)
	return nil
}

// TestEngineStopsWithoutClosingUnderTheReader cancels runs over busy and
// silent sources: Run returns context.Canceled, never closes a source
// whose frames are being decoded, and closes a blocked one after the grace.
func TestEngineStopsWithoutClosingUnderTheReader(t *testing.T) {
	for _, workers := range []int{1, 2} {
		src := &endlessSource{frames: testframes.Trace().Frames, t: testframes.Epoch}
		e, err := New(&Config{Workers: workers, Host: "h"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err = e.Run(ctx, []capture.Source{src}, func(*Window) error { return nil })
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%d workers: Run = %v, want the context's error", workers, err)
		}
		if src.unsafe.Load() || src.closed.Load() {
			t.Errorf("%d workers: the busy source was closed by Run (while lent: %v)", workers, src.unsafe.Load())
		}
		// Cancel once the reader is blocked in Next: a deadline alone may
		// pass before a loaded machine starts the reader, which then ends
		// without ever calling Next and has nothing to close.
		blocked := &endlessSource{frames: src.frames, t: testframes.Epoch, blocking: true}
		ctx, cancel = context.WithCancel(context.Background())
		go func() {
			for !blocked.waiting.Load() {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		start := time.Now()
		err = e.Run(ctx, []capture.Source{blocked}, func(*Window) error { return nil })
		cancel()
		if !errors.Is(err, context.Canceled) || !blocked.closed.Load() || time.Since(start) > 10*closeGrace {
			t.Errorf("%d workers: blocked source: Run = %v after %v, closed %v", workers, err, time.Since(start), blocked.closed.Load())
		}
	}
}

// TestEngineStopsWhenEmitFails: after the output fails, the engine stops
// reading soon, with one worker as with several.
func TestEngineStopsWhenEmitFails(t *testing.T) {
	for _, workers := range []int{1, 2} {
		src := &endlessSource{frames: testframes.Trace().Frames, t: testframes.Epoch}
		e, err := New(&Config{Workers: workers, Host: "h", Window: time.Millisecond, Lateness: time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		full := errors.New("disk full")
		err = e.Run(context.Background(), []capture.Source{src}, func(*Window) error { return full })
		if !errors.Is(err, full) {
			t.Errorf("%d workers: Run = %v, want the emit error", workers, err)
		}
		if n := src.batches.Load(); n > 1000 {
			t.Errorf("%d workers: read %d batches after the output failed", workers, n)
		}
	}
}

// nowSource delivers a frame stamped with the clock, stays silent (empty
// batches) for a while, then delivers another: a live link with a pause.
type nowSource struct {
	frame capture.Frame
	idle  time.Duration
	sent  int
	next  time.Time
}

func (s *nowSource) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	switch {
	case s.sent == 2:
		return io.EOF
	case time.Now().Before(s.next):
		time.Sleep(time.Millisecond)
		return nil
	}
	f := s.frame
	f.Time = time.Now().UnixNano()
	b.Frames = append(b.Frames, f)
	s.sent++
	s.next = time.Now().Add(s.idle)
	return nil
}

func (s *nowSource) Stats() capture.Stats { return capture.Stats{} }
func (s *nowSource) Close() error         { return nil }

// TestEngineLiveReportsIdleWindows: a live capture reports every window,
// also those of a silent interval, in order and without gaps.
func TestEngineLiveReportsIdleWindows(t *testing.T) {
	for _, workers := range []int{1, 2} {
		src := &nowSource{frame: testframes.Trace().Frames[0], idle: 80 * time.Millisecond}
		wins := runEngine(t, &Config{Workers: workers, Host: "h", Live: true, Window: 10 * time.Millisecond}, src)
		var packets uint64
		for i, w := range wins {
			packets += w.Counters[Packets]
			if i > 0 && w.Start != wins[i-1].Start+w.Length {
				t.Errorf("%d workers: window %d starts at %d, the previous at %d", workers, i, w.Start, wins[i-1].Start)
			}
		}
		if packets != 2 || len(wins) < 6 {
			t.Errorf("%d workers: %d windows with %d packets; want 2 packets over at least 6 windows", workers, len(wins), packets)
		}
	}
}

// TestEngineTimeJumps: one frame with a damaged far-future timestamp is
// held in the newest window instead of closing every window before it; a
// real jump (a capture resumed hours later) is taken after jumpConfirm
// frames.
func TestEngineTimeJumps(t *testing.T) {
	sec := int64(time.Second)
	var frames []capture.Frame
	for i := range 30 {
		frames = append(frames, roceAt(testframes.Epoch+int64(i)*sec/10)) // windows 0-2
		if i == 12 {
			frames = append(frames, roceAt(testframes.Epoch+100*365*24*3600*sec)) // damaged
		}
	}
	wins := runEngine(t, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: frames, Per: 7})
	if len(wins) != 3 {
		t.Fatalf("%d windows, want 3", len(wins))
	}
	if w := wins[1]; w.Counters[Packets] != 11 || w.Counters[TimeJumps] != 1 || w.Counters[LatePackets] != 0 {
		t.Errorf("window 1: packets %d, time jumps %d, late %d; want 11, 1, 0", w.Counters[Packets], w.Counters[TimeJumps], w.Counters[LatePackets])
	}

	frames = []capture.Frame{roceAt(testframes.Epoch)}
	for i := range 100 {
		frames = append(frames, roceAt(testframes.Epoch+2*3600*sec+int64(i)))
	}
	wins = runEngine(t, &Config{Workers: 2, Host: "h"}, &testframes.Source{Frames: frames, Per: 9})
	if len(wins) != 2 || wins[0].Counters[Packets] != 1+jumpConfirm || wins[1].Counters[Packets] != 100-jumpConfirm ||
		wins[1].Start != testframes.Epoch+2*3600*sec {
		t.Errorf("a real jump: %d windows", len(wins))
		for _, w := range wins {
			t.Logf("window %d: %d packets", w.Start, w.Counters[Packets])
		}
	}
}

// TestEngineInOrderFramesStillCloseAndRelease checks what the reader's
// path for frames in order inside the window the frame before counted in
// must still do: close the window before once the clock passes its end
// plus the lateness, though no frame of a new window came; release the
// frames held back as older than every open window before it counts the
// next one, also those whose window index is clamped (a damaged time
// centuries back), so that they never add up to a step back of the clock;
// and count a frame in its own window after a time jump counted in
// another.
func TestEngineInOrderFramesStillCloseAndRelease(t *testing.T) {
	ms := int64(time.Millisecond)
	at := func(ts int64) capture.Frame { return roceAt(testframes.Epoch + ts) }
	type want struct{ packets, late, jumps uint64 }
	check := func(name string, frames []capture.Frame, wants ...want) {
		t.Helper()
		for _, workers := range []int{1, 2} {
			wins := runEngine(t, &Config{Workers: workers, Host: "h"}, &testframes.Source{Frames: frames, Per: 64})
			ok := len(wins) == len(wants)
			for i := 0; ok && i < len(wins); i++ {
				c := &wins[i].Counters
				ok = wins[i].Segment == 0 && (want{c[Packets], c[LatePackets], c[TimeJumps]}) == wants[i]
			}
			if !ok {
				t.Errorf("%s, %d workers: windows differ from %+v", name, workers, wants)
				for _, w := range wins {
					t.Logf("window %d, segment %d: %d packets, %d late, %d time jumps", w.Index(), w.Segment,
						w.Counters[Packets], w.Counters[LatePackets], w.Counters[TimeJumps])
				}
			}
		}
	}
	// One-second windows stay open 100 ms past their end. The frame at
	// 1.2 s closes window 0: the one at 0.9 s after it is late.
	check("late after the lateness", []capture.Frame{at(500 * ms), at(1050 * ms), at(1200 * ms), at(900 * ms), at(1300 * ms)},
		want{1, 0, 0}, want{4, 1, 0})

	// A frame centuries back is held, then late, each before a frame
	// in order: twice jumpConfirm of them.
	frames := []capture.Frame{at(500 * ms), at(1500 * ms)}
	n := uint64(2 * jumpConfirm)
	for i := range n {
		frames = append(frames, roceAt(math.MinInt64+int64(i)), at(1500*ms+int64(i+1)))
	}
	check("damaged times between frames in order", frames, want{1, 0, 0}, want{1 + 2*n, n, 0})

	// The frame at 0.95 s counts in window 0, still open; the damaged
	// one after it in the newest window, 1; the frame at 1.06 s in 1.
	check("a time jump after a frame of the window before", []capture.Frame{at(500 * ms), at(1050 * ms), at(950 * ms),
		at(100 * 365 * 24 * 3600 * 1000 * ms), at(1060 * ms)}, want{2, 0, 0}, want{3, 0, 1})

	// Frames at the last representable times: the first jumpConfirm are
	// held in window 0 as time jumps, then the jump is taken, to the
	// last window (its index clamped); a frame of window 0 after them is
	// older than every open window, then late.
	frames = []capture.Frame{at(500 * ms)}
	for i := range jumpConfirm + 6 {
		frames = append(frames, roceAt(math.MaxInt64-int64(i)))
	}
	frames = append(frames, at(600*ms))
	check("a frame of window 0 after a jump to the last window", frames, want{1 + jumpConfirm, 0, jumpConfirm}, want{7, 1, 0})
}

// TestEngineCountsFragments sends a RoCE frame whole, then as the first
// fragment (MF set) and a later fragment (offset 185×8) of an IPv4 packet:
// the fragments are counted as fragments and other, not as RoCE.
func TestEngineCountsFragments(t *testing.T) {
	whole := testframes.RoCE{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Sport: 49152, Op: testframes.OpWriteOnly, DQP: 5, Ext: testframes.RETH(64), Payload: 64}.Bytes()
	first := bytes.Clone(whole)
	first[14+6] = 0x20 // MF
	later := bytes.Clone(whole)
	later[14+6], later[14+7] = 0, 185
	src := &testframes.Source{Per: 2}
	for i, b := range [][]byte{whole, first, later} {
		src.Frames = append(src.Frames, capture.Frame{Data: b, OrigLen: uint32(len(b)), Time: testframes.Epoch + int64(i), Link: decode.LinkEthernet})
	}
	c := runCounters(t, src)
	if c[Packets] != 3 || c[RoCEPackets] != 1 || c[OtherPackets] != 2 || c[Fragments] != 2 {
		t.Errorf("packets %d roce %d other %d fragments %d, want 3, 1, 2, 2", c[Packets], c[RoCEPackets], c[OtherPackets], c[Fragments])
	}
}

// runCounters runs src through a one-worker engine and returns the sum of
// the counters of its windows.
func runCounters(t *testing.T, src capture.Source) Counters {
	t.Helper()
	e, err := New(&Config{Workers: 1, Host: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var sum Counters
	if err := e.Run(context.Background(), []capture.Source{src}, func(w *Window) error {
		sum.Add(&w.Counters)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return sum
}

// silentSource is a live source that delivers nothing: an empty batch every
// few milliseconds until its time is up.
type silentSource struct{ until time.Time }

func (s *silentSource) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	if time.Now().After(s.until) {
		return io.EOF
	}
	time.Sleep(3 * time.Millisecond)
	return nil
}
func (s *silentSource) Stats() capture.Stats { return capture.Stats{} }
func (s *silentSource) Close() error         { return nil }

// TestEngineLiveReportsSilentSources runs a live capture over sources that
// deliver nothing, one and two of them, with one and two workers: windows
// must be reported while the capture runs (by the clock, not at its end),
// one per window, contiguous from the window the capture started in. The
// bounds leave room for a loaded machine that starts the readers late or
// stalls them for a while.
func TestEngineLiveReportsSilentSources(t *testing.T) {
	const window, run = 20 * time.Millisecond, time.Second
	for _, c := range []struct{ sources, workers int }{{1, 1}, {1, 2}, {2, 1}, {2, 2}} {
		e, err := New(&Config{Workers: c.workers, Host: "h", Live: true, Window: window})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		until := start.Add(run)
		var sources []capture.Source
		for range c.sources {
			sources = append(sources, &silentSource{until: until})
		}
		var starts []int64
		var firstOut time.Time
		beforeEnd := 0
		err = e.Run(context.Background(), sources, func(w *Window) error {
			now := time.Now()
			if len(starts) == 0 {
				firstOut = now
			}
			starts = append(starts, w.Start)
			if now.Before(until) {
				beforeEnd++
			}
			if w.Counters[Packets] != 0 {
				t.Errorf("window %d counts %d packets of a silent source", w.Start, w.Counters[Packets])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%d sources, %d workers", c.sources, c.workers)
		floor := func(t time.Time) int64 { return floorDiv(t.UnixNano(), int64(window)) * int64(window) }
		// The readers start the clock a moment after start, and the
		// first window is closed, so over, when it comes out.
		if len(starts) == 0 || starts[0] < floor(start) || starts[0] >= floor(firstOut) {
			t.Fatalf("%s: windows %v, the first out at %v; want the first at the start of the window the capture started in (%d or soon after)", name, starts, firstOut, floor(start))
		}
		for i := 1; i < len(starts); i++ {
			if starts[i] != starts[i-1]+int64(window) {
				t.Errorf("%s: window %d starts at %d, the previous at %d", name, i, starts[i], starts[i-1])
			}
		}
		// Every window from the first to the one the sources ended in is
		// reported, and most come out before the sources end.
		if want := int((floor(until)-starts[0])/int64(window)) + 1; len(starts) < want || beforeEnd < want/2 {
			t.Errorf("%s: %d windows, %d of them during the run; want at least %d and %d", name, len(starts), beforeEnd, want, want/2)
		}
	}
}

// TestEngineTimeEdges replays frames at the ends of the int64 time line
// (before 1823, where a sentinel of -2^62 ns used to lie, and the last
// representable seconds): every frame is counted, in windows whose start is
// a multiple of their length and whose end does not overflow.
func TestEngineTimeEdges(t *testing.T) {
	at := func(ts ...int64) []capture.Frame {
		var fs []capture.Frame
		for _, x := range ts {
			fs = append(fs, roceAt(x))
		}
		return fs
	}
	for _, c := range []struct {
		name  string
		times []int64
	}{
		{"before 1823", []int64{-1<<62 - 5, -1<<62 - 4, -1<<62 + 3}},
		{"first representable window", []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + int64(time.Second)}},
		{"last representable window", []int64{math.MaxInt64 - 2*int64(time.Second), math.MaxInt64 - 1, math.MaxInt64}},
		{"both ends", []int64{math.MinInt64, 0, math.MaxInt64}},
	} {
		wins := runEngine(t, &Config{Workers: 1, Host: "h"}, &testframes.Source{Frames: at(c.times...), Per: 2})
		var packets uint64
		for _, w := range wins {
			packets += w.Counters[Packets]
			if w.Start%w.Length != 0 || w.Start > math.MaxInt64-w.Length {
				t.Errorf("%s: window at %d+%d is unaligned or overflows", c.name, w.Start, w.Length)
			}
		}
		if packets != uint64(len(c.times)) {
			t.Errorf("%s: %d packets in %d windows, want %d", c.name, packets, len(wins), len(c.times))
		}
	}
}

// TestEngineCoverage: the first and last windows of a replay cover only the
// time between the trace's first and last frames, whatever the workers and
// sources; the windows between are whole.
func TestEngineCoverage(t *testing.T) {
	tr := testframes.Trace()
	first, last := tr.Frames[0].Time, tr.Frames[len(tr.Frames)-1].Time
	parts := testframes.SplitByConnection(tr.Frames, 2)
	for _, c := range []struct {
		workers int
		sources []capture.Source
	}{
		{1, []capture.Source{&testframes.Source{Frames: tr.Frames, Per: 3}}},
		{2, []capture.Source{&testframes.Source{Frames: parts[0], Per: 2}, &testframes.Source{Frames: parts[1], Per: 5}}},
	} {
		wins := runEngine(t, &Config{Workers: c.workers, Host: "h"}, c.sources...)
		if len(wins) != 2 {
			t.Fatalf("%d windows, want 2", len(wins))
		}
		w0, w1 := wins[0], wins[1]
		if w0.From != first || w0.To != w0.Start+w0.Length || w1.From != w1.Start || w1.To != last+1 {
			t.Errorf("%d workers: covered %d-%d and %d-%d, want %d-%d and %d-%d", c.workers,
				w0.From, w0.To, w1.From, w1.To, first, w0.Start+w0.Length, w1.Start, last+1)
		}
	}
}

// TestEngineClockSteps replays traces whose clock misbehaves, with 1 and 2
// workers: a damaged first timestamp a day ahead, a clock stepped back ten
// minutes, and 65 damaged timestamps in a row ten years ahead. Every frame
// is counted, at most jumpConfirm of them late or out of their window, and
// the trace's own windows carry the rest; the windows after the step back
// are of segment 1.
func TestEngineClockSteps(t *testing.T) {
	sec := int64(time.Second)
	real := func(from int64, n int) []capture.Frame { // n frames over 2 s from from
		var fs []capture.Frame
		for i := range n {
			fs = append(fs, roceAt(from+int64(i)*2*sec/int64(n)))
		}
		return fs
	}
	const n = 4000
	day, decade := 24*3600*sec, 10*365*24*3600*sec
	cases := []struct {
		name   string
		frames []capture.Frame
		real   [2]int64 // the trace's own time range
		after  [2]int64 // the first and last window start after the step back
		lost   uint64   // frames outside the trace's windows: the damaged ones
	}{
		{"first timestamp a day ahead", append([]capture.Frame{roceAt(testframes.Epoch + day)}, real(testframes.Epoch, n)...),
			[2]int64{testframes.Epoch, testframes.Epoch + 2*sec}, [2]int64{testframes.Epoch, testframes.Epoch + sec}, 1},
		{"clock stepped back", append(real(testframes.Epoch, n), real(testframes.Epoch-600*sec, n)...),
			[2]int64{testframes.Epoch - 600*sec, testframes.Epoch + 2*sec}, [2]int64{testframes.Epoch - 600*sec, testframes.Epoch - 599*sec}, 0},
		{"65 future timestamps", func() []capture.Frame {
			fs := real(testframes.Epoch, n)
			for i := range 65 {
				fs[n/2+i].Time = testframes.Epoch + decade + int64(i)
			}
			return fs
		}(), [2]int64{testframes.Epoch, testframes.Epoch + 2*sec}, [2]int64{testframes.Epoch + sec, testframes.Epoch + sec}, 1},
	}
	for _, c := range cases {
		for _, workers := range []int{1, 2} {
			wins := runEngine(t, &Config{Workers: workers, Host: "h"}, &testframes.Source{Frames: c.frames, Per: 100})
			var total, inRange, late, jumps uint64
			for i, w := range wins {
				// One step back, to segment 1, whose windows are the
				// trace's own after the step.
				if i > 0 && (w.Segment < wins[i-1].Segment || w.Segment == wins[i-1].Segment && w.Start <= wins[i-1].Start) {
					t.Errorf("%s, %d workers: window %d of segment %d after window %d of segment %d", c.name, workers, w.Start, w.Segment, wins[i-1].Start, wins[i-1].Segment)
				}
				if last := i == len(wins)-1; last && w.Segment != 1 || w.Segment == 1 && (w.Start < c.after[0] || w.Start > c.after[1]) {
					t.Errorf("%s, %d workers: window %d of segment %d; want segment 1 last, its windows from %d to %d", c.name, workers, w.Start, w.Segment, c.after[0], c.after[1])
				}
				total += w.Counters[Packets]
				late += w.Counters[LatePackets]
				jumps += w.Counters[TimeJumps]
				if w.Start >= c.real[0]-w.Length && w.Start < c.real[1] {
					inRange += w.Counters[Packets]
				}
			}
			// The frames that confirmed the step go to the new
			// segment: none is late.
			if total != uint64(len(c.frames)) || late != 0 || inRange+c.lost != uint64(len(c.frames)) || jumps == 0 {
				t.Errorf("%s, %d workers: %d of %d frames, %d in the trace's windows, %d late, %d time jumps; want all, all but %d, 0, some",
					c.name, workers, total, len(c.frames), inRange, late, jumps, c.lost)
			}
		}
	}
}

// TestPoolOutputTakesBatches: a reader takes the batches given back first,
// makes new ones while the worker has room for more, and then waits for
// one given back. The batches it makes are carved from the worker's
// memory, a batch's room after another's.
func TestPoolOutputTakesBatches(t *testing.T) {
	mem := newBatchMem(3)
	defer mem.free()
	given := mem.batch()
	free := []chan *batch{make(chan *batch, 3)}
	room := []chan struct{}{make(chan struct{}, 2)}
	free[0] <- given
	room[0] <- struct{}{}
	room[0] <- struct{}{}
	o := &poolOutput{free: free, room: room, mem: []*batchMem{mem}, out: make([]*batch, 1)}
	var got []*batch
	for range 3 {
		o.take(0)
		got = append(got, o.out[0])
	}
	if got[0] != given || got[1] == given || got[2] == given || got[1] == got[2] {
		t.Fatalf("took %p %p %p: want %p, then two new batches", got[0], got[1], got[2], given)
	}
	for i, b := range got {
		if len(b.evs) != 0 || cap(b.evs) != batchSize || &b.evs[:1][0] != &mem.evs[i*batchSize] || b.close != noWindow {
			t.Fatalf("batch %d: %d events, room for %d at %p, close %d; want 0, %d at %p, none", i, len(b.evs), cap(b.evs), &b.evs[:1][0], b.close, batchSize, &mem.evs[i*batchSize])
		}
	}
	done := make(chan struct{})
	go func() {
		o.take(0) // no room left: waits for a batch given back
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("took a batch with none given back and no room")
	case <-time.After(20 * time.Millisecond):
	}
	free[0] <- got[1]
	<-done
	if o.out[0] != got[1] {
		t.Errorf("took %p, want the batch given back, %p", o.out[0], got[1])
	}
}

// testPoolOutput returns the pool output of a reader to workers workers,
// whose batches arrive on its in channels and its messages on msgs, and
// a UDP source port of a connection between 10.0.0.1 and 10.0.0.2 for
// each worker.
func testPoolOutput(t *testing.T, workers int) (o *poolOutput, msgs chan msg, src, dst decode.Addr, port []uint16) {
	msgs = make(chan msg, 1)
	o = &poolOutput{out: make([]*batch, workers), msgs: msgs}
	for k := range workers {
		mem := newBatchMem(4)
		t.Cleanup(mem.free)
		o.in = append(o.in, make(chan *batch, 4))
		o.free = append(o.free, make(chan *batch, 4))
		o.room = append(o.room, make(chan struct{}, 4))
		o.marked = append(o.marked, make(chan struct{}, 1))
		o.mem = append(o.mem, mem)
		for range 4 {
			o.room[k] <- struct{}{}
		}
		o.take(k)
	}
	src, dst = decode.AddrFrom4([4]byte{10, 0, 0, 1}), decode.AddrFrom4([4]byte{10, 0, 0, 2})
	port = make([]uint16, workers)
	for p, found := uint16(49152), 0; found < workers; p++ {
		if k := shardOf(connHash(&src, &dst, p), uint64(workers)); port[k] == 0 {
			port[k], found = p, found+1
		}
	}
	return o, msgs, src, dst, port
}

// TestPoolOutputMarkFollowsEvents: an event goes into its worker's batch
// only at the next event or mark, so that the event filled last before a
// close mark, of a worker whose batch is full, must go into a new batch
// sent before the mark's: every event of a worker precedes its mark in
// what the worker receives, and each batch holds its worker's events.
func TestPoolOutputMarkFollowsEvents(t *testing.T) {
	const workers = 2
	o, msgs, src, dst, port := testPoolOutput(t, workers)
	// Worker 0's batch full and one more event of it filled, one of
	// worker 1 before: the mark comes with worker 0's batch full.
	psn := uint32(0)
	fill := func(k int) {
		psn++
		ev := o.event(&src, &dst, port[k])
		ev.psn, ev.sport = psn, port[k]
	}
	fill(1)
	for range batchSize + 1 {
		fill(0)
	}
	o.mark(7)
	got := [workers][]uint32{}
	for k := range workers {
		close(o.in[k])
		marked := false
		for b := range o.in[k] {
			if marked {
				t.Fatalf("worker %d: a batch of %d events after the batch with the close mark", k, len(b.evs))
			}
			for i := range b.evs {
				if b.evs[i].sport != port[k] {
					t.Fatalf("worker %d got an event of port %d, want %d", k, b.evs[i].sport, port[k])
				}
				got[k] = append(got[k], b.evs[i].psn)
			}
			marked = b.close != noWindow
			if marked && b.close != 7 {
				t.Fatalf("worker %d: close mark %d, want 7", k, b.close)
			}
		}
		if !marked {
			t.Fatalf("worker %d received no close mark", k)
		}
	}
	if len(got[1]) != 1 || got[1][0] != 1 {
		t.Errorf("worker 1 got events %v, want [1]", got[1])
	}
	if len(got[0]) != batchSize+1 || got[0][0] != 2 || got[0][batchSize] != batchSize+2 {
		t.Errorf("worker 0 got %d events, first %v: want %d, psn 2 to %d in order", len(got[0]), got[0][:min(3, len(got[0]))], batchSize+1, batchSize+2)
	}
	for i := 1; i < len(got[0]); i++ {
		if got[0][i] != got[0][i-1]+1 {
			t.Fatalf("worker 0's events out of order at %d: %d after %d", i, got[0][i], got[0][i-1])
		}
	}
	if m := <-msgs; m.through != 7 {
		t.Errorf("collector told %+v, want the mark through 7", m)
	}
}

// TestPoolOutputFlushSendsLastEvent: a flush (a live capture's, after each
// batch of frames) hands on the event filled last too, which waits for
// the next event to go into its batch.
func TestPoolOutputFlushSendsLastEvent(t *testing.T) {
	o, _, src, dst, port := testPoolOutput(t, 2)
	ev := o.event(&src, &dst, port[1])
	ev.psn, ev.sport = 5, port[1]
	o.flush()
	select {
	case b := <-o.in[1]:
		if len(b.evs) != 1 || b.evs[0].psn != 5 {
			t.Fatalf("flush sent %d events to worker 1, want the one of psn 5", len(b.evs))
		}
	default:
		t.Fatal("flush sent worker 1 nothing")
	}
	if len(o.in[0]) != 0 {
		t.Errorf("flush sent worker 0, which has no event, %d batches", len(o.in[0]))
	}
}

// TestEngineTinyWindowsReuseWindows replays a frame every 0.4 ms through 1 ms
// windows (10 000 of them) with two workers, whose collector is the slowest
// stage: readers and shards run ahead of it only as far as the message
// queue lets them, and the window pool keeps every window in flight, so the
// run makes at most windowsInFlight windows (each a few megabytes of
// sketches) instead of a fresh one whenever the pool ran dry.
func TestEngineTinyWindowsReuseWindows(t *testing.T) {
	frames := make([]capture.Frame, 25_000)
	for i := range frames {
		frames[i] = roceAt(testframes.Epoch + int64(i)*400_000)
	}
	cfg := &Config{Workers: 2, Host: "h", Window: time.Millisecond, DistinctBits: 1 << 12, CMWidth: 256, TopKSize: 64}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	windows := 0
	err = e.Run(context.Background(), []capture.Source{&testframes.Source{Frames: frames, Per: 64}}, func(w *Window) error {
		windows++
		buf, err = w.AppendBinary(buf[:0]) // the collector's work for each window
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	made, most := e.pool.made.Load(), int64(windowsInFlight(2))
	if windows < 10_000 || made > most {
		t.Errorf("%d windows emitted; %d windows made, want at most %d", windows, made, most)
	}
	t.Logf("%d windows emitted, %d made", windows, made)
}

// TestEngineFlowSketchesOnlyWhenClosing: a window takes its flow sketches
// (distinct flows, Count-Min) only when the collector counts its flows
// into them, so that every window of a run counts into the same ones,
// reset in between, whatever the number of workers: the Count-Min
// sketches of each emitted window hold that window's bytes and packets,
// the distinct count its flows. Before, the two windows open at once each
// held a set, and then each worker's window, megabytes of memory touched
// for the first time.
func TestEngineFlowSketchesOnlyWhenClosing(t *testing.T) {
	const conns = 8 // on both workers of two
	base := testframes.Trace().Frames[0]
	frames := make([]capture.Frame, 2000)
	for i := range frames {
		c := i % conns
		f := testframes.RoCE{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Sport: uint16(49152 + c), Op: testframes.OpWriteOnly, DQP: uint32(0x100 + c), PSN: uint32(i / conns), Payload: 64}
		b := f.Bytes()
		frames[i] = capture.Frame{Data: b, OrigLen: uint32(len(b)), Time: testframes.Epoch + int64(i)*10*int64(time.Millisecond), Link: base.Link} // 20 windows
	}
	for _, workers := range []int{1, 2} {
		e, err := New(&Config{Workers: workers, Host: "h"})
		if err != nil {
			t.Fatal(err)
		}
		sets := map[*sketch.CountMin]bool{}
		windows := 0
		err = e.Run(context.Background(), []capture.Source{&testframes.Source{Frames: frames, Per: 64}}, func(w *Window) error {
			windows++
			sets[w.FlowBytes], sets[w.FlowPackets] = true, true
			var bytes, packets uint64
			for _, f := range w.Flows {
				bytes += f.C[FlowBytes]
				packets += f.C[FlowPackets]
			}
			if got := w.FlowBytes.Total(); got != bytes || bytes != w.Counters[Bytes] {
				t.Errorf("%d workers, window %d: Count-Min total %d bytes, the flows %d, the window %d", workers, w.Index(), got, bytes, w.Counters[Bytes])
			}
			if got := w.FlowPackets.Total(); got != packets || packets != w.Counters[Packets] {
				t.Errorf("%d workers, window %d: Count-Min total %d packets, the flows %d, the window %d", workers, w.Index(), got, packets, w.Counters[Packets])
			}
			if got := w.Distinct.Estimate().Value; got < conns-0.5 || got > conns+0.5 {
				t.Errorf("%d workers, window %d: %v distinct flows, want %d", workers, w.Index(), got, conns)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if windows != 20 || len(sets) != 2 {
			t.Errorf("%d workers: %d windows emitted, %d Count-Min sketches among them; want 20, 2", workers, windows, len(sets))
		}
	}
}

// gatedSource is a testframes.Source whose first Next waits for open.
type gatedSource struct {
	testframes.Source
	open <-chan struct{}
}

func (s *gatedSource) Next(b *capture.Batch) error {
	<-s.open
	return s.Source.Next(b)
}

// closingSource closes done when its frames are all delivered.
type closingSource struct {
	testframes.Source
	done chan struct{}
}

func (s *closingSource) Next(b *capture.Batch) error {
	err := s.Source.Next(b)
	if err == io.EOF && s.done != nil {
		close(s.done)
		s.done = nil
	}
	return err
}

// TestEngineLaggingReaderOneWindow: two sources of one flow, a frame every
// 10 ms over 3 s, whose clocks differ by 0.9 s; the one behind is read
// after the other ended, so that the shard's ring has moved on from its
// windows. Every figure of each of its frames is in the window its reader
// counted it in: per window the flow's packets and bytes, its Count-Min
// estimate and the packets and bytes the readers counted agree, and none
// is late.
func TestEngineLaggingReaderOneWindow(t *testing.T) {
	frames := func(from int64) []capture.Frame {
		fs := make([]capture.Frame, 300)
		for i := range fs {
			fs[i] = roceAt(from + int64(i)*10*int64(time.Millisecond))
		}
		return fs
	}
	ahead := &closingSource{Source: testframes.Source{Frames: frames(testframes.Epoch), Per: 16}, done: make(chan struct{})}
	behind := &gatedSource{Source: testframes.Source{Frames: frames(testframes.Epoch - 900*int64(time.Millisecond)), Per: 16}, open: ahead.done}
	wins := runEngine(t, &Config{Workers: 1, Host: "h"}, ahead, behind)
	sec := int64(time.Second)
	want := map[int64]uint64{-1: 90, 0: 200, 1: 200, 2: 110} // packets per window, by hand
	got := map[int64]uint64{}
	for _, w := range wins {
		i := (w.Start - testframes.Epoch) / sec
		got[i] = w.Counters[Packets]
		var packets, bytes uint64
		for _, f := range w.Flows {
			packets += f.C[FlowPackets]
			bytes += f.C[FlowBytes]
		}
		if packets != w.Counters[Packets] || bytes != w.Counters[Bytes] || w.Counters[LatePackets] != 0 {
			t.Errorf("window %d: flows hold %d packets, %d bytes; the readers counted %d, %d; %d late",
				i, packets, bytes, w.Counters[Packets], w.Counters[Bytes], w.Counters[LatePackets])
		}
		if len(w.Flows) != 1 {
			t.Errorf("window %d: %d flow records, want 1", i, len(w.Flows))
			continue
		}
		if est := w.FlowBytes.Estimate(w.Flows[0].Hash()); est != bytes {
			t.Errorf("window %d: Count-Min estimates %d bytes for the flow, want %d", i, est, bytes)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("packets per window (-want +got):\n%s", diff)
	}
}

// TestEngineLateFrameOfFlowThatStopped: a flow F sends in windows 0 and 1 on
// one source and stops; another flow moves the shard's ring on to window 3,
// which closes window 1 and moves F's counts into window 1's list. Then a
// second source, read after the first ended, has one more frame of F in
// window 1: it goes to the late part of window 1, where F has no record yet
// (the entry still names its record in the closed ring window). Window 1
// must hold F's two frames, by hand, with 1 and 2 workers.
func TestEngineLateFrameOfFlowThatStopped(t *testing.T) {
	sec := int64(time.Second)
	f := testframes.RoCE{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Sport: 1000, Op: testframes.OpWriteOnly, DQP: 1, Ext: testframes.RETH(64), Payload: 64}
	g := f
	g.Sport, g.DQP = 2000, 2
	for _, workers := range []int{1, 2} {
		ahead := &closingSource{Source: testframes.Source{Frames: []capture.Frame{
			frameAt(testframes.Epoch+sec/2, f.Bytes()),
			frameAt(testframes.Epoch+3*sec/2, f.Bytes()),
			frameAt(testframes.Epoch+5*sec/2, g.Bytes()),
			frameAt(testframes.Epoch+7*sec/2, g.Bytes()),
		}, Per: 1}, done: make(chan struct{})}
		behind := &gatedSource{Source: testframes.Source{Frames: []capture.Frame{
			frameAt(testframes.Epoch+17*sec/10, f.Bytes()),
		}, Per: 1}, open: ahead.done}
		for _, w := range runEngine(t, &Config{Workers: workers, Host: "h"}, ahead, behind) {
			if (w.Start-testframes.Epoch)/sec != 1 {
				continue
			}
			if len(w.Flows) != 1 || w.Flows[0].C[FlowPackets] != 2 || w.Counters[Packets] != 2 || w.Counters[LatePackets] != 0 {
				t.Errorf("%d workers: window 1 has %d flow records (%v), %d packets, %d late; want F with 2 packets, 2, 0",
					workers, len(w.Flows), w.Flows, w.Counters[Packets], w.Counters[LatePackets])
			}
		}
	}
}

// TestEngineOneFullFlowList: 2 000 connections each send one WRITE a
// window, over 7 windows, with one worker; in the last, within its first
// 50 ms, so that the input ends with two windows open (the lateness is
// 100 ms). Two windows are in flight at a time, but the older takes the
// memory of the flow list in which the most records were written
// (Window.swapFlowMem): at the next window's open, and as it closes, where
// the list is written into the memory written most (sortList), or, at the
// end of the input, where every flow of the older moved on before it
// closes, into its own (materializeAll). So of the lists' memory in the
// pool only one was written to a window's 2 000 records; one other holds
// the 200 records of the flows that moved on before their window closed
// (connections 0-199 send in the next window's first 100 ms), which
// sortList moved out of the way; no other got a record, as no flow folds
// early.
func TestEngineOneFullFlowList(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("flow lists live in mapped regions on Linux only")
	}
	const conns, windows = 2000, 7
	var frames []capture.Frame
	for w := range windows {
		span := int64(time.Second)
		if w == windows-1 {
			span /= 20
		}
		for c := range conns {
			f := testframes.RoCE{Src: [4]byte{10, 0, byte(c >> 8), byte(c)}, Dst: [4]byte{10, 1, 0, 1}, Sport: 50000,
				Op: testframes.OpWriteOnly, DQP: 0x100, PSN: uint32(w), Ext: testframes.RETH(64), Payload: 64}
			b := f.Bytes()
			frames = append(frames, capture.Frame{Data: b, OrigLen: uint32(len(b)), Link: decode.LinkEthernet,
				Time: testframes.Epoch + int64(w)*int64(time.Second) + int64(c)*span/conns})
		}
	}
	e, err := New(&Config{Workers: 1, Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	emitted := 0
	err = e.Run(context.Background(), []capture.Source{&testframes.Source{Frames: frames, Per: 256}}, func(w *Window) error {
		if len(w.Flows) != conns {
			t.Errorf("window %d: %d flows, want %d", w.Index(), len(w.Flows), conns)
		}
		emitted++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if emitted != windows {
		t.Fatalf("%d windows emitted, want %d", emitted, windows)
	}
	var highs []int
	for _, w := range e.pool.free {
		if w.flowMem != nil {
			highs = append(highs, w.flowsWritten())
		}
	}
	slices.Sort(highs)
	const movedOn = conns / 10
	if n := len(highs); n < 2 || highs[n-1] != conns || highs[n-2] != movedOn || n > 2 && highs[n-3] != 0 {
		t.Errorf("records written in the pooled flow lists' memory: %v; want one list of %d, one of %d, the rest 0", highs, conns, movedOn)
	}
}

// TestPoolLendsMostWrittenList: a window about to take its records gets
// the flow list memory of the free window in which the most records were
// written, counting the records of its last use (not yet folded into its
// region's mark, as a window is reset only when it is taken again), and
// keeps its own records; the free window gets its memory.
func TestPoolLendsMostWrittenList(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("flow lists live in mapped regions on Linux only")
	}
	e, err := New(&Config{Workers: 1, Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	p := e.pool
	list := func(n int) *Window {
		w := p.get(0)
		growFlows(w, n)
		w.Flows = w.Flows[:n]
		return w
	}
	w, last, earlier := list(5), list(50), list(10)
	w.Flows[4].C[FlowPackets] = 7
	earlier.reset(0, earlier.Length) // 10 records written, none listed
	p.put(last)
	p.put(earlier)
	p.lendFlowMem(w)
	if got := w.flowsWritten(); got != 50 || len(w.Flows) != 5 || w.Flows[4].C[FlowPackets] != 7 {
		t.Errorf("window after lendFlowMem: %d records written in its memory, %d listed, the last with %d packets; want 50, 5, 7",
			got, len(w.Flows), w.Flows[4].C[FlowPackets])
	}
	if got := last.flowsWritten(); got != 5 || len(last.Flows) != 0 {
		t.Errorf("free window after lendFlowMem: %d written, %d listed; want 5, 0", got, len(last.Flows))
	}
}

// TestEngineReleasesWorkerMemory checks that RunOnce with two workers
// ends with the memory no window still needs returned to the kernel (each
// worker's table and spare list, the flow lists of the pool's free windows
// but the last window's) and the same windows as Run, which keeps it for
// the next run; and that a run after RunOnce, which maps it anew, gives
// them again.
func TestEngineReleasesWorkerMemory(t *testing.T) {
	type runner func(context.Context, []capture.Source, func(*Window) error) error
	states := func(r runner, src capture.Source) (states [][]byte) {
		err := r(context.Background(), []capture.Source{src}, func(w *Window) error {
			b, err := w.AppendBinary(nil)
			states = append(states, b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return states
	}
	run := func(r runner) [][]byte {
		src, err := synth.New(&synth.Config{Seed: 3, Packets: 40000, Flows: 3000})
		if err != nil {
			t.Fatal(err)
		}
		return states(r, src)
	}
	engine := func() *Engine {
		e, err := New(&Config{Workers: 2, Host: "h"})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	kept := engine()
	want := run(kept.Run)
	if len(want) < 3 {
		t.Fatalf("%d windows, want at least 3", len(want))
	}
	for k, sh := range kept.shards {
		if sh.tab.hot == nil {
			t.Errorf("Run: worker %d's table released", k)
		}
	}
	held := func(e *Engine) (n int) {
		for _, w := range e.pool.free {
			if w.flowsWritten() > 0 {
				n++
			}
		}
		return n
	}
	e := engine()
	for i, label := range []string{"RunOnce", "RunOnce again"} {
		got := run(e.RunOnce)
		if i == 0 {
			for k, sh := range e.shards {
				if sh.tab.hot != nil {
					t.Errorf("%s: worker %d's table not released", label, k)
				}
				if len(sh.spare.Flows) != 0 || sh.spare.flowsWritten() != 0 {
					t.Errorf("%s: worker %d's spare list of %d records, %d written, not released", label, k, len(sh.spare.Flows), sh.spare.flowsWritten())
				}
			}
			// The windows the collector still had when the workers
			// released the lists of the others (the last one and the
			// shard window merged into it, and the one before when
			// the collector lags) gave theirs up once it was done.
			if n := held(e); len(e.pool.free) < 3 || n > 0 {
				t.Errorf("%s: %d of the pool's %d free windows hold flow list memory, want none", label, n, len(e.pool.free))
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d windows, Run %d", label, len(got), len(want))
		}
		for j := range want {
			if !bytes.Equal(got[j], want[j]) {
				t.Errorf("%s: window %d's state differs from Run's", label, j)
			}
		}
	}
	// A Run after keeps the lists of the windows it gives back.
	if got := run(e.Run); len(got) != len(want) {
		t.Fatalf("Run after RunOnce: %d windows, want %d", len(got), len(want))
	}
	if held(e) == 0 {
		t.Error("Run after RunOnce: no free window holds flow list memory")
	}

	// A step back of the clock starts a segment that reuses the tables:
	// only the last segment's workers release them.
	var frames []capture.Frame
	for _, from := range []int64{testframes.Epoch, testframes.Epoch - 600*int64(time.Second)} {
		for i := range int64(4000) {
			frames = append(frames, roceAt(from+i*int64(time.Millisecond)/2))
		}
	}
	want = states(engine().Run, &testframes.Source{Frames: frames, Per: 100})
	got := states(engine().RunOnce, &testframes.Source{Frames: frames, Per: 100})
	if len(want) != 4 || len(got) != len(want) {
		t.Fatalf("stepped clock: RunOnce %d windows, Run %d, want 4", len(got), len(want))
	}
	for j := range want {
		if !bytes.Equal(got[j], want[j]) {
			t.Errorf("stepped clock: window %d's state differs from Run's", j)
		}
	}
}
