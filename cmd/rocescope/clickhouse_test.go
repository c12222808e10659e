package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
