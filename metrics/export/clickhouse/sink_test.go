package clickhouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/internal/clickhousetest"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// testReport returns a report of window i with two flows in its top list.
func testReport(i int) *report.Report {
	w := &metrics.Window{Start: 1_700_000_000_000_000_000 + int64(i)*1e9, Length: 1e9, Hosts: []string{"a", "b"}}
	w.Counters = metrics.Counters{}
	for c := range w.Counters {
		w.Counters[c] = uint64(10*i + c%7)
	}
	r := &report.Report{Window: w}
	for j := range 2 {
		f := report.FlowReport{Rate: float64(1000*i + j), Elephant: j == 0}
		f.Key.DQP = uint32(100*i + j)
		f.C[metrics.FlowReadLatencyCount] = uint64(j)
		f.C[metrics.FlowCNP] = uint64(i + j)
		r.Top = append(r.Top, f)
	}
	return r
}

// logBuffer is an error log that tests read while the sink writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// downAddr returns an address nothing listens on.
func downAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// query runs q on the server and returns its answer.
func query(t *testing.T, addr, q string) string {
	t.Helper()
	out, err := clickhousetest.Query(addr, q, "")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeAll writes reports into a new sink on target and closes it.
func writeAll(t *testing.T, target *Target, cfg *Config, reports ...*report.Report) (Stats, error) {
	t.Helper()
	s, err := New(target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	err = s.Close()
	return s.Stats(), err
}

// spillFiles returns the names of the files in dir with suffix.
func spillFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// spilledRows returns the row lines of the spill files in dir, in order.
func spilledRows(t *testing.T, dir, suffix string) string {
	t.Helper()
	var rows strings.Builder
	for _, f := range spillFiles(t, dir, suffix) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			if !strings.HasPrefix(line, "#") {
				rows.WriteString(line)
			}
		}
	}
	return rows.String()
}

// wantWindows is what table windows holds of testReport(i) for each i.
func wantWindows(is ...int) string {
	var b strings.Builder
	for _, i := range is {
		start := 1_700_000_000 + int64(i)
		fmt.Fprintf(&b, `{"window_start":"%s","window_start_ns":"%d","host":"a,b","hosts":["a","b"],"packets":"%d","bytes":"%d"}`+"\n",
			time.Unix(start, 0).UTC().Format(time.DateTime), start*1e9, 10*i, 10*i+1)
	}
	return b.String()
}

const selectWindows = "SELECT window_start, window_start_ns, host, hosts, packets, bytes FROM %s.windows FINAL ORDER BY window_start_ns FORMAT JSONEachRow"

// TestSpillAndLoad writes reports to a server that is not there: Close
// must spill them into a private directory and say so, and a later Sink
// must load the spill file into a running server, row for row, and
// remove it.
func TestSpillAndLoad(t *testing.T) {
	spill := filepath.Join(t.TempDir(), "spill")
	var log logBuffer
	start := time.Now()
	st, err := writeAll(t, &Target{Addr: downAddr(t), Database: "spilled", Spill: spill},
		&Config{BatchWindows: 2, MaxBackoff: 20 * time.Millisecond, CloseTimeout: 300 * time.Millisecond, ErrorLog: &log},
		testReport(0), testReport(1), testReport(2))
	if !errors.Is(err, ErrPending) {
		t.Fatalf("Close with the server down: %v, want ErrPending", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %v with a close timeout of 300ms", d)
	}
	if st != (Stats{Spilled: 3}) {
		t.Errorf("stats %+v, want 3 spilled", st)
	}
	files := spillFiles(t, spill, spillSuffix)
	if len(files) != 1 || !strings.Contains(err.Error(), files[0]) {
		t.Fatalf("spill files %q; Close said %v", files, err)
	}
	for path, want := range map[string]os.FileMode{spill: 0o700 | os.ModeDir, files[0]: 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, want)
		}
	}

	addr := clickhousetest.Start(t)
	log = logBuffer{}
	st, err = writeAll(t, &Target{Addr: addr, Database: "spilled", Spill: spill}, &Config{ErrorLog: &log}, testReport(3))
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stats{Inserted: 4}) {
		t.Errorf("stats %+v, want 4 inserted", st)
	}
	if !strings.Contains(log.String(), "loading 3 windows an earlier run spilled to "+files[0]) {
		t.Errorf("the sink did not say it loads the spill file: %q", log.String())
	}
	if left := spillFiles(t, spill, ""); len(left) > 0 {
		t.Errorf("files %q still in the spill directory", left)
	}
	if diff := cmp.Diff(wantWindows(0, 1, 2, 3), query(t, addr, fmt.Sprintf(selectWindows, "spilled"))); diff != "" {
		t.Errorf("windows (-want +got):\n%s", diff)
	}
	got := query(t, addr, "SELECT window_start_ns, window_ns, covered_ns, dqp, in_top, elephant, rate_bps, read_latency_count, cnp FROM spilled.flows FINAL ORDER BY window_start_ns, dqp FORMAT JSONEachRow")
	want := ""
	for i := range 4 {
		for j := range 2 {
			want += fmt.Sprintf(`{"window_start_ns":"%d","window_ns":"1000000000","covered_ns":"0","dqp":%d,"in_top":1,"elephant":%d,"rate_bps":%d,"read_latency_count":"%d","cnp":"%d"}`+"\n",
				1_700_000_000_000_000_000+int64(i)*1e9, 100*i+j, 1-j, 1000*i+j, j, i+j)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flows (-want +got):\n%s", diff)
	}
}

// TestLoadKeepsSpill: a sink that loaded a spill file and cannot insert
// its rows must leave them on disk: while it runs (a kill -9 then loses
// nothing), and after Close. ac4ba8c removed the spill files as it read
// them.
func TestLoadKeepsSpill(t *testing.T) {
	spill := filepath.Join(t.TempDir(), "spill")
	target := &Target{Addr: downAddr(t), Database: "kept", Spill: spill}
	cfg := &Config{MaxBackoff: 20 * time.Millisecond, CloseTimeout: 300 * time.Millisecond}
	if _, err := writeAll(t, target, cfg, testReport(0), testReport(1)); !errors.Is(err, ErrPending) {
		t.Fatalf("Close with the server down: %v, want ErrPending", err)
	}
	want := spilledRows(t, spill, spillSuffix)
	if strings.Count(want, "\n") != 6 {
		t.Fatalf("spilled %q, want 2 window rows and 4 flow rows", want)
	}
	s, err := New(target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // some failed inserts
	if got := spilledRows(t, spill, spillSuffix); got != want {
		t.Errorf("while the sink that loaded them runs, the spill files hold %q, want %q", got, want)
	}
	if err := s.Close(); !errors.Is(err, ErrPending) {
		t.Errorf("Close with the server down: %v, want ErrPending", err)
	}
	if got := spilledRows(t, spill, spillSuffix); got != want {
		t.Errorf("after Close, the spill files hold %q, want %q", got, want)
	}
}

// TestQueueBound writes batches larger than the queue may hold: each must
// be spilled when it is flushed, without waiting for the server, and Close
// must say why.
func TestQueueBound(t *testing.T) {
	spill := filepath.Join(t.TempDir(), "spill")
	s, err := New(&Target{Addr: downAddr(t), Database: "bound", Spill: spill}, &Config{BatchWindows: 1, QueueBytes: 100, CloseTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Write(testReport(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats(); got != (Stats{Spilled: 3}) {
		t.Errorf("stats before Close %+v, want 3 spilled", got)
	}
	if err := s.Close(); !errors.Is(err, ErrPending) || !strings.Contains(err.Error(), "the queue was full") {
		t.Errorf("Close: %v, want ErrPending because the queue was full", err)
	}
	if n := strings.Count(spilledRows(t, spill, spillSuffix), TableWindows+"\t"); n != 3 {
		t.Errorf("%d window rows spilled, want 3", n)
	}
}

// TestSync: Sync returns once the rows written are in the database: while
// the server fails every request it waits, until its context ends, and
// says so; once the server takes them, it returns with every window
// inserted. The error log says at once that the server fails, and when
// it works again.
func TestSync(t *testing.T) {
	var mu sync.Mutex
	up, rows := false, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !up {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(r.URL.Query().Get("query"), "INSERT INTO `d`.`windows`") {
			rows += strings.Count(string(body), "\n")
		}
	}))
	defer srv.Close()
	var log logBuffer
	s, err := New(&Target{Addr: srv.Listener.Addr().String(), Database: "d", Spill: filepath.Join(t.TempDir(), "spill")},
		&Config{MaxBackoff: 20 * time.Millisecond, ErrorLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 2 {
		if err := s.Write(testReport(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := s.Sync(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "503") {
		t.Errorf("Sync with the server failing: %v, want the deadline and the server's answer", err)
	}
	if l := log.String(); strings.Count(l, "\n") != 1 || !strings.Contains(l, srv.Listener.Addr().String()+": CREATE DATABASE IF NOT EXISTS `d`: 503 Service Unavailable: down; trying again") {
		t.Errorf("error log with the server failing: %q, want one line that says so", l)
	}
	mu.Lock()
	up = true
	mu.Unlock()
	for i, want := range []int{2, 3} {
		if i > 0 {
			if err := s.Write(testReport(2)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := rows
		mu.Unlock()
		if got != want || s.Stats().Inserted != want {
			t.Errorf("after Sync %d: %d window rows received, %d inserted; want %d", i, got, s.Stats().Inserted, want)
		}
	}
	if l := log.String(); !strings.Contains(l, "the server takes rows again, after") {
		t.Errorf("error log after the server is back: %q, want a line that says so", l)
	}
}

// TestDownSaidAtOnce: with the server down, the error log says so once
// the first insert fails, not after the request timeout (ac4ba8c said
// nothing until Close had waited 30 s).
func TestDownSaidAtOnce(t *testing.T) {
	var log logBuffer
	addr := downAddr(t)
	s, err := New(&Target{Addr: addr, Database: "d", Spill: filepath.Join(t.TempDir(), "spill")}, &Config{ErrorLog: &log, CloseTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Write(testReport(0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), addr+": CREATE DATABASE"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the first insert into a server that is down, the error log holds %q", log.String())
		}
	}
	if l := log.String(); !strings.Contains(l, "connection refused") {
		t.Errorf("error log %q does not say why", l)
	}
}

// TestRefusalRule: which answers of a server refuse rows for good (not
// retried) and which are trouble to wait out, in 18.16's words and a
// current release's.
func TestRefusalRule(t *testing.T) {
	for _, tc := range []struct {
		status int
		header string // X-ClickHouse-Exception-Code
		body   string
		rows   bool // an INSERT of rows, not a query
		want   bool
	}{
		{500, "", "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected { before: garbage: (at row 1)\n, e.what() = DB::Exception\n", true, true},
		{400, "", "Code: 72, e.displayText() = DB::Exception: Unsigned type must not contain '-' symbol: (while read the value of key written_ns): (at row 1)", true, true},
		{500, "33", "Code: 33. DB::Exception: Cannot read all data. (CANNOT_READ_ALL_DATA) (version 23.8.1.1)", true, true},
		{500, "", "Code: 6. DB::Exception: Cannot parse string 'x' as UInt64. (CANNOT_PARSE_TEXT)", true, true},
		{400, "", "Bad Request", true, true},
		{400, "", "Code: 62, e.displayText() = DB::Exception: Syntax error", false, false},
		{500, "", "Code: 241, e.displayText() = DB::Exception: Memory limit (for query) exceeded", true, false},
		{500, "", "Code: 252, e.displayText() = DB::Exception: Too many parts (300)", true, false},
		{404, "", "Code: 60, e.displayText() = DB::Exception: Table d.windows doesn't exist., e.what() = DB::Exception", true, false},
		{401, "", "Code: 516. DB::Exception: default: Authentication failed", true, false},
		{503, "", "down", true, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.header != "" {
				w.Header().Set("X-ClickHouse-Exception-Code", tc.header)
			}
			http.Error(w, tc.body, tc.status)
		}))
		s := &Sink{t: &Target{Addr: srv.Listener.Addr().String()}, client: srv.Client(), stop: context.Background()}
		var body []byte
		if tc.rows {
			body = []byte("{}\n")
		}
		_, err := s.post("INSERT INTO `d`.`windows` FORMAT JSONEachRow", body)
		srv.Close()
		if got := isRefusal(err); got != tc.want {
			t.Errorf("%d %q: refusal %v, want %v (%v)", tc.status, tc.body, got, tc.want, err)
		}
	}
	if isRefusal(errors.New("dial tcp: connection refused")) {
		t.Error("a connection refused is a refusal of the rows")
	}
}
