//go:build pcap && linux

package libpcap

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/netnstest"
)

// openLive opens p.IfB inside p.NSB and closes it when the test ends.
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
	t.Cleanup(func() { g.Close() })
	return g
}

// captureSent reads g's source while frames are sent, until want frames
// arrived (or were dropped) and the source has gone quiet, and returns
// copies of the frames.
func captureSent(t *testing.T, g *Group, p *netnstest.Pair, frames [][]byte, want uint64) ([][]byte, []capture.Frame) {
	t.Helper()
	src := g.Sources()[0]
	var stop atomic.Bool
	type result struct {
		data [][]byte
		meta []capture.Frame
		err  error
	}
	done := make(chan result)
	go func() {
		var r result
		b := capture.NewBatch(256)
		for {
			if r.err = src.Next(b); r.err != nil || (len(b.Frames) == 0 && stop.Load()) {
				done <- r
				return
			}
			for _, f := range b.Frames {
				r.data = append(r.data, bytes.Clone(f.Data))
				f.Data = nil
				r.meta = append(r.meta, f)
			}
		}
	}()
	if n, err := p.Send(frames); err != nil || n != len(frames) {
		t.Errorf("Send = %d, %v; want %d", n, err, len(frames))
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st := src.Stats(); st.Received+st.Dropped >= want {
			break
		}
	}
	stop.Store(true)
	r := <-done
	if r.err != nil {
		t.Fatalf("Next: %v", r.err)
	}
	return r.data, r.meta
}

func isRoCE(f []byte) bool {
	var p decode.Packet
	return p.Decode(f, decode.LinkEthernet) == nil && p.IsRoCE()
}

// TestFilterLive checks that the default filter delivers exactly the
// 100000 RoCE frames sent among 20000 others, byte for byte with their VLAN
// tags, without drops.
func TestFilterLive(t *testing.T) {
	p := netnstest.New(t)
	g := openLive(t, p, nil)
	if d := g.Describe(); !strings.Contains(d, "link type EN10MB, filter roce") {
		t.Errorf("Describe = %q", d)
	}
	const nRoCE, nOther = 100000, 20000
	frames := netnstest.Traffic(nRoCE, nOther, 1)
	got, meta := captureSent(t, g, p, frames, nRoCE)
	want := make(map[string]int)
	for _, f := range frames {
		if isRoCE(f) {
			want[string(f)]++
		}
	}
	bad := 0
	for i, f := range got {
		if want[string(f)] == 0 {
			bad++
			continue
		}
		want[string(f)]--
		if m := meta[i]; m.OrigLen != uint32(len(f)) || m.Link != decode.LinkEthernet || m.Time == 0 {
			t.Errorf("frame %d: %+v, length %d", i, m, len(f))
		}
	}
	missing := 0
	for _, n := range want {
		missing += n
	}
	st := g.Sources()[0].Stats()
	if len(got) != nRoCE || bad != 0 || missing != 0 || st.Received != nRoCE || st.Dropped != 0 {
		t.Errorf("received %d frames (%d not sent RoCE frames), %d RoCE frames missing; Stats %+v; want %d, none dropped",
			len(got), bad, missing, st, nRoCE)
	}
}

// TestAllLive checks that without a filter every sent frame arrives once,
// RoCE and other frames counted apart.
func TestAllLive(t *testing.T) {
	p := netnstest.New(t)
	g := openLive(t, p, &Config{All: true})
	const nRoCE, nOther = 100000, 20000
	frames := netnstest.Traffic(nRoCE, nOther, 1)
	got, _ := captureSent(t, g, p, frames, nRoCE+nOther)
	sent := make(map[string]int)
	for _, f := range frames {
		sent[string(f)]++
	}
	var roce, other, extra int
	for _, f := range got {
		switch {
		case sent[string(f)] == 0:
			extra++
			continue
		case isRoCE(f):
			roce++
		default:
			other++
		}
		sent[string(f)]--
	}
	if roce != nRoCE || other != nOther {
		t.Errorf("received %d RoCE and %d other sent frames, want %d and %d", roce, other, nRoCE, nOther)
	}
	if st := g.Sources()[0].Stats(); st.Dropped != 0 {
		t.Errorf("Stats = %+v", st)
	}
	t.Logf("%d frames not sent by the test (namespace noise)", extra)
}

// TestDropsLive overfills a small libpcap buffer without reading it: the
// drop counters must account for every RoCE frame not delivered.
func TestDropsLive(t *testing.T) {
	p := netnstest.New(t)
	g := openLive(t, p, &Config{BufferSize: 256 << 10})
	src := g.Sources()[0]
	const nRoCE = 20000
	if n, err := p.Send(netnstest.Traffic(nRoCE, 5000, 6)); err != nil || n != nRoCE+5000 {
		t.Fatalf("Send = %d, %v", n, err)
	}
	delivered := netnstest.Drain(t, src)
	st := src.Stats()
	if st.Dropped == 0 || st.Received != uint64(delivered) || st.Received+st.Dropped != nRoCE {
		t.Errorf("Stats = %+v after delivering %d; want drops, and received + dropped = %d", st, delivered, nRoCE)
	}
}

// TestCloseLive checks that Close makes a running Next return os.ErrClosed
// and is idempotent.
func TestCloseLive(t *testing.T) {
	p := netnstest.New(t)
	var g *Group
	if err := p.Do(p.NSB, func() (err error) { g, err = Open(p.IfB, nil); return err }); err != nil {
		t.Fatal(err)
	}
	src := g.Sources()[0]
	netnstest.CheckCloseUnblocks(t, src, g.Close)
	_ = src.Stats()
}

// TestInterfaceGoneLive deletes the interface while Next waits: Next must
// say so within a second, and Close must still succeed.
func TestInterfaceGoneLive(t *testing.T) {
	p := netnstest.New(t)
	g := openLive(t, p, nil)
	took := netnstest.CheckInterfaceGone(t, g.Sources()[0], p.IfB, func() { p.DeleteLink(t) })
	t.Logf("Next noticed in %v", took)
	if err := g.Close(); err != nil {
		t.Errorf("Close after the interface went: %v", err)
	}
}

// BenchmarkNextLive measures Next through libpcap (a copy per frame
// included): 40960 RoCE frames are sent with the timer stopped, then read.
func BenchmarkNextLive(b *testing.B) {
	p := netnstest.New(b)
	g := openLive(b, p, nil)
	src := g.Sources()[0]
	const nRoCE = 160 * 256 // whole batches: no batch waits for a read timeout
	frames := netnstest.Traffic(nRoCE, 10000, 4)
	batch := capture.NewBatch(256)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += nRoCE {
		b.StopTimer()
		if _, err := p.Send(frames); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * DefaultTimeout) // the kernel hands over the last, partly filled block
		b.StartTimer()
		for round := 0; round < nRoCE; {
			if err := src.Next(batch); err != nil {
				b.Fatal(err)
			}
			round += len(batch.Frames)
		}
	}
	b.StopTimer()
	if st := src.Stats(); st.Dropped != 0 {
		b.Errorf("dropped %d frames", st.Dropped)
	}
}
