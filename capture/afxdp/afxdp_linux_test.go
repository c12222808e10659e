package afxdp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/internal/netnstest"
	"github.com/rocescope/rocescope/decode"
)

func TestOpenNoInterface(t *testing.T) {
	_, err := Open("rs-no-such-if0", nil)
	if err == nil || !strings.Contains(err.Error(), `interface "rs-no-such-if0" does not exist`) {
		t.Fatalf("Open(missing interface) = %v, want an error saying it does not exist", err)
	}
}

func TestDescribe(t *testing.T) {
	one := &Group{sockets: []*Socket{{}}, mode: "generic"}
	if got, want := one.Describe(), "AF_XDP, 1 queue, generic mode, copy"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	two := &Group{sockets: []*Socket{{}, {}}, mode: "driver", zeroCopy: true, notes: []string{"a", "b"}}
	if got, want := two.Describe(), "AF_XDP, 2 queues, driver mode, zero-copy (a; b)"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

// roceFrames reports for each frame whether rocescope's decoder, an
// implementation independent of the XDP program, takes it for RoCE.
func roceFrames(t *testing.T, frames [][]byte) []bool {
	t.Helper()
	is := make([]bool, len(frames))
	var p decode.Packet
	for i, f := range frames {
		if err := p.Decode(f, decode.LinkEthernet); err != nil {
			t.Fatalf("frame %d: decode: %v", i, err)
		}
		is[i] = p.IsRoCE()
	}
	return is
}

// reader drains a socket in its own goroutine into a multiset of frame
// bytes until stop is closed and the socket stays idle for idle batches.
type reader struct {
	got      map[string]int
	frames   atomic.Uint64
	badFrame atomic.Value // string describing the first bad Frame field
	err      error
	done     chan struct{}
}

func startReader(s *Socket, queue uint16, stop <-chan struct{}, start int64) *reader {
	r := &reader{got: make(map[string]int), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		b := capture.NewBatch(256)
		idle := 0
		for {
			if err := s.Next(b); err != nil {
				r.err = err
				return
			}
			if len(b.Frames) == 0 {
				select {
				case <-stop:
					if idle++; idle >= 3 {
						return
					}
				default:
				}
				continue
			}
			idle = 0
			now := time.Now().UnixNano()
			for _, f := range b.Frames {
				switch {
				case f.Time < start || f.Time > now:
					r.badFrame.CompareAndSwap(nil, "Time outside the capture")
				case f.Link != decode.LinkEthernet:
					r.badFrame.CompareAndSwap(nil, "Link not Ethernet")
				case f.Port != queue:
					r.badFrame.CompareAndSwap(nil, "Port not the queue")
				case int(f.OrigLen) != len(f.Data):
					r.badFrame.CompareAndSwap(nil, "OrigLen != len(Data)")
				case f.Time != b.Frames[0].Time:
					r.badFrame.CompareAndSwap(nil, "Time differs within a batch")
				}
				r.got[string(f.Data)]++
			}
			r.frames.Add(uint64(len(b.Frames)))
		}
	}()
	return r
}

// xdpAttached reports whether ip shows an XDP program on the interface.
func xdpAttached(t *testing.T, ns, iface string) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-d", "link", "show", "dev", iface).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s -d link show dev %s: %v: %s", ns, iface, err, out)
	}
	return strings.Contains(string(out), "xdp")
}

// TestCaptureLive sends 100000 RoCE and 20000 other frames from the peer
// and checks that the socket got exactly the RoCE frames, byte for byte:
// in bursts (received + dropped must be all RoCE frames) and paced (no
// drops at all), in generic and in driver mode.
func TestCaptureLive(t *testing.T) {
	netnstest.Skip(t)
	const nRoCE, nOther = 100000, 20000
	frames := netnstest.Traffic(nRoCE, nOther, 7)
	isRoCE := roceFrames(t, frames)
	want := make(map[string]int, nRoCE)
	for i, f := range frames {
		if isRoCE[i] {
			want[string(f)]++
		}
	}
	if n := len(want); n != nRoCE {
		t.Fatalf("the decoder takes %d distinct frames for RoCE, want %d", n, nRoCE)
	}
	for _, mode := range []string{"generic", "driver"} {
		for _, paced := range []bool{false, true} {
			name := mode + "/burst"
			if paced {
				name = mode + "/paced"
			}
			t.Run(name, func(t *testing.T) {
				captureLive(t, mode, paced, frames, isRoCE, want)
			})
		}
	}
}

func captureLive(t *testing.T, mode string, paced bool, frames [][]byte, isRoCE []bool, want map[string]int) {
	p := netnstest.New(t)
	var g *Group
	err := p.Do(p.NSB, func() (err error) {
		g, err = Open(p.IfB, &Config{Queues: []int{0}, Mode: mode})
		return err
	})
	if err != nil {
		t.Fatalf("Open(%s, mode %s): %v", p.IfB, mode, err)
	}
	t.Cleanup(func() { g.Close() })
	t.Logf("%s", g.Describe())
	if !xdpAttached(t, p.NSB, p.IfB) {
		t.Fatalf("ip shows no XDP program on %s after Open", p.IfB)
	}
	s := g.Sockets()[0]

	stop := make(chan struct{})
	start := time.Now()
	r := startReader(s, 0, stop, start.UnixNano())
	sentRoCE := 0
	const chunk = 1000
	for lo := 0; lo < len(frames); lo += chunk {
		hi := min(lo+chunk, len(frames))
		if n, err := p.Send(frames[lo:hi]); err != nil {
			close(stop)
			<-r.done
			t.Fatalf("sent %d of frames %d..%d: %v", n, lo, hi, err)
		}
		for _, roce := range isRoCE[lo:hi] {
			if roce {
				sentRoCE++
			}
		}
		// Paced: wait until the socket has taken every RoCE frame sent.
		for paced && r.frames.Load() < uint64(sentRoCE) && time.Since(start) < time.Minute {
			time.Sleep(100 * time.Microsecond)
		}
	}
	sendDone := time.Since(start)
	close(stop)
	<-r.done
	elapsed := time.Since(start)
	if r.err != nil {
		t.Fatalf("Next: %v", r.err)
	}
	if bad := r.badFrame.Load(); bad != nil {
		t.Errorf("bad frame: %s", bad)
	}

	st := s.Stats()
	x, err := s.XDPStats()
	if err != nil {
		t.Fatalf("XDPStats: %v", err)
	}
	c, err := g.Counters()
	if err != nil {
		t.Fatalf("Counters: %v", err)
	}
	nRoCE := len(want)
	t.Logf("received %d, dropped %d in %v (sending took %v): %.0f frames/s; XDP stats %+v; counters %+v",
		st.Received, st.Dropped, elapsed, sendDone, float64(st.Received)/elapsed.Seconds(), x, c)

	if st.Received != r.frames.Load() {
		t.Errorf("Stats().Received = %d, reader got %d", st.Received, r.frames.Load())
	}
	if st.Received+st.Dropped != uint64(nRoCE) {
		t.Errorf("received %d + dropped %d = %d, want %d RoCE frames", st.Received, st.Dropped, st.Received+st.Dropped, nRoCE)
	}
	if paced && st.Dropped != 0 {
		t.Errorf("paced sending: dropped %d, want 0", st.Dropped)
	}
	if c.Redirected != uint64(nRoCE) || c.NoSocket != 0 {
		t.Errorf("counters %+v: want %d redirected and none without socket", c, nRoCE)
	}
	if c.Passed < uint64(len(frames)-nRoCE) {
		t.Errorf("counters %+v: want at least %d passed", c, len(frames)-nRoCE)
	}
	// Every frame delivered is one of the RoCE frames sent, at most as
	// often as it was sent; when nothing was dropped they are all there.
	extra, missing := 0, 0
	for f, n := range r.got {
		if d := n - want[f]; d > 0 {
			extra += d
		}
	}
	for f, n := range want {
		if d := n - r.got[f]; d > 0 {
			missing += d
		}
	}
	if extra != 0 {
		t.Errorf("%d frames delivered that were not RoCE frames sent", extra)
	}
	if uint64(missing) != st.Dropped {
		t.Errorf("%d RoCE frames missing, %d dropped", missing, st.Dropped)
	}

	if err := g.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if xdpAttached(t, p.NSB, p.IfB) {
		t.Errorf("ip still shows an XDP program on %s after Close", p.IfB)
	}
	if err := s.Next(capture.NewBatch(1)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Next after Close = %v, want os.ErrClosed", err)
	}
}

// TestCloseUnblocksNextLive closes a socket while Next waits in poll on an
// idle queue: Next must return os.ErrClosed.
func TestCloseUnblocksNextLive(t *testing.T) {
	p := netnstest.New(t)
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, &Config{Queues: []int{0}}); return err }); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	netnstest.CheckCloseUnblocks(t, g.Sources()[0], g.Sources()[0].Close)
	if err := g.Close(); err != nil {
		t.Fatalf("Group.Close after Socket.Close: %v", err)
	}
}

// TestOpenCleansUpLive makes Open fail after the program is attached: on
// queue 1 of a veth that has one queue, and with zero-copy required where
// veth cannot do it. The error must say why, and no program may be left.
func TestOpenCleansUpLive(t *testing.T) {
	p := netnstest.New(t)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Queues: []int{0, 1}}, "queue 1: copy-mode socket: bind: invalid argument"},
		{Config{Queues: []int{0}, ZeroCopy: "on"}, "queue 0: zero-copy socket: bind: operation not supported"},
	} {
		err := p.Do(p.NSB, func() error {
			g, err := Open(p.IfB, &c.cfg)
			if err == nil {
				g.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v) = %v, want an error containing %q", c.cfg, err, c.want)
		}
		if xdpAttached(t, p.NSB, p.IfB) {
			t.Fatalf("ip shows an XDP program on %s after the failed Open(%+v)", p.IfB, c.cfg)
		}
	}
}

// TestOpenUnprivilegedLive runs Open in a child process that is root
// without capabilities, inside the test namespace: the error must say what
// is missing.
func TestOpenUnprivilegedLive(t *testing.T) {
	if iface := os.Getenv("ROCESCOPE_AFXDP_CHILD_IFACE"); iface != "" {
		_, err := Open(iface, nil)
		fmt.Printf("Open: %v\n", err)
		return
	}
	p := netnstest.New(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skipf("setpriv (util-linux) is needed to drop capabilities: %v", err)
	}
	cmd := exec.Command("ip", "netns", "exec", p.NSB,
		"setpriv", "--bounding-set=-all", "--inh-caps=-all", "--securebits=+noroot,+noroot_locked", "--no-new-privs",
		os.Args[0], "-test.run=^TestOpenUnprivilegedLive$", "-test.v")
	cmd.Env = append(os.Environ(), "ROCESCOPE_AFXDP_CHILD_IFACE="+p.IfB)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "needs root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF") ||
		!strings.Contains(string(out), "operation not permitted") {
		t.Errorf("child's Open error does not say what is missing:\n%s", out)
	}
	t.Logf("child: %s", out)
	if xdpAttached(t, p.NSB, p.IfB) {
		t.Errorf("ip shows an XDP program on %s after the child's Open", p.IfB)
	}
}

// TestFrameSizeLimitLive checks the documented size limit: with 4096-byte
// UMEM frames, a 3840-byte frame is delivered whole and a 3841-byte one is
// dropped and counted.
func TestFrameSizeLimitLive(t *testing.T) {
	p := netnstest.New(t)
	for _, end := range []struct{ ns, ifname string }{{p.NSA, p.IfA}, {p.NSB, p.IfB}} {
		if out, err := exec.Command("ip", "-n", end.ns, "link", "set", "dev", end.ifname, "mtu", "9000").CombinedOutput(); err != nil {
			t.Fatalf("set MTU of %s: %v: %s", end.ifname, err, out)
		}
	}
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, &Config{Queues: []int{0}}); return err }); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	fits := append(append([]byte(nil), roceV4...), make([]byte, 3840-len(roceV4))...)
	tooLong := append(append([]byte(nil), fits...), 0xaa)
	if n, err := p.Send([][]byte{tooLong, fits}); err != nil || n != 2 {
		t.Fatalf("Send = %d, %v", n, err)
	}
	s := g.Sockets()[0]
	b := capture.NewBatch(4)
	for range 20 {
		if err := s.Next(b); err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(b.Frames) > 0 {
			break
		}
	}
	if len(b.Frames) != 1 || !bytes.Equal(b.Frames[0].Data, fits) {
		t.Fatalf("got %d frames, want the 3840-byte frame alone", len(b.Frames))
	}
	if st := s.Stats(); st.Dropped != 1 {
		x, _ := s.XDPStats()
		t.Errorf("Stats = %+v (%+v), want the 3841-byte frame dropped", st, x)
	}
}
