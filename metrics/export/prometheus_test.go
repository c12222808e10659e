package export

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// TestPrometheusExposition serves the totals of the hand-made trace's
// reports and checks the counters a scraper reads, their names and that no
// series carries a per-QP label.
func TestPrometheusExposition(t *testing.T) {
	tr := testframes.Trace()
	cfg := &metrics.Config{Workers: 1, Host: "h"}
	rp, err := report.NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ServePrometheus("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var want metrics.Counters
	for _, w := range enginetest.Run(t, cfg, &testframes.Source{Frames: tr.Frames, Per: 5}) {
		want.Add(&w.Counters)
		p.Update(rp.Build(w))
	}
	resp, err := http.Get("http://" + p.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	series := map[string]float64{}
	sample := regexp.MustCompile(`^(rocescope_[a-z0-9_]+(\{[^}]*\})?) ([0-9.e+-]+|NaN)$`)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		m := sample.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a Prometheus sample: %q", line)
		}
		if strings.Contains(m[2], "qp") || strings.Contains(m[2], "src") || strings.Contains(m[2], "dst") {
			t.Errorf("per-flow label in %q", line)
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		series[m[1]] = v
	}
	for name, c := range map[string]metrics.Counter{"rocescope_packets_total": metrics.Packets, "rocescope_bytes_total": metrics.Bytes,
		"rocescope_roce_packets_total": metrics.RoCEPackets, "rocescope_cnp_total": metrics.CNP,
		"rocescope_retransmits_total": metrics.Retransmits, "rocescope_psn_gaps_total": metrics.PSNGaps} {
		if got, ok := series[name]; !ok || got != float64(want[c]) {
			t.Errorf("%s = %v (present %v), want %d", name, got, ok, want[c])
		}
	}
	if got := series[`rocescope_opcode_packets_total{opcode="10",name="RC RDMA WRITE Only"}`]; got != float64(want.Opcode(10)) {
		t.Errorf(`opcode 10 packets = %v, want %d`, got, want.Opcode(10))
	}
	// NAKs by code: the codes add up to the NAKs, and each is its own.
	var naks float64
	for code := range 32 {
		k := fmt.Sprintf(`rocescope_naks_total{code="%d",name=%q}`, code, decode.NAKCode(code).String())
		got, ok := series[k]
		if n := want.NAKCode(uint8(code)); got != float64(n) || (!ok && (n > 0 || code <= 4)) {
			t.Errorf("%s = %v (present %v), want %d", k, got, ok, n)
		}
		naks += got
	}
	if _, ok := series["rocescope_naks_total"]; ok || naks != float64(want[metrics.NAKs]) || naks == 0 {
		t.Errorf("NAKs by code add up to %v, want %d (> 0) and no unlabeled series", naks, want[metrics.NAKs])
	}
}

// scrape returns the body of one GET of /metrics on a fresh connection.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d, %v", resp.StatusCode, err)
	}
	return string(body)
}

// TestPrometheusTextFormat checks the exposition against the rules of the
// text format 0.0.4 a scraper relies on: every sample's family has one
// HELP and one TYPE line before its first sample, HELP texts differ
// between families, summaries have quantile samples and _sum and _count,
// and rocescope_build_info names the version and Go.
func TestPrometheusTextFormat(t *testing.T) {
	p, err := ServePrometheus("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reports := handReports(t, &metrics.Config{Workers: 1, Host: "h"})
	// End with a window that matched latencies of both kinds.
	for len(reports) > 1 && (reports[len(reports)-1].ReadLatency.Count == 0 || reports[len(reports)-1].AckLatency.Count == 0) {
		reports = reports[:len(reports)-1]
	}
	for _, r := range reports {
		p.Update(r)
	}
	text := scrape(t, p.Addr())
	types := map[string]string{}
	helps := map[string]string{} // help text → family
	quantiles := map[string][]string{}
	parts := map[string]int{} // summary family → _sum and _count samples
	line := regexp.MustCompile(`^([a-z_:][a-z0-9_:]*)(\{(?:[a-z_]+="[^"]*",?)*\})? (\S+)$`)
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" {
			switch name := f[2]; f[1] {
			case "HELP":
				help := strings.Join(f[3:], " ")
				if other, dup := helps[help]; dup || help == "" {
					t.Errorf("%s: HELP %q empty or the same as %s's", name, help, other)
				}
				helps[help] = name
			case "TYPE":
				if _, dup := types[name]; dup {
					t.Errorf("%s: second TYPE line", name)
				}
				types[name] = f[3]
			}
			continue
		}
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a sample line: %q", l)
		}
		if _, err := strconv.ParseFloat(m[3], 64); err != nil {
			t.Errorf("%q: value: %v", l, err)
		}
		name, family := m[1], m[1]
		for _, suffix := range []string{"_sum", "_count"} {
			if base := strings.TrimSuffix(name, suffix); base != name && types[base] == "summary" {
				family = base
				parts[base]++
			}
		}
		typ, ok := types[family]
		if !ok {
			t.Errorf("%q: no TYPE line before it", l)
		}
		if typ == "summary" && family == name {
			q := regexp.MustCompile(`quantile="([0-9.]+)"`).FindStringSubmatch(m[2])
			if q == nil {
				t.Errorf("%q: summary sample without a quantile label", l)
			} else {
				quantiles[family] = append(quantiles[family], q[1])
			}
		}
	}
	for name, typ := range types {
		if typ == "summary" || parts[name] > 0 {
			t.Errorf("%s: a summary", name)
		}
	}
	last := reports[len(reports)-1]
	for s, l := range map[string]report.LatencySummary{"rocescope_read_latency": last.ReadLatency, "rocescope_ack_latency": last.AckLatency} {
		if l.Count == 0 {
			t.Fatalf("%s: the last window of the fixture has no match", s)
		}
		want := fmt.Sprintf("%s_seconds{quantile=\"0.99\"} %s\n%s_seconds{quantile=\"0.999\"} %s\n",
			s, strconv.FormatFloat(l.P99/1e9, 'g', -1, 64), s, strconv.FormatFloat(l.P999/1e9, 'g', -1, 64))
		want2 := fmt.Sprintf("%s_max_seconds %s\n", s, strconv.FormatFloat(l.Max/1e9, 'g', -1, 64))
		want3 := fmt.Sprintf("%s_window_matches %d\n", s, l.Count)
		for _, w := range []string{want, want2, want3} {
			if !strings.Contains(text, w) {
				t.Errorf("no %q in the exposition", w)
			}
		}
		if types[s+"_seconds"] != "gauge" || types[s+"_max_seconds"] != "gauge" || types[s+"_matches_total"] != "counter" {
			t.Errorf("%s: types %q, %q, %q", s, types[s+"_seconds"], types[s+"_max_seconds"], types[s+"_matches_total"])
		}
	}
	if !regexp.MustCompile(`(?m)^rocescope_build_info\{version="[^"]+",goversion="go1\.[^"]+"\} 1$`).MatchString(text) {
		t.Errorf("no rocescope_build_info with version and goversion:\n%s", text)
	}
}

// TestPrometheusSurvivesIdleConnections opens 200 idle connections: the
// endpoint closes all but its limit of them, still answers scrapes, and
// holds no more than the limit.
func TestPrometheusSurvivesIdleConnections(t *testing.T) {
	p, err := ServePrometheus("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var idle []net.Conn
	for range 200 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	for range 2 {
		if body := scrape(t, p.Addr()); !strings.Contains(body, "rocescope_windows_total 0") {
			t.Errorf("scrape: no windows_total:\n%.200s", body)
		}
	}
	// One deadline for all: the connections held wait for it once.
	closed, deadline := 0, time.Now().Add(time.Second)
	for _, c := range idle {
		c.SetReadDeadline(deadline)
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	if closed < 200-64 {
		t.Errorf("%d of 200 idle connections closed, want at least %d", closed, 200-64)
	}
	if n := heldConns(p.ln); n > 64 {
		t.Errorf("%d connections held, want at most 64", n)
	}
}

// heldConns returns the number of connections l holds.
func heldConns(l *connLimit) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// failingListener fails its first n accepts with EMFILE, as a process out
// of file descriptors does.
type failingListener struct {
	net.Listener
	n int
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.n > 0 {
		l.n--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestPrometheusRetriesAccept: accept failures are retried with backoff
// and logged once, and the server goes on serving.
func TestPrometheusRetriesAccept(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logged syncLog
	l := newConnLimit(&failingListener{Listener: inner, n: 5}, 64, log.New(&logged, "", 0))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), ConnState: l.track}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer srv.Close()
	scrape(t, inner.Addr().String())
	want := "accept: accept tcp: accept4: too many open files; retrying with backoff\naccept: working again after 5 failures\n"
	if got := logged.String(); got != want {
		t.Errorf("log:\n%q\nwant\n%q", got, want)
	}
	select {
	case err := <-served:
		t.Errorf("server stopped: %v", err)
	default:
	}
}

// syncLog is a log destination safe for concurrent use.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
