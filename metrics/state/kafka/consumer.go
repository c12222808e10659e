package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/state"
)

// maxSpare bounds the part windows a Consumer keeps to decode into.
const maxSpare = 4

// DefaultGroup is the consumer group of `rocescope merge`.
const DefaultGroup = "rocescope-merge"

// ErrRecord is wrapped by errors about a record that is not a window state
// as a Producer writes it.
var ErrRecord = errors.New("not a rocescope state record")

// ConsumerConfig tunes a Consumer. The zero value (or nil) means the
// defaults.
type ConsumerConfig struct {
	// Group is the consumer group (default DefaultGroup).
	Group string
	// Read bounds the states decoded, as it bounds a state.Reader's
	// (Growing does not apply to records).
	Read state.ReadOptions
	// Follow keeps reading once every record the topic holds was read;
	// without it, Next returns state.End then.
	Follow bool
	// Poll bounds how long Next waits for records (default 500ms).
	Poll time.Duration
}

// ConsumerStats counts what a Consumer skipped.
type ConsumerStats struct {
	// Reported counts records of windows reported already: by another
	// consumer before a rebalance, by an earlier run, or by this one
	// before the record arrived (a late state).
	Reported uint64
	// Bad counts records that are not states, or that do not decode.
	Bad uint64
}

// Consumer reads window states from a topic as a member of a consumer
// group: it is the [state.Input] of a merge. See the package doc.
type Consumer struct {
	target *Target
	cfg    ConsumerConfig
	cl     *kgo.Client
	adm    *kadm.Client

	mu      sync.Mutex // guards what the rebalance callbacks touch
	joined  bool       // the first assignment arrived
	changed bool       // the assignment changed since the last poll
	owned   map[int32]*partition

	stats     ConsumerStats
	ends      map[int32]int64 // end offsets at the last poll
	pollErr   error           // trouble of the last poll
	commitErr error           // of the last commit, with Follow
	polled    bool            // Next polled since it last returned

	frames *frameReader      // the record being decoded, framed as in a state file
	states *state.Reader     // decodes from frames, reusing its buffer
	spare  []*metrics.Window // part windows merged into others, to decode into again
}

var _ state.Input = (*Consumer)(nil)

// frameReader hands a StateReader one record value at a time, behind the
// 4-byte length a state file frames it with.
type frameReader struct {
	hdr  [4]byte
	b    []byte
	off  int // into hdr, then into b
	size int
}

// reset makes v the next frame.
func (f *frameReader) reset(v []byte) {
	binary.BigEndian.PutUint32(f.hdr[:], uint32(len(v)))
	f.b, f.off, f.size = v, 0, 4+len(v)
}

func (f *frameReader) Read(p []byte) (int, error) {
	if f.off == f.size {
		return 0, io.EOF
	}
	var n int
	if f.off < 4 {
		n = copy(p, f.hdr[f.off:])
	} else {
		n = copy(p, f.b[f.off-4:])
	}
	f.off += n
	return n, nil
}

// partition is what a Consumer tracks of one assigned partition.
type partition struct {
	id      int32
	known   bool            // the committed offset and floor were read
	floor   int64           // windows at or before it were reported: their records are skipped
	start   int64           // the committed offset at assignment, -1 if none
	next    int64           // offset after the last record taken from the queue; -1 before the first
	queue   []queued        // records fetched, not yet taken
	bytes   int             // of the values queued
	paused  bool            // not fetched: its queue is full
	newest  int64           // the newest window start of a record taken
	pending map[int64]int64 // start of each window not reported → offset of its first record taken
	parts   map[partKey]*partial
}

// queued is a record fetched, with the window start its headers name
// (metrics.NoWindow when they name none: it is taken first, and skipped).
type queued struct {
	r     *kgo.Record
	start int64
}

// partKey names a host's state of a window (of a segment of its capture),
// whose parts come together.
type partKey struct {
	start   int64
	host    string
	segment uint32
}

// partial is a host's state of which some parts arrived.
type partial struct {
	w      *metrics.Window
	got, n int
	source string
}

// queueBytes bounds the record values a partition's queue holds before the
// partition is paused: enough for a few states, so that the merge can take
// them in window order across the partitions. fetchPartitionBytes bounds
// what one fetch asks of a partition (a broker sends a larger batch
// whole): the fetched records hold their decompressed batches.
const (
	queueBytes          = 1 << 20
	fetchPartitionBytes = 256 << 10
)

// NewConsumer joins the consumer group of cfg to read t.
func NewConsumer(t *Target, cfg *ConsumerConfig) (*Consumer, error) {
	c := &Consumer{target: t, owned: make(map[int32]*partition), frames: new(frameReader)}
	if cfg != nil {
		c.cfg = *cfg
	}
	if c.cfg.Group == "" {
		c.cfg.Group = DefaultGroup
	}
	if c.cfg.Poll <= 0 {
		c.cfg.Poll = state.DefaultPoll
	}
	c.cfg.Read.Growing = false
	c.states = state.NewReader(c.frames, t.Topic, &c.cfg.Read)
	record := int32(max(t.MaxRecordBytes, DefaultMaxRecordBytes))
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(t.Brokers...),
		kgo.ConsumeTopics(t.Topic),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(record),
		kgo.FetchMaxPartitionBytes(fetchPartitionBytes),
		kgo.FetchMaxWait(c.cfg.Poll),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.revoked),
	)
	if err != nil {
		return nil, c.errorf("consumer: %w", err)
	}
	c.cl, c.adm = cl, kadm.NewClient(cl)
	return c, nil
}

// errorf returns an error naming the brokers, topic and group.
func (c *Consumer) errorf(format string, a ...any) error {
	return fmt.Errorf("kafka: topic %s on %s, group %s: %w", c.target.Topic, strings.Join(c.target.Brokers, ","), c.cfg.Group, fmt.Errorf(format, a...))
}

// assigned runs when partitions are assigned: it reads their committed
// offsets and the newest window reported from them, through cl (c.cl and
// c.adm may not be set yet: the group can assign before NewConsumer
// returns). Partitions whose offsets it cannot read wait for the next
// poll to read them.
func (c *Consumer) assigned(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joined = true
	ps := m[c.target.Topic]
	if len(ps) == 0 {
		return
	}
	c.changed = true
	for _, id := range ps {
		c.owned[id] = &partition{id: id, floor: metrics.NoWindow, start: -1, next: -1, newest: metrics.NoWindow,
			pending: make(map[int64]int64), parts: make(map[partKey]*partial)}
	}
	c.pollErr = c.readCommitted(ctx, kadm.NewClient(cl))
}

// readCommitted reads the committed offsets and floors of the partitions
// that do not know them yet.
func (c *Consumer) readCommitted(ctx context.Context, adm *kadm.Client) error {
	offs, err := adm.FetchOffsets(ctx, c.cfg.Group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return c.errorf("read committed offsets: %w", err)
	}
	var errs []error
	for id, p := range c.owned {
		if p.known {
			continue
		}
		p.known = true
		if o, ok := offs.Lookup(c.target.Topic, id); ok && o.At >= 0 {
			p.start = o.At
			if o.Metadata != "" {
				f, err := strconv.ParseInt(o.Metadata, 10, 64)
				if err != nil {
					errs = append(errs, c.errorf("partition %d: commit metadata %q is not a window start; read from the committed offset", id, o.Metadata))
					continue
				}
				p.floor = f
			}
		}
	}
	return errors.Join(errs...)
}

// revoked runs when partitions are taken away.
func (c *Consumer) revoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range m[c.target.Topic] {
		if p, ok := c.owned[id]; ok {
			delete(c.owned, id)
			c.changed = true
			if p.paused {
				c.cl.ResumeFetchPartitions(map[string][]int32{c.target.Topic: {id}})
			}
		}
	}
}

// Next implements state.Input: it takes the fetched records in window
// order across the partitions, polling the brokers for more when a
// partition has none queued and is not at its end, and decodes the next
// state into w. A record that is not a state, or does not decode, is
// skipped (Read.Skipped names the topic, partition and offset); a record
// of a window reported already is skipped and counted. Trouble with the
// brokers is Read.Trouble with Follow, and an error without. Once ctx is
// done Next returns state.Stopped.
func (c *Consumer) Next(ctx context.Context, w *metrics.Window) (state.Read, error) {
	c.polled = false
	for {
		c.mu.Lock()
		p := c.pick()
		c.mu.Unlock()
		if p != nil {
			if r, ok := c.take(p, w); ok {
				return c.read(r), nil
			}
			continue
		}
		if ctx.Err() != nil {
			return c.read(state.Read{Progress: state.Stopped}), nil
		}
		if c.polled {
			r := c.read(state.Read{})
			if !c.cfg.Follow && r.Trouble != nil {
				return state.Read{}, r.Trouble
			}
			return r, nil
		}
		reset := c.poll(ctx)
		c.polled = true
		if reset {
			return c.read(state.Read{Reset: true}), nil
		}
	}
}

// pick returns the partition whose next record is of the earliest
// window, or nil when a partition that is not at its end has no record
// queued (or its committed offsets are not known yet): its next record
// may be of an earlier window. c.mu is held.
func (c *Consumer) pick() *partition {
	var best *partition
	for _, p := range c.owned {
		switch {
		case !p.known:
			return nil
		case len(p.queue) == 0 && !c.atEnd(p):
			return nil
		case len(p.queue) > 0 && (best == nil || p.queue[0].start < best.queue[0].start):
			best = p
		}
	}
	return best
}

// atEnd reports whether every record of p the brokers held at the last
// poll was taken. c.mu is held.
func (c *Consumer) atEnd(p *partition) bool {
	end, ok := c.ends[p.id]
	return ok && len(p.queue) == 0 && p.reading() >= end
}

// read completes r with how far the consumer got: behind while a
// partition is not at its end, current (or at its end without Follow)
// once every partition is.
func (c *Consumer) read(r state.Read) state.Read {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.Trouble = errors.Join(c.pollErr, c.commitErr)
	r.Settled = math.MaxInt64
	behind := !c.joined
	if behind {
		r.Settled = metrics.NoWindow
	}
	for _, p := range c.owned {
		switch {
		case c.atEnd(p):
		case len(p.queue) > 0:
			r.Settled, behind = min(r.Settled, p.queue[0].start), true
		default:
			r.Settled, behind = min(r.Settled, p.newest), true
		}
	}
	switch {
	case r.Progress == state.Stopped:
	case behind:
		r.Progress = state.Behind
	case c.cfg.Follow:
		r.Progress = state.Current
	default:
		r.Progress = state.End
	}
	return r
}

// poll fetches records for at most the poll interval, and reports
// whether the partitions changed: the caller forgets every window not
// reported, whose records are read again.
func (c *Consumer) poll(ctx context.Context) (reset bool) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Poll)
	defer cancel()
	c.cl.AllowRebalance() // the callbacks run now, or within PollFetches
	var troubles []error
	c.mu.Lock()
	if err := c.readCommittedIfNeeded(ctx); err != nil {
		troubles = append(troubles, err)
	}
	c.mu.Unlock()
	ends, endErr := c.adm.ListEndOffsets(ctx, c.target.Topic)
	if endErr == nil {
		endErr = ends.Error()
	}
	fetches := c.cl.PollFetches(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	fetches.EachError(func(_ string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			troubles = append(troubles, c.errorf("partition %d: %w", p, err))
		}
	})
	if endErr != nil && ctx.Err() == nil {
		troubles = append(troubles, c.errorf("end offsets: %w", endErr))
	}
	if endErr == nil {
		c.ends = make(map[int32]int64)
		ends.Each(func(o kadm.ListedOffset) { c.ends[o.Partition] = o.Offset })
	}
	reread := make(map[int32]bool)
	if c.changed {
		// The caller forgets its pending windows: read the records of
		// those of the partitions kept again.
		c.changed, reset = false, true
		seek := make(map[int32]kgo.EpochOffset)
		for id, p := range c.owned {
			if at := p.position(); len(p.pending) > 0 || len(p.queue) > 0 {
				seek[id] = kgo.EpochOffset{Epoch: -1, Offset: at}
				reread[id] = true
				p.next = at
				p.dropQueue()
				clear(p.pending)
				clear(p.parts)
			}
		}
		if len(seek) > 0 {
			c.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{c.target.Topic: seek})
		}
	}
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		p, ok := c.owned[fp.Partition]
		if !ok || reread[fp.Partition] {
			return
		}
		for _, r := range fp.Records {
			start := metrics.NoWindow
			if h, err := readHeaders(r); err == nil {
				start = h.start
			}
			p.queue = append(p.queue, queued{r, start})
			p.bytes += len(r.Value)
		}
	})
	c.pauseFull()
	c.pollErr = errors.Join(troubles...)
	return reset
}

// readCommittedIfNeeded reads the committed offsets of partitions assigned
// when they could not be read. c.mu is held.
func (c *Consumer) readCommittedIfNeeded(ctx context.Context) error {
	for _, p := range c.owned {
		if !p.known {
			return c.readCommitted(ctx, c.adm)
		}
	}
	return nil
}

// pauseFull stops fetching partitions whose queue is full, and fetches
// again those that drained. c.mu is held.
func (c *Consumer) pauseFull() {
	var pause, resume []int32
	for id, p := range c.owned {
		switch full := p.bytes >= queueBytes; {
		case full && !p.paused:
			pause = append(pause, id)
		case !full && p.paused:
			resume = append(resume, id)
		}
		p.paused = p.bytes >= queueBytes
	}
	if len(pause) > 0 {
		c.cl.PauseFetchPartitions(map[string][]int32{c.target.Topic: pause})
	}
	if len(resume) > 0 {
		c.cl.ResumeFetchPartitions(map[string][]int32{c.target.Topic: resume})
	}
}

// dropQueue forgets the records queued.
func (p *partition) dropQueue() {
	clear(p.queue)
	p.queue, p.bytes = p.queue[:0], 0
}

// reading returns the offset of the next record to take.
func (p *partition) reading() int64 {
	if p.next < 0 {
		return max(p.start, 0)
	}
	return p.next
}

// position returns where a partition's records not yet reported begin:
// the first record of the oldest window pending, or the next record to
// take.
func (p *partition) position() int64 {
	at := p.reading()
	for _, o := range p.pending {
		at = min(at, o)
	}
	return at
}

// take takes the next record of p, and returns the read it makes: a state
// decoded into w, or a record skipped; false when it makes none (a record
// of a window reported already, a part of a state).
func (c *Consumer) take(p *partition, w *metrics.Window) (state.Read, bool) {
	q := p.queue[0]
	p.queue[0] = queued{}
	p.queue = p.queue[1:]
	p.bytes -= len(q.r.Value)
	if len(p.queue) == 0 {
		p.queue = nil // let the array go
	}
	r := q.r
	src := fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
	p.next = r.Offset + 1
	bad := func(err error) (state.Read, bool) {
		c.stats.Bad++
		return state.Read{Skipped: c.errorf("%s: %w", src, err)}, true
	}
	h, err := readHeaders(r)
	if err != nil {
		return bad(err)
	}
	p.newest = max(p.newest, h.start)
	if h.start <= p.floor {
		c.stats.Reported++
		return state.Read{}, false
	}
	into := w
	if h.n > 1 {
		into = c.spareWindow()
	}
	c.frames.reset(r.Value)
	c.states.Reset(c.frames) // after an error too
	if err := c.states.Next(into); err != nil {
		c.keepSpare(into, w)
		return bad(err)
	}
	if into.Start != h.start || into.Length != h.length {
		c.keepSpare(into, w)
		return bad(fmt.Errorf("state of window %d+%d under headers of window %d+%d: %w", into.Start, into.Length, h.start, h.length, ErrRecord))
	}
	if _, ok := p.pending[h.start]; !ok {
		p.pending[h.start] = r.Offset
	}
	if h.n == 1 {
		return state.Read{State: true, Source: src}, true
	}
	k := partKey{h.start, h.host, into.Segment}
	pt, ok := p.parts[k]
	switch {
	case !ok:
		p.parts[k] = &partial{w: into, got: 1, n: h.n, source: src}
		return state.Read{}, false
	case pt.n != h.n:
		c.keepSpare(into, w)
		return bad(fmt.Errorf("part %d/%d of a state of %d parts: %w", h.i, h.n, pt.n, ErrRecord))
	}
	if err := pt.w.Merge(into); err != nil {
		c.keepSpare(into, w)
		return bad(err)
	}
	c.keepSpare(into, w)
	if pt.got++; pt.got < pt.n {
		return state.Read{}, false
	}
	delete(p.parts, k)
	pt.w.Normalize()
	*w, *pt.w = *pt.w, *w // hand the whole state over in w; keep w's memory
	c.keepSpare(pt.w, nil)
	return state.Read{State: true, Source: pt.source}, true
}

// spareWindow returns a window to decode a part into.
func (c *Consumer) spareWindow() *metrics.Window {
	if n := len(c.spare); n > 0 {
		w := c.spare[n-1]
		c.spare = c.spare[:n-1]
		return w
	}
	return new(metrics.Window)
}

// keepSpare keeps x to decode parts into again, unless it is the caller's
// window w.
func (c *Consumer) keepSpare(x, w *metrics.Window) {
	if x != w && len(c.spare) < maxSpare {
		c.spare = append(c.spare, x)
	}
}

// headers are the header fields of a state record.
type headers struct {
	host          string
	start, length int64
	i, n          int // part i of n
}

// readHeaders reads and checks the headers of a state record.
func readHeaders(r *kgo.Record) (headers, error) {
	var h headers
	var seen int
	for _, x := range r.Headers {
		var err error
		switch x.Key {
		case HeaderHost:
			h.host = string(x.Value)
		case HeaderWindowStart:
			h.start, err = strconv.ParseInt(string(x.Value), 10, 64)
		case HeaderWindowLength:
			h.length, err = strconv.ParseInt(string(x.Value), 10, 64)
		case HeaderStateVersion:
		case HeaderPart:
			i, n, _ := bytes.Cut(x.Value, []byte("/"))
			if h.i, err = strconv.Atoi(string(i)); err == nil {
				h.n, err = strconv.Atoi(string(n))
			}
		default:
			continue
		}
		if err != nil {
			return h, fmt.Errorf("header %s %q: %w", x.Key, x.Value, ErrRecord)
		}
		seen++
	}
	switch {
	case seen != 5:
		return h, fmt.Errorf("want the headers %s, %s, %s, %s and %s once each: %w", HeaderHost, HeaderWindowStart, HeaderWindowLength, HeaderStateVersion, HeaderPart, ErrRecord)
	case len(r.Key) != 8 || int64(binary.BigEndian.Uint64(r.Key)) != h.start:
		return h, fmt.Errorf("key %x is not the window start %d: %w", r.Key, h.start, ErrRecord)
	case h.n < 1 || h.i < 1 || h.i > h.n:
		return h, fmt.Errorf("part %d/%d: %w", h.i, h.n, ErrRecord)
	}
	return h, nil
}

// Done implements state.Input: it records that every window up to the one
// starting at reported has been reported, and commits each assigned
// partition's position (see the package doc). A commit that fails is
// an error without Follow; with Follow it is Read.Trouble, and the next
// commit covers it.
func (c *Consumer) Done(ctx context.Context, reported int64) error {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	c.mu.Lock()
	offsets := make(map[int32]kgo.EpochOffset)
	floors := make(map[int32]string)
	for id, p := range c.owned {
		for s := range p.pending {
			if s <= reported {
				delete(p.pending, s)
			}
		}
		for k := range p.parts {
			if k.start <= reported {
				c.keepSpare(p.parts[k].w, nil)
				delete(p.parts, k)
			}
		}
		p.floor = max(p.floor, reported)
		if !p.known || p.next < 0 && p.start < 0 {
			continue // nothing read, or the floor committed not known: nothing to say
		}
		offsets[id] = kgo.EpochOffset{Epoch: -1, Offset: p.position()}
		floors[id] = strconv.FormatInt(p.floor, 10)
	}
	c.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				p := &req.Topics[i].Partitions[j]
				m := floors[p.Partition]
				p.Metadata = &m
			}
		}
		return nil
	})
	var err error
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.target.Topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, e error) {
			if e != nil {
				err = e
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if e := kerr.ErrorForCode(p.ErrorCode); e != nil && err == nil {
						err = fmt.Errorf("partition %d: %w", p.Partition, e)
					}
				}
			}
		})
	if err != nil {
		err = c.errorf("commit offsets after window %s: %w", time.Unix(0, reported).UTC().Format(time.RFC3339Nano), err)
		if !c.cfg.Follow {
			return err
		}
	}
	c.mu.Lock()
	c.commitErr = err
	c.mu.Unlock()
	return nil
}

// commitTimeout bounds an offset commit, so that a merge whose brokers went
// away still ends.
const commitTimeout = 30 * time.Second

// Drop implements state.Input: the records of the window at start taken
// so far need not be read again.
func (c *Consumer) Drop(start int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.owned {
		delete(p.pending, start)
		for k, pt := range p.parts {
			if k.start == start {
				c.keepSpare(pt.w, nil)
				delete(p.parts, k)
			}
		}
	}
}

// Stats returns what the consumer skipped so far.
func (c *Consumer) Stats() ConsumerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close leaves the group and closes the client.
func (c *Consumer) Close() {
	c.cl.CloseAllowingRebalance()
}
