package synth_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
)

// udpOffset returns where the UDP header of a decoded RoCEv2 frame starts,
// inside the ERSPAN encapsulation when there is one.
func udpOffset(p *decode.Packet) int {
	off := 14 + 4*int(p.NumVLAN)
	switch p.Mirror {
	case decode.MirrorERSPAN2:
		off += 50
	case decode.MirrorERSPAN3:
		off += 54
	}
	if p.Headers&decode.HasIPv6 != 0 {
		return off + 40
	}
	return off + 20
}

// TestGoBackN checks the retransmissions without loss before the mirror
// and with mixed path MTUs, against a definition that needs no PMTU: a
// retransmit is a request repeating a PSN already seen on its flow. Every
// run of retransmissions starts at the PSN of a NAK or RNR NAK the
// responder sent back, and every retransmitted packet carries the same
// UDP payload (BTH, headers, data and ICRC) as its first transmission.
func TestGoBackN(t *testing.T) {
	frames, tr := generate(t, &synth.Config{Seed: 31, Packets: 80_000, Flows: 200, LossProb: 0.01,
		LossBeforeMirror: synth.Off, RNRProb: 0.05}, 64)
	if tr.Total.PSNGaps != 0 {
		t.Errorf("psn_gaps = %d without loss before the mirror", tr.Total.PSNGaps)
	}
	type fk struct {
		k   synth.FlowKey
		psn uint32
	}
	first := map[fk][]byte{}          // first transmission of each request PSN
	inRun := map[synth.FlowKey]bool{} // the flow's last request was a retransmission
	naks := map[dirKey][]uint32{}     // PSNs of NAKs and RNR NAKs not yet followed by a run
	perWin := map[int64]map[synth.FlowKey]uint64{}
	var runs, nakCount int
	for i := range frames {
		f, p := &frames[i], &frames[i].p
		if !p.IsRoCE() {
			continue
		}
		op := p.BTH.Opcode
		if op == 0x11 && (p.AETH.Kind() == decode.AckNAK || p.AETH.Kind() == decode.AckRNRNAK) {
			naks[dirOf(p)] = append(naks[dirOf(p)], p.BTH.PSN)
			nakCount++
			continue
		}
		if !op.IsRequest() {
			continue
		}
		k := keyOf(p)
		x := fk{k, p.BTH.PSN}
		body := f.data[udpOffset(p):]
		orig, seen := first[x]
		if !seen {
			first[x] = body
			inRun[k] = false
			continue
		}
		if !bytes.Equal(orig, body) {
			t.Errorf("frame %d: retransmission of PSN %d on %v differs from the first transmission", i+1, p.BTH.PSN, k)
		}
		if !inRun[k] {
			back := dirOf(p).reverse()
			j := slices.Index(naks[back], p.BTH.PSN)
			if j < 0 {
				t.Errorf("frame %d: retransmission from PSN %d on %v without a NAK for it (NAKs %v)", i+1, p.BTH.PSN, k, naks[back])
			} else {
				naks[back] = slices.Delete(naks[back], j, j+1)
			}
			runs++
			inRun[k] = true
		}
		w := f.time - f.time%tr.WindowNS
		if perWin[w] == nil {
			perWin[w] = map[synth.FlowKey]uint64{}
		}
		perWin[w][k]++
	}
	if runs == 0 || runs < nakCount*9/10 {
		t.Errorf("%d retransmission runs for %d NAKs and RNR NAKs", runs, nakCount)
	}
	total := uint64(0)
	for _, w := range tr.Windows {
		got := map[synth.FlowKey]uint64{}
		for _, f := range w.PerFlow {
			if f.Retransmits != 0 {
				got[f.FlowKey] = f.Retransmits
			}
		}
		if d := gocmp.Diff(perWin[w.StartNS], got, cmpAddr, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("window %d: retransmits per flow (-repeated PSNs +truth):\n%s", w.StartNS, d)
		}
		total += w.Retransmits
	}
	if total == 0 || total != tr.Total.Retransmits {
		t.Errorf("retransmits: windows sum to %d, total %d", total, tr.Total.Retransmits)
	}
}

// TestCNPFollowsCE checks that CNPs go back only to senders of CE-marked
// packets: at every CNP, the reverse direction has carried more CE-marked
// packets than this direction has carried CNPs, and the CNP goes to the QP
// that the direction's ACKs or requests go to.
func TestCNPFollowsCE(t *testing.T) {
	frames, tr := generate(t, &synth.Config{Seed: 32, Packets: 50_000, ECNCEProb: 0.05, ReadShare: 0.5}, 128)
	ce, cnp := map[dirKey]int{}, map[dirKey]int{}
	qps := map[dirKey]map[uint32]bool{}
	for i := range frames {
		p := &frames[i].p
		if p.IsRoCE() && !p.BTH.Opcode.IsCNP() {
			d := dirOf(p)
			if qps[d] == nil {
				qps[d] = map[uint32]bool{}
			}
			qps[d][p.BTH.DestQP] = true
		}
	}
	bothWays := 0
	for i := range frames {
		p := &frames[i].p
		if !p.IsRoCE() {
			continue
		}
		d := dirOf(p)
		if !p.BTH.Opcode.IsCNP() {
			if p.ECNCE() {
				ce[d]++
			}
			continue
		}
		cnp[d]++
		if cnp[d] > ce[d.reverse()] {
			t.Errorf("frame %d: CNP %d on %v after only %d CE-marked packets the other way", i+1, cnp[d], d, ce[d.reverse()])
		}
		if p.ECN == 3 || !p.BTH.BECN || p.DSCP != 48 || p.PayloadLen != 0 || p.IPLen == 0 {
			t.Errorf("frame %d: CNP with ECN %d BECN %v DSCP %d payload %d", i+1, p.ECN, p.BTH.BECN, p.DSCP, p.PayloadLen)
		}
		if q := qps[d]; len(q) > 0 && !q[p.BTH.DestQP] {
			t.Errorf("frame %d: CNP to QP %d, the direction's other packets go to %v", i+1, p.BTH.DestQP, q)
		}
		if cnp[d] == 1 && cnp[d.reverse()] > 0 {
			bothWays++
		}
	}
	if tr.Total.CNP == 0 || bothWays == 0 {
		t.Errorf("%d CNPs, %d connections with CNPs both ways", tr.Total.CNP, bothWays)
	}
	for _, f := range tr.PerFlow {
		if f.CNPReceived > 0 && f.ECNCE == 0 {
			t.Errorf("flow %v received %d CNPs but sent no CE-marked packet", f.FlowKey, f.CNPReceived)
		}
	}
}

// TestReadResponses checks that every READ response run answers an
// earlier READ request of the connection: it starts at the request's PSN,
// its PSNs follow each other, First/Middle/Last (or Only) come in order,
// every packet but the last is full-size, the payloads add up to the
// request's DMA length and the count is max(1, ceil(length/PMTU)).
func TestReadResponses(t *testing.T) {
	frames, tr := generate(t, &synth.Config{Seed: 33, Packets: 60_000, Flows: 100, ReadShare: 0.6}, 128)
	type run struct {
		psn, next, n uint32
		length, sum  uint32
		pmtu         uint32
		open         bool
	}
	reads := map[dirKey]map[uint32]uint32{} // requests by direction: PSN -> DMA length
	runs := map[dirKey]*run{}
	done := 0
	for i := range frames {
		p := &frames[i].p
		if !p.IsRoCE() {
			continue
		}
		d, op := dirOf(p), p.BTH.Opcode
		if op.IsReadRequest() {
			if reads[d] == nil {
				reads[d] = map[uint32]uint32{}
			}
			reads[d][p.BTH.PSN] = p.RETH.DMALen
			continue
		}
		if !op.IsReadResponse() {
			continue
		}
		r := runs[d]
		if r == nil {
			r = &run{}
			runs[d] = r
		}
		switch op {
		case 0x0D, 0x10: // First, Only
			if r.open {
				t.Fatalf("frame %d: READ response %v before the last of the run at PSN %d", i+1, op, r.psn)
			}
			l, ok := reads[d.reverse()][p.BTH.PSN]
			if !ok {
				t.Fatalf("frame %d: READ response at PSN %d answers no READ request", i+1, p.BTH.PSN)
			}
			delete(reads[d.reverse()], p.BTH.PSN)
			*r = run{psn: p.BTH.PSN, next: p.BTH.PSN, length: l, pmtu: p.PayloadLen, open: true}
		default: // Middle, Last
			if !r.open || p.BTH.PSN != r.next || p.PayloadLen > r.pmtu {
				t.Fatalf("frame %d: READ response %v PSN %d payload %d; run %+v", i+1, op, p.BTH.PSN, p.PayloadLen, *r)
			}
		}
		if op == 0x0E && p.PayloadLen != r.pmtu {
			t.Errorf("frame %d: READ response Middle of %d bytes, First had %d", i+1, p.PayloadLen, r.pmtu)
		}
		hasAETH := p.Headers&decode.HasAETH != 0
		if hasAETH != (op != 0x0E) || hasAETH && p.AETH.Kind() != decode.AckACK {
			t.Errorf("frame %d: %v with AETH %v %+v", i+1, op, hasAETH, p.AETH)
		}
		r.next = (r.next + 1) & 0xffffff
		r.n++
		r.sum += p.PayloadLen
		if op == 0x0F || op == 0x10 {
			r.open = false
			done++
			if want := max(1, (r.length+r.pmtu-1)/max(r.pmtu, 1)); r.sum != r.length || op == 0x0F && r.n != want {
				t.Errorf("frame %d: READ of %d bytes answered by %d packets of %d bytes (PMTU %d)", i+1, r.length, r.n, r.sum, r.pmtu)
			}
			if r.pmtu != 1024 && r.pmtu != 4096 && op == 0x0F {
				t.Errorf("frame %d: READ response First of %d bytes", i+1, r.pmtu)
			}
		}
	}
	if done == 0 || tr.Total.Opcodes[0x0E] == 0 || tr.Total.Opcodes[0x10] == 0 {
		t.Errorf("%d READ response runs; opcodes %v", done, tr.Total.Opcodes)
	}
}

// TestDeterminism checks that a Config gives the same frames and truth
// whatever the batch size, and that another seed gives another trace.
func TestDeterminism(t *testing.T) {
	cfg := synth.Config{Seed: 41, Packets: 20_000, Flows: 300}
	a, ta := generate(t, &cfg, 1)
	b, tb := generate(t, &cfg, 250)
	same := func(x, y []frame) bool {
		return slices.EqualFunc(x, y, func(f, g frame) bool {
			return f.time == g.time && f.origLen == g.origLen && bytes.Equal(f.data, g.data)
		})
	}
	if !same(a, b) {
		t.Error("same config, different frames")
	}
	if d := gocmp.Diff(ta, tb, cmpAddr); d != "" {
		t.Errorf("same config, different truth:\n%s", d)
	}
	cfg.Seed++
	c, _ := generate(t, &cfg, 250)
	if same(a, c) {
		t.Error("another seed, same frames")
	}
}

// TestSnapLen checks that a snap length cuts frames without changing their
// first bytes, their on-wire lengths or the truth.
func TestSnapLen(t *testing.T) {
	cfg := synth.Config{Seed: 42, Packets: 20_000}
	full, tf := generate(t, &cfg, 100)
	cfg.SnapLen = 128
	cut, tc := generate(t, &cfg, 100)
	if len(full) != len(cut) {
		t.Fatalf("%d frames, %d with a snap length", len(full), len(cut))
	}
	shorter := 0
	for i := range full {
		f, c := &full[i], &cut[i]
		if f.time != c.time || f.origLen != c.origLen || len(c.data) != min(len(f.data), 128) || !bytes.HasPrefix(f.data, c.data) {
			t.Fatalf("frame %d: %d of %d bytes at %d, whole: %d of %d at %d", i+1, len(c.data), c.origLen, c.time, len(f.data), f.origLen, f.time)
		}
		if len(c.data) < len(f.data) {
			shorter++
			if c.p.IsRoCE() && (c.p.Headers&decode.HasICRC != 0 || c.p.PayloadLen != f.p.PayloadLen) {
				t.Errorf("frame %d: cut RoCE frame with ICRC %v, payload %d (whole %d)", i+1, c.p.Headers&decode.HasICRC != 0, c.p.PayloadLen, f.p.PayloadLen)
			}
		}
	}
	if shorter == 0 {
		t.Error("no frame was cut")
	}
	if d := gocmp.Diff(tf, tc, cmpAddr); d != "" {
		t.Errorf("truth changed with the snap length (-whole +cut):\n%s", d)
	}
}

// TestJitterFlows checks that the jitter connections swing at least
// fourfold between adjacent windows and are among the fastest flows when
// busy.
func TestJitterFlows(t *testing.T) {
	_, tr := generate(t, &synth.Config{Seed: 43, Packets: 120_000, Duration: 4 * time.Second}, 256)
	if len(tr.JitterFlows) != synth.DefaultJitterFlows || len(tr.Windows) != 4 {
		t.Fatalf("%d jitter flows, %d windows", len(tr.JitterFlows), len(tr.Windows))
	}
	for _, k := range tr.JitterFlows {
		var rates []float64
		for i := range tr.Windows {
			f := tr.Windows[i].Flow(k)
			if f == nil {
				t.Fatalf("jitter flow %v silent in window %d", k, i)
			}
			rates = append(rates, f.RateBPS)
		}
		for i := 1; i < len(rates); i++ {
			lo, hi := min(rates[i-1], rates[i]), max(rates[i-1], rates[i])
			if hi < 4*lo {
				t.Errorf("jitter flow %v: rates %v do not swing", k, rates)
			}
		}
		w := &tr.Windows[slices.Index(rates, slices.Max(rates))]
		faster := 0
		for _, f := range w.PerFlow {
			if f.RateBPS > slices.Max(rates) {
				faster++
			}
		}
		if faster > 2*len(tr.JitterFlows) {
			t.Errorf("jitter flow %v at %.0f b/s: %d flows faster", k, slices.Max(rates), faster)
		}
	}
}

// TestElephants checks the Zipf skew: in a window, the fastest 1% of the
// flows carry a large share of the bytes and the median flow a tiny one.
func TestElephants(t *testing.T) {
	_, tr := generate(t, &synth.Config{Seed: 44, JitterFlows: synth.Off}, 256)
	for _, w := range tr.Windows {
		b := make([]uint64, 0, len(w.PerFlow))
		sum := uint64(0)
		for _, f := range w.PerFlow {
			b = append(b, f.Bytes)
			sum += f.Bytes
		}
		slices.SortFunc(b, func(x, y uint64) int { return cmp.Compare(y, x) })
		top := uint64(0)
		for _, x := range b[:len(b)/100] {
			top += x
		}
		if top*4 < sum || b[len(b)/2]*1000 > sum {
			t.Errorf("window %d: top 1%% of %d flows carry %d of %d bytes, the median %d", w.StartNS, len(b), top, sum, b[len(b)/2])
		}
	}
}

// TestConfigErrors checks that New rejects invalid configs with ErrConfig.
func TestConfigErrors(t *testing.T) {
	for _, c := range []synth.Config{
		{Flows: synth.MaxFlows + 1}, {Flows: synth.Off}, {Hosts: 1}, {Start: -5}, {Window: synth.Off}, {Duration: -time.Second},
		{ZipfS: synth.Off}, {MaxMessage: synth.Off}, {PMTU: 1000}, {PMTU: 8192}, {DSCP: 64}, {Flows: 3, JitterFlows: 3},
		{JitterFlows: 10, JitterShare: 0.1}, {SnapLen: synth.MinSnapLen - 1}, {ReadShare: 0.6, SendShare: 0.6},
		{OtherShare: 0.5, PFCShare: 0.5}, {LossProb: 1.5}, {ECNCEProb: 2}, {Hosts: 1<<16 + 1}, {Start: 1<<62 + 1},
		{ERSPAN: 1}, {ERSPAN: 2, SnapLen: synth.MinSnapLen},
		{VLANShare: math.NaN()},
	} {
		if _, err := synth.New(&c); !errors.Is(err, synth.ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", c, err)
		}
	}
}

// TestSourceContract checks the capture.Source behaviour: an empty batch
// is refused, io.EOF repeats with an empty batch after the end, and Next
// after Close returns os.ErrClosed.
func TestSourceContract(t *testing.T) {
	src, err := synth.New(&synth.Config{Packets: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Next(&capture.Batch{}); !errors.Is(err, capture.ErrNoRoom) {
		t.Errorf("Next(zero batch) = %v", err)
	}
	b := capture.NewBatch(4)
	n := 0
	for err = src.Next(b); err == nil; err = src.Next(b) {
		n += len(b.Frames)
	}
	if !errors.Is(err, io.EOF) || n != 10 {
		t.Errorf("%d frames, then %v", n, err)
	}
	tr := src.Truth()
	if err := src.Next(b); !errors.Is(err, io.EOF) || len(b.Frames) != 0 || src.Truth() != tr {
		t.Errorf("after the end: %v, %d frames", err, len(b.Frames))
	}
	for range 2 {
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Next(b); !errors.Is(err, os.ErrClosed) || len(b.Frames) != 0 {
		t.Errorf("Next after Close = %v with %d frames, want os.ErrClosed and none", err, len(b.Frames))
	}
}

// TestStatsConcurrent reads Stats and closes the source while another
// goroutine calls Next (run with -race).
func TestStatsConcurrent(t *testing.T) {
	src, err := synth.New(&synth.Config{Packets: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		b := capture.NewBatch(64)
		for {
			if err := src.Next(b); err != nil {
				done <- err
				return
			}
		}
	}()
	for src.Stats().Received < 10_000 {
		runtime.Gosched()
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Errorf("Next after Close = %v", err)
	}
}

// TestTruthJSON checks that the truth encodes with the documented keys and
// decodes back to itself.
func TestTruthJSON(t *testing.T) {
	_, tr := generate(t, &synth.Config{Seed: 45, Packets: 5000, Flows: 20, PFCShare: 0.01}, 100)
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var back synth.Truth
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := gocmp.Diff(tr, &back, cmpAddr); d != "" {
		t.Errorf("JSON round trip (-before +after):\n%s", d)
	}
	for _, w := range tr.Windows {
		if got := tr.Window(w.StartNS); got == nil || got.StartNS != w.StartNS || got.Packets != w.Packets {
			t.Errorf("Window(%d) = %+v", w.StartNS, got)
		}
		for _, f := range w.PerFlow {
			if got := w.Flow(f.FlowKey); got == nil || *got != f {
				t.Errorf("window %d: Flow(%v) = %+v, want %+v", w.StartNS, f.FlowKey, got, f)
			}
			if tot := tr.Flow(f.FlowKey); tot == nil || tot.Packets < f.Packets || tot.SQP != f.SQP {
				t.Errorf("Flow(%v) = %+v, window entry %+v", f.FlowKey, tot, f)
			}
		}
	}
	if tr.Window(tr.StartNS-tr.WindowNS) != nil || tr.Window(tr.StartNS+1) != nil || tr.Flow(synth.FlowKey{}) != nil {
		t.Error("lookups of absent windows or flows found something")
	}
	var raw struct {
		Windows []map[string]json.RawMessage `json:"windows"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"start_ns", "packets", "bytes", "roce_packets", "other_packets", "flows", "opcodes", "messages",
		"cnp", "ecn_ce", "naks", "rnr_naks", "acks", "retransmits", "psn_gaps", "pfc", "per_flow"} {
		if _, ok := raw.Windows[0][k]; !ok {
			t.Errorf("window JSON lacks %q", k)
		}
	}
	var flows []map[string]any
	if err := json.Unmarshal(raw.Windows[0]["per_flow"], &flows); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"src", "dst", "dqp", "sqp", "packets", "bytes", "rate_bps", "payload_bytes", "cnp_received",
		"retransmits", "ecn_ce", "messages"} {
		if _, ok := flows[0][k]; !ok {
			t.Errorf("flow JSON lacks %q: %v", k, flows[0])
		}
	}
}

// TestCNPThrottles checks the rate control: when CNPs come back, the
// busiest requester, which receives the most, sends a clearly smaller
// share of the request packets than without congestion.
func TestCNPThrottles(t *testing.T) {
	share := func(ce float64) float64 {
		frames, tr := generate(t, &synth.Config{Seed: 5, Packets: 50_000, Flows: 10, JitterFlows: synth.Off, ECNCEProb: ce,
			Duration: 50_000_000, Window: 10_000_000}, 512)
		if ce > 0 && tr.Total.CNP == 0 {
			t.Fatal("no CNP")
		}
		req := map[synth.FlowKey]int{}
		total := 0
		for i := range frames {
			if p := &frames[i].p; p.IsRoCE() && p.BTH.Opcode.IsRequest() {
				req[keyOf(p)]++
				total++
			}
		}
		top := 0
		for _, n := range req {
			top = max(top, n)
		}
		return float64(top) / float64(total)
	}
	calm, congested := share(synth.Off), share(0.02)
	if congested > 0.8*calm {
		t.Errorf("the busiest requester sends %.3f of the requests with CNPs, %.3f without", congested, calm)
	}
}

// TestAcks checks the responder's acknowledgements: every ACK, NAK and
// RNR NAK answers the reverse direction's requests, an ACK carries the PSN
// of a request already seen and an RNR NAK the PSN of a SEND First or Only
// already seen, a NAK the PSN its requester resends next, and the MSN never
// goes back.
func TestAcks(t *testing.T) {
	frames, tr := generate(t, &synth.Config{Seed: 34, Packets: 60_000, Flows: 100, LossProb: 0.01, RNRProb: 0.05}, 128)
	seen := map[dirKey]map[uint32]decode.Opcode{} // request PSNs by direction, with their opcode
	msn := map[dirKey]uint32{}
	nakFor := map[dirKey]uint32{} // direction -> PSN a NAK asked it to resend from
	var acks, naks, rnrs int
	for i := range frames {
		p := &frames[i].p
		if !p.IsRoCE() {
			continue
		}
		d, op := dirOf(p), p.BTH.Opcode
		if op.IsRequest() {
			if want, ok := nakFor[d]; ok {
				if p.BTH.PSN != want {
					t.Errorf("frame %d: after a NAK for PSN %d the requester sends PSN %d", i+1, want, p.BTH.PSN)
				}
				delete(nakFor, d)
			}
			if seen[d] == nil {
				seen[d] = map[uint32]decode.Opcode{}
			}
			seen[d][p.BTH.PSN] = op
			continue
		}
		if op != 0x11 {
			continue
		}
		req := seen[d.reverse()]
		if m, ok := msn[d]; ok && (p.AETH.MSN-m)&0xffffff >= 1<<23 {
			t.Errorf("frame %d: MSN %d after %d", i+1, p.AETH.MSN, m)
		}
		msn[d] = p.AETH.MSN
		switch p.AETH.Kind() {
		case decode.AckACK:
			acks++
			if _, ok := req[p.BTH.PSN]; !ok {
				t.Errorf("frame %d: ACK of PSN %d, which the requester has not sent", i+1, p.BTH.PSN)
			}
		case decode.AckRNRNAK:
			rnrs++
			if op, ok := req[p.BTH.PSN]; !ok || op != 0x00 && op != 0x04 && op != 0x05 {
				t.Errorf("frame %d: RNR NAK of PSN %d (opcode %v, seen %v)", i+1, p.BTH.PSN, op, ok)
			}
			nakFor[d.reverse()] = p.BTH.PSN
		case decode.AckNAK:
			naks++
			if p.AETH.NAKCode() != decode.NAKPSNSequenceError {
				t.Errorf("frame %d: NAK %v", i+1, p.AETH.NAKCode())
			}
			nakFor[d.reverse()] = p.BTH.PSN
		default:
			t.Errorf("frame %d: AETH %+v", i+1, p.AETH)
		}
	}
	if acks == 0 || naks == 0 || rnrs == 0 || uint64(acks) != tr.Total.Acks || uint64(naks) != tr.Total.NAKs {
		t.Errorf("%d ACKs, %d NAKs, %d RNR NAKs; truth %+v", acks, naks, rnrs, tr.Total)
	}
}
