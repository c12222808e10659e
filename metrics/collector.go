package metrics

import (
	"slices"
)

// collector assembles each window of the host from the readers' counters and
// the shards' windows, and emits it once every reader and every shard has
// closed it. It runs on one goroutine (the reader's, in the single-worker
// engine).
type collector struct {
	cfg     *Config
	rmark   []int64 // per reader: windows ≤ rmark are closed
	smark   []int64 // per shard: windows ≤ smark are closed
	pending map[int64]*Window
	pool    *windowPool
	emit    func(*Window) error
	err     error // first error of emit; later windows are dropped after it
}

func newCollector(cfg *Config, pool *windowPool, readers, shards int, emit func(*Window) error) *collector {
	c := &collector{
		cfg:     cfg,
		pool:    pool,
		rmark:   make([]int64, readers),
		smark:   make([]int64, shards),
		pending: make(map[int64]*Window),
		emit:    emit,
	}
	for i := range c.rmark {
		c.rmark[i] = noWindow
	}
	for i := range c.smark {
		c.smark[i] = noWindow
	}
	return c
}

// acc returns the host window being assembled for index i.
func (c *collector) acc(i int64) *Window {
	w, ok := c.pending[i]
	if !ok {
		var err error
		if w, err = c.pool.get(i); err != nil {
			c.fail(err)
			return nil
		}
		w.Hosts = append(w.Hosts, c.cfg.Host)
		c.pending[i] = w
	}
	return w
}

func (c *collector) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// shardWindow merges a shard's closed window and keeps it for reuse.
func (c *collector) shardWindow(w *Window) {
	if acc := c.acc(w.index()); acc != nil {
		if err := acc.Merge(w); err != nil {
			c.fail(err)
		}
	}
	c.pool.put(w)
}

// readerWindow adds a reader's counters for a closed window.
func (c *collector) readerWindow(rw *readerWindow) {
	if acc := c.acc(rw.index); acc != nil {
		acc.Counters.Add(&rw.counters)
		acc.CM = append(acc.CM, rw.cm...)
	}
}

// readerMark and shardMark record that reader or shard i closed every
// window ≤ through, and emit the windows everyone has closed.
func (c *collector) readerMark(i int, through int64) {
	c.rmark[i] = max(c.rmark[i], through)
	c.ready()
}
func (c *collector) shardMark(i int, through int64) { c.smark[i] = max(c.smark[i], through); c.ready() }

// ready emits, in order, the pending windows that every reader and shard
// has closed.
func (c *collector) ready() {
	through := min(slices.Min(c.rmark), slices.Min(c.smark))
	var done []int64
	for i := range c.pending {
		if i <= through {
			done = append(done, i)
		}
	}
	slices.Sort(done)
	for _, i := range done {
		w := c.pending[i]
		delete(c.pending, i)
		w.Normalize()
		if c.err == nil {
			if err := c.emit(w); err != nil {
				c.fail(err)
			}
		}
		c.pool.put(w)
	}
}

// windowPool recycles windows, whose sketches are large, between the
// collector and the shards.
type windowPool struct {
	cfg  *Config
	free chan *Window
}

func newWindowPool(cfg *Config, size int) *windowPool {
	return &windowPool{cfg: cfg, free: make(chan *Window, size)}
}

// get returns an empty window for index i.
func (p *windowPool) get(i int64) (*Window, error) {
	var w *Window
	select {
	case w = <-p.free:
	default:
		var err error
		if w, err = newWindow(p.cfg); err != nil {
			return nil, err
		}
	}
	w.reset(i*int64(p.cfg.Window), int64(p.cfg.Window))
	return w, nil
}

// put gives w back; it is dropped when the pool is full.
func (p *windowPool) put(w *Window) {
	select {
	case p.free <- w:
	default:
	}
}
