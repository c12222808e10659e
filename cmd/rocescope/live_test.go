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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
)

// The live tests run the rocescope binary the way an operator does: built
// with go build, started with "ip netns exec" in one namespace of a veth
// pair, fed from a packet socket in the other namespace, stopped by SIGINT or
// --duration, and judged by the JSON lines it wrote. The traffic is a
// capture/synth trace (RC connections with WRITE, SEND and READ, ACKs,
// NAKs, CNPs, PFC pause frames and ARP/UDP/TCP background); what the reports
// must say is computed by decoding the same frames with decode.Packet.
//
// capture/internal/netnstest cannot be used here: Go allows an internal
// package only to importers under capture/.

const (
	liveRoCE = 100000 // RoCE frames each run sends
	// liveOtherShare makes about 20000 non-RoCE frames next to liveRoCE.
	liveOtherShare = 1.0 / 6
	// liveSettle is how long a run waits after the last frame was sent
	// before it interrupts the capture: the frames are in the kernel's
	// rings by then, and the capture takes them within milliseconds.
	liveSettle = 2 * time.Second
	// liveMaxNoise bounds the frames the namespaces' own kernels may add to
	// a capture of every frame (the veth ends have no addresses and IPv6 is
	// off, so none are expected).
	liveMaxNoise = 50
	// liveMTU is the veth pair's MTU.
	liveMTU = "2000"
	// liveNoIface names an interface that does not exist.
	liveNoIface = "rsnosuchif0"
)

// liveRates are the sending rates in frames per second. A run that counts
// kernel drops (every mode takes the first rate without drops on an idle
// machine, but not always when other work competes for the two cores) is
// repeated at the next rate. Each run checks that every frame is reported
// or counted as dropped.
var liveRates = []int{30000, 10000, 10000}

// liveSkip skips t unless ROCESCOPE_LIVE=1 is set, the test runs as root
// and the tools are installed.
func liveSkip(t *testing.T, tools ...string) {
	t.Helper()
	if os.Getenv("ROCESCOPE_LIVE") != "1" {
		t.Skip("live test: needs network namespaces and root; set ROCESCOPE_LIVE=1 and run as root")
	}
	if os.Geteuid() != 0 {
		t.Skip("live test: ROCESCOPE_LIVE=1 but not running as root (euid != 0)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("live test: needs %s: %v", tool, err)
		}
	}
}

// buildRocescope builds the command in this directory with the given build
// tags into a directory everyone may read, so that it can also run as an
// unprivileged user. It returns the binary's path and the build's output
// on failure.
func buildRocescope(t *testing.T, tags string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatalf("chmod %s: %v", d, err)
		}
	}
	bin := filepath.Join(dir, "rocescope")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s .: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// vethPair is two network namespaces joined by a veth pair, ifA in nsA and
// ifB in nsB, both up, without addresses and with IPv6 off, so that their
// kernels send nothing on their own. The MTU fits synth's largest
// background frames (1460 bytes of TCP payload over IPv6 and a VLAN tag).
type vethPair struct {
	nsA, nsB, ifA, ifB string
}

// vethPairs counts the pairs this process made, so that names are unique.
var vethPairs atomic.Int32

// newVethPair makes a pair whose ends have the given number of queues (0
// means one) and registers the cleanup that deletes both namespaces, and
// with them the veth pair.
func newVethPair(t *testing.T, queues int) *vethPair {
	t.Helper()
	n, pid := vethPairs.Add(1), os.Getpid()
	p := &vethPair{
		nsA: fmt.Sprintf("rs%dca%d", pid, n), // "rs": CI looks for leftovers by it
		nsB: fmt.Sprintf("rs%dcb%d", pid, n),
		ifA: fmt.Sprintf("rs%dcva%d", pid, n),
		ifB: fmt.Sprintf("rs%dcvb%d", pid, n),
	}
	for _, ns := range []string{p.nsA, p.nsB} {
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "delete", ns).CombinedOutput(); err != nil {
				t.Errorf("delete namespace %s: %v: %s", ns, err, out)
			}
		})
		runIP(t, "netns", "add", ns)
		runIP(t, "netns", "exec", ns, "sysctl", "-q", "-w",
			"net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	q := strconv.Itoa(max(queues, 1))
	runIP(t, "link", "add", p.ifA, "netns", p.nsA, "numtxqueues", q, "numrxqueues", q,
		"type", "veth", "peer", "name", p.ifB, "netns", p.nsB, "numtxqueues", q, "numrxqueues", q)
	runIP(t, "-n", p.nsA, "link", "set", p.ifA, "mtu", liveMTU, "up")
	runIP(t, "-n", p.nsB, "link", "set", p.ifB, "mtu", liveMTU, "up")
	return p
}

// flap takes p.ifB down and up again, as a mirror port's link may flap,
// and waits until both ends carry frames again.
func (p *vethPair) flap(t *testing.T) {
	t.Helper()
	runIP(t, "-n", p.nsB, "link", "set", p.ifB, "down")
	runIP(t, "-n", p.nsB, "link", "set", p.ifB, "up")
	deadline := time.Now().Add(10 * time.Second)
	for _, end := range [][2]string{{p.nsA, p.ifA}, {p.nsB, p.ifB}} {
		for {
			out, err := exec.Command("ip", "-n", end[0], "link", "show", "dev", end[1]).CombinedOutput()
			if err != nil {
				t.Fatalf("ip -n %s link show dev %s: %v: %s", end[0], end[1], err, out)
			}
			if strings.Contains(string(out), "LOWER_UP") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has no carrier 10s after the link came up: %s", end[1], out)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// xdpAttached reports whether ip shows an XDP program on p.ifB.
func (p *vethPair) xdpAttached(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", p.nsB, "-d", "link", "show", "dev", p.ifB).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s -d link show dev %s: %v: %s", p.nsB, p.ifB, err, out)
	}
	return strings.Contains(string(out), "xdp")
}

// runIP runs the ip command and fails t with its output on error.
func runIP(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

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

// capture runs rocescope capture on p.ifB in p.nsB while the traffic is
// sent from p.nsA, and returns the report file and the attach line.
func (p *vethPair) capture(t *testing.T, r liveRun, tr *liveTraffic) (reports, attached string) {
	t.Helper()
	reports = filepath.Join(t.TempDir(), "reports.jsonl")
	args := []string{"netns", "exec", p.nsB, r.bin, "capture", "-i", p.ifB, "--mode", r.mode,
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
		match: regexp.MustCompile(`^rocescope capture: .* on ` + regexp.QuoteMeta(p.ifB) + `$`),
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
		p.send(t, tr.frames[:half], r.pps)
		time.Sleep(liveSettle) // frames still in the veth are lost when it goes down
		p.flap(t)
		p.send(t, tr.frames[half:], r.pps)
	} else {
		p.send(t, tr.frames, r.pps)
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
	if p.xdpAttached(t) {
		t.Errorf("rocescope exited and left an XDP program on %s", p.ifB)
	}
	return reports, attached
}

// liveBurst is how many frames send writes back to back: after a stall it
// does not catch up, so no burst is longer.
const liveBurst = 64

// send writes frames out of p.ifA at pps frames per second, from a packet
// socket opened in p.nsA by a thread that never leaves it.
func (p *vethPair) send(t *testing.T, frames [][]byte, pps int) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		errc <- p.sendFrom(frames, pps)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// sendFrom moves the calling thread into p.nsA and writes frames out of
// p.ifA, in bursts of liveBurst frames at pps frames per second.
func (p *vethPair) sendFrom(frames [][]byte, pps int) error {
	path := "/run/netns/" + p.nsA
	ns, err := os.Open(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", path, err)
	}
	ifi, err := net.InterfaceByName(p.ifA)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", p.nsA, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: send only
	if err != nil {
		return fmt.Errorf("AF_PACKET socket in %s: %w", p.nsA, err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
		return fmt.Errorf("bind to %s: %w", p.ifA, err)
	}
	next := time.Now()
	for i, f := range frames {
		if i%liveBurst == 0 && i > 0 {
			next = next.Add(liveBurst * time.Second / time.Duration(pps))
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			} else {
				next = time.Now()
			}
		}
		for {
			_, err := unix.Write(fd, f)
			if err == nil {
				break
			}
			if err != unix.ENOBUFS && err != unix.EAGAIN {
				return fmt.Errorf("send frame %d (%d bytes) on %s: %w", i, len(f), p.ifA, err)
			}
			time.Sleep(100 * time.Microsecond) // the device is out of buffers: retry
		}
	}
	return nil
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
	p := newVethPair(t, r.queues)
	for i, pps := range liveRates {
		r.pps = pps
		var reports string
		reports, attached = p.capture(t, r, tr)
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
	liveSkip(t, "ip")
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
	liveSkip(t, "ip", "setpriv")
	bin, err := buildRocescope(t, "")
	if err != nil {
		t.Fatal(err)
	}
	p := newVethPair(t, 0)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"capture"}, 2, "-i IFACE is required"},
		{[]string{"capture", "-i", p.ifB, "eth9"}, 2, "capture takes no arguments"},
		{[]string{"capture", "-i", p.ifB, "--mode", "xdp"}, 2, `--mode "xdp": want auto, afxdp, afpacket or pcap`},
		{[]string{"capture", "-i", p.ifB, "--queues", "3-1"}, 2, `--queues "3-1"`},
		{[]string{"capture", "-i", p.ifB, "--mode", "afpacket", "--queues", "0"}, 2, "does not apply to --mode afpacket"},
		{[]string{"capture", "-i", p.ifB, "--mode", "pcap", "--queues", "0"}, 2, "does not apply to --mode pcap"},
		{[]string{"capture", "-i", p.ifB, "--duration", "-1s"}, 2, "--duration -1s"},
		{[]string{"capture", "-i", p.ifB, "--mode", "pcap"}, 1, "built without libpcap"},
	} {
		code, stderr := runRocescope(t, "ip", append([]string{"netns", "exec", p.nsB, bin}, c.args...)...)
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
			code, stderr := runRocescope(t, "ip", "netns", "exec", p.nsB, m.bin, "capture", "-i", liveNoIface, "--mode", m.mode)
			if code != 1 || !strings.Contains(stderr, liveNoIface) {
				t.Errorf("capture -i %s: exit %d, stderr %q; want 1 and the interface named", liveNoIface, code, stderr)
			}
			code, stderr = runRocescope(t, "ip", "netns", "exec", p.nsB,
				"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
				m.bin, "capture", "-i", p.ifB, "--mode", m.mode, "--duration", "1s")
			if code != 1 || !strings.Contains(stderr, "root") {
				t.Errorf("capture as nobody: exit %d, stderr %q; want 1 and a message that it needs root", code, stderr)
			}
			t.Logf("as nobody: %s", stderr)
			if p.xdpAttached(t) {
				t.Errorf("a failed capture left an XDP program on %s", p.ifB)
			}
		})
	}
}
