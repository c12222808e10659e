package export

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// TestReportJSONContract builds the reports of the hand-made trace and
// checks the keys DESIGN.md promises and the values computed by hand.
func TestReportJSONContract(t *testing.T) {
	tr := testframes.Trace()
	cfg := &metrics.Config{Workers: 2, Host: "h", ElephantRate: 50e3, JitterRate: 10e3}
	wins := enginetest.Run(t, cfg, &testframes.Source{Frames: tr.Frames, Per: 7})
	rp, err := report.NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var reports []map[string]any
	for _, w := range wins {
		var m map[string]any
		b := AppendJSON(nil, rp.Build(w))
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("report is not JSON: %v\n%s", err, b)
		}
		reports = append(reports, m)
	}
	for _, k := range []string{"window_start_ns", "window_ns", "host", "packets", "bytes", "roce_packets",
		"other_packets", "malformed_packets", "truncated_packets", "flows", "opcodes", "messages", "cnp",
		"ecn_ce", "fecn", "becn", "naks", "rnr_naks", "retransmits", "psn_gaps", "pfc", "top_flows",
		"elephants", "jitter"} {
		if _, ok := reports[0][k]; !ok {
			t.Errorf("report lacks key %q", k)
		}
	}
	r0 := reports[0]
	for k, want := range map[string]float64{"packets": float64(tr.Want[0]["packets"]), "cnp": 1, "naks": 1,
		"rnr_naks": 1, "retransmits": 1, "psn_gaps": 1, "flows": 3, "window_ns": 1e9} {
		if got := r0[k].(float64); got != want {
			t.Errorf("window 0 %s = %v, want %v", k, got, want)
		}
	}
	if diff := cmp.Diff(map[string]any{"3": map[string]any{"frames": 1.0, "quanta": 65535.0},
		"5": map[string]any{"frames": 1.0, "quanta": 7.0}}, r0["pfc"]); diff != "" {
		t.Errorf("pfc (-want +got):\n%s", diff)
	}
	// The top flow of window 0 is A→B toward B's QP: its source QP is
	// learned by pairing it with B→A (same UDP source port), the CNP B
	// sent toward A's QP counts against it, and so do the retransmission,
	// the gap and the CE mark.
	top := r0["top_flows"].([]any)[0].(map[string]any)
	for k, want := range map[string]any{"src": "10.0.0.1", "dst": "10.0.0.2", "dqp": float64(0x200),
		"sqp": float64(0x100), "dqp_hex": "0x000200", "sqp_hex": "0x000100", "cnp": 1.0, "retransmits": 1.0, "psn_gaps": 1.0, "ecn_ce": 1.0, "packets": 7.0} {
		if diff := cmp.Diff(want, top[k]); diff != "" {
			t.Errorf("top flow %s (-want +got): %s", k, diff)
		}
	}
	// Both windows are partial: the trace starts 1 µs into window 0 and
	// ends 2 µs into window 1, and rates are over the covered time.
	for i, want := range []float64{1e9 - 1000, 2001} {
		if got := reports[i]["covered_ns"]; got != want || reports[i]["partial"] != true {
			t.Errorf("window %d covered_ns %v partial %v, want %v and true", i, got, reports[i]["partial"], want)
		}
	}
	// Window 1: A→B sends two 4 KiB WRITEs (8340 bytes) and C→D a SEND
	// (162 bytes) in 2001 ns: 33 Gb/s and 648 Mb/s, both elephants at
	// 50 kb/s, and both jitter flows, as they sent at a few kb/s in window 0.
	want := []struct {
		dqp  float64
		rate float64
	}{{0x200, 8340 * 8 / 2001e-9}, {0x400, 162 * 8 / 2001e-9}}
	for _, key := range []string{"elephants", "jitter"} {
		l := reports[1][key].([]any)
		if len(l) != len(want) {
			t.Fatalf("window 1 %s = %v, want the flows toward QPs 0x200 and 0x400", key, l)
		}
		for i, w := range want {
			f := l[i].(map[string]any)
			if f["dqp"] != w.dqp || math.Abs(f["rate_bps"].(float64)-w.rate) > 1 || f[strings.TrimSuffix(key, "s")] != true {
				t.Errorf("window 1 %s[%d] = dqp %v rate %v, want %v and %v", key, i, f["dqp"], f["rate_bps"], w.dqp, w.rate)
			}
		}
	}
}

func TestJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x00\x1f\n", "bad\xffutf8", "héllo"} {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("appendJSONString(%q) = %s: %v", s, b, err)
			continue
		}
		want := s
		if s == "bad\xffutf8" {
			want = "bad\ufffdutf8"
		}
		if got != want {
			t.Errorf("appendJSONString(%q) reads back as %q", s, got)
		}
	}
}

func TestAppendQP(t *testing.T) {
	for qpn, want := range map[uint32]string{0: "0x000000", 1: "0x000001", 0x4bdaaf: "0x4bdaaf", 0xffffff: "0xffffff"} {
		if got := string(AppendQP(nil, qpn)); got != want {
			t.Errorf("AppendQP(%#x) = %s, want %s", qpn, got, want)
		}
	}
}

// plainDecimal is how every report format writes a number.
var plainDecimal = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// TestFloatsOneWay: AppendFloat writes every float in plain decimal
// notation, never in exponent form, with the fewest digits that read back
// exactly; NaN and infinities are null.
func TestFloatsOneWay(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {1, "1"}, {-3, "-3"}, {1.5, "1.5"}, {66432680, "66432680"},
		{1.5318545936391562e+07, "15318545.936391562"}, {3.5e-4, "0.00035"}, {1e20, "100000000000000000000"},
		{123456789012, "123456789012"}, {2.5e-9, "0.0000000025"},
		{math.NaN(), "null"}, {math.Inf(-1), "null"},
	} {
		got := string(AppendFloat(nil, tc.v))
		if got != tc.want {
			t.Errorf("AppendFloat(%v) = %s, want %s", tc.v, got, tc.want)
		}
		if got == "null" {
			continue
		}
		if back, err := strconv.ParseFloat(got, 64); err != nil || back != tc.v {
			t.Errorf("AppendFloat(%v) = %s reads back as %v (%v)", tc.v, got, back, err)
		}
	}
}

// TestReportsWriteFloatsOneWay: in the JSON lines and CSV of a trace whose
// windows are partial (rates with fractions, some large), every number is
// in plain decimal notation, as AppendFloat writes it.
func TestReportsWriteFloatsOneWay(t *testing.T) {
	rs := handReports(t, &metrics.Config{Workers: 1, Host: "h", ElephantRate: 50e3, JitterRate: 10e3, Exact: true})
	var jl, cv bytes.Buffer
	js, cs := NewJSONLines(&jl), NewCSV(&cv)
	for _, r := range rs {
		if err := errors.Join(js.Write(r), cs.Write(r)); err != nil {
			t.Fatal(err)
		}
	}
	fractions := 0
	check := func(where, n string) {
		if !plainDecimal.MatchString(n) {
			t.Errorf("%s: number %s is not in plain decimal notation", where, n)
		}
		if strings.Contains(n, ".") {
			fractions++
		}
	}
	dec := json.NewDecoder(&jl)
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := tok.(json.Number); ok {
			check("JSON", n.String())
		}
	}
	rows, err := csv.NewReader(&cv).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range rows[1:] {
		for j, cell := range row {
			if _, err := strconv.ParseFloat(cell, 64); err == nil {
				check(fmt.Sprintf("CSV row %d column %s", i+1, rows[0][j]), cell)
			}
		}
	}
	if fractions == 0 {
		t.Error("no number with a fraction: the trace does not test the rule")
	}
}
