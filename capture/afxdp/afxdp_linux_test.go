package afxdp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/rocescope/rocescope/capture/afpacket"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/netnstest"
)

func TestOpenNoInterface(t *testing.T) {
	_, err := Open("rs-no-such-if0", nil)
	if !errors.Is(err, capture.ErrInterfaceNotFound) || err.Error() != "capture: interface rs-no-such-if0 not found" {
		t.Fatalf("Open(missing interface) = %v, want capture: interface rs-no-such-if0 not found", err)
	}
}

func TestDescribe(t *testing.T) {
	one := &Group{sockets: []*Socket{{}}, mode: "generic", snapLen: 512, passHost: true}
	if got, want := one.Describe(), "AF_XDP, 1 queue, generic mode, copy, frames cut to 512 bytes, per-frame kernel timestamps, takes frames addressed to other hosts (mirror traffic) and passes those addressed to this one to the kernel"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	two := &Group{sockets: []*Socket{{}, {}}, mode: "driver", zeroCopy: true, snapLen: 128, notes: []string{"a", "b"}}
	if got, want := two.Describe(), "AF_XDP, 2 queues, driver mode, zero-copy, frames cut to 128 bytes, per-frame kernel timestamps, takes frames addressed to this host too (a; b)"; got != want {
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

// frameKey is what the socket must deliver of frame: its first snapLen
// bytes and its length on the wire.
func frameKey(frame []byte, snapLen int) string {
	return fmt.Sprintf("%d:%s", len(frame), frame[:min(len(frame), snapLen)])
}

// reader drains a socket in its own goroutine into a multiset of frame
// keys (frameKey) until stop is closed and the socket stays idle for three
// batches.
type reader struct {
	got      map[string]int
	frames   atomic.Uint64
	badFrame atomic.Value // string describing the first bad Frame field
	err      error
	done     chan struct{}
}

// clockError is how far a frame's Time may be off, at most: the error of
// the offset between CLOCK_REALTIME and CLOCK_MONOTONIC that a socket
// measures (half the time between two clock_gettime calls), which
// matters here only for a frame read the moment it arrived.
const clockError = 1000 // ns

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
				case f.Time < start || f.Time > now+clockError:
					r.badFrame.CompareAndSwap(nil, fmt.Sprintf("Time %d outside the capture, %d to %d", f.Time, start, now))
				case f.Link != decode.LinkEthernet:
					r.badFrame.CompareAndSwap(nil, "Link not Ethernet")
				case f.Port != queue:
					r.badFrame.CompareAndSwap(nil, "Port not the queue")
				case len(f.Data) != min(int(f.OrigLen), DefaultSnapLen):
					r.badFrame.CompareAndSwap(nil, "len(Data) != min(OrigLen, snap length)")
				}
				r.got[fmt.Sprintf("%d:%s", f.OrigLen, f.Data)]++
			}
			r.frames.Add(uint64(len(b.Frames)))
		}
	}()
	return r
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
	want := wantFrames(frames, isRoCE)
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
				captureLive(t, mode, paced, 0, frames, isRoCE, want)
			})
		}
	}
}

// wantFrames returns the multiset of the keys (frameKey) of the frames the
// decoder takes for RoCE.
func wantFrames(frames [][]byte, isRoCE []bool) map[string]int {
	want := make(map[string]int, len(frames))
	for i, f := range frames {
		if isRoCE[i] {
			want[frameKey(f, DefaultSnapLen)]++
		}
	}
	return want
}

// TestJumboLive sends RoCE traffic with a path MTU of 4096 (frames of up to
// about 4.2 kB, longer than a 4096-byte UMEM frame holds) from the
// synthetic source over a veth with MTU 9000 (the veth refuses driver mode
// at that MTU, so the group runs in generic mode): every frame must be
// delivered, cut to the snap length, with its wire length in OrigLen.
func TestJumboLive(t *testing.T) {
	netnstest.Skip(t)
	src, err := synth.New(&synth.Config{Seed: 12, Packets: 40000, PMTU: 4096, Flows: 64, OtherShare: synth.Off, PFCShare: synth.Off})
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	long := 0
	if err := capture.Each(context.Background(), src, capture.NewBatch(256), func(b *capture.Batch) error {
		for _, f := range b.Frames {
			frames = append(frames, bytes.Clone(f.Data))
			if len(f.Data) > DefaultFrameSize-xdpHeadroom {
				long++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	isRoCE := roceFrames(t, frames)
	t.Logf("%d frames, %d longer than %d bytes", len(frames), long, DefaultFrameSize-xdpHeadroom)
	if long < len(frames)/4 {
		t.Fatalf("only %d of %d frames are longer than a UMEM frame holds: the test would prove little", long, len(frames))
	}
	captureLive(t, "auto", true, 9000, frames, isRoCE, wantFrames(frames, isRoCE))
}

// captureLive opens a group in mode on a fresh pair whose MTU is mtu (0:
// the default), sends frames, paced or in bursts, and checks that the
// socket delivered exactly the frames want lists (frameKey multiset).
func captureLive(t *testing.T, mode string, paced bool, mtu int, frames [][]byte, isRoCE []bool, want map[string]int) {
	p := netnstest.New(t)
	if mtu != 0 {
		p.SetMTU(t, mtu)
	}
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
	if !p.XDPAttached(t) {
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
	nRoCE := 0
	for _, n := range want {
		nRoCE += n
	}
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
	if n := s.NoMetadata(); n != 0 {
		t.Errorf("%d frames without metadata, want 0", n)
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
	if p.XDPAttached(t) {
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

// TestOpenCleansUpLive makes Open fail: on queue 1 of a veth that has one
// queue (before anything is loaded), and after the program is attached,
// with zero-copy required where veth cannot do it. The error must say why,
// and no program may be left.
func TestOpenCleansUpLive(t *testing.T) {
	p := netnstest.New(t)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Queues: []int{0, 1}}, "afxdp: queue 1 asked for, but interface " + p.IfB + " has 1 RX queue (0)"},
		{Config{Queues: []int{0}, ZeroCopy: "on"}, "afxdp: " + p.IfB + ": queue 0: zero-copy socket: bind: operation not supported"},
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
		if p.XDPAttached(t) {
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
	if want := "Open: afxdp: " + p.IfB + ": probe BPF helper bpf_xdp_adjust_meta: permission denied: capturing with AF_XDP needs root, or CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW\n"; !strings.Contains(string(out), want) {
		t.Errorf("child's Open error is not %q:\n%s", want, out)
	}
	t.Logf("child: %s", out)
	if p.XDPAttached(t) {
		t.Errorf("ip shows an XDP program on %s after the child's Open", p.IfB)
	}
}

// TestFrameLengthsLive sends RoCE frames of lengths around the snap length,
// the UMEM frame size and up to an MTU of 9216 on a veth with that MTU, a
// few milliseconds apart, in the default mode. Every frame must arrive cut
// to the snap length with its wire length in OrigLen, and with a Time of
// its own, taken between the start of its sending and the next frame's.
func TestFrameLengthsLive(t *testing.T) {
	p := netnstest.New(t)
	p.SetMTU(t, 9216)
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, &Config{Queues: []int{0}}); return err }); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	t.Logf("%s", g.Describe())
	lengths := []int{len(roceV4), DefaultSnapLen, DefaultSnapLen + 1, 3840, 3841, 4096, 4200, 9014, 9216 + 14}
	sentAt := make([]int64, len(lengths)+1)
	frames := make([][]byte, len(lengths))
	for i, n := range lengths {
		frames[i] = append(append([]byte(nil), roceV4...), make([]byte, n-len(roceV4))...)
		frames[i][len(frames[i])-1] = byte(i) // distinct
		sentAt[i] = time.Now().UnixNano()
		if k, err := p.Send(frames[i : i+1]); err != nil || k != 1 {
			t.Fatalf("Send(%d bytes) = %d, %v", n, k, err)
		}
		time.Sleep(3 * time.Millisecond)
	}
	sentAt[len(lengths)] = time.Now().UnixNano()
	s := g.Sockets()[0]
	b := capture.NewBatch(2 * len(frames)) // all in one batch: times must still differ
	var got []capture.Frame
	for try := 0; len(got) < len(frames) && try < 20; try++ {
		if err := s.Next(b); err != nil {
			t.Fatalf("Next: %v", err)
		}
		got = append(got, b.Frames...)
	}
	if len(got) != len(frames) {
		t.Fatalf("got %d frames, want %d; stats %+v", len(got), len(frames), s.Stats())
	}
	for i, f := range got {
		want := frames[i][:min(len(frames[i]), DefaultSnapLen)]
		if int(f.OrigLen) != lengths[i] || !bytes.Equal(f.Data, want) {
			t.Errorf("frame %d: OrigLen %d, %d bytes of data; want %d, the first %d bytes of the frame", i, f.OrigLen, len(f.Data), lengths[i], len(want))
		}
		if f.Time < sentAt[i] || f.Time > sentAt[i+1] {
			t.Errorf("frame %d: Time %d is not between its sending (%d) and the next one's (%d)", i, f.Time, sentAt[i], sentAt[i+1])
		}
	}
	if st := s.Stats(); st.Dropped != 0 || st.Received != uint64(len(frames)) {
		x, _ := s.XDPStats()
		t.Errorf("Stats = %+v (%+v), want %d received and none dropped", st, x, len(frames))
	}
}

// TestIPv6ExtensionsLive sends the program cases of IPv6 frames (extension
// headers among them) through the veth pair: the socket must deliver
// exactly those the program redirects, and the kernel the others.
func TestIPv6ExtensionsLive(t *testing.T) {
	p := netnstest.New(t)
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, &Config{Queues: []int{0}}); return err }); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	var frames [][]byte
	want := make(map[string]int)
	for _, c := range classifyCases {
		if !strings.Contains(c.name, "IPv6") {
			continue
		}
		frames = append(frames, c.frame)
		if c.want == counterNoSocket {
			want[frameKey(c.frame, DefaultSnapLen)]++
		}
	}
	if len(want) < 10 || len(frames)-len(want) < 10 {
		t.Fatalf("%d IPv6 cases of which %d redirected: too few of either to prove much", len(frames), len(want))
	}
	if n, err := p.Send(frames); err != nil || n != len(frames) {
		t.Fatalf("Send = %d, %v", n, err)
	}
	got := make(map[string]int)
	b := capture.NewBatch(64)
	// Read until the redirected frames are in and one more poll brought
	// nothing (or two seconds passed).
	for n, try := 0, 0; try < 20; try++ {
		if err := g.Sockets()[0].Next(b); err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(b.Frames) == 0 && n >= len(want) {
			break
		}
		n += len(b.Frames)
		for _, f := range b.Frames {
			got[fmt.Sprintf("%d:%s", f.OrigLen, f.Data)]++
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("redirected frame received %d times, want %d: % x", got[k], n, k)
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			t.Errorf("frame received %d times, not redirected by the program: % x", n, k)
		}
	}
}

// TestInterfaceGoneLive deletes the interface while Next waits: Next must
// say so within a second, and Close must still succeed.
func TestInterfaceGoneLive(t *testing.T) {
	p := netnstest.New(t)
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, &Config{Queues: []int{0}}); return err }); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	took := netnstest.CheckInterfaceGone(t, g.Sources()[0], p.IfB, func() { p.DeleteLink(t) })
	t.Logf("Next noticed in %v", took)
	if err := g.Close(); err != nil {
		t.Errorf("Close after the interface went: %v", err)
	}
}

// TestQueuesLive opens a veth with three receive queues: without Queues the
// group takes all three; asking for queue 3 fails before anything is
// loaded, saying how many queues there are.
func TestQueuesLive(t *testing.T) {
	p := netnstest.New(t)
	name := p.IfB + "q"
	if out, err := exec.Command("ip", "-n", p.NSB, "link", "add", name, "numrxqueues", "3", "type", "veth", "peer", "name", name+"p").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(name, nil); return err }); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	var got []int
	for _, s := range g.Sockets() {
		got = append(got, s.Queue())
	}
	if fmt.Sprint(got) != "[0 1 2]" || !strings.HasPrefix(g.Describe(), "AF_XDP, 3 queues,") {
		t.Errorf("queues %v, %q; want [0 1 2] and 3 queues", got, g.Describe())
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	err := p.Do(p.NSB, func() error {
		g, err := Open(name, &Config{Queues: []int{0, 3}})
		if err == nil {
			g.Close()
		}
		return err
	})
	if want := "afxdp: queue 3 asked for, but interface " + name + " has 3 RX queues (0-2)"; err == nil || err.Error() != want {
		t.Errorf("Open(queues 0, 3) = %v, want %q", err, want)
	}
}

// TestDriverModeRefusedLive opens the default mode on a veth with MTU
// 9000, which refuses driver mode: Describe must say why in plain words
// (the MTU is too large for native XDP on driver veth), not the errno.
func TestDriverModeRefusedLive(t *testing.T) {
	p := netnstest.NewWith(t, &netnstest.Config{MTU: 9000})
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, &Config{Queues: []int{0}}); return err }); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	want := "generic mode, copy, frames cut to 512 bytes, per-frame kernel timestamps, takes frames addressed to other hosts (mirror traffic) and passes those addressed to this one to the kernel (driver mode refused: MTU 9000 is too large for native XDP on driver veth, which needs every frame in one page (an MTU of about 3500 at most)"
	if d := g.Describe(); !strings.Contains(d, want) {
		t.Errorf("Describe() = %q, want it to contain %q", d, want)
	}
}

// TestHostFramesLive captures with the default rule while the host in NSB
// receives its own RoCEv2 traffic: 500 UDP datagrams to port 4791 of its
// address, from a UDP socket in NSA, among 300 mirrored RoCE frames
// addressed to another host. A UDP listener on the host must receive all
// 500, an AF_PACKET capture opened before must see them, and the AF_XDP
// socket must take the 300 mirrored frames and only them. With HostFrames
// the socket takes all 800 and the listener gets none.
func TestHostFramesLive(t *testing.T) {
	const datagrams, mirrored = 500, 300
	for _, hostFrames := range []bool{false, true} {
		t.Run(fmt.Sprintf("HostFrames=%v", hostFrames), func(t *testing.T) {
			p := netnstest.New(t)
			var (
				g    *Group
				afp  *afpacket.Group
				conn *net.UDPConn
			)
			err := p.Do(p.NSB, func() (err error) {
				if afp, err = afpacket.Open(p.IfB, &afpacket.Config{NoPromisc: true}); err != nil {
					return err
				}
				t.Cleanup(func() { afp.Close() })
				if g, err = Open(p.IfB, &Config{Queues: []int{0}, HostFrames: hostFrames}); err != nil {
					return err
				}
				t.Cleanup(func() { g.Close() })
				conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.IPv4B.Addr().AsSlice(), Port: 4791})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			t.Log(g.Describe())
			stop := make(chan struct{})
			xdp := startReader(g.Sockets()[0], 0, stop, time.Now().UnixNano())
			var afpFrames atomic.Uint64
			afpDone := make(chan struct{})
			go func() {
				defer close(afpDone)
				b := capture.NewBatch(64)
				for capture.Each(context.Background(), afp.Sources()[0], b, func(b *capture.Batch) error {
					afpFrames.Add(uint64(len(b.Frames)))
					return nil
				}) == nil {
					return
				}
			}()
			received := make(chan int, 1)
			go func() {
				buf, n := make([]byte, 2048), 0
				conn.SetReadDeadline(time.Now().Add(20 * time.Second))
				for n < datagrams {
					if _, err := conn.Read(buf); err != nil {
						break
					}
					n++
				}
				received <- n
			}()
			if err := p.SendUDP(datagrams, netnstest.RoCEDatagram); err != nil {
				t.Fatal(err)
			}
			if n, err := p.Send(netnstest.Traffic(mirrored, 0, 1)); err != nil {
				t.Fatalf("sent %d mirrored frames: %v", n, err)
			}
			wantListener, wantXDP, wantHost := datagrams, uint64(mirrored), uint64(datagrams)
			if hostFrames {
				wantListener, wantXDP, wantHost = 0, mirrored+datagrams, 0
				conn.SetReadDeadline(time.Now().Add(time.Second))
			}
			if n := <-received; n != wantListener {
				t.Errorf("UDP listener on the host received %d of %d datagrams, want %d", n, datagrams, wantListener)
			}
			for deadline := time.Now().Add(10 * time.Second); xdp.frames.Load() < wantXDP && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			close(stop)
			<-xdp.done
			afp.Close()
			<-afpDone
			if n := xdp.frames.Load(); n != wantXDP {
				t.Errorf("AF_XDP socket took %d frames, want %d", n, wantXDP)
			}
			if n := afpFrames.Load(); n != uint64(wantListener) {
				t.Errorf("AF_PACKET capture saw %d RoCE frames, want the %d datagrams the host received", n, wantListener)
			}
			c, err := g.Counters()
			if err != nil {
				t.Fatal(err)
			}
			if c.Host != wantHost || c.Redirected != wantXDP {
				t.Errorf("counters %+v, want %d passed to the host and %d redirected", c, wantHost, wantXDP)
			}
		})
	}
}
