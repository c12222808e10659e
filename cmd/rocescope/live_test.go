//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/netnstest"
)

// The live tests run the rocescope binary the way an operator does: built
// with go build, started with "ip netns exec" in one namespace of a veth
// pair, fed from a packet socket in the other namespace, stopped by SIGINT or
// --duration, and judged by the JSON lines it wrote. The traffic is a
// capture/synth trace (RC connections with WRITE, SEND and READ, ACKs,
// NAKs, CNPs, PFC pause frames and ARP/UDP/TCP background); what the reports
// must say is computed by decoding the same frames with decode.Packet.
// The namespaces and the veth pair come from internal/netnstest.

const (
	liveRoCE = 100000 // RoCE frames each run sends
	// liveOtherShare makes about 20000 non-RoCE frames next to liveRoCE.
	liveOtherShare = 1.0 / 6
	// liveSettle is how long a run waits after the last frame was sent
	// before it interrupts the capture: the frames are in the kernel's
	// rings by then, and the capture takes them within milliseconds.
	liveSettle = 2 * time.Second
	// liveMaxNoise bounds the frames the namespaces' own kernels may add to
	// a capture of every frame (multicast listener reports when a link
	// comes up, as a rule none).
	liveMaxNoise = 50
	// liveMTU is the veth pair's MTU: it fits synth's largest background
	// frames (1460 bytes of TCP payload over IPv6 and a VLAN tag).
	liveMTU = 2000
	// liveNoIface names an interface that does not exist.
	liveNoIface = "rsnosuchif0"
)

// liveRates are the sending rates in frames per second. A run that counts
// kernel drops (every mode takes the first rate without drops on an idle
// machine, but not always when other work competes for the two cores) is
// repeated at the next rate. Each run checks that every frame is reported
// or counted as dropped.
var liveRates = []int{30000, 10000, 10000}

// liveFlow is a flow as reports name it.
type liveFlow struct {
	src, dst string
	dqp      uint32
}

// tally is what reports on a set of frames must add up to.
type tally struct {
	frames, roce, other, bytes uint64
	opcodes                    map[string]uint64   // packets per decimal BTH opcode
	flows                      map[liveFlow]uint64 // packets per flow
}

func newTally() tally {
	return tally{opcodes: make(map[string]uint64), flows: make(map[liveFlow]uint64)}
}

// liveTraffic is the trace every run sends and what captures of it must
// report: of every frame (--all), and of the frames the kernel filters
// pass (RoCE, and PFC or pause frames).
type liveTraffic struct {
	frames        [][]byte
	all, filtered tally
}

// makeTraffic makes a synth trace cut after its liveRoCE-th RoCE frame.
func makeTraffic(t *testing.T) *liveTraffic {
	t.Helper()
	src, err := synth.New(&synth.Config{
		Seed:       7,
		Packets:    liveRoCE * 13 / 10,
		Flows:      64,
		PMTU:       1024, // RoCE frames fit the veth's MTU
		OtherShare: liveOtherShare,
	})
	if err != nil {
		t.Fatalf("synth.New: %v", err)
	}
	defer src.Close()
	var frames [][]byte
	var p decode.Packet
	b := capture.NewBatch(256)
	for roce := 0; roce < liveRoCE; {
		err := src.Next(b)
		for i := 0; i < len(b.Frames) && roce < liveRoCE; i++ {
			f := &b.Frames[i]
			if err := p.Decode(f.Data, f.Link); err == nil && p.IsRoCE() {
				roce++
			}
			frames = append(frames, slices.Clone(f.Data))
		}
		if err == io.EOF && roce < liveRoCE {
			t.Fatalf("synth trace ended after %d RoCE frames, want %d", roce, liveRoCE)
		} else if err != nil && err != io.EOF {
			t.Fatalf("synth: %v", err)
		}
	}
	tr := newTraffic(t, frames)
	t.Logf("traffic: %d frames, %d RoCE in %d flows with %d opcodes, %d other (%d PFC/pause)",
		tr.all.frames, tr.all.roce, len(tr.all.flows), len(tr.all.opcodes), tr.all.other, tr.filtered.other)
	return tr
}

// newTraffic tallies Ethernet frames.
func newTraffic(t *testing.T, frames [][]byte) *liveTraffic {
	t.Helper()
	tr := &liveTraffic{frames: frames, all: newTally(), filtered: newTally()}
	var p decode.Packet
	for i, f := range frames {
		if err := p.Decode(f, decode.LinkEthernet); err != nil {
			t.Fatalf("frame %d: decode: %v", i, err)
		}
		tr.all.add(&p, len(f))
		if p.IsRoCE() || p.Kind == decode.KindPFC || p.Kind == decode.KindPause {
			tr.filtered.add(&p, len(f))
		}
	}
	return tr
}

// add counts the decoded frame p of n bytes.
func (c *tally) add(p *decode.Packet, n int) {
	c.frames++
	c.bytes += uint64(n)
	if !p.IsRoCE() {
		c.other++
		return
	}
	c.roce++
	c.opcodes[strconv.Itoa(int(p.BTH.Opcode))]++
	c.flows[liveFlow{p.Src.String(), p.Dst.String(), p.BTH.DestQP}]++
}

// liveReport holds the report keys the live tests check. Pointers tell
// whether a key was present.
type liveReport struct {
	Packets   *uint64           `json:"packets"`
	Bytes     *uint64           `json:"bytes"`
	RoCE      *uint64           `json:"roce_packets"`
	Other     *uint64           `json:"other_packets"`
	Malformed *uint64           `json:"malformed_packets"`
	Truncated *uint64           `json:"truncated_packets"`
	Drops     *uint64           `json:"kernel_drops"`
	Exact     *bool             `json:"exact"`
	Opcodes   map[string]uint64 `json:"opcodes"`
	FlowsAll  []struct {
		Src     string `json:"src"`
		Dst     string `json:"dst"`
		DQP     uint32 `json:"dqp"`
		Packets uint64 `json:"packets"`
	} `json:"flows_all"`
}

// readReports reads the JSON lines of path, checks that every line has the
// keys the tests need and accounts for each of its frames, and returns the
// sum over all windows and the kernel drops.
func readReports(t *testing.T, path string) (sum tally, drops, malformed, truncated uint64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reports: %v", err)
	}
	sum = newTally()
	var windows []string // packets and drops per window
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(data) == 0 {
		t.Fatalf("%s is empty: no window reported", path)
	}
	for i, line := range lines {
		var r liveReport
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: line %d: %v", path, i+1, err)
		}
		if r.Packets == nil || r.Bytes == nil || r.RoCE == nil || r.Other == nil || r.Malformed == nil ||
			r.Truncated == nil || r.Drops == nil || r.Exact == nil || r.Opcodes == nil || r.FlowsAll == nil {
			t.Fatalf("%s: line %d lacks a key of packets, bytes, roce_packets, other_packets, malformed_packets, truncated_packets, kernel_drops, exact, opcodes, flows_all: %s", path, i+1, line)
		}
		if got := *r.RoCE + *r.Other + *r.Malformed + *r.Truncated; got != *r.Packets {
			t.Errorf("%s: line %d: roce+other+malformed+truncated = %d, packets = %d", path, i+1, got, *r.Packets)
		}
		if !*r.Exact {
			t.Errorf("%s: line %d: exact is false: the QP table did not hold every flow", path, i+1)
		}
		sum.frames += *r.Packets
		sum.bytes += *r.Bytes
		sum.roce += *r.RoCE
		sum.other += *r.Other
		drops += *r.Drops
		windows = append(windows, fmt.Sprintf("%d/%d", *r.Packets, *r.Drops))
		malformed += *r.Malformed
		truncated += *r.Truncated
		for op, n := range r.Opcodes {
			sum.opcodes[op] += n
		}
		for _, f := range r.FlowsAll {
			sum.flows[liveFlow{f.Src, f.Dst, f.DQP}] += f.Packets
		}
	}
	t.Logf("%d windows (packets/kernel_drops: %s): %d frames, %d RoCE, %d other, %d malformed, %d truncated, %d kernel drops",
		len(lines), strings.Join(windows, " "), sum.frames, sum.roce, sum.other, malformed, truncated, drops)
	return sum, drops, malformed, truncated
}

// liveRun is one run of rocescope capture.
type liveRun struct {
	bin       string
	mode      string
	all       bool
	interrupt bool // stop with SIGINT once the traffic is sent; else by --duration
	queues    int  // queues of the veth ends, 0 for one
	flap      bool // take the link down and up when half the traffic is sent
	pps       int  // sending rate, frames per second
}

// stderrLines collects a process's standard error and signals when a line
// matches.
type stderrLines struct {
	mu    sync.Mutex
	text  strings.Builder
	match *regexp.Regexp
	found chan string // gets the first matching line
	done  chan struct{}
}

func (s *stderrLines) read(r io.Reader) {
	defer close(s.done)
	sc := bufio.NewScanner(r)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		s.mu.Lock()
		s.text.WriteString(line + "\n")
		s.mu.Unlock()
		if !sent && s.match.MatchString(line) {
			s.found <- line
			sent = true
		}
	}
}

func (s *stderrLines) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text.String()
}

// runCapture runs rocescope capture on p.IfB in p.NSB while the traffic is
// sent from p.NSA, and returns the report file and the attach line.
func runCapture(t *testing.T, p *netnstest.Pair, r liveRun, tr *liveTraffic) (reports, attached string) {
	t.Helper()
	reports = filepath.Join(t.TempDir(), "reports.jsonl")
	args := []string{"netns", "exec", p.NSB, r.bin, "capture", "-i", p.IfB, "--mode", r.mode,
		"--format", "jsonl", "--window", "1s", "--exact", "--workers", "2", "-o", reports}
	if r.all {
		args = append(args, "--all")
	}
	// --duration covers the sending, three times over, and the settling.
	duration := 3*time.Duration(tr.all.frames)*time.Second/time.Duration(r.pps) + liveSettle
	if !r.interrupt {
		args = append(args, "--duration", duration.String())
	}
	cmd := exec.Command("ip", args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &stderrLines{
		match: regexp.MustCompile(`^rocescope capture: .* on ` + regexp.QuoteMeta(p.IfB) + `$`),
		found: make(chan string, 1),
		done:  make(chan struct{}),
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd, err)
	}
	exited := make(chan error, 1)
	go func() {
		stderr.read(pipe)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // no-op error once it has exited
		<-stderr.done
	})

	select {
	case attached = <-stderr.found:
	case err := <-exited:
		t.Fatalf("%s exited before attaching: %v\nstderr:\n%s", cmd, err, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not attach within 30s\nstderr:\n%s", cmd, stderr)
	}
	start := time.Now()
	if r.flap {
		half := len(tr.frames) / 2
		send(t, p, tr.frames[:half], r.pps)
		time.Sleep(liveSettle) // frames still in the veth are lost when it goes down
		p.Flap(t)
		send(t, p, tr.frames[half:], r.pps)
	} else {
		send(t, p, tr.frames, r.pps)
	}
	sent := time.Since(start)
	if r.interrupt {
		time.Sleep(liveSettle)
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Errorf("SIGINT: %v", err) // it exited: the wait below says how
		}
	} else if sent+liveSettle > duration {
		t.Fatalf("sending took %v: --duration %v leaves less than %v to take the last frames", sent, duration, liveSettle)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("%s: %v\nstderr:\n%s", cmd, err, stderr)
		}
	case <-time.After(duration + 30*time.Second):
		t.Fatalf("%s did not exit\nstderr:\n%s", cmd, stderr)
	}
	t.Logf("%s\nstderr:\n%s", attached, stderr)
	// On SIGINT as on --duration, the capture ends with the run's line,
	// whose counts are the reports'.
	sum, drops, _, _ := readReports(t, reports)
	if _, f := lastWords(t, stderr.String()); f[0] != "capture" || f[1] != u(sum.frames) || f[2] != u(sum.roce) || f[3] != u(drops) {
		t.Errorf("capture ends with %q; want %d frames, %d RoCE, %d dropped by kernel, as reported", f, sum.frames, sum.roce, drops)
	}
	if p.XDPAttached(t) {
		t.Errorf("rocescope exited and left an XDP program on %s", p.IfB)
	}
	return reports, attached
}

// send writes frames out of p.IfA at pps frames per second.
func send(t *testing.T, p *netnstest.Pair, frames [][]byte, pps int) {
	t.Helper()
	if _, err := p.SendPaced(frames, pps); err != nil {
		t.Fatal(err)
	}
}

// check compares the summed reports with the traffic: every frame the
// mode keeps is reported or counted as a kernel drop, none is malformed or
// cut, and when none was dropped, the RoCE frames, opcodes and flows are
// exactly those sent. It returns the kernel drops.
func (tr *liveTraffic) check(t *testing.T, reports string, all bool) (drops uint64) {
	t.Helper()
	got, drops, malformed, truncated := readReports(t, reports)
	want := tr.filtered
	if all {
		want = tr.all
	}
	if malformed != 0 || truncated != 0 {
		t.Errorf("malformed_packets = %d and truncated_packets = %d, want 0 and 0", malformed, truncated)
	}
	maxNoise := uint64(0)
	if all {
		maxNoise = liveMaxNoise
	}
	if n := got.frames + drops; n < want.frames || n > want.frames+maxNoise {
		t.Errorf("packets + kernel_drops = %d + %d, want the %d frames sent that the mode keeps, plus up to %d the kernels sent themselves", got.frames, drops, want.frames, maxNoise)
	}
	if drops > 0 {
		return drops
	}
	if got.roce != want.roce {
		t.Errorf("roce_packets = %d, want %d", got.roce, want.roce)
	}
	noise := got.other - want.other // wraps if too few: caught below
	t.Logf("non-RoCE frames: %d reported, %d sent that the mode keeps: %d from the namespaces' kernels", got.other, want.other, noise)
	if got.other < want.other || noise > maxNoise {
		t.Errorf("other_packets = %d, want %d sent, plus up to %d the kernels sent themselves", got.other, want.other, maxNoise)
	}
	if noise == 0 && got.bytes != want.bytes {
		t.Errorf("bytes = %d, want %d", got.bytes, want.bytes)
	}
	if !maps.Equal(got.opcodes, want.opcodes) {
		t.Errorf("opcodes = %v, want %v", got.opcodes, want.opcodes)
	}
	if len(got.flows) != len(want.flows) {
		t.Errorf("%d distinct flows reported, want %d", len(got.flows), len(want.flows))
	}
	for f, n := range want.flows {
		if got.flows[f] != n {
			t.Errorf("flow %s -> %s QP %d: %d packets, want %d", f.src, f.dst, f.dqp, got.flows[f], n)
		}
	}
	for f := range got.flows {
		if _, ok := want.flows[f]; !ok {
			t.Errorf("flow %s -> %s QP %d reported, but not sent", f.src, f.dst, f.dqp)
		}
	}
	return 0
}

// captureChecked runs r on a fresh pair at each of liveRates until a run
// has no kernel drops, checks every run's reports, and returns the attach
// line of the last one.
func captureChecked(t *testing.T, r liveRun, tr *liveTraffic) (attached string) {
	t.Helper()
	p := netnstest.NewWith(t, &netnstest.Config{Queues: r.queues, MTU: liveMTU})
	for i, pps := range liveRates {
		r.pps = pps
		var reports string
		reports, attached = runCapture(t, p, r, tr)
		drops := tr.check(t, reports, r.all)
		switch {
		case drops == 0:
			return attached
		case i+1 < len(liveRates):
			t.Logf("%d kernel drops at %d frames/s: again at %d frames/s", drops, pps, liveRates[i+1])
		default:
			t.Errorf("kernel_drops = %d at %d frames/s, want 0", drops, pps)
		}
	}
	return attached
}

// TestCaptureLive captures the same trace in every mode, with and without
// --all, and checks the reports against it. Runs stop by SIGINT, but for
// one that sends a part of the trace and stops by --duration.
func TestCaptureLive(t *testing.T) {
	netnstest.Skip(t)
	bin, err := buildRocescope(t, "")
	if err != nil {
		t.Fatal(err)
	}
	tr := makeTraffic(t)
	for _, r := range []liveRun{
		{mode: "afxdp", all: true, interrupt: true},
		{mode: "afxdp", interrupt: true},
		{mode: "afpacket", all: true, interrupt: true},
		{mode: "afpacket", interrupt: true},
		{mode: "auto", all: true, interrupt: true},
		{mode: "afxdp", all: true, interrupt: true, queues: 2},
		{mode: "afxdp", all: true},
		{mode: "afxdp", all: true, interrupt: true, flap: true},
		{mode: "afpacket", all: true, interrupt: true, flap: true},
	} {
		r.bin = bin
		name, sent := r.mode, tr
		if r.all {
			name += "/all"
		}
		if r.queues > 1 {
			name += fmt.Sprintf("/%dqueues", r.queues)
		}
		if !r.interrupt {
			name += "/duration"
		}
		if r.flap {
			name += "/flap"
		}
		if !r.interrupt || r.flap {
			sent = newTraffic(t, tr.frames[:len(tr.frames)/6])
		}
		t.Run(name, func(t *testing.T) {
			attached := captureChecked(t, r, sent)
			if r.mode == "auto" && !strings.Contains(attached, "AF_XDP") {
				t.Errorf("--mode auto attached with %q, want AF_XDP", attached)
			}
			// The sender's flows hash to every TX queue, and a veth hands
			// a frame to the peer's RX queue of the same number.
			if q := fmt.Sprintf("%d queues", r.queues); r.queues > 1 && !strings.Contains(attached, q) {
				t.Errorf("attached with %q, want %s", attached, q)
			}
		})
	}
	t.Run("pcap", func(t *testing.T) {
		bin, err := buildRocescope(t, "pcap")
		if err != nil {
			t.Skipf("no libpcap build (libpcap-dev missing?): %v", err)
		}
		for _, all := range []bool{true, false} {
			captureChecked(t, liveRun{bin: bin, mode: "pcap", all: all, interrupt: true}, tr)
		}
		captureChecked(t, liveRun{bin: bin, mode: "pcap", all: true, interrupt: true, flap: true},
			newTraffic(t, tr.frames[:len(tr.frames)/6]))
	})
}

// runRocescope runs the command line and returns its exit status and
// standard error.
func runRocescope(t *testing.T, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String()
	}
	t.Fatalf("%s: %v", cmd, err)
	return 0, ""
}

// TestCaptureLiveErrors checks the errors of capture: mistakes in the
// command line (exit status 2), and in every mode a missing interface and
// a user without privileges (exit status 1, saying what is wrong). A failed
// capture leaves no XDP program behind.
func TestCaptureLiveErrors(t *testing.T) {
	netnstest.Skip(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skipf("live test: needs setpriv: %v", err)
	}
	bin, err := buildRocescope(t, "")
	if err != nil {
		t.Fatal(err)
	}
	p := netnstest.NewWith(t, &netnstest.Config{MTU: liveMTU})
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"capture"}, 2, "-i IFACE is required"},
		{[]string{"capture", "-i", p.IfB, "eth9"}, 2, `filter "eth9": syntax error: at word 1: "eth9": want host, net, port or portrange before it`},
		{[]string{"capture", "-i", p.IfB, "--mode", "xdp"}, 2, `--mode "xdp": want auto, afxdp, afpacket or pcap`},
		{[]string{"capture", "-i", p.IfB, "--queues", "3-1"}, 2, `--queues "3-1"`},
		{[]string{"capture", "-i", p.IfB, "--mode", "afpacket", "--queues", "0"}, 2, "does not apply to --mode afpacket"},
		{[]string{"capture", "-i", p.IfB, "--mode", "pcap", "--queues", "0"}, 2, "does not apply to --mode pcap"},
		{[]string{"capture", "-i", p.IfB, "--duration", "-1s"}, 2, "--duration -1s"},
		{[]string{"capture", "-i", p.IfB, "--mode", "pcap"}, 1, "built without libpcap"},
	} {
		code, stderr := runRocescope(t, "ip", append([]string{"netns", "exec", p.NSB, bin}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("rocescope %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, stderr, c.code, c.msg)
		}
	}
	modes := []struct{ bin, mode string }{{bin, "afxdp"}, {bin, "afpacket"}, {bin, "auto"}}
	if pcapBin, err := buildRocescope(t, "pcap"); err == nil {
		modes = append(modes, struct{ bin, mode string }{pcapBin, "pcap"})
	} else {
		t.Logf("mode pcap not checked: no libpcap build (libpcap-dev missing?): %v", err)
	}
	for _, m := range modes {
		t.Run(m.mode, func(t *testing.T) {
			code, stderr := runRocescope(t, "ip", "netns", "exec", p.NSB, m.bin, "capture", "-i", liveNoIface, "--mode", m.mode)
			if code != 1 || !strings.Contains(stderr, liveNoIface) {
				t.Errorf("capture -i %s: exit %d, stderr %q; want 1 and the interface named", liveNoIface, code, stderr)
			}
			code, stderr = runRocescope(t, "ip", "netns", "exec", p.NSB,
				"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
				m.bin, "capture", "-i", p.IfB, "--mode", m.mode, "--duration", "1s")
			if code != 1 || !strings.Contains(stderr, "root") {
				t.Errorf("capture as nobody: exit %d, stderr %q; want 1 and a message that it needs root", code, stderr)
			}
			t.Logf("as nobody: %s", stderr)
			if p.XDPAttached(t) {
				t.Errorf("a failed capture left an XDP program on %s", p.IfB)
			}
		})
	}
}

// TestCaptureHostTrafficLive captures in the default AF_XDP mode on an
// interface whose host receives RoCEv2 itself: 500 UDP datagrams to port
// 4791 of its address from a UDP socket in the other namespace, among 300
// mirrored RoCE frames addressed to another host. The host's UDP listener
// must receive all 500, and the reports must count all 800 RoCE frames:
// the mirrored ones through AF_XDP, the host's through AF_PACKET.
func TestCaptureHostTrafficLive(t *testing.T) {
	netnstest.Skip(t)
	const datagrams, mirrored = 500, 300
	bin, err := buildRocescope(t, "")
	if err != nil {
		t.Fatal(err)
	}
	p := netnstest.New(t)
	var conn *net.UDPConn
	if err := p.Do(p.NSB, func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.IPv4B.Addr().AsSlice(), Port: 4791})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reports := filepath.Join(t.TempDir(), "reports.jsonl")
	cmd := exec.Command("ip", "netns", "exec", p.NSB, bin, "capture", "-i", p.IfB, "--mode", "afxdp",
		"--format", "jsonl", "--exact", "--workers", "1", "-o", reports)
	attached, stderr := startCapture(t, cmd, p.IfB)
	t.Log(attached)
	if !strings.Contains(attached, "frames left to this host copied by AF_PACKET") {
		t.Errorf("attach line %q does not say how the host's frames are captured", attached)
	}
	received := make(chan int, 1)
	go func() {
		buf, n := make([]byte, 2048), 0
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		for ; n < datagrams; n++ {
			if _, err := conn.Read(buf); err != nil {
				break
			}
		}
		received <- n
	}()
	if err := p.SendUDP(datagrams, netnstest.RoCEDatagram); err != nil {
		t.Fatal(err)
	}
	send(t, p, netnstest.Traffic(mirrored, 0, 1), 10000)
	if n := <-received; n != datagrams {
		t.Errorf("the host's UDP listener received %d of %d datagrams", n, datagrams)
	}
	time.Sleep(liveSettle)
	stopCapture(t, cmd, stderr)
	got, drops, malformed, truncated := readReports(t, reports)
	if got.roce != datagrams+mirrored || drops != 0 || malformed != 0 || truncated != 0 {
		t.Errorf("reports: %d RoCE frames, %d kernel drops, %d malformed, %d truncated; want %d, 0, 0, 0",
			got.roce, drops, malformed, truncated, datagrams+mirrored)
	}
}

// startCapture starts cmd, a rocescope capture on iface, and waits for its
// attach line, which it returns with the collector of its standard error.
func startCapture(t *testing.T, cmd *exec.Cmd, iface string) (string, *stderrLines) {
	t.Helper()
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &stderrLines{
		match: regexp.MustCompile(`^rocescope capture: .* on ` + regexp.QuoteMeta(iface) + `$`),
		found: make(chan string, 1),
		done:  make(chan struct{}),
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd, err)
	}
	go stderr.read(pipe)
	t.Cleanup(func() {
		cmd.Process.Kill() // no-op error once it has exited
		<-stderr.done
	})
	select {
	case line := <-stderr.found:
		return line, stderr
	case <-stderr.done:
		t.Fatalf("%s exited before attaching\nstderr:\n%s", cmd, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not attach within 30s\nstderr:\n%s", cmd, stderr)
	}
	return "", nil
}

// stopCapture interrupts cmd and waits for it to exit with status 0.
func stopCapture(t *testing.T, cmd *exec.Cmd, stderr *stderrLines) {
	t.Helper()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("SIGINT: %v", err)
	}
	<-stderr.done
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", cmd, err, stderr)
	}
}

// TestCaptureFilterLive captures the trace with a capture filter given as
// trailing arguments, in AF_PACKET mode (the kernel runs it: the frames it
// removes are not counted) and in AF_XDP mode (user space: counted in
// filtered), and checks the frames analyzed against tcpdump -r on a pcap
// of the same frames, among those the mode captures (RoCE and PFC).
func TestCaptureFilterLive(t *testing.T) {
	netnstest.Skip(t)
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Skipf("tcpdump not installed: %v", err)
	}
	bin, err := buildRocescope(t, "")
	if err != nil {
		t.Fatal(err)
	}
	tr := makeTraffic(t)
	tr.frames = tr.frames[:len(tr.frames)/4]
	const expr = "ip and udp and not src net 10.0.0.0/29"
	keep := tcpdumpKeeps(t, tr.frames, expr)
	// The kernel's filter sees a frame without the outer VLAN tag, which
	// the receive path takes out before packet sockets see it.
	untagged := make([][]byte, len(tr.frames))
	for i, f := range tr.frames {
		untagged[i] = f
		if len(f) >= 18 && (f[12] == 0x81 && f[13] == 0x00 || f[12] == 0x88 && f[13] == 0xa8) {
			untagged[i] = append(append([]byte(nil), f[:12]...), f[16:]...)
		}
	}
	keepKernel := tcpdumpKeeps(t, untagged, expr)
	var p decode.Packet
	// Of the frames the mode captures, those the expression keeps, on the
	// frame's bytes (user space) and in the kernel's view.
	var captured, want, wantKernel uint64
	for i, f := range tr.frames {
		if err := p.Decode(f, decode.LinkEthernet); err != nil || !(p.IsRoCE() || p.Kind == decode.KindPFC || p.Kind == decode.KindPause) {
			continue
		}
		captured++
		if keep[i] {
			want++
		}
		if keepKernel[i] {
			wantKernel++
		}
	}
	t.Logf("%d frames sent, %d RoCE or PFC, %d of them kept by %q (%d in the kernel's view)", len(tr.frames), captured, want, expr, wantKernel)
	for _, mode := range []string{"afpacket", "afxdp"} {
		t.Run(mode, func(t *testing.T) {
			p := netnstest.NewWith(t, &netnstest.Config{MTU: liveMTU})
			reports := filepath.Join(t.TempDir(), "reports.jsonl")
			cmd := exec.Command("ip", "netns", "exec", p.NSB, bin, "capture", "-i", p.IfB, "--mode", mode,
				"--format", "jsonl", "--exact", "--workers", "2", "-o", reports, "ip", "and", "udp", "and", "not", "src", "net", "10.0.0.0/29")
			_, stderr := startCapture(t, cmd, p.IfB)
			send(t, p, tr.frames, 10000)
			time.Sleep(liveSettle)
			stopCapture(t, cmd, stderr)
			where := map[string]string{"afpacket": "runs in the kernel", "afxdp": "runs in user space"}[mode]
			if !strings.Contains(stderr.String(), "rocescope capture: filter '"+expr+"' "+where) {
				t.Errorf("stderr does not say the filter %s:\n%s", where, stderr)
			}
			data, err := os.ReadFile(reports)
			if err != nil {
				t.Fatal(err)
			}
			var packets, analyzed, filtered, drops uint64
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var r struct {
					Packets, RoCE, Other, Malformed, Truncated, Filtered, Drops uint64
				}
				if err := json.Unmarshal([]byte(line), &struct {
					P *uint64 `json:"packets"`
					R *uint64 `json:"roce_packets"`
					O *uint64 `json:"other_packets"`
					M *uint64 `json:"malformed_packets"`
					T *uint64 `json:"truncated_packets"`
					F *uint64 `json:"filtered"`
					D *uint64 `json:"kernel_drops"`
				}{&r.Packets, &r.RoCE, &r.Other, &r.Malformed, &r.Truncated, &r.Filtered, &r.Drops}); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				if r.Packets != r.RoCE+r.Other+r.Malformed+r.Truncated+r.Filtered {
					t.Errorf("window does not conserve its frames: %s", line)
				}
				packets += r.Packets
				analyzed += r.RoCE + r.Other + r.Malformed + r.Truncated
				filtered += r.Filtered
				drops += r.Drops
			}
			t.Logf("%s: %d packets, %d analyzed, %d filtered, %d kernel drops", mode, packets, analyzed, filtered, drops)
			wantPackets, wantAnalyzed, wantFiltered := wantKernel, wantKernel, uint64(0)
			if mode == "afxdp" {
				wantPackets, wantAnalyzed, wantFiltered = captured, want, captured-want
			}
			if drops != 0 {
				t.Skipf("%d kernel drops on a loaded machine: counts not comparable", drops)
			}
			if analyzed != wantAnalyzed || packets != wantPackets || filtered != wantFiltered {
				t.Errorf("%s: %d packets, %d analyzed, %d filtered; want %d, %d (tcpdump), %d", mode, packets, analyzed, filtered, wantPackets, wantAnalyzed, wantFiltered)
			}
		})
	}
}

// tcpdumpKeeps writes frames to a pcap and returns, per frame, whether
// tcpdump -r matches it with expr.
func tcpdumpKeeps(t *testing.T, frames [][]byte, expr string) []bool {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sent.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := file.NewWriter(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, fr := range frames { // frame i at second i+1: tcpdump -tt prints which
		if err := w.WriteFrame(int64(i+1)*1e9, fr, len(fr)); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tcpdump", "-tt", "-nqr", path, expr).Output()
	if err != nil {
		t.Fatalf("tcpdump -r %s %q: %v", path, expr, err)
	}
	keep := make([]bool, len(frames))
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		sec, _, _ := strings.Cut(line, ".")
		n, err := strconv.Atoi(sec)
		if err != nil || n < 1 || n > len(frames) {
			t.Fatalf("tcpdump -tt: line %q", line)
		}
		keep[n-1] = true
	}
	return keep
}
