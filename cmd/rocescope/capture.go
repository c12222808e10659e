package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/afpacket"
	"github.com/rocescope/rocescope/capture/afxdp"
	"github.com/rocescope/rocescope/capture/filter"
)

func captureCommand() *command {
	return &command{
		name:    "capture",
		args:    "[EXPRESSION]",
		summary: "analyze live traffic from a mirror port (AF_XDP, AF_PACKET, libpcap)",
		about: `Capture reads frames from a network interface, usually the port a switch
mirrors RoCE traffic to (SPAN or ERSPAN), and writes one report per window, as
replay does. Windows close on the wall clock: a window is reported once its
end plus --lateness has passed. Frames the kernel or the capture rings dropped
are reported in each window as kernel_drops; nothing is dropped silently.
The capture ends when --duration has passed or on an interrupt (Ctrl-C,
SIGINT, SIGTERM, or SIGHUP when the terminal goes away): the open windows
are then reported, one line on standard error gives the frames, RoCE frames,
kernel drops, windows and distinct flows of the whole capture, as tcpdump
does, and the exit status is 0. Started with SIGHUP ignored (nohup, or a
service), it goes on after a hang-up. With --summary the capture writes,
when it ends, one report of all of it instead of one per window.

Modes:
  afxdp     AF_XDP sockets, one per RX queue (--queues); an XDP program built
            in Go takes the RoCEv2, RoCEv1, ERSPAN/GRE and PFC frames that
            are addressed to other hosts (a mirror port's traffic) and passes
            the rest to the kernel. Frames addressed to this host (its MAC,
            broadcast, multicast) are left to it, so that its own RDMA keeps
            working, and an AF_PACKET socket copies them for the analysis:
            every frame is counted once. --xdp-host-frames takes those too,
            for a port that receives only ERSPAN sent to this collector.
            Driver mode, else generic.
  afpacket  TPACKET_V3 ring with a kernel filter for the same traffic, one
            socket per worker in a fanout group.
  pcap      libpcap (only in binaries built with -tags pcap); also opens RDMA
            devices such as mlx5_0 where libpcap supports them.
The default, auto, tries AF_XDP and falls back to AF_PACKET, saying why.
Capturing needs root (or CAP_NET_RAW, and CAP_NET_ADMIN with CAP_BPF for
AF_XDP).

A capture filter expression (as trailing arguments, as tcpdump takes it, or
--filter) runs in the kernel with AF_PACKET, after the RoCE filter: the
kernel counts none of the frames it removes (tcpdump's "packets received
by filter" counts only those it kept). With AF_XDP, libpcap, or an
expression with vlan, it runs in user space right after receive and the
frames it removes are counted in filtered. The start-up line says which.
` + filterHelp,
		example: `  sudo rocescope capture -i eth1
  sudo rocescope capture -i eth1 --mode afpacket --workers 4 --duration 60s -o flows.jsonl
  sudo rocescope capture -i eth1 --mode afxdp --queues 0-3 --state-out /shared/states/
  sudo rocescope capture -i eth1 --all --prometheus :24791   # http://127.0.0.1:24791/metrics
  sudo rocescope capture -i eth1 -o ipfix://collector:4739 -o report.jsonl
  sudo rocescope capture -i eth1 'udp port 4791 and host 10.0.0.5'
  sudo rocescope capture -i eth1 --mode afpacket --qp 0x4bdaaf --op read,ack
  sudo rocescope capture -i eth1 --duration 10m --summary --format table   # what the 10 minutes held`,
		flags: func(fs *pflag.FlagSet) runner {
			var o reportOptions
			o.bind(fs)
			var fo filterOptions
			fo.bind(fs)
			iface := fs.StringP("interface", "i", "", "interface to capture on (required)")
			mode := fs.String("mode", "auto", "capture mode: auto, afxdp, afpacket or pcap")
			queues := fs.String("queues", "", "AF_XDP: RX queues to attach to, such as 0 or 0-3 or 0,2 (default: all)")
			duration := fs.Duration("duration", 0, "stop after this long (default: until interrupted)")
			all := fs.Bool("all", false, "capture every frame, not only RoCE, PFC and mirror traffic, so that other_packets counts the rest")
			hostFrames := fs.Bool("xdp-host-frames", false, "AF_XDP: also take the frames addressed to this host, which it then never receives (for a port that only receives ERSPAN sent to this collector)")
			return func(ctx context.Context, e *env, args []string) error {
				if *iface == "" {
					return usagef("-i IFACE is required")
				}
				expr := fo.expr
				if len(args) > 0 {
					if expr != "" {
						return usagef("%v", errFilterTwice)
					}
					expr = strings.Join(args, " ")
				}
				set, err := fo.set(expr)
				if err != nil {
					return err
				}
				o.inputs = []string{*iface}
				if err := o.check(); err != nil {
					return err
				}
				qs, err := parseQueues(*queues)
				if err != nil {
					return err
				}
				if qs != nil && (*mode == "afpacket" || *mode == "pcap") {
					return usagef("--queues selects AF_XDP queues: it does not apply to --mode %s", *mode)
				}
				if *duration < 0 {
					return usagef("--duration %v: want 0 or more", *duration)
				}
				if *hostFrames && (*mode == "afpacket" || *mode == "pcap") {
					return usagef("--xdp-host-frames is about AF_XDP: it does not apply to --mode %s", *mode)
				}
				lo := liveOptions{queues: qs, workers: o.cfg.Workers, all: *all, hostFrames: *hostFrames}
				if set != nil && set.Expr != nil && !set.Expr.VLAN() {
					lo.kernelFilter = set.Expr
				}
				l, err := openLive(e, *mode, *iface, lo)
				if err != nil {
					return err
				}
				defer l.Close()
				fmt.Fprintf(e.stderr, "rocescope capture: %s on %s\n", l.Describe(), *iface)
				set = userFilter(e, set, l)
				if *duration > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, *duration)
					defer cancel()
				}
				a := &analysis{opts: &o, filter: set, live: true}
				return a.run(ctx, e, l.Sources())
			}
		},
	}
}

// live is an open live capture: one source per queue or socket.
type live interface {
	Sources() []capture.Source
	Describe() string
	Close() error
}

// openPcap opens a libpcap capture; it is set by capture_pcap.go in
// binaries built with the pcap tag.
var openPcap func(iface string, all bool) (live, error)

// liveOptions are the capture flags the modes take.
type liveOptions struct {
	queues       []int        // AF_XDP queues; nil for all
	workers      int          // AF_PACKET sockets
	all          bool         // every frame, not only RoCE
	hostFrames   bool         // AF_XDP takes the frames addressed to this host too
	kernelFilter *filter.Expr // the expression, for AF_PACKET to run in the kernel; nil for none
}

// userFilter returns the filters the engine must apply to the frames of
// l, which ran set's expression in the kernel if l is AF_PACKET with a
// kernel filter, and says on standard error where each filter runs.
func userFilter(e *env, set *filter.Set, l live) *filter.Set {
	if set == nil {
		return nil
	}
	g, kernel := l.(*afpacket.Group)
	kernel = kernel && g.Filter() != nil
	if set.Expr != nil {
		where := "in user space right after receive: the frames it removes are counted in filtered"
		if kernel {
			where = "in the kernel (AF_PACKET socket filter): the frames it removes are not counted, as the kernel counts none"
		}
		fmt.Fprintf(e.stderr, "rocescope capture: filter '%s' runs %s\n", set.Expr, where)
	}
	if !set.RoCE.IsZero() {
		fmt.Fprintf(e.stderr, "rocescope capture: RoCE filter %s runs after decoding: the frames it removes are counted in filtered\n", set.RoCE)
	}
	if kernel {
		return &filter.Set{RoCE: set.RoCE}
	}
	return set
}

// openLive opens iface in the given mode; auto tries AF_XDP, then AF_PACKET.
func openLive(e *env, mode, iface string, o liveOptions) (live, error) {
	afp := func() (live, error) {
		return afpacket.Open(iface, &afpacket.Config{Sockets: o.workers, All: o.all, Filter: o.kernelFilter})
	}
	switch mode {
	case "afxdp":
		return openXDP(iface, o)
	case "afpacket":
		return afp()
	case "pcap":
		if openPcap == nil {
			return nil, errors.New("this rocescope was built without libpcap: rebuild with 'go build -tags pcap ./cmd/rocescope' (needs libpcap-dev)")
		}
		return openPcap(iface, o.all)
	case "auto":
		l, err := openXDP(iface, o)
		if err == nil {
			return l, nil
		}
		if errors.Is(err, capture.ErrInterfaceNotFound) {
			return nil, err // AF_PACKET would not find it either
		}
		fmt.Fprintf(e.stderr, "rocescope capture: AF_XDP unavailable (%v); using AF_PACKET\n", err)
		return afp()
	}
	return nil, usagef("--mode %q: want auto, afxdp, afpacket or pcap", mode)
}

// xdpCapture is an AF_XDP group that leaves the frames addressed to this
// host to it, and the AF_PACKET socket that copies those frames, received
// by the host, for the analysis.
type xdpCapture struct {
	xdp  *afxdp.Group
	host *afpacket.Group
}

// openXDP opens an AF_XDP capture, with the AF_PACKET socket for the
// frames it passes to the host unless o.hostFrames.
func openXDP(iface string, o liveOptions) (live, error) {
	g, err := afxdp.Open(iface, &afxdp.Config{Queues: o.queues, All: o.all, HostFrames: o.hostFrames})
	switch {
	case err != nil:
		return nil, err
	case o.hostFrames:
		return g, nil
	}
	// The XDP program passes only frames the kernel then receives: the
	// socket sees each frame the program did not take, once.
	h, err := afpacket.Open(iface, &afpacket.Config{All: o.all, Inbound: true})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("AF_PACKET socket for the frames AF_XDP leaves to this host: %w", err), g.Close())
	}
	return &xdpCapture{xdp: g, host: h}, nil
}

func (c *xdpCapture) Sources() []capture.Source {
	return append(c.xdp.Sources(), c.host.Sources()...)
}

func (c *xdpCapture) Describe() string {
	return c.xdp.Describe() + "; frames left to this host copied by " + c.host.Describe()
}

func (c *xdpCapture) Close() error { return errors.Join(c.xdp.Close(), c.host.Close()) }

// parseQueues reads a queue list such as "0", "0-3" or "0,2,5-7".
func parseQueues(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var qs []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b > 1023 {
			return nil, usagef("--queues %q: want queue numbers such as 0, 0-3 or 0,2,5-7", s)
		}
		for q := a; q <= b; q++ {
			qs = append(qs, q)
		}
	}
	return qs, nil
}
