package clickhouse

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
	"github.com/rocescope/rocescope/sketch"
)

// probeReport returns a report whose JSON has every key a report of one
// window can have, none of whose values is its column's default (which a
// row leaves out).
func probeReport() *report.Report {
	w := &metrics.Window{Start: 1_700_000_000_000_000_000, Length: 1e9, Hosts: []string{"h"}}
	for i := range w.Counters {
		w.Counters[i] = 1
	}
	w.Flows = make([]metrics.FlowRecord, 1)
	f := report.FlowReport{Rate: .5, PrevRate: .5, Elephant: true, Jitter: true, Estimated: true, BytesMin: 1}
	f.Key.Src, f.Key.Dst = decode.AddrFrom4([4]byte{10, 0, 0, 1}), decode.AddrFromLID(7)
	f.Key.DQP, f.SQPKnown, f.SQP, f.Sport = 2, true, 1, 1
	for i := range f.C {
		f.C[i] = 3
	}
	f.Ops.Add(4, 1)
	f.Ops.Other = 1
	fl := report.Flow{Key: f.Key, SQP: 1, SQPKnown: true}
	return &report.Report{
		Events:          probeEvents(fl),
		EventsOmitted:   [report.NumEventKinds]uint64{0, 1, 1, 1, 1},
		TopCNP:          []report.FlowReport{f},
		TopRetransmits:  []report.FlowReport{f},
		EventFlows:      []report.FlowReport{f},
		Window:          w,
		Exact:           true,
		Top:             []report.FlowReport{f},
		All:             []report.FlowReport{f},
		SketchError:     &report.SketchError{FlowsRelErr: .5, CountMinARE: .5, TopRecall: .5, TopPrec: .5},
		Flows:           sketch.Estimate{Value: 1, RelErr: .5, Method: "probe"},
		ReadLatency:     report.LatencySummary{Count: 1, P50: .5, P90: .5, P99: .5, P999: .5, Max: .5},
		AckLatency:      report.LatencySummary{Count: 1, P50: .5, P90: .5, P99: .5, P999: .5, Max: .5},
		MissingHosts:    []string{"g"},
		CNPUnattributed: 1,
	}
}

// probeEvents returns an event of each kind, with every key of its kind
// (a retransmission of each cause), none at its column's default.
func probeEvents(fl report.Flow) []report.Event {
	ev := func(k report.EventKind) report.Event {
		return report.Event{Kind: k, ID: report.EventID(k), Start: 1_700_000_000_000_000_001, End: 1_700_000_000_000_000_002, Ongoing: true}
	}
	in, st, ce := ev(report.EventIncast), ev(report.EventPFCStorm), ev(report.EventCEWithoutCNP)
	in.Incast = &report.Incast{Dst: fl.Key.Dst, Senders: []report.Sender{{Flow: fl, Bytes: 1, Share: 1}}, SenderCount: 1, Sources: 1, PeakBPS: .5, Bytes: 1, ECNCE: 1, CNP: 1}
	st.PFCStorm = &report.PFCStorm{MAC: [6]byte{1}, Priority: 3, PausedNS: 1, PausedFraction: .5, Frames: 1}
	ce.CEWithoutCNP = &report.CEWithoutCNP{Flow: fl, ECNCE: 1, Packets: 1, ReversePackets: 1}
	evs := []report.Event{in, st, ce}
	for _, c := range []metrics.Cause{metrics.CauseNAK, metrics.CauseRNR} {
		rt := ev(report.EventRetransmission)
		rt.ID += report.EventID(c) << 8
		rt.Retransmission = &report.Retransmission{Flow: fl, Cause: c, FirstPSN: 1, Resent: 1, StallNS: 1, NAKCode: 1, Merged: true}
		evs = append(evs, rt)
	}
	return evs
}

// columnNames returns the names of t's columns.
func columnNames(t *table) []string {
	var names []string
	for _, c := range t.columns {
		names = append(names, c[0])
	}
	return names
}

// jsonKeys returns the keys of the JSON object obj, in order.
func jsonKeys(t *testing.T, obj []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%.80s: not a JSON object: %v", obj, err)
	}
	var keys []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// spread are the keys of a window's report whose values are spread over
// several columns, and the prefix those columns' names start with; ""
// are keys written elsewhere (the flow lists: table flows). Of a flow,
// only opcodes is spread.
var spread = map[string]string{
	"window_start":    "window_start", // RFC 3339 in the report, DateTime here
	"opcodes":         "opcodes.",
	"nak_codes":       "nak_codes.",
	"decode_errors":   "decode_errors.",
	"pfc":             "pfc.",
	"read_latency_ns": "read_latency_",
	"ack_latency_ns":  "ack_latency_",
	"sketch_error":    "sketch_error_",
	"top_flows":       "",
	"elephants":       "",
	"jitter":          "",
	"flows_all":       "",
	"top_cnp":         "",
	"top_retransmits": "",
	"event_flows":     "",
	"events":          "", // table events
	"events_omitted":  "events_omitted.",
}

// TestSchemaCoversReport: every key of the JSON report, of a window and
// of a flow, is a column of table windows or flows (or is spread over
// typed columns named after it), so that a key added to the report
// contract without a column fails here; and a row has exactly its
// table's columns, in order.
func TestSchemaCoversReport(t *testing.T) {
	r := probeReport()
	var b batch
	var rw rowWriter
	rw.add(&b, r, 1)
	for _, x := range []struct {
		table *table
		obj   []byte
		extra []string // columns that are not report keys
	}{
		{&tables[tWindows], export.AppendJSON(nil, r), []string{"window_start_ns", "segment", "written_ns"}},
		{&tables[tFlows], export.AppendFlowJSON(nil, &r.All[0]), append(slices.Clone(leadColumnNames()), "in_top", "opcodes_other")},
	} {
		cols := columnNames(x.table)
		covered := map[string]bool{}
		for _, k := range jsonKeys(t, x.obj) {
			prefix, ok := spread[k]
			if x.table.name == TableFlows {
				prefix, ok = "opcodes.", k == "opcodes"
			}
			switch {
			case ok && prefix == "":
			case ok:
				n := 0
				for _, c := range cols {
					if strings.HasPrefix(c, prefix) {
						covered[c] = true
						n++
					}
				}
				if n == 0 {
					t.Errorf("table %s: report key %s has no columns %s*", x.table.name, k, prefix)
				}
			case slices.Contains(cols, k):
				covered[k] = true
			default:
				t.Errorf("table %s: report key %s has no column: add one to schema.go (and to the README's table list)", x.table.name, k)
			}
		}
		for _, c := range cols {
			if !covered[c] && !slices.Contains(x.extra, c) {
				t.Errorf("table %s: column %s is no report key", x.table.name, c)
			}
		}
		row := b.rows[slices.IndexFunc(tables, func(t table) bool { return t.name == x.table.name })]
		row = row[:bytes.IndexByte(row, '\n')]
		if diff := cmp.Diff(cols, jsonKeys(t, row)); diff != "" {
			t.Errorf("table %s: a row's keys are not the columns (-columns +row):\n%s", x.table.name, diff)
		}
	}
	checkEventColumns(t, r.Events, b.rows[tEvents])
}

// checkEventColumns checks that every key of each event is a column of
// table events (senders spread over senders.*), that its row has the lead,
// event_start and its keys' columns, in the table's order, and that every
// column is some kind's key.
func checkEventColumns(t *testing.T, events []report.Event, rows []byte) {
	t.Helper()
	cols := columnNames(&tables[tEvents])
	covered := map[string]bool{"event_start": true}
	for _, c := range leadColumnNames() {
		covered[c] = true
	}
	lines := bytes.Split(bytes.TrimSuffix(rows, []byte("\n")), []byte("\n"))
	if len(lines) != len(events) {
		t.Fatalf("%d event rows for %d events", len(lines), len(events))
	}
	for i := range events {
		e := &events[i]
		want := map[string]bool{"event_start": true}
		for _, c := range leadColumnNames() {
			want[c] = true
		}
		for _, k := range jsonKeys(t, export.AppendEventJSON(nil, e)) {
			prefix := k
			if k == "senders" {
				prefix = "senders."
			}
			n := 0
			for _, c := range cols {
				if c == k || prefix != k && strings.HasPrefix(c, prefix) {
					want[c], covered[c] = true, true
					n++
				}
			}
			if n == 0 {
				t.Errorf("table events: key %s of a %s event has no column: add one to schema.go (and to the README's table list)", k, e.Kind)
			}
		}
		// A ce_without_cnp event's cnp is always 0, its column's default.
		delete(want, "cnp")
		if e.Kind == report.EventIncast {
			want["cnp"] = true
		}
		var wantRow []string
		for _, c := range cols {
			if want[c] {
				wantRow = append(wantRow, c)
			}
		}
		if diff := cmp.Diff(wantRow, jsonKeys(t, lines[i])); diff != "" {
			t.Errorf("the row of a %s event: keys (-want +got):\n%s", e.Kind, diff)
		}
	}
	for _, c := range cols {
		if !covered[c] {
			t.Errorf("table events: column %s is no event key", c)
		}
	}
}

// leadColumnNames returns the names of the lead columns.
func leadColumnNames() []string {
	var names []string
	for _, c := range leadColumns {
		names = append(names, c[0])
	}
	return names
}

// TestRowValues checks the rows of a report value by value: the lead,
// and the report's objects spread over arrays and typed columns.
func TestRowValues(t *testing.T) {
	r := probeReport()
	w := r.Window
	w.Segment, w.From, w.To = 2, w.Start+1e8, w.Start+6e8
	w.Counters = metrics.Counters{}
	w.Counters[metrics.Packets] = 7
	w.Counters.Opcodes()[4], w.Counters.Opcodes()[17] = 10, 3
	w.Counters.NAKCodes()[1] = 2
	w.Counters.DecodeErrorCodes()[2] = 5
	r.SketchError = &report.SketchError{TopRecall: 1}
	r.ReadLatency = report.LatencySummary{Count: 2, P50: 1.5, P90: 2, P99: 2, P999: 2, Max: 2.25}
	r.AckLatency = report.LatencySummary{}
	r.All[0].Key.DQP, r.Top[0].Key.DQP = 0x12, 0x12
	var b batch
	var rw rowWriter
	rw.add(&b, r, 42)
	lead := `"window_start":"2023-11-14 22:13:20","window_start_ns":1700000000000000000,"window_ns":1000000000,"covered_ns":500000000,` +
		`"host":"h","segment":2,"written_ns":42`
	var row map[string]any
	if err := json.Unmarshal(b.rows[tWindows], &row); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, k := range []string{"partial", "packets", "bytes", "opcodes.opcode", "opcodes.packets", "nak_codes.code", "nak_codes.count",
		"decode_errors.error", "decode_errors.count", "pfc.priority", "read_latency_count", "read_latency_p50_ns", "read_latency_max_ns",
		"ack_latency_count", "ack_latency_p50_ns", "sketch_error_top_recall", "sketch_error_count_min_are"} {
		got[k] = row[k]
	}
	// Columns at their default (0, [], null) are left out; a Nullable's
	// default is null, not 0.
	want := map[string]any{"partial": 1.0, "packets": 7.0, "bytes": nil, "opcodes.opcode": []any{4.0, 17.0}, "opcodes.packets": []any{10.0, 3.0},
		"nak_codes.code": []any{1.0}, "nak_codes.count": []any{2.0}, "decode_errors.error": []any{decodeErrorName(2)}, "decode_errors.count": []any{5.0},
		"pfc.priority": nil, "read_latency_count": 2.0, "read_latency_p50_ns": 1.5, "read_latency_max_ns": 2.25,
		"ack_latency_count": nil, "ack_latency_p50_ns": nil, "sketch_error_top_recall": 1.0, "sketch_error_count_min_are": 0.0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("window row (-want +got):\n%s", diff)
	}
	if !bytes.HasPrefix(b.rows[tWindows], []byte("{"+lead+",")) {
		t.Errorf("window row %.300s does not start with the lead %s", b.rows[tWindows], lead)
	}
	wantFlow := "{" + lead + `,"in_top":1,"src":"10.0.0.1","dst":"lid:7","dqp":18,"dqp_hex":"0x000012","sqp":1,"sqp_hex":"0x000001","sport":1,` +
		`"rate_bps":0.5,"prev_rate_bps":0.5,"elephant":1,"jitter":1,"estimated":1,"bytes_min":1,"bytes":3,"payload_bytes":3,` +
		`"read_latency_sum_ns":3,"ack_latency_sum_ns":3,"packets":3,"messages":3,"cnp":3,"ecn_ce":3,"fecn":3,"becn":3,"retransmits":3,` +
		`"psn_gaps":3,"out_of_order":3,"acks":3,"naks":3,"rnr_naks":3,"read_latency_count":3,"ack_latency_count":3,"cnp_carried":3,` +
		`"read_latency_mean_ns":1,"ack_latency_mean_ns":1,"opcodes.opcode":[4],"opcodes.packets":[1],"opcodes_other":1}` + "\n"
	if diff := cmp.Diff(wantFlow, string(b.rows[tFlows])); diff != "" {
		t.Errorf("flow row (-want +got):\n%s", diff)
	}
}
