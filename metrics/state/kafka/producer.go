package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/rocescope/rocescope/metrics"
)

// Record header names.
const (
	HeaderHost         = "host"
	HeaderWindowStart  = "window_start_ns"
	HeaderWindowLength = "window_ns"
	HeaderStateVersion = "state_version"
	HeaderPart         = "part" // "i/n", 1-based
)

// ErrUndelivered is wrapped by the error of [Producer.Close] when some
// states did not reach the brokers.
var ErrUndelivered = errors.New("window states not delivered")

// ProducerConfig tunes a Producer. The zero value (or nil) means the
// defaults.
type ProducerConfig struct {
	// Host names the capture host in the records' headers; it must be the
	// host the states name.
	Host string
	// Queue is how many encoded states wait for the producer goroutine
	// (default 16); a state that finds the queue full is dropped and
	// counted.
	Queue int
	// MaxBufferedBytes bounds the records the client holds while brokers
	// are slow or away (default 256 MiB); a state that does not fit is
	// dropped and counted.
	MaxBufferedBytes int
	// Retries bounds how often a record is sent again (default 20), and
	// DeliveryTimeout how long it may take to deliver (default 2m; the
	// Target's, if it has one).
	Retries         int
	DeliveryTimeout time.Duration
	// CloseTimeout bounds how long Close waits for buffered states
	// (default 30s).
	CloseTimeout time.Duration
	// Warn receives one line per state that could not be delivered
	// (default io.Discard).
	Warn io.Writer
}

// withDefaults returns c with the defaults filled in.
func (c *ProducerConfig) withDefaults() ProducerConfig {
	var d ProducerConfig
	if c != nil {
		d = *c
	}
	if d.Queue <= 0 {
		d.Queue = 16
	}
	if d.MaxBufferedBytes <= 0 {
		d.MaxBufferedBytes = 256 << 20
	}
	if d.Retries <= 0 {
		d.Retries = 20
	}
	if d.DeliveryTimeout <= 0 {
		d.DeliveryTimeout = 2 * time.Minute
	}
	if d.CloseTimeout <= 0 {
		d.CloseTimeout = 30 * time.Second
	}
	if d.Warn == nil {
		d.Warn = io.Discard
	}
	return d
}

// ProducerStats counts window states by what became of them.
type ProducerStats struct {
	Written   uint64 // states given to Write
	Delivered uint64 // states whose every part the brokers acknowledged
	Failed    uint64 // states the brokers did not take (retries or time ran out, too large, closed)
	Dropped   uint64 // states dropped because the queue or the buffer was full
	Records   uint64 // records done with: acknowledged or failed
}

// batchOverhead is the room a record batch needs beyond one record's
// value: the batch and record framing, the key and the headers.
const batchOverhead = 16 << 10

// Producer writes window states to a Kafka topic. See the package doc for
// the record format and the concurrency contract.
type Producer struct {
	target *Target
	cfg    ProducerConfig
	cl     *kgo.Client
	queue  chan *pending
	done   chan struct{}  // closed when the goroutine has handed out every queued state
	inway  sync.WaitGroup // records not yet acknowledged or failed
	once   sync.Once
	warnMu sync.Mutex

	written, delivered, failed, dropped, records atomic.Uint64

	limit atomic.Int64 // largest record
	tried time.Time    // when the producer last asked the brokers for the topic's limit
	known bool         // limit is the topic's, or the Target's
}

// pending is one window's state on its way.
type pending struct {
	start, length int64
	enc           []byte
	left          atomic.Int32 // parts not yet acknowledged
	bad           atomic.Bool  // a part failed
}

// NewProducer returns a Producer writing to t. It does not wait for the
// brokers: a broker that is down at start delays delivery, not the run.
func NewProducer(t *Target, cfg *ProducerConfig) (*Producer, error) {
	c := cfg.withDefaults()
	if t.DeliveryTimeout > 0 {
		c.DeliveryTimeout = t.DeliveryTimeout
	}
	if c.Host == "" {
		return nil, fmt.Errorf("kafka: producer for topic %s: no host name", t.Topic)
	}
	p := &Producer{target: t, cfg: c, queue: make(chan *pending, c.Queue), done: make(chan struct{})}
	p.limit.Store(int64(t.MaxRecordBytes))
	if t.MaxRecordBytes == 0 {
		p.limit.Store(DefaultMaxRecordBytes)
	}
	// Writes are idempotent (kgo's default, with acks from all in-sync
	// replicas): a retry never doubles a state.
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(t.Brokers...),
		kgo.DefaultProduceTopic(t.Topic),
		kgo.ProducerBatchCompression(kgo.ZstdCompression(), kgo.Lz4Compression()),
		kgo.ProducerBatchMaxBytesFn(func(string) int32 { return int32(p.limit.Load() + batchOverhead) }),
		kgo.MaxBufferedBytes(c.MaxBufferedBytes),
		kgo.RecordRetries(c.Retries),
		kgo.RecordDeliveryTimeout(c.DeliveryTimeout),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka: producer for topic %s on %s: %w", t.Topic, strings.Join(t.Brokers, ","), err)
	}
	p.cl = cl
	go p.run()
	return p, nil
}

// Write queues the state of w, which must be normalized (as the engine
// hands windows out), and returns without waiting for the brokers. The
// caller may reuse w when Write returns. A state that finds the queue full
// is dropped and counted; Write fails only on a state that cannot be
// encoded.
func (p *Producer) Write(w *metrics.Window) error {
	p.written.Add(1)
	enc, err := w.AppendBinary(nil)
	if err != nil {
		return fmt.Errorf("kafka: topic %s: %w", p.target.Topic, err)
	}
	s := &pending{start: w.Start, length: w.Length, enc: enc}
	select {
	case p.queue <- s:
	default:
		p.dropped.Add(1)
		p.warn(s, "dropped: the producer queue is full (brokers slow or away)")
	}
	return nil
}

// run sends the queued states until Close closes the queue.
func (p *Producer) run() {
	defer close(p.done)
	for s := range p.queue {
		p.learnLimit()
		p.send(s)
	}
}

// learnLimit asks the brokers for the topic's max.message.bytes, unless
// the Target sets the limit: at most once a minute until they answer.
func (p *Producer) learnLimit() {
	if p.known || p.target.MaxRecordBytes > 0 || time.Since(p.tried) < time.Minute {
		return
	}
	p.tried = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(p.cl).DescribeTopicConfigs(ctx, p.target.Topic)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
		return
	}
	for _, c := range rcs[0].Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			if n, err := strconv.Atoi(*c.Value); err == nil && n-batchOverhead >= minRecordBytes {
				p.limit.Store(int64(n - batchOverhead))
				p.known = true
			}
		}
	}
}

// send splits a state into records and hands them to the client. A state
// too large for one record is decoded again here, off the caller's path,
// and split.
func (p *Producer) send(s *pending) {
	parts := [][]byte{s.enc}
	if limit := int(p.limit.Load()); len(s.enc) > limit {
		w := new(metrics.Window)
		err := w.UnmarshalBinary(s.enc)
		if err == nil {
			parts, err = split(w, s.enc, limit)
		}
		if err != nil {
			p.failed.Add(1)
			p.warn(s, err.Error())
			return
		}
	}
	key := binary.BigEndian.AppendUint64(nil, uint64(s.start))
	host := []byte(p.cfg.Host)
	start := []byte(strconv.FormatInt(s.start, 10))
	length := []byte(strconv.FormatInt(s.length, 10))
	version := []byte(strconv.Itoa(int(s.enc[len(stateMagic)])))
	s.left.Store(int32(len(parts)))
	recs := make([]*kgo.Record, len(parts))
	for i, b := range parts {
		recs[i] = &kgo.Record{Key: key, Value: b, Headers: []kgo.RecordHeader{
			{Key: HeaderHost, Value: host},
			{Key: HeaderWindowStart, Value: start},
			{Key: HeaderWindowLength, Value: length},
			{Key: HeaderStateVersion, Value: version},
			{Key: HeaderPart, Value: fmt.Appendf(nil, "%d/%d", i+1, len(parts))},
		}}
	}
	for _, r := range recs {
		p.inway.Add(1)
		p.cl.TryProduce(context.Background(), r, func(_ *kgo.Record, err error) { p.acked(s, err) })
	}
}

// stateMagic is the magic that starts a state encoding, which the version
// byte follows (see metrics.Window.AppendBinary).
const stateMagic = "RSCOPEWS"

// acked accounts for one record of s.
func (p *Producer) acked(s *pending, err error) {
	defer p.inway.Done()
	if err != nil && !s.bad.Swap(true) {
		if errors.Is(err, kgo.ErrMaxBuffered) {
			p.dropped.Add(1)
			p.warn(s, "dropped: the client buffer is full (brokers slow or away)")
		} else {
			p.failed.Add(1)
			p.warn(s, err.Error())
		}
	}
	p.records.Add(1)
	if s.left.Add(-1) == 0 && !s.bad.Load() {
		p.delivered.Add(1)
	}
}

// warn writes one line about a state that will not arrive.
func (p *Producer) warn(s *pending, why string) {
	p.warnMu.Lock()
	defer p.warnMu.Unlock()
	fmt.Fprintf(p.cfg.Warn, "rocescope: kafka: state of window %s (host %s) not delivered to topic %s on %s: %s\n",
		time.Unix(0, s.start).UTC().Format(time.RFC3339Nano), p.cfg.Host, p.target.Topic, strings.Join(p.target.Brokers, ","), why)
}

// Stats returns the counts so far.
func (p *Producer) Stats() ProducerStats {
	return ProducerStats{Written: p.written.Load(), Delivered: p.delivered.Load(), Failed: p.failed.Load(),
		Dropped: p.dropped.Load(), Records: p.records.Load()}
}

// Close sends what is queued, waits at most the close timeout for the
// brokers to acknowledge it, fails what is left and closes the client. It
// returns an error wrapping [ErrUndelivered] if any state was dropped or
// failed. Close is idempotent; Write must not be called after it.
func (p *Producer) Close() error {
	var err error
	p.once.Do(func() {
		close(p.queue)
		<-p.done
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CloseTimeout)
		flushErr := p.cl.Flush(ctx)
		cancel()
		p.cl.Close() // fails the records still buffered
		p.inway.Wait()
		st := p.Stats()
		if lost := st.Failed + st.Dropped; lost > 0 {
			err = fmt.Errorf("kafka: topic %s on %s: %d of %d window states not delivered (%d failed, %d dropped): %w",
				p.target.Topic, strings.Join(p.target.Brokers, ","), lost, st.Written, st.Failed, st.Dropped, ErrUndelivered)
		}
		if flushErr != nil && err == nil {
			err = fmt.Errorf("kafka: topic %s on %s: flush: %w", p.target.Topic, strings.Join(p.target.Brokers, ","), flushErr)
		}
	})
	return err
}
