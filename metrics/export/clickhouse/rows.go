package clickhouse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rocescope/rocescope/metrics/export"
	"maps"
	"slices"
	"strings"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
	"github.com/rocescope/rocescope/sketch"
)

// flowLists are the report keys that hold flow lists: rows of table flows,
// not columns of table windows.
var flowLists = []string{"top_flows", "elephants", "jitter", "flows_all"}

// column is a column of a table: a report key and its ClickHouse type.
type column struct{ name, typ string }

// columns returns the columns of the keys of the JSON object obj, typed by
// the values it holds: obj is a probe whose numbers are fractional where
// the report writes a float and whole where it writes a count. Objects
// become JSON strings; skip names keys that are not columns.
func columns(obj []byte, skip []string) ([]column, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, fmt.Errorf("clickhouse: probe report: %w", err)
	}
	var cols []column
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if slices.Contains(skip, k) {
			continue
		}
		v := m[k]
		var typ string
		switch {
		case v[0] == '"', v[0] == '{':
			typ = "String"
		case v[0] == '[':
			typ = "Array(String)"
		case v[0] == 't', v[0] == 'f':
			typ = "UInt8"
		case bytes.ContainsAny(v, ".eE"):
			typ = "Float64"
		case v[0] == '-':
			typ = "Int64"
		default:
			typ = "UInt64"
		}
		cols = append(cols, column{k, typ})
	}
	return cols, nil
}

// probeReport returns a report whose JSON has every key a report can have,
// with fractional values where the report writes floats.
func probeReport() *report.Report {
	w := &metrics.Window{Start: 1, Length: 1, Hosts: []string{"h"}}
	for i := range w.Counters {
		w.Counters[i] = 1
	}
	f := probeFlow()
	r := &report.Report{
		Window:      w,
		Exact:       true,
		Top:         []report.FlowReport{f},
		All:         []report.FlowReport{f},
		SketchError: &report.SketchError{FlowsRelErr: .5},
		Flows:       sketch.Estimate{Value: 1, RelErr: .5, Method: "probe"},
		ReadLatency: report.LatencySummary{Count: 1, P50: .5},
		AckLatency:  report.LatencySummary{Count: 1, P50: .5},
	}
	r.MissingHosts = []string{"h"}
	return r
}

// probeFlow returns a flow whose JSON has every key a flow can have.
func probeFlow() report.FlowReport {
	f := report.FlowReport{Rate: .5, PrevRate: .5, Elephant: true, Jitter: true, Estimated: true}
	f.SQPKnown, f.SQP, f.Sport = true, 1, 1
	for i := range f.C {
		f.C[i] = 3
	}
	f.C[metrics.FlowReadLatencyCount], f.C[metrics.FlowAckLatencyCount] = 2, 2 // means of 1.5
	return f
}

// schema is the columns of both tables.
type schema struct {
	windows, flows []column
}

// newSchema reads the columns off the probe report.
func newSchema() (*schema, error) {
	r := probeReport()
	wc, err := columns(export.AppendJSON(nil, r), flowLists)
	if err != nil {
		return nil, err
	}
	f := probeFlow()
	fc, err := columns(export.AppendFlowJSON(nil, &f), nil)
	if err != nil {
		return nil, err
	}
	fc = append([]column{{"window_start_ns", "UInt64"}, {"host", "String"}, {"in_top", "UInt8"}}, fc...)
	return &schema{windows: wc, flows: fc}, nil
}

// createTable returns the CREATE TABLE statement of table db.name.
func createTable(db, name string, cols []column, orderBy string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS `%s`.`%s` (", db, name)
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "`%s` %s", c.name, c.typ)
	}
	fmt.Fprintf(&b, ") ENGINE = MergeTree() PARTITION BY toYYYYMMDD(toDateTime(intDiv(window_start_ns, 1000000000))) ORDER BY (%s)", orderBy)
	return b.String()
}

// appendRows appends the JSONEachRow rows of r: its window row to win and
// its flow rows to flows.
func appendRows(win, flows []byte, r *report.Report) (w, f []byte, err error) {
	scratch := export.AppendJSON(nil, r)
	if win, err = appendRow(win, scratch, nil, flowLists); err != nil {
		return win, flows, err
	}
	lead := fmt.Appendf(nil, `"window_start_ns":%d,"host":`, r.Window.Start)
	host, _ := json.Marshal(strings.Join(r.Window.Hosts, ",")) // a string always marshals
	lead = append(lead, host...)
	leads := [2][]byte{fmt.Appendf(nil, `%s,"in_top":0`, lead), fmt.Appendf(nil, `%s,"in_top":1`, lead)}
	add := func(fr *report.FlowReport, inTop bool) error {
		scratch = export.AppendFlowJSON(scratch[:0], fr)
		l := leads[0]
		if inTop {
			l = leads[1]
		}
		var err error
		flows, err = appendRow(flows, scratch, l, nil)
		return err
	}
	top := make(map[metrics.FlowKey]bool, len(r.Top))
	for i := range r.Top {
		top[r.Top[i].Key] = true
	}
	if r.All != nil {
		for i := range r.All {
			if err := add(&r.All[i], top[r.All[i].Key]); err != nil {
				return win, flows, err
			}
		}
		return win, flows, nil
	}
	seen := make(map[metrics.FlowKey]bool)
	for _, list := range [][]report.FlowReport{r.Top, r.Elephants, r.Jitter} {
		for i := range list {
			if k := list[i].Key; !seen[k] {
				seen[k] = true
				if err := add(&list[i], top[k]); err != nil {
					return win, flows, err
				}
			}
		}
	}
	return win, flows, nil
}

// appendRow appends the JSON object obj, as AppendJSON writes it, as one
// JSONEachRow line: lead (a list of "key":value pairs, or nil) first, then
// obj's keys but skip, in obj's order, with object values turned into JSON
// strings. It scans obj once, without decoding it.
func appendRow(b, obj, lead []byte, skip []string) ([]byte, error) {
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return b, fmt.Errorf("clickhouse: report JSON %.40q: %w", obj, errJSON)
	}
	b = append(b, '{')
	b = append(b, lead...)
	first := len(lead) == 0
	for i := 1; i < len(obj)-1; {
		if obj[i] == ',' {
			i++
		}
		kEnd := valueEnd(obj, i)
		if obj[i] != '"' || kEnd >= len(obj) || obj[kEnd] != ':' {
			return b, fmt.Errorf("clickhouse: report JSON at %d: %w", i, errJSON)
		}
		key := obj[i:kEnd]
		vStart := kEnd + 1
		i = valueEnd(obj, vStart)
		if i > len(obj)-1 || vStart == i {
			return b, fmt.Errorf("clickhouse: report JSON at %d: %w", vStart, errJSON)
		}
		if slices.Contains(skip, string(key[1:len(key)-1])) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, key...)
		b = append(b, ':')
		if v := obj[vStart:i]; v[0] == '{' {
			b = appendJSONString(b, v)
		} else {
			b = append(b, v...)
		}
	}
	return append(b, '}', '\n'), nil
}

// errJSON is wrapped when a report's JSON is not what AppendJSON writes.
var errJSON = errors.New("unexpected JSON")

// valueEnd returns the index just past the JSON value (or key) that starts
// at b[i]: a string, an object or array (strings inside skipped), or a
// literal ending at the next ',', ':', '}' or ']'.
func valueEnd(b []byte, i int) int {
	depth, inString := 0, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
				if depth == 0 {
					return i + 1
				}
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case depth == 0 && (c == ',' || c == ':'):
			return i
		}
	}
	return i
}

// appendJSONString appends the JSON text s as a JSON string: JSON text holds
// no control characters, so only quotes and backslashes need escaping.
func appendJSONString(b, s []byte) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\', c)
		} else {
			b = append(b, c)
		}
	}
	return append(b, '"')
}
