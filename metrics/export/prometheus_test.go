package export

import (
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
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
	p, err := ServePrometheus("127.0.0.1:0")
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
	sample := regexp.MustCompile(`^(rocescope_[a-z0-9_]+(\{[^}]*\})?) ([0-9.e+-]+)$`)
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
		"rocescope_roce_packets_total": metrics.RoCEPackets, "rocescope_cnp_total": metrics.CNP, "rocescope_naks_total": metrics.NAKs,
		"rocescope_retransmits_total": metrics.Retransmits, "rocescope_psn_gaps_total": metrics.PSNGaps} {
		if got, ok := series[name]; !ok || got != float64(want[c]) {
			t.Errorf("%s = %v (present %v), want %d", name, got, ok, want[c])
		}
	}
	if got := series[`rocescope_opcode_packets_total{opcode="10",name="RC RDMA WRITE Only"}`]; got != float64(want.Opcode(10)) {
		t.Errorf(`opcode 10 packets = %v, want %d`, got, want.Opcode(10))
	}
}
