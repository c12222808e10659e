package html_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	nethtml "golang.org/x/net/html"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export/html"
	"github.com/rocescope/rocescope/metrics/report"
	"github.com/rocescope/rocescope/sketch"
)

// syntheticReport returns the report of one-second window i of a run
// whose top lists of 20 flows, taken in turn from a pool of flows, name
// every flow of the pool; a tenth of the flows are elephants and some swing
// in rate.
func syntheticReport(i, pool int) *report.Report { return syntheticReportOf(i, pool, time.Second, 1) }

// syntheticReportOf returns the report of window i of the given length of
// a run like syntheticReport's, at scale times its traffic (24 Gb/s).
func syntheticReportOf(i, pool int, length time.Duration, scale float64) *report.Report {
	const start = int64(1_700_000_000) * 1e9
	w := &metrics.Window{Start: start + int64(i)*int64(length), Length: int64(length), Hosts: []string{"cap1", "cap2"}}
	wave := 1 + math.Sin(float64(i)/300)
	secs := length.Seconds() * scale
	w.Counters[metrics.Packets] = uint64(3e6 * wave * secs)
	w.Counters[metrics.Bytes] = uint64(3e9 * wave * secs)
	w.Counters[metrics.RoCEPackets] = uint64(2.9e6 * wave * secs)
	w.Counters[metrics.OtherPackets] = w.Counters[metrics.Packets] - w.Counters[metrics.RoCEPackets]
	w.Counters[metrics.CNP] = uint64(i % 97)
	w.Counters[metrics.ECNCE] = uint64(i % 89)
	w.Counters[metrics.Retransmits] = uint64(i % 13)
	r := &report.Report{
		Window:      w,
		Exact:       true,
		Flows:       sketch.Estimate{Value: float64(pool), Method: sketch.MethodLinearCounting},
		ReadLatency: report.LatencySummary{Count: 100, P50: 2e4 * wave, P90: 4e4 * wave, P99: 9e4 * wave, Max: 2e5 * wave},
		AckLatency:  report.LatencySummary{Count: 100, P50: 1e4 * wave, P90: 3e4 * wave, P99: 6e4 * wave, Max: 1e5 * wave},
	}
	w.Counters[metrics.MalformedPackets] = uint64(i % 3)
	setPFC(&w.Counters, 3, uint64(i%4), uint64(i%4)*65535)
	for k := range 20 {
		id := (i*7 + k*(pool/20)) % pool
		rate := float64(pool-id) * 2e6 * (1 + 0.5*math.Sin(float64(i+id)/50)) * scale
		f := report.FlowReport{Rate: rate, PrevRate: rate * 0.8}
		f.Key = metrics.FlowKey{Src: decode.AddrFrom4([4]byte{10, 0, byte(id >> 8), byte(id)}), Dst: decode.AddrFrom4([4]byte{10, 1, 0, byte(k)}), DQP: uint32(0x11 + id)}
		f.SQP, f.SQPKnown = uint32(0x800+id), id%2 == 0
		f.C[metrics.FlowBytes] = uint64(rate / 8 * length.Seconds())
		f.C[metrics.FlowPackets] = uint64(rate / 8 / 4096 * length.Seconds())
		f.C[metrics.FlowCNP] = uint64((i + id) % 5)
		f.Elephant = rate >= 1e9*scale
		f.Jitter = f.Elephant && (i+id)%13 == 0
		r.Top = append(r.Top, f)
		if f.Elephant {
			r.Elephants = append(r.Elephants, f)
		}
		if f.Jitter {
			r.Jitter = append(r.Jitter, f)
		}
	}
	return r
}

// setPFC sets the PFC frames and quanta of priority p: the counters'
// section after the scalars and the 256 opcodes.
func setPFC(c *metrics.Counters, p int, frames, quanta uint64) {
	c[metrics.NumScalar+256+p], c[metrics.NumScalar+256+8+p] = frames, quanta
	if f, q := c.PFC(p); f != frames || q != quanta {
		panic("setPFC: the counters' layout changed")
	}
}

// syntheticReports feeds p the synthetic reports of windows 0 to n-1.
func syntheticReports(t testing.TB, p *html.Page, n, pool int) {
	t.Helper()
	for i := range n {
		if err := p.Write(syntheticReport(i, pool)); err != nil {
			t.Fatal(err)
		}
	}
}

// chromiumPath returns the headless browser, or skips the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium, chromium-browser or google-chrome on PATH: the page is not rendered")
	return ""
}

// render opens page in headless Chromium, 1400 pixels wide, lets its
// scripts run and returns the DOM it ends with.
func render(t *testing.T, browser string, page []byte) *nethtml.Node {
	t.Helper()
	return renderWidth(t, browser, page, 1400)
}

// renderWidth is render in a window width pixels wide.
func renderWidth(t *testing.T, browser string, page []byte, width int) *nethtml.Node {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--window-size="+strconv.Itoa(width)+",3000", "--force-device-scale-factor=1", "--virtual-time-budget=60000", "--dump-dom", "file://"+path)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
	}
	doc, err := nethtml.Parse(&out)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// attr returns the attribute k of n, and whether it has it.
func attr(n *nethtml.Node, k string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == k {
			return a.Val, true
		}
	}
	return "", false
}

// find returns the elements under n for which keep is true, in document
// order.
func find(n *nethtml.Node, keep func(*nethtml.Node) bool) []*nethtml.Node {
	var out []*nethtml.Node
	for d := range n.Descendants() {
		if d.Type == nethtml.ElementNode && keep(d) {
			out = append(out, d)
		}
	}
	return out
}

// charts are the page's charts in order; opcodemix is an HTML bar table,
// the others are uPlot canvases (the events timeline one too, its bars
// drawn on it).
var charts = []string{"timeline", "throughput", "frames", "flowcount", "flowrates", "flowjitter", "flowcnp", "congestion",
	"transport", "pfcframes", "pfcquanta", "readlat", "acklat", "opcodes", "opcodemix"}

// TestPageDrawsInChromium renders pages in headless Chromium and checks
// that the script ran without an error and drew every chart, with a line
// per charted flow, and a table row per flow.
func TestPageDrawsInChromium(t *testing.T) {
	browser := chromiumPath(t)
	type pageCase struct {
		name string
		page func(t *testing.T) []byte
	}
	cases := []pageCase{
		{"demo", func(t *testing.T) []byte {
			_, page := replay(t, demoPath, time.Second, &html.Options{Inputs: []string{demoPath}, ElephantRate: 1e7, JitterRate: 5e6})
			return page
		}},
		{"demo 10ms in 50 points", func(t *testing.T) []byte {
			_, page := replay(t, demoPath, 10*time.Millisecond, &html.Options{ElephantRate: 1e7, JitterRate: 5e6, MaxPoints: 50})
			return page
		}},
		{"no window", func(t *testing.T) []byte { return writePage(t, mustPage(t, nil)) }},
	}
	if !testing.Short() {
		cases = append(cases, pageCase{"10000 windows 1000 flows", func(t *testing.T) []byte {
			p := mustPage(t, &html.Options{ElephantRate: 1e9, JitterRate: 5e8})
			syntheticReports(t, p, 10000, 1000)
			return writePage(t, p)
		}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			page := tc.page(t)
			d := parsePage(t, page)
			began := time.Now()
			doc := render(t, browser, page)
			elapsed := time.Since(began)
			body := find(doc, func(n *nethtml.Node) bool { return n.Data == "body" })[0]
			status, _ := attr(body, "data-status")
			ms, _ := attr(body, "data-render-ms")
			t.Logf("page %d bytes, %d points, %d flows: drawn in %s ms by the page's clock, chromium ran %v", len(page), len(d.X), len(d.Flows), ms, elapsed.Round(time.Millisecond))
			if status != "ok" {
				t.Fatalf("page status %q; want ok", status)
			}
			nodes := find(doc, func(n *nethtml.Node) bool { _, ok := attr(n, "data-chart"); return ok })
			var ids []string
			for _, n := range nodes {
				id, _ := attr(n, "data-chart")
				ids = append(ids, id)
				drawn, ok := attr(n, "data-drawn")
				if !ok {
					t.Errorf("chart %s did not draw", id)
				}
				canvases := len(find(n, func(c *nethtml.Node) bool { return c.Data == "canvas" }))
				want := 1
				if id == "opcodemix" {
					want = 0
				}
				if canvases != want {
					t.Errorf("chart %s has %d canvases; want %d", id, canvases, want)
				}
				if id == "flowrates" {
					want := len(d.Flows)
					if d.ElephantRate > 0 {
						want++ // the threshold line
					}
					if drawn != strconv.Itoa(want) {
						t.Errorf("flow rate chart drew %s series; want %d", drawn, want)
					}
				}
			}
			if !slices.Equal(ids, charts) {
				t.Errorf("charts %v; want %v", ids, charts)
			}
			rows := find(doc, func(n *nethtml.Node) bool { _, ok := attr(n, "data-rank"); return n.Data == "tr" && ok })
			if len(rows) != len(d.Flows) {
				t.Errorf("flow table has %d rows; want %d", len(rows), len(d.Flows))
			}
		})
	}
}

func mustPage(t testing.TB, o *html.Options) *html.Page {
	t.Helper()
	p, err := html.NewPage(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writePage(t testing.TB, p *html.Page) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// BenchmarkPageWrite measures what the page costs per window: a report
// with a top list of 20 flows, into a page that holds 10 000 windows
// already, so that points merge and the flow cap is reached.
func BenchmarkPageWrite(b *testing.B) {
	p := mustPage(b, nil)
	syntheticReports(b, p, 10000, 1000)
	r := syntheticReport(10000, 1000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Window.Start = int64(1_700_000_000+10000+i) * 1e9
		if err := p.Write(r); err != nil {
			b.Fatal(err)
		}
	}
}

// labelProbe records, for every canvas, the box of each text drawn on it
// since the canvas was last cleared whole (uPlot clears it for each
// drawing, and draws nothing but its axes' labels as text): the text's
// measureText box placed where fillText puts it, through the context's
// transform (uPlot rotates the y axes' titles), in canvas pixels; and the
// rectangles filled on it, with their colour (uPlot fills none of its own:
// on the events timeline they are the bars). Once the page's status is set
// it writes them, with each canvas's chart and size, as JSON into
// body[data-labels].
const labelProbe = `<script>
(function () {
  "use strict";
  const P = CanvasRenderingContext2D.prototype, fill = P.fillText, rect = P.fillRect, clear = P.clearRect;
  const drawn = new Map(), rects = new Map();
  P.clearRect = function (x, y, w, h) {
    if (x <= 0 && y <= 0 && w >= this.canvas.width && h >= this.canvas.height) { drawn.set(this.canvas, []); rects.set(this.canvas, []); }
    return clear.apply(this, arguments);
  };
  P.fillRect = function (x, y, w, h) {
    if (!rects.has(this.canvas)) rects.set(this.canvas, []);
    rects.get(this.canvas).push({ style: String(this.fillStyle), x0: x, y0: y, x1: x + w, y1: y + h });
    return rect.apply(this, arguments);
  };
  P.fillText = function (text, x, y) {
    const m = this.measureText(text), t = this.getTransform();
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const px of [x - m.actualBoundingBoxLeft, x + m.actualBoundingBoxRight]) {
      for (const py of [y - m.actualBoundingBoxAscent, y + m.actualBoundingBoxDescent]) {
        const X = t.a * px + t.c * py + t.e, Y = t.b * px + t.d * py + t.f;
        x0 = Math.min(x0, X); x1 = Math.max(x1, X); y0 = Math.min(y0, Y); y1 = Math.max(y1, Y);
      }
    }
    if (!drawn.has(this.canvas)) drawn.set(this.canvas, []);
    drawn.get(this.canvas).push({ text: String(text), x0, y0, x1, y1 });
    return fill.apply(this, arguments);
  };
  new MutationObserver(() => setTimeout(() => {
    const out = [];
    for (const [c, labels] of drawn) {
      const chart = c.closest("[data-chart]");
      if (chart) out.push({ chart: chart.dataset.chart, width: c.width, height: c.height, labels, rects: rects.get(c) || [] });
    }
    document.body.dataset.labels = JSON.stringify(out);
  }, 0)).observe(document.body, { attributes: true, attributeFilter: ["data-status"] });
})();
</script>`

// canvasLabels are the labels a canvas shows, as labelProbe writes them.
type canvasLabels struct {
	Chart         string
	Width, Height float64
	Labels        []struct {
		Text           string
		X0, Y0, X1, Y1 float64
	}
}

// Label rules of the charts.
var (
	// clockTime is a tick of a time axis: 24-hour UTC time.
	clockTime = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,3})?)?$`)
	// unreadable is what no label may hold: a 12-hour clock, a US date,
	// an exponent, a value far below its unit (0.00008 Gb/s).
	unreadable = regexp.MustCompile(`(?i)[0-9](am|pm)\b|[0-9]+/[0-9]+/[0-9]+|[0-9]e[-+]?[0-9]|\b0\.00[0-9]`)
)

// labelGap is the least room, in pixels, between two labels of a chart.
const labelGap = 4

// checkLabels checks the labels of every chart of a rendered page: each
// inside its canvas (none cut), none within labelGap of another, none
// unreadable, and a time axis in 24-hour time on every chart.
func checkLabels(t *testing.T, doc *nethtml.Node) {
	t.Helper()
	body := find(doc, func(n *nethtml.Node) bool { return n.Data == "body" })[0]
	raw, ok := attr(body, "data-labels")
	if !ok {
		t.Fatal("the probe wrote no labels")
	}
	var canvases []canvasLabels
	if err := json.Unmarshal([]byte(raw), &canvases); err != nil {
		t.Fatal(err)
	}
	if len(canvases) != len(charts)-1 {
		t.Errorf("labels of %d canvases, want %d", len(canvases), len(charts)-1)
	}
	for _, c := range canvases {
		var times, labels []string
		for i, a := range c.Labels {
			labels = append(labels, a.Text)
			if clockTime.MatchString(a.Text) {
				times = append(times, a.Text)
			}
			if unreadable.MatchString(a.Text) {
				t.Errorf("%s: label %q is unreadable", c.Chart, a.Text)
			}
			if a.X0 < -0.5 || a.Y0 < -0.5 || a.X1 > c.Width+0.5 || a.Y1 > c.Height+0.5 {
				t.Errorf("%s: label %q at (%.1f, %.1f)-(%.1f, %.1f) is cut by the canvas, %.0f×%.0f", c.Chart, a.Text, a.X0, a.Y0, a.X1, a.Y1, c.Width, c.Height)
			}
			for _, b := range c.Labels[:i] {
				if a.X0 < b.X1+labelGap && b.X0 < a.X1+labelGap && a.Y0 < b.Y1+labelGap && b.Y0 < a.Y1+labelGap {
					t.Errorf("%s: labels %q (%.1f-%.1f, %.1f-%.1f) and %q (%.1f-%.1f, %.1f-%.1f) overlap or touch", c.Chart, a.Text, a.X0, a.X1, a.Y0, a.Y1, b.Text, b.X0, b.X1, b.Y0, b.Y1)
				}
			}
		}
		if len(times) < 3 {
			t.Errorf("%s: %d ticks in 24-hour time (%q); want at least 3", c.Chart, len(times), labels)
		}
	}
}

// chartSeries is a series of a chart as the page's data-series attribute
// lists it.
type chartSeries struct{ Label, Scale, Stroke string }

// checkCharts checks what the page says of its charts: every chart has a
// legend (uPlot's, or the keys of a chart of many flows), the series of a
// chart are told apart by colour (the flows beyond the palette share
// grey), elephants and jitter flows are counted on another axis than the
// thousands of distinct flows, and throughput is labelled in the unit its
// size needs (want, such as "kb/s").
func checkCharts(t *testing.T, doc *nethtml.Node, want string) {
	t.Helper()
	for _, n := range find(doc, func(n *nethtml.Node) bool { _, ok := attr(n, "data-chart"); return ok }) {
		id, _ := attr(n, "data-chart")
		if id == "opcodemix" {
			continue
		}
		card := n.Parent
		legends := find(card, func(c *nethtml.Node) bool {
			class, _ := attr(c, "class")
			return slices.Contains(strings.Fields(class), "u-legend") || slices.Contains(strings.Fields(class), "keys")
		})
		if len(legends) == 0 {
			t.Errorf("%s: no legend", id)
		}
		raw, _ := attr(n, "data-series")
		var series []chartSeries
		if err := json.Unmarshal([]byte(raw), &series); err != nil {
			t.Errorf("%s: data-series %q: %v", id, raw, err)
			continue
		}
		seen := map[string]string{}
		scales := map[string]string{}
		for _, s := range series {
			scales[s.Label] = s.Scale
			if other, dup := seen[s.Stroke]; dup && !strings.HasPrefix(s.Stroke, "rgba(") && !strings.Contains(s.Label, "threshold") {
				t.Errorf("%s: %q and %q are both drawn in %s", id, other, s.Label, s.Stroke)
			}
			seen[s.Stroke] = s.Label
		}
		if id == "flowcount" && (scales["elephants (right axis)"] == scales["distinct flows (est.)"] || scales["elephants (right axis)"] != scales["jitter flows (right axis)"]) {
			t.Errorf("flowcount: scales %v; want elephants and jitter flows on one scale, distinct flows on another", scales)
		}
	}
	body := find(doc, func(n *nethtml.Node) bool { return n.Data == "body" })[0]
	raw, _ := attr(body, "data-labels")
	var canvases []canvasLabels
	if err := json.Unmarshal([]byte(raw), &canvases); err != nil {
		t.Fatal(err)
	}
	for _, c := range canvases {
		if c.Chart != "throughput" {
			continue
		}
		var labels []string
		for _, l := range c.Labels {
			labels = append(labels, l.Text)
		}
		if !slices.ContainsFunc(labels, func(l string) bool { return strings.HasSuffix(l, " "+want) }) {
			t.Errorf("throughput: labels %q; want some in %s", labels, want)
		}
	}
}

// TestChartLabelsReadable renders the pages of long runs (10 minutes of
// one-second windows, 24 hours of one-minute windows, the second at
// 76 kb/s) and of the demo trace, with charts side by side (1400 pixels)
// and one above the other (1000), and checks every label uPlot drew on its
// canvases with checkLabels.
func TestChartLabelsReadable(t *testing.T) {
	browser := chromiumPath(t)
	run := func(windows int, length time.Duration, scale float64) []byte {
		p := mustPage(t, &html.Options{ElephantRate: 1e9 * scale, JitterRate: 5e8 * scale})
		for i := range windows {
			if err := p.Write(syntheticReportOf(i, 200, length, scale)); err != nil {
				t.Fatal(err)
			}
		}
		return writePage(t, p)
	}
	for _, tc := range []struct {
		name  string
		page  func() []byte
		unit  string // of the throughput axis
		short bool   // run with -short
	}{
		{"10 minutes of 1s windows", func() []byte { return run(600, time.Second, 1) }, "Gb/s", true},
		{"24 hours of 1min windows at 76 kb/s", func() []byte { return run(1440, time.Minute, 76e3/24e9) }, "kb/s", false},
		{"demo", func() []byte {
			_, page := replay(t, demoPath, time.Second, &html.Options{ElephantRate: 4e6, JitterRate: 1e6})
			return page
		}, "Mb/s", true},
	} {
		if testing.Short() && !tc.short {
			continue
		}
		page := bytes.Replace(tc.page(), []byte(`<body data-status="loading">`), []byte(`<body data-status="loading">`+labelProbe), 1)
		for _, width := range []int{1400, 1000} {
			if testing.Short() && width != 1400 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%dpx", tc.name, width), func(t *testing.T) {
				doc := renderWidth(t, browser, page, width)
				body := find(doc, func(n *nethtml.Node) bool { return n.Data == "body" })[0]
				if status, _ := attr(body, "data-status"); status != "ok" {
					t.Fatalf("page status %q; want ok", status)
				}
				checkLabels(t, doc)
				checkCharts(t, doc, tc.unit)
			})
		}
	}
}

// TestEventsDrawInChromium renders the page of a trace with every kind of
// trouble (synth.ScenarioAll), at 100 ms windows, where the PFC storm
// is reported in two windows, and at 1 s windows, in headless Chromium. The
// events timeline draws one bar per injected event in its kind's colour
// and lane (the storm once), from its start onwards in time order, within
// the plot; the event table has a row per event naming what the truth
// injected, and its flow links lead to rows of the flow table holding
// those flows (all 16 senders of the incast). The timeline's labels are
// checked like every chart's.
func TestEventsDrawInChromium(t *testing.T) {
	browser := chromiumPath(t)
	for _, tc := range []struct {
		window time.Duration
		unit   string // of the throughput axis
	}{{100 * time.Millisecond, "Gb/s"}, {time.Second, "Mb/s"}} {
		window := tc.window
		t.Run(window.String(), func(t *testing.T) {
			src, err := synth.New(&synth.Config{Seed: 1, Packets: 5000, Flows: 200, Scenario: synth.ScenarioAll,
				LossProb: synth.Off, RNRProb: synth.Off, SnapLen: 128})
			if err != nil {
				t.Fatal(err)
			}
			_, page := replaySource(t, src, window, &html.Options{})
			truth := src.Truth()
			page = bytes.Replace(page, []byte(`<body data-status="loading">`), []byte(`<body data-status="loading">`+labelProbe), 1)
			doc := render(t, browser, page)
			body := find(doc, func(n *nethtml.Node) bool { return n.Data == "body" })[0]
			if status, _ := attr(body, "data-status"); status != "ok" {
				t.Fatalf("page status %q; want ok", status)
			}
			checkLabels(t, doc)
			checkCharts(t, doc, tc.unit)

			want := map[string]int{}
			for _, e := range truth.Events {
				want[e.Kind]++
			}
			// The bars drawn, by colour, and the colour of each kind
			// as the timeline's legend (data-series) gives it.
			timeline := find(doc, func(n *nethtml.Node) bool { id, _ := attr(n, "data-chart"); return id == "timeline" })
			if len(timeline) != 1 {
				t.Fatalf("%d timelines", len(timeline))
			}
			var series []chartSeries
			raw, _ := attr(timeline[0], "data-series")
			if err := json.Unmarshal([]byte(raw), &series); err != nil {
				t.Fatal(err)
			}
			colour := map[string]string{}
			for _, s := range series {
				colour[s.Stroke] = s.Label
			}
			var canvases []struct {
				Chart         string
				Width, Height float64
				Rects         []struct {
					Style          string
					X0, Y0, X1, Y1 float64
				}
			}
			raw, _ = attr(body, "data-labels")
			if err := json.Unmarshal([]byte(raw), &canvases); err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			lanes := map[string]float64{}
			lastX := map[string]float64{}
			for _, c := range canvases {
				if c.Chart != "timeline" {
					if len(c.Rects) > 0 {
						t.Errorf("%s: %d rectangles filled", c.Chart, len(c.Rects))
					}
					continue
				}
				for _, r := range c.Rects {
					kind, ok := colour[r.Style]
					if !ok {
						t.Errorf("timeline: a bar in %s, no kind's colour", r.Style)
						continue
					}
					got[kind]++
					if y, seen := lanes[kind]; seen && y != r.Y0 {
						t.Errorf("timeline: %s bars at y %.1f and %.1f: want one lane", kind, y, r.Y0)
					}
					lanes[kind] = r.Y0
					if r.X0 < lastX[kind] {
						t.Errorf("timeline: %s bars out of time order", kind)
					}
					lastX[kind] = r.X0
					if r.X0 < 0 || r.X1 > c.Width || r.Y0 < 0 || r.Y1 > c.Height || r.X1-r.X0 < 3 {
						t.Errorf("timeline: %s bar (%.1f, %.1f)-(%.1f, %.1f) outside the %.0f×%.0f canvas or under 3 px", kind, r.X0, r.Y0, r.X1, r.Y1, c.Width, c.Height)
					}
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("timeline bars by kind %v; want %v", got, want)
			}
			if lanes["incast"] == lanes["pfc_storm"] || len(slices.Compact(slices.Sorted(maps.Values(lanes)))) != len(lanes) {
				t.Errorf("timeline lanes %v: want one per kind", lanes)
			}

			// The event table: a row per event, whose text names what
			// the truth injected; its links lead to the flows' rows.
			rows := find(doc, func(n *nethtml.Node) bool { _, ok := attr(n, "data-event"); return n.Data == "tr" && ok })
			if len(rows) != len(truth.Events) {
				t.Fatalf("event table has %d rows; want %d", len(rows), len(truth.Events))
			}
			flowRow := map[string][]string{} // "#flow-N" → the cells of that row
			for _, r := range find(doc, func(n *nethtml.Node) bool { _, ok := attr(n, "data-rank"); return n.Data == "tr" && ok }) {
				id, _ := attr(r, "id")
				var cells []string
				for _, td := range find(r, func(n *nethtml.Node) bool { return n.Data == "td" }) {
					cells = append(cells, text(td))
				}
				flowRow["#"+id] = cells
			}
			for _, e := range truth.Events {
				var named []synth.EventFlow
				var what string
				switch e.Kind {
				case "incast":
					what, named = "→ "+e.Dst.String()+": 16 senders", e.Senders
				case "pfc_storm":
					what = fmt.Sprintf("%s priority %d: paused 300 ms (100 %%), %s frames", e.MAC, e.Priority, thousands(e.Frames))
				default:
					what, named = fmt.Sprintf("%s → %s QP 0x%06x", e.Flow.Src, e.Flow.Dst, e.Flow.DQP), []synth.EventFlow{*e.Flow}
					if e.Kind == "retransmission" {
						what += fmt.Sprintf(": %s", e.Cause)
					}
				}
				i := slices.IndexFunc(rows, func(r *nethtml.Node) bool {
					kind, _ := attr(r, "data-kind")
					return kind == e.Kind && strings.Contains(text(r), what)
				})
				if i < 0 {
					t.Errorf("no %s row says %q", e.Kind, what)
					continue
				}
				links := find(rows[i], func(n *nethtml.Node) bool { return n.Data == "a" })
				if len(links) != len(named) {
					t.Errorf("%s row: %d flow links; want %d", e.Kind, len(links), len(named))
				}
				for _, a := range links {
					href, _ := attr(a, "href")
					cells, ok := flowRow[href]
					if !ok {
						t.Errorf("%s row: link %s leads to no flow row", e.Kind, href)
						continue
					}
					if !slices.ContainsFunc(named, func(f synth.EventFlow) bool {
						return cells[1] == f.Src.String() && cells[2] == f.Dst.String() && cells[3] == fmt.Sprintf("0x%06x", f.DQP)
					}) {
						t.Errorf("%s row: link %s leads to flow %q, not one the event names", e.Kind, href, cells[1:4])
					}
				}
			}
		})
	}
}

// thousands writes n with a comma between groups of three digits, as the
// page does.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// text returns the text under n.
func text(n *nethtml.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == nethtml.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}
