package synth_test

import (
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/internal/tsharktest"
)

// TestParseScenario reads scenario lists and names each in String.
func TestParseScenario(t *testing.T) {
	for _, c := range []struct {
		in   string
		want synth.Scenario
	}{
		{"", 0},
		{"incast", synth.ScenarioIncast},
		{"nak, rnr,timeout", synth.ScenarioNAK | synth.ScenarioRNR | synth.ScenarioTimeout},
		{"trouble,psn_wrap", synth.ScenarioTrouble | synth.ScenarioPSNWrap},
		{"healthy", synth.ScenarioHealthy},
		{"all", synth.ScenarioAll},
	} {
		got, err := synth.ParseScenario(c.in)
		if err != nil || got != c.want {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
		if again, err := synth.ParseScenario(got.String()); err != nil || again != got {
			t.Errorf("%q: String %q reads back as %v, %v", c.in, got.String(), again, err)
		}
	}
	if _, err := synth.ParseScenario("incast,flood"); err == nil || !strings.Contains(err.Error(), `"flood"`) {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := synth.New(&synth.Config{Scenario: synth.ScenarioAll, Duration: 800 * time.Millisecond}); err == nil {
		t.Error("all scenarios in 800 ms: no error")
	}
}

// TestScenarioKeepsTheBackground: the scenarios' frames come on top of the
// traffic: without them, the trace is frame for frame what remains of it
// with them.
func TestScenarioKeepsTheBackground(t *testing.T) {
	cfg := synth.Config{Seed: 3, Packets: 5000, Flows: 50}
	plain, _ := generate(t, &cfg, 64)
	cfg.Scenario = synth.ScenarioAll
	mixed, tr := generate(t, &cfg, 100)
	var rest []frame
	for _, f := range mixed {
		if !scenarioFrame(&f) {
			rest = append(rest, f)
		}
	}
	if len(rest) != len(plain) || len(mixed) == len(plain) {
		t.Fatalf("%d frames with the scenarios, %d of them not theirs; %d without", len(mixed), len(rest), len(plain))
	}
	for i := range plain {
		if plain[i].time != rest[i].time || string(plain[i].data) != string(rest[i].data) {
			t.Fatalf("frame %d of the background differs", i)
		}
	}
	if len(tr.Events) != 6 || len(tr.LookAlikes) != 4 {
		t.Errorf("%d events and %d look-alikes in the truth, want 6 and 4", len(tr.Events), len(tr.LookAlikes))
	}
}

// scenarioFrame reports whether f is a scenario's: from a scenario host
// (10.250.0.0/16) or a scenario MAC (0c:42:a1:...).
func scenarioFrame(f *frame) bool {
	return f.data[6] == 0x0c && f.data[7] == 0x42 || f.p.IsRoCE() && f.p.Src.As16()[12] == 10 && f.p.Src.As16()[13] == 250
}

// tsharkFrame is what tshark shows of a frame, for the scenario check.
type tsharkFrame struct {
	time          int64
	len           int
	mac           string
	enable        uint64
	quanta        [8]uint64
	src, dst      string
	ecn           int
	op            int
	dqp, psn      uint32
	syndrome      int
	dma           uint64
	hasAETH, roce bool
}

// readTshark returns the frames of path as tshark decodes them.
func readTshark(t *testing.T, path string) []tsharkFrame {
	fields := []string{"frame.time_epoch", "frame.len", "eth.src", "macc.cbfc.enbv"}
	for p := range 8 {
		fields = append(fields, "macc.cbfc.pause_time.c"+strconv.Itoa(p))
	}
	fields = append(fields, "ip.src", "ip.dst", "ip.dsfield.ecn", "infiniband.bth.opcode", "infiniband.bth.destqp",
		"infiniband.bth.psn", "infiniband.aeth.syndrome", "infiniband.reth.dmalen")
	var args []string
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	num := func(s string) uint64 {
		if s == "" {
			return 0
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), map[bool]int{true: 16, false: 10}[strings.HasPrefix(s, "0x")], 64)
		if err != nil {
			t.Fatalf("tshark field %q: %v", s, err)
		}
		return v
	}
	var out []tsharkFrame
	for _, l := range tshark(t, path, args...) {
		sec, frac, _ := strings.Cut(l[0], ".")
		f := tsharkFrame{time: int64(num(sec))*1e9 + int64(num((frac + "000000000")[:9])), len: int(num(l[1])), mac: l[2], enable: num(l[3])}
		for p := range 8 {
			f.quanta[p] = num(l[4+p])
		}
		f.src, f.dst, f.ecn = l[12], l[13], int(num(l[14]))
		if f.roce = l[15] != ""; f.roce {
			f.op, f.dqp, f.psn = int(num(l[15])), uint32(num(l[16])), uint32(num(l[17]))
			f.hasAETH, f.syndrome, f.dma = l[18] != "", int(num(l[18])), num(l[19])
		}
		out = append(out, f)
	}
	return out
}

// TestScenarioTshark writes a trace with every scenario and finds in it,
// from what tshark decodes and with a simple count of its own (not the
// generator's truth nor rocescope's decoder), each trouble where the truth
// puts it: the storm's frames, first XOFF and resume; the incast's
// sources, start, end and its peak load over a 1 ms slot (and the fan-in's,
// below 80 % of 100 Gb/s); each retransmission's first PSN sent again,
// frames resent, cause (the NAK or RNR NAK before it) and stall; the CE
// marks with no CNP back; and no PSN sent again on the look-alikes.
func TestScenarioTshark(t *testing.T) {
	tsharktest.Require(t)
	frames, tr := generate(t, &synth.Config{Seed: 21, Packets: 4000, Flows: 100, Scenario: synth.ScenarioAll,
		LossProb: synth.Off, RNRProb: synth.Off}, 256)
	path := filepath.Join(t.TempDir(), "scenario.pcap")
	writePcap(t, path, frames)
	seen := readTshark(t, path)
	if len(seen) != len(frames) {
		t.Fatalf("tshark shows %d frames, the trace has %d", len(seen), len(frames))
	}
	byKind := map[string]*synth.Event{}
	for _, list := range [][]synth.Event{tr.Events, tr.LookAlikes} {
		for i := range list {
			byKind[list[i].Kind] = &list[i]
		}
	}
	// PFC storm and isolated pauses.
	for _, kind := range []string{"pfc_storm", "isolated_pauses"} {
		e := byKind[kind]
		var n int
		var first, resume int64
		for _, f := range seen {
			if f.mac != e.MAC || f.enable != 1<<e.Priority {
				continue
			}
			if n++; n == 1 {
				first = f.time
			}
			if f.quanta[e.Priority] == 0 {
				resume = f.time
			}
		}
		if n != e.Frames || first != e.StartNS || kind == "pfc_storm" && resume != e.EndNS {
			t.Errorf("%s: tshark shows %d frames from %d, resume at %d; truth %+v", kind, n, first, resume, e)
		}
	}
	// Incast and fan-in: the requests into the destination.
	slot := int64(time.Millisecond)
	for _, kind := range []string{"incast", "fan_in"} {
		e := byKind[kind]
		srcs := map[string]bool{}
		perSlot := map[int64]int{}
		var first, last int64
		for _, f := range seen {
			if !f.roce || f.dst != e.Dst.String() || f.op == 0x81 {
				continue
			}
			if len(srcs) == 0 {
				first = f.time
			}
			srcs[f.src] = true
			last = f.time
			perSlot[f.time/slot] += f.len
		}
		peak := slices.Max(slices.Collect(maps.Values(perSlot)))
		var want []string
		for _, s := range e.Senders {
			want = append(want, s.Src.String())
		}
		got := slices.Sorted(maps.Keys(srcs))
		slices.Sort(want)
		if !slices.Equal(got, want) || first != e.StartNS || last != e.EndNS {
			t.Errorf("%s: tshark shows sources %v from %d to %d; truth %v, %d to %d", kind, got, first, last, want, e.StartNS, e.EndNS)
		}
		load := float64(peak) * 8 / 1e-3 / 100e9
		if kind == "incast" && load < 0.8 || kind == "fan_in" && load >= 0.8 {
			t.Errorf("%s: the busiest 1 ms slot carries %.2f of 100 Gb/s", kind, load)
		}
	}
	// Retransmissions, and none on the PSN wrap and READs.
	for _, e := range append(slices.Clone(tr.Events), tr.LookAlikes...) {
		if e.Flow == nil {
			continue
		}
		ep := firstEpisode(seen, e.Flow)
		switch e.Kind {
		case "retransmission":
			if ep == nil || ep.firstPSN != e.FirstPSN || ep.resent != e.Resent || ep.cause != e.Cause || ep.trouble != e.StartNS ||
				ep.first-ep.trouble != e.StallNS || e.Cause != "timeout" && ep.code != e.NAKCode {
				t.Errorf("%s %s: tshark shows %+v; truth %+v", e.Kind, e.Cause, ep, e)
			}
		case "psn_wrap", "read_responses", "ce_without_cnp":
			if ep != nil {
				t.Errorf("%s: tshark shows PSNs sent again: %+v", e.Kind, ep)
			}
		}
		if e.Kind == "ce_without_cnp" {
			var ce, cnp, back int
			var first, last int64
			for _, f := range seen {
				switch {
				case !f.roce:
				case f.src == e.Flow.Src.String() && f.dqp == e.Flow.DQP && f.ecn == 3:
					if ce++; ce == 1 {
						first = f.time
					}
					last = f.time
				case f.src == e.Flow.Dst.String() && f.dqp == e.Flow.SQP:
					back++
					if f.op == 0x81 {
						cnp++
					}
				}
			}
			if ce != e.ECNCE || first != e.StartNS || last != e.EndNS || cnp != 0 || back == 0 {
				t.Errorf("ce_without_cnp: tshark shows %d CE marks from %d to %d, %d frames back, %d CNPs; truth %+v", ce, first, last, back, cnp, e)
			}
		}
	}
}

// episode is a retransmission found by firstEpisode.
type episode struct {
	trouble, first int64
	firstPSN       uint32
	resent         int
	cause          string
	code           int
}

// firstEpisode finds the first run of requests of flow f whose PSNs are at
// or below the highest sent (24-bit serial arithmetic; a READ request
// takes a PSN per 4096 bytes), with its cause: the last NAK or RNR NAK on
// the reverse direction before it, or else a timeout after the last
// request. It returns nil when the flow sent no PSN again.
func firstEpisode(seen []tsharkFrame, f *synth.EventFlow) *episode {
	const mask = 1<<24 - 1
	var next uint32 // the PSN after the highest sent
	started := false
	var ep *episode
	var lastReq, nakAt int64
	nakSyn := -1
	for _, x := range seen {
		if !x.roce {
			continue
		}
		if x.src == f.Dst.String() && x.dqp == f.SQP && x.hasAETH && x.syndrome>>5 != 0 && x.op == 0x11 {
			nakAt, nakSyn = x.time, x.syndrome
		}
		if x.src != f.Src.String() || x.dqp != f.DQP || x.op >= 0x0D && x.op <= 0x11 || x.op == 0x81 {
			continue // not a request of the flow
		}
		behind := started && (x.psn-next)&mask >= 1<<23
		switch {
		case behind && ep == nil:
			ep = &episode{trouble: lastReq, first: x.time, firstPSN: x.psn, cause: "timeout", resent: 1}
			if nakSyn >= 0 {
				ep.trouble, ep.cause, ep.code = nakAt, map[bool]string{true: "rnr", false: "nak"}[nakSyn>>5 == 1], nakSyn&31
			}
		case behind:
			ep.resent++
		case ep != nil:
			return ep // a new PSN ends it
		default:
			n := uint32(1)
			if x.op == 0x0C {
				n = uint32(max(1, (x.dma+4095)/4096))
			}
			next, started = (x.psn+n)&mask, true
		}
		lastReq = x.time
	}
	return ep
}
