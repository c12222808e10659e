package html

import (
	"bufio"
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	stdhtml "html"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics/export"
)

// The page's parts. The vendored library is embedded as published.
var (
	//go:embed page.html
	pageTemplate string
	//go:embed report.css
	reportCSS string
	//go:embed report.js
	reportJS string
	//go:embed vendor/uplot/dist/uPlot.min.css
	uplotCSS string
	//go:embed vendor/uplot/dist/uPlot.iife.min.js
	uplotJS string
)

// pageData is the page's figures: the JSON in its
// <script type="application/json" id="data"> element, which the page's
// script draws from. Series are named as in series.go.
type pageData struct {
	Title        string             `json:"title"`
	Inputs       []string           `json:"inputs"`
	Hosts        []string           `json:"hosts"`
	WindowNS     int64              `json:"window_ns"`
	FirstWindow  string             `json:"first_window"` // RFC 3339, UTC
	LastWindow   string             `json:"last_window"`
	Windows      int                `json:"windows"`
	ExactWindows int                `json:"exact_windows"`
	FlowsMethod  string             `json:"flows_method"`
	FlowsRelErr  float64            `json:"flows_rel_err"`
	ElephantRate float64            `json:"elephant_rate_bps"`
	JitterRate   float64            `json:"jitter_rate_bps"`
	MaxPoints    int                `json:"max_points"`
	PointWindows int64              `json:"point_windows"` // windows per point
	X            []float64          `json:"x"`             // start of each point, s since the Unix epoch
	N            []int              `json:"n"`             // windows reported in each point
	Series       map[string]numbers `json:"series"`
	OpcodeNames  map[string]string  `json:"opcode_names"`
	NAKNames     map[string]string  `json:"nak_names"`
	MaxFlows     int                `json:"max_flows"`
	FlowsEvicted int                `json:"flows_evicted"`
	FlowsRefused int                `json:"flows_refused"`
	Flows        []flowData         `json:"flows"` // by bytes, largest first
	// Events are the events of every window, each once (by ID), in the
	// order of their first report, as the JSON lines report writes them
	// plus the windows that reported them; EventKinds names the kinds
	// (the timeline's lanes), EventsRefused counts those left out past
	// MaxEvents, EventsOmitted by kind those the reports did not list.
	Events        []*eventJSON      `json:"events"`
	EventKinds    []string          `json:"event_kinds"`
	MaxEvents     int               `json:"max_events"`
	EventsRefused int               `json:"events_refused"`
	EventsOmitted map[string]uint64 `json:"events_omitted"`
}

// flowData is one charted flow. Samples are [point, rate bits/s, rate
// change bits/s, CNPs, flags] with the flags of flowPoint; the rate change
// is null in a point whose windows have no previous window (the first of a
// run, or one after a gap).
type flowData struct {
	Src         string        `json:"src"`
	Dst         string        `json:"dst"`
	DQP         uint32        `json:"dqp"`
	SQP         *uint32       `json:"sqp,omitempty"`
	Bytes       uint64        `json:"bytes"`
	Packets     uint64        `json:"packets"`
	CNP         uint64        `json:"cnp"`
	ECNCE       uint64        `json:"ecn_ce"`
	Retransmits uint64        `json:"retransmits"`
	PeakRate    float64       `json:"peak_bps"`
	Windows     int           `json:"windows"`
	Elephant    int           `json:"elephant_windows"`
	Jitter      int           `json:"jitter_windows"`
	Estimated   int           `json:"estimated_windows"`
	Samples     []flowPointJS `json:"samples"`
}

// numbers is a series; NaN is written as null, a point without a figure.
type numbers []float64

// MarshalJSON implements json.Marshaler.
func (s numbers) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 8*len(s)+2)
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = export.AppendFloat(b, v)
	}
	return append(b, ']'), nil
}

// flowPointJS is a flowPoint as the page's script reads it.
type flowPointJS flowPoint

// MarshalJSON implements json.Marshaler.
func (s flowPointJS) MarshalJSON() ([]byte, error) {
	b := strconv.AppendInt([]byte{'['}, int64(s.point), 10)
	for _, v := range [...]float64{s.rate, s.delta, float64(s.cnp), float64(s.flags)} {
		b = export.AppendFloat(append(b, ','), v)
	}
	return append(b, ']'), nil
}

// data returns the page's figures.
func (p *Page) data() *pageData {
	d := &pageData{
		Title:         p.opts.Title,
		Inputs:        nonNil(p.opts.Inputs),
		Hosts:         nonNil(p.hosts),
		WindowNS:      p.length,
		Windows:       p.windows,
		ExactWindows:  p.exact,
		FlowsMethod:   p.flowsMethod,
		FlowsRelErr:   p.flowsRelErr,
		ElephantRate:  p.opts.ElephantRate,
		JitterRate:    p.opts.JitterRate,
		MaxPoints:     p.opts.MaxPoints,
		PointWindows:  p.width,
		X:             make([]float64, len(p.points)),
		N:             make([]int, len(p.points)),
		Series:        make(map[string]numbers),
		OpcodeNames:   make(map[string]string),
		NAKNames:      make(map[string]string),
		MaxFlows:      p.opts.MaxFlows,
		FlowsEvicted:  p.evicted,
		FlowsRefused:  p.refused,
		Flows:         make([]flowData, len(p.flows)),
		Events:        make([]*eventJSON, len(p.events)),
		MaxEvents:     p.opts.MaxEvents,
		EventsRefused: p.eventsRefused,
		EventsOmitted: make(map[string]uint64),
	}
	for i := range p.events {
		d.Events[i] = (*eventJSON)(&p.events[i])
	}
	d.EventKinds = p.eventKinds(d.EventsOmitted)
	if p.windows > 0 {
		d.FirstWindow = time.Unix(0, p.first*p.length).UTC().Format(time.RFC3339Nano)
		d.LastWindow = time.Unix(0, p.last*p.length).UTC().Format(time.RFC3339Nano)
	}
	for i, pt := range p.points {
		d.X[i] = float64((p.first+int64(i)*p.width)*p.length) / 1e9
		d.N[i] = pt.windows
	}
	for k := range numSums {
		var total uint64
		for i := range p.points {
			total += p.points[i].sum[k]
		}
		if k < numScalarSums || total > 0 {
			d.Series[sumName(k)] = p.series(func(f *figures) float64 { return float64(f.sum[k]) })
		}
		if total > 0 && k >= sumOpcodeBase && k < sumNAKCodeBase {
			d.OpcodeNames[strconv.Itoa(k-sumOpcodeBase)] = decode.Opcode(k - sumOpcodeBase).String()
		}
		if total > 0 && k >= sumNAKCodeBase && k < sumPFCFramesBase {
			d.NAKNames[strconv.Itoa(k-sumNAKCodeBase)] = decode.NAKCode(k - sumNAKCodeBase).String()
		}
	}
	for k := range numMaxes {
		d.Series[maxNames[k]] = p.series(func(f *figures) float64 { return f.max[k] })
	}
	for k := range numMins {
		d.Series[minNames[k]] = p.series(func(f *figures) float64 { return f.min[k] })
	}
	for i := range p.flows {
		f := &p.flows[i]
		fd := flowData{
			Src: f.id.src, Dst: f.id.dst, DQP: f.id.dqp,
			Bytes: f.bytes, Packets: f.packets, CNP: f.cnp, ECNCE: f.ecnCE, Retransmits: f.ret,
			PeakRate: f.peak, Windows: f.windows, Elephant: f.elephant, Jitter: f.jitter, Estimated: f.estimated,
			Samples: make([]flowPointJS, len(f.samples)),
		}
		if f.sqpKnown {
			fd.SQP = &f.sqp
		}
		for j, s := range f.samples {
			fd.Samples[j] = flowPointJS(s)
		}
		d.Flows[i] = fd
	}
	slices.SortStableFunc(d.Flows, func(a, b flowData) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return d
}

// series returns the figure of each point that get reads, NaN for the
// points no window fell into.
func (p *Page) series(get func(*figures) float64) numbers {
	s := make(numbers, len(p.points))
	for i := range p.points {
		s[i] = absent
		if p.points[i].windows > 0 {
			s[i] = get(&p.points[i])
		}
	}
	return s
}

// nonNil returns s, or an empty slice for nil, which JSON writes as [].
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// WriteTo writes the page of the windows added so far to w. It may be
// called any number of times.
func (p *Page) WriteTo(w io.Writer) (int64, error) {
	data, err := json.Marshal(p.data())
	if err != nil {
		return 0, fmt.Errorf("html: page data: %w", err)
	}
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	rest := pageTemplate
	for _, part := range []struct{ mark, text string }{
		{"{{title}}", stdhtml.EscapeString(p.opts.Title)},
		{"{{style}}", uplotCSS + "\n" + reportCSS},
		{"{{data}}", string(data)},
		{"{{script}}", uplotJS + "\n" + reportJS},
	} {
		before, after, found := strings.Cut(rest, part.mark)
		if !found {
			return cw.n, fmt.Errorf("html: page template lacks %s", part.mark)
		}
		bw.WriteString(before)
		bw.WriteString(part.text)
		rest = after
	}
	bw.WriteString(rest)
	err = bw.Flush()
	return cw.n, err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
