package afpacket

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/netnstest"
)

// liveConfig is the ring the live tests use: 64 MiB holds all their
// traffic even if the reader falls behind.
func liveConfig(sockets int, all bool, fanout string) *Config {
	return &Config{Sockets: sockets, All: all, Fanout: fanout, BlockSize: 1 << 20, NumBlocks: 64}
}

// openLive opens a group on p.IfB inside p.NSB and closes it when the test
// ends.
func openLive(t testing.TB, p *netnstest.Pair, cfg *Config) *Group {
	t.Helper()
	var g *Group
	err := p.Do(p.NSB, func() (err error) {
		g, err = Open(p.IfB, cfg)
		return err
	})
	if err != nil {
		t.Fatalf("Open(%s) in %s: %v", p.IfB, p.NSB, err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return g
}

// received is what one source delivered: copies of the frames, and the
// frames' metadata.
type received struct {
	frames [][]byte
	meta   []capture.Frame // Data nil
}

// capture reads every source of g in its own goroutine while frames are
// sent, until the sources together have received want frames, and then
// until each source has been idle for one poll timeout.
func captureAll(t *testing.T, g *Group, p *netnstest.Pair, frames [][]byte, want uint64) []received {
	t.Helper()
	srcs := g.Sources()
	out := make([]received, len(srcs))
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make([]error, len(srcs))
	for i, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := capture.NewBatch(128)
			for {
				if err := src.Next(b); err != nil {
					errs[i] = err
					return
				}
				if len(b.Frames) == 0 && stop.Load() {
					return
				}
				for _, f := range b.Frames {
					out[i].frames = append(out[i].frames, bytes.Clone(f.Data))
					f.Data = nil
					out[i].meta = append(out[i].meta, f)
				}
			}
		}()
	}
	sent, err := p.Send(frames)
	if err != nil || sent != len(frames) {
		t.Errorf("Send = %d, %v; want %d", sent, err, len(frames))
	}
	// Wait for the frames, but not forever: a lost frame must fail the
	// test, not hang it.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var n uint64
		for _, src := range srcs {
			st := src.Stats()
			n += st.Received + st.Dropped
		}
		if n >= want {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("source %d: Next: %v", i, err)
		}
	}
	return out
}

// multiset counts frames by content.
func multiset(frames [][]byte) map[string]int {
	m := make(map[string]int, len(frames))
	for _, f := range frames {
		m[string(f)]++
	}
	return m
}

func isRoCE(frame []byte) bool {
	var p decode.Packet
	return p.Decode(frame, decode.LinkEthernet) == nil && p.IsRoCE()
}

// TestFilterLive sends 100000 RoCE and 20000 other frames and checks that
// the filtered socket delivers exactly the RoCE frames, byte for byte with
// their VLAN tags, with no drops, each decoded as RoCE.
func TestFilterLive(t *testing.T) {
	p := netnstest.New(t)
	g := openLive(t, p, liveConfig(1, false, ""))
	const nRoCE, nOther = 100000, 20000
	frames := netnstest.Traffic(nRoCE, nOther, 1)
	start := time.Now().UnixNano()
	got := captureAll(t, g, p, frames, nRoCE)
	end := time.Now().UnixNano()

	var roce [][]byte
	for _, f := range frames {
		if isRoCE(f) {
			roce = append(roce, f)
		}
	}
	if len(roce) != nRoCE {
		t.Fatalf("%d of the sent frames are RoCE, want %d", len(roce), nRoCE)
	}
	st := g.Sources()[0].Stats()
	if st.Received+st.Dropped != nRoCE || st.Dropped != 0 || st.Errors != 0 {
		t.Errorf("Stats = %+v, want %d received, none dropped", st, nRoCE)
	}
	compareSets(t, "filtered capture", got[0].frames, roce)
	for i, f := range got[0].frames {
		if !isRoCE(f) {
			t.Errorf("frame %d is not RoCE: % x", i, f)
		}
		m := got[0].meta[i]
		if m.OrigLen != uint32(len(f)) || m.Port != 0 || m.Link != decode.LinkEthernet || m.Time < start || m.Time > end {
			t.Errorf("frame %d: %+v (len %d), want OrigLen = len, port 0, Ethernet, time in [%d, %d]", i, m, len(f), start, end)
		}
	}
}

// compareSets fails t unless got and want hold the same frames the same
// number of times.
func compareSets(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	g, w := multiset(got), multiset(want)
	missing, extra, dup := 0, 0, 0
	for k, n := range w {
		if g[k] < n {
			missing += n - g[k]
		}
		if g[k] > n {
			dup += g[k] - n
		}
	}
	for k, n := range g {
		if w[k] == 0 {
			extra += n
		}
	}
	if missing+extra+dup != 0 {
		t.Errorf("%s: %d frames received, %d sent: %d missing, %d not sent, %d duplicated", what, len(got), len(want), missing, extra, dup)
	}
}

// TestAllLive captures everything: each sent frame arrives once, RoCE and
// others counted apart; frames the namespaces made themselves are reported.
func TestAllLive(t *testing.T) {
	p := netnstest.New(t)
	g := openLive(t, p, liveConfig(1, true, ""))
	const nRoCE, nOther = 100000, 20000
	frames := netnstest.Traffic(nRoCE, nOther, 1)
	got := captureAll(t, g, p, frames, nRoCE+nOther)
	sent := multiset(frames)
	var roce, other, extra int
	seen := make(map[string]int)
	for _, f := range got[0].frames {
		k := string(f)
		if sent[k] == 0 {
			extra++
			continue
		}
		seen[k]++
		if isRoCE(f) {
			roce++
		} else {
			other++
		}
	}
	if roce != nRoCE || other != nOther || len(seen) != len(sent) {
		t.Errorf("received %d RoCE and %d other sent frames (%d distinct), want %d and %d (%d)", roce, other, len(seen), nRoCE, nOther, len(sent))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("frame received %d times: % x", n, k)
		}
	}
	if st := g.Sources()[0].Stats(); st.Dropped != 0 || st.Received != uint64(len(got[0].frames)) {
		t.Errorf("Stats = %+v, delivered %d", st, len(got[0].frames))
	}
	t.Logf("%d frames not sent by the test (namespace noise)", extra)
}

// TestFanoutLive spreads the RoCE traffic over two sockets: the union is
// what was sent, without duplicates; with hash fanout each flow stays on
// one socket, and round robin gives both sockets frames.
func TestFanoutLive(t *testing.T) {
	for _, fanout := range []string{"hash", "lb"} {
		t.Run(fanout, func(t *testing.T) {
			p := netnstest.New(t)
			g := openLive(t, p, liveConfig(2, false, fanout))
			const nRoCE = 50000
			frames := netnstest.Traffic(nRoCE, 10000, 2)
			got := captureAll(t, g, p, frames, nRoCE)
			var all, roce [][]byte
			type flow struct {
				src, dst decode.Addr
				qp       uint32
				vlans    [2]uint16
			}
			port := make(map[flow]uint16)
			for i, r := range got {
				if len(r.frames) == 0 {
					t.Errorf("socket %d received nothing", i)
				}
				st := g.Sources()[i].Stats()
				if st.Received != uint64(len(r.frames)) || st.Dropped != 0 {
					t.Errorf("socket %d: Stats = %+v, delivered %d", i, st, len(r.frames))
				}
				for j, f := range r.frames {
					if r.meta[j].Port != uint16(i) {
						t.Errorf("socket %d delivered a frame with Port %d", i, r.meta[j].Port)
					}
					var pk decode.Packet
					if err := pk.Decode(f, decode.LinkEthernet); err != nil {
						t.Fatalf("socket %d frame %d: %v", i, j, err)
					}
					k := flow{pk.Src, pk.Dst, pk.BTH.DestQP, pk.VLANs}
					if q, ok := port[k]; ok && q != uint16(i) && fanout == "hash" {
						t.Errorf("flow %v on sockets %d and %d", k, q, i)
					}
					port[k] = uint16(i)
				}
				all = append(all, r.frames...)
			}
			for _, f := range frames {
				if isRoCE(f) {
					roce = append(roce, f)
				}
			}
			compareSets(t, "union of two sockets", all, roce)
			t.Logf("socket 0: %d frames, socket 1: %d frames, %d flows", len(got[0].frames), len(got[1].frames), len(port))
		})
	}
}

// TestDropsLive overfills a small ring without reading it: the kernel's
// drop counter, read (and reset) several times, must account for every
// RoCE frame not delivered.
func TestDropsLive(t *testing.T) {
	p := netnstest.New(t)
	g := openLive(t, p, &Config{BlockSize: 64 << 10, NumBlocks: 4})
	src := g.Sources()[0]
	const nRoCE = 20000
	frames := netnstest.Traffic(nRoCE, 5000, 6)
	var dropped []uint64
	for lo := 0; lo < len(frames); lo += 5000 {
		if n, err := p.Send(frames[lo : lo+5000]); err != nil || n != 5000 {
			t.Fatalf("Send = %d, %v", n, err)
		}
		dropped = append(dropped, src.Stats().Dropped)
	}
	delivered := netnstest.Drain(t, src)
	st := src.Stats()
	for i := 1; i < len(dropped); i++ {
		if dropped[i] < dropped[i-1] {
			t.Errorf("Dropped went down: %v", dropped)
		}
	}
	if st.Dropped == 0 || st.Received != uint64(delivered) || st.Received+st.Dropped != nRoCE {
		t.Errorf("Stats = %+v after delivering %d; want drops, and received + dropped = %d", st, delivered, nRoCE)
	}
	t.Logf("delivered %d, dropped %d (readings %v)", delivered, st.Dropped, dropped)
}

// TestCloseLive checks that Close wakes a Next blocked on a quiet socket,
// which returns os.ErrClosed, and that Close is idempotent.
func TestCloseLive(t *testing.T) {
	p := netnstest.New(t)
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, liveConfig(2, false, "")); return err }); err != nil {
		t.Fatal(err)
	}
	src := g.Sources()[1]
	netnstest.CheckCloseUnblocks(t, src, g.Close)
	if st := src.Stats(); st.Received != 0 {
		t.Errorf("Stats after Close = %+v", st)
	}
}

// BenchmarkNextLive measures Next on a real ring with the RoCE filter:
// 40960 RoCE frames (and 10000 others the filter drops) are sent into the
// ring with the timer stopped, then read with it running.
func BenchmarkNextLive(b *testing.B) {
	p := netnstest.New(b)
	g := openLive(b, p, liveConfig(1, false, ""))
	src := g.Sources()[0]
	const nRoCE = 160 * 256 // whole batches: no batch waits for a read timeout
	frames := netnstest.Traffic(nRoCE, 10000, 4)
	batch := capture.NewBatch(256)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; {
		b.StopTimer()
		if _, err := p.Send(frames); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * DefaultBlockTimeout) // the kernel hands over the last, partly filled block
		b.StartTimer()
		for round := 0; round < nRoCE; {
			if err := src.Next(batch); err != nil {
				b.Fatal(err)
			}
			round += len(batch.Frames)
		}
		n += nRoCE
	}
	b.StopTimer()
	if st := src.Stats(); st.Dropped != 0 {
		b.Errorf("dropped %d frames", st.Dropped)
	}
}

// TestOpenUnprivileged checks, when not run as root, that Open says that
// capturing needs root or CAP_NET_RAW.
func TestOpenUnprivileged(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as root: no permission error to see")
	}
	_, err := Open("lo", nil)
	if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "CAP_NET_RAW") {
		t.Errorf("Open without privileges: %v, want a permission error naming CAP_NET_RAW", err)
	}
}

// TestIPv6ExtensionsLive sends the filter cases of IPv6 frames (extension
// headers among them) through the veth pair: the socket must deliver
// exactly those the filter table keeps.
func TestIPv6ExtensionsLive(t *testing.T) {
	p := netnstest.New(t)
	g := openLive(t, p, liveConfig(1, false, ""))
	var frames, kept [][]byte
	for _, c := range filterCases {
		if !strings.HasPrefix(c.name, "ipv6") && !strings.HasPrefix(c.name, "vlan ipv6") {
			continue
		}
		frames = append(frames, c.frame)
		if c.keep {
			kept = append(kept, c.frame)
		}
	}
	if len(kept) < 10 || len(frames)-len(kept) < 10 {
		t.Fatalf("%d IPv6 cases of which %d kept: too few of either to prove much", len(frames), len(kept))
	}
	got := captureAll(t, g, p, frames, uint64(len(kept)))
	compareSets(t, "IPv6 cases", got[0].frames, kept)
}

// TestInterfaceGoneLive deletes the interface while Next waits on each of
// two sockets: each Next must say so within a second, and Close must still
// succeed.
func TestInterfaceGoneLive(t *testing.T) {
	p := netnstest.New(t)
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, liveConfig(2, false, "")); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	took := netnstest.CheckInterfaceGone(t, g.Sources()[0], p.IfB, func() { p.DeleteLink(t) })
	t.Logf("Next noticed in %v", took)
	if err := g.Sources()[1].Next(capture.NewBatch(1)); !errors.Is(err, capture.ErrInterfaceGone) {
		t.Errorf("Next on the second socket = %v, want capture.ErrInterfaceGone", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("Close after the interface went: %v", err)
	}
}

// TestOpenNoInterface checks the error for an interface that does not
// exist: it names the interface and wraps capture.ErrInterfaceNotFound.
func TestOpenNoInterface(t *testing.T) {
	_, err := Open("rsnosuchif0", nil)
	if !errors.Is(err, capture.ErrInterfaceNotFound) || err.Error() != "capture: interface rsnosuchif0 not found" {
		t.Errorf("Open(missing interface) = %v, want capture: interface rsnosuchif0 not found", err)
	}
}
