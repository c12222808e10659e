package html_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	nethtml "golang.org/x/net/html"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/export/html"
	"github.com/rocescope/rocescope/metrics/report"
)

// demoPath is the project's demo trace.
var demoPath = filepath.Join("..", "..", "..", "testdata", "demo.pcap")

// replay analyzes path with windows of the given length and returns the
// JSON lines report, one object per window, and the HTML page made from
// the same reports.
func replay(t *testing.T, path string, window time.Duration, opts *html.Options) (lines []map[string]any, page []byte) {
	t.Helper()
	src, err := file.Open([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	return replaySource(t, src, window, opts)
}

// replaySource is replay of a source.
func replaySource(t *testing.T, src capture.Source, window time.Duration, opts *html.Options) (lines []map[string]any, page []byte) {
	t.Helper()
	eng, err := metrics.New(&metrics.Config{Window: window, Workers: 1, Host: "test", ElephantRate: opts.ElephantRate, JitterRate: opts.JitterRate})
	if err != nil {
		t.Fatal(err)
	}
	cfg := eng.Config()
	rp, err := report.NewReporter(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	var jl bytes.Buffer
	sink := export.NewJSONLines(&jl)
	p, err := html.NewPage(opts)
	if err != nil {
		t.Fatal(err)
	}
	err = eng.Run(context.Background(), []capture.Source{src}, func(w *metrics.Window) error {
		r := rp.Build(w)
		if err := sink.Write(r); err != nil {
			return err
		}
		return p.Write(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&jl)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	var b bytes.Buffer
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return lines, b.Bytes()
}

// pageJSON is the page's data as the test reads it back.
type pageJSON struct {
	Title         string                `json:"title"`
	Inputs        []string              `json:"inputs"`
	Hosts         []string              `json:"hosts"`
	WindowNS      int64                 `json:"window_ns"`
	FirstWindow   string                `json:"first_window"`
	LastWindow    string                `json:"last_window"`
	Windows       int                   `json:"windows"`
	ExactWindows  int                   `json:"exact_windows"`
	ElephantRate  float64               `json:"elephant_rate_bps"`
	JitterRate    float64               `json:"jitter_rate_bps"`
	PointWindows  int64                 `json:"point_windows"`
	X             []float64             `json:"x"`
	N             []int                 `json:"n"`
	Series        map[string][]*float64 `json:"series"`
	OpcodeNames   map[string]string     `json:"opcode_names"`
	FlowsEvicted  int                   `json:"flows_evicted"`
	FlowsRefused  int                   `json:"flows_refused"`
	Flows         []pageFlow            `json:"flows"`
	Events        []map[string]any      `json:"events"`
	EventsRefused int                   `json:"events_refused"`
}

type pageFlow struct {
	Src         string       `json:"src"`
	Dst         string       `json:"dst"`
	DQP         uint32       `json:"dqp"`
	SQP         *uint32      `json:"sqp"`
	Bytes       uint64       `json:"bytes"`
	Packets     uint64       `json:"packets"`
	CNP         uint64       `json:"cnp"`
	ECNCE       uint64       `json:"ecn_ce"`
	Retransmits uint64       `json:"retransmits"`
	PeakRate    float64      `json:"peak_bps"`
	Windows     int          `json:"windows"`
	Elephant    int          `json:"elephant_windows"`
	Jitter      int          `json:"jitter_windows"`
	Estimated   int          `json:"estimated_windows"`
	Samples     [][5]float64 `json:"samples"`
}

// parsePage checks that page is well-formed HTML, every element closed in
// order, with one <script type="application/json" id="data">, and no
// element that loads anything from elsewhere; it returns the data.
func parsePage(t *testing.T, page []byte) pageJSON {
	t.Helper()
	z := nethtml.NewTokenizer(bytes.NewReader(page))
	var open []string
	var data []string
	inData := false
	doctype := 0
	for {
		tt := z.Next()
		if tt == nethtml.ErrorToken {
			break
		}
		tok := z.Token()
		switch tt {
		case nethtml.DoctypeToken:
			doctype++
		case nethtml.StartTagToken, nethtml.SelfClosingTagToken:
			attrs := map[string]string{}
			for _, a := range tok.Attr {
				attrs[a.Key] = a.Val
			}
			for _, k := range []string{"src", "href"} {
				if v, ok := attrs[k]; ok {
					t.Errorf("<%s %s=%q>: the page loads something from elsewhere", tok.Data, k, v)
				}
			}
			if tok.Data == "link" || tok.Data == "iframe" || tok.Data == "img" {
				t.Errorf("page has a <%s> element", tok.Data)
			}
			if tt == nethtml.StartTagToken && !voidElements[tok.Data] {
				open = append(open, tok.Data)
			}
			inData = tok.Data == "script" && attrs["id"] == "data"
			if inData && attrs["type"] != "application/json" {
				t.Errorf("data script has type %q", attrs["type"])
			}
		case nethtml.EndTagToken:
			if n := len(open); n == 0 || open[n-1] != tok.Data {
				t.Fatalf("</%s> closes nothing open (open: %v)", tok.Data, open)
			}
			open = open[:len(open)-1]
			inData = false
		case nethtml.TextToken:
			if inData {
				data = append(data, tok.Data)
			}
		}
	}
	if len(open) != 0 || doctype != 1 {
		t.Fatalf("unclosed elements %v, %d doctypes", open, doctype)
	}
	if len(data) != 1 {
		t.Fatalf("%d data scripts; want 1", len(data))
	}
	var d pageJSON
	if err := json.Unmarshal([]byte(data[0]), &d); err != nil {
		t.Fatalf("page data: %v", err)
	}
	// Every number is in plain decimal notation, as in the JSON lines.
	dec := json.NewDecoder(strings.NewReader(data[0]))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if n, ok := tok.(json.Number); ok && !plainDecimal.MatchString(n.String()) {
			t.Errorf("page data: number %s is not in plain decimal notation", n)
		}
	}
	return d
}

// plainDecimal is how every report format writes a number.
var plainDecimal = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// voidElements have no end tag.
var voidElements = map[string]bool{"meta": true, "br": true, "hr": true, "img": true, "input": true, "link": true}

// lookup returns the figure at the dotted path of a report line, and
// whether it is there.
func lookup(line map[string]any, path string) (float64, bool) {
	var v any = line
	for k := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		if v, ok = m[k]; !ok {
			return 0, false
		}
	}
	f, ok := v.(float64)
	return f, ok
}

// scalarSums are the summed series every page has, as report keys; the
// sections (opcodes, NAK codes, PFC) have a series per code present.
var scalarSums = []string{"packets", "bytes", "roce_packets", "other_packets", "malformed_packets",
	"truncated_packets", "kernel_drops", "late_packets", "source_errors", "untracked_packets", "messages",
	"cnp", "cnp_unattributed", "ecn_ce", "fecn", "becn", "acks", "naks", "rnr_naks", "retransmits",
	"psn_gaps", "out_of_order", "pause_frames", "pause_quanta", "read_requests", "read_latency_unmatched",
	"read_latency_ns.count", "ack_latency_ns.count"}

// maxSeries are the series whose point is the largest of its windows.
var maxSeries = []string{"gbps", "mpps", "flows", "elephants", "jitter",
	"read_latency_ns.p50", "read_latency_ns.p90", "read_latency_ns.p99", "read_latency_ns.max",
	"ack_latency_ns.p50", "ack_latency_ns.p90", "ack_latency_ns.p99", "ack_latency_ns.max"}

// windowFigure returns a max series' figure of one report line.
func windowFigure(line map[string]any, name string) (float64, bool) {
	num := func(k string) float64 { return line[k].(float64) }
	ns := num("covered_ns") // rates are over the covered part
	if ns == 0 {
		ns = num("window_ns")
	}
	switch name {
	case "gbps":
		return num("bytes") * 8 / ns, true
	case "mpps":
		return num("packets") * 1e3 / ns, true
	case "elephants", "jitter":
		return float64(len(line[name].([]any))), true
	}
	return lookup(line, name)
}

type flowKey struct {
	src, dst string
	dqp      uint32
}

// expectedPage computes, from the JSON lines report alone, what the page
// must hold when each point covers width windows.
func expectedPage(t *testing.T, lines []map[string]any, maxPoints int64) (series map[string][]*float64, x []float64, n []int, flows map[flowKey]pageFlow, width int64) {
	t.Helper()
	wl := int64(lines[0]["window_ns"].(float64))
	starts := make([]int64, len(lines))
	for i, l := range lines {
		ts, err := time.Parse(time.RFC3339Nano, l["window_start"].(string))
		if err != nil {
			t.Fatal(err)
		}
		starts[i] = ts.UnixNano() / wl
	}
	first, last := starts[0], starts[len(starts)-1]
	width = 1
	for (last-first)/width >= maxPoints {
		width *= 2
	}
	points := int((last-first)/width) + 1
	pointOf := func(i int) int { return int((starts[i] - first) / width) }

	x = make([]float64, points)
	n = make([]int, points)
	for p := range points {
		x[p] = float64((first+int64(p)*width)*wl) / 1e9
	}
	names := slices.Clone(scalarSums)
	for i, l := range lines {
		n[pointOf(i)]++
		for _, sec := range []string{"opcodes", "nak_codes"} {
			for k := range l[sec].(map[string]any) {
				names = append(names, sec+"."+k)
			}
		}
		for k := range l["pfc"].(map[string]any) {
			names = append(names, "pfc."+k+".frames", "pfc."+k+".quanta")
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)

	series = map[string][]*float64{}
	for _, name := range names {
		s := make([]*float64, points)
		for i, l := range lines {
			v, _ := lookup(l, name)
			p := pointOf(i)
			if s[p] == nil {
				s[p] = new(float64)
			}
			*s[p] += v
		}
		series[name] = s
	}
	for _, name := range maxSeries {
		s := make([]*float64, points)
		for i, l := range lines {
			v, ok := windowFigure(l, name)
			if p := pointOf(i); ok && (s[p] == nil || v > *s[p]) {
				s[p] = &v
			}
		}
		series[name] = s
	}
	for _, name := range []string{"gbps", "mpps"} {
		s := make([]*float64, points)
		for i, l := range lines {
			v, _ := windowFigure(l, name)
			if p := pointOf(i); s[p] == nil || v < *s[p] {
				s[p] = &v
			}
		}
		series[name+"_min"] = s
	}

	flows = map[flowKey]pageFlow{}
	for i, l := range lines {
		p := float64(pointOf(i))
		// The page charts the top flows and the flows the events name
		// beyond them.
		listed := map[flowKey]bool{}
		for _, tf := range append(l["top_flows"].([]any), l["event_flows"].([]any)...) {
			m := tf.(map[string]any)
			num := func(k string) float64 { return m[k].(float64) }
			k := flowKey{m["src"].(string), m["dst"].(string), uint32(num("dqp"))}
			if listed[k] {
				continue
			}
			listed[k] = true
			f := flows[k]
			f.Src, f.Dst, f.DQP = k.src, k.dst, k.dqp
			if sqp, ok := m["sqp"].(float64); ok {
				v := uint32(sqp)
				f.SQP = &v
			}
			f.Bytes += uint64(num("bytes"))
			f.Packets += uint64(num("packets"))
			f.CNP += uint64(num("cnp"))
			f.ECNCE += uint64(num("ecn_ce"))
			f.Retransmits += uint64(num("retransmits"))
			f.PeakRate = max(f.PeakRate, num("rate_bps"))
			f.Windows++
			var flags float64
			if m["elephant"].(bool) {
				f.Elephant++
				flags += 1
			}
			if m["jitter"].(bool) {
				f.Jitter++
				flags += 2
			}
			if m["estimated"] == true {
				f.Estimated++
			}
			// A window without a previous one (the first, one after a
			// gap) has no rate change: null in the page, 0 here.
			var delta float64
			if i > 0 && starts[i] == starts[i-1]+1 {
				delta = math.Abs(num("rate_bps") - num("prev_rate_bps"))
			}
			sample := [5]float64{p, num("rate_bps"), delta, num("cnp"), flags}
			if k := len(f.Samples) - 1; k >= 0 && f.Samples[k][0] == p {
				s := &f.Samples[k]
				s[1], s[2], s[3] = max(s[1], sample[1]), max(s[2], sample[2]), s[3]+sample[3]
				s[4] = float64(int(s[4]) | int(flags))
			} else {
				f.Samples = append(f.Samples, sample)
			}
			flows[k] = f
		}
	}
	return series, x, n, flows, width
}

// TestPageHoldsTheJSONReportsFigures replays the demo trace into the JSON
// lines report and the page at once, and checks every series, point and
// charted flow of the page against figures computed from the JSON lines.
func TestPageHoldsTheJSONReportsFigures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		window    time.Duration
		maxPoints int
	}{
		{"1s windows", time.Second, 0},
		{"10ms windows", 10 * time.Millisecond, 0},
		{"10ms windows in 7 points", 10 * time.Millisecond, 7},
		{"20ms windows in 2 points", 20 * time.Millisecond, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := &html.Options{Inputs: []string{demoPath}, ElephantRate: 1e7, JitterRate: 1e6, MaxPoints: tc.maxPoints, MaxFlows: 1 << 20}
			lines, page := replay(t, demoPath, tc.window, opts)
			if len(lines) < 3 {
				t.Fatalf("%d windows; the test needs several", len(lines))
			}
			d := parsePage(t, page)
			maxPoints := int64(html.DefaultMaxPoints)
			if tc.maxPoints > 0 {
				maxPoints = int64(tc.maxPoints)
			}
			series, x, n, flows, width := expectedPage(t, lines, maxPoints)
			if tc.maxPoints > 0 && width == 1 {
				t.Fatalf("%d windows fit %d points: the case does not downsample", len(lines), tc.maxPoints)
			}

			var hosts []string
			exact := 0
			for _, l := range lines {
				for _, h := range l["hosts"].([]any) {
					hosts = append(hosts, h.(string))
				}
				if l["exact"].(bool) {
					exact++
				}
			}
			slices.Sort(hosts)
			hosts = slices.Compact(hosts)
			if diff := cmp.Diff(pageJSON{
				Title: html.DefaultTitle, Inputs: []string{demoPath}, Hosts: hosts,
				WindowNS: tc.window.Nanoseconds(), FirstWindow: lines[0]["window_start"].(string),
				LastWindow: lines[len(lines)-1]["window_start"].(string), Windows: len(lines), ExactWindows: exact,
				ElephantRate: 1e7, JitterRate: 1e6, PointWindows: width, X: x, N: n,
			}, pageJSON{
				Title: d.Title, Inputs: d.Inputs, Hosts: d.Hosts, WindowNS: d.WindowNS, FirstWindow: d.FirstWindow,
				LastWindow: d.LastWindow, Windows: d.Windows, ExactWindows: d.ExactWindows,
				ElephantRate: d.ElephantRate, JitterRate: d.JitterRate, PointWindows: d.PointWindows, X: d.X, N: d.N,
			}); diff != "" {
				t.Errorf("page header (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(series, d.Series); diff != "" {
				t.Errorf("series (-want +got):\n%s", diff)
			}

			got := map[flowKey]pageFlow{}
			for i, f := range d.Flows {
				got[flowKey{f.Src, f.Dst, f.DQP}] = f
				if i > 0 && f.Bytes > d.Flows[i-1].Bytes {
					t.Errorf("flow %d has more bytes than flow %d: not sorted", i, i-1)
				}
			}
			if diff := cmp.Diff(flows, got); diff != "" {
				t.Errorf("flows (-want +got):\n%s", diff)
			}
			el, ji := 0, 0
			for _, f := range d.Flows {
				el += f.Elephant
				ji += f.Jitter
			}
			t.Logf("%d windows, %d points of %d, %d flows, %d elephant and %d jitter marks", len(lines), len(d.X), width, len(d.Flows), el, ji)
			if el == 0 || ji == 0 {
				t.Errorf("no elephant or no jitter flow: the fixture does not exercise the marks")
			}
			if d.FlowsEvicted != 0 || d.FlowsRefused != 0 {
				t.Errorf("flows evicted %d, refused %d under a cap no run reaches", d.FlowsEvicted, d.FlowsRefused)
			}
			for k := range d.OpcodeNames {
				if _, ok := d.Series["opcodes."+k]; !ok {
					t.Errorf("opcode %s named but not charted", k)
				}
			}
		})
	}
}

// TestPageMergesEvents: the page of a trace with every kind of trouble
// holds each event once, however many windows reported it, with the
// figures of its parts added up: at 100 ms windows the PFC storm,
// reported in two, has the truth's start, end and frames, 300 ms paused
// and windows 2, and the JSON lines' ID. Past MaxEvents, events are left
// out and counted.
func TestPageMergesEvents(t *testing.T) {
	newSource := func() *synth.Source {
		src, err := synth.New(&synth.Config{Seed: 1, Packets: 5000, Flows: 200, Scenario: synth.ScenarioAll,
			LossProb: synth.Off, RNRProb: synth.Off, SnapLen: 128})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	src := newSource()
	lines, page := replaySource(t, src, 100*time.Millisecond, &html.Options{})
	truth := src.Truth()
	d := parsePage(t, page)
	if len(d.Events) != len(truth.Events) {
		t.Fatalf("%d events in the page; want %d", len(d.Events), len(truth.Events))
	}
	reported := map[string]int{} // windows reporting each ID in the JSON lines
	for _, l := range lines {
		for _, e := range l["events"].([]any) {
			reported[e.(map[string]any)["id"].(string)]++
		}
	}
	for _, e := range d.Events {
		id := e["id"].(string)
		if got, want := e["windows"], float64(reported[id]); got != want {
			t.Errorf("event %s %s: windows %v, the JSON lines report it in %v", e["kind"], id, got, want)
		}
		if e["kind"] != "pfc_storm" {
			continue
		}
		i := slices.IndexFunc(truth.Events, func(te synth.Event) bool { return te.Kind == "pfc_storm" })
		te := truth.Events[i]
		want := map[string]any{"start_ns": float64(te.StartNS), "end_ns": float64(te.EndNS), "frames": float64(te.Frames),
			"paused_ns": float64(300 * time.Millisecond), "paused_fraction": 1.0, "windows": 2.0, "ongoing": false, "mac": te.MAC, "priority": float64(te.Priority)}
		for k, v := range want {
			if e[k] != v {
				t.Errorf("pfc_storm %s = %v; want %v", k, e[k], v)
			}
		}
	}
	_, page = replaySource(t, newSource(), 100*time.Millisecond, &html.Options{MaxEvents: 2})
	if d := parsePage(t, page); len(d.Events) != 2 || d.EventsRefused != len(truth.Events)-2 {
		t.Errorf("MaxEvents 2: %d events, %d refused; want 2 and %d", len(d.Events), d.EventsRefused, len(truth.Events)-2)
	}
}
