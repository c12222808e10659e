//go:build linux

package netnstest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Skip skips t unless ROCESCOPE_LIVE=1 is set, the process runs as root
// (effective UID 0) and the ip command (iproute2) is installed.
func Skip(t testing.TB) {
	t.Helper()
	if os.Getenv("ROCESCOPE_LIVE") != "1" {
		t.Skip("live test: needs network namespaces and root; set ROCESCOPE_LIVE=1 and run as root")
	}
	if os.Geteuid() != 0 {
		t.Skip("live test: ROCESCOPE_LIVE=1 but not running as root (euid != 0)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("live test: the ip command (iproute2) is needed: %v", err)
	}
}

// Pair is two network namespaces, NSA and NSB, joined by a veth pair: IfA
// lives in NSA and IfB in NSB. Both ends are up with the addresses below.
type Pair struct {
	NSA, NSB     string           // namespace names (under /run/netns)
	IfA, IfB     string           // interface names
	IndexA       int              // interface index of IfA in NSA
	IndexB       int              // interface index of IfB in NSB
	MACA, MACB   net.HardwareAddr // interface MAC addresses
	IPv4A, IPv4B netip.Prefix     // 10.199.x.1/24 and 10.199.x.2/24
	IPv6A, IPv6B netip.Prefix     // fd00:199:0:x::1/64 and fd00:199:0:x::2/64
}

// pairs counts the pairs this process made, so names are unique.
var pairs atomic.Uint32

// ipv6Quiet are the sysctls (under /proc/sys/net/ipv6/conf/{all,default})
// set in both namespaces before the veth pair exists, so its ends come up
// without duplicate address detection, router solicitations or a link-local
// address. Some multicast listener reports may still be sent.
var ipv6Quiet = []struct{ name, value string }{
	{"accept_dad", "0"},
	{"dad_transmits", "0"},
	{"router_solicitations", "0"},
	{"accept_ra", "0"},
	{"addr_gen_mode", "1"}, // no automatic link-local address
}

// Config shapes a pair; the zero value (or nil) means one queue each way
// and the veth's default MTU.
type Config struct {
	Queues int // receive and transmit queues of each end; 0 means 1
	MTU    int // MTU of both ends; 0 leaves the veth's default (1500)
}

// New makes a fresh pair for t with the default Config; see [NewWith].
func New(t testing.TB) *Pair { return NewWith(t, nil) }

// NewWith makes a fresh pair for t as cfg says (nil: defaults) and
// registers a cleanup that deletes both namespaces (and with them the veth
// pair). It calls [Skip] first, and fails t if any step fails.
func NewWith(t testing.TB, cfg *Config) *Pair {
	t.Helper()
	Skip(t)
	var c Config
	if cfg != nil {
		c = *cfg
	}
	queues := strconv.Itoa(max(c.Queues, 1))
	n := pairs.Add(1)
	pid := os.Getpid()
	sub := byte(n)
	p := &Pair{
		NSA:   fmt.Sprintf("rs%da%d", pid, n),
		NSB:   fmt.Sprintf("rs%db%d", pid, n),
		IfA:   fmt.Sprintf("rs%dva%d", pid, n),
		IfB:   fmt.Sprintf("rs%dvb%d", pid, n),
		IPv4A: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 199, sub, 1}), 24),
		IPv4B: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 199, sub, 2}), 24),
		IPv6A: netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0x01, 0x99, 7: sub, 15: 1}), 64),
		IPv6B: netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0x01, 0x99, 7: sub, 15: 2}), 64),
	}
	for _, ns := range []string{p.NSA, p.NSB} {
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "delete", ns).CombinedOutput(); err != nil {
				t.Errorf("netnstest: delete namespace %s: %v: %s", ns, err, out)
			}
		})
		ip(t, "netns", "add", ns)
		if err := p.Do(ns, quietIPv6); err != nil {
			t.Fatalf("netnstest: namespace %s: %v", ns, err)
		}
	}
	ip(t, "link", "add", p.IfA, "netns", p.NSA, "numtxqueues", queues, "numrxqueues", queues,
		"type", "veth", "peer", "name", p.IfB, "netns", p.NSB, "numtxqueues", queues, "numrxqueues", queues)
	if c.MTU > 0 {
		p.SetMTU(t, c.MTU)
	}
	for _, end := range []struct {
		ns, ifname string
		v4, v6     netip.Prefix
		mac        *net.HardwareAddr
		index      *int
	}{
		{p.NSA, p.IfA, p.IPv4A, p.IPv6A, &p.MACA, &p.IndexA},
		{p.NSB, p.IfB, p.IPv4B, p.IPv6B, &p.MACB, &p.IndexB},
	} {
		ip(t, "-n", end.ns, "address", "add", end.v4.String(), "dev", end.ifname)
		ip(t, "-n", end.ns, "address", "add", end.v6.String(), "dev", end.ifname, "nodad")
		ip(t, "-n", end.ns, "link", "set", end.ifname, "up")
		err := p.Do(end.ns, func() error {
			ifi, err := net.InterfaceByName(end.ifname)
			if err != nil {
				return err
			}
			*end.mac, *end.index = ifi.HardwareAddr, ifi.Index
			return nil
		})
		if err != nil {
			t.Fatalf("netnstest: namespace %s: %v", end.ns, err)
		}
	}
	return p
}

// DeleteLink deletes the veth pair (both ends go), and fails t if ip
// does. The namespaces stay until the test ends.
func (p *Pair) DeleteLink(t testing.TB) {
	t.Helper()
	ip(t, "-n", p.NSB, "link", "delete", p.IfB)
}

// SetMTU sets the MTU of both ends.
func (p *Pair) SetMTU(t testing.TB, mtu int) {
	t.Helper()
	ip(t, "-n", p.NSA, "link", "set", "dev", p.IfA, "mtu", strconv.Itoa(mtu))
	ip(t, "-n", p.NSB, "link", "set", "dev", p.IfB, "mtu", strconv.Itoa(mtu))
}

// XDPAttached reports whether ip shows an XDP program on IfB.
func (p *Pair) XDPAttached(t testing.TB) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", p.NSB, "-d", "link", "show", "dev", p.IfB).CombinedOutput()
	if err != nil {
		t.Fatalf("netnstest: ip -n %s -d link show dev %s: %v: %s", p.NSB, p.IfB, err, out)
	}
	return strings.Contains(string(out), "xdp")
}

// Flap takes IfB down and up again, as a mirror port's link may flap, and
// waits until both ends carry frames again.
func (p *Pair) Flap(t testing.TB) {
	t.Helper()
	ip(t, "-n", p.NSB, "link", "set", p.IfB, "down")
	ip(t, "-n", p.NSB, "link", "set", p.IfB, "up")
	deadline := time.Now().Add(10 * time.Second)
	for _, end := range [][2]string{{p.NSA, p.IfA}, {p.NSB, p.IfB}} {
		for {
			out, err := exec.Command("ip", "-n", end[0], "link", "show", "dev", end[1]).CombinedOutput()
			if err != nil {
				t.Fatalf("netnstest: ip -n %s link show dev %s: %v: %s", end[0], end[1], err, out)
			}
			if strings.Contains(string(out), "LOWER_UP") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("netnstest: %s has no carrier 10s after the link came up: %s", end[1], out)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// ip runs the ip command with args and fails t with its output on error.
func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("netnstest: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// quietIPv6 writes the ipv6Quiet sysctls of the current network namespace.
func quietIPv6() error {
	for _, scope := range []string{"all", "default"} {
		for _, s := range ipv6Quiet {
			path := "/proc/sys/net/ipv6/conf/" + scope + "/" + s.name
			if err := os.WriteFile(path, []byte(s.value), 0); err != nil {
				return fmt.Errorf("sysctl %s: %w", path, err)
			}
		}
	}
	return nil
}

// Do runs fn on the calling goroutine, locked to its OS thread and switched
// into namespace ns (one of p.NSA and p.NSB), then switches the thread back
// to the namespace it was in. Sockets fn opens stay in ns; goroutines fn
// starts do not run in ns. If fn panics, the thread is switched back before
// the panic goes on. If switching back fails, the thread stays locked to the
// goroutine (so the runtime discards it when the goroutine ends) and Do
// returns an error: the caller must then stop using that goroutine.
func (p *Pair) Do(ns string, fn func() error) (err error) {
	if ns != p.NSA && ns != p.NSB {
		return fmt.Errorf("netnstest: namespace %q is not %s or %s", ns, p.NSA, p.NSB)
	}
	path := "/run/netns/" + ns
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netnstest: open %s: %w", path, err)
	}
	defer unix.Close(target)

	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netnstest: open /proc/thread-self/ns/net: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netnstest: setns %s: %w", path, err)
	}
	defer func() {
		if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil {
			err = errors.Join(err, fmt.Errorf("netnstest: back from %s: setns: %w (goroutine left locked to a thread in %s)", ns, rerr, ns))
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}

// Send writes frames, one at a time, out of IfA from inside NSA through an
// AF_PACKET SOCK_RAW socket that bypasses the qdisc, so they arrive on IfB
// and go nowhere else. A frame the device refuses for lack of buffers is
// retried (up to about a second). Send returns how many frames it sent; the
// error names the first frame that could not be sent.
func (p *Pair) Send(frames [][]byte) (int, error) { return p.SendPaced(frames, 0) }

// RoCEDatagram is the UDP payload of a RoCEv2 frame: a BTH for RC SEND
// Only to QP 0x12 with PSN 1, and 20 bytes of payload, as soft-RoCE would
// send it to port 4791 through the host's own stack.
var RoCEDatagram = append([]byte{0x04, 0, 0xff, 0xff, 0, 0, 0, 0x12, 0x80, 0, 0, 1}, make([]byte, 20)...)

// SendUDP sends n datagrams with payload from a UDP socket in NSA to port
// 4791 of IPv4B, through NSA's stack (ARP included), 100 µs apart.
func (p *Pair) SendUDP(n int, payload []byte) error {
	return p.Do(p.NSA, func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: p.IPv4B.Addr().AsSlice(), Port: 4791})
		if err != nil {
			return fmt.Errorf("netnstest: UDP socket in %s: %w", p.NSA, err)
		}
		defer c.Close()
		for i := range n {
			if _, err := c.Write(payload); err != nil {
				return fmt.Errorf("netnstest: datagram %d to %s: %w", i, p.IPv4B.Addr(), err)
			}
			time.Sleep(100 * time.Microsecond)
		}
		return nil
	})
}

// sendBurst is how many frames SendPaced writes back to back: after a stall
// it does not catch up, so no burst is longer.
const sendBurst = 64

// SendPaced is [Pair.Send] at pps frames per second (0: as fast as the
// device takes them), in bursts of 64 frames.
func (p *Pair) SendPaced(frames [][]byte, pps int) (int, error) {
	sent := 0
	err := p.Do(p.NSA, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: send only
		if err != nil {
			return fmt.Errorf("netnstest: AF_PACKET socket in %s: %w", p.NSA, err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: p.IndexA}); err != nil {
			return fmt.Errorf("netnstest: bind to %s: %w", p.IfA, err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fmt.Errorf("netnstest: %s: PACKET_QDISC_BYPASS: %w", p.IfA, err)
		}
		next := time.Now()
		for i, f := range frames {
			if pps > 0 && i%sendBurst == 0 && i > 0 {
				next = next.Add(sendBurst * time.Second / time.Duration(pps))
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				} else {
					next = time.Now()
				}
			}
			if err := write(fd, f); err != nil {
				return fmt.Errorf("netnstest: send frame %d (%d bytes) on %s: %w", i, len(f), p.IfA, err)
			}
			sent++
		}
		return nil
	})
	return sent, err
}

// write sends one frame, retrying while the device has no buffers.
func write(fd int, frame []byte) error {
	const retries = 10000
	for try := 0; ; try++ {
		_, err := unix.Write(fd, frame)
		if (err != unix.ENOBUFS && err != unix.EAGAIN) || try == retries {
			return err
		}
		time.Sleep(100 * time.Microsecond)
	}
}
