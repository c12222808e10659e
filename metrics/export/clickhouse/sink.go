package clickhouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
)

// Errors.
var (
	// ErrPending is wrapped by Close's error when rows were spilled
	// instead of inserted.
	ErrPending = errors.New("report rows pending in the spill directory")
	// ErrRefused is wrapped by Close's error when windows were refused:
	// by the server, or because ClickHouse cannot hold their time.
	ErrRefused = errors.New("report rows refused")
	// ErrSchema is wrapped when a table of the database is not what the
	// sink writes (an earlier rocescope's, or someone else's).
	ErrSchema = errors.New("table of another schema")
)

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
	// Timeout bounds one HTTP request (default 30s), and DialTimeout the
	// connection (default 5s).
	Timeout     time.Duration
	DialTimeout time.Duration
	// MaxBackoff bounds the wait between retries (default 10s).
	MaxBackoff time.Duration
	// CloseTimeout bounds how long Close waits for the queue to drain
	// (default 30s); what is left is spilled.
	CloseTimeout time.Duration
	// ErrorLog receives a line when inserting starts to fail and when it
	// works again, for each window refused, and for each spill file
	// loaded or left alone; nil discards them.
	ErrorLog io.Writer
}

func (c *Config) withDefaults() Config {
	var d Config
	if c != nil {
		d = *c
	}
	for _, x := range []struct {
		v   *int
		def int
	}{{&d.BatchWindows, 10}, {&d.Queue, 64}, {&d.QueueBytes, 256 << 20}} {
		if *x.v <= 0 {
			*x.v = x.def
		}
	}
	for _, x := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&d.Timeout, 30 * time.Second}, {&d.DialTimeout, 5 * time.Second}, {&d.MaxBackoff, 10 * time.Second}, {&d.CloseTimeout, 30 * time.Second}} {
		if *x.v <= 0 {
			*x.v = x.def
		}
	}
	if d.ErrorLog == nil {
		d.ErrorLog = io.Discard
	}
	return d
}

// Sink writes reports into ClickHouse; it implements export.Sink and
// export.Syncer. See the package doc.
type Sink struct {
	t      *Target
	cfg    Config
	log    *log.Logger
	client *http.Client
	dir    *spillDir
	rows   rowWriter
	cur    *batch
	queue  chan *batch
	free   chan *batch  // batches sent, whose buffers Flush reuses
	queued atomic.Int64 // bytes of the batches in the queue or being sent
	done   chan struct{}
	stop   context.Context // done when Close's time is up
	cancel context.CancelFunc
	closed bool
	seq    uint64 // of the last batch queued

	// The sender's own.
	ready    bool      // the tables exist and are the sink's
	failures int       // requests failed in a row
	lastSaid string    // the last failure logged
	nextDrop time.Time // when to look for days past the TTL again

	mu       sync.Mutex // guards what follows, shared with the sender
	stats    Stats
	lastErr  error
	spilled  string        // the spill file written
	refused  string        // the dead-letter file written
	sent     uint64        // seq of the last batch the sender is done with
	progress chan struct{} // closed, and made anew, when sent moves
}

var (
	_ export.Sink   = (*Sink)(nil)
	_ export.Syncer = (*Sink)(nil)
)

// Stats counts windows by what became of their rows.
type Stats struct {
	Inserted int // in the database
	Spilled  int // in the spill file, for a later run
	Refused  int // in the dead-letter file: the server refused them, or their time is out of range
	Lost     int // neither: the spill or dead-letter file could not be written
}

// New returns a Sink writing into t. It does not wait for the server: the
// database and tables are made, or checked, before the first insert. Rows
// spilled by an earlier run are loaded and sent first.
func New(t *Target, cfg *Config) (*Sink, error) {
	c := cfg.withDefaults()
	path := t.Spill
	if path == "" {
		var err error
		if path, err = DefaultSpillDir(t); err != nil {
			return nil, fmt.Errorf("clickhouse %s: %w", t.Addr, err)
		}
	}
	dir, err := openSpillDir(path)
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", t.Addr, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: c.DialTimeout}).DialContext
	s := &Sink{t: t, cfg: c, log: log.New(c.ErrorLog, "rocescope: clickhouse ", 0), dir: dir,
		client: &http.Client{Timeout: c.Timeout, Transport: transport},
		cur:    &batch{}, free: make(chan *batch, 2), done: make(chan struct{}), progress: make(chan struct{})}
	s.stop, s.cancel = context.WithCancel(context.Background())
	loaded, err := dir.load(func(format string, args ...any) { s.log.Printf(t.Addr+": "+format, args...) })
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", t.Addr, err)
	}
	s.queue = make(chan *batch, c.Queue+len(loaded))
	for _, b := range loaded {
		// First in line, whatever their size: the queue has room.
		s.log.Printf("%s: loading %d windows an earlier run spilled to %s", t.Addr, len(b.wins), b.file.path)
		b.bytes = b.size()
		s.queued.Add(b.bytes)
		s.seq++
		b.seq = s.seq
		s.queue <- b
	}
	go s.send()
	return s, nil
}

// Write adds the rows of r to the current batch, and queues the batch when
// it is full. A window ClickHouse's DateTime cannot hold (before 1970,
// from 2106) goes to the dead-letter file instead, with a line on the
// error log.
func (s *Sink) Write(r *report.Report) error {
	now := time.Now().UnixNano()
	if w := r.Window; w.Start < 0 || w.Start/1e9 >= maxDateTime {
		b := &batch{}
		s.rows.add(b, r, now)
		return s.refuse(b, "its start is out of the range of ClickHouse's DateTime (1970 to 2105)")
	}
	s.rows.add(s.cur, r, now)
	if len(s.cur.wins) >= s.cfg.BatchWindows {
		return s.Flush()
	}
	return nil
}

// Flush queues the current batch without waiting for the server; a batch
// that finds the queue full is spilled.
func (s *Sink) Flush() error {
	if len(s.cur.wins) == 0 {
		return nil
	}
	b := s.cur
	select {
	case s.cur = <-s.free:
	default:
		// Sized as the last: growing a batch of megabytes step by step
		// copies it several times, into fresh memory each time.
		s.cur = &batch{}
		for t := range b.rows {
			s.cur.rows[t] = make([]byte, 0, len(b.rows[t])+len(b.rows[t])/8)
		}
	}
	b.bytes = b.size()
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
// once every window written is inserted, or spilled or refused into a
// file and fsynced, or ctx is done. While the server is down, it waits.
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

// send delivers the queued batches until the queue is closed.
func (s *Sink) send() {
	defer close(s.done)
	for b := range s.queue {
		s.deliver(b)
		s.queued.Add(-b.bytes)
		s.mu.Lock()
		s.sent = b.seq
		close(s.progress)
		s.progress = make(chan struct{})
		s.mu.Unlock()
		if b.file == nil {
			// Fresh memory costs more than the rows written into it.
			for t := range b.rows {
				b.rows[t] = b.rows[t][:0]
			}
			*b = batch{rows: b.rows, wins: b.wins[:0]}
			select {
			case s.free <- b:
			default:
			}
		}
	}
}

// deliver inserts b, retrying with backoff until it is in or Close's time
// is up, and then spills it. When the server refuses a batch for good, it
// inserts its windows one by one and refuses those the server refuses.
// Once every row of a batch loaded from a spill file is in a table or a
// file again, the spill file is removed.
func (s *Sink) deliver(b *batch) {
	kept := true // every row is in the database or a file
	err := s.insert(b)
	switch {
	case err == nil:
		s.count(func(st *Stats) { st.Inserted += len(b.wins) })
	case isRefusal(err) && len(b.wins) > 1:
	each:
		for i := range b.wins {
			one := b.one(i)
			switch err := s.insert(one); {
			case err == nil:
				s.count(func(st *Stats) { st.Inserted++ })
			case isRefusal(err):
				kept = s.refuse(one, err.Error()) == nil && kept
			default:
				kept = s.spill(b.from(i)) == nil && kept
				break each
			}
		}
	case isRefusal(err):
		kept = s.refuse(b, err.Error()) == nil
	default:
		kept = s.spill(b) == nil
	}
	if b.file == nil {
		return
	}
	if !kept {
		s.log.Printf("%s: %s kept, for its rows are not all in the database or another file", s.t.Addr, b.file.path)
		b.file.f.Close()
		return
	}
	if err := s.dir.done(b.file); err != nil {
		s.log.Printf("%s: its rows are in, but the spill file stays: %v", s.t.Addr, err)
	}
}

// insert inserts b, retrying with backoff until the server takes it or
// refuses it for good, or Close's time is up. It returns nil once b is
// in, else the last error.
func (s *Sink) insert(b *batch) error {
	err := errors.New("not sent: the time to close was up")
	for wait := 100 * time.Millisecond; s.stop.Err() == nil; wait = min(2*wait, s.cfg.MaxBackoff) {
		if err = s.insertOnce(b); err == nil || isRefusal(err) {
			if s.failures > 0 {
				s.log.Printf("%s: the server takes rows again, after %d failed requests", s.t.Addr, s.failures)
			}
			s.failures, s.lastSaid = 0, ""
			return err
		}
		s.failures++
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		if msg := err.Error(); s.failures == 1 || errors.Is(err, ErrSchema) && msg != s.lastSaid {
			s.log.Printf("%s: %v; trying again (every %v at most) while rows wait in memory, then in %s", s.t.Addr, err, s.cfg.MaxBackoff, s.dir.path)
			s.lastSaid = msg
		}
		select {
		case <-time.After(wait):
		case <-s.stop.Done():
		}
	}
	return err
}

// insertOnce makes or checks the tables if need be, drops the days past
// the TTL when it is time, and inserts b, table by table.
func (s *Sink) insertOnce(b *batch) error {
	if !s.ready {
		if err := s.setup(); err != nil {
			return err
		}
		s.ready = true
	}
	if now := time.Now(); s.t.TTL > 0 && !now.Before(s.nextDrop) {
		// Rows go in even if old days cannot be dropped.
		if err := s.dropExpired(now); err != nil {
			s.log.Printf("%s: dropping the days older than the ttl: %v; trying again in an hour", s.t.Addr, err)
		}
		s.nextDrop = now.Add(time.Hour)
	}
	for t := range tables {
		if len(b.rows[t]) == 0 {
			continue
		}
		if _, err := s.post(fmt.Sprintf("INSERT INTO `%s`.`%s` FORMAT JSONEachRow", s.t.Database, tables[t].name), b.rows[t]); err != nil {
			if se := (*serverError)(nil); errors.As(err, &se) && se.status == http.StatusNotFound {
				s.ready = false // a table or the database was dropped
			}
			return err
		}
	}
	return nil
}

// count updates the stats.
func (s *Sink) count(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// spill appends b's rows to the spill file.
func (s *Sink) spill(b *batch) error {
	path, err := s.dir.spill(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.stats.Lost += len(b.wins)
		s.lastErr = fmt.Errorf("clickhouse %s: spill %s: %w", s.t.Addr, windows(b), err)
		s.log.Print(s.lastErr)
		return s.lastErr
	}
	s.stats.Spilled += len(b.wins)
	s.spilled = path
	return nil
}

// refuse appends b's rows to the dead-letter file, and says so.
func (s *Sink) refuse(b *batch, why string) error {
	path, err := s.dir.refuse(b, why)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.stats.Lost += len(b.wins)
		s.lastErr = fmt.Errorf("clickhouse %s: %s refused (%s), and not kept: %w", s.t.Addr, windows(b), why, err)
		s.log.Print(s.lastErr)
		return s.lastErr
	}
	s.stats.Refused += len(b.wins)
	s.refused = path
	s.log.Printf("%s: %s refused: %s; its rows are in %s, the others go on", s.t.Addr, windows(b), why, path)
	return nil
}

// windows names the windows of b in messages.
func windows(b *batch) string {
	if len(b.wins) == 1 {
		return "window " + b.wins[0].String()
	}
	return fmt.Sprintf("%d windows from %s to %s", len(b.wins), b.wins[0].String(), b.wins[len(b.wins)-1].String())
}

// Stats returns the counts so far.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close flushes, waits at most the close timeout for the queued batches to
// be inserted, and spills the rest. It returns an error wrapping
// [ErrPending] that says where, if any window was spilled, and one
// wrapping [ErrRefused] if any was refused. Close is idempotent.
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
	err = errors.Join(err, s.dir.close())
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	if st.Spilled > 0 {
		why := "the queue was full"
		if s.lastErr != nil {
			why = "last error: " + s.lastErr.Error()
		}
		err = errors.Join(err, fmt.Errorf("clickhouse %s: %d windows inserted, %d pending in %s (a later run loads them; %s): %w",
			s.t.Addr, st.Inserted, st.Spilled, s.spilled, why, ErrPending))
	}
	if st.Refused > 0 {
		err = errors.Join(err, fmt.Errorf("clickhouse %s: %d windows refused, their rows kept in %s: %w", s.t.Addr, st.Refused, s.refused, ErrRefused))
	}
	if st.Lost > 0 {
		err = errors.Join(err, fmt.Errorf("clickhouse %s: %d windows lost (last error: %v)", s.t.Addr, st.Lost, s.lastErr))
	}
	return err
}

// serverError is an answer of the server other than 200 OK.
type serverError struct {
	status int    // HTTP status
	code   int    // ClickHouse's exception code, 0 if none is given
	msg    string // the server's message, on one line
	rows   bool   // the request carried rows
}

func (e *serverError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.status, http.StatusText(e.status), e.msg)
}

// dataErrors are the exception codes of ClickHouse (the same in 18.16 and
// current releases) that refuse the rows of an INSERT, which the same
// rows will meet again: errors parsing the input. 18.16 answers most of
// them with status 500, so the code decides.
var dataErrors = map[int]bool{
	6:   true, // CANNOT_PARSE_TEXT
	25:  true, // CANNOT_PARSE_ESCAPE_SEQUENCE
	26:  true, // CANNOT_PARSE_QUOTED_STRING
	27:  true, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
	32:  true, // ATTEMPT_TO_READ_AFTER_EOF
	33:  true, // CANNOT_READ_ALL_DATA
	38:  true, // CANNOT_PARSE_DATE
	41:  true, // CANNOT_PARSE_DATETIME
	53:  true, // TYPE_MISMATCH
	69:  true, // ARGUMENT_OUT_OF_BOUND
	70:  true, // CANNOT_CONVERT_TYPE
	72:  true, // CANNOT_PARSE_NUMBER
	117: true, // INCORRECT_DATA
	130: true, // CANNOT_READ_ARRAY_FROM_TEXT
	190: true, // SIZES_OF_ARRAYS_DOESNT_MATCH
}

// isRefusal reports whether err is the server refusing the rows of an
// INSERT for good: an exception of parsing them, or a 400 Bad Request
// without a code. (The same answers to the queries that make or check
// the tables are no verdict on the rows.)
func isRefusal(err error) bool {
	var se *serverError
	return errors.As(err, &se) && se.rows && (dataErrors[se.code] || se.code == 0 && se.status == http.StatusBadRequest)
}

// post runs query with body as its data (or query alone if body is nil)
// and returns the answer.
func (s *Sink) post(query string, body []byte) ([]byte, error) {
	u := "http://" + s.t.Addr + "/"
	rd := io.Reader(strings.NewReader(query))
	if body != nil {
		u += "?" + url.Values{"query": {query}, "input_format_skip_unknown_fields": {"1"}}.Encode()
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(s.stop, http.MethodPost, u, rd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		se := &serverError{status: resp.StatusCode, msg: strings.Join(strings.Fields(string(msg)), " "), rows: body != nil}
		if len(se.msg) > 1000 {
			se.msg = se.msg[:1000] + "..."
		}
		code := resp.Header.Get("X-ClickHouse-Exception-Code")
		if code == "" {
			code, _, _ = strings.Cut(strings.TrimPrefix(se.msg, "Code: "), ",")
			code, _, _ = strings.Cut(code, ".")
		}
		se.code, _ = strconv.Atoi(code)
		return nil, fmt.Errorf("%s: %w", firstWords(query), se)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	return msg, nil
}

// firstWords shortens a query for messages.
func firstWords(q string) string {
	if i := strings.Index(q, " ("); i > 0 {
		return q[:i]
	}
	return q
}
