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

// noWindow stands for "no window reported yet": lower than every window
// start a state can carry (starts are positive multiples of the length, and
// math.MinInt64 is not a date any capture has).
const noWindow = math.MinInt64

// ErrRecord is wrapped by errors about a record that is not a window state
// as a Producer writes it.
var ErrRecord = errors.New("not a rocescope state record")

// State is one host's whole state of a window, read from the topic.
type State struct {
	Window *metrics.Window
	Source string // topic/partition@offset of its first record, for messages
}

// Batch is what one [Consumer.Poll] read.
type Batch struct {
	// Reset says the partitions of the consumer changed: the caller must
	// forget every window it has not reported. The states of those that
	// remain with this consumer are read again and come in later batches.
	Reset bool
	// States are the host states completed by this poll.
	States []State
	// CaughtUp says that every record the assigned partitions held when
	// the poll began has been read (and is in this batch or an earlier
	// one).
	CaughtUp bool
	// Err is trouble reaching the brokers during the poll, such as a
	// broker that is down: the client keeps trying, nothing read is lost,
	// and the batch is not CaughtUp.
	Err error
}

// ConsumerStats counts what a Consumer skipped.
type ConsumerStats struct {
	// Skipped counts records of windows reported already: by another
	// consumer before a rebalance, by an earlier run, or by this one
	// before the record arrived (a late state).
	Skipped uint64
}

// Consumer reads window states from a topic as a member of a consumer
// group. See the package doc.
type Consumer struct {
	target *Target
	group  string
	cl     *kgo.Client
	adm    *kadm.Client

	mu      sync.Mutex // guards what the rebalance callbacks touch
	joined  bool       // the first assignment arrived
	changed bool       // the assignment changed since the last Poll
	owned   map[int32]*partition
	err     error // from a callback

	stats ConsumerStats

	frames *frameReader      // the record being decoded, framed as in a state file
	states *state.Reader     // decodes from frames, reusing its buffer
	spare  []*metrics.Window // parts merged into others, to decode into again
}

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
	floor   int64           // windows at or before it were reported: their records are skipped
	next    int64           // offset after the last record read; -1 before the first
	start   int64           // the committed offset at assignment, -1 if none
	pending map[int64]int64 // start of each window not reported → offset of its first record read
	parts   map[partKey]*partial
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

// NewConsumer joins group (DefaultGroup if empty) to read t. opts bound
// the states it decodes, as they bound a [state.Reader]'s (nil: the
// defaults; Growing does not apply to records).
func NewConsumer(t *Target, group string, opts *state.ReadOptions) (*Consumer, error) {
	if group == "" {
		group = DefaultGroup
	}
	c := &Consumer{target: t, group: group, owned: make(map[int32]*partition), frames: new(frameReader)}
	c.states = state.NewReader(c.frames, t.Topic, opts)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(t.Brokers...),
		kgo.ConsumeTopics(t.Topic),
		kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(int32(max(t.MaxRecordBytes, DefaultMaxRecordBytes)*4)),
		kgo.FetchMaxPartitionBytes(int32(max(t.MaxRecordBytes, DefaultMaxRecordBytes)*2)),
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
	return fmt.Errorf("kafka: topic %s on %s, group %s: %w", c.target.Topic, strings.Join(c.target.Brokers, ","), c.group, fmt.Errorf(format, a...))
}

// assigned runs when partitions are assigned: it reads their committed
// offsets and the newest window reported from them, through cl (c.cl and
// c.adm may not be set yet: the group can assign before NewConsumer
// returns).
func (c *Consumer) assigned(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joined = true
	ps := m[c.target.Topic]
	if len(ps) == 0 {
		return
	}
	c.changed = true
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, c.group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		c.err = errors.Join(c.err, c.errorf("fetch committed offsets: %w", err))
		return
	}
	for _, p := range ps {
		st := &partition{floor: noWindow, next: -1, start: -1, pending: make(map[int64]int64), parts: make(map[partKey]*partial)}
		if o, ok := offs.Lookup(c.target.Topic, p); ok && o.At >= 0 {
			st.start = o.At
			if o.Metadata != "" {
				f, err := strconv.ParseInt(o.Metadata, 10, 64)
				if err != nil {
					c.err = errors.Join(c.err, c.errorf("partition %d: commit metadata %q is not a window start", p, o.Metadata))
				}
				st.floor = f
			}
		}
		c.owned[p] = st
	}
}

// revoked runs when partitions are taken away.
func (c *Consumer) revoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range m[c.target.Topic] {
		if _, ok := c.owned[p]; ok {
			delete(c.owned, p)
			c.changed = true
		}
	}
}

// Poll waits until ctx is done for records and returns the host states
// they complete; trouble reaching the brokers is in the batch's Err. It
// decodes states into windows from spare (or new ones when spare is nil),
// reusing their sketches when they have the state's shape: give it
// windows the caller is done with, such as state.Merger.Spare. It
// returns an error for a record that is not a state or whose parts do not
// merge, and when the committed offsets of partitions assigned to it
// could not be read; a ctx that ends is not an error.
func (c *Consumer) Poll(ctx context.Context, spare func() *metrics.Window) (*Batch, error) {
	c.cl.AllowRebalance() // the callbacks run now, or within PollFetches
	ends, endErr := c.adm.ListEndOffsets(ctx, c.target.Topic)
	if endErr == nil {
		endErr = ends.Error()
	}
	fetches := c.cl.PollFetches(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	var errs []error
	fetches.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, c.errorf("partition %d: %w", p, err))
		}
	})
	if endErr != nil && ctx.Err() == nil {
		errs = append(errs, c.errorf("end offsets: %w", endErr))
	}
	b := &Batch{Err: errors.Join(errs...)}
	reread := make(map[int32]bool)
	if c.changed {
		// The caller forgets its pending windows: read the records of
		// those of the partitions kept again.
		c.changed, b.Reset = false, true
		seek := make(map[int32]kgo.EpochOffset)
		for id, p := range c.owned {
			if at := p.position(); len(p.pending) > 0 {
				seek[id] = kgo.EpochOffset{Epoch: -1, Offset: at}
				reread[id] = true
				p.next = at
				clear(p.pending)
				clear(p.parts)
			}
		}
		if len(seek) > 0 {
			c.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{c.target.Topic: seek})
		}
	}
	var err error
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		p, ok := c.owned[fp.Partition]
		if err != nil || !ok || reread[fp.Partition] {
			return
		}
		for _, r := range fp.Records {
			if err = c.record(b, p, r, spare); err != nil {
				return
			}
		}
	})
	if err != nil {
		return nil, err
	}
	b.CaughtUp = c.joined && endErr == nil && b.Err == nil
	for id, p := range c.owned {
		e, ok := ends.Lookup(c.target.Topic, id)
		if !ok || p.reading() < e.Offset {
			b.CaughtUp = false
		}
	}
	return b, nil
}

// reading returns the offset of the next record to read.
func (p *partition) reading() int64 {
	if p.next < 0 {
		return max(p.start, 0)
	}
	return p.next
}

// position returns where a partition's records not yet reported begin:
// the first record of the oldest window pending, or the next record to
// read.
func (p *partition) position() int64 {
	at := p.reading()
	for _, o := range p.pending {
		at = min(at, o)
	}
	return at
}

// record takes one record of partition p into b.
func (c *Consumer) record(b *Batch, p *partition, r *kgo.Record, spare func() *metrics.Window) error {
	src := fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
	p.next = r.Offset + 1
	h, err := readHeaders(r)
	if err != nil {
		return c.errorf("%s: %w", src, err)
	}
	if h.start <= p.floor {
		c.stats.Skipped++
		return nil
	}
	if _, ok := p.pending[h.start]; !ok {
		p.pending[h.start] = r.Offset
	}
	var w *metrics.Window
	switch n := len(c.spare); {
	case n > 0:
		w, c.spare = c.spare[n-1], c.spare[:n-1]
	case spare != nil:
		w = spare()
	default:
		w = new(metrics.Window)
	}
	c.frames.reset(r.Value)
	if err := c.states.Next(w); err != nil {
		return c.errorf("%s: %w", src, err)
	}
	if w.Start != h.start || w.Length != h.length {
		return c.errorf("%s: state of window %d+%d under headers of window %d+%d: %w", src, w.Start, w.Length, h.start, h.length, ErrRecord)
	}
	if h.n == 1 {
		b.States = append(b.States, State{Window: w, Source: src})
		return nil
	}
	k := partKey{h.start, h.host, w.Segment}
	pt, ok := p.parts[k]
	if !ok {
		p.parts[k] = &partial{w: w, got: 1, n: h.n, source: src}
		return nil
	}
	if pt.n != h.n {
		return c.errorf("%s: part %d/%d of a state of %d parts: %w", src, h.i, h.n, pt.n, ErrRecord)
	}
	if err := pt.w.Merge(w); err != nil {
		return c.errorf("%s: %w", src, err)
	}
	if len(c.spare) < maxSpare {
		c.spare = append(c.spare, w)
	}
	if pt.got++; pt.got == pt.n {
		delete(p.parts, k)
		pt.w.Normalize()
		b.States = append(b.States, State{Window: pt.w, Source: pt.source})
	}
	return nil
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

// Commit records that every window up to the one starting at reported has
// been reported, and commits each assigned partition's position (see the
// package doc). Call it once the reports are written out.
func (c *Consumer) Commit(ctx context.Context, reported int64) error {
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
				delete(p.parts, k)
			}
		}
		p.floor = max(p.floor, reported)
		if p.next < 0 && p.start < 0 {
			continue // nothing read, nothing committed: nothing to say
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
		return c.errorf("commit offsets after window %s: %w", time.Unix(0, reported).UTC().Format(time.RFC3339Nano), err)
	}
	return nil
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
