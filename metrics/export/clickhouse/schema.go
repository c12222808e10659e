package clickhouse

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
)

// Table names.
const (
	TableWindows = "windows"
	TableFlows   = "flows"
	TableEvents  = "events"
)

// column is a column of a table: its name, its ClickHouse type as
// system.columns names it, and how the value of a row of type T is
// written (as JSONEachRow reads it).
type column[T any] struct {
	name, typ string
	put       func(b []byte, x T) []byte
}

// table is what the sink knows of one of its tables.
type table struct {
	name    string
	columns [][2]string // name and type of every column, in order, the lead first
	orderBy string      // the sorting key: one row per key and version
}

// The lead columns come first in every table: the window, the host and
// segment whose analysis it is, and the version of the row. A window's
// rows in every table share them (see appendLead).
var leadColumns = [][2]string{
	{"window_start", "DateTime('UTC')"},
	{"window_start_ns", "Int64"},
	{"window_ns", "UInt64"},
	{"covered_ns", "UInt64"},
	{"host", "String"},
	{"segment", "UInt32"},
	{"written_ns", "UInt64"},
}

// windowKey is the sorting key's part that names a window of a host: the
// rows of one window, host and segment replace each other.
const windowKey = "window_start, host, segment, window_start_ns"

// partitionBy is every table's partition key: a day, UTC.
const partitionBy = "toYYYYMMDD(window_start)"

// maxDateTime is the end of what a DateTime column holds and 18.16 parses:
// 2106-01-01T00:00:00Z, in seconds.
const maxDateTime = 4291747200

// windowColumns are the columns of table windows after the lead. Their
// names are the report's keys (see DESIGN.md), its objects spread over
// typed columns and arrays.
var windowColumns = func() []column[*report.Report] {
	cols := []column[*report.Report]{
		{"partial", "UInt8", func(b []byte, r *report.Report) []byte {
			return appendBool(b, r.Window.Covered() < r.Window.Length)
		}},
		{"hosts", "Array(String)", func(b []byte, r *report.Report) []byte { return appendStrings(b, r.Window.Hosts) }},
		{"missing_hosts", "Array(String)", func(b []byte, r *report.Report) []byte { return appendStrings(b, r.MissingHosts) }},
	}
	for c := range metrics.Counter(metrics.NumScalar) {
		cols = append(cols, column[*report.Report]{c.String(), "UInt64", func(b []byte, r *report.Report) []byte {
			return strconv.AppendUint(b, r.Window.Counters.Get(c), 10)
		}})
	}
	cols = append(cols, []column[*report.Report]{
		{"cnp_unattributed", "UInt64", func(b []byte, r *report.Report) []byte { return strconv.AppendUint(b, r.CNPUnattributed, 10) }},
		{"flows", "UInt64", func(b []byte, r *report.Report) []byte {
			return strconv.AppendUint(b, uint64(math.Round(r.Flows.Value)), 10)
		}},
		{"flows_method", "String", func(b []byte, r *report.Report) []byte { return export.AppendJSONString(b, r.Flows.Method) }},
		{"flows_rel_err", "Float64", func(b []byte, r *report.Report) []byte { return export.AppendFloat(b, r.Flows.RelErr) }},
		{"flows_tracked", "UInt64", func(b []byte, r *report.Report) []byte { return strconv.AppendUint(b, uint64(len(r.Window.Flows)), 10) }},
		{"exact", "UInt8", func(b []byte, r *report.Report) []byte { return appendBool(b, r.Exact) }},
	}...)
	cols = append(cols, sparseColumns("opcodes", "opcode", "packets", func(r *report.Report) []uint64 { return r.Window.Counters.Opcodes() })...)
	cols = append(cols, sparseColumns("nak_codes", "code", "count", func(r *report.Report) []uint64 { return r.Window.Counters.NAKCodes() })...)
	cols = append(cols,
		column[*report.Report]{"events_omitted.kind", "Array(String)", func(b []byte, r *report.Report) []byte {
			b = append(b, '[')
			for k, n := range r.EventsOmitted {
				if n > 0 {
					b = export.AppendJSONString(appendComma(b), report.EventKind(k).String())
				}
			}
			return append(b, ']')
		}},
		column[*report.Report]{"events_omitted.count", "Array(UInt64)", func(b []byte, r *report.Report) []byte {
			return appendNonZero(b, r.EventsOmitted[:])
		}},
	)
	cols = append(cols,
		column[*report.Report]{"decode_errors.error", "Array(String)", func(b []byte, r *report.Report) []byte {
			b = append(b, '[')
			for i, n := range r.Window.Counters.DecodeErrorCodes() {
				if n > 0 {
					b = export.AppendJSONString(appendComma(b), decodeErrorName(i))
				}
			}
			return append(b, ']')
		}},
		column[*report.Report]{"decode_errors.count", "Array(UInt64)", func(b []byte, r *report.Report) []byte {
			return appendNonZero(b, r.Window.Counters.DecodeErrorCodes())
		}},
		column[*report.Report]{"pfc.priority", "Array(UInt8)", func(b []byte, r *report.Report) []byte {
			return appendPFC(b, r, func(p int, _, _ uint64) uint64 { return uint64(p) })
		}},
		column[*report.Report]{"pfc.frames", "Array(UInt64)", func(b []byte, r *report.Report) []byte {
			return appendPFC(b, r, func(_ int, frames, _ uint64) uint64 { return frames })
		}},
		column[*report.Report]{"pfc.quanta", "Array(UInt64)", func(b []byte, r *report.Report) []byte {
			return appendPFC(b, r, func(_ int, _, quanta uint64) uint64 { return quanta })
		}},
	)
	cols = append(cols, latencyColumns("read", func(r *report.Report) *report.LatencySummary { return &r.ReadLatency })...)
	cols = append(cols, latencyColumns("ack", func(r *report.Report) *report.LatencySummary { return &r.AckLatency })...)
	for _, se := range []struct {
		name string
		get  func(*report.SketchError) float64
	}{
		{"flows_rel_err", func(e *report.SketchError) float64 { return e.FlowsRelErr }},
		{"count_min_are", func(e *report.SketchError) float64 { return e.CountMinARE }},
		{"top_recall", func(e *report.SketchError) float64 { return e.TopRecall }},
		{"top_precision", func(e *report.SketchError) float64 { return e.TopPrec }},
	} {
		cols = append(cols, column[*report.Report]{"sketch_error_" + se.name, "Nullable(Float64)", func(b []byte, r *report.Report) []byte {
			if r.SketchError == nil {
				return append(b, "null"...)
			}
			return export.AppendFloat(b, se.get(r.SketchError))
		}})
	}
	return cols
}()

// sparseColumns are the columns name.key and name.value (a Nested) of the
// non-zero entries of the counters get returns, by index.
func sparseColumns(name, key, value string, get func(*report.Report) []uint64) []column[*report.Report] {
	return []column[*report.Report]{
		{name + "." + key, "Array(UInt8)", func(b []byte, r *report.Report) []byte {
			b = append(b, '[')
			for i, n := range get(r) {
				if n > 0 {
					b = strconv.AppendUint(appendComma(b), uint64(i), 10)
				}
			}
			return append(b, ']')
		}},
		{name + "." + value, "Array(UInt64)", func(b []byte, r *report.Report) []byte { return appendNonZero(b, get(r)) }},
	}
}

// latencyColumns are the columns of a latency summary: the count, and the
// quantiles and maximum (null without a sample).
func latencyColumns(kind string, get func(*report.Report) *report.LatencySummary) []column[*report.Report] {
	cols := []column[*report.Report]{{kind + "_latency_count", "UInt64", func(b []byte, r *report.Report) []byte {
		return strconv.AppendUint(b, get(r).Count, 10)
	}}}
	for _, q := range []struct {
		name string
		get  func(*report.LatencySummary) float64
	}{
		{"p50", func(l *report.LatencySummary) float64 { return l.P50 }},
		{"p90", func(l *report.LatencySummary) float64 { return l.P90 }},
		{"p99", func(l *report.LatencySummary) float64 { return l.P99 }},
		{"p999", func(l *report.LatencySummary) float64 { return l.P999 }},
		{"max", func(l *report.LatencySummary) float64 { return l.Max }},
	} {
		cols = append(cols, column[*report.Report]{kind + "_latency_" + q.name + "_ns", "Nullable(Float64)", func(b []byte, r *report.Report) []byte {
			l := get(r)
			if l.Count == 0 {
				return append(b, "null"...)
			}
			return export.AppendFloat(b, q.get(l))
		}})
	}
	return cols
}

// flowRow is a flow of a report as a row of table flows.
type flowRow struct {
	f     *report.FlowReport
	inTop bool
}

// flowColumns are the columns of table flows after the lead: in_top, and
// the report's flow keys, its opcodes as arrays.
var flowColumns = func() []column[flowRow] {
	cols := []column[flowRow]{
		{"in_top", "UInt8", func(b []byte, x flowRow) []byte { return appendBool(b, x.inTop) }},
		{"src", "String", func(b []byte, x flowRow) []byte { return appendText(b, x.f.Key.Src.AppendTo) }},
		{"dst", "String", func(b []byte, x flowRow) []byte { return appendText(b, x.f.Key.Dst.AppendTo) }},
		{"dqp", "UInt32", func(b []byte, x flowRow) []byte { return strconv.AppendUint(b, uint64(x.f.Key.DQP), 10) }},
		{"dqp_hex", "String", func(b []byte, x flowRow) []byte {
			return appendText(b, func(b []byte) []byte { return export.AppendQP(b, x.f.Key.DQP) })
		}},
		{"sqp", "UInt32", func(b []byte, x flowRow) []byte { return strconv.AppendUint(b, uint64(x.f.SQP), 10) }},
		{"sqp_hex", "String", func(b []byte, x flowRow) []byte {
			if !x.f.SQPKnown {
				return append(b, `""`...)
			}
			return appendText(b, func(b []byte) []byte { return export.AppendQP(b, x.f.SQP) })
		}},
		{"sport", "UInt16", func(b []byte, x flowRow) []byte { return strconv.AppendUint(b, uint64(x.f.Sport), 10) }},
		{"rate_bps", "Float64", func(b []byte, x flowRow) []byte { return export.AppendFloat(b, x.f.Rate) }},
		{"prev_rate_bps", "Float64", func(b []byte, x flowRow) []byte { return export.AppendFloat(b, x.f.PrevRate) }},
		{"elephant", "UInt8", func(b []byte, x flowRow) []byte { return appendBool(b, x.f.Elephant) }},
		{"jitter", "UInt8", func(b []byte, x flowRow) []byte { return appendBool(b, x.f.Jitter) }},
		{"estimated", "UInt8", func(b []byte, x flowRow) []byte { return appendBool(b, x.f.Estimated) }},
		{"bytes_min", "UInt64", func(b []byte, x flowRow) []byte { return strconv.AppendUint(b, x.f.BytesMin, 10) }},
	}
	for c := range metrics.FlowCounter(metrics.NumFlowCounters) {
		cols = append(cols, column[flowRow]{c.String(), "UInt64", func(b []byte, x flowRow) []byte {
			return strconv.AppendUint(b, x.f.C[c], 10)
		}})
	}
	for _, l := range []struct {
		name       string
		sum, count metrics.FlowCounter
	}{
		{"read_latency_mean_ns", metrics.FlowReadLatencySum, metrics.FlowReadLatencyCount},
		{"ack_latency_mean_ns", metrics.FlowAckLatencySum, metrics.FlowAckLatencyCount},
	} {
		cols = append(cols, column[flowRow]{l.name, "Nullable(Float64)", func(b []byte, x flowRow) []byte {
			n := x.f.C[l.count]
			if n == 0 {
				return append(b, "null"...)
			}
			return export.AppendFloat(b, float64(x.f.C[l.sum])/float64(n))
		}})
	}
	return append(cols,
		column[flowRow]{"opcodes.opcode", "Array(UInt8)", func(b []byte, x flowRow) []byte {
			b = append(b, '[')
			for i, op := range x.f.Ops.Op {
				if x.f.Ops.N[i] == 0 {
					break
				}
				b = strconv.AppendUint(appendComma(b), uint64(op), 10)
			}
			return append(b, ']')
		}},
		column[flowRow]{"opcodes.packets", "Array(UInt64)", func(b []byte, x flowRow) []byte {
			b = append(b, '[')
			for _, n := range x.f.Ops.N {
				if n == 0 {
					break
				}
				b = strconv.AppendUint(appendComma(b), n, 10)
			}
			return append(b, ']')
		}},
		column[flowRow]{"opcodes_other", "UInt64", func(b []byte, x flowRow) []byte { return strconv.AppendUint(b, x.f.Ops.Other, 10) }},
	)
}()

// flowIDColumns are the columns that name a flow, as the report's keys
// src, dst, dqp, dqp_hex, sqp and sqp_hex do, of the flow get returns (nil
// for none: the columns are left at their defaults).
func flowIDColumns[T any](get func(T) (key *metrics.FlowKey, sqp uint32, sqpKnown bool)) []column[T] {
	return []column[T]{
		{"src", "String", func(b []byte, x T) []byte {
			if k, _, _ := get(x); k != nil {
				return appendText(b, k.Src.AppendTo)
			}
			return append(b, `""`...)
		}},
		{"dst", "String", func(b []byte, x T) []byte {
			if k, _, _ := get(x); k != nil {
				return appendText(b, k.Dst.AppendTo)
			}
			return append(b, `""`...)
		}},
		{"dqp", "UInt32", func(b []byte, x T) []byte {
			if k, _, _ := get(x); k != nil {
				return strconv.AppendUint(b, uint64(k.DQP), 10)
			}
			return append(b, '0')
		}},
		{"dqp_hex", "String", func(b []byte, x T) []byte {
			if k, _, _ := get(x); k != nil {
				return appendText(b, func(b []byte) []byte { return export.AppendQP(b, k.DQP) })
			}
			return append(b, `""`...)
		}},
		{"sqp", "UInt32", func(b []byte, x T) []byte {
			_, sqp, _ := get(x)
			return strconv.AppendUint(b, uint64(sqp), 10)
		}},
		{"sqp_hex", "String", func(b []byte, x T) []byte {
			if _, sqp, ok := get(x); ok {
				return appendText(b, func(b []byte) []byte { return export.AppendQP(b, sqp) })
			}
			return append(b, `""`...)
		}},
	}
}

// eventFlow returns the flow a retransmission or ce_without_cnp event is
// about; nil for the other kinds.
func eventFlow(e *report.Event) *report.Flow {
	switch {
	case e.Retransmission != nil:
		return &e.Retransmission.Flow
	case e.CEWithoutCNP != nil:
		return &e.CEWithoutCNP.Flow
	}
	return nil
}

// eventColumns are the columns of table events after the lead: the
// event's keys (DESIGN.md), those of every kind, a row leaving out the
// other kinds' (at their defaults). event_start is start_ns's second, as
// a DateTime for Grafana. An incast's dst is in dst, its senders in the
// Nested senders (senders.src, senders.bytes, ...).
var eventColumns = func() []column[*report.Event] {
	type ev = *report.Event
	u := func(name string, get func(ev) uint64) column[ev] {
		return column[ev]{name, "UInt64", func(b []byte, e ev) []byte { return strconv.AppendUint(b, get(e), 10) }}
	}
	cols := []column[ev]{
		{"kind", "String", func(b []byte, e ev) []byte { return export.AppendJSONString(b, e.Kind.String()) }},
		{"id", "String", func(b []byte, e ev) []byte { return appendText(b, e.ID.AppendText) }},
		{"event_start", "DateTime('UTC')", func(b []byte, e ev) []byte {
			// An event starts at most a few windows before its own, so
			// after 1970 but for a window near it: clamp to 1970 there.
			return appendText(b, func(b []byte) []byte {
				return time.Unix(max(e.Start, 0)/1e9, 0).UTC().AppendFormat(b, time.DateTime)
			})
		}},
		{"start_ns", "Int64", func(b []byte, e ev) []byte { return strconv.AppendInt(b, e.Start, 10) }},
		{"end_ns", "Int64", func(b []byte, e ev) []byte { return strconv.AppendInt(b, e.End, 10) }},
		{"ongoing", "UInt8", func(b []byte, e ev) []byte { return appendBool(b, e.Ongoing) }},
	}
	cols = append(cols, flowIDColumns(func(e ev) (*metrics.FlowKey, uint32, bool) {
		if f := eventFlow(e); f != nil {
			return &f.Key, f.SQP, f.SQPKnown
		}
		if e.Incast != nil {
			return &metrics.FlowKey{Dst: e.Incast.Dst}, 0, false
		}
		return nil, 0, false
	})...)
	// An incast names no QP: its dst only.
	for i := range cols {
		if c := &cols[i]; c.name == "src" || c.name == "dqp" || c.name == "dqp_hex" {
			put, def := c.put, defaultOf(c.typ)
			c.put = func(b []byte, e ev) []byte {
				if e.Incast != nil {
					return append(b, def...)
				}
				return put(b, e)
			}
		}
	}
	incast := func(get func(*report.Incast) uint64) func(ev) uint64 {
		return func(e ev) uint64 {
			if e.Incast == nil {
				return 0
			}
			return get(e.Incast)
		}
	}
	cols = append(cols,
		u("sender_count", incast(func(in *report.Incast) uint64 { return uint64(in.SenderCount) })),
		u("sources", incast(func(in *report.Incast) uint64 { return uint64(in.Sources) })),
		column[ev]{"peak_bps", "Float64", func(b []byte, e ev) []byte {
			if e.Incast == nil {
				return append(b, '0')
			}
			return export.AppendFloat(b, e.Incast.PeakBPS)
		}},
		u("bytes", incast(func(in *report.Incast) uint64 { return in.Bytes })),
		u("ecn_ce", func(e ev) uint64 {
			switch {
			case e.Incast != nil:
				return e.Incast.ECNCE
			case e.CEWithoutCNP != nil:
				return e.CEWithoutCNP.ECNCE
			}
			return 0
		}),
		u("cnp", incast(func(in *report.Incast) uint64 { return in.CNP })),
	)
	cols = append(cols, senderColumns()...)
	// The kind's fields, or zeros (the columns' defaults) for another kind.
	var noStorm report.PFCStorm
	var noRetrans report.Retransmission
	var noCE report.CEWithoutCNP
	storm := func(e ev) *report.PFCStorm { return cmp.Or(e.PFCStorm, &noStorm) }
	rt := func(e ev) *report.Retransmission { return cmp.Or(e.Retransmission, &noRetrans) }
	ce := func(e ev) *report.CEWithoutCNP { return cmp.Or(e.CEWithoutCNP, &noCE) }
	return append(cols,
		column[ev]{"mac", "String", func(b []byte, e ev) []byte {
			if e.PFCStorm == nil {
				return append(b, `""`...)
			}
			return appendText(b, func(b []byte) []byte { return report.AppendMAC(b, e.PFCStorm.MAC) })
		}},
		column[ev]{"priority", "UInt8", func(b []byte, e ev) []byte { return strconv.AppendUint(b, uint64(storm(e).Priority), 10) }},
		column[ev]{"paused_ns", "Int64", func(b []byte, e ev) []byte { return strconv.AppendInt(b, storm(e).PausedNS, 10) }},
		column[ev]{"paused_fraction", "Float64", func(b []byte, e ev) []byte { return export.AppendFloat(b, storm(e).PausedFraction) }},
		u("frames", func(e ev) uint64 { return storm(e).Frames }),
		column[ev]{"cause", "String", func(b []byte, e ev) []byte {
			if e.Retransmission == nil {
				return append(b, `""`...)
			}
			return export.AppendJSONString(b, e.Retransmission.Cause.String())
		}},
		column[ev]{"first_psn", "UInt32", func(b []byte, e ev) []byte { return strconv.AppendUint(b, uint64(rt(e).FirstPSN), 10) }},
		u("resent", func(e ev) uint64 { return rt(e).Resent }),
		column[ev]{"stall_ns", "Int64", func(b []byte, e ev) []byte { return strconv.AppendInt(b, rt(e).StallNS, 10) }},
		column[ev]{"nak_code", "UInt8", func(b []byte, e ev) []byte {
			if rt(e).Cause != metrics.CauseNAK {
				return append(b, '0')
			}
			return strconv.AppendUint(b, uint64(rt(e).NAKCode), 10)
		}},
		column[ev]{"rnr_timer", "UInt8", func(b []byte, e ev) []byte {
			if rt(e).Cause != metrics.CauseRNR {
				return append(b, '0')
			}
			return strconv.AppendUint(b, uint64(rt(e).NAKCode), 10)
		}},
		column[ev]{"merged", "UInt8", func(b []byte, e ev) []byte { return appendBool(b, rt(e).Merged) }},
		u("packets", func(e ev) uint64 { return ce(e).Packets }),
		u("reverse_packets", func(e ev) uint64 { return ce(e).ReversePackets }),
	)
}()

// senderColumns are the Nested senders of an incast: a flow's keys and its
// bytes and share, as arrays.
func senderColumns() []column[*report.Event] {
	type ev = *report.Event
	// each appends, as a JSON array, what put appends of each sender.
	each := func(name, typ string, put func(b []byte, s *report.Sender) []byte) column[ev] {
		return column[ev]{"senders." + name, "Array(" + typ + ")", func(b []byte, e ev) []byte {
			b = append(b, '[')
			if e.Incast != nil {
				for i := range e.Incast.Senders {
					b = put(appendComma(b), &e.Incast.Senders[i])
				}
			}
			return append(b, ']')
		}}
	}
	var cols []column[ev]
	for _, c := range flowIDColumns(func(s *report.Sender) (*metrics.FlowKey, uint32, bool) { return &s.Key, s.SQP, s.SQPKnown }) {
		cols = append(cols, each(c.name, c.typ, c.put))
	}
	return append(cols,
		each("bytes", "UInt64", func(b []byte, s *report.Sender) []byte { return strconv.AppendUint(b, s.Bytes, 10) }),
		each("share", "Float64", func(b []byte, s *report.Sender) []byte { return export.AppendFloat(b, s.Share) }),
	)
}

// defaultOf returns the JSON of the default value of a column of type typ.
func defaultOf(typ string) string {
	switch {
	case typ == "String":
		return `""`
	case strings.HasPrefix(typ, "Array"):
		return "[]"
	case strings.HasPrefix(typ, "Nullable"):
		return "null"
	}
	return "0"
}

// tables are the sink's tables, in the order a window's rows are written.
var tables = []table{
	{TableWindows, withLead(windowColumns), windowKey},
	{TableFlows, withLead(flowColumns), windowKey + ", src, dst, dqp"},
	{TableEvents, withLead(eventColumns), windowKey + ", kind, id"},
}

// Indexes of tables.
const (
	tWindows = iota
	tFlows
	tEvents
	numTables
)

// withLead returns the names and types of the lead columns and cols.
func withLead[T any](cols []column[T]) [][2]string {
	out := append([][2]string(nil), leadColumns...)
	for _, c := range cols {
		out = append(out, [2]string{c.name, c.typ})
	}
	return out
}

// createTable returns the CREATE TABLE statement of t in database db.
func createTable(db string, t *table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS `%s`.`%s` (", db, t.name)
	for i, c := range t.columns {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "`%s` %s", c[0], c[1])
	}
	fmt.Fprintf(&b, ") ENGINE = ReplacingMergeTree(written_ns) PARTITION BY %s ORDER BY (%s)", partitionBy, t.orderBy)
	return b.String()
}

// appendLead appends the lead columns of window w's rows, written at
// writtenNs, without the braces: every row of the window starts with it.
// w must start in [1970, 2106).
func appendLead(b []byte, w *metrics.Window, writtenNs int64) []byte {
	b = append(b, `"window_start":"`...)
	b = time.Unix(w.Start/1e9, 0).UTC().AppendFormat(b, time.DateTime)
	b = append(b, `","window_start_ns":`...)
	b = strconv.AppendInt(b, w.Start, 10)
	b = append(b, `,"window_ns":`...)
	b = strconv.AppendInt(b, w.Length, 10)
	b = append(b, `,"covered_ns":`...)
	b = strconv.AppendInt(b, w.Covered(), 10)
	b = append(b, `,"host":`...)
	b = export.AppendJSONString(b, hostOf(w))
	b = append(b, `,"segment":`...)
	b = strconv.AppendUint(b, uint64(w.Segment), 10)
	b = append(b, `,"written_ns":`...)
	return strconv.AppendInt(b, writtenNs, 10)
}

// hostOf returns the host column of w's rows: its hosts, joined by commas,
// as the report's host key.
func hostOf(w *metrics.Window) string { return strings.Join(w.Hosts, ",") }

// decodeErrorName names decode error code i as the report's decode_errors
// key does.
func decodeErrorName(i int) string { return decode.Error(i).Error() }

// appendRow appends one JSONEachRow line: lead, then each column of cols
// whose value is not its type's default (0, "", [] or null), which the
// server fills in for a column the row leaves out: a row of a quiet flow
// is half as long, and half the work for the server to read.
func appendRow[T any](b, lead []byte, cols []column[T], x T) []byte {
	b = append(append(b, '{'), lead...)
	for _, c := range cols {
		mark := len(b)
		b = append(b, ',', '"')
		b = append(b, c.name...)
		b = append(b, '"', ':')
		v := len(b)
		b = c.put(b, x)
		if isDefault(b[v:], c.typ) {
			b = b[:mark]
		}
	}
	return append(b, '}', '\n')
}

// isDefault reports whether the JSON value v is the default of a column
// of type typ: null for a Nullable, else 0, "" or [].
func isDefault(v []byte, typ string) bool {
	switch string(v) {
	case "null", `""`, "[]":
		return true
	case "0":
		return !strings.HasPrefix(typ, "Nullable")
	}
	return false
}

// appendComma appends a comma unless b ends an array's opening bracket.
func appendComma(b []byte) []byte {
	if b[len(b)-1] == '[' {
		return b
	}
	return append(b, ',')
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}

// appendText appends what f appends as a JSON string; f must append
// nothing that needs escaping (addresses, numbers).
func appendText(b []byte, f func([]byte) []byte) []byte {
	return append(f(append(b, '"')), '"')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for _, s := range ss {
		b = export.AppendJSONString(appendComma(b), s)
	}
	return append(b, ']')
}

// appendNonZero appends the non-zero values of counts as a JSON array.
func appendNonZero(b []byte, counts []uint64) []byte {
	b = append(b, '[')
	for _, n := range counts {
		if n > 0 {
			b = strconv.AppendUint(appendComma(b), n, 10)
		}
	}
	return append(b, ']')
}

// appendPFC appends, for each priority a PFC frame enabled, what f returns
// of it, as a JSON array.
func appendPFC(b []byte, r *report.Report, f func(p int, frames, quanta uint64) uint64) []byte {
	b = append(b, '[')
	for p := range 8 {
		if frames, quanta := r.Window.Counters.PFC(p); frames > 0 {
			b = strconv.AppendUint(appendComma(b), f(p, frames, quanta), 10)
		}
	}
	return append(b, ']')
}
