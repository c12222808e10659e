package metrics

import (
	"slices"
	"sync"
	"sync/atomic"
)

// collector assembles each window of the host from the readers' counters and
// the shards' windows, and emits it once every reader and every shard has
// closed it. It runs on one goroutine (the reader's, in the single-worker
// engine). Its first error stops the run; the engine asks for it with
// failure.
type collector struct {
	cfg   *Config
	rmark closeMarks // the readers'
	smark closeMarks // the shards'
	parts map[int64]*part
	free  []*part // emitted parts, for reuse
	pool  *windowPool
	emit  func(*Window) error
	stop  func() // stops the run: called on the first error
	err   error  // first error of emit or a merge; later windows are dropped after it
	lines lines  // scratch of countFlows
	// The scratch of countFlows's second goroutine, nil with one worker:
	// the single-worker engine runs on one goroutine.
	lines2 *lines
}

// part is a window being assembled: the first shard window of its index,
// into which the other shards' merge (it becomes the host's window, so that
// with one worker no flow record is copied), and what the readers counted.
type part struct {
	w        *Window // nil until a shard closes the window
	mixed    bool    // a late part merged into w: its flow list needs normalizing
	from, to int64   // the covered part, from the readers
	counters Counters
	cm       []CMMessage
	pauses   []PauseRecord
}

// newCollector returns a collector of the windows of readers and shards,
// which calls stop when emit or a merge fails.
func newCollector(cfg *Config, pool *windowPool, readers, shards int, emit func(*Window) error, stop func()) *collector {
	c := &collector{
		cfg:   cfg,
		pool:  pool,
		rmark: newCloseMarks(readers),
		smark: newCloseMarks(shards),
		parts: make(map[int64]*part),
		emit:  emit,
		stop:  stop,
	}
	if shards > 1 {
		c.lines2 = new(lines)
	}
	return c
}

// part returns the part being assembled for index i.
func (c *collector) part(i int64) *part {
	p, ok := c.parts[i]
	if !ok {
		if n := len(c.free); n > 0 {
			p, c.free = c.free[n-1], c.free[:n-1]
		} else {
			p = new(part)
		}
		c.parts[i] = p
	}
	return p
}

func (c *collector) fail(err error) {
	if c.err == nil {
		c.err = err
		c.stop()
	}
}

// failure returns the first error of emit or of a merge, or nil.
func (c *collector) failure() error { return c.err }

// shardWindow takes a shard's closed window.
func (c *collector) shardWindow(w *Window) {
	p := c.part(w.Index())
	if p.w == nil {
		p.w = w
		return
	}
	// Shards hold disjoint connections; a shard's late part may hold
	// the flows of its first part again.
	merge := p.w.mergeDisjoint
	if w.late || p.w.late {
		merge, p.mixed = p.w.Merge, true
	}
	if err := merge(w); err != nil {
		c.fail(err)
	}
	c.pool.put(w)
}

// readerWindow adds a reader's counters for a closed window.
func (c *collector) readerWindow(rw *readerWindow) {
	p := c.part(rw.index)
	p.from, p.to = union(p.from, p.to, rw.from, rw.to)
	p.counters.Add(&rw.counters)
	p.cm = append(p.cm, rw.cm...)
	p.pauses = append(p.pauses, rw.pauses...)
}

// readerMark and shardMark record that reader or shard i closed every
// window ≤ through, and emit the windows everyone has closed.
func (c *collector) readerMark(i int, through int64) { c.rmark.mark(i, through); c.ready() }
func (c *collector) shardMark(i int, through int64)  { c.smark.mark(i, through); c.ready() }

// ready emits, in order, the pending windows that every reader and shard
// has closed.
func (c *collector) ready() {
	through := min(c.rmark.through(), c.smark.through())
	var done []int64
	for i := range c.parts {
		if i <= through {
			done = append(done, i)
		}
	}
	slices.Sort(done)
	for _, i := range done {
		p := c.parts[i]
		delete(c.parts, i)
		w := p.w
		if w == nil { // no RoCE frame: no shard had the window open
			w = c.pool.get(i)
		}
		w.Hosts = append(w.Hosts[:0], c.cfg.Host)
		w.cover(p.from, p.to) // the shards' windows cover nothing of their own
		w.Counters.Add(&p.counters)
		w.CM = append(w.CM, p.cm...)
		w.Pauses = append(w.Pauses, p.pauses...)
		// A shard normalizes its list when it closes the window, and
		// the lists of disjoint shards merge in canonical order.
		if p.mixed {
			w.Normalize()
		} else {
			w.normalizeRest()
		}
		*p = part{cm: p.cm[:0], pauses: p.pauses[:0]}
		c.free = append(c.free, p)
		c.pool.sketches(w)
		w.countFlows(&c.lines, c.lines2)
		if c.err == nil {
			if err := c.emit(w); err != nil {
				c.fail(err)
			}
		}
		c.pool.put(w)
	}
}

// windowPool recycles windows, whose sketches and flow lists are large,
// between the collector and the shards. It hands out the window put back
// last, so that the few windows in use keep their memory warm and the rest
// stay small; the flow sketches it keeps apart, and a window takes them
// only when it counts into them (sketches). It is safe for concurrent use.
type windowPool struct {
	cfg   *Config
	mu    sync.Mutex
	free  []*Window      // without flow sketches
	spare []flowSketches // reset: of the windows put back
	max   int
	made  atomic.Int64 // windows made because none was free
}

func newWindowPool(cfg *Config, size int) *windowPool {
	return &windowPool{cfg: cfg, max: size}
}

// get returns an empty window for index i. The configuration was checked
// when the engine was made, so making a window cannot fail.
func (p *windowPool) get(i int64) *Window {
	p.mu.Lock()
	var w *Window
	if n := len(p.free); n > 0 {
		w, p.free = p.free[n-1], p.free[:n-1]
	}
	p.mu.Unlock()
	if w == nil {
		w = mustValid(newBareWindow(p.cfg))
		p.made.Add(1)
	}
	w.reset(i*int64(p.cfg.Window), int64(p.cfg.Window))
	return w
}

// sketches gives w, a window of the pool, flow sketches when it has none:
// the window counts into them. A window takes them only then, so that of
// the windows in flight only those that close hold them: the sketches are
// megabytes of memory, which costs a page fault per 4 KiB on its first
// touch. It inlines to a check where a window has them already, as for
// every frame of a flow the table cannot hold but the first.
func (p *windowPool) sketches(w *Window) {
	if w.FlowBytes == nil {
		p.giveSketches(w)
	}
}

// giveSketches gives w a spare set of flow sketches, or a new one.
func (p *windowPool) giveSketches(w *Window) {
	p.mu.Lock()
	var fs flowSketches
	if n := len(p.spare); n > 0 {
		fs, p.spare = p.spare[n-1], p.spare[:n-1]
	}
	p.mu.Unlock()
	if fs.bytes == nil {
		fs = mustValid(newFlowSketches(p.cfg.sketchConfig()))
	}
	w.setFlowSketches(fs)
}

// lendFlowMem gives w the flow list memory of the free window in which the
// most records have been written, when that is more than in w's
// (Window.swapFlowMem).
func (p *windowPool) lendFlowMem(w *Window) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *Window
	for _, f := range p.free {
		if f.flowMem != nil && (best == nil || f.flowsWritten() > best.flowsWritten()) {
			best = f
		}
	}
	if best != nil {
		w.swapFlowMem(best)
	}
}

// releaseFlowMem returns the flow list memory of the free windows to the
// kernel; a window taken after maps its list anew.
func (p *windowPool) releaseFlowMem() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.free {
		w.releaseFlows()
	}
}

// put gives w back; it is dropped when the pool is full. Its flow sketches
// are reset and kept apart, for the next window that counts into them.
func (p *windowPool) put(w *Window) {
	fs := w.takeFlowSketches()
	if fs.bytes != nil {
		fs.reset()
	}
	p.mu.Lock()
	if fs.bytes != nil && len(p.spare) < p.max {
		p.spare = append(p.spare, fs)
	}
	if len(p.free) < p.max {
		p.free = append(p.free, w)
	}
	p.mu.Unlock()
}
