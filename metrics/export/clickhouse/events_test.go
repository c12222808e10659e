package clickhouse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/internal/clickhousetest"
	"github.com/rocescope/rocescope/metrics/export"
)

// TestEventsTable writes a report with an event of each kind, and the
// next window's with the incast going on, twice, as two runs of one
// capture do, and reads each event back from table events: once per
// window (FINAL), and every key of the report's JSON of the event (a
// separate encoder) with the same value in its column, the senders of an
// incast in the Nested senders.
func TestEventsTable(t *testing.T) {
	addr := clickhousetest.Start(t)
	r := probeReport()
	target := &Target{Addr: addr, Database: "ev", Spill: filepath.Join(t.TempDir(), "spill")}
	// The incast goes on into the next window: the same id and start,
	// the figures of its part there.
	next := probeReport()
	next.Window.Start += next.Window.Length
	next.Events = next.Events[:1]
	next.Events[0].End += next.Window.Length
	next.Events[0].Incast.Bytes = 10
	for run := range 2 {
		if st, err := writeAll(t, target, nil, r, next); err != nil || st != (Stats{Inserted: 2}) {
			t.Fatalf("run %d: %+v, %v", run, st, err)
		}
	}
	if got := query(t, addr, "SELECT kind, uniqExact(id), count(), sum(bytes), max(end_ns) - min(start_ns) FROM ev.events FINAL GROUP BY kind ORDER BY kind FORMAT TSV"); got !=
		"ce_without_cnp\t1\t1\t0\t1\nincast\t1\t2\t11\t1000000001\npfc_storm\t1\t1\t0\t1\nretransmission\t2\t2\t0\t1\n" {
		t.Errorf("events by kind (ids, rows, bytes, duration) %q; want one of each, two retransmissions, the incast in 2 windows", got)
	}
	for i := range r.Events {
		e := &r.Events[i]
		want := decodeNumbers(t, export.AppendEventJSON(nil, e))
		var cols []string
		nested := map[string]any{}
		for k, v := range want {
			switch v := v.(type) {
			case bool: // UInt8 columns
				want[k] = map[bool]string{false: "0", true: "1"}[v]
			case []any: // senders: a column of arrays per key
				delete(want, k)
				for _, s := range v {
					for sk, sv := range s.(map[string]any) {
						col := k + "." + sk
						if nested[col] == nil {
							nested[col] = []any{}
							cols = append(cols, "`"+col+"`")
						}
						nested[col] = append(nested[col].([]any), sv)
					}
				}
				continue
			}
			cols = append(cols, "`"+k+"`")
		}
		maps.Copy(want, nested)
		got := decodeNumbers(t, []byte(query(t, addr, fmt.Sprintf("SELECT %s FROM ev.events FINAL WHERE id = '%s' AND window_start_ns = %d FORMAT JSONEachRow",
			strings.Join(cols, ", "), e.ID, r.Window.Start))))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s event (-report's JSON +table events):\n%s", e.Kind, diff)
		}
	}
}

// decodeNumbers decodes the JSON object obj with its numbers as decimal
// strings, as ClickHouse writes 64-bit integers, so that the two compare.
func decodeNumbers(t *testing.T, obj []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	var str func(v any) any
	str = func(v any) any {
		switch v := v.(type) {
		case json.Number:
			return v.String()
		case []any:
			for i := range v {
				v[i] = str(v[i])
			}
		case map[string]any:
			for k := range v {
				v[k] = str(v[k])
			}
		}
		return v
	}
	return str(m).(map[string]any)
}
