package html_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	nethtml "golang.org/x/net/html"

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
func syntheticReport(i, pool int) *report.Report {
	const start = int64(1_700_000_000) * 1e9
	w := &metrics.Window{Start: start + int64(i)*1e9, Length: 1e9, Hosts: []string{"cap1", "cap2"}}
	wave := 1 + math.Sin(float64(i)/300)
	w.Counters[metrics.Packets] = uint64(3e6 * wave)
	w.Counters[metrics.Bytes] = uint64(3e9 * wave)
	w.Counters[metrics.RoCEPackets] = uint64(2.9e6 * wave)
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
	for k := range 20 {
		id := (i*7 + k*(pool/20)) % pool
		rate := float64(pool-id) * 2e6 * (1 + 0.5*math.Sin(float64(i+id)/50))
		f := report.FlowReport{Rate: rate, PrevRate: rate * 0.8}
		f.Key = metrics.FlowKey{Src: decode.AddrFrom4([4]byte{10, 0, byte(id >> 8), byte(id)}), Dst: decode.AddrFrom4([4]byte{10, 1, 0, byte(k)}), DQP: uint32(0x11 + id)}
		f.SQP, f.SQPKnown = uint32(0x800+id), id%2 == 0
		f.C[metrics.FlowBytes] = uint64(rate / 8)
		f.C[metrics.FlowPackets] = uint64(rate / 8 / 4096)
		f.C[metrics.FlowCNP] = uint64((i + id) % 5)
		f.Elephant = rate >= 1e9
		f.Jitter = f.Elephant && (i+id)%13 == 0
		r.Top = append(r.Top, f)
	}
	return r
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

// render opens page in headless Chromium, lets its scripts run and
// returns the DOM it ends with.
func render(t *testing.T, browser string, page []byte) *nethtml.Node {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,3000", "--virtual-time-budget=60000", "--dump-dom", "file://"+path)
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
// the others are uPlot canvases.
var charts = []string{"throughput", "frames", "flowcount", "flowrates", "flowjitter", "flowcnp", "congestion",
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
