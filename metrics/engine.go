package metrics

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/mapped"
)

// Engine turns frames from capture sources into per-window states.
//
// Each source is read by its own goroutine, which decodes every frame once,
// counts the window-level figures and sends RoCE frames, in batches, to the
// worker that owns their connection (a hash of both addresses and the UDP
// source port, so both directions of a connection meet on one worker).
// Each worker owns a slice of the QP table and its windows, without locks.
// A collector merges the workers' windows with the readers' counters and
// emits each window once all of them closed it. With one worker and one
// source everything runs on the caller's goroutine.
type Engine struct {
	cfg    Config
	pool   *windowPool
	shards []*shard // the QP tables of the last run, reused by the next
	frames atomic.Uint64
}

// New returns an engine configured by cfg (nil means defaults).
func New(cfg *Config) (*Engine, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	if c.Host == "" {
		if c.Host, err = os.Hostname(); err != nil || c.Host == "" {
			c.Host = "localhost"
		}
	}
	e := &Engine{cfg: c}
	e.pool = newWindowPool(&e.cfg, windowsInFlight(c.Workers))
	w, err := newWindow(&e.cfg) // validates the sketch configuration
	if err != nil {
		return nil, err
	}
	e.pool.put(w)
	return e, nil
}

// Config returns the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Frames returns the frames read so far; it is safe to call during Run.
func (e *Engine) Frames() uint64 { return e.frames.Load() }

// batchSize is the number of frames read and events moved between stages
// at once. With two workers on two cores, 1024 rather than 256 saves a
// tenth of the CPU (fewer hand-overs and wake-ups); a shard prefetches for
// and handles a batch in chunks of handleChunk events.
const batchSize = 1024

// inQueue is how many batches wait for a worker before the reader that
// fills them waits. A worker closing a window is busy for milliseconds
// (tens at 100 k flows), while its batches keep coming: a short queue
// fills, the reader waits on it, and the other workers then wait for the
// reader. 32 batches (3 MiB) of events cover most of such a close. Each
// worker starts with batchesMade batches; readers make the others only
// when they would wait for one, so that a run whose workers keep up
// touches the memory of batchesMade batches a worker and no more.
const inQueue = 32

// batchesMade is how many batches each worker has at the start of a run.
const batchesMade = 16

// marksQueue is how many of a worker's waiting batches, per reader, may
// carry a close mark. With tiny windows each batch could close one, and a
// worker that many windows behind the others holds their closed windows
// at the collector, each with megabytes of sketches: windowsInFlight
// counts on this bound, not on inQueue.
const marksQueue = 8

// msgQueue is how many messages (closed shard windows, reader windows and
// marks) wait for the collector before the stages that send them wait: the
// backpressure that keeps readers and shards from running ahead of a
// collector busy with tiny windows.
const msgQueue = 16

// windowsInFlight bounds the windows that exist at once in a run with
// workers shards: two open per shard, the closed ones queued for the
// collector (the close marks waiting for a worker, marksQueue, bound how
// far one shard runs ahead of another), and the one it emits and the one
// it merges into. The window pool keeps that many, so that a run makes no
// window after its first ones: a window's sketches are megabytes of fresh
// memory.
func windowsInFlight(workers int) int { return 2*workers + msgQueue + 2 }

// batch carries events from a reader to a worker, then an optional close
// mark that applies after them.
type batch struct {
	evs   []event
	from  int   // the reader that filled it
	close int64 // the reader closed windows through this index after evs; noWindow for none
}

// Run reads every source until it ends (io.EOF), fails, or ctx is done,
// and calls emit with each window, in window order, once it is closed. The
// window is only lent to emit: it is reused after emit returns. At the end
// every open window is closed and emitted, also after an error. Run
// returns the first error of a source, of emit, or ctx.Err().
func (e *Engine) Run(ctx context.Context, sources []capture.Source, emit func(*Window) error) error {
	return e.run(ctx, sources, emit, false)
}

// RunOnce is Run for an engine that will not run again, as in a process
// that exits after it. With several workers each returns the memory only
// it uses to the kernel (its QP table, its spare flow list) once its last
// window went to the collector, and the last one the flow lists of the
// windows no longer in use, while the collector works on the last window:
// two workers at 1 M connections, 2 M frames, left 77 MiB of 227 to the
// exit, whose unmapping on one core took 7 ms instead of 20; once the
// collector is done, the lists of the windows it gave back after go too.
// An engine run again maps its memory anew.
func (e *Engine) RunOnce(ctx context.Context, sources []capture.Source, emit func(*Window) error) error {
	return e.run(ctx, sources, emit, true)
}

// run is Run, and RunOnce when once is set.
func (e *Engine) run(ctx context.Context, sources []capture.Source, emit func(*Window) error, once bool) error {
	if len(sources) == 0 {
		return errors.New("metrics: no source")
	}
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		// Each reader stops at its next batch once inner is done, and
		// live sources return at least every 100 ms. Only a reader still
		// blocked after closeGrace (a pipe that stays silent) gets its
		// source closed under it: a Close may unmap the memory the
		// frames of a batch being decoded live in.
		select {
		case <-inner.Done():
		case <-done:
			return
		}
		select {
		case <-time.After(closeGrace):
			for _, s := range sources {
				s.Close() // unblocks Next; the reader then ends normally
			}
		case <-done:
		}
	}()
	feeds := make([]*feed, len(sources))
	for i, src := range sources {
		feeds[i] = &feed{src: src, b: capture.NewBatch(batchSize)}
	}
	for segment := uint32(0); ; segment++ {
		// A segment runs until the input ends, or until a reader sees
		// the clock stepped back: then every window so far is emitted
		// and a new segment starts at the new time. Its windows carry
		// its number.
		seg, stepped := context.WithCancel(inner)
		emitSegment := func(w *Window) error {
			w.Segment = segment
			return emit(w)
		}
		var err error
		if e.cfg.Workers == 1 && len(sources) == 1 {
			err = e.runInline(seg, feeds[0], emitSegment, cancel)
		} else {
			err = e.runPool(seg, feeds, emitSegment, cancel, stepped, once)
		}
		stepped()
		if step := isClockStep(err); !step || inner.Err() != nil {
			if err == nil || step {
				err = ctx.Err()
			}
			return err
		}
	}
}

// feed is a source and the batch its reader works through, which outlives
// a segment: after a clock step the frames left in it go to the next one.
type feed struct {
	src  capture.Source
	b    *capture.Batch
	next int        // frames of b before next are accounted
	err  error      // what the Next that filled b returned
	held heldFrames // the frames that confirmed a step back, for the next segment
	// src's totals when its reader last closed a window: a new segment's
	// reader counts their growth from there, not again from zero.
	last capture.Stats
}

// clockStep is what read returns when its reader confirmed a step back of
// the clock.
type clockStep struct{}

func (*clockStep) Error() string { return "metrics: clock stepped back" }

// isClockStep reports whether err says a reader saw the clock step back:
// another segment follows unless the run is stopping.
func isClockStep(err error) bool {
	var step *clockStep
	return errors.As(err, &step)
}

// closeGrace is how long Run waits after its context is done before it
// closes the sources of readers that have not stopped.
const closeGrace = time.Second

// runInline runs one reader, one shard and the collector on this goroutine.
func (e *Engine) runInline(ctx context.Context, f *feed, emit func(*Window) error, cancel context.CancelFunc) error {
	coll := newCollector(&e.cfg, e.pool, 1, 1, emit, cancel)
	out := &inlineOutput{sh: e.shard(0), coll: coll, evs: make([]event, 0, batchSize)}
	r := newReader(&e.cfg, out)
	err := e.read(ctx, f, r)
	r.closeThrough(allWindows)
	failed := coll.failure()
	if step := (*clockStep)(nil); failed != nil && errors.As(err, &step) {
		err = nil // the output failed: no restart after a clock step
	}
	return errors.Join(err, failed)
}

// output is where a reader's work goes: the events of its RoCE frames, in
// batches per shard, its closed windows and its close marks. runInline and
// runPool each have one implementation.
type output interface {
	// event returns the event of a RoCE frame of the connection of src,
	// dst and sport, added to the batch that carries it on, for the
	// caller to fill before anything else is handed on: built in place,
	// an event is not copied.
	event(src, dst *decode.Addr, sport uint16) *event
	// flush hands on the events of partly filled batches.
	flush()
	// window takes a reader's closed window.
	window(rw *readerWindow)
	// mark says that every window ≤ through is closed: no event of them
	// follows.
	mark(through int64)
}

// inlineOutput hands the reader's work straight to the only shard and the
// collector, a batch of events at a time, so that the shard can fetch their
// table entries together.
type inlineOutput struct {
	sh   *shard
	coll *collector
	evs  []event
}

func (o *inlineOutput) event(_, _ *decode.Addr, _ uint16) *event {
	if len(o.evs) == cap(o.evs) {
		o.flush()
	}
	o.evs = o.evs[:len(o.evs)+1]
	return &o.evs[len(o.evs)-1]
}

func (o *inlineOutput) flush() {
	o.sh.handleBatch(o.evs, false)
	o.evs = o.evs[:0]
	o.shardWindows()
}

// shardWindows hands the shard's closed windows to the collector.
func (o *inlineOutput) shardWindows() {
	for _, w := range o.sh.drain() {
		o.coll.shardWindow(w)
	}
}

func (o *inlineOutput) window(rw *readerWindow) { o.coll.readerWindow(rw) }

func (o *inlineOutput) mark(through int64) {
	o.flush()
	if old := o.sh.open.oldest(); through == allWindows && old != nil && old.Index() < o.sh.high {
		// At the end of the input the older of the open windows closes
		// and is emitted first, so that the newer, closing next, can put
		// its records in the older's flow list memory (shard.flush).
		o.close(old.Index())
	}
	o.close(through)
}

// close closes the windows ≤ through of the shard and the collector.
func (o *inlineOutput) close(through int64) {
	o.sh.closeThrough(through)
	o.shardWindows()
	o.coll.shardMark(0, through)
	o.coll.readerMark(0, through)
}

// shard returns the k-th shard for a run, empty but with the memory of an
// earlier run's when there was one: a QP table of a million flows is half a
// gigabyte of pages.
func (e *Engine) shard(k int) *shard {
	if k < len(e.shards) {
		sh := e.shards[k]
		sh.reset()
		return sh
	}
	sh := newShard(&e.cfg, max(1, e.cfg.TableSize/e.cfg.Workers), e.pool)
	e.shards = append(e.shards, sh)
	return sh
}

// read feeds the frames of f to r until its source ends, or r sees the
// clock step back (a *clockStep; the frames that confirmed it and those
// left in f's batch are for the next segment). A live capture hands its
// events on after each batch of the source, and moves the clock.
func (e *Engine) read(ctx context.Context, f *feed, r *reader) error {
	r.src, r.last = f.src, &f.last
	if e.cfg.Live {
		r.startLive(time.Now().UnixNano())
	}
	if len(f.held.frames) > 0 {
		// The frames that confirmed a step back of the clock begin the
		// segment; the first of them is its time jump.
		r.stepIn = true
		for i := range f.held.frames {
			r.frame(&f.held.frames[i])
		}
		f.held.reset()
	}
	err := e.readFeed(ctx, f, r)
	if r.stepped {
		f.held, r.behind = r.behind, f.held
		return &clockStep{}
	}
	if len(r.behind.frames) > 0 {
		r.releaseBehind() // the input ended with late frames
	}
	return err
}

// readFeed feeds the frames of f to r until its source ends or fails, ctx
// is done, or r sees the clock step back.
func (e *Engine) readFeed(ctx context.Context, f *feed, r *reader) error {
	b := f.b
	for {
		for ; f.next < len(b.Frames); f.next++ {
			r.frame(&b.Frames[f.next])
			if r.stepped {
				f.next++
				return nil
			}
		}
		if e.cfg.Live {
			if now := time.Now().UnixNano(); now > r.maxT {
				r.advance(now)
			}
			r.out.flush()
		}
		// The error of the Next that delivered the batch, once its frames
		// are accounted.
		switch err := f.err; {
		case err == nil:
		case err == io.EOF, errors.Is(err, os.ErrClosed):
			return nil
		default:
			f.err = nil
			return err
		}
		if ctx.Err() != nil {
			return nil // Run reports ctx.Err()
		}
		f.err = f.src.Next(b)
		f.next = 0
		e.frames.Add(uint64(len(b.Frames)))
	}
}

// msg is what the readers and workers tell the collector.
type msg struct {
	shard   *Window       // a shard's closed window
	reader  *readerWindow // a reader's closed window
	from    int           // reader or shard number, for marks
	through int64         // a mark: windows ≤ through are closed
	isShard bool          // the mark is a shard's
}

// runPool runs a reader goroutine per source, a worker per shard and the
// collector on this goroutine. once says the run is RunOnce's: a segment
// it ends without a clock step has its workers return their memory.
func (e *Engine) runPool(ctx context.Context, feeds []*feed, emit func(*Window) error, cancel, stepped context.CancelFunc, once bool) error {
	n := e.cfg.Workers
	msgs := make(chan msg, msgQueue)
	coll := newCollector(&e.cfg, e.pool, len(feeds), n, emit, cancel)
	in := make([]chan *batch, n)
	free := make([]chan *batch, n)
	room := make([]chan struct{}, n)
	marked := make([]chan struct{}, n)
	mem := make([]*batchMem, n)
	// Whether this segment is the run's last, and RunOnce's: set before in
	// is closed, read by each worker after its last batch.
	last := false
	var running atomic.Int32 // workers not done, of a last segment
	running.Store(int32(n))
	var workers sync.WaitGroup
	for k := range n {
		in[k] = make(chan *batch, inQueue)
		// The most a worker's batches can be: those waiting, the one it
		// handles and one each reader fills.
		free[k] = make(chan *batch, inQueue+1+len(feeds))
		room[k] = make(chan struct{}, cap(free[k])-batchesMade)
		marked[k] = make(chan struct{}, marksQueue*len(feeds))
		mem[k] = newBatchMem(cap(free[k]))
		for range batchesMade {
			free[k] <- mem[k].batch()
		}
		for range cap(room[k]) {
			room[k] <- struct{}{}
		}
		sh := e.shard(k)
		workers.Add(1)
		go func() {
			defer workers.Done()
			sh.run(k, len(feeds), in[k], free[k], marked[k], msgs)
			mem[k].free() // the readers are done with its batches
			if last {
				sh.release()
				if running.Add(-1) == 0 {
					e.pool.releaseFlowMem()
				}
			}
		}()
	}

	errs := make([]error, len(feeds))
	var readers sync.WaitGroup
	for i := range feeds {
		readers.Add(1)
		go func() {
			defer readers.Done()
			out := &poolOutput{from: i, in: in, free: free, room: room, mem: mem, marked: marked, msgs: msgs, out: make([]*batch, n)}
			for k := range out.out {
				out.take(k)
			}
			r := newReader(&e.cfg, out)
			switch errs[i] = e.read(ctx, feeds[i], r); {
			case isClockStep(errs[i]):
				stepped() // the other readers stop at their next batch
			case errs[i] != nil:
				cancel()
			}
			r.closeThrough(allWindows)
			out.flush()
		}()
	}
	go func() {
		readers.Wait()
		last = once && !slices.ContainsFunc(errs, isClockStep)
		for k := range in {
			close(in[k])
		}
		workers.Wait()
		close(msgs)
	}()
	for m := range msgs {
		switch {
		case m.shard != nil:
			coll.shardWindow(m.shard)
		case m.reader != nil:
			coll.readerWindow(m.reader)
		case m.isShard:
			coll.shardMark(m.from, m.through)
		default:
			coll.readerMark(m.from, m.through)
		}
	}
	if last {
		// The windows the collector still had when the last worker
		// gave back the lists of the others: the last one, the shard
		// windows merged into it, and the one before when the
		// collector lagged behind the workers.
		e.pool.releaseFlowMem()
	}
	// A step back of one reader's clock restarts the run unless something
	// failed for real.
	var step error
	for i, err := range errs {
		if isClockStep(err) {
			step, errs[i] = err, nil
		}
	}
	if err := errors.Join(append(errs, coll.failure())...); err != nil {
		return err
	}
	return step
}

// run is the worker k of a run with readers readers: it handles the
// batches of in until in is closed, gives each back on free (and takes a
// token from marked for each that carried a close mark), and tells the
// collector on msgs its closed windows and its close marks. A window closes
// here once every reader marked it closed: a reader's events for a window
// arrive before its mark, so none arrives after the close.
func (s *shard) run(k, readers int, in <-chan *batch, free chan<- *batch, marked <-chan struct{}, msgs chan<- msg) {
	marks := newCloseMarks(readers)
	closed := noWindow
	for b := range in {
		s.handleBatch(b.evs, true)
		s.send(msgs)
		if b.close != noWindow {
			marks.mark(b.from, b.close)
			if through := marks.through(); through > closed {
				closed = through
				s.closeThrough(through)
				s.send(msgs)
				msgs <- msg{from: k, through: through, isShard: true}
			}
			<-marked
		}
		b.evs, b.close = b.evs[:0], noWindow
		free <- b
	}
	s.closeThrough(allWindows)
	s.send(msgs)
	msgs <- msg{from: k, through: allWindows, isShard: true}
}

// send hands the windows s closed to the collector.
func (s *shard) send(msgs chan<- msg) {
	for _, w := range s.drain() {
		msgs <- msg{shard: w}
	}
}

// poolOutput sends a reader's events, in batches, to the worker that owns
// their connection, and its windows and marks to the collector.
type poolOutput struct {
	from int             // the reader's number
	in   []chan *batch   // to each worker
	free []chan *batch   // empty batches of each worker
	room []chan struct{} // a token per batch of each worker not made yet
	mem  []*batchMem     // where each worker's batches are made
	// A token per batch carrying a close mark that a worker has yet to
	// handle, marksQueue per reader at most.
	marked []chan struct{}
	msgs   chan<- msg // to the collector
	out    []*batch   // the batch being filled for each worker
	// The event the reader fills, in its own cache, and the worker whose
	// batch it goes to once filled (commit), when filled.
	ev     event
	k      int
	filled bool
}

// take gets an empty batch for worker k: one given back, else a new one
// while the worker has room for more, else the next one given back.
func (o *poolOutput) take(k int) {
	select {
	case o.out[k] = <-o.free[k]:
	default:
		select {
		case <-o.room[k]:
			o.out[k] = o.mem[k].batch()
		case o.out[k] = <-o.free[k]:
		}
	}
	o.out[k].from = o.from
}

// batchMem is the memory of a worker's batches: one mapping with room for
// as many as the worker can have, carved a batch at a time as they are
// made, so that their events fault in huge pages instead of 24 pages of
// 4 KiB a batch (two workers at 100 k connections make all 68 of theirs in
// a cold run: 1 632 page faults on the Go heap). Untouched room costs no
// memory (package mapped); the mapping is freed when the run ends.
type batchMem struct {
	evs  []event
	mem  region
	made atomic.Int32
}

// newBatchMem returns the memory of n batches.
func newBatchMem(n int) *batchMem {
	m := new(batchMem)
	m.evs, m.mem = makeArray[event](n * batchSize)
	return m
}

// batch returns a new empty batch. Readers make a worker's batches
// concurrently; no more than the memory's n.
func (m *batchMem) batch() *batch {
	i := int(m.made.Add(1)-1) * batchSize
	mapped.Commit(m.evs[i : i+batchSize]) // the reader fills it in order
	return &batch{evs: m.evs[i : i : i+batchSize], close: noWindow}
}

// free returns the memory to the kernel, once no batch is in use.
func (m *batchMem) free() { m.mem.free() }

// send hands worker k its batch and takes a new one.
func (o *poolOutput) send(k int) {
	storeFence()
	o.in[k] <- o.out[k]
	o.take(k)
}

// event returns the event the reader fills for a frame, which goes to a
// slot of its worker's batch at the next commit (the next event, flush or
// mark). The reader fills a copy in its own cache, and the copy streams
// into the slot: a batch's lines were read last on the worker's core, and
// a store into one waits for the line to come back, whose round trip
// between the vCPUs of the KVM VM is 60-80 ns when they share a cache and
// 310-380 ns when they do not.
// With the vCPUs apart the reader's stores filled the store buffer (perf
// put a fifth of reader.count's samples on the event's first store), also
// when it asked for the lines 8 or 24 events ahead (PREFETCHW); streaming
// stores write them without fetching them (two workers at 100 k
// connections, 12 M frames: 8 % less CPU with the vCPUs apart, within 2 %
// with them together). The worker is picked here and its batch only at the
// commit, a frame later, by when the connection hash is known: taking the
// batch here waited on the hash (perf put half of event's samples on the
// load of the batch's length).
func (o *poolOutput) event(src, dst *decode.Addr, sport uint16) *event {
	o.commit()
	o.k = 0
	if n := uint64(len(o.out)); n > 1 {
		o.k = shardOf(connHash(src, dst, sport), n)
	}
	o.filled = true
	return &o.ev
}

// commit moves the event filled last into the next slot of its worker's
// batch, sending the batch first when it is full.
func (o *poolOutput) commit() {
	if !o.filled {
		return
	}
	o.filled = false
	b := o.out[o.k]
	if len(b.evs) == cap(b.evs) {
		o.send(o.k)
		b = o.out[o.k]
	}
	n := len(b.evs)
	b.evs = b.evs[:n+1]
	streamEvent(&b.evs[n], &o.ev)
}

// shardOf returns h mod n: the shard, of n, of the connection whose
// connHash is h. It divides only when n is not a power of two: a division
// costs tens of cycles on the reader's path.
func shardOf(h, n uint64) int {
	if n&(n-1) == 0 {
		return int(h & (n - 1))
	}
	return int(h % n)
}

func (o *poolOutput) flush() {
	o.commit()
	for k, b := range o.out {
		if len(b.evs) > 0 {
			o.send(k)
		}
	}
}

func (o *poolOutput) window(rw *readerWindow) { o.msgs <- msg{reader: rw} }

func (o *poolOutput) mark(through int64) {
	o.commit() // into a batch without the mark, which may be full
	for k := range o.out {
		o.out[k].close = through
		o.marked[k] <- struct{}{}
		o.send(k)
	}
	o.msgs <- msg{from: o.from, through: through}
}
