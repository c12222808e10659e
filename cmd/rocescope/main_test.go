package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
)

// runCLI runs the command line in-process and returns its exit status and
// outputs.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

func TestHelpTeaches(t *testing.T) {
	code, out, _ := runCLI(t, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, c := range commands() {
		if !strings.Contains(out, "  "+c.name+" ") {
			t.Errorf("help does not list %q:\n%s", c.name, out)
		}
		code, usage, _ := runCLI(t, c.name, "--help")
		if code != 0 || !strings.HasPrefix(usage, "Usage: rocescope "+c.name) {
			t.Errorf("%s --help: exit %d:\n%s", c.name, code, usage)
		}
		if c.name != "version" && !strings.Contains(usage, "Examples:") {
			t.Errorf("%s --help has no examples", c.name)
		}
		if code, again, _ := runCLI(t, "help", c.name); code != 0 || again != usage {
			t.Errorf("help %s differs from %s --help", c.name, c.name)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string // in the one-line message
	}{
		{nil, "Usage: rocescope COMMAND"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"replay", "--no-such-flag", "x.pcap"}, "unknown flag: --no-such-flag"},
		{[]string{"replay", "--elephant-rate", "fast", "x.pcap"}, "want bits per second such as 400M"},
		{[]string{"replay", "--window", "0s", "x.pcap"}, "--window 0s: want at least 1ms"},
		{[]string{"replay", "--workers", "0", "x.pcap"}, "--workers 0: want at least 1"},
		{[]string{"replay"}, "no capture file given"},
		{[]string{"replay", "--format", "xml", filepath.Join(dir, "x.pcap")}, `--format "xml": want jsonl, csv, table or html`},
		{[]string{"gen"}, "no output file"},
		{[]string{"gen", "--packets", "0", "x.pcap"}, "--packets 0: want at least 1"},
		{[]string{"capture"}, "-i IFACE is required"},
		{[]string{"capture", "-i", "eth9", "--queues", "3-1"}, `--queues "3-1"`},
		{[]string{"capture", "-i", "eth9", "--mode", "magic"}, `--mode "magic"`},
		{[]string{"merge"}, "no state file or directory given"},
		{[]string{"help", "nothing"}, `no command "nothing"`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if tc.args != nil && strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%q: error is not one line: %q", tc.args, stderr)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"0": 0, "1000": 1000, "10M": 10e6, "2.5G": 2.5e9, "400Gbps": 400e9, "1T": 1e12, "3k": 3e3, "25 Mb/s": 0,
	} {
		got, err := parseRate(in)
		if in == "25 Mb/s" {
			if err == nil {
				t.Errorf("parseRate(%q) accepted a unit it does not know", in)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("parseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "-1", "1X", "NaN", "Inf", "+Inf"} {
		if _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) accepted it", bad)
		}
	}
}

// genTrace writes a small synthetic trace and its truth into dir.
func genTrace(t *testing.T, dir string, args ...string) (pcap string, truth *synth.Truth) {
	t.Helper()
	pcap = filepath.Join(dir, "trace.pcap")
	tp := filepath.Join(dir, "truth.json")
	code, _, stderr := runCLI(t, append([]string{"gen", "-o", pcap, "--truth", tp, "--packets", "20000", "--flows", "300", "--seed", "3"}, args...)...)
	if code != 0 {
		t.Fatalf("gen: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(tp)
	if err != nil {
		t.Fatal(err)
	}
	truth = new(synth.Truth)
	if err := json.Unmarshal(data, truth); err != nil {
		t.Fatal(err)
	}
	return pcap, truth
}

// reports parses JSON lines.
func reports(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("report line is not JSON: %v: %.200s", err, sc.Text())
		}
		rs = append(rs, m)
	}
	return rs
}

// TestGenReplayAgreesWithTruth runs the quick start end to end: gen writes a
// trace and its truth, replay reports it, and the window counters equal
// the truth.
func TestGenReplayAgreesWithTruth(t *testing.T) {
	dir := t.TempDir()
	pcap, truth := genTrace(t, dir)
	for _, workers := range []string{"1", "2"} {
		code, out, stderr := runCLI(t, "replay", "--workers", workers, "--format", "jsonl", pcap)
		if code != 0 {
			t.Fatalf("replay: exit %d: %s", code, stderr)
		}
		rs := reports(t, out)
		if len(rs) != len(truth.Windows) {
			t.Fatalf("%d reports, truth has %d windows", len(rs), len(truth.Windows))
		}
		for i, tw := range truth.Windows {
			r := rs[i]
			for k, want := range map[string]uint64{"window_start_ns": uint64(tw.StartNS), "packets": tw.Packets, "bytes": tw.Bytes,
				"roce_packets": tw.RoCEPackets, "other_packets": tw.OtherPackets, "cnp": tw.CNP, "ecn_ce": tw.ECNCE,
				"naks": tw.NAKs, "rnr_naks": tw.RNRNAKs, "retransmits": tw.Retransmits, "psn_gaps": tw.PSNGaps,
				"messages": tw.Messages, "payload_bytes": tw.PayloadBytes} {
				if got, ok := r[k].(float64); !ok || uint64(got) != want {
					t.Errorf("workers %s window %d %s = %v, truth %d", workers, i, k, r[k], want)
				}
			}
			if got := r["flows"].(float64); got != float64(tw.Flows) {
				t.Errorf("window %d flows = %v, truth %d", i, got, tw.Flows)
			}
		}
	}
}

func TestReplayFormats(t *testing.T) {
	dir := t.TempDir()
	pcap, truth := genTrace(t, dir)
	code, out, stderr := runCLI(t, "replay", "--format", "csv", "--top", "5", pcap)
	if code != 0 {
		t.Fatalf("csv: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "row,window_start_ns,") || len(lines) < 2 {
		t.Errorf("csv output does not start with a header:\n%.300s", out)
	}
	cols := len(strings.Split(lines[0], ","))
	for _, l := range lines[1:] {
		if n := len(strings.Split(l, ",")); n != cols {
			t.Fatalf("csv row has %d fields, header %d: %s", n, cols, l)
		}
	}
	code, out, _ = runCLI(t, "replay", "--format", "table", pcap)
	if code != 0 || strings.Count(out, "window ") != len(truth.Windows) {
		t.Errorf("table: exit %d, %d windows, want %d", code, strings.Count(out, "window "), len(truth.Windows))
	}
	// -o writes the file; --config sets flags by their names.
	cfg := filepath.Join(dir, "rs.yaml")
	if err := os.WriteFile(cfg, []byte("format: jsonl\ntop: 3\nelephant-rate: 1M\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(dir, "out.jsonl")
	if code, _, stderr := runCLI(t, "replay", "--config", cfg, "-o", outFile, pcap); code != 0 {
		t.Fatalf("replay --config: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	rs := reports(t, string(data))
	if len(rs) == 0 || len(rs[0]["top_flows"].([]any)) != 3 || len(rs[0]["elephants"].([]any)) == 0 {
		t.Errorf("--config top 3 and elephant-rate 1M not applied: %d reports", len(rs))
	}
	if err := os.WriteFile(cfg, []byte("colour: blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "replay", "--config", cfg, pcap); code != 2 || !strings.Contains(stderr, `unknown key "colour"`) {
		t.Errorf("unknown config key: exit %d: %s", code, stderr)
	}
}

func TestReplayErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pcap")
	if code, _, stderr := runCLI(t, "replay", missing); code != 1 || !strings.Contains(stderr, missing) {
		t.Errorf("missing file: exit %d: %s", code, stderr)
	}
	pcap, _ := genTrace(t, dir)
	data, _ := os.ReadFile(pcap)
	cut := filepath.Join(dir, "cut.pcap")
	if err := os.WriteFile(cut, data[:len(data)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "replay", "--format", "jsonl", cut)
	if code != 1 || !strings.Contains(stderr, cut) || !strings.Contains(stderr, "offset") {
		t.Errorf("truncated file: exit %d: %s", code, stderr)
	}
	code, out, stderr := runCLI(t, "replay", "--keep-going", "--format", "jsonl", cut)
	if code != 0 || !strings.Contains(stderr, "damaged") {
		t.Errorf("--keep-going: exit %d: %s", code, stderr)
	}
	var packets float64
	for _, r := range reports(t, out) {
		packets += r["packets"].(float64)
	}
	if packets != 20000-1 {
		t.Errorf("--keep-going reported %v packets, want the 19999 whole records", packets)
	}
}

// TestDumpFieldsMatchDecoder dumps a trace and checks each line against a
// direct decode of the same frame.
func TestDumpFieldsMatchDecoder(t *testing.T) {
	dir := t.TempDir()
	pcap, truth := genTrace(t, dir)
	code, out, stderr := runCLI(t, "dump", pcap)
	if code != 0 {
		t.Fatalf("dump: exit %d: %s", code, stderr)
	}
	lines := reports(t, out)
	if uint64(len(lines)) != truth.Total.RoCEPackets {
		t.Fatalf("dump printed %d frames, the trace has %d RoCE frames", len(lines), truth.Total.RoCEPackets)
	}
	code, all, _ := runCLI(t, "dump", "--all", pcap)
	if code != 0 || uint64(len(reports(t, all))) != truth.Total.Packets {
		t.Errorf("dump --all: exit %d, want %d lines", code, truth.Total.Packets)
	}
	for _, l := range lines[:50] {
		bth := l["bth"].(map[string]any)
		if _, ok := bth["opcode"]; !ok || l["frame"].(float64) < 1 {
			t.Fatalf("dump line lacks bth.opcode or frame: %v", l)
		}
	}
	// Frame numbers are 1-based positions in the file: the first RoCE
	// frame's fields equal a direct decode of that record.
	var p decode.Packet
	first := int(lines[0]["frame"].(float64))
	frame := nthFrame(t, pcap, first)
	if err := p.Decode(frame, decode.LinkEthernet); err != nil {
		t.Fatal(err)
	}
	if got := lines[0]["bth"].(map[string]any)["psn"].(float64); uint32(got) != p.BTH.PSN {
		t.Errorf("frame %d psn %v, decode says %d", first, got, p.BTH.PSN)
	}
}

// nthFrame returns the captured bytes of record n (1-based) of a classic
// little-endian pcap file, read independently of the capture package.
func nthFrame(t *testing.T, path string, n int) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := 24
	for i := 1; ; i++ {
		caplen := int(uint32(data[off+8]) | uint32(data[off+9])<<8 | uint32(data[off+10])<<16 | uint32(data[off+11])<<24)
		if i == n {
			return data[off+16 : off+16+caplen]
		}
		off += 16 + caplen
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "rocescope ") || !strings.Contains(out, "go1.") {
		t.Errorf("version: exit %d: %q", code, out)
	}
}

// TestReplayExact checks --exact: every flow listed, and the sketches'
// error measured against the exact records.
func TestReplayExact(t *testing.T) {
	pcap, truth := genTrace(t, t.TempDir())
	code, out, stderr := runCLI(t, "replay", "--exact", "--format", "jsonl", pcap)
	if code != 0 {
		t.Fatalf("replay --exact: exit %d: %s", code, stderr)
	}
	for i, r := range reports(t, out) {
		all, ok := r["flows_all"].([]any)
		if !ok || uint64(len(all)) != truth.Windows[i].Flows {
			t.Errorf("window %d: flows_all has %d flows, truth %d", i, len(all), truth.Windows[i].Flows)
		}
		se, ok := r["sketch_error"].(map[string]any)
		if !ok {
			t.Fatalf("window %d: no sketch_error", i)
		}
		if se["top_recall"].(float64) < 0.99 || se["flows_rel_err"].(float64) > 0.005 {
			t.Errorf("window %d: sketch error %v", i, se)
		}
	}
}

// TestDemoTraceIsReproducible regenerates the trace the README's quick start
// replays, testdata/demo.pcap, and checks that it is byte for byte what
// gen writes today; after an intended change to the generator, regenerate
// it with the command below.
func TestDemoTraceIsReproducible(t *testing.T) {
	const demo = "../../testdata/demo.pcap"
	want, err := os.ReadFile(demo)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "demo.pcap")
	// The command that made testdata/demo.pcap:
	code, _, stderr := runCLI(t, "gen", "-o", out, "--packets", "10000", "--flows", "200", "--snaplen", "128", "--seed", "1")
	if code != 0 {
		t.Fatalf("gen: exit %d: %s", code, stderr)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
		t.Errorf("%s differs from what gen writes now: regenerate it with "+
			"go run ./cmd/rocescope gen -o testdata/demo.pcap --packets 10000 --flows 200 --snaplen 128 --seed 1", demo)
	}
	code, report, stderr := runCLI(t, "replay", demo)
	if code != 0 || len(reports(t, report)) != 3 {
		t.Errorf("replay %s: exit %d, %s", demo, code, stderr)
	}
}

func TestProgressText(t *testing.T) {
	for _, c := range []struct {
		p    file.Progress
		want string
	}{
		{file.Progress{File: 1, Files: 1, Done: 50, Total: 200}, "file 1/1 25%"},
		{file.Progress{File: 2, Files: 3, Done: 7}, "file 2/3"},
	} {
		if got := progressText(c.p); got != c.want {
			t.Errorf("progressText(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

// FuzzParseRate: any input is either refused or a finite rate that is not
// negative, and a rate printed by formatRate parses back to itself.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10M", "2.5G", "400Gbps", "1e3", "0", "-1", "NaN", "1T", "3 k", "b/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseRate(s)
		if err != nil {
			return
		}
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("parseRate(%q) = %v", s, v)
		}
		if back, err := parseRate(formatRate(v)); err != nil || back != v {
			t.Fatalf("parseRate(formatRate(%v) = %q) = %v, %v", v, formatRate(v), back, err)
		}
	})
}

// quietSource is a live source that delivers one frame, stamped with the
// clock, then nothing: empty batches.
type quietSource struct {
	frame capture.Frame
	sent  bool
}

func (s *quietSource) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	if !s.sent {
		s.sent = true
		f := s.frame
		f.Time = time.Now().UnixNano()
		b.Frames = append(b.Frames, f)
		return nil
	}
	time.Sleep(time.Millisecond)
	return nil
}
func (*quietSource) Stats() capture.Stats { return capture.Stats{} }
func (*quietSource) Close() error         { return nil }

// failWriter fails every write, as a full disk does.
type failWriter struct{}

var errDiskFull = errors.New("no space left on device")

func (failWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// TestLiveRunEndsCleanly: a live analysis stopped by its context (as
// --duration and a signal stop a capture) ends without an error, while an
// output that fails with it is still an error.
func TestLiveRunEndsCleanly(t *testing.T) {
	src, err := file.Open([]string{"../../testdata/demo.pcap"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := capture.NewBatch(1)
	if err := src.Next(b); err != nil {
		t.Fatal(err)
	}
	frame := b.Frames[0]
	frame.Data = bytes.Clone(frame.Data)
	src.Close()
	for _, out := range []io.Writer{io.Discard, failWriter{}} {
		fs := pflag.NewFlagSet("capture", pflag.ContinueOnError)
		var o reportOptions
		o.bind(fs)
		o.format, o.cfg.Window = "jsonl", 10*time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		a := &analysis{opts: &o, live: true}
		err := a.run(ctx, &env{stdout: out, stderr: io.Discard}, []capture.Source{&quietSource{frame: frame}})
		cancel()
		if _, fails := out.(failWriter); fails != errors.Is(err, errDiskFull) || !fails && err != nil {
			t.Errorf("output %T: run = %v", out, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("output %T: the context's end is reported as an error: %v", out, err)
		}
	}
}
