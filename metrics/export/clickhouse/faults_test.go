package clickhouse

import (
	"bytes"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/internal/clickhousetest"
	"github.com/rocescope/rocescope/metrics/report"
)

// TestRerunIdempotent writes the same reports twice, as two runs of one
// capture do: read with FINAL, and once ClickHouse merged the parts, each
// window and flow is there once (ac4ba8c doubled every row). A window of
// another segment is another row.
func TestRerunIdempotent(t *testing.T) {
	addr := clickhousetest.Start(t)
	target := &Target{Addr: addr, Database: "rerun", Spill: filepath.Join(t.TempDir(), "spill")}
	reports := []*report.Report{testReport(0), testReport(1), testReport(2), testReport(3)}
	for run := range 2 {
		if st, err := writeAll(t, target, nil, reports...); err != nil || st != (Stats{Inserted: 4}) {
			t.Fatalf("run %d: %+v, %v", run, st, err)
		}
	}
	check := func(final string) {
		t.Helper()
		if diff := cmp.Diff(wantWindows(0, 1, 2, 3), query(t, addr, strings.Replace(fmt.Sprintf(selectWindows, "rerun"), " FINAL", final, 1))); diff != "" {
			t.Errorf("windows%s (-want +got):\n%s", final, diff)
		}
		// cnp of flow j of window i is i+j.
		if got := query(t, addr, "SELECT count(), sum(cnp) FROM rerun.flows"+final+" FORMAT TSV"); got != "8\t16\n" {
			t.Errorf("flows%s: count and sum of cnp %q, want 8 and 16", final, got)
		}
	}
	check(" FINAL")
	for _, table := range []string{TableWindows, TableFlows} {
		query(t, addr, "OPTIMIZE TABLE rerun."+table+" FINAL")
	}
	check("")

	seg := testReport(0)
	seg.Window.Segment = 1
	if _, err := writeAll(t, target, nil, seg); err != nil {
		t.Fatal(err)
	}
	if got := query(t, addr, "SELECT segment, count() FROM rerun.windows FINAL WHERE window_start_ns = 1700000000000000000 GROUP BY segment ORDER BY segment FORMAT TSV"); got != "0\t1\n1\t1\n" {
		t.Errorf("the window of segments 0 and 1: rows by segment %q, want one each", got)
	}
}

// slowProxy forwards connections to a server and holds the answer to
// the first INSERT for a while: the server commits its rows, but the
// sink, whose timeout is shorter, does not hear it and sends them again.
type slowProxy struct {
	addr    string
	inserts atomic.Int32
	mu      sync.Mutex
	held    string // the status line of the answer held
}

func startSlowProxy(t *testing.T, server string, hold time.Duration) *slowProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &slowProxy{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", server)
			if err != nil {
				c.Close()
				continue
			}
			var holdNext atomic.Bool
			go func() { // requests
				defer s.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if bytes.Contains(buf[:n], []byte("query=INSERT+INTO")) && p.inserts.Add(1) == 1 {
						holdNext.Store(true)
					}
					if _, werr := s.Write(buf[:n]); err != nil || werr != nil {
						return
					}
				}
			}()
			go func() { // answers
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 && holdNext.Swap(false) {
						p.mu.Lock()
						p.held = string(firstLine(buf[:n]))
						p.mu.Unlock()
						time.Sleep(hold)
					}
					if _, werr := c.Write(buf[:n]); err != nil || werr != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

// TestSlowInsert: the server commits an INSERT but its answer comes after
// the sink's timeout, so the sink sends the rows again. They land twice,
// and read with FINAL (or once merged) they are there once.
func TestSlowInsert(t *testing.T) {
	addr := clickhousetest.Start(t)
	p := startSlowProxy(t, addr, 6*time.Second)
	var log logBuffer
	st, err := writeAll(t, &Target{Addr: p.addr, Database: "slow", Spill: filepath.Join(t.TempDir(), "spill")},
		&Config{Timeout: 2 * time.Second, MaxBackoff: 100 * time.Millisecond, ErrorLog: &log}, testReport(0), testReport(1))
	if err != nil || st != (Stats{Inserted: 2}) {
		t.Fatalf("%+v, %v", st, err)
	}
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if n := p.inserts.Load(); n != 3 || held != "HTTP/1.1 200 OK\r" || !strings.Contains(log.String(), "Client.Timeout") {
		t.Fatalf("%d inserts sent, the answer held %q, error log %q: want the first insert of windows committed, timed out and sent again (3 inserts)", n, held, log.String())
	}
	if diff := cmp.Diff(wantWindows(0, 1), query(t, addr, fmt.Sprintf(selectWindows, "slow"))); diff != "" {
		t.Errorf("windows (-want +got):\n%s", diff)
	}
	query(t, addr, "OPTIMIZE TABLE slow.windows FINAL")
	if got := query(t, addr, "SELECT count() FROM slow.windows"); got != "2\n" {
		t.Errorf("%s window rows once merged, want 2", got)
	}
}

// TestRefusals: rows the server refuses for good, or a window ClickHouse
// cannot hold (before 1970), go to the dead-letter file with a line on
// the error log, and every other row goes on; a spill file's torn last
// line goes there too, and the rows before it are loaded. ac4ba8c
// retried a refused batch for ever, and every later batch waited behind
// it.
func TestRefusals(t *testing.T) {
	addr := clickhousetest.Start(t)
	spill := filepath.Join(t.TempDir(), "spill")
	target := &Target{Addr: addr, Database: "refused", Spill: spill}
	var log logBuffer
	early := testReport(9)
	early.Window.Start = -5e9
	st, err := writeAll(t, target, &Config{ErrorLog: &log}, testReport(0), early, testReport(1))
	if !errors.Is(err, ErrRefused) || st != (Stats{Inserted: 2, Refused: 1}) {
		t.Fatalf("a window before 1970: %+v, %v; want it refused and the others inserted", st, err)
	}
	dead := spillFiles(t, spill, refusedSuffix)
	if len(dead) != 1 || !strings.Contains(log.String(), "window 1969-12-31T23:59:55Z of host a,b refused: its start is out of the range of ClickHouse's DateTime (1970 to 2105); its rows are in "+dead[0]) {
		t.Fatalf("dead-letter files %q, error log %q", dead, log.String())
	}
	if rows := spilledRows(t, spill, refusedSuffix); strings.Count(rows, "\n") != 3 || !strings.Contains(rows, `"window_start_ns":-5000000000`) {
		t.Errorf("dead-letter rows %q, want the early window's row and its 2 flows", rows)
	}

	// A spill file with a window the server refuses between two good
	// ones, and a torn last line.
	var good [2]batch
	var rw rowWriter
	for i := range good {
		rw.add(&good[i], testReport(5+i), 1)
	}
	bad := `windows` + "\t" + `{"window_start":"2023-11-14 22:13:27","window_start_ns":1700000007000000000,"packets":"x"}` + "\n" +
		`flows` + "\t" + `{"window_start":"2023-11-14 22:13:27","window_start_ns":1700000007000000000,"dqp":7}` + "\n"
	torn := `flows` + "\t" + `{"window_start":"2023-11-14 22:1`
	file := filepath.Join(spill, "0-earlier.spill")
	text := spillHeader + string(appendSpillLines(nil, &good[0])) + bad + string(appendSpillLines(nil, &good[1])) + torn
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	log = logBuffer{}
	st, err = writeAll(t, target, &Config{ErrorLog: &log}, testReport(7))
	if !errors.Is(err, ErrRefused) || st != (Stats{Inserted: 3, Refused: 1}) {
		t.Fatalf("a spill file with a refused window: %+v, %v; want it refused and the others inserted\n%s", st, err, log.String())
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the spill file is still there: %v", err)
	}
	if diff := cmp.Diff(wantWindows(0, 1, 5, 6, 7), query(t, addr, fmt.Sprintf(selectWindows, "refused"))); diff != "" {
		t.Errorf("windows (-want +got):\n%s", diff)
	}
	dead = spillFiles(t, spill, refusedSuffix)
	l := log.String()
	for _, want := range []string{
		file + ": its last line was cut by a crash (" + fmt.Sprint(len(torn)) + " bytes, not a whole row): kept in ",
		"window 2023-11-14T22:13:27Z refused: INSERT INTO `refused`.`windows` FORMAT JSONEachRow: ",
		"(while read the value of key packets)",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("error log %q does not say %q", l, want)
		}
	}
	if rows := spilledRows(t, spill, refusedSuffix); !strings.Contains(rows, bad) || !strings.Contains(rows, torn+"\n") {
		t.Errorf("dead-letter files %q hold %q; want the refused window's rows and the torn line", dead, rows)
	}
}

// TestSpillDirPrivate: the spill directory is the user's, made 0700; a
// directory others may write, and files that are links, others' or
// writable by others, are not used (ac4ba8c spilled to a fixed name in
// /tmp and loaded whatever it found there, through links).
func TestSpillDirPrivate(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		state := t.TempDir()
		t.Setenv("STATE_DIRECTORY", "")
		t.Setenv("XDG_STATE_HOME", state)
		addr := downAddr(t)
		if _, err := writeAll(t, &Target{Addr: addr, Database: "d"}, &Config{CloseTimeout: 100 * time.Millisecond}, testReport(0)); !errors.Is(err, ErrPending) {
			t.Fatalf("Close with the server down: %v, want ErrPending", err)
		}
		dir := filepath.Join(state, "rocescope", "clickhouse", strings.ReplaceAll(addr, ":", "_")+"-d")
		files := spillFiles(t, dir, spillSuffix)
		if len(files) != 1 {
			t.Fatalf("spill files in %s: %q", dir, files)
		}
		for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, files[0]: 0o600} {
			if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
				t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, want)
			}
		}
	})
	t.Run("shared directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "shared")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o1777); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(t.TempDir(), link); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{dir, link} {
			if _, err := New(&Target{Addr: downAddr(t), Database: "d", Spill: path}, nil); !errors.Is(err, errNotPrivate) {
				t.Errorf("spill directory %s: %v, want it refused", path, err)
			}
		}
	})
	t.Run("planted files", func(t *testing.T) {
		var inserted atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Query().Get("query"), "INSERT") {
				body, _ := io.ReadAll(r.Body)
				inserted.Add(int32(bytes.Count(body, []byte("\n"))))
			}
		}))
		defer srv.Close()
		var b batch
		var rw rowWriter
		rw.add(&b, testReport(0), 1)
		rows := []byte(spillHeader + string(appendSpillLines(nil, &b)))
		dir := filepath.Join(t.TempDir(), "spill")
		secret := filepath.Join(t.TempDir(), "secret")
		for _, path := range []string{dir, filepath.Join(dir, "writable.spill"), filepath.Join(dir, "others.spill"), secret} {
			if path == dir {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(path, rows, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(secret, filepath.Join(dir, "link.spill")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, "writable.spill"), 0o666); err != nil {
			t.Fatal(err)
		}
		wantSaid := []string{"link.spill: a symbolic link", "writable.spill: other users may write it (mode 0666; chmod go-w)"}
		if os.Geteuid() == 0 {
			if err := os.Chown(filepath.Join(dir, "others.spill"), 65534, 65534); err != nil {
				t.Fatal(err)
			}
			wantSaid = append(wantSaid, "others.spill: owned by uid 65534, not by this user (uid 0)")
		} else {
			os.Remove(filepath.Join(dir, "others.spill"))
			t.Log("not root: a file of another user is not tried")
		}
		var log logBuffer
		if _, err := writeAll(t, &Target{Addr: srv.Listener.Addr().String(), Database: "d", Spill: dir}, &Config{ErrorLog: &log}); err != nil {
			t.Fatal(err)
		}
		if n := inserted.Load(); n != 0 {
			t.Errorf("%d planted rows inserted", n)
		}
		for _, want := range wantSaid {
			if !strings.Contains(log.String(), want) {
				t.Errorf("error log %q does not say %q", log.String(), want)
			}
		}
		if files := spillFiles(t, dir, ""); len(files) != len(wantSaid) {
			t.Errorf("files in the spill directory: %q; want the planted ones, untouched", files)
		}
	})
}

// TestOldSchema: a database whose tables an earlier rocescope made (plain
// MergeTree, JSON strings) is refused with a line that says what to do,
// and nothing is mixed into it; once the old tables are renamed away,
// the spilled rows go in. A table of the sink's that lacks a column (the
// report gained a key) gets it, a missing table is made; a table whose
// column has another type is refused.
func TestOldSchema(t *testing.T) {
	addr := clickhousetest.Start(t)
	query(t, addr, "CREATE DATABASE old")
	query(t, addr, "CREATE TABLE old.windows (window_start_ns UInt64, host String, packets UInt64) ENGINE = MergeTree() "+
		"PARTITION BY toYYYYMMDD(toDateTime(intDiv(window_start_ns, 1000000000))) ORDER BY (window_start_ns, host)")
	query(t, addr, "INSERT INTO old.windows VALUES (1, 'h', 5)")
	target := &Target{Addr: addr, Database: "old", Spill: filepath.Join(t.TempDir(), "spill")}
	var log logBuffer
	_, err := writeAll(t, target, &Config{CloseTimeout: time.Second, ErrorLog: &log}, testReport(0))
	if !errors.Is(err, ErrPending) || !strings.Contains(err.Error(), "RENAME TABLE old.windows TO old.windows_old") {
		t.Fatalf("Close with an old table: %v, want the rows pending and the old table refused", err)
	}
	if !strings.Contains(log.String(), "table old.windows is MergeTree ordered by (window_start_ns, host)") {
		t.Errorf("error log %q does not say what is wrong", log.String())
	}
	if got := query(t, addr, "SELECT count() FROM old.windows"); got != "1\n" {
		t.Errorf("%s rows in the old table, want its 1", got)
	}
	query(t, addr, "RENAME TABLE old.windows TO old.windows_old")
	if _, err := writeAll(t, target, nil, testReport(1)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantWindows(0, 1), query(t, addr, fmt.Sprintf(selectWindows, "old"))); diff != "" {
		t.Errorf("windows (-want +got):\n%s", diff)
	}

	// Tables of a sink before the report gained fragments and the
	// events: the columns and table events are added.
	query(t, addr, "ALTER TABLE old.windows DROP COLUMN fragments")
	query(t, addr, "ALTER TABLE old.windows DROP COLUMN `events_omitted.kind`")
	query(t, addr, "ALTER TABLE old.windows DROP COLUMN `events_omitted.count`")
	query(t, addr, "DROP TABLE old.events")
	r := testReport(2)
	r.EventsOmitted[report.EventIncast] = 3
	r.Events = probeEvents(report.Flow{})[:1]
	if _, err := writeAll(t, target, nil, r); err != nil {
		t.Fatal(err)
	}
	// Counter fragments is number 30: 10*i + 30%7.
	if got := query(t, addr, "SELECT window_start_ns, fragments, events_omitted.kind, events_omitted.count FROM old.windows FINAL ORDER BY window_start_ns FORMAT TSV"); got !=
		"1700000000000000000\t0\t[]\t[]\n1700000001000000000\t0\t[]\t[]\n1700000002000000000\t22\t['incast']\t[3]\n" {
		t.Errorf("columns fragments and events_omitted.* added back: %q", got)
	}
	if got := query(t, addr, "SELECT kind, window_start_ns FROM old.events FINAL FORMAT TSV"); got != "incast\t1700000002000000000\n" {
		t.Errorf("table events made again: %q", got)
	}

	query(t, addr, "ALTER TABLE old.flows MODIFY COLUMN sport UInt32")
	log = logBuffer{}
	_, err = writeAll(t, target, &Config{CloseTimeout: time.Second, ErrorLog: &log}, testReport(3))
	if !errors.Is(err, ErrPending) || !strings.Contains(log.String(), "table old.flows has column sport of type UInt32, not UInt16") {
		t.Errorf("a column of another type: %v, error log %q", err, log.String())
	}
}

// TestTTL: with ?ttl=30d, the sink drops the days older than 30 days and
// keeps the others.
func TestTTL(t *testing.T) {
	addr := clickhousetest.Start(t)
	now := time.Now().Truncate(time.Second)
	at := func(ago time.Duration) *report.Report {
		r := testReport(0)
		r.Window.Start = now.Add(-ago).UnixNano()
		return r
	}
	target := &Target{Addr: addr, Database: "ttl", Spill: filepath.Join(t.TempDir(), "spill")}
	if _, err := writeAll(t, target, nil, at(40*24*time.Hour), at(32*24*time.Hour), at(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	target.TTL = 30 * 24 * time.Hour
	if _, err := writeAll(t, target, nil, at(0)); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d\n%d\n", now.Add(-24*time.Hour).UnixNano(), now.UnixNano())
	for _, table := range []string{TableWindows, TableFlows} {
		if got := query(t, addr, "SELECT DISTINCT window_start_ns FROM ttl."+table+" ORDER BY window_start_ns"); got != want {
			t.Errorf("%s: windows %q, want %q", table, got, want)
		}
	}
}
