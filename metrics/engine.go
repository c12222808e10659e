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
	e.pool = newWindowPool(&e.cfg, 2*c.Workers+2)
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

// allWindows is the mark that closes every window.
const allWindows = 1<<62 - 1

// batchSize is the number of events moved between stages at once.
const batchSize = 256

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
	var err error
	if e.cfg.Workers == 1 && len(sources) == 1 {
		err = e.runInline(inner, sources[0], emit, cancel)
	} else {
		err = e.runPool(inner, sources, emit, cancel)
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// closeGrace is how long Run waits after its context is done before it
// closes the sources of readers that have not stopped.
const closeGrace = time.Second

// runInline runs one reader, one shard and the collector on this goroutine.
func (e *Engine) runInline(ctx context.Context, src capture.Source, emit func(*Window) error, cancel context.CancelFunc) error {
	coll := newCollector(&e.cfg, e.pool, 1, 1, emit)
	sh := e.shard(0, coll.shardWindow)
	r := newReader(&e.cfg)
	// Events are handed to the shard a batch at a time, as in the pool,
	// so that it can fetch their table entries together.
	evs := make([]event, 0, batchSize)
	flush := func() {
		sh.handleBatch(evs)
		evs = evs[:0]
		if coll.err != nil {
			cancel() // the output failed: stop reading
		}
	}
	r.dispatch = func(ev *event) {
		if evs = append(evs, *ev); len(evs) == batchSize {
			flush()
		}
	}
	r.closed = coll.readerWindow
	r.mark = func(through int64) {
		flush()
		sh.closeThrough(through)
		coll.shardMark(0, through)
		coll.readerMark(0, through)
	}
	err := e.read(ctx, src, r, flush)
	flush()
	r.closeThrough(allWindows)
	return errors.Join(err, coll.err)
}

// shard returns the k-th shard for a run that hands its closed windows to
// closed, empty but with the memory of an earlier run's when there was one:
// a QP table of a million flows is half a gigabyte of pages.
func (e *Engine) shard(k int, closed func(*Window)) *shard {
	if k < len(e.shards) {
		sh := e.shards[k]
		sh.reset(e.pool.get, closed)
		return sh
	}
	sh := newShard(&e.cfg, max(1, e.cfg.TableSize/e.cfg.Workers), e.pool.get, closed)
	e.shards = append(e.shards, sh)
	return sh
}

// read feeds the frames of src to r until src ends. flush, when not nil,
// is called after each batch (live capture hands events on at once).
func (e *Engine) read(ctx context.Context, src capture.Source, r *reader, flush func()) error {
	b := capture.NewBatch(batchSize)
	r.stats = src.Stats
	if e.cfg.Live {
		r.startLive(time.Now().UnixNano())
	}
	for {
		if ctx.Err() != nil {
			return nil // Run reports ctx.Err()
		}
		err := src.Next(b)
		for i := range b.Frames {
			r.frame(&b.Frames[i])
		}
		e.frames.Add(uint64(len(b.Frames)))
		if e.cfg.Live {
			if now := time.Now().UnixNano(); now > r.maxT {
				r.advance(now)
			}
		}
		if flush != nil {
			flush()
		}
		switch {
		case err == nil:
		case err == io.EOF, errors.Is(err, os.ErrClosed):
			return nil
		default:
			return err
		}
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
// collector on this goroutine.
func (e *Engine) runPool(ctx context.Context, sources []capture.Source, emit func(*Window) error, cancel context.CancelFunc) error {
	n := e.cfg.Workers
	msgs := make(chan msg, 64)
	coll := newCollector(&e.cfg, e.pool, len(sources), n, emit)
	in := make([]chan *batch, n)
	free := make([]chan *batch, n)
	var workers sync.WaitGroup
	for k := range n {
		in[k] = make(chan *batch, 8)
		free[k] = make(chan *batch, 8*len(sources)+8)
		for range cap(free[k]) {
			free[k] <- &batch{evs: make([]event, 0, batchSize), close: noWindow}
		}
		sh := e.shard(k, func(w *Window) { msgs <- msg{shard: w} })
		workers.Add(1)
		go func() {
			defer workers.Done()
			// A window closes on this worker once every reader has
			// closed it: a reader's events for a window arrive before
			// its mark, so none arrives after the close.
			marks := make([]int64, len(sources))
			for i := range marks {
				marks[i] = noWindow
			}
			closed := int64(noWindow)
			for b := range in[k] {
				sh.handleBatch(b.evs)
				if b.close != noWindow {
					marks[b.from] = max(marks[b.from], b.close)
					if through := slices.Min(marks); through > closed {
						closed = through
						sh.closeThrough(through)
						msgs <- msg{from: k, through: through, isShard: true}
					}
				}
				b.evs, b.close = b.evs[:0], noWindow
				free[k] <- b
			}
			sh.closeThrough(allWindows)
			msgs <- msg{from: k, through: allWindows, isShard: true}
		}()
	}

	errs := make([]error, len(sources))
	var readers sync.WaitGroup
	for i, src := range sources {
		readers.Add(1)
		go func() {
			defer readers.Done()
			r := newReader(&e.cfg)
			out := make([]*batch, n)
			take := func(k int) {
				out[k] = <-free[k]
				out[k].from = i
			}
			for k := range out {
				take(k)
			}
			send := func(k int) {
				in[k] <- out[k]
				take(k)
			}
			r.dispatch = func(ev *event) {
				k := int(connHash(ev.key.Src, ev.key.Dst, ev.sport) % uint64(n))
				out[k].evs = append(out[k].evs, *ev)
				if len(out[k].evs) == batchSize {
					send(k)
				}
			}
			r.closed = func(rw *readerWindow) { msgs <- msg{reader: rw} }
			r.mark = func(through int64) {
				for k := range out {
					out[k].close = through
					send(k)
				}
				msgs <- msg{from: i, through: through}
			}
			var flush func()
			if e.cfg.Live {
				flush = func() {
					for k := range out {
						if len(out[k].evs) > 0 {
							send(k)
						}
					}
				}
			}
			if errs[i] = e.read(ctx, src, r, flush); errs[i] != nil {
				cancel()
			}
			r.closeThrough(allWindows)
			for k := range out {
				if len(out[k].evs) > 0 {
					send(k)
				}
			}
		}()
	}
	go func() {
		readers.Wait()
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
		if coll.err != nil {
			cancel()
		}
	}
	return errors.Join(append(errs, coll.err)...)
}
