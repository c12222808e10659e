package metrics

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/testframes"
)

// lagSource is a capture.Source over frames in time order that delivers them
// in batches of random sizes, may dawdle between batches (a yield or a short
// sleep), may wait before its first batch until another source signals, and
// signals (closes signal) once it delivered a frame at or after until, or
// when it ends. Its random generator is used only by the goroutine that
// calls Next.
type lagSource struct {
	frames []capture.Frame
	rng    *rand.Rand
	maxPer int
	dawdle bool
	wait   <-chan struct{} // the first Next waits for it; nil: no wait
	until  int64           // signal closes when a frame at or after until is delivered
	signal chan struct{}   // nil once closed, or when nobody waits for the source
}

func (s *lagSource) Next(b *capture.Batch) error {
	if s.wait != nil {
		<-s.wait
		s.wait = nil
	}
	b.Frames = b.Frames[:0]
	if s.dawdle {
		switch s.rng.IntN(8) {
		case 0:
			runtime.Gosched()
		case 1:
			time.Sleep(time.Duration(s.rng.IntN(300)) * time.Microsecond)
		}
	}
	n := min(1+s.rng.IntN(s.maxPer), len(s.frames), cap(b.Frames))
	b.Frames = append(b.Frames, s.frames[:n]...)
	s.frames = s.frames[n:]
	if s.signal != nil && (n == 0 || b.Frames[n-1].Time >= s.until) {
		close(s.signal)
		s.signal = nil
	}
	if n == 0 {
		return io.EOF
	}
	return nil
}

func (s *lagSource) Stats() capture.Stats { return capture.Stats{} }
func (s *lagSource) Close() error         { return nil }

// lagFlow is what a flow is expected to hold in a window, counted from the
// frames made.
type lagFlow struct {
	sport                                             uint16
	packets, bytes, payload, messages, acks, naks, rr uint64
	ce, cnp                                           uint64
	ops                                               map[uint8]uint64
}

// lagScenario is a randomized input of several sources and what each of its
// windows must hold, counted independently of the engine from the frames:
// each frame in window floor((t - Epoch) / 1s).
type lagScenario struct {
	desc     string
	sources  [][]capture.Frame // each in time order
	lateness time.Duration
	// small is the QP table capacity of each worker, 0 for plenty: a
	// small table evicts idle flows, and may hold no more (untracked).
	small int
	// lag links: source i waits before its first batch until source
	// waitFor[i] delivered a frame at or after until[i] (MaxInt64: until
	// it ended); waitFor[i] < 0: no wait.
	waitFor []int
	until   []int64
	dawdle  []bool
	maxPer  []int
	want    map[int64]*Counters
	flows   map[int64]map[FlowKey]*lagFlow
}

// lagConn is a connection of a scenario: a requester A and a responder B.
type lagConn struct {
	a, b      [4]byte
	qa, qb    uint32 // QPs of A and B: A→B frames go to qb, B→A frames to qa
	sport     uint16
	psn       uint32 // next request PSN
	lastRead  uint32 // PSN of the last READ request
	lastReq   uint32 // PSN of the last request
	mode      int    // 0: all frames on req; 1: requests on req, responses on resp; 2: any source
	req, resp int
}

// newLagScenario makes the input of seed: 2 or 3 sources over 6 to 10
// one-second windows, each source in time order, from tens of connections
// between a few hosts.
func newLagScenario(seed uint64) *lagScenario {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	sec := int64(time.Second)
	nsrc := 2 + r.IntN(2)
	nwin := 6 + r.IntN(5)
	sc := &lagScenario{
		sources: make([][]capture.Frame, nsrc),
		waitFor: make([]int, nsrc),
		until:   make([]int64, nsrc),
		dawdle:  make([]bool, nsrc),
		maxPer:  make([]int, nsrc),
		want:    map[int64]*Counters{},
		flows:   map[int64]map[FlowKey]*lagFlow{},
	}
	sc.lateness = []time.Duration{0, NoLateness, 500 * time.Millisecond, time.Second}[r.IntN(4)]
	if r.IntN(4) == 0 {
		sc.small = 8 + r.IntN(40)
	}

	// The windows each source covers: source 0 all of them, the others a
	// random stretch; maybe one window without any frame.
	lo, hi := make([]int, nsrc), make([]int, nsrc)
	hi[0] = nwin
	for i := 1; i < nsrc; i++ {
		lo[i] = r.IntN(nwin / 2)
		hi[i] = nwin - r.IntN(nwin/2)
	}
	empty := -1
	if r.IntN(3) == 0 {
		empty = 1 + r.IntN(nwin-2)
	}
	covers := func(i int, w int) bool { return lo[i] <= w && w < hi[i] }

	nhosts := 3 + r.IntN(4)
	conns := make([]*lagConn, 8+r.IntN(33))
	for i := range conns {
		a := r.IntN(nhosts)
		b := (a + 1 + r.IntN(nhosts-1)) % nhosts
		c := &lagConn{
			a: [4]byte{10, 0, 0, byte(1 + a)}, b: [4]byte{10, 0, 0, byte(1 + b)},
			// Distinct QPs everywhere, so that a flow key names one
			// connection.
			qa: uint32(0x100 + 2*i), qb: uint32(0x101 + 2*i),
			sport: uint16(49152 + r.IntN(16384)),
			psn:   uint32(r.IntN(1 << 24)),
			mode:  r.IntN(3),
			req:   r.IntN(nsrc), resp: r.IntN(nsrc),
		}
		conns[i] = c
	}

	// Frame times: uniform over the windows, some on window edges; a
	// third of the inputs are sparse, so that a worker sees windows
	// without frames of the source ahead but with the lagging one's.
	nframes := 300 + r.IntN(1200)
	if r.IntN(3) == 0 {
		nframes = 5 + r.IntN(60)
	}
	times := make([]int64, nframes)
	for i := range times {
		for {
			var t int64
			switch r.IntN(20) {
			case 0:
				t = int64(r.IntN(nwin)) * sec // a window's first ns
			case 1:
				t = int64(1+r.IntN(nwin))*sec - 1 // a window's last ns
			default:
				t = r.Int64N(int64(nwin) * sec)
			}
			if t/sec != int64(empty) {
				times[i] = testframes.Epoch + t
				break
			}
		}
	}
	slices.Sort(times)

	count := func(src int, t int64, data []byte) {
		sc.sources[src] = append(sc.sources[src], frameAt(t, data))
		w := (t - testframes.Epoch) / sec
		c := sc.want[w]
		if c == nil {
			c = new(Counters)
			sc.want[w] = c
		}
		c[Packets]++
		c[Bytes] += uint64(len(data))
	}
	for _, t := range times {
		w := int((t - testframes.Epoch) / sec)
		pick := func(want int) int { // want if it covers w, else a source that does
			if covers(want, w) {
				return want
			}
			var ok []int
			for i := range nsrc {
				if covers(i, w) {
					ok = append(ok, i)
				}
			}
			return ok[r.IntN(len(ok))]
		}
		if r.IntN(20) == 0 {
			// Not RoCE: a UDP datagram to port 53.
			dns := testframes.RoCE{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Sport: 1234, Op: 0, DQP: 1}.Bytes()
			binary.BigEndian.PutUint16(dns[36:], 53)
			src := pick(r.IntN(nsrc))
			count(src, t, dns)
			sc.want[int64(w)][OtherPackets]++
			continue
		}
		c := conns[r.IntN(len(conns))]
		f := testframes.RoCE{Src: c.a, Dst: c.b, Sport: c.sport, DQP: c.qb}
		back := func() { f.Src, f.Dst, f.DQP = c.b, c.a, c.qa }
		request := true
		msg, ack, nak, rnr := false, false, false, false
		switch k := r.IntN(20); {
		case k < 7: // WRITE Only
			n := r.IntN(4097)
			f.Op, f.Ext, f.Payload, f.AckReq = testframes.OpWriteOnly, testframes.RETH(uint32(n)), n, r.IntN(3) == 0
			msg = true
		case k < 10: // SEND Only
			f.Op, f.Payload, f.AckReq = decode.Opcode(0x04), r.IntN(4097), r.IntN(3) == 0
			msg = true
		case k < 13: // READ request
			f.Op, f.Ext = testframes.OpReadRequest, testframes.RETH(uint32(1+r.IntN(4096)))
		case k < 16: // READ response Only, to the last READ request
			back()
			request = false
			f.Op, f.PSN, f.Ext, f.Payload = testframes.OpReadOnly, c.lastRead, testframes.AETH(0x1f, 1), r.IntN(4097)
			msg = true
		case k < 19: // Acknowledge: mostly ACKs, some NAKs and RNR NAKs
			back()
			request = false
			syn := uint8(r.IntN(32)) // ACK
			switch r.IntN(8) {
			case 0:
				syn = 0x60 // NAK, PSN sequence error
				nak = true
			case 1:
				syn = 0x20 | uint8(r.IntN(32)) // RNR NAK
				rnr = true
			default:
				ack = true
			}
			f.Op, f.PSN, f.Ext = testframes.OpAck, c.lastReq, testframes.AETH(syn, 1)
		default: // a CNP back to the requester
			back()
			request = false
			f.Op, f.Ext = testframes.OpCNP, make([]byte, 16)
		}
		if request {
			f.PSN = c.psn
			if r.IntN(25) == 0 {
				f.PSN = (c.psn - 1 - uint32(r.IntN(4))) & psnMask // sent again
			}
			c.lastReq = f.PSN
			if f.Op == testframes.OpReadRequest {
				c.lastRead = f.PSN
			}
			c.psn = (c.psn + 1) & psnMask
		}
		ce := r.IntN(10) == 0
		if ce {
			f.ECN = 3
		}
		var src int
		switch {
		case c.mode == 0:
			src = pick(c.req)
		case c.mode == 1 && request:
			src = pick(c.req)
		case c.mode == 1:
			src = pick(c.resp)
		default:
			src = pick(r.IntN(nsrc))
		}
		data := f.Bytes()
		count(src, t, data)
		wc := sc.want[int64(w)]
		wc[RoCEPackets]++
		wc[PayloadBytes] += uint64(f.Payload)
		wc[opcodeBase+int(f.Op)]++
		key := FlowKey{Src: decode.AddrFrom4(f.Src), Dst: decode.AddrFrom4(f.Dst), DQP: f.DQP}
		fl := sc.flow(int64(w), key)
		fl.sport = c.sport
		fl.packets++
		fl.bytes += uint64(len(data))
		fl.payload += uint64(f.Payload)
		fl.ops[uint8(f.Op)]++
		for _, x := range []struct {
			on bool
			f  *uint64
			c  Counter
		}{{msg, &fl.messages, Messages}, {ack, &fl.acks, Acks}, {nak, &fl.naks, NAKs}, {rnr, &fl.rr, RNRNAKs},
			{ce, &fl.ce, ECNCE}, {f.Op == testframes.OpCNP, &fl.cnp, CNP}} {
			if x.on {
				*x.f++
				wc[x.c]++
			}
		}
		if nak {
			wc[nakCodeBase]++
		}
		if f.Op == testframes.OpReadRequest {
			wc[ReadRequests]++
		}
	}

	// Lag: none but what the goroutines make (0), a chain in a random
	// order where each source starts once the one before it ended (1),
	// or once it got to a random time (2).
	mode := r.IntN(3)
	order := r.Perm(nsrc)
	for i := range sc.waitFor {
		sc.waitFor[i] = -1
		sc.dawdle[i] = r.IntN(2) == 0
		sc.maxPer[i] = []int{1, 3, 16, 100, batchSize}[r.IntN(5)]
	}
	var links []string
	if mode > 0 {
		for j := 1; j < nsrc; j++ {
			i, prev := order[j], order[j-1]
			sc.waitFor[i], sc.until[i] = prev, math.MaxInt64
			link := "end"
			if mode == 2 && r.IntN(4) != 0 {
				sc.until[i] = testframes.Epoch + r.Int64N(int64(nwin)*sec)
				link = fmt.Sprintf("window %d", (sc.until[i]-testframes.Epoch)/sec)
			}
			links = append(links, fmt.Sprintf("%d after %d's %s", i, prev, link))
		}
	}
	var parts []string
	for i, fs := range sc.sources {
		parts = append(parts, fmt.Sprintf("source %d: windows %d-%d, %d frames, batches ≤%d, dawdle %v", i, lo[i], hi[i]-1, len(fs), sc.maxPer[i], sc.dawdle[i]))
	}
	lateness := map[time.Duration]string{0: "default", NoLateness: "none"}[sc.lateness]
	if lateness == "" {
		lateness = sc.lateness.String()
	}
	sc.desc = fmt.Sprintf("%d windows (empty %d), %d connections, lateness %s, table %d per worker, lag mode %d [%s]; %s",
		nwin, empty, len(conns), lateness, sc.small, mode, strings.Join(links, ", "), strings.Join(parts, "; "))
	return sc
}

// flow returns the expected record of key in window w, made if need be.
func (sc *lagScenario) flow(w int64, key FlowKey) *lagFlow {
	m := sc.flows[w]
	if m == nil {
		m = map[FlowKey]*lagFlow{}
		sc.flows[w] = m
	}
	f := m[key]
	if f == nil {
		f = &lagFlow{ops: map[uint8]uint64{}}
		m[key] = f
	}
	return f
}

// run makes fresh sources of the scenario, linked as it says, and runs them
// through an engine with workers workers.
func (sc *lagScenario) run(t *testing.T, seed uint64, workers int) []*Window {
	srcs := make([]*lagSource, len(sc.sources))
	for i, fs := range sc.sources {
		srcs[i] = &lagSource{frames: fs, rng: rand.New(rand.NewPCG(seed, uint64(100+i))), maxPer: sc.maxPer[i], dawdle: sc.dawdle[i]}
	}
	for i, j := range sc.waitFor {
		if j >= 0 {
			if srcs[j].signal == nil {
				srcs[j].signal = make(chan struct{})
			}
			srcs[j].until = sc.until[i]
			srcs[i].wait = srcs[j].signal
		}
	}
	var cs []capture.Source
	for _, s := range srcs {
		cs = append(cs, s)
	}
	table := 1 << 12
	if sc.small > 0 {
		table = sc.small * workers
	}
	cfg := &Config{Workers: workers, Host: "h", Lateness: sc.lateness, TableSize: table,
		DistinctBits: 1 << 12, CMWidth: 256, TopKSize: 64}
	return runEngine(t, cfg, cs...)
}

// check compares the windows of a run with the scenario's expectation and
// returns what differs.
func (sc *lagScenario) check(wins []*Window) []string {
	var errs []string
	bad := func(w int64, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("window %d: ", w)+fmt.Sprintf(format, args...))
	}
	sec := int64(time.Second)
	seen := map[int64]bool{}
	for i, w := range wins {
		idx := (w.Start - testframes.Epoch) / sec
		if w.Segment != 0 || w.Length != sec || (w.Start-testframes.Epoch)%sec != 0 {
			bad(idx, "segment %d, start %d, length %d", w.Segment, w.Start, w.Length)
		}
		if i > 0 && w.Start <= wins[i-1].Start {
			bad(idx, "emitted after window %d", (wins[i-1].Start-testframes.Epoch)/sec)
		}
		if seen[idx] {
			bad(idx, "emitted twice")
		}
		seen[idx] = true
		want := sc.want[idx]
		if want == nil {
			bad(idx, "emitted, but no frame is in it (%d packets)", w.Counters[Packets])
			continue
		}
		// With a small table, flows are evicted, and frames of flows it
		// cannot hold count in no flow record: the records of a window
		// with such frames hold at most the flows' frames.
		untracked := w.Counters[UntrackedPackets]
		for _, c := range []Counter{Packets, Bytes, RoCEPackets, OtherPackets, PayloadBytes, Messages, Acks, NAKs,
			RNRNAKs, ECNCE, CNP, ReadRequests, LatePackets, TimeJumps, MalformedPackets, TruncatedPackets,
			UntrackedPackets, Evictions} {
			if sc.small > 0 && (c == UntrackedPackets || c == Evictions) {
				continue
			}
			if got := w.Counters[c]; got != want[c] {
				bad(idx, "%s %d, want %d", counterName(int(c)), got, want[c])
			}
		}
		for op := range 256 {
			if got, n := w.Counters[opcodeBase+op], want[opcodeBase+op]; got != n {
				bad(idx, "opcode 0x%02x: %d packets, want %d", op, got, n)
			}
		}
		if got, n := w.Counters[nakCodeBase], want[nakCodeBase]; got != n {
			bad(idx, "NAK code 0: %d, want %d", got, n)
		}

		flows := sc.flows[idx]
		if untracked == 0 && len(w.Flows) != len(flows) {
			bad(idx, "%d flow records, want %d", len(w.Flows), len(flows))
		}
		got := map[FlowKey]bool{}
		tracked := uint64(0)
		for i := range w.Flows {
			f := &w.Flows[i]
			tracked += f.C[FlowPackets]
			if got[f.Key] {
				bad(idx, "flow %v: two records", f.Key)
				continue
			}
			got[f.Key] = true
			e := flows[f.Key]
			if e == nil {
				bad(idx, "flow %v: a record (%d packets), but no frame", f.Key, f.C[FlowPackets])
				continue
			}
			if untracked > 0 {
				if f.C[FlowPackets] == 0 || f.C[FlowPackets] > e.packets || f.C[FlowBytes] > e.bytes {
					bad(idx, "flow %v (some untracked): %d packets, %d bytes; want 1 to %d, at most %d",
						f.Key, f.C[FlowPackets], f.C[FlowBytes], e.packets, e.bytes)
				}
				continue
			}
			ops := map[uint8]uint64{}
			for j, n := range f.Ops.N {
				if n != 0 {
					ops[f.Ops.Op[j]] += n
				}
			}
			for _, x := range []struct {
				name      string
				got, want uint64
			}{
				{"packets", f.C[FlowPackets], e.packets},
				{"bytes", f.C[FlowBytes], e.bytes},
				{"payload bytes", f.C[FlowPayloadBytes], e.payload},
				{"messages", f.C[FlowMessages], e.messages},
				{"acks", f.C[FlowAcks], e.acks},
				{"naks", f.C[FlowNAKs], e.naks},
				{"rnr naks", f.C[FlowRNRNAKs], e.rr},
				{"ecn ce", f.C[FlowECNCE], e.ce},
				{"cnp carried", f.C[FlowCNPCarried], e.cnp},
				{"activity bytes", f.Act.Bytes(), e.bytes},
				{"sport", uint64(f.Sport), uint64(e.sport)},
				{"other opcodes", f.Ops.Other, 0},
			} {
				if x.got != x.want {
					bad(idx, "flow %v: %s %d, want %d", f.Key, x.name, x.got, x.want)
				}
			}
			if !maps.Equal(ops, e.ops) {
				bad(idx, "flow %v: opcodes %v, want %v", f.Key, ops, e.ops)
			}
		}
		if tracked+untracked != want[RoCEPackets] {
			bad(idx, "flow records hold %d packets, %d untracked; want %d RoCE packets", tracked, untracked, want[RoCEPackets])
		}
		for k, e := range flows {
			if untracked == 0 && !got[k] {
				bad(idx, "flow %v: no record, want %d packets", k, e.packets)
			}
		}
	}
	for idx := range sc.want {
		if !seen[idx] {
			bad(idx, "not emitted, want %d packets", sc.want[idx][Packets])
		}
	}
	return errs
}

// TestEngineSourcesLagRandomly runs randomized inputs of 2 or 3 sources,
// each in time order but lagging each other (read one after the other, or
// from a random point of another, in batches of random sizes), through 1, 2
// and 3 workers, and checks every window against counts made from the
// frames: the readers' counters, and each flow's record, once per window,
// with its packets, bytes and the rest of its exact figures. No frame is
// late: each source is in time order. A panic in the engine's goroutines
// ends the test binary; run with -v to see the seed and workers of the
// subtest it happened in.
func TestEngineSourcesLagRandomly(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 5
	}
	for seed := range uint64(seeds) {
		sc := newLagScenario(seed)
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("seed=%d/workers=%d", seed, workers), func(t *testing.T) {
				errs := sc.check(sc.run(t, seed, workers))
				if len(errs) == 0 {
					return
				}
				const most = 20
				if len(errs) > most {
					errs = append(errs[:most], fmt.Sprintf("... and %d more", len(errs)-most))
				}
				t.Errorf("seed %d, %d workers: %s:\n%s", seed, workers, sc.desc, strings.Join(errs, "\n"))
			})
		}
	}
}

// dropSource is a source whose kernel counters grow with every batch it
// delivers, as a live source's do: drops by three a frame and one a batch,
// errors by one every batch of an odd number of frames.
type dropSource struct {
	capture.Source
	dropped, errors uint64
}

func (s *dropSource) Next(b *capture.Batch) error {
	err := s.Source.Next(b)
	s.dropped += 3*uint64(len(b.Frames)) + 1
	s.errors += uint64(len(b.Frames)) % 2
	return err
}

func (s *dropSource) Stats() capture.Stats {
	return capture.Stats{Dropped: s.dropped, Errors: s.errors}
}

// TestEngineCountsSourceDrops checks that the windows' kernel_drops and
// source_errors add up to what the sources counted in all, with one source
// and with several, for any number of workers: each window has the growth
// since the last one closed, none is counted twice or lost.
func TestEngineCountsSourceDrops(t *testing.T) {
	sc := newLagScenario(7)
	for _, nsrc := range []int{1, len(sc.sources)} {
		for _, workers := range []int{1, 2} {
			var srcs []capture.Source
			var ds []*dropSource
			for i, fs := range sc.sources[:nsrc] {
				d := &dropSource{Source: &testframes.Source{Frames: fs, Per: 5 + 3*i}}
				srcs, ds = append(srcs, d), append(ds, d)
			}
			wins := runEngine(t, &Config{Workers: workers, Host: "h", Lateness: sc.lateness, TableSize: 1 << 12,
				DistinctBits: 1 << 12, CMWidth: 256, TopKSize: 64}, srcs...)
			var drops, errs, wantDrops, wantErrs uint64
			for _, w := range wins {
				drops += w.Counters[KernelDrops]
				errs += w.Counters[SourceErrors]
			}
			for _, d := range ds {
				wantDrops += d.dropped
				wantErrs += d.errors
			}
			if drops != wantDrops || errs != wantErrs || wantDrops == 0 {
				t.Errorf("%d sources, %d workers, %d windows: kernel_drops %d, source_errors %d; the sources counted %d and %d",
					nsrc, workers, len(wins), drops, errs, wantDrops, wantErrs)
			}
		}
	}
	// A step back of the clock ends a segment and starts the next with
	// new readers: the source's totals still count once.
	f := testframes.Trace().Frames[0]
	var stepped []capture.Frame
	for _, from := range []int64{testframes.Epoch, testframes.Epoch - 600*int64(time.Second)} {
		for i := range 2000 {
			f.Time = from + int64(i)*int64(time.Millisecond)
			stepped = append(stepped, f)
		}
	}
	for _, workers := range []int{1, 2} {
		d := &dropSource{Source: &testframes.Source{Frames: stepped, Per: 50}}
		wins := runEngine(t, &Config{Workers: workers, Host: "h"}, d)
		var drops uint64
		segments := map[uint32]bool{}
		for _, w := range wins {
			drops += w.Counters[KernelDrops]
			segments[w.Segment] = true
		}
		if drops != d.dropped || len(segments) != 2 {
			t.Errorf("clock stepped back, %d workers: kernel_drops %d in %d segments; the source counted %d, want 2 segments",
				workers, drops, len(segments), d.dropped)
		}
	}
}
