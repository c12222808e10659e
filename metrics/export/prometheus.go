package export

import (
	"bytes"
	"context"
	"fmt"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rocescope/rocescope/decode"
)

// Prometheus serves the running totals of the reports on /metrics in the
// Prometheus text format: counters named rocescope_<name>_total in base
// units (packets, bytes), per-opcode and per-priority labels, and gauges of
// the last window. It has no per-QP labels, whose cardinality would be
// unbounded. Update and the HTTP handler may run concurrently.
type Prometheus struct {
	mu      sync.Mutex
	totals  metrics.Counters
	last    *report.Report
	windows uint64
	// Elephant and jitter flows of the last window.
	elephants, jitter int
	srv               *http.Server
	ln                net.Listener
}

// ServePrometheus listens on addr and serves /metrics until Close.
func ServePrometheus(addr string) (*Prometheus, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus listener: %w", err)
	}
	p := &Prometheus{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", p.serveHTTP)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Addr returns the address the server listens on.
func (p *Prometheus) Addr() string { return p.ln.Addr().String() }

// Close stops the server.
func (p *Prometheus) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return p.srv.Shutdown(ctx)
}

// Update adds a window's report to the totals.
func (p *Prometheus) Update(r *report.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.totals.Add(&r.Window.Counters)
	p.windows++
	p.last = &report.Report{Window: &metrics.Window{Start: r.Window.Start, Length: r.Window.Length}, Flows: r.Flows,
		ReadLatency: r.ReadLatency, AckLatency: r.AckLatency}
	p.elephants, p.jitter = len(r.Elephants), len(r.Jitter)
}

func (p *Prometheus) serveHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(p.AppendText(nil))
}

// AppendText appends the exposition of the current totals.
func (p *Prometheus) AppendText(b []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	buf := bytes.NewBuffer(b)
	metric := func(name, typ, help string) {
		fmt.Fprintf(buf, "# HELP rocescope_%s %s\n# TYPE rocescope_%s %s\n", name, help, name, typ)
	}
	for c := metrics.Counter(0); c < metrics.Counter(metrics.NumScalar); c++ {
		name := c.String() + "_total"
		metric(name, "counter", "Total "+c.String()+" over all windows reported.")
		fmt.Fprintf(buf, "rocescope_%s %d\n", name, p.totals[c])
	}
	metric("opcode_packets_total", "counter", "RoCE packets per BTH opcode.")
	for op := range 256 {
		if n := p.totals.Opcode(uint8(op)); n > 0 {
			fmt.Fprintf(buf, "rocescope_opcode_packets_total{opcode=\"%d\",name=%q} %d\n", op, decode.Opcode(op).String(), n)
		}
	}
	metric("pfc_frames_total", "counter", "PFC frames enabling pause per priority.")
	for prio := range 8 {
		frames, _ := p.totals.PFC(prio)
		fmt.Fprintf(buf, "rocescope_pfc_frames_total{priority=\"%d\"} %d\n", prio, frames)
	}
	metric("pfc_quanta_total", "counter", "PFC pause quanta per priority.")
	for prio := range 8 {
		_, quanta := p.totals.PFC(prio)
		fmt.Fprintf(buf, "rocescope_pfc_quanta_total{priority=\"%d\"} %d\n", prio, quanta)
	}
	metric("windows_total", "counter", "Windows reported.")
	fmt.Fprintf(buf, "rocescope_windows_total %d\n", p.windows)
	if r := p.last; r != nil {
		metric("window_start_seconds", "gauge", "Start of the last reported window.")
		fmt.Fprintf(buf, "rocescope_window_start_seconds %s\n", strconv.FormatFloat(float64(r.Window.Start)/1e9, 'f', 3, 64))
		metric("flows", "gauge", "Estimated distinct flows in the last window.")
		fmt.Fprintf(buf, "rocescope_flows %s\n", strconv.FormatFloat(r.Flows.Value, 'f', 0, 64))
		metric("elephant_flows", "gauge", "Elephant flows in the last window.")
		fmt.Fprintf(buf, "rocescope_elephant_flows %d\n", p.elephants)
		metric("jitter_flows", "gauge", "Jitter flows in the last window.")
		fmt.Fprintf(buf, "rocescope_jitter_flows %d\n", p.jitter)
		for _, l := range []struct {
			name string
			s    report.LatencySummary
		}{{"read_latency_seconds", r.ReadLatency}, {"ack_latency_seconds", r.AckLatency}} {
			metric(l.name, "gauge", "Latency at the mirror point in the last window, by quantile.")
			for _, q := range []struct {
				q string
				v float64
			}{{"0.5", l.s.P50}, {"0.9", l.s.P90}, {"0.99", l.s.P99}, {"0.999", l.s.P999}} {
				fmt.Fprintf(buf, "rocescope_%s{quantile=%q} %g\n", l.name, q.q, q.v/1e9)
			}
		}
	}
	return buf.Bytes()
}
