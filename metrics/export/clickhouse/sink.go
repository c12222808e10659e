package clickhouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
)

// Scheme is the URL scheme of a ClickHouse target:
// clickhouse://HOST:PORT/DATABASE, PORT being the HTTP interface's.
const Scheme = "clickhouse://"

// Table names.
const (
	TableWindows = "windows"
	TableFlows   = "flows"
)

// Errors.
var (
	// ErrTarget is wrapped by errors parsing a ClickHouse URL.
	ErrTarget = errors.New("invalid clickhouse target")
	// ErrPending is wrapped by Close's error when rows were spilled
	// instead of inserted.
	ErrPending = errors.New("report rows pending in the spill files")
)

// Target is a ClickHouse database reached over HTTP, and where rows that
// cannot be inserted go.
type Target struct {
	Addr     string // host:port of the HTTP interface
	Database string
	Spill    string // spill file prefix: Spill.windows and Spill.flows hold unsent rows
}

// IsURL reports whether s names a ClickHouse target rather than a path.
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme) }

var databaseName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseURL reads clickhouse://HOST[:PORT]/DATABASE[?spill=PATH]. The port
// defaults to 8123, the spill prefix to rocescope-clickhouse-HOST_PORT-DATABASE
// in the system's temporary directory.
func ParseURL(s string) (*Target, error) {
	u, err := url.Parse(s)
	if err != nil || !IsURL(s) {
		return nil, fmt.Errorf("clickhouse: %q: want %sHOST:PORT/DATABASE: %w", s, Scheme, ErrTarget)
	}
	t := &Target{Addr: u.Host, Database: strings.TrimPrefix(u.Path, "/")}
	if u.Port() == "" {
		t.Addr = net.JoinHostPort(u.Hostname(), "8123")
	}
	if u.Hostname() == "" || !databaseName.MatchString(t.Database) {
		return nil, fmt.Errorf("clickhouse: %q: want %sHOST:PORT/DATABASE, the database a plain name: %w", s, Scheme, ErrTarget)
	}
	t.Spill = u.Query().Get("spill")
	if t.Spill == "" {
		t.Spill = filepath.Join(os.TempDir(), "rocescope-clickhouse-"+strings.NewReplacer(":", "_", "/", "_", "[", "", "]", "").Replace(t.Addr)+"-"+t.Database)
	}
	return t, nil
}

// Config tunes a Sink. The zero value (or nil) means the defaults.
type Config struct {
	// BatchWindows is how many windows' rows one INSERT carries at most
	// (default 10); Flush sends a smaller batch.
	BatchWindows int
	// Queue is how many batches wait for the server (default 64), and
	// QueueBytes how many bytes of rows (default 256 MiB); a batch that
	// finds the queue full is spilled.
	Queue      int
	QueueBytes int
	// Timeout bounds one HTTP request (default 30s).
	Timeout time.Duration
	// MaxBackoff bounds the wait between retries (default 10s).
	MaxBackoff time.Duration
	// CloseTimeout bounds how long Close waits for the queue to drain
	// (default 30s); what is left is spilled.
	CloseTimeout time.Duration
}

func (c *Config) withDefaults() Config {
	var d Config
	if c != nil {
		d = *c
	}
	if d.BatchWindows <= 0 {
		d.BatchWindows = 10
	}
	if d.Queue <= 0 {
		d.Queue = 64
	}
	if d.QueueBytes <= 0 {
		d.QueueBytes = 256 << 20
	}
	if d.Timeout <= 0 {
		d.Timeout = 30 * time.Second
	}
	if d.MaxBackoff <= 0 {
		d.MaxBackoff = 10 * time.Second
	}
	if d.CloseTimeout <= 0 {
		d.CloseTimeout = 30 * time.Second
	}
	return d
}

// batch is rows of some windows for both tables.
type batch struct {
	windows, flows []byte
	n              int    // windows
	bytes          int64  // of rows when queued
	seq            uint64 // its place in the queue, from 1
}

// Sink writes reports into ClickHouse; it implements export.Sink. See the
// package doc.
type Sink struct {
	t      *Target
	cfg    Config
	schema *schema
	client *http.Client
	cur    *batch
	queue  chan *batch
	queued atomic.Int64 // bytes of the batches in the queue or being sent
	done   chan struct{}
	stop   context.Context // done when Close's time is up
	cancel context.CancelFunc
	closed bool

	seq uint64 // of the last batch queued

	mu       sync.Mutex // guards what follows, shared with the sender
	ready    bool       // the tables exist
	inserted int        // windows inserted
	spilled  int        // windows spilled
	lastErr  error
	sent     uint64        // seq of the last batch inserted or spilled by the sender
	progress chan struct{} // closed, and made anew, when sent moves
}

var (
	_ export.Sink   = (*Sink)(nil)
	_ export.Syncer = (*Sink)(nil)
)

// New returns a Sink writing into t. It does not wait for the server: the
// database and tables are created before the first insert. Rows spilled by
// an earlier run are loaded and sent first.
func New(t *Target, cfg *Config) (*Sink, error) {
	sc, err := newSchema()
	if err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	s := &Sink{t: t, cfg: c, schema: sc, client: &http.Client{Timeout: c.Timeout},
		cur: &batch{}, queue: make(chan *batch, c.Queue+1), done: make(chan struct{}), progress: make(chan struct{})}
	s.stop, s.cancel = context.WithCancel(context.Background())
	old, err := s.loadSpill()
	if err != nil {
		return nil, err
	}
	if old != nil {
		// First in line, whatever its size: the queue has room for it.
		old.bytes = int64(len(old.windows) + len(old.flows))
		s.queued.Add(old.bytes)
		s.seq++
		old.seq = s.seq
		s.queue <- old
	}
	go s.send()
	return s, nil
}

// Write adds the rows of r to the current batch, and queues the batch when
// it is full.
func (s *Sink) Write(r *report.Report) error {
	var err error
	s.cur.windows, s.cur.flows, err = appendRows(s.cur.windows, s.cur.flows, r)
	if err != nil {
		return err
	}
	if s.cur.n++; s.cur.n >= s.cfg.BatchWindows {
		return s.Flush()
	}
	return nil
}

// Flush queues the current batch without waiting for the server; a batch
// that finds the queue full is spilled.
func (s *Sink) Flush() error {
	if s.cur.n == 0 {
		return nil
	}
	b := s.cur
	s.cur = &batch{}
	return s.enqueue(b)
}

// enqueue queues b, or spills it when the queue is full.
func (s *Sink) enqueue(b *batch) error {
	b.bytes = int64(len(b.windows) + len(b.flows))
	if s.queued.Add(b.bytes) > int64(s.cfg.QueueBytes) {
		s.queued.Add(-b.bytes)
		return s.spill(b)
	}
	b.seq = s.seq + 1
	select {
	case s.queue <- b:
		s.seq++
		return nil
	default:
		s.queued.Add(-b.bytes)
		return s.spill(b)
	}
}

// Sync implements export.Syncer: it queues the current batch and returns
// once every batch queued is inserted, or spilled (by Close) and fsynced,
// or ctx is done. While the server is down, it waits.
func (s *Sink) Sync(ctx context.Context) error {
	if err := s.Flush(); err != nil {
		return err
	}
	for {
		s.mu.Lock()
		sent, progress := s.sent, s.progress
		s.mu.Unlock()
		if sent >= s.seq {
			return nil
		}
		select {
		case <-progress:
		case <-ctx.Done():
			s.mu.Lock()
			lastErr := s.lastErr
			s.mu.Unlock()
			if lastErr != nil {
				return fmt.Errorf("clickhouse %s: rows of %d batches not inserted (last error: %v): %w", s.t.Addr, s.seq-sent, lastErr, ctx.Err())
			}
			return fmt.Errorf("clickhouse %s: rows of %d batches not inserted yet: %w", s.t.Addr, s.seq-sent, ctx.Err())
		}
	}
}

// send inserts the queued batches, retrying each with backoff until it is
// in or Close's time is up; then it spills what is left.
func (s *Sink) send() {
	defer close(s.done)
	for b := range s.queue {
		s.sendBatch(b)
	}
}

// sendBatch inserts b, retrying with backoff until it is in or Close's
// time is up, and then spills it.
func (s *Sink) sendBatch(b *batch) {
	defer s.queued.Add(-b.bytes)
	defer s.sentBatch(b)
	for wait := 100 * time.Millisecond; s.stop.Err() == nil; wait = min(2*wait, s.cfg.MaxBackoff) {
		err := s.insert(b)
		if err == nil {
			s.mu.Lock()
			s.inserted += b.n
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		select {
		case <-time.After(wait):
		case <-s.stop.Done():
		}
	}
	s.spill(b) // its error is in lastErr
}

// sentBatch records that b is inserted or spilled, for Sync.
func (s *Sink) sentBatch(b *batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = b.seq
	close(s.progress)
	s.progress = make(chan struct{})
}

// insert creates the tables if need be and inserts b, table by table; a
// table's rows leave b once they are in.
func (s *Sink) insert(b *batch) error {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if !ready {
		for _, q := range []string{
			fmt.Sprintf("CREATE DATABASE IF NOT EXISTS `%s`", s.t.Database),
			createTable(s.t.Database, TableWindows, s.schema.windows, "window_start_ns, host"),
			createTable(s.t.Database, TableFlows, s.schema.flows, "window_start_ns, src, dst, dqp"),
		} {
			if err := s.post(q, nil); err != nil {
				return err
			}
		}
		s.mu.Lock()
		s.ready = true
		s.mu.Unlock()
	}
	for _, x := range []struct {
		table string
		rows  *[]byte
	}{{TableWindows, &b.windows}, {TableFlows, &b.flows}} {
		if len(*x.rows) == 0 {
			continue
		}
		if err := s.post(fmt.Sprintf("INSERT INTO `%s`.`%s` FORMAT JSONEachRow", s.t.Database, x.table), *x.rows); err != nil {
			return err
		}
		*x.rows = nil
	}
	return nil
}

// post runs query with body as its data.
func (s *Sink) post(query string, body []byte) error {
	u := "http://" + s.t.Addr + "/?" + url.Values{"query": {query}, "input_format_skip_unknown_fields": {"1"}}.Encode()
	var rd io.Reader = strings.NewReader(query)
	if body != nil {
		rd = bytes.NewReader(body)
	} else {
		u = "http://" + s.t.Addr + "/"
	}
	req, err := http.NewRequestWithContext(s.stop, http.MethodPost, u, rd)
	if err != nil {
		return fmt.Errorf("clickhouse %s: %s: %w", s.t.Addr, firstWords(query), err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("clickhouse %s: %s: %w", s.t.Addr, firstWords(query), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("clickhouse %s: %s: %s: %s", s.t.Addr, firstWords(query), resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// firstWords shortens a query for messages.
func firstWords(q string) string {
	if i := strings.Index(q, " ("); i > 0 {
		return q[:i]
	}
	return q
}

// spillPath returns the spill file of table.
func (s *Sink) spillPath(table string) string { return s.t.Spill + "." + table }

// spill appends b's rows to the spill files.
func (s *Sink) spill(b *batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range []struct {
		table string
		rows  []byte
	}{{TableWindows, b.windows}, {TableFlows, b.flows}} {
		if len(x.rows) == 0 {
			continue
		}
		f, err := os.OpenFile(s.spillPath(x.table), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			_, err = f.Write(x.rows)
			err = errors.Join(err, f.Sync(), f.Close())
		}
		if err != nil {
			err = fmt.Errorf("clickhouse %s: spill %d windows of table %s: %w", s.t.Addr, b.n, x.table, err)
			s.lastErr = err
			return err
		}
	}
	s.spilled += b.n
	return nil
}

// loadSpill reads and removes the spill files of an earlier run, as one
// batch (nil if there are none).
func (s *Sink) loadSpill() (*batch, error) {
	b := &batch{}
	for _, x := range []struct {
		table string
		rows  *[]byte
	}{{TableWindows, &b.windows}, {TableFlows, &b.flows}} {
		data, err := os.ReadFile(s.spillPath(x.table))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = os.Remove(s.spillPath(x.table))
		}
		if err != nil {
			return nil, fmt.Errorf("clickhouse %s: load spilled rows: %w", s.t.Addr, err)
		}
		*x.rows = data
	}
	if b.windows == nil && b.flows == nil {
		return nil, nil
	}
	b.n = bytes.Count(b.windows, []byte("\n"))
	return b, nil
}

// Stats counts windows by what became of their rows.
type Stats struct {
	Inserted, Spilled int
}

// Stats returns the counts so far.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Inserted: s.inserted, Spilled: s.spilled}
}

// Close flushes, waits at most the close timeout for the queued batches to
// be inserted, spills the rest and returns an error wrapping [ErrPending]
// that says where, if any window was spilled. Close is idempotent.
func (s *Sink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.Flush()
	close(s.queue)
	t := time.AfterFunc(s.cfg.CloseTimeout, s.cancel)
	<-s.done
	t.Stop()
	s.cancel()
	st := s.Stats()
	if st.Spilled > 0 {
		s.mu.Lock()
		why := "the queue was full"
		if s.lastErr != nil {
			why = "last error: " + s.lastErr.Error()
		}
		s.mu.Unlock()
		err = errors.Join(err, fmt.Errorf("clickhouse %s: %d windows inserted, %d pending in %s and %s (a later run loads them; %s): %w",
			s.t.Addr, st.Inserted, st.Spilled, s.spillPath(TableWindows), s.spillPath(TableFlows), why, ErrPending))
	}
	return err
}
