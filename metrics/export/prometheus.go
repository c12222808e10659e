package export

import (
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/buildinfo"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// Prometheus serves the running totals of the reports on /metrics in the
// Prometheus text format 0.0.4: counters named rocescope_<name>_total in
// base units (packets, bytes), NAKs by code, packets by opcode and PFC by
// priority, gauges of the last window (flows, latency quantiles and max),
// rocescope_events_total{kind} (each event once, however many windows it
// spans) and rocescope_event_active{kind} (events going on at the end of
// the last window), and rocescope_build_info. Every label is bounded (at
// most 256 opcodes, 32 NAK codes, 8 priorities, 4 event kinds); there are no per-QP labels, whose
// cardinality would be unbounded. Update and the HTTP handler may run
// concurrently.
//
// The endpoint never ends the run it serves: it holds at most
// PrometheusOptions.MaxConns connections (a new one closes the longest idle
// one), times out slow and idle clients, and retries failed accepts (such
// as EMFILE) with backoff.
type Prometheus struct {
	mu      sync.Mutex
	totals  metrics.Counters
	windows uint64
	last    lastWindow
	// Running totals of the latencies the flow records matched, in ns.
	readSum, readCount, ackSum, ackCount uint64
	// Events by kind: counted once each, when first reported (ongoing
	// holds the IDs of the last window's events that went on to its end,
	// which the next window reports again), and those the windows did not
	// list.
	events, omitted [report.NumEventKinds]uint64
	ongoing         map[report.EventID]bool

	srv *http.Server
	ln  *connLimit
}

// lastWindow holds the gauges of the last window reported.
type lastWindow struct {
	seen                    bool
	start                   int64
	flows                   float64
	elephants, jitter       int
	readLatency, ackLatency report.LatencySummary
	active                  [report.NumEventKinds]uint64 // events going on at the window's end
}

// PrometheusOptions configure the endpoint; nil means the defaults.
type PrometheusOptions struct {
	// MaxConns is the most connections held open (default 64).
	MaxConns int
	// ErrorLog receives the server's errors, such as a failing accept
	// (logged once per run of failures); nil discards them.
	ErrorLog io.Writer
}

// Timeouts of the endpoint's connections.
const (
	promReadHeaderTimeout = 5 * time.Second
	promReadTimeout       = 10 * time.Second
	promWriteTimeout      = 10 * time.Second
	promIdleTimeout       = 30 * time.Second
)

// ServePrometheus listens on addr and serves /metrics until Close.
func ServePrometheus(addr string, opts *PrometheusOptions) (*Prometheus, error) {
	var o PrometheusOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxConns == 0:
		o.MaxConns = 64
	case o.MaxConns < 0:
		return nil, fmt.Errorf("export: prometheus on %s: MaxConns %d: want 0 (the default) or more", addr, o.MaxConns)
	}
	if o.ErrorLog == nil {
		o.ErrorLog = io.Discard
	}
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("export: prometheus listener on %s: %w", addr, err)
	}
	logger := log.New(o.ErrorLog, "rocescope: prometheus: ", 0)
	p := &Prometheus{ln: newConnLimit(inner, o.MaxConns, logger)}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", p.serveHTTP)
	p.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: promReadHeaderTimeout,
		ReadTimeout:       promReadTimeout,
		WriteTimeout:      promWriteTimeout,
		IdleTimeout:       promIdleTimeout,
		MaxHeaderBytes:    8 << 10,
		ErrorLog:          logger,
		ConnState:         p.ln.track,
	}
	go p.srv.Serve(p.ln)
	return p, nil
}

// Addr returns the address the server listens on.
func (p *Prometheus) Addr() string { return p.ln.Addr().String() }

// Close stops the server and closes its connections.
func (p *Prometheus) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		return p.srv.Close()
	}
	return nil
}

// Update adds a window's report to the totals.
func (p *Prometheus) Update(r *report.Report) {
	var readSum, readCount, ackSum, ackCount uint64
	for i := range r.Window.Flows {
		c := &r.Window.Flows[i].C
		readSum += c[metrics.FlowReadLatencySum]
		readCount += c[metrics.FlowReadLatencyCount]
		ackSum += c[metrics.FlowAckLatencySum]
		ackCount += c[metrics.FlowAckLatencyCount]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.totals.Add(&r.Window.Counters)
	p.windows++
	p.readSum += readSum
	p.readCount += readCount
	p.ackSum += ackSum
	p.ackCount += ackCount
	p.last = lastWindow{seen: true, start: r.Window.Start, flows: r.Flows.Value, elephants: len(r.Elephants),
		jitter: len(r.Jitter), readLatency: r.ReadLatency, ackLatency: r.AckLatency}
	next := make(map[report.EventID]bool)
	for i := range r.Events {
		e := &r.Events[i]
		if !p.ongoing[e.ID] {
			p.events[e.Kind]++
		}
		if e.Ongoing {
			next[e.ID] = true
			p.last.active[e.Kind]++
		}
	}
	p.ongoing = next
	for k, n := range r.EventsOmitted {
		p.omitted[k] += n
	}
}

func (p *Prometheus) serveHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(p.AppendText(nil))
}

// counterHelp is the HELP text of each scalar counter's series.
var counterHelp = [metrics.NumScalar]string{
	metrics.Packets:              "Frames seen.",
	metrics.Bytes:                "On-wire (original) bytes of all frames.",
	metrics.RoCEPackets:          "RoCEv2, RoCEv1 and native InfiniBand frames with a BTH.",
	metrics.OtherPackets:         "Frames that are not RoCE (PFC and pause frames included).",
	metrics.MalformedPackets:     "Frames whose headers are invalid.",
	metrics.TruncatedPackets:     "Frames cut before the headers they announce.",
	metrics.PayloadBytes:         "RDMA payload bytes of RoCE frames.",
	metrics.LatePackets:          "Frames older than the oldest open window, counted in it.",
	metrics.TimeJumps:            "Frames an hour or more ahead of the others.",
	metrics.Messages:             "RDMA messages: LAST and ONLY opcodes of SEND, WRITE and READ response.",
	metrics.CNP:                  "Congestion notification packets.",
	metrics.ECNCE:                "RoCE frames with IP ECN = CE (congestion experienced).",
	metrics.FECN:                 "Frames with the BTH FECN bit set.",
	metrics.BECN:                 "Frames with the BTH BECN bit set.",
	metrics.Acks:                 "Positive AETH acknowledgements.",
	metrics.NAKs:                 "AETH NAKs of every code.",
	metrics.RNRNAKs:              "AETH receiver-not-ready NAKs.",
	metrics.Retransmits:          "Request packets with a PSN behind the expected one.",
	metrics.PSNGaps:              "Request packets with a PSN ahead of the expected one.",
	metrics.OutOfOrder:           "Request packets with a PSN a gap skipped, arriving before any NAK.",
	metrics.ReadRequests:         "RDMA READ requests.",
	metrics.Atomics:              "Atomic requests.",
	metrics.CMPackets:            "Communication management MADs.",
	metrics.PauseFrames:          "IEEE 802.3x pause frames.",
	metrics.PauseQuanta:          "Pause quanta of IEEE 802.3x pause frames.",
	metrics.KernelDrops:          "Frames the capture path lost (kernel, ring, XDP).",
	metrics.SourceErrors:         "Records or ring entries the source skipped as damaged.",
	metrics.Evictions:            "Idle flows evicted from the QP table.",
	metrics.UntrackedPackets:     "RoCE frames of flows the full QP table could not hold.",
	metrics.ReadLatencyUnmatched: "READ requests whose response was not seen.",
	metrics.Fragments:            "IPv4 and IPv6 fragments (counted as other, not reassembled).",
	metrics.Filtered:             "Frames the capture filter expression or the RoCE filter removed from the analysis.",
	metrics.PFCUntracked:         "PFC frame priorities not followed per source MAC (more sources than tracked).",
}

// exposition appends the text format 0.0.4.
type exposition struct{ b []byte }

// family appends the HELP and TYPE lines of a metric family.
func (e *exposition) family(name, typ, help string) {
	e.b = fmt.Appendf(e.b, "# HELP rocescope_%s %s\n# TYPE rocescope_%s %s\n", name, help, name, typ)
}

// sample appends one sample; labels is empty or `{k="v",...}`.
func (e *exposition) sample(name, labels string, v float64) {
	e.b = append(e.b, "rocescope_"...)
	e.b = append(append(e.b, name...), labels...)
	e.b = append(e.b, ' ')
	switch {
	case math.IsNaN(v):
		e.b = append(e.b, "NaN"...)
	case math.IsInf(v, 0):
		e.b = append(e.b, "+Inf"...)
	default:
		e.b = strconv.AppendFloat(e.b, v, 'g', -1, 64)
	}
	e.b = append(e.b, '\n')
}

// perKind appends a sample per event kind, of v indexed by kind.
func (e *exposition) perKind(name string, v []uint64) {
	for k := 1; k < report.NumEventKinds; k++ {
		e.sample(name, `{kind="`+report.EventKind(k).String()+`"}`, float64(v[k]))
	}
}

// AppendText appends the exposition of the current totals.
func (p *Prometheus) AppendText(b []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := &exposition{b: b}
	e.family("build_info", "gauge", "Always 1; the labels say which rocescope and Go built the binary.")
	e.sample("build_info", fmt.Sprintf("{version=%q,goversion=%q}", buildinfo.Version(), buildinfo.GoVersion()), 1)
	for c := metrics.Counter(0); c < metrics.Counter(metrics.NumScalar); c++ {
		name := c.String() + "_total"
		e.family(name, "counter", counterHelp[c])
		if c == metrics.NAKs {
			// By code: the five the IBTA names always, so that
			// alerts on one have a series from the start, and any
			// reserved code once seen (32 at most).
			for code, n := range p.totals.NAKCodes() {
				if n > 0 || code <= int(decode.NAKInvalidRDRequest) {
					e.sample(name, fmt.Sprintf("{code=\"%d\",name=%q}", code, decode.NAKCode(code).String()), float64(n))
				}
			}
			continue
		}
		e.sample(name, "", float64(p.totals[c]))
	}
	e.family("opcode_packets_total", "counter", "RoCE packets per BTH opcode.")
	for op := range 256 {
		if n := p.totals.Opcode(uint8(op)); n > 0 {
			e.sample("opcode_packets_total", fmt.Sprintf("{opcode=\"%d\",name=%q}", op, decode.Opcode(op).String()), float64(n))
		}
	}
	e.family("pfc_frames_total", "counter", "PFC frames enabling pause, per priority.")
	for prio := range 8 {
		frames, _ := p.totals.PFC(prio)
		e.sample("pfc_frames_total", fmt.Sprintf("{priority=\"%d\"}", prio), float64(frames))
	}
	e.family("pfc_quanta_total", "counter", "PFC pause quanta requested, per priority.")
	for prio := range 8 {
		_, quanta := p.totals.PFC(prio)
		e.sample("pfc_quanta_total", fmt.Sprintf("{priority=\"%d\"}", prio), float64(quanta))
	}
	e.family("windows_total", "counter", "Windows reported.")
	e.sample("windows_total", "", float64(p.windows))
	// Events by kind, a bounded label: every kind has a series from the
	// start, so that an alert on increase() sees the first event.
	e.family("events_total", "counter", "Events (incast, pfc_storm, retransmission, ce_without_cnp) reported, each once however many windows it spans.")
	e.perKind("events_total", p.events[:])
	e.family("events_omitted_total", "counter", "Events windows did not list (--max-events), counted in each window that left them out.")
	e.perKind("events_omitted_total", p.omitted[:])
	l := &p.last
	if !l.seen {
		return e.b
	}
	e.family("window_start_seconds", "gauge", "Start of the last reported window, in seconds since the Unix epoch.")
	e.sample("window_start_seconds", "", float64(l.start)/1e9)
	e.family("flows", "gauge", "Estimated distinct flows in the last window.")
	e.sample("flows", "", math.Round(l.flows))
	e.family("elephant_flows", "gauge", "Flows at or above the elephant rate in the last window.")
	e.sample("elephant_flows", "", float64(l.elephants))
	e.family("jitter_flows", "gauge", "Elephants whose rate changed by the jitter rate or more into the last window.")
	e.sample("jitter_flows", "", float64(l.jitter))
	// The latency gauges describe one sample set, the last window's
	// matches: its quantiles, max and count. The run's matches are
	// counters of their own (rate(sum)/rate(count) is the mean over any
	// range), not a summary's _sum and _count beside quantiles of a
	// different set.
	for _, s := range []struct {
		name, what string
		last       report.LatencySummary
		sum, count uint64
	}{
		{"read_latency", "READ request to first response at the mirror point", l.readLatency, p.readSum, p.readCount},
		{"ack_latency", "Request with AckReq to its ACK at the mirror point", l.ackLatency, p.ackSum, p.ackCount},
	} {
		e.family(s.name+"_seconds", "gauge", s.what+": quantiles of the last window's matches (NaN when it had none).")
		for _, q := range []struct {
			q string
			v float64
		}{{"0.5", s.last.P50}, {"0.9", s.last.P90}, {"0.99", s.last.P99}, {"0.999", s.last.P999}} {
			v := math.NaN() // no match in the last window
			if s.last.Count > 0 {
				v = q.v / 1e9
			}
			e.sample(s.name+"_seconds", `{quantile="`+q.q+`"}`, v)
		}
		max := math.NaN()
		if s.last.Count > 0 {
			max = s.last.Max / 1e9
		}
		e.family(s.name+"_max_seconds", "gauge", s.what+": the largest of the last window (NaN when it had none).")
		e.sample(s.name+"_max_seconds", "", max)
		e.family(s.name+"_window_matches", "gauge", s.what+": matches in the last window, which its quantiles describe.")
		e.sample(s.name+"_window_matches", "", float64(s.last.Count))
		e.family(s.name+"_matches_total", "counter", s.what+": matches on tracked flows in the run.")
		e.sample(s.name+"_matches_total", "", float64(s.count))
		e.family(s.name+"_seconds_total", "counter", s.what+": sum of the run's matches on tracked flows.")
		e.sample(s.name+"_seconds_total", "", float64(s.sum)/1e9)
	}
	e.family("event_active", "gauge", "Events of the last window that lasted to its end: going on.")
	var active [report.NumEventKinds]uint64
	for k, n := range l.active {
		active[k] = uint64(n)
	}
	e.perKind("event_active", active[:])
	return e.b
}

// connLimit is the endpoint's listener. It holds at most max connections:
// a new connection closes the one idle longest (or is closed itself when
// every connection is busy), so that idle clients cannot exhaust the
// process's file descriptors, which the capture needs. Accept errors (such
// as EMFILE) are retried with backoff and logged once per run of failures,
// so the server never stops on them.
type connLimit struct {
	net.Listener
	max    int
	log    *log.Logger
	closed chan struct{}
	once   sync.Once

	mu    sync.Mutex
	conns map[net.Conn]connSince
}

// connSince is what the limit knows of a connection: idle (no request in
// progress) since when.
type connSince struct {
	idle  bool
	since time.Time
}

func newConnLimit(l net.Listener, limit int, logger *log.Logger) *connLimit {
	return &connLimit{Listener: l, max: limit, log: logger, closed: make(chan struct{}), conns: make(map[net.Conn]connSince)}
}

// Accept returns the next connection within the limit. It returns an
// error only once the listener is closed.
func (l *connLimit) Accept() (net.Conn, error) {
	var delay time.Duration
	failures := 0
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return nil, net.ErrClosed
			default:
			}
			if failures == 0 {
				l.log.Printf("accept: %v; retrying with backoff", err)
			}
			failures++
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-l.closed:
				return nil, net.ErrClosed
			}
			continue
		}
		if failures > 0 {
			l.log.Printf("accept: working again after %d failures", failures)
			failures, delay = 0, 0
		}
		if l.admit(c) {
			return c, nil
		}
	}
}

// admit makes room for c, closing the longest idle connections, and
// reports whether c may be served; when every held connection is busy, c
// is closed.
func (l *connLimit) admit(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.conns) >= l.max {
		var oldest net.Conn
		var since time.Time
		for o, s := range l.conns {
			if s.idle && (oldest == nil || s.since.Before(since)) {
				oldest, since = o, s.since
			}
		}
		if oldest == nil {
			c.Close()
			return false
		}
		oldest.Close()
		delete(l.conns, oldest)
	}
	l.conns[c] = connSince{idle: true, since: time.Now()}
	return true
}

// track follows the server's connection states (http.Server.ConnState).
func (l *connLimit) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	case http.StateActive:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connSince{}
		}
	case http.StateIdle:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connSince{idle: true, since: time.Now()}
		}
	}
}

// Close closes the listener; Accept then returns net.ErrClosed.
func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}
