package main

import (
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
)

// TestClickHouseSink replays a trace with -o clickhouse://... into a
// clickhouse-server the test starts, and once more as JSON lines, and
// requires every figure of every window and flow read back with SELECT ...
// FORMAT JSONEachRow to equal the JSON lines report's: with --exact every
// flow, and without it the flows of the top, elephant and jitter lists.
func TestClickHouseSink(t *testing.T) {
	addr := clickhousetest.Start(t)
	dir := t.TempDir()
	parts, _ := writeSplitTrace(t, dir, &synth.Config{Seed: 11, Packets: 40_000, Flows: 500, Duration: 4 * time.Second}, 1, roundRobin(1))
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
					if slices.Contains([]string{"top_flows", "elephants", "jitter", "flows_all"}, k) {
						continue
					}
					sameValue(t, fmt.Sprintf("window %d %s", i, k), v, reportValue(windows[i], k, false))
				}
				listed := map[string]bool{}
				lists := []string{"top_flows", "elephants", "jitter"}
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
			if exact && nflows < 1000 {
				t.Errorf("only %d flows: too few to prove anything", nflows)
			}
		})
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
			if !slices.Contains([]string{"top_flows", "elephants", "jitter", "flows_all"}, k) {
				sameValue(t, fmt.Sprintf("window %d %s", i, k), v, reportValue(got[i], k, false))
			}
		}
	}
	flows := selectRows(t, addr, "SELECT count() AS n FROM fleet.flows FINAL FORMAT JSONEachRow")
	n := 0
	for _, r := range want {
		listed := map[string]bool{}
		for _, l := range []string{"top_flows", "elephants", "jitter"} {
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
	parts, _ := writeSplitTrace(t, dir, &synth.Config{Seed: 11, Packets: 40_000, Flows: 500, Duration: 4 * time.Second}, 1, roundRobin(1))
	args := append([]string{"replay", "--host", "cap0", "--exact"}, mergeRates...)
	reports := parseReports(t, mustRunInProcess(t, append(args, "--format", "jsonl", parts[0])...))
	for range 2 {
		mustRunInProcess(t, append(args, "-o", fmt.Sprintf("clickhouse://%s/rocescope?spill=%s", addr, filepath.Join(dir, "spill")), parts[0])...)
	}
	queries := readmeQueries(t)
	if len(queries) != 3 {
		t.Fatalf("%d SQL examples in the README, want 3", len(queries))
	}
	start := func(r map[string]any) int64 {
		ns, _ := strconv.ParseInt(fmt.Sprint(r["window_start_ns"]), 10, 64)
		return ns / 1e9
	}
	in := reports[1:] // the time range leaves the first window out
	macros := strings.NewReplacer("$__timeFilter(window_start)",
		fmt.Sprintf("window_start >= toDateTime(%d) AND window_start <= toDateTime(%d)", start(in[0]), start(in[len(in)-1])),
		"$__interval_s", "1")
	run := func(q string) string {
		t.Helper()
		out, err := clickhousetest.Query(addr, macros.Replace(q)+" FORMAT TSV", "")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out
	}
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
