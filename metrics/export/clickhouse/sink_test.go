package clickhouse

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
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
		r.Top = append(r.Top, f)
	}
	return r
}

// TestSpillAndLoad writes reports to a server that is not there: Close
// must spill them and say so, and a later Sink must load the spill files
// into a running server, row for row, and remove them.
func TestSpillAndLoad(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close() // nothing listens there now
	spill := filepath.Join(dir, "spill")
	s, err := New(&Target{Addr: down, Database: "spilled", Spill: spill}, &Config{BatchWindows: 2, MaxBackoff: 20 * time.Millisecond, CloseTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Write(testReport(i)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	err = s.Close()
	if !errors.Is(err, ErrPending) {
		t.Fatalf("Close with the server down: %v, want ErrPending", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with a close timeout of 300ms", d)
	}
	if got := s.Stats(); got != (Stats{Spilled: 3}) {
		t.Errorf("stats %+v, want 3 spilled", got)
	}
	for _, table := range []string{TableWindows, TableFlows} {
		if _, err := os.Stat(spill + "." + table); err != nil {
			t.Errorf("spill file of %s: %v", table, err)
		}
	}

	addr := clickhousetest.Start(t)
	s, err = New(&Target{Addr: addr, Database: "spilled", Spill: spill}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(testReport(3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got != (Stats{Inserted: 4}) {
		t.Errorf("stats %+v, want 4 inserted", got)
	}
	for _, table := range []string{TableWindows, TableFlows} {
		if _, err := os.Stat(spill + "." + table); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("spill file of %s still there: %v", table, err)
		}
	}
	got, err := clickhousetest.Query(addr, "SELECT window_start_ns, host, hosts, packets, bytes FROM spilled.windows ORDER BY window_start_ns FORMAT JSONEachRow", "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"window_start_ns":"1700000000000000000","host":"a,b","hosts":["a","b"],"packets":"0","bytes":"1"}
{"window_start_ns":"1700000001000000000","host":"a,b","hosts":["a","b"],"packets":"10","bytes":"11"}
{"window_start_ns":"1700000002000000000","host":"a,b","hosts":["a","b"],"packets":"20","bytes":"21"}
{"window_start_ns":"1700000003000000000","host":"a,b","hosts":["a","b"],"packets":"30","bytes":"31"}
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("windows (-want +got):\n%s", diff)
	}
	got, err = clickhousetest.Query(addr, "SELECT window_start_ns, dqp, in_top, elephant, rate_bps, read_latency_count FROM spilled.flows ORDER BY window_start_ns, dqp FORMAT JSONEachRow", "")
	if err != nil {
		t.Fatal(err)
	}
	want = ""
	for i := range 4 {
		for j := range 2 {
			want += `{"window_start_ns":"` + itoa(1_700_000_000_000_000_000+int64(i)*1e9) + `","dqp":"` + itoa(int64(100*i+j)) +
				`","in_top":1,"elephant":` + itoa(int64(1-j)) + `,"rate_bps":` + itoa(int64(1000*i+j)) + `,"read_latency_count":"` + itoa(int64(j)) + "\"}\n"
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flows (-want +got):\n%s", diff)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestQueueBound writes batches larger than the queue may hold: each must
// be spilled when it is flushed, without waiting for the server, and Close
// must say why.
func TestQueueBound(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	spill := filepath.Join(t.TempDir(), "spill")
	s, err := New(&Target{Addr: down, Database: "bound", Spill: spill}, &Config{BatchWindows: 1, QueueBytes: 100, CloseTimeout: time.Second})
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
	data, err := os.ReadFile(spill + "." + TableWindows)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 3 {
		t.Errorf("%d window rows spilled, want 3", n)
	}
}

// TestSync: Sync returns once the rows written are in the database: while
// the server fails every request it waits, until its context ends, and
// says so; once the server takes them, it returns with every window
// inserted.
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
	s, err := New(&Target{Addr: srv.Listener.Addr().String(), Database: "d", Spill: filepath.Join(t.TempDir(), "spill")},
		&Config{MaxBackoff: 20 * time.Millisecond})
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
}
