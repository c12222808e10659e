package metrics

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// frameSource is a capture.Source over frames made in the test, delivered
// a few at a time so that batches end at arbitrary places.
type frameSource struct {
	frames []capture.Frame
	per    int
	stats  capture.Stats
}

func (s *frameSource) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	for len(s.frames) > 0 && len(b.Frames) < min(s.per, cap(b.Frames)) {
		b.Frames = append(b.Frames, s.frames[0])
		s.frames = s.frames[1:]
	}
	s.stats.Received += uint64(len(b.Frames))
	if len(b.Frames) == 0 {
		return io.EOF
	}
	return nil
}

func (s *frameSource) Stats() capture.Stats { return s.stats }
func (s *frameSource) Close() error         { return nil }

// roceFrame builds an Ethernet/IPv4/UDP/BTH frame by hand. ext holds the
// extension headers the opcode implies; payload bytes of zeros and the
// 4-byte ICRC follow.
type roceFrame struct {
	src, dst [4]byte
	sport    uint16
	ecn      uint8
	op       decode.Opcode
	dqp      uint32
	psn      uint32
	ackReq   bool
	fecn     bool
	ext      []byte
	payload  int
}

func (f roceFrame) bytes() []byte {
	udpLen := 8 + 12 + len(f.ext) + f.payload + 4
	b := make([]byte, 0, 14+20+udpLen)
	b = append(b, 0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00)
	b = append(b, 0x45, 26<<2|f.ecn)
	b = binary.BigEndian.AppendUint16(b, uint16(20+udpLen))
	b = append(b, 0, 0, 0x40, 0, 64, 17, 0, 0)
	b = append(b, f.src[:]...)
	b = append(b, f.dst[:]...)
	b = binary.BigEndian.AppendUint16(b, f.sport)
	b = binary.BigEndian.AppendUint16(b, 4791)
	b = binary.BigEndian.AppendUint16(b, uint16(udpLen))
	b = append(b, 0, 0)
	b = append(b, byte(f.op), 0, 0xff, 0xff)
	var b4 byte
	if f.fecn {
		b4 = 0x80
	}
	b = append(b, b4, byte(f.dqp>>16), byte(f.dqp>>8), byte(f.dqp))
	var b8 byte
	if f.ackReq {
		b8 = 0x80
	}
	b = append(b, b8, byte(f.psn>>16), byte(f.psn>>8), byte(f.psn))
	b = append(b, f.ext...)
	b = append(b, make([]byte, f.payload+4)...)
	return b
}

func reth(dmaLen uint32) []byte {
	return binary.BigEndian.AppendUint32(make([]byte, 12), dmaLen)
}

func aeth(syndrome uint8, msn uint32) []byte {
	return []byte{syndrome, byte(msn >> 16), byte(msn >> 8), byte(msn)}
}

// testTrace is a hand-made trace over two one-second windows with its
// expected counters, computed by hand.
type testTrace struct {
	frames []capture.Frame
	want   [2]map[Counter]uint64
	flows  [2]map[FlowKey][2]uint64 // packets, bytes
}

const testEpoch = int64(1_700_000_000) * int64(time.Second)

// The first counter of each counter section, for the expectations below.
const (
	opcodeCounter = Counter(opcodeBase)
	errorCounter  = Counter(errorBase)
	nakCounter    = Counter(nakCodeBase)
	pfcFrames     = Counter(pfcFrameBase)
	pfcQuanta     = Counter(pfcQuantaBase)
)

func makeTestTrace() *testTrace {
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	c, d := [4]byte{10, 0, 1, 1}, [4]byte{10, 0, 1, 2}
	const qpA, qpB, qpC, qpD = 0x100, 0x200, 0x300, 0x400
	tr := &testTrace{}
	for i := range tr.want {
		tr.want[i] = map[Counter]uint64{}
		tr.flows[i] = map[FlowKey][2]uint64{}
	}
	var t int64 = testEpoch
	add := func(win int, data []byte, orig int) {
		t += 1000
		if win == 1 && t < testEpoch+int64(time.Second) {
			t = testEpoch + int64(time.Second)
		}
		tr.frames = append(tr.frames, capture.Frame{Data: data, Time: t, OrigLen: uint32(orig), Link: decode.LinkEthernet})
		tr.want[win][Packets]++
		tr.want[win][Bytes] += uint64(orig)
	}
	roce := func(win int, f roceFrame, count ...Counter) {
		data := f.bytes()
		add(win, data, len(data))
		w := tr.want[win]
		w[RoCEPackets]++
		w[opcodeCounter+Counter(f.op)]++
		w[PayloadBytes] += uint64(f.payload)
		for _, c := range count {
			w[c]++
		}
		k := FlowKey{Src: decode.AddrFrom4(f.src), Dst: decode.AddrFrom4(f.dst), DQP: f.dqp}
		pb := tr.flows[win][k]
		tr.flows[win][k] = [2]uint64{pb[0] + 1, pb[1] + uint64(len(data))}
	}
	ab := func(op decode.Opcode, psn uint32, ext []byte, payload int) roceFrame {
		return roceFrame{src: a, dst: b, sport: 50000, op: op, dqp: qpB, psn: psn, ext: ext, payload: payload}
	}
	ba := func(op decode.Opcode, psn uint32, ext []byte) roceFrame {
		return roceFrame{src: b, dst: a, sport: 50000, op: op, dqp: qpA, psn: psn, ext: ext}
	}

	// Window 0. A→B: WRITE First/Middle/Last (PSN 10-12, AckReq on Last),
	// B ACKs 12; a WRITE Only at 13 marked CE, a CNP back to A; 13 again
	// (retransmit); 15 (gap); a READ of 2048 bytes at 16 answered by
	// First/Last at 16, 17; a NAK and an RNR NAK.
	roce(0, ab(opWriteFirst, 10, reth(3072), 1024))
	roce(0, ab(opWriteMiddle, 10+1, nil, 1024))
	last := ab(opWriteLast, 12, nil, 1024)
	last.ackReq = true
	roce(0, last, Messages)
	roce(0, ba(opAck, 12, aeth(0x1f, 1)), Acks)
	ce := ab(opWriteOnly, 13, reth(512), 512)
	ce.ecn = 3
	roce(0, ce, Messages, ECNCE)
	roce(0, roceFrame{src: b, dst: a, sport: 50000, op: opCNP, dqp: qpA, ext: make([]byte, 16)}, CNP)
	roce(0, ab(opWriteOnly, 13, reth(512), 512), Messages, Retransmits)
	roce(0, ab(opWriteOnly, 15, reth(512), 512), Messages, PSNGaps)
	roce(0, ab(opReadRequest, 16, reth(2048), 0), ReadRequests)
	roce(0, ba(opReadFirst, 16, aeth(0x1f, 3)))
	roce(0, roceFrame{src: b, dst: a, sport: 50000, op: 0x0f, dqp: qpA, psn: 17, ext: aeth(0x1f, 3), payload: 1024}, Messages)
	roce(0, ba(opAck, 17, aeth(0x60, 3)), NAKs)
	roce(0, ba(opAck, 17, aeth(0x2e, 3)), RNRNAKs)
	fe := roceFrame{src: c, dst: d, sport: 50001, op: opWriteOnly, dqp: qpD, psn: 1, ext: reth(64), payload: 64, fecn: true}
	roce(0, fe, Messages, FECN)

	// A PFC frame pausing priorities 3 (quanta 0xffff) and 5 (7), a DNS
	// datagram, a frame cut inside the BTH and one with a reserved opcode.
	pfc := []byte{0x01, 0x80, 0xc2, 0, 0, 1, 0x02, 0, 0, 0, 0, 9, 0x88, 0x08, 0x01, 0x01, 0, 0x28}
	for p := range 8 {
		q := map[int]uint16{3: 0xffff, 5: 7}[p]
		pfc = binary.BigEndian.AppendUint16(pfc, q)
	}
	pfc = append(pfc, make([]byte, 26)...)
	add(0, pfc, 64)
	tr.want[0][OtherPackets]++
	tr.want[0][pfcFrames+3]++
	tr.want[0][pfcQuanta+3] += 0xffff
	tr.want[0][pfcFrames+5]++
	tr.want[0][pfcQuanta+5] += 7
	dns := roceFrame{src: a, dst: b, sport: 1234, op: 0, dqp: 1}.bytes()
	binary.BigEndian.PutUint16(dns[36:], 53)
	add(0, dns, len(dns))
	tr.want[0][OtherPackets]++
	cut := ab(opWriteOnly, 20, reth(64), 64).bytes()
	add(0, cut[:14+20+8+6], len(cut))
	tr.want[0][TruncatedPackets]++
	tr.want[0][errorCounter+Counter(decode.ErrTruncated)]++
	bad := ab(0x1f, 21, nil, 64).bytes()
	add(0, bad, len(bad))
	tr.want[0][MalformedPackets]++
	tr.want[0][nakCounter+Counter(decode.NAKPSNSequenceError)]++ // the NAK above
	tr.want[0][errorCounter+Counter(decode.ErrOpcode)]++

	// Window 1: the flow A→B goes on without trouble, C→D sends a SEND
	// Only with immediate.
	roce(1, ab(opWriteOnly, 18, reth(4096), 4096), Messages)
	roce(1, ab(opWriteOnly, 19, reth(4096), 4096), Messages)
	roce(1, roceFrame{src: c, dst: d, sport: 50001, op: 0x05, dqp: qpD, psn: 2, ext: []byte{1, 2, 3, 4}, payload: 100}, Messages)
	return tr
}

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
		tr := makeTestTrace()
		wins := runEngine(t, &Config{Workers: workers, Host: "h"}, &frameSource{frames: tr.frames, per: 3})
		if len(wins) != 2 {
			t.Fatalf("%d workers: %d windows, want 2", workers, len(wins))
		}
		for i, w := range wins {
			if w.Start != testEpoch+int64(i)*int64(time.Second) || w.Length != int64(time.Second) {
				t.Errorf("%d workers: window %d is %d+%d", workers, i, w.Start, w.Length)
			}
			got := map[Counter]uint64{}
			for c, v := range w.Counters {
				if v != 0 {
					got[Counter(c)] = v
				}
			}
			// Acks of the ACK opcode with a NAK syndrome are not ACKs:
			// the hand count above says which.
			if diff := cmp.Diff(tr.want[i], got); diff != "" {
				t.Errorf("%d workers: window %d counters (-want +got):\n%s", workers, i, diff)
			}
			flows := map[FlowKey][2]uint64{}
			for _, f := range w.Flows {
				flows[f.Key] = [2]uint64{f.C[FlowPackets], f.C[FlowBytes]}
			}
			if diff := cmp.Diff(tr.flows[i], flows); diff != "" {
				t.Errorf("%d workers: window %d flows (-want +got):\n%s", workers, i, diff)
			}
			if est := w.Distinct.Estimate().Value; int(est+0.5) != len(tr.flows[i]) {
				t.Errorf("%d workers: window %d distinct flows %.2f, want %d", workers, i, est, len(tr.flows[i]))
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
	tr := makeTestTrace()
	want := encode(runEngine(t, &Config{Workers: 1, Host: "h"}, &frameSource{frames: tr.frames, per: 64}))
	var ab, rest []capture.Frame
	var p decode.Packet
	for _, f := range makeTestTrace().frames {
		p.Decode(f.Data, f.Link)
		if p.Headers&decode.HasUDP != 0 && p.SrcPort == 50000 {
			ab = append(ab, f)
		} else {
			rest = append(rest, f)
		}
	}
	for _, workers := range []int{1, 3} {
		got := encode(runEngine(t, &Config{Workers: workers, Host: "h"},
			&frameSource{frames: ab, per: 2}, &frameSource{frames: rest, per: 5}))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("two sources, %d workers: states differ (-one source +two):\n%s", workers, diff)
		}
	}
}

// TestReportJSONContract builds the reports of the hand-made trace and
// checks the keys DESIGN.md promises and the values computed by hand.
func TestReportJSONContract(t *testing.T) {
	tr := makeTestTrace()
	cfg := &Config{Workers: 2, Host: "h", ElephantRate: 50e3, JitterRate: 10e3}
	wins := runEngine(t, cfg, &frameSource{frames: tr.frames, per: 7})
	rp, err := NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var reports []map[string]any
	for _, w := range wins {
		var m map[string]any
		b := rp.Build(w).AppendJSON(nil)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("report is not JSON: %v\n%s", err, b)
		}
		reports = append(reports, m)
	}
	for _, k := range []string{"window_start_ns", "window_ns", "host", "packets", "bytes", "roce_packets",
		"other_packets", "malformed_packets", "truncated_packets", "flows", "opcodes", "messages", "cnp",
		"ecn_ce", "fecn", "becn", "naks", "rnr_naks", "retransmits", "psn_gaps", "pfc", "top_flows",
		"elephants", "jitter"} {
		if _, ok := reports[0][k]; !ok {
			t.Errorf("report lacks key %q", k)
		}
	}
	r0 := reports[0]
	for k, want := range map[string]float64{"packets": float64(tr.want[0][Packets]), "cnp": 1, "naks": 1,
		"rnr_naks": 1, "retransmits": 1, "psn_gaps": 1, "flows": 3, "window_ns": 1e9} {
		if got := r0[k].(float64); got != want {
			t.Errorf("window 0 %s = %v, want %v", k, got, want)
		}
	}
	if diff := cmp.Diff(map[string]any{"3": map[string]any{"frames": 1.0, "quanta": 65535.0},
		"5": map[string]any{"frames": 1.0, "quanta": 7.0}}, r0["pfc"]); diff != "" {
		t.Errorf("pfc (-want +got):\n%s", diff)
	}
	// The top flow of window 0 is A→B toward B's QP: its source QP is
	// learned by pairing it with B→A (same UDP source port), the CNP B
	// sent toward A's QP counts against it, and so do the retransmission,
	// the gap and the CE mark.
	top := r0["top_flows"].([]any)[0].(map[string]any)
	for k, want := range map[string]any{"src": "10.0.0.1", "dst": "10.0.0.2", "dqp": float64(0x200),
		"sqp": float64(0x100), "cnp": 1.0, "retransmits": 1.0, "psn_gaps": 1.0, "ecn_ce": 1.0, "packets": 7.0} {
		if diff := cmp.Diff(want, top[k]); diff != "" {
			t.Errorf("top flow %s (-want +got): %s", k, diff)
		}
	}
	// Window 1: A→B sends two 4 KiB WRITEs, 8000+ bytes: 68 kb/s, an
	// elephant at 50 kb/s; in window 0 it sent less, so its rate rose by
	// more than the jitter rate of 10 kb/s.
	ele := reports[1]["elephants"].([]any)
	if len(ele) != 1 || ele[0].(map[string]any)["dqp"] != float64(0x200) {
		t.Fatalf("window 1 elephants = %v, want the flow toward QP 0x200", ele)
	}
	jit := reports[1]["jitter"].([]any)
	if len(jit) != 1 || jit[0].(map[string]any)["dqp"] != float64(0x200) || jit[0].(map[string]any)["jitter"] != true {
		t.Errorf("window 1 jitter = %v, want the flow toward QP 0x200", jit)
	}
}

// idleSource delivers one frame, then nothing for a while (empty batches, as
// a live source does), then a frame stamped just after the first one.
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
	tr := makeTestTrace()
	now := time.Now().UnixNano()
	f0, f1 := tr.frames[0], tr.frames[1]
	f0.Time, f1.Time = now, now+1
	for _, workers := range []int{1, 2} {
		src := &idleSource{frames: []capture.Frame{f0, f1}, idle: 60 * time.Millisecond}
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
	blocking bool // Next blocks until Close, like a silent pipe
}

func (s *endlessSource) Next(b *capture.Batch) error {
	s.lent.Store(false)
	b.Frames = b.Frames[:0]
	if s.blocking {
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
		src := &endlessSource{frames: makeTestTrace().frames, t: testEpoch}
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
		blocked := &endlessSource{frames: src.frames, t: testEpoch, blocking: true}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
		start := time.Now()
		err = e.Run(ctx, []capture.Source{blocked}, func(*Window) error { return nil })
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !blocked.closed.Load() || time.Since(start) > 10*closeGrace {
			t.Errorf("%d workers: blocked source: Run = %v after %v, closed %v", workers, err, time.Since(start), blocked.closed.Load())
		}
	}
}

// TestEngineStopsWhenEmitFails: after the output fails, the engine stops
// reading soon, with one worker as with several.
func TestEngineStopsWhenEmitFails(t *testing.T) {
	for _, workers := range []int{1, 2} {
		src := &endlessSource{frames: makeTestTrace().frames, t: testEpoch}
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
		src := &nowSource{frame: makeTestTrace().frames[0], idle: 80 * time.Millisecond}
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

// TestReporterForgetsOldPairs: learned QP pairs are replaced when an end
// pairs anew, and forgotten when the table is full and they are stale, so
// a long capture keeps learning.
func TestReporterForgetsOldPairs(t *testing.T) {
	rp, err := NewReporter(&Config{TableSize: 2, Workers: 1}) // room for 8 ends
	if err != nil {
		t.Fatal(err)
	}
	length := int64(time.Second)
	end := func(i int) qpEnd { return qpEnd{testKey(uint32(i)).Src, uint32(i)} }
	for i := range 4 {
		rp.pair(end(2*i), end(2*i+1), length)
	}
	if len(rp.pairs) != 8 {
		t.Fatalf("%d ends after four pairs, want 8", len(rp.pairs))
	}
	rp.pair(end(100), end(101), length) // full, nothing stale: only older windows go
	if _, ok := rp.pairs[end(100)]; ok {
		t.Error("a new pair displaced pairs of the same window")
	}
	rp.now = int64(11 * time.Minute / time.Second)
	rp.pair(end(100), end(101), length)
	if len(rp.pairs) != 2 || rp.pairs[end(100)].peer != end(101) {
		t.Errorf("after 11 idle minutes: %d ends, want only the new pair", len(rp.pairs))
	}
	rp.pair(end(100), end(102), length)
	if _, ok := rp.pairs[end(101)]; ok || rp.pairs[end(102)].peer != end(100) {
		t.Errorf("re-pairing left the old peer: %v", rp.pairs)
	}
}

// TestEngineTimeJumps: one frame with a damaged far-future timestamp is
// held in the newest window instead of closing every window before it; a
// real jump (a capture resumed hours later) is taken after jumpConfirm
// frames.
func TestEngineTimeJumps(t *testing.T) {
	base := makeTestTrace().frames[0]
	at := func(ts int64) capture.Frame { f := base; f.Time = ts; return f }
	sec := int64(time.Second)
	var frames []capture.Frame
	for i := range 30 {
		frames = append(frames, at(testEpoch+int64(i)*sec/10)) // windows 0-2
		if i == 12 {
			frames = append(frames, at(testEpoch+100*365*24*3600*sec)) // damaged
		}
	}
	wins := runEngine(t, &Config{Workers: 1, Host: "h"}, &frameSource{frames: frames, per: 7})
	if len(wins) != 3 {
		t.Fatalf("%d windows, want 3", len(wins))
	}
	if w := wins[1]; w.Counters[Packets] != 11 || w.Counters[TimeJumps] != 1 || w.Counters[LatePackets] != 0 {
		t.Errorf("window 1: packets %d, time jumps %d, late %d; want 11, 1, 0", w.Counters[Packets], w.Counters[TimeJumps], w.Counters[LatePackets])
	}

	frames = []capture.Frame{at(testEpoch)}
	for i := range 100 {
		frames = append(frames, at(testEpoch+2*3600*sec+int64(i)))
	}
	wins = runEngine(t, &Config{Workers: 2, Host: "h"}, &frameSource{frames: frames, per: 9})
	if len(wins) != 2 || wins[0].Counters[Packets] != 1+jumpConfirm || wins[1].Counters[Packets] != 100-jumpConfirm ||
		wins[1].Start != testEpoch+2*3600*sec {
		t.Errorf("a real jump: %d windows", len(wins))
		for _, w := range wins {
			t.Logf("window %d: %d packets", w.Start, w.Counters[Packets])
		}
	}
}

// TestEngineCountsFragments sends a RoCE frame whole, then as the first
// fragment (MF set) and a later fragment (offset 185×8) of an IPv4 packet:
// the fragments are counted as fragments and other, not as RoCE.
func TestEngineCountsFragments(t *testing.T) {
	whole := roceFrame{src: [4]byte{10, 0, 0, 1}, dst: [4]byte{10, 0, 0, 2}, sport: 49152, op: opWriteOnly, dqp: 5, ext: reth(64), payload: 64}.bytes()
	first := bytes.Clone(whole)
	first[14+6] = 0x20 // MF
	later := bytes.Clone(whole)
	later[14+6], later[14+7] = 0, 185
	src := &frameSource{per: 2}
	for i, b := range [][]byte{whole, first, later} {
		src.frames = append(src.frames, capture.Frame{Data: b, OrigLen: uint32(len(b)), Time: testEpoch + int64(i), Link: decode.LinkEthernet})
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
