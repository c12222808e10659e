package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture/file"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/freeport"
	"github.com/rocescope/rocescope/internal/tsharktest"
)

// goflow2Version is the goflow2 the collector tests build.
const goflow2Version = "v2.2.6"

// goflow2 returns the path of a goflow2 binary built from the Go module
// proxy's goflow2 (once per user: the binary is kept in the user cache
// directory), or skips the test with the reason it cannot be built.
func goflow2(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs goflow2: not in -short")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "rocescope-goflow2", goflow2Version)
	bin := filepath.Join(dir, "goflow2")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
			tmp, err = os.MkdirTemp(filepath.Dir(dir), "build-")
		}
		if err != nil {
			t.Skipf("goflow2: no build directory: %v", err)
		}
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", "github.com/netsampler/goflow2/v2/cmd/goflow2@"+goflow2Version)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("goflow2 %s cannot be built here (go install: %v): %s", goflow2Version, err, out)
	}
	os.MkdirAll(dir, 0o755)
	if err := os.Rename(filepath.Join(tmp, "goflow2"), bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// collector is a goflow2 process listening for IPFIX on 127.0.0.1.
type collector struct {
	addr string // UDP host:port
	out  string // its JSON lines
}

// startGoflow2 runs goflow2 with the mapping of docs/goflow2.yaml, which
// decodes rocescope's enterprise elements, until the test ends.
func startGoflow2(t *testing.T) *collector {
	t.Helper()
	bin := goflow2(t)
	port, httpPort := freeport.Pick(t), freeport.Pick(t)
	c := &collector{addr: fmt.Sprintf("127.0.0.1:%d", port), out: filepath.Join(t.TempDir(), "flows.json")}
	ctx, cancel := context.WithCancel(context.Background())
	// One worker: with more, goflow2 v2.2.6 can make two template
	// caches for an exporter it sees for the first time (NetFlowPipe's
	// check-then-insert in utils/pipe.go) and lose the template of the
	// first message, and so the records until the template's refresh.
	cmd := exec.CommandContext(ctx, bin, "-listen", "netflow://"+c.addr+"?workers=1", "-addr", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"-format", "json", "-transport", "file", "-transport.file", c.out, "-mapping", filepath.Join("..", "..", "docs", "goflow2.yaml"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("goflow2's log:\n%s", stderr.String())
		}
	})
	// goflow2 has bound its port once binding it here fails.
	deadline := time.Now().Add(30 * time.Second)
	for {
		pc, err := net.ListenPacket("udp", c.addr)
		if err != nil {
			return c
		}
		pc.Close()
		if time.Now().After(deadline) {
			t.Fatalf("goflow2 did not bind %s within 30 s:\n%s", c.addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// flows waits until goflow2 has written n flows, or wrote none for 10 s,
// and returns them.
func (c *collector) flows(t *testing.T, n int) []map[string]any {
	t.Helper()
	last, lastChange := -1, time.Now()
	for {
		b, _ := os.ReadFile(c.out)
		// goflow2 writes one JSON object per line, but not always a
		// newline between them: read them as a stream.
		var out []map[string]any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		for {
			m := map[string]any{}
			if err := d.Decode(&m); err != nil {
				break
			}
			out = append(out, m)
		}
		if len(out) != last {
			last, lastChange = len(out), time.Now()
		}
		if len(out) >= n || time.Since(lastChange) > 10*time.Second {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// num reads a JSON number of a goflow2 or rocescope object as an integer.
func num(t *testing.T, m map[string]any, k string) uint64 {
	t.Helper()
	var s string
	switch v := m[k].(type) {
	case json.Number:
		s = v.String()
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		t.Fatalf("%s: %T %v in %v", k, m[k], m[k], m)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", k, err)
	}
	return n
}

// flowKey names a flow of a window in both outputs.
type flowKey struct {
	window   int64
	src, dst string
	dqp      uint64
}

// TestIPFIXToGoflow2 replays a trace of 1000 connections over three
// windows with -o report.jsonl -o ipfix://goflow2 and checks that goflow2's
// own JSON holds, per window and flow, the addresses, ports, bytes and
// packets of the JSON report, and the enterprise elements its mapping
// decodes (QPs, CNP, NAKs, retransmissions, PSN gaps, ECN-CE). goflow2
// reads one UDP socket with the kernel's default buffer, which a loaded
// machine can let overflow: then every lost record must show as a gap in
// the sequence numbers goflow2 reports, and the export is tried again (3
// times at most) until goflow2 got every record.
func TestIPFIXToGoflow2(t *testing.T) {
	goflow2(t) // skip early if it cannot be built
	dir := t.TempDir()
	trace, _ := genTrace(t, dir, "--packets", "40000", "--flows", "1000", "--duration", "3s")
	jsonl := filepath.Join(dir, "report.jsonl")
	for attempt := 1; ; attempt++ {
		c := startGoflow2(t)
		mustRunInProcess(t, "replay", "--exact", "--host", "h", "-o", jsonl, "-o", "ipfix://"+c.addr+"?max-rate=1000", trace)
		b, err := os.ReadFile(jsonl)
		if err != nil {
			t.Fatal(err)
		}
		want := map[flowKey]map[string]any{}
		for _, r := range reports(t, string(b)) {
			start := int64(num(t, r, "window_start_ns"))
			for _, f := range r["flows_all"].([]any) {
				f := f.(map[string]any)
				want[flowKey{start, f["src"].(string), f["dst"].(string), num(t, f, "dqp")}] = f
			}
		}
		if len(want) < 3000 {
			t.Fatalf("fixture too small: %d flows", len(want))
		}
		got := c.flows(t, len(want))
		checkGoflow2Flows(t, got, want)
		lost := len(want) - len(got)
		if gaps := sequenceGaps(t, got, len(want)); gaps != lost {
			t.Fatalf("goflow2 misses %d records, its sequence numbers show %d", lost, gaps)
		}
		if lost == 0 {
			return
		}
		if attempt == 3 {
			t.Fatalf("goflow2 lost records in each of 3 exports (%d of %d in the last), all shown by the sequence numbers", lost, len(want))
		}
		t.Logf("export %d: goflow2 lost %d of %d records, as its sequence numbers show; again", attempt, lost, len(want))
	}
}

// checkGoflow2Flows checks each flow goflow2 wrote against the report's
// flow of the same window and key, and that the fixture has CNPs, NAKs and
// retransmissions.
func checkGoflow2Flows(t *testing.T, got []map[string]any, want map[flowKey]map[string]any) {
	t.Helper()
	var cnp, naks, retrans uint64
	seen := map[flowKey]bool{}
	for _, g := range got {
		start := int64(num(t, g, "time_flow_start_ns"))
		k := flowKey{start - start%1e9, g["src_addr"].(string), g["dst_addr"].(string), num(t, g, "rocev2_dqp")}
		f, ok := want[k]
		if !ok || seen[k] {
			t.Fatalf("goflow2 flow %v is in no window of the report, or twice", g)
		}
		seen[k] = true
		for gk, rk := range map[string]string{"bytes": "bytes", "packets": "packets", "src_port": "sport",
			"rocev2_cnp": "cnp", "rocev2_naks": "naks", "rocev2_retransmits": "retransmits", "rocev2_psn_gaps": "psn_gaps", "rocev2_ecn_ce": "ecn_ce"} {
			if num(t, g, gk) != num(t, f, rk) {
				t.Errorf("flow %v: goflow2 %s = %d, report %s = %d", k, gk, num(t, g, gk), rk, num(t, f, rk))
			}
		}
		if f["sqp"] != nil && num(t, g, "rocev2_sqp") != num(t, f, "sqp") {
			t.Errorf("flow %v: goflow2 rocev2_sqp = %d, report sqp = %d", k, num(t, g, "rocev2_sqp"), num(t, f, "sqp"))
		}
		if g["type"] != "IPFIX" || g["proto"] != "UDP" || num(t, g, "dst_port") != 4791 {
			t.Errorf("flow %v: type %v proto %v dst_port %v", k, g["type"], g["proto"], g["dst_port"])
		}
		cnp += num(t, f, "cnp")
		naks += num(t, f, "naks")
		retrans += num(t, f, "retransmits")
	}
	if len(got) > 0 && (cnp == 0 || naks == 0 || retrans == 0) {
		t.Errorf("fixture too tame: %d CNPs, %d NAKs, %d retransmissions", cnp, naks, retrans)
	}
}

// sequenceGaps returns the data records a collector knows it missed from
// the sequence numbers of the flows it got (each flow carries its
// message's), given that total were sent: the gaps between one message's
// sequence number plus its records and the next one's, and after the last.
func sequenceGaps(t *testing.T, got []map[string]any, total int) int {
	t.Helper()
	records := map[uint64]uint64{} // message sequence number -> records
	for _, g := range got {
		records[num(t, g, "sequence_num")]++
	}
	seqs := slices.Sorted(maps.Keys(records))
	next, gaps := uint64(0), 0
	for _, s := range seqs {
		gaps += int(s - next)
		next = s + records[s]
	}
	return gaps + total - int(next)
}

// udpMessages collects the datagrams sent to a UDP socket on 127.0.0.1
// until stop is called.
func udpMessages(t *testing.T) (addr string, stop func() [][]byte) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc.(*net.UDPConn).SetReadBuffer(8 << 20)
	var mu sync.Mutex
	var msgs [][]byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			msgs = append(msgs, bytes.Clone(buf[:n]))
			mu.Unlock()
		}
	}()
	return pc.LocalAddr().String(), func() [][]byte {
		time.Sleep(200 * time.Millisecond) // datagrams in flight on loopback
		pc.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return msgs
	}
}

// writeIPFIXPcap writes the messages as UDP datagrams from 127.0.0.1:1234
// to 127.0.0.1:port in a pcap file, for tshark.
func writeIPFIXPcap(t *testing.T, path string, port int, msgs [][]byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := file.NewWriter(f, &file.WriterOptions{LinkType: decode.LinkIPv4, SnapLen: 65535})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(m)))
		binary.BigEndian.PutUint16(ip[4:], uint16(i))
		var sum uint32
		for j := 0; j < 20; j += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[j:]))
		}
		for sum > 0xffff {
			sum = sum>>16 + sum&0xffff
		}
		binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
		udp := binary.BigEndian.AppendUint16(nil, 1234)
		udp = binary.BigEndian.AppendUint16(udp, uint16(port))
		udp = binary.BigEndian.AppendUint16(udp, uint16(8+len(m)))
		udp = append(udp, 0, 0) // no checksum (IPv4)
		frame := append(append(ip, udp...), m...)
		if err := w.WriteFrame(int64(1_700_000_000+i)*1e9, frame, len(frame)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestIPFIXTshark: tshark decodes the messages of a replay's export
// (Wireshark's cflow dissector) without a malformed packet or an expert
// warning, shows the enterprise elements under their PEN, and, when one
// message in between is dropped, reports the gap the sequence numbers
// show.
func TestIPFIXTshark(t *testing.T) {
	if testing.Short() {
		t.Skip("runs tshark over a replay's export: not in -short")
	}
	tsharktest.Require(t)
	dir := t.TempDir()
	trace, _ := genTrace(t, dir, "--packets", "20000", "--flows", "300", "--duration", "2s")
	addr, stop := udpMessages(t)
	mustRunInProcess(t, "replay", "--host", "h", "-o", "ipfix://"+addr+"?domain=7", "-o", filepath.Join(dir, "r.jsonl"), trace)
	msgs := stop()
	if len(msgs) < 20 {
		t.Fatalf("%d messages, want a few dozen", len(msgs))
	}
	const port = 4739
	decodeAs := fmt.Sprintf("udp.port==%d,cflow", port)
	whole := filepath.Join(dir, "ipfix.pcap")
	writeIPFIXPcap(t, whole, port, msgs)
	out, err := tsharktest.Run(t, whole, "-d", decodeAs, "-q", "-z", "expert")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("Malformed")) || bytes.Contains(out, []byte("Warnings")) || bytes.Contains(out, []byte("Errors")) {
		t.Errorf("tshark's expert infos for the whole export:\n%s", out)
	}
	fields, err := tsharktest.Run(t, whole, "-d", decodeAs, "-T", "fields", "-e", "cflow.od_id", "-e", "cflow.sequence", "-e", "cflow.template_ipfix_field_pen")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(fields))
	lines := 0
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 3 || f[0] != "7" {
			t.Fatalf("tshark fields %q: want domain 7", sc.Text())
		}
		lines++
	}
	if lines != len(msgs) {
		t.Errorf("tshark read %d messages, want %d", lines, len(msgs))
	}
	verbose, err := tsharktest.Run(t, whole, "-d", decodeAs, "-V", "-c", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Enterprise Private entry: (Example Enterprise Number for Documentation Use) Type 1: ", "SrcAddr: ", "Octets: "} {
		if !bytes.Contains(verbose, []byte(s)) {
			t.Errorf("tshark -V of the first message lacks %q:\n%s", s, verbose)
		}
	}
	// Drop one message with data records: tshark names the gap.
	drop := 5
	gap := filepath.Join(dir, "gap.pcap")
	writeIPFIXPcap(t, gap, port, append(append([][]byte{}, msgs[:drop]...), msgs[drop+1:]...))
	out, err = tsharktest.Run(t, gap, "-d", decodeAs, "-q", "-z", "expert")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("Unexpected flow sequence")) {
		t.Errorf("tshark's expert infos with message %d dropped do not name the gap:\n%s", drop, out)
	}
}
