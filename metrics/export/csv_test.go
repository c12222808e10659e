package export

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// TestCSVReadsBack parses the CSV of the hand-made trace with
// encoding/csv: one window row per window holding the window's counters
// and throughput, then one row per event and one flow row per listed flow, every row as wide as
// the header, and the cells a row does not have empty.
func TestCSVReadsBack(t *testing.T) {
	rs := handReports(t, &metrics.Config{Workers: 1, Host: "h", ElephantRate: 50e3, JitterRate: 10e3})
	var out bytes.Buffer
	s := NewCSV(&out)
	for _, r := range rs {
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v", err)
	}
	col := make(map[string]int)
	for i, name := range rows[0] {
		if _, dup := col[name]; dup {
			t.Fatalf("column %q twice", name)
		}
		col[name] = i
	}
	cell := func(row []string, name string) string {
		i, ok := col[name]
		if !ok {
			t.Fatalf("no column %q", name)
		}
		return row[i]
	}
	rows = rows[1:]
	for _, r := range rs {
		w := r.Window
		if len(rows) == 0 || cell(rows[0], "row") != "window" {
			t.Fatalf("window %d: no window row", w.Start)
		}
		win := rows[0]
		for _, c := range []metrics.Counter{metrics.Packets, metrics.Bytes, metrics.RoCEPackets, metrics.OtherPackets,
			metrics.MalformedPackets, metrics.TruncatedPackets, metrics.KernelDrops, metrics.CNP, metrics.Retransmits, metrics.PSNGaps} {
			if got := cell(win, c.String()); got != strconv.FormatUint(w.Counters[c], 10) {
				t.Errorf("window %d %s = %q, want %d", w.Start, c, got, w.Counters[c])
			}
		}
		// Over the covered part of the window: the hand trace's windows
		// are partial.
		if got, want := cell(win, "rate_bps"), strconv.FormatFloat(float64(w.Counters[metrics.Bytes])*8/(float64(w.Covered())/1e9), 'f', -1, 64); got != want || w.Covered() == w.Length {
			t.Errorf("window rate_bps = %s, want %s", got, want)
		}
		if got := cell(win, "window_start_ns"); got != strconv.FormatInt(w.Start, 10) {
			t.Errorf("window_start_ns = %s, want %d", got, w.Start)
		}
		if got, want := cell(win, "window_start"), time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano); got != want {
			t.Errorf("window_start = %s, want %s", got, want)
		}
		for p := range 8 {
			frames, quanta := w.Counters.PFC(p)
			for name, want := range map[string]uint64{fmt.Sprintf("pfc%d_frames", p): frames, fmt.Sprintf("pfc%d_quanta", p): quanta} {
				if got := cell(win, name); got != strconv.FormatUint(want, 10) {
					t.Errorf("window %d %s = %q, want %d", w.Start, name, got, want)
				}
			}
		}
		for name, l := range map[string]report.LatencySummary{"read_latency": r.ReadLatency, "ack_latency": r.AckLatency} {
			want := []string{strconv.FormatUint(l.Count, 10), "", "", "", "", ""}
			if l.Count > 0 {
				for i, q := range []float64{l.P50, l.P90, l.P99, l.P999, l.Max} {
					want[1+i] = strconv.FormatFloat(q, 'f', -1, 64)
				}
			}
			var got []string
			for _, c := range []string{"_matched", "_p50_ns", "_p90_ns", "_p99_ns", "_p999_ns", "_max_ns"} {
				got = append(got, cell(win, name+c))
			}
			if !slices.Equal(got, want) {
				t.Errorf("window %d %s = %q, want %q", w.Start, name, got, want)
			}
		}
		for _, empty := range []string{"src", "dqp", "elephant", "read_latency_count", "cnp_carried"} {
			if cell(win, empty) != "" {
				t.Errorf("window row has %s = %q", empty, cell(win, empty))
			}
		}
		for i := range r.Events {
			if row := rows[1+i]; cell(row, "row") != "event" || cell(row, "id") != r.Events[i].ID.String() {
				t.Errorf("window %d: row %d is not event %s: %q", w.Start, 1+i, r.Events[i].ID, row)
			}
		}
		rows = rows[len(r.Events):]
		flows := reportedFlows(r)
		for i, f := range flows {
			row := rows[1+i]
			sqp, sqpHex := "", ""
			if f.SQPKnown {
				sqp, sqpHex = strconv.FormatUint(uint64(f.SQP), 10), fmt.Sprintf("0x%06x", f.SQP)
			}
			if cell(row, "row") != "flow" || cell(row, "src") != f.Key.Src.String() || cell(row, "dqp") != strconv.FormatUint(uint64(f.Key.DQP), 10) ||
				cell(row, "dqp_hex") != fmt.Sprintf("0x%06x", f.Key.DQP) || cell(row, "sqp") != sqp || cell(row, "sqp_hex") != sqpHex ||
				cell(row, "bytes") != strconv.FormatUint(f.C[metrics.FlowBytes], 10) || cell(row, "elephant") != strconv.FormatBool(f.Elephant) ||
				cell(row, "roce_packets") != "" || cell(row, "flows") != "" || cell(row, "pfc7_quanta") != "" || cell(row, "read_latency_matched") != "" ||
				cell(row, "window_start") != cell(win, "window_start") {
				t.Errorf("window %d flow %d: row %q does not match %+v", w.Start, i, row, f.Key)
			}
		}
		rows = rows[1+len(flows):]
	}
	if len(rows) != 0 {
		t.Errorf("%d rows left over", len(rows))
	}
}
