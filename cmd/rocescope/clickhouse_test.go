package main

import (
	stdcmp "cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/internal/clickhousetest"
	"github.com/rocescope/rocescope/metrics/report"
)

// TestClickHouseSink replays a trace with -o clickhouse://... into a
// clickhouse-server the test starts, and once more as JSON lines, and
// requires every figure of every window and flow read back with SELECT ...
// FORMAT JSONEachRow to equal the JSON lines report's: with --exact every
// flow, and without it the flows of its lists (top_flows, elephants,
// jitter, top_cnp, top_retransmits, event_flows); and every event.
func TestClickHouseSink(t *testing.T) {
	addr := clickhousetest.Start(t)
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, &synth.Config{Seed: 11, Packets: 40_000, Flows: 500, Duration: 4 * time.Second, Scenario: synth.ScenarioAll}, 1, roundRobin(1))
	for _, exact := range []bool{true, false} {
		t.Run(fmt.Sprintf("exact=%v", exact), func(t *testing.T) {
			db := fmt.Sprintf("rs_exact_%v", exact)
			args := append([]string{"replay", "--host", "cap0"}, mergeRates...)
			if exact {
				args = append(args, "--exact")
			}
			want := parseReports(t, mustRunInProcess(t, append(args, "--format", "jsonl", parts[0])...))
			if len(want) != 4 {
				t.Fatalf("%d windows, want 4", len(want))
			}
			mustRunInProcess(t, append(args, "-o", fmt.Sprintf("clickhouse://%s/%s?spill=%s", addr, db, filepath.Join(dir, db)), parts[0])...)

			windows := selectRows(t, addr, "SELECT * FROM "+db+".windows FINAL ORDER BY window_start_ns FORMAT JSONEachRow")
			if len(windows) != len(want) {
				t.Fatalf("%d rows in windows, want %d", len(windows), len(want))
			}
			flows := selectRows(t, addr, "SELECT * FROM "+db+".flows FINAL FORMAT JSONEachRow")
			byKey := make(map[string]map[string]any)
			for _, f := range flows {
				byKey[flowRowKey(f["window_start_ns"], f)] = f
			}
			nflows := 0
			for i, r := range want {
				for k, v := range r {
					if slices.Contains(notWindowColumns, k) {
						continue
					}
					sameValue(t, fmt.Sprintf("window %d %s", i, k), v, reportValue(windows[i], k, false))
				}
				listed := map[string]bool{}
				lists := flowLists
				if exact {
					lists = []string{"flows_all"}
				}
				for _, l := range lists {
					for _, f := range r[l].([]any) {
						f := f.(map[string]any)
						key := flowRowKey(r["window_start_ns"], f)
						if listed[key] {
							continue
						}
						listed[key] = true
						nflows++
						row, ok := byKey[key]
						if !ok {
							t.Errorf("window %d: flow %s not in table flows", i, key)
							continue
						}
						sameValue(t, key+" host", r["host"], row["host"])
						for k, v := range f {
							sameValue(t, key+" "+k, v, reportValue(row, k, true))
						}
						sameValue(t, key+" window_ns", r["window_ns"], row["window_ns"])
						sameValue(t, key+" covered_ns", r["covered_ns"], row["covered_ns"])
					}
				}
			}
			if len(flows) != nflows {
				t.Errorf("%d rows in flows, the report lists %d flows", len(flows), nflows)
			}
			checkEventRows(t, want, selectRows(t, addr, "SELECT * FROM "+db+".events FINAL FORMAT JSONEachRow"))
			if exact && nflows < 1000 {
				t.Errorf("only %d flows: too few to prove anything", nflows)
			}
		})
	}
}

// flowLists are the report's lists of flows whose flows table flows has
// without --exact; notWindowColumns the report's keys table windows does
// not have.
var (
	flowLists        = []string{"top_flows", "elephants", "jitter", "top_cnp", "top_retransmits", "event_flows"}
	notWindowColumns = append(slices.Clone(flowLists), "flows_all", "events")
)

// checkEventRows checks that table events has a row for each event of
// each report, with each key's value, an incast's senders in the arrays
// senders.*, and no other row.
func checkEventRows(t *testing.T, reports []map[string]any, rows []map[string]any) {
	t.Helper()
	byKey := make(map[string]map[string]any)
	for _, row := range rows {
		byKey[fmt.Sprint(row["window_start_ns"], "/", row["id"])] = row
	}
	n := 0
	kinds := map[any]bool{}
	for _, r := range reports {
		for _, e := range r["events"].([]any) {
			e := e.(map[string]any)
			n++
			kinds[e["kind"]] = true
			key := fmt.Sprint(r["window_start_ns"], "/", e["id"])
			row, ok := byKey[key]
			if !ok {
				t.Errorf("event %s not in table events", key)
				continue
			}
			start, _ := strconv.ParseInt(fmt.Sprint(e["start_ns"]), 10, 64)
			sameValue(t, key+" event_start", time.Unix(start/1e9, 0).UTC().Format(time.DateTime), row["event_start"])
			for k, v := range e {
				if k != "senders" {
					sameValue(t, key+" "+k, v, row[k])
					continue
				}
				for i, sender := range v.([]any) {
					for sk, sv := range sender.(map[string]any) {
						col, _ := row["senders."+sk].([]any)
						if i >= len(col) {
							t.Errorf("%s senders.%s: %d values, the report has more senders", key, sk, len(col))
							continue
						}
						sameValue(t, fmt.Sprintf("%s senders[%d].%s", key, i, sk), sv, col[i])
					}
				}
				if col, _ := row["senders.src"].([]any); len(col) != len(v.([]any)) {
					t.Errorf("%s: %d senders in table events, %d in the report", key, len(col), len(v.([]any)))
				}
			}
		}
	}
	if len(rows) != n {
		t.Errorf("%d rows in events, the reports have %d events", len(rows), n)
	}
	if len(kinds) != report.NumEventKinds-1 {
		t.Errorf("events of kinds %v: want every kind, to prove anything", kinds)
	}
}

// selectRows runs a query with FORMAT JSONEachRow and parses the rows.
func selectRows(t *testing.T, addr, query string) []map[string]any {
	t.Helper()
	out, err := clickhousetest.Query(addr, query, "")
	if err != nil {
		t.Fatal(err)
	}
	return parseReports(t, out)
}

// flowRowKey names a flow of a window.
func flowRowKey(start any, f map[string]any) string {
	return fmt.Sprintf("%v/%v>%v/%v", start, f["src"], f["dst"], f["dqp"])
}

// reportValue returns the value of report key k as ClickHouse's row holds
// it: a column of that name, or the report's object put together again
// from the typed columns and arrays it is spread over. The window's
// RFC 3339 start comes from window_start_ns, once window_start, the
// DateTime, is checked against it.
func reportValue(row map[string]any, k string, flow bool) any {
	zip := func(key, value string) map[string]any {
		m := map[string]any{}
		keys, _ := row[key].([]any)
		values, _ := row[value].([]any)
		for i, k := range keys {
			if i < len(values) {
				m[fmt.Sprint(k)] = values[i]
			}
		}
		return m
	}
	switch {
	case k == "opcodes" && flow:
		m := zip("opcodes.opcode", "opcodes.packets")
		if fmt.Sprint(row["opcodes_other"]) != "0" {
			m["other"] = row["opcodes_other"]
		}
		return m
	case flow:
		return row[k]
	case k == "window_start":
		ns, _ := strconv.ParseInt(fmt.Sprint(row["window_start_ns"]), 10, 64)
		if want := time.Unix(ns/1e9, 0).UTC().Format(time.DateTime); row[k] != want {
			return fmt.Sprintf("DateTime %v, want %s", row[k], want)
		}
		return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
	case k == "opcodes":
		return zip("opcodes.opcode", "opcodes.packets")
	case k == "nak_codes":
		return zip("nak_codes.code", "nak_codes.count")
	case k == "events_omitted":
		m := zip("events_omitted.kind", "events_omitted.count")
		for kind := report.EventKind(1); kind < report.EventKind(report.NumEventKinds); kind++ {
			if m[kind.String()] == nil {
				m[kind.String()] = 0
			}
		}
		return m
	case k == "decode_errors":
		return zip("decode_errors.error", "decode_errors.count")
	case k == "pfc":
		m := zip("pfc.priority", "pfc.frames")
		quanta := zip("pfc.priority", "pfc.quanta")
		for p, frames := range m {
			m[p] = map[string]any{"frames": frames, "quanta": quanta[p]}
		}
		return m
	case k == "read_latency_ns" || k == "ack_latency_ns":
		kind := strings.TrimSuffix(k, "_ns")
		m := map[string]any{"count": row[kind+"_count"]}
		if fmt.Sprint(m["count"]) != "0" {
			for _, q := range []string{"p50", "p90", "p99", "p999", "max"} {
				m[q] = row[kind+"_"+q+"_ns"]
			}
		}
		return m
	case k == "sketch_error":
		m := map[string]any{}
		for _, e := range []string{"flows_rel_err", "count_min_are", "top_recall", "top_precision"} {
			m[e] = row["sketch_error_"+e]
		}
		return m
	}
	return row[k]
}

// sameValue checks that ClickHouse's value ch of a report key equals the
// report's value r: counters come back as quoted UInt64, booleans as 0 or
// 1, floats as numbers (compared as float64), objects key by key.
func sameValue(t *testing.T, what string, r, ch any) {
	t.Helper()
	var want string
	switch v := r.(type) {
	case map[string]any:
		m, ok := ch.(map[string]any)
		if !ok || len(m) != len(v) {
			t.Errorf("%s: ClickHouse has %v, the report %v", what, ch, v)
			return
		}
		for k, rv := range v {
			sameValue(t, what+"."+k, rv, m[k])
		}
		return
	case bool:
		want = "0"
		if v {
			want = "1"
		}
	case []any:
		b, _ := json.Marshal(v)
		want = string(b)
		b, _ = json.Marshal(ch)
		ch = string(b)
	default:
		want = fmt.Sprint(v)
	}
	got := fmt.Sprint(ch)
	if want == got {
		return
	}
	a, errA := strconv.ParseFloat(want, 64)
	b, errB := strconv.ParseFloat(got, 64)
	// ClickHouse 18.16 can print a Float64 one unit in the last place
	// off what it was sent.
	if errA == nil && errB == nil && (a == b || math.Nextafter(a, b) == b) {
		return
	}
	t.Errorf("%s: ClickHouse has %q, the report %q", what, got, want)
}

// TestKafkaToClickHouse runs the fleet's pipeline: three hosts' states go
// through a Kafka topic, a merger writes the reports into ClickHouse, and
// what SELECT reads back must be the file merge's reports, figure for
// figure.
func TestKafkaToClickHouse(t *testing.T) {
	addr := clickhousetest.Start(t)
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, kafkaTrace(), 3, byConnection(3))
	dirs, _ := splitRun(t, dir, parts)
	want := parseReports(t, mustRunInProcess(t, append(append([]string{"merge", "--format", "jsonl"}, mergeRates...), dirs...)...))
	_, url := startKafka(t, 3, 4, "fleet", 0)
	for i, part := range parts {
		mustRunInProcess(t, append(append([]string{"replay", "--workers", "2", "--format", "jsonl", "--host", fmt.Sprintf("h%d", i), "--state-out", url}, mergeRates...), part)...)
	}
	// The hosts' states are in the topic one host after another: --hosts
	// has the merge wait for all three, not take the first for all.
	mustRunInProcess(t, append(append([]string{"merge", "--hosts", "h0,h1,h2", "-o", fmt.Sprintf("clickhouse://%s/fleet?spill=%s", addr, filepath.Join(dir, "spill"))}, mergeRates...), url)...)
	got := selectRows(t, addr, "SELECT * FROM fleet.windows FINAL ORDER BY window_start_ns FORMAT JSONEachRow")
	if len(got) != len(want) {
		t.Fatalf("%d rows in windows, want %d", len(got), len(want))
	}
	for i, r := range want {
		for k, v := range r {
			if !slices.Contains(notWindowColumns, k) {
				sameValue(t, fmt.Sprintf("window %d %s", i, k), v, reportValue(got[i], k, false))
			}
		}
	}
	flows := selectRows(t, addr, "SELECT count() AS n FROM fleet.flows FINAL FORMAT JSONEachRow")
	n := 0
	for _, r := range want {
		listed := map[string]bool{}
		for _, l := range flowLists {
			for _, f := range r[l].([]any) {
				listed[flowRowKey(r["window_start_ns"], f.(map[string]any))] = true
			}
		}
		n += len(listed)
	}
	if fmt.Sprint(flows[0]["n"]) != fmt.Sprint(n) {
		t.Errorf("%v rows in flows, the reports list %d flows", flows[0]["n"], n)
	}
}

// readmeQueries returns the SQL examples of the README's section on
// ClickHouse, in order.
func readmeQueries(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n### ClickHouse and Grafana\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var queries []string
	for _, block := range strings.Split(section, "```sql\n")[1:] {
		q, _, _ := strings.Cut(block, "```")
		queries = append(queries, q)
	}
	return queries
}

// TestClickHouseREADMEQueries replays a trace twice into ClickHouse, runs
// the README's example queries as Grafana would (its macros expanded, the
// time range without the first window) and requires their numbers to be
// those the JSON report gives, counted once.
func TestClickHouseREADMEQueries(t *testing.T) {
	addr := clickhousetest.Start(t)
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, &synth.Config{Seed: 11, Packets: 40_000, Flows: 500, Duration: 4 * time.Second, Scenario: synth.ScenarioAll}, 1, roundRobin(1))
	args := append([]string{"replay", "--host", "cap0", "--exact"}, mergeRates...)
	reports := parseReports(t, mustRunInProcess(t, append(args, "--format", "jsonl", parts[0])...))
	for range 2 {
		mustRunInProcess(t, append(args, "-o", fmt.Sprintf("clickhouse://%s/rocescope?spill=%s", addr, filepath.Join(dir, "spill")), parts[0])...)
	}
	queries := readmeQueries(t)
	if len(queries) != 4 {
		t.Fatalf("%d SQL examples in the README, want 4", len(queries))
	}
	start := func(r map[string]any) int64 {
		ns, _ := strconv.ParseInt(fmt.Sprint(r["window_start_ns"]), 10, 64)
		return ns / 1e9
	}
	in := reports[1:] // the time range leaves the first window out
	runOver := func(q string, in []map[string]any) string {
		t.Helper()
		macros := strings.NewReplacer("$__timeFilter(window_start)",
			fmt.Sprintf("window_start >= toDateTime(%d) AND window_start <= toDateTime(%d)", start(in[0]), start(in[len(in)-1])),
			"$__interval_s", "1")
		out, err := clickhousetest.Query(addr, macros.Replace(q)+" FORMAT TSV", "")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out
	}
	run := func(q string) string { t.Helper(); return runOver(q, in) }
	day := func(r map[string]any) string { return time.Unix(start(r), 0).UTC().Format(time.DateTime) }

	var want strings.Builder
	for _, r := range in {
		bytes, _ := strconv.ParseUint(fmt.Sprint(r["bytes"]), 10, 64)
		fmt.Fprintf(&want, "%s\t%d\n", day(r), bytes*8)
	}
	if diff := cmp.Diff(want.String(), run(queries[0])); diff != "" {
		t.Errorf("throughput (-want +got):\n%s", diff)
	}

	type qp struct{ dst, dqp, src string }
	type sums struct{ cnp, ce, bytes uint64 }
	byQP := map[qp]*sums{}
	for _, r := range in {
		for _, f := range r["flows_all"].([]any) {
			f := f.(map[string]any)
			num := func(k string) uint64 { n, _ := strconv.ParseUint(fmt.Sprint(f[k]), 10, 64); return n }
			if num("cnp") == 0 {
				continue
			}
			k := qp{f["dst"].(string), f["dqp_hex"].(string), f["src"].(string)}
			if byQP[k] == nil {
				byQP[k] = &sums{}
			}
			byQP[k].cnp += num("cnp")
			byQP[k].ce += num("ecn_ce")
			byQP[k].bytes += num("bytes")
		}
	}
	keys := slices.Collect(maps.Keys(byQP))
	slices.SortFunc(keys, func(a, b qp) int {
		switch x, y := byQP[a].cnp, byQP[b].cnp; { // most CNPs first
		case x > y:
			return -1
		case x < y:
			return 1
		}
		for _, c := range [][2]string{{a.dst, b.dst}, {a.dqp, b.dqp}, {a.src, b.src}} {
			if c := strings.Compare(c[0], c[1]); c != 0 {
				return c
			}
		}
		return 0
	})
	if len(keys) < 5 {
		t.Fatalf("%d QPs received CNPs: too few to prove anything", len(keys))
	}
	want.Reset()
	for _, k := range keys[:min(20, len(keys))] {
		s := byQP[k]
		fmt.Fprintf(&want, "%s\t%s\t%s\t%d\t%d\t%d\n", k.dst, k.dqp, k.src, s.cnp, s.ce, s.bytes)
	}
	if diff := cmp.Diff(want.String(), run(queries[1])); diff != "" {
		t.Errorf("CNPs per QP (-want +got):\n%s", diff)
	}

	want.Reset()
	for _, r := range in {
		pfc := r["pfc"].(map[string]any)
		for _, p := range slices.Sorted(maps.Keys(pfc)) {
			fmt.Fprintf(&want, "%s\tpriority %s\t%v\n", day(r), p, pfc[p].(map[string]any)["frames"])
		}
	}
	if want.Len() == 0 {
		t.Fatal("no PFC frames in the trace: nothing to prove")
	}
	if diff := cmp.Diff(want.String(), run(queries[2])); diff != "" {
		t.Errorf("PFC frames per priority (-want +got):\n%s", diff)
	}

	// Events: each once, its figures summed over the windows of the
	// range it spans; the trace's incast and PFC storm are in the first
	// window, so the whole trace has every kind.
	for _, in := range [][]map[string]any{reports, in} {
		want, kinds := wantEvents(in)
		if len(in) == len(reports) && len(kinds) != report.NumEventKinds-1 {
			t.Fatalf("events of kinds %v in the trace: want every kind", kinds)
		}
		if diff := cmp.Diff(want, runOver(queries[3], in)); diff != "" {
			t.Errorf("events of windows %v to %v (-want +got):\n%s", in[0]["window_start"], in[len(in)-1]["window_start"], diff)
		}
	}
}

// wantEvents returns what the README's events query gives over the time
// range of reports, by the reports' events keys, and the kinds of events.
func wantEvents(reports []map[string]any) (string, []string) {
	type event struct {
		start, end int64
		kind, id   string
		subject    [5]string // src, dst, dqp_hex, mac, priority
		windows    int
		sums       [5]uint64 // bytes, ecn_ce, cnp, frames, resent
	}
	events := map[string]*event{}
	for _, r := range reports {
		for _, e := range r["events"].([]any) {
			e := e.(map[string]any)
			str := func(k string) string {
				if v, ok := e[k]; ok {
					return fmt.Sprint(v)
				}
				return ""
			}
			num := func(k string) int64 { n, _ := strconv.ParseInt(fmt.Sprint(e[k]), 10, 64); return n }
			id := str("id")
			ev := events[id]
			if ev == nil {
				ev = &event{start: num("start_ns"), kind: str("kind"), id: id, subject: [5]string{str("src"), str("dst"), str("dqp_hex"), str("mac"), "0"}}
				if p := str("priority"); p != "" {
					ev.subject[4] = p
				}
				events[id] = ev
			}
			ev.windows++
			ev.start, ev.end = min(ev.start, num("start_ns")), max(ev.end, num("end_ns"))
			for i, k := range []string{"bytes", "ecn_ce", "cnp", "frames", "resent"} {
				ev.sums[i] += uint64(num(k))
			}
		}
	}
	list := slices.SortedFunc(maps.Values(events), func(a, b *event) int {
		return stdcmp.Or(stdcmp.Compare(a.start/1e9, b.start/1e9), strings.Compare(a.kind, b.kind), strings.Compare(a.id, b.id))
	})
	kinds := map[string]bool{}
	var want strings.Builder
	for _, e := range list {
		kinds[e.kind] = true
		fmt.Fprintf(&want, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", time.Unix(e.start/1e9, 0).UTC().Format(time.DateTime), e.kind, e.id,
			strings.Join(e.subject[:], "\t"), e.windows, e.end-e.start, e.sums[0], e.sums[1], e.sums[2], e.sums[3], e.sums[4])
	}
	return want.String(), slices.Sorted(maps.Keys(kinds))
}

// TestClickHouseSpillNotShared: rows another user planted where ac4ba8c
// kept its spill files (a fixed name in /tmp) are not loaded: the spill
// directory is private, under the user's state directory.
func TestClickHouseSpillNotShared(t *testing.T) {
	addr := clickhousetest.Start(t)
	dir := t.TempDir()
	t.Setenv("STATE_DIRECTORY", "")
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	planted := filepath.Join(os.TempDir(), "rocescope-clickhouse-"+strings.ReplaceAll(addr, ":", "_")+"-planted.windows")
	if err := os.WriteFile(planted, []byte(`{"window_start_ns":1,"host":"planted","packets":666}`+"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(planted) })
	parts, _ := writeSplitTrace(t, dir, &synth.Config{Seed: 3, Packets: 2000, Flows: 20, Duration: 2 * time.Second}, 1, roundRobin(1))
	mustRunInProcess(t, "replay", "--host", "cap0", "-o", "clickhouse://"+addr+"/planted", parts[0])
	if got := selectRows(t, addr, "SELECT host, count() AS n FROM planted.windows GROUP BY host FORMAT JSONEachRow"); len(got) != 1 || got[0]["host"] != "cap0" {
		t.Errorf("hosts of the windows inserted: %v, want only cap0", got)
	}
	if _, err := os.Stat(planted); err != nil {
		t.Errorf("the planted file: %v, want it left alone", err)
	}
}
