package afxdp

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/internal/netdev"
)

// Bind retries: a queue stays busy for a moment after a previous socket on
// it was closed.
const (
	bindAttempts = 5
	bindBackoff  = 20 * time.Millisecond
)

// Group is the XDP program attached to one interface and the sockets of the
// captured queues. Close it to detach the program.
type Group struct {
	iface    string
	link     netdev.Link // the interface's MTU, MAC and driver when opened
	objs     objects
	xdp      link.Link
	sockets  []*Socket
	mode     string // "driver" or "generic"
	zeroCopy bool
	snapLen  int
	passHost bool     // frames addressed to this host are passed to it, not taken
	notes    []string // why a faster mode was not used

	closeOnce sync.Once
	closeErr  error
}

// Open attaches the XDP program to iface and opens one socket per queue.
// cfg may be nil for the defaults. It must run in the network namespace of
// iface; the sockets may be read from any thread afterwards. On error
// everything made so far is released.
//
// A missing interface gives a *capture.InterfaceError wrapping
// capture.ErrInterfaceNotFound, and a queue the interface does not have an
// error saying how many it has, both before anything is loaded. Failures
// of the kernel are *OpError, among them a kernel whose XDP programs lack
// a helper the program needs (the caller may then fall back to AF_PACKET).
func Open(iface string, cfg *Config) (_ *Group, err error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	index, err := netdev.Index(iface)
	if err != nil {
		return nil, err
	}
	if c.Queues, err = queues(iface, c.Queues); err != nil {
		return nil, err
	}
	l, err := netdev.LinkOf(iface)
	if err != nil {
		return nil, err
	}
	g := &Group{iface: iface, snapLen: c.SnapLen, link: l}
	defer func() {
		if err != nil {
			_ = g.Close()
		}
	}()
	for _, h := range helpers {
		if err := features.HaveProgramHelper(ebpf.XDP, h.fn); err != nil {
			if errors.Is(err, ebpf.ErrNotSupported) {
				return nil, g.opError(-1, fmt.Sprintf("XDP programs of this kernel lack %s (Linux %s)", h.name, h.since), err)
			}
			return nil, g.opError(-1, "probe BPF helper "+h.name, err)
		}
	}
	r := rule{all: c.All, snapLen: uint32(c.SnapLen)}
	if !c.HostFrames && len(l.MAC) == 6 {
		r.host, g.passHost = l.MAC, true
	}
	spec := collectionSpec(r, uint32(slices.Max(c.Queues)+1))
	if err = spec.LoadAndAssign(&g.objs, nil); err != nil {
		return nil, g.opError(-1, "load XDP program", err)
	}
	if err = g.attach(index, c.Mode); err != nil {
		return nil, err
	}
	for _, q := range c.Queues {
		s, err := g.bind(index, q, &c)
		if err != nil {
			return nil, err
		}
		s.iface = iface
		g.sockets = append(g.sockets, s)
		g.zeroCopy = s.zeroCopy
		if err := g.objs.XSKs.Put(uint32(q), uint32(s.fd)); err != nil {
			return nil, g.opError(q, "insert socket in XSKMAP", err)
		}
	}
	return g, nil
}

// helpers are the BPF helpers the program needs besides the redirect and
// map lookup that AF_XDP itself needs, with the Linux version that
// brought each to XDP programs.
var helpers = []struct {
	fn          asm.BuiltinFunc
	name, since string
}{
	{asm.FnXdpAdjustMeta, "bpf_xdp_adjust_meta", "4.15"},
	{asm.FnXdpAdjustTail, "bpf_xdp_adjust_tail", "4.18"},
	{asm.FnXdpGetBuffLen, "bpf_xdp_get_buff_len", "5.18"},
	{asm.FnKtimeGetNs, "bpf_ktime_get_ns", "4.1"},
}

// opError returns the error of op on queue (-1: on the interface).
func (g *Group) opError(queue int, op string, err error) error {
	return &OpError{Op: op, Iface: g.iface, Queue: queue, Err: err}
}

// attach links the program to the interface in the requested mode.
func (g *Group) attach(ifindex int, mode string) error {
	var err error
	if mode != "generic" {
		g.xdp, err = link.AttachXDP(link.XDPOptions{Program: g.objs.Program, Interface: ifindex, Flags: link.XDPDriverMode})
		if err == nil {
			g.mode = "driver"
			return nil
		}
		if mode == "driver" || errors.Is(err, unix.EPERM) {
			return g.opError(-1, "attach XDP program in driver mode", err)
		}
		g.notes = append(g.notes, driverModeRefused(err, g.link))
	}
	g.xdp, err = link.AttachXDP(link.XDPOptions{Program: g.objs.Program, Interface: ifindex, Flags: link.XDPGenericMode})
	if err != nil {
		return g.opError(-1, "attach XDP program in generic mode", err)
	}
	g.mode = "generic"
	return nil
}

// maxDriverModeMTU is about the largest MTU at which drivers run an XDP
// program without multi-buffer support in driver mode: a frame, the XDP
// headroom and the kernel's shared info must fit in one 4 KiB page.
const maxDriverModeMTU = 3500

// driverModeRefused says in plain words why the driver refused to run the
// program in driver mode, given the interface l.
func driverModeRefused(err error, l netdev.Link) string {
	driver := "its driver"
	if l.Driver != "" {
		driver = "driver " + l.Driver
	}
	switch {
	case errors.Is(err, unix.ERANGE), errors.Is(err, unix.EINVAL) && l.MTU > maxDriverModeMTU:
		return fmt.Sprintf("driver mode refused: MTU %d is too large for native XDP on %s, "+
			"which needs every frame in one page (an MTU of about %d at most)", l.MTU, driver, maxDriverModeMTU)
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Sprintf("driver mode refused: %s has no native XDP", driver)
	}
	return fmt.Sprintf("driver mode refused by %s: %v", driver, err)
}

// bind opens the socket of one queue: zero-copy first when allowed, copy
// when the driver refuses, retrying while the queue is busy.
func (g *Group) bind(ifindex, queue int, c *Config) (*Socket, error) {
	zeroCopy := c.ZeroCopy
	if zeroCopy == "auto" && g.mode == "generic" {
		zeroCopy = "off"
		g.noteOnce("zero-copy not tried: generic mode copies anyway")
	}
	if zeroCopy != "off" {
		s, err := bindRetry(ifindex, queue, c, unix.XDP_ZEROCOPY)
		if err == nil {
			return s, nil
		}
		if zeroCopy == "on" || errors.Is(err, unix.EPERM) {
			return nil, g.opError(queue, "zero-copy socket", err)
		}
		if errors.Is(err, unix.EOPNOTSUPP) && g.link.Driver != "" {
			g.noteOnce("zero-copy refused: driver " + g.link.Driver + " has no zero-copy AF_XDP")
		} else {
			g.noteOnce(fmt.Sprintf("zero-copy refused: %v", err))
		}
	}
	s, err := bindRetry(ifindex, queue, c, unix.XDP_COPY)
	if err != nil {
		return nil, g.opError(queue, "copy-mode socket", err)
	}
	return s, nil
}

// bindRetry makes the socket again while bind says the queue is busy.
func bindRetry(ifindex, queue int, c *Config, flags uint16) (*Socket, error) {
	for i := 1; ; i++ {
		s, err := newSocket(ifindex, queue, c, flags)
		if err == nil || !errors.Is(err, unix.EBUSY) || i == bindAttempts {
			return s, err
		}
		time.Sleep(bindBackoff)
	}
}

// noteOnce records a note unless it is already there (one per queue would
// repeat it).
func (g *Group) noteOnce(note string) {
	if !slices.Contains(g.notes, note) {
		g.notes = append(g.notes, note)
	}
}

// queues checks the queues asked for against the interface's receive
// queues, or, when none are asked for, returns them all. When the driver
// and sysfs do not tell how many there are, nothing is checked (bind
// fails on a queue that does not exist) and the default is queue 0.
func queues(iface string, asked []int) ([]int, error) {
	n, err := netdev.RXQueues(iface)
	switch {
	case errors.Is(err, capture.ErrInterfaceNotFound):
		return nil, err
	case err != nil && len(asked) == 0:
		return []int{0}, nil
	case err != nil:
		return asked, nil
	case len(asked) == 0:
		all := make([]int, n)
		for q := range all {
			all[q] = q
		}
		return all, nil
	}
	for _, q := range asked {
		if q >= n {
			return nil, fmt.Errorf("afxdp: queue %d asked for, but interface %s has %s", q, iface, queueCount(n))
		}
	}
	return asked, nil
}

// queueCount says how many receive queues there are: "1 RX queue (0)",
// "4 RX queues (0-3)".
func queueCount(n int) string {
	if n == 1 {
		return "1 RX queue (0)"
	}
	return fmt.Sprintf("%d RX queues (0-%d)", n, n-1)
}

// Sources returns one capture.Source per queue, in the order of
// Config.Queues. Each is a *Socket.
func (g *Group) Sources() []capture.Source {
	srcs := make([]capture.Source, len(g.sockets))
	for i, s := range g.sockets {
		srcs[i] = s
	}
	return srcs
}

// Sockets returns the sockets, one per queue, in the order of
// Config.Queues.
func (g *Group) Sockets() []*Socket { return slices.Clone(g.sockets) }

// Mode returns how the program is attached: "driver" or "generic".
func (g *Group) Mode() string { return g.mode }

// Describe says how the group captures and within which limits, for
// example "AF_XDP, 1 queue, generic mode, copy, frames cut to 512 bytes,
// per-frame kernel timestamps", followed by why faster modes were not used.
func (g *Group) Describe() string {
	var b strings.Builder
	b.WriteString("AF_XDP, ")
	b.WriteString(strconv.Itoa(len(g.sockets)))
	if len(g.sockets) == 1 {
		b.WriteString(" queue, ")
	} else {
		b.WriteString(" queues, ")
	}
	b.WriteString(g.mode)
	if g.zeroCopy {
		b.WriteString(" mode, zero-copy")
	} else {
		b.WriteString(" mode, copy")
	}
	b.WriteString(", frames cut to ")
	b.WriteString(strconv.Itoa(g.snapLen))
	b.WriteString(" bytes, per-frame kernel timestamps")
	if g.passHost {
		b.WriteString(", takes frames addressed to other hosts (mirror traffic) and passes those addressed to this one to the kernel")
	} else {
		b.WriteString(", takes frames addressed to this host too")
	}
	if len(g.notes) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(g.notes, "; "))
		b.WriteString(")")
	}
	return b.String()
}

// Counters sums the XDP program's counters over all CPUs.
func (g *Group) Counters() (Counters, error) {
	var got [numCounters]uint64
	for i := range got {
		var perCPU []uint64
		if err := g.objs.Counters.Lookup(uint32(i), &perCPU); err != nil {
			return Counters{}, fmt.Errorf("afxdp: %s: read counter %d: %w", g.iface, i, err)
		}
		for _, v := range perCPU {
			got[i] += v
		}
	}
	return Counters{Redirected: got[counterRedirected], NoSocket: got[counterNoSocket], Passed: got[counterPassed], Host: got[counterHost]}, nil
}

// Close closes the sockets, detaches the program and closes the maps. It
// is idempotent; later calls return the first call's result.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		var errs []error
		for _, s := range g.sockets {
			errs = append(errs, s.Close())
		}
		if g.xdp != nil {
			if err := g.xdp.Close(); err != nil {
				errs = append(errs, fmt.Errorf("afxdp: %s: detach XDP program: %w", g.iface, err))
			}
		}
		if err := g.objs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("afxdp: %s: close program and maps: %w", g.iface, err))
		}
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}
