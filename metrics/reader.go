package metrics

import (
	"math"
	"math/bits"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/filter"
	"github.com/rocescope/rocescope/decode"
)

// readerWindow is what a reader counts for one window: every figure that
// needs no per-flow state.
type readerWindow struct {
	index    int64
	from, to int64 // the part of the window the input covered, ns
	counters Counters
	cm       []CMMessage
	pauses   []PauseRecord      // what PFC frames paused, per source MAC and priority
	pauseAt  map[pauseKey]int32 // positions in pauses
}

// Index returns the window's index.
func (rw *readerWindow) Index() int64 { return rw.index }

// reader is the first stage: it decodes each frame once, counts the
// window-level figures and hands RoCE frames to the per-flow stage as
// events. Window closing is decided here, by frame time, so that it depends
// only on the order of the input and not on the number of workers.
type reader struct {
	dec           decode.Decoder
	pkt           decode.Packet
	brief         decode.Brief // of the RoCE frame being accounted
	filter        *filter.Set  // nil: every frame is analyzed
	seed          uint64
	winLen        int64
	burst         int64   // burst interval, ns
	burstInv      uint64  // ceil(2^64 / burst): slot divides by multiplying with it
	quantumNS     float64 // ns a PFC pause quantum lasts
	lateness      int64
	started       bool       // the clock is set: a frame arrived, or a live capture started
	maxT          int64      // the clock: the newest frame time (or wall-clock time, live), when started
	maxFrame      int64      // live: the newest frame time, which a step back of the clock goes behind
	first         int64      // the clock when it was set: where the input's coverage begins
	closeAt       int64      // maxT at which the oldest open window closes
	high          int64      // newest window index opened
	closedThrough int64      // every window ≤ this is closed
	live          bool       // windows close by the clock too: report idle ones
	minIdx        int64      // first window index with a representable start
	maxIdx        int64      // last window index with a representable end
	idxW          int64      // the window of the times in [idxLo, idxHi): index's last division
	idxLo, idxHi  int64      // see idxW
	jumps         int        // frames in a row far ahead of maxT, held back
	stepped       bool       // jumpConfirm frames in a row were behind: the clock stepped back
	stepIn        bool       // the input's first frame follows a step back: a time jump
	behind        heldFrames // frames in a row older than every window still open, not yet accounted
	open          ring[*readerWindow]
	tracks        map[pauseKey]pauseTrack // PFC pauses per source MAC and priority
	// cur is the window the last frame accounted counted in, open:
	// closeThrough clears it. Frames of its times take frame's fast path
	// while index's last division was for it.
	cur *readerWindow

	out output         // where events, closed windows and marks go
	src capture.Source // whose drops and errors the windows count, or nil
	// src's totals at the last window close, kept with the source across
	// segments: a reader of a new segment counts only their growth.
	last *capture.Stats
}

// A frame more than maxTimeJump after the newest frame so far is held in
// the newest window until jumpConfirm frames in a row are that far ahead.
// A frame older than every window still open is late; jumpConfirm of them
// in a row are a step back of the clock (a damaged first timestamp far
// ahead, a clock stepped back, a run of damaged future timestamps that
// moved the clock): the engine then reports every window so far and starts
// again at the new time.
const (
	maxTimeJump = int64(time.Hour)
	jumpConfirm = 64
)

// The longest window Config allows (MaxSlots slots of MaxBurst) is shorter
// than maxTimeJump, which frame's fast path relies on: this does not
// compile otherwise.
const _ = uint64(maxTimeJump - int64(MaxBurst)*MaxSlots - 1)

func newReader(cfg *Config, out output) *reader {
	r := &reader{
		out:           out,
		dec:           decode.Decoder{RoCEPort: cfg.RoCEPort},
		filter:        cfg.Filter,
		seed:          cfg.Seed,
		winLen:        int64(cfg.Window),
		burst:         int64(cfg.Burst),
		quantumNS:     512 * 1e9 / cfg.LinkRate,
		lateness:      max(int64(cfg.Lateness), 0), // NoLateness is none
		tracks:        make(map[pauseKey]pauseTrack),
		high:          noWindow,
		closedThrough: noWindow,
		live:          cfg.Live,
		maxFrame:      math.MinInt64,
		idxLo:         1, // no time is in [1, 0)
	}
	r.minIdx, r.maxIdx = -(math.MaxInt64 / r.winLen), math.MaxInt64/r.winLen-1
	// off/burst = off·ceil(2^64/burst)/2^64, rounded down, for every off
	// < winLen: the error off·(ceil(2^64/burst)·burst − 2^64)/2^64 stays
	// below off·burst/2^64 < 1/burst, as winLen·burst ≤ MaxSlots·MaxBurst²
	// < 2^64.
	q, rem := bits.Div64(1, 0, uint64(r.burst))
	r.burstInv = q
	if rem != 0 {
		r.burstInv++
	}
	return r
}

// startLive starts the clock of a live capture at the wall-clock time now:
// windows are reported from the one now falls in on, whether frames arrive
// or not.
func (r *reader) startLive(now int64) {
	w := r.index(now)
	r.started, r.maxT, r.first = true, now, now
	r.high, r.closedThrough = w, w-1
	r.closeAt = r.closeTime(w)
}

// index returns the index of the window that holds time t. Times beyond the
// first or last window whose start and end are representable in int64 ns
// count in that window. It remembers the last window it divided for, which
// holds the next frame's time nearly always: a 64-bit division is tens of
// cycles on the path of every frame.
func (r *reader) index(t int64) int64 {
	if t >= r.idxLo && t < r.idxHi {
		return r.idxW
	}
	w := floorDiv(t, r.winLen)
	if w < r.minIdx || w > r.maxIdx {
		return min(max(w, r.minIdx), r.maxIdx)
	}
	r.idxW, r.idxLo, r.idxHi = w, w*r.winLen, w*r.winLen+r.winLen // no overflow: w is within [minIdx, maxIdx]
	return w
}

// closeTime returns the clock time at which window w closes: its end plus
// the allowed lateness, saturated at the largest time.
func (r *reader) closeTime(w int64) int64 {
	end := (w + 1) * r.winLen // w ≤ maxIdx: no overflow
	if end > math.MaxInt64-r.lateness {
		return math.MaxInt64
	}
	return end + r.lateness
}

// floorDiv divides rounding toward minus infinity, so that windows are
// aligned for times before the epoch too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// frame accounts one frame. A frame older than every window still open is
// held, with those in a row after it: either a frame that is not follows
// and they are accounted as late before it, or jumpConfirm of them confirm
// a step back of the clock (stepped) and they go to the next segment. In a
// live capture the windows follow the wall clock, and a frame is held only
// when it is also older than the newest frame: frames that come in order
// but late (a reader running behind the link) are late frames, not a step
// back of the clock.
func (r *reader) frame(f *capture.Frame) {
	// Most frames come in order, in the open window the frame before
	// counted in, with no window to close and none held back: what the
	// rest of frame and account would decide for them is known. Such a
	// frame is never far enough ahead to be a time jump (windows are
	// shorter than maxTimeJump), nor, in a live capture, behind.
	if t := f.Time; r.cur != nil && r.cur.index == r.idxW && t >= r.idxLo && t < r.idxHi &&
		t < r.closeAt && len(r.behind.frames) == 0 {
		r.jumps, r.maxT, r.maxFrame = 0, max(r.maxT, t), max(r.maxFrame, t)
		r.count(r.cur, f, t)
		return
	}
	newest := r.maxT
	if r.live {
		newest, r.maxFrame = r.maxFrame, max(r.maxFrame, f.Time)
	}
	if r.started && f.Time <= newest && r.isBehind(r.index(f.Time)) {
		r.jumps = 0
		r.behind.add(f)
		r.stepped = len(r.behind.frames) >= jumpConfirm
		return
	}
	if len(r.behind.frames) > 0 {
		r.releaseBehind()
	}
	r.account(f)
}

// releaseBehind accounts the frames held as behind: late, as a step back
// of the clock was not confirmed.
func (r *reader) releaseBehind() {
	for i := range r.behind.frames {
		r.account(&r.behind.frames[i])
	}
	r.behind.reset()
}

// account counts a frame in its window.
func (r *reader) account(f *capture.Frame) {
	t, jumped := f.Time, false
	switch {
	case r.started && t <= r.maxT:
		r.jumps = 0
	case r.started && t > r.maxT+maxTimeJump && r.maxT < math.MaxInt64-maxTimeJump && r.jumps < jumpConfirm:
		// Far ahead of every frame so far: a damaged timestamp would
		// close every window before it, so the frame counts in the
		// newest window until enough frames in a row confirm the jump.
		r.jumps++
		t, jumped = r.maxT, true
	default:
		r.jumps = 0
		r.advance(t)
	}
	if r.stepIn {
		jumped, r.stepIn = true, false
	}
	w := r.index(t)
	rw := r.window(w)
	if jumped {
		rw.counters[TimeJumps]++
	}
	r.cur = rw
	r.count(rw, f, t)
}

// count counts frame f, of time t, in window rw.
func (r *reader) count(rw *readerWindow, f *capture.Frame, t int64) {
	c := &rw.counters
	c[Packets]++
	c[Bytes] += uint64(f.OrigLen)
	// Most frames need no more than a Brief, which DecodeBrief reads
	// straight from their bytes; a filter, and every other frame, need
	// the whole Packet.
	if r.filter == nil && r.dec.DecodeBrief(&r.brief, f.Data, f.Link) {
		r.roce(rw, f, t)
		return
	}
	// The expression looks at the bytes, the RoCE filter at what a frame
	// that decodes says; a frame that does not decode is counted as such.
	if r.filter != nil && !r.filter.Frame(f.Data, f.Link) {
		c[Filtered]++
		return
	}
	p := &r.pkt
	if err := r.dec.Decode(p, f.Data, f.Link); err != nil {
		if p.Err == decode.ErrTruncated {
			c[TruncatedPackets]++
		} else {
			c[MalformedPackets]++
		}
		c[errorBase+int(p.Err)]++
		return
	}
	if r.filter != nil && !r.filter.Packet(p) {
		c[Filtered]++
		return
	}
	if p.IsRoCE() {
		p.Brief(&r.brief)
		r.roce(rw, f, t)
		return
	}
	switch p.Kind {
	case decode.KindPFC:
		for prio := 0; prio < 8; prio++ {
			if p.Pause.Enable&(1<<prio) != 0 {
				c[pfcFrameBase+prio]++
				c[pfcQuantaBase+prio] += uint64(p.Pause.Quanta[prio])
				r.pause(rw, p.SrcMAC, uint8(prio), p.Pause.Quanta[prio], t)
			}
		}
	case decode.KindPause:
		c[PauseFrames]++
		c[PauseQuanta] += uint64(p.Pause.Quanta[0])
	}
	if p.Headers&decode.HasFragment != 0 {
		c[Fragments]++
	}
	c[OtherPackets]++
}

// roce accounts a RoCE frame, of which r.brief holds what counts, and hands
// it to the per-flow stage.
func (r *reader) roce(rw *readerWindow, f *capture.Frame, t int64) {
	b := &r.brief
	c := &rw.counters
	op := b.Opcode
	c[RoCEPackets]++
	c[opcodeBase+int(op)]++
	c[PayloadBytes] += uint64(b.PayloadLen)
	ev := r.out.event(&b.Src, &b.Dst, b.SrcPort)
	// One field at a time, and the hash from the decoded addresses: a
	// composite literal is staged on the stack, and a copy of a 17-byte
	// address is two overlapping 16-byte moves, which words loaded from
	// it right after wait for (store forwarding fails; perf put a third
	// of roce's samples on the one and two thirds of Hash's on the
	// other). The decoder stores the addresses a word at a time.
	ev.key.Src = b.Src
	ev.key.Dst = b.Dst
	ev.key.DQP = b.DestQP
	ev.hash = hashKey(&b.Src, &b.Dst, b.DestQP, r.seed)
	ev.time = t
	ev.win = rw.index
	ev.wire = f.OrigLen
	ev.payload = b.PayloadLen
	ev.psn = b.PSN
	ev.dmaLen = b.DMALen
	ev.sqp = b.SrcQP
	ev.sport = b.SrcPort
	ev.opcode = op
	ev.slot = r.slot(rw.index, t)
	ev.aeth = b.Syndrome
	fl := opFlags[op]
	if b.CE {
		fl |= evCE
		c[ECNCE]++
	}
	if b.FECN {
		fl |= evFECN
		c[FECN]++
	}
	if b.BECN {
		fl |= evBECN
		c[BECN]++
	}
	if b.AckReq {
		fl |= evAckReq
	}
	if b.Headers&decode.HasDETH != 0 {
		fl |= evSQP
	}
	if b.Headers&decode.HasAETH != 0 {
		switch a := (decode.AETH{Syndrome: b.Syndrome}); a.Kind() {
		case decode.AckACK:
			if op.IsAcknowledge() {
				fl |= evAck
				c[Acks]++
			}
		case decode.AckNAK:
			fl |= evNAK
			c[NAKs]++
			c[nakCodeBase+int(a.NAKCode()&31)]++
		case decode.AckRNRNAK:
			fl |= evRNR
			c[RNRNAKs]++
		}
	}
	if fl&evFullMTU != 0 && b.PayloadLen < minPMTU {
		fl &^= evFullMTU // a short First/Middle packet says nothing about the MTU
	}
	ev.flags = fl
	if fl&evEndsMessage != 0 {
		c[Messages]++
	}
	if fl&evCNP != 0 {
		c[CNP]++
	}
	if fl&evReadReq != 0 {
		c[ReadRequests]++
	}
	if op.IsAtomic() {
		c[Atomics]++
	}
	if b.Headers&decode.HasCM != 0 {
		// Only Decode finds a CM MAD: r.pkt holds the frame.
		m := &r.pkt.CM
		c[CMPackets]++
		rw.cm = append(rw.cm, CMMessage{Src: b.Src, Dst: b.Dst, AttrID: m.AttrID,
			LocalCommID: m.LocalCommID, RemoteCommID: m.RemoteCommID, LocalQPN: m.LocalQPN})
	}
}

// heldFrames are frames a reader holds back, with copies of their bytes,
// which a batch of the source may not keep.
type heldFrames struct {
	frames []capture.Frame
	bufs   [][]byte // the copies, reused
}

// add holds a copy of f.
func (h *heldFrames) add(f *capture.Frame) {
	n := len(h.frames)
	if n == len(h.bufs) {
		h.bufs = append(h.bufs, nil)
	}
	h.bufs[n] = append(h.bufs[n][:0], f.Data...)
	c := *f
	c.Data = h.bufs[n]
	h.frames = append(h.frames, c)
}

func (h *heldFrames) reset() { h.frames = h.frames[:0] }

// slot returns the burst slot of time t in window w: a frame counted in a
// window it is not in (late, or held back by a time jump) is in its first
// or last slot.
func (r *reader) slot(w, t int64) uint32 {
	off := min(max(t-w*r.winLen, 0), r.winLen-1)
	hi, _ := bits.Mul64(uint64(off), r.burstInv)
	return uint32(hi)
}

// opFlags holds the event flags each BTH opcode implies.
var opFlags = func() (t [256]uint16) {
	for i := range t {
		op := decode.Opcode(i)
		if !op.Valid() {
			continue
		}
		set := func(cond bool, f uint16) {
			if cond {
				t[i] |= f
			}
		}
		set(op.IsRequest(), evRequest)
		set(op.IsReadRequest(), evReadReq)
		set(op.IsReadResponse(), evReadResp)
		set(op.EndsMessage(), evEndsMessage)
		set(op.IsCNP(), evCNP)
		low := i & 0x1f
		switch op.Service() {
		case decode.ServiceRC, decode.ServiceUC, decode.ServiceXRC:
			// SEND First/Middle (0, 1), WRITE First/Middle (6, 7), READ
			// response First/Middle (13, 14) carry exactly the path MTU.
			set(low == 0 || low == 1 || low == 6 || low == 7 || low == 13 || low == 14, evFullMTU)
			// READ response First (13) and Only (16) answer the request.
			set(low == 13 || low == 16, evReadRespHead)
			// SEND Only (4, 5, 23), WRITE Only (10, 11), READ response
			// Only (16) carry at most the path MTU.
			set(low == 4 || low == 5 || low == 23 || low == 10 || low == 11 || low == 16, evOnly)
		}
	}
	return t
}()

// window returns the open window for index w, opening it when it is not
// closed yet, or the first window not closed when w is (a late frame,
// counted as such).
func (r *reader) window(w int64) *readerWindow {
	if w <= r.closedThrough {
		// The window is closed already: a live capture's clock passed
		// it, or the frame is older than the allowed lateness. Count it
		// late in the first window not closed, which may be new.
		rw := r.window(r.closedThrough + 1)
		rw.counters[LatePackets]++
		return rw
	}
	if rw := r.open.get(w); rw != nil {
		return rw
	}
	if !r.open.free(w) {
		// The slot holds the window two before w, which the clock
		// would have closed: only a frame held back by a time jump
		// lands here. Count it late in the oldest open window.
		rw := r.open.oldest()
		rw.counters[LatePackets]++
		return rw
	}
	rw := &readerWindow{index: w}
	r.open.put(rw)
	r.high = max(r.high, w)
	return rw
}

// isBehind reports whether window w is older than every window still
// open: closed already, or older than the oldest open one.
func (r *reader) isBehind(w int64) bool {
	if w <= r.closedThrough {
		return true
	}
	o := r.open.oldest()
	return o != nil && w < o.index
}

// advance moves the reader's clock to t (a frame time, or the wall clock of
// a live capture) and closes the windows whose end plus the allowed lateness
// it passed. In a live capture the clock also makes its window the newest,
// so that windows without frames are reported.
func (r *reader) advance(t int64) {
	if !r.started {
		r.started, r.first = true, t
		r.closeAt = r.closeTime(r.index(t))
	}
	r.maxT = t
	if r.live {
		r.high = max(r.high, r.index(t))
	}
	if t < r.closeAt {
		return
	}
	// Window w is closed once t ≥ (w+1)·length + lateness.
	through := r.index(max(t, math.MinInt64+r.lateness)-r.lateness) - 1
	r.closeThrough(through)
	r.closeAt = r.closeTime(through + 1)
}

// closeThrough closes every open window with index ≤ through and tells the
// later stages. In a live capture the windows since the last one closed that
// saw no frame are reported too, empty but for the drops of their interval,
// so that an idle link still yields a report per window (up to
// maxIdleWindows at once; a longer silence is reported from its end).
func (r *reader) closeThrough(through int64) {
	r.cur = nil
	// Empty windows are reported from next through last: at the end of
	// the input (allWindows) through the newest window opened.
	last := through
	if through == allWindows {
		last = r.high
	}
	next := last + 1
	if r.live && r.closedThrough != noWindow {
		next = max(r.closedThrough+1, last-maxIdleWindows+1)
	}
	for {
		rw := r.open.oldest()
		if rw == nil || rw.index > through {
			rw = nil
		}
		end := last + 1
		if rw != nil {
			end = rw.index
		}
		for ; next < end; next++ {
			r.closeWindow(&readerWindow{index: next}, through == allWindows)
		}
		if rw == nil {
			break
		}
		r.open.remove(rw)
		r.closeWindow(rw, through == allWindows)
		next = max(next, rw.index+1)
	}
	r.closedThrough = max(r.closedThrough, through)
	r.out.mark(through)
}

// maxIdleWindows bounds the empty windows one close reports.
const maxIdleWindows = 1024

// closeWindow adds what the source lost since the last close to rw, and
// the part of it the input covered: from the input's first time, and, at
// the end of the input (last), up to its newest time. It hands rw on.
func (r *reader) closeWindow(rw *readerWindow, last bool) {
	rw.from, rw.to = rw.index*r.winLen, rw.index*r.winLen+r.winLen // index ≤ maxIdx: no overflow
	if r.started {
		rw.from = min(max(rw.from, r.first), rw.to)
		if last {
			rw.to = max(min(rw.to, r.maxT+1), rw.from)
		}
	}
	if r.src != nil {
		st := r.src.Stats()
		rw.counters[KernelDrops] += since(st.Dropped, r.last.Dropped)
		rw.counters[SourceErrors] += since(st.Errors, r.last.Errors)
		*r.last = st
	}
	r.out.window(rw)
}

// since returns how much a running total grew from last to now; a total
// that went down was reset (or wrapped), and all of now is new.
func since(now, last uint64) uint64 {
	if now < last {
		return now
	}
	return now - last
}
