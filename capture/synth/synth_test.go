package synth_test

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
)

// frame is a generated frame, copied out of its batch, and decoded.
type frame struct {
	data    []byte
	time    int64
	origLen uint32
	p       decode.Packet
}

// generate runs a source for cfg to the end with batches of batch frames
// and returns its frames, decoded, and its truth. Every frame must decode
// without error.
func generate(tb testing.TB, cfg *synth.Config, batch int) ([]frame, *synth.Truth) {
	tb.Helper()
	src, err := synth.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	b := capture.NewBatch(batch)
	var out []frame
	for {
		if src.Truth() != nil {
			tb.Fatal("Truth() before io.EOF")
		}
		err := src.Next(b)
		for _, f := range b.Frames {
			if f.Link != decode.LinkEthernet || f.Port != 0 {
				tb.Fatalf("frame %d: link %v port %d", len(out)+1, f.Link, f.Port)
			}
			if len(f.Data) == 0 || uint32(len(f.Data)) > f.OrigLen {
				tb.Fatalf("frame %d: %d captured bytes of %d", len(out)+1, len(f.Data), f.OrigLen)
			}
			out = append(out, frame{data: bytes.Clone(f.Data), time: f.Time, origLen: f.OrigLen})
			x := &out[len(out)-1]
			if err := x.p.Decode(x.data, decode.LinkEthernet); err != nil {
				tb.Fatalf("frame %d: %v", len(out), err)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		if len(b.Frames) == 0 {
			tb.Fatal("Next returned an empty batch and no error")
		}
	}
	if got := src.Stats(); got != (capture.Stats{Received: uint64(len(out))}) {
		tb.Fatalf("Stats() = %+v, delivered %d", got, len(out))
	}
	tr := src.Truth()
	if tr == nil {
		tb.Fatal("Truth() = nil after io.EOF")
	}
	return out, tr
}

// dirKey is one direction of a connection as the frames show it: the
// addresses and the UDP source port, which both directions share.
type dirKey struct {
	src, dst netip.Addr
	sport    uint16
}

// reverse returns the other direction.
func (d dirKey) reverse() dirKey { return dirKey{d.dst, d.src, d.sport} }

// dirOf returns the direction of a RoCE packet.
func dirOf(p *decode.Packet) dirKey { return dirKey{p.Src.Netip(), p.Dst.Netip(), p.SrcPort} }

// keyOf returns the flow key of a RoCE packet.
func keyOf(p *decode.Packet) synth.FlowKey {
	return synth.FlowKey{Src: p.Src.Netip(), Dst: p.Dst.Netip(), DQP: p.BTH.DestQP}
}

// pairs maps each direction to the destination QPs seen on it. The sending
// QP of a flow is the destination QP of the reverse direction.
type pairs map[dirKey][]uint32

// pairFrames collects the destination QPs of every direction.
func pairFrames(frames []frame) pairs {
	m := pairs{}
	for i := range frames {
		p := &frames[i].p
		if p.IsRoCE() {
			d := dirOf(p)
			if !slices.Contains(m[d], p.BTH.DestQP) {
				m[d] = append(m[d], p.BTH.DestQP)
			}
		}
	}
	return m
}

// sqp returns the sending QP of the flows on direction d, when the reverse
// direction shows exactly one destination QP.
func (m pairs) sqp(d dirKey) (uint32, bool) {
	if q := m[d.reverse()]; len(q) == 1 {
		return q[0], true
	}
	return 0, false
}

// recount recomputes the truth from the decoded frames and the package
// doc's definitions alone. READ requests consume max(1, ceil(len/pmtu))
// PSNs. A flow's sending QP (and so where its CNPs go) comes from pairing
// the two directions of a connection by addresses and UDP source port.
// Flows whose reverse direction is not in the trace, or is ambiguous (two
// connections between the same hosts with the same port, counted in
// unpaired), take the truth's sqp, so that the comparison covers
// everything else.
func recount(tb testing.TB, frames []frame, window int64, pmtu uint32, truth *synth.Truth) (got *synth.Truth, unpaired int) {
	tb.Helper()
	pr := pairFrames(frames)
	sqpOf := map[synth.FlowKey]uint32{}
	for _, f := range truth.PerFlow {
		sqpOf[f.FlowKey] = f.SQP
	}
	type flowCount struct {
		synth.Flow
		dir dirKey
	}
	type win struct {
		w     synth.Window
		flows map[synth.FlowKey]*flowCount
		cnps  map[synth.FlowKey]uint64 // CNPs by the flow they throttle
	}
	var wins []*win
	expected := map[synth.FlowKey]uint32{}
	for i := range frames {
		f, p := &frames[i], &frames[i].p
		start := f.time - f.time%window
		if len(wins) == 0 || wins[len(wins)-1].w.StartNS != start {
			wins = append(wins, &win{
				w:     synth.Window{StartNS: start, Counts: synth.Counts{Opcodes: map[uint8]uint64{}, PFC: map[uint8]synth.PFCCount{}}},
				flows: map[synth.FlowKey]*flowCount{}, cnps: map[synth.FlowKey]uint64{},
			})
		}
		w := wins[len(wins)-1]
		c := &w.w.Counts
		c.Packets++
		c.Bytes += uint64(f.origLen)
		if !p.IsRoCE() {
			c.OtherPackets++
			if p.Kind == decode.KindPFC {
				for prio := range 8 {
					if p.Pause.Enable&(1<<prio) != 0 {
						x := c.PFC[uint8(prio)]
						x.Frames++
						x.Quanta += uint64(p.Pause.Quanta[prio])
						c.PFC[uint8(prio)] = x
					}
				}
			}
			continue
		}
		op := p.BTH.Opcode
		k := keyOf(p)
		fl := w.flows[k]
		if fl == nil {
			fl = &flowCount{Flow: synth.Flow{FlowKey: k}, dir: dirOf(p)}
			w.flows[k] = fl
		}
		c.RoCEPackets++
		c.Opcodes[uint8(op)]++
		c.PayloadBytes += uint64(p.PayloadLen)
		fl.Packets++
		fl.Bytes += uint64(f.origLen)
		fl.PayloadBytes += uint64(p.PayloadLen)
		if p.ECNCE() {
			c.ECNCE++
			fl.ECNCE++
		}
		if p.BTH.FECN {
			c.FECN++
		}
		if p.BTH.BECN {
			c.BECN++
		}
		if op.EndsMessage() {
			c.Messages++
			fl.Messages++
		}
		switch {
		case op.IsCNP():
			c.CNP++
			d := dirOf(p)
			q, ok := pr.sqp(d)
			if !ok {
				q = sqpOf[k]
			}
			w.cnps[synth.FlowKey{Src: d.dst, Dst: d.src, DQP: q}]++
		case op == 0x11:
			switch p.AETH.Kind() {
			case decode.AckACK:
				c.Acks++
			case decode.AckRNRNAK:
				c.RNRNAKs++
			case decode.AckNAK:
				c.NAKs++
			}
		case op.IsRequest():
			n := uint32(1)
			if op.IsReadRequest() {
				n = max(1, (p.RETH.DMALen+pmtu-1)/pmtu)
			}
			if e, ok := expected[k]; ok {
				switch d := (p.BTH.PSN - e) & 0xffffff; {
				case d == 0:
				case d < 1<<23:
					c.PSNGaps++
					fl.PSNGaps++
				default:
					c.Retransmits++
					fl.Retransmits++
					continue
				}
			}
			expected[k] = (p.BTH.PSN + n) & 0xffffff
		}
	}

	got = &synth.Truth{Seed: truth.Seed, WindowNS: window, JitterFlows: truth.JitterFlows,
		Total: synth.Counts{Opcodes: map[uint8]uint64{}, PFC: map[uint8]synth.PFCCount{}}}
	totals := map[synth.FlowKey]*synth.Flow{}
	for _, w := range wins {
		for k, n := range w.cnps {
			if fl := w.flows[k]; fl != nil {
				fl.CNPReceived += n
			} else {
				w.w.CNPUnattributed += n
			}
		}
		for k, fl := range w.flows {
			if q, ok := pr.sqp(fl.dir); ok {
				fl.SQP = q
			} else {
				fl.SQP = sqpOf[k]
				if len(pr[fl.dir.reverse()]) > 1 {
					unpaired++
				}
			}
			fl.RateBPS = float64(fl.Bytes) * 8 / (float64(window) / 1e9)
			w.w.PerFlow = append(w.w.PerFlow, fl.Flow)
			t := totals[k]
			if t == nil {
				t = &synth.Flow{FlowKey: k, SQP: fl.SQP}
				totals[k] = t
			}
			t.Packets += fl.Packets
			t.Bytes += fl.Bytes
			t.PayloadBytes += fl.PayloadBytes
			t.Messages += fl.Messages
			t.ECNCE += fl.ECNCE
			t.CNPReceived += fl.CNPReceived
			t.Retransmits += fl.Retransmits
			t.PSNGaps += fl.PSNGaps
		}
		slices.SortFunc(w.w.PerFlow, func(a, b synth.Flow) int { return a.FlowKey.Compare(b.FlowKey) })
		w.w.Flows = uint64(len(w.w.PerFlow))
		got.Windows = append(got.Windows, w.w)
		sumCounts(&got.Total, &w.w.Counts)
	}
	for _, t := range totals {
		got.PerFlow = append(got.PerFlow, *t)
	}
	slices.SortFunc(got.PerFlow, func(a, b synth.Flow) int { return a.FlowKey.Compare(b.FlowKey) })
	got.Total.Flows = uint64(len(got.PerFlow))
	if len(got.Windows) > 0 {
		got.StartNS = got.Windows[0].StartNS
	}
	return got, unpaired
}

// sumCounts adds w to t, except Flows.
func sumCounts(t, w *synth.Counts) {
	for _, x := range [...]struct{ t, w *uint64 }{
		{&t.Packets, &w.Packets}, {&t.Bytes, &w.Bytes}, {&t.RoCEPackets, &w.RoCEPackets},
		{&t.OtherPackets, &w.OtherPackets}, {&t.PayloadBytes, &w.PayloadBytes}, {&t.Messages, &w.Messages},
		{&t.CNP, &w.CNP}, {&t.CNPUnattributed, &w.CNPUnattributed}, {&t.ECNCE, &w.ECNCE}, {&t.FECN, &w.FECN},
		{&t.BECN, &w.BECN}, {&t.NAKs, &w.NAKs}, {&t.RNRNAKs, &w.RNRNAKs}, {&t.Acks, &w.Acks},
		{&t.Retransmits, &w.Retransmits}, {&t.PSNGaps, &w.PSNGaps},
	} {
		*x.t += *x.w
	}
	for op, n := range w.Opcodes {
		t.Opcodes[op] += n
	}
	for prio, n := range w.PFC {
		x := t.PFC[prio]
		x.Frames += n.Frames
		x.Quanta += n.Quanta
		t.PFC[prio] = x
	}
}

// cmpAddr compares netip addresses by value.
var cmpAddr = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

// TestTruthMatchesRecount generates traces with several configurations,
// decodes every frame and compares the truth with one recomputed from the
// decoded fields, window by window, flow by flow and in total.
func TestTruthMatchesRecount(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  synth.Config
	}{
		{"defaults-pmtu1024", synth.Config{Seed: 1, PMTU: 1024}},
		{"pmtu4096-ipv6-vlan", synth.Config{Seed: 2, PMTU: 4096, IPv6Share: 0.9, VLANShare: 1}},
		{"pmtu256-lossy", synth.Config{Seed: 3, PMTU: 256, Packets: 60_000, Flows: 50, LossProb: 0.02, LossBeforeMirror: 0.5,
			RNRProb: 0.05, ECNCEProb: 0.05, ReadShare: 0.4, MaxMessage: 8192}},
		{"short-windows", synth.Config{Seed: 4, PMTU: 2048, Packets: 30_000, Window: 7_000_000, Duration: 100_000_000,
			PFCShare: 0.05, OtherShare: 0.1}},
		{"one-flow-no-extras", synth.Config{Seed: 5, PMTU: 1024, Packets: 5000, Flows: 1, IPv6Share: synth.Off,
			VLANShare: synth.Off, LossProb: synth.Off, RNRProb: synth.Off, ECNCEProb: synth.Off, PFCShare: synth.Off,
			OtherShare: synth.Off}},
		{"many-flows-wrapping-psns", synth.Config{Seed: 6, PMTU: 1024, Packets: 50_000, Flows: 20_000, Hosts: 500, ZipfS: 0.6}},
		{"snap", synth.Config{Seed: 7, PMTU: 4096, Packets: 20_000, SnapLen: synth.MinSnapLen}},
		{"erspan2", synth.Config{Seed: 8, PMTU: 1024, Packets: 20_000, ERSPAN: 2, PFCShare: 0.01, OtherShare: 0.05}},
		{"erspan3-snap", synth.Config{Seed: 9, PMTU: 4096, Packets: 20_000, ERSPAN: 3, SnapLen: synth.MinSnapLen + 54}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && (tc.cfg.Packets == 0 || tc.cfg.Packets > 10_000) {
				tc.cfg.Packets = 10_000 // same features, a tenth of the frames
			}
			frames, tr := generate(t, &tc.cfg, 97)
			if want := tc.cfg.Packets; want != 0 && len(frames) != want {
				t.Fatalf("%d frames, want %d", len(frames), want)
			}
			got, unpaired := recount(t, frames, tr.WindowNS, uint32(tc.cfg.PMTU), tr)
			if d := cmp.Diff(tr, got, cmpAddr, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("truth differs from the recount (-truth +recount):\n%s", d)
			}
			if unpaired*100 > len(tr.PerFlow) {
				t.Errorf("%d of %d flows could not be paired with their reverse direction", unpaired, len(tr.PerFlow))
			}
			// The traces exercise what they are meant to.
			tot := tr.Total
			if tot.Packets != uint64(len(frames)) || tot.RoCEPackets == 0 || tot.Messages == 0 || tot.Acks == 0 {
				t.Errorf("totals %+v", tot)
			}
			if tc.cfg.LossProb > 0 && (tot.NAKs == 0 || tot.Retransmits == 0 || tot.PSNGaps == 0 || tot.RNRNAKs == 0) {
				t.Errorf("lossy trace without NAKs, retransmits, gaps or RNR NAKs: %+v", tot)
			}
			if tc.cfg.ECNCEProb > 0 && (tot.CNP == 0 || tot.ECNCE == 0) {
				t.Errorf("no CNP or ECN-CE: %+v", tot)
			}
		})
	}
}
