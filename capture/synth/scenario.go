package synth

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rocescope/rocescope/decode"
)

// Scenario is a set of troubles, and of healthy traffic that looks like
// them, that a Source injects on top of its traffic, each once, with
// exact truth (Truth.Events, Truth.LookAlikes). The zero value injects
// nothing.
type Scenario uint16

// Scenarios, in the order they are placed in time.
const (
	ScenarioPFCStorm     Scenario = 1 << iota // a priority paused by one MAC's XOFF frames, refreshed every 50 µs, for 300 ms
	ScenarioIncast                            // 16 senders at 10 Gb/s each into one destination for 3 ms
	ScenarioNAK                               // a packet lost after the mirror, a NAK, go-back-N from it
	ScenarioTimeout                           // a message's last packet lost after the mirror, 16 ms of silence, the message again
	ScenarioRNR                               // a SEND refused with an RNR NAK, sent again 1.28 ms later
	ScenarioCEWithoutCNP                      // 100 CE marks on a flow whose receiver ACKs and sends no CNP
	ScenarioFanIn                             // healthy: 64 senders at 0.5 Gb/s each into one destination for 20 ms
	ScenarioPauses                            // healthy: 10 XOFF frames 10 ms apart
	ScenarioPSNWrap                           // healthy: WRITEs whose PSNs wrap through 0
	ScenarioReads                             // healthy: READs of 256 KiB and their responses, then a WRITE
	scenarioEnd

	// ScenarioTrouble is every trouble; ScenarioHealthy every look-alike.
	ScenarioTrouble = ScenarioPFCStorm | ScenarioIncast | ScenarioNAK | ScenarioTimeout | ScenarioRNR | ScenarioCEWithoutCNP
	ScenarioHealthy = ScenarioFanIn | ScenarioPauses | ScenarioPSNWrap | ScenarioReads
	ScenarioAll     = ScenarioTrouble | ScenarioHealthy
)

// scenarioNames are the names of the scenarios, as ParseScenario reads
// them and the truth's events and look-alikes name their kind.
var scenarioNames = map[Scenario]string{
	ScenarioPFCStorm: "pfc_storm", ScenarioIncast: "incast", ScenarioNAK: "nak", ScenarioTimeout: "timeout",
	ScenarioRNR: "rnr", ScenarioCEWithoutCNP: "ce_without_cnp", ScenarioFanIn: "fan_in", ScenarioPauses: "isolated_pauses",
	ScenarioPSNWrap: "psn_wrap", ScenarioReads: "read_responses",
}

// String returns the scenarios' names joined by commas.
func (s Scenario) String() string {
	var names []string
	for x := Scenario(1); x < scenarioEnd; x <<= 1 {
		if s&x != 0 {
			names = append(names, scenarioNames[x])
		}
	}
	return strings.Join(names, ",")
}

// ParseScenario reads a comma-separated list of scenario names: pfc_storm,
// incast, nak, timeout, rnr, ce_without_cnp, fan_in, isolated_pauses,
// psn_wrap, read_responses, or trouble (the first six), healthy (the
// others), all.
func ParseScenario(text string) (Scenario, error) {
	var s Scenario
	for _, name := range strings.Split(text, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "":
			continue
		case "all":
			s |= ScenarioAll
			continue
		case "trouble":
			s |= ScenarioTrouble
			continue
		case "healthy":
			s |= ScenarioHealthy
			continue
		}
		found := false
		for x, n := range scenarioNames {
			if n == name {
				s, found = s|x, true
			}
		}
		if !found {
			return 0, fmt.Errorf("synth: unknown scenario %q (want %s, trouble, healthy or all): %w", name, ScenarioAll, ErrConfig)
		}
	}
	return s, nil
}

// Event is the truth of a trouble a scenario injected, named by the kind
// of event a report gives it (incast, pfc_storm, retransmission,
// ce_without_cnp); or, in Truth.LookAlikes, of healthy traffic that must
// raise no event, named by its scenario. StartNS is when the trouble began:
// the first frame of a burst or a storm, the first CE mark, the NAK or RNR
// NAK that asked for a retransmission, or the last frame before the
// silence of a timeout; EndNS when it ended: the last frame of a burst or
// CE mark, the resume ending a storm, the last frame sent again.
type Event struct {
	Kind    string `json:"kind"`
	StartNS int64  `json:"start_ns"`
	EndNS   int64  `json:"end_ns"`

	// Incast and fan-in: the destination and the flows into it.
	Dst     netip.Addr  `json:"dst,omitzero"`
	Senders []EventFlow `json:"senders,omitempty"`

	// PFC storm and isolated pauses.
	MAC      string `json:"mac,omitempty"` // lowercase, colon-separated
	Priority int    `json:"priority,omitempty"`
	Frames   int    `json:"frames,omitempty"`

	// Retransmission, CE without CNP, PSN wrap, READ responses: the flow.
	Flow     *EventFlow `json:"flow,omitempty"`
	Cause    string     `json:"cause,omitempty"` // nak, rnr or timeout
	FirstPSN uint32     `json:"first_psn,omitempty"`
	Resent   int        `json:"resent,omitempty"`
	StallNS  int64      `json:"stall_ns,omitempty"`
	NAKCode  int        `json:"nak_code,omitempty"` // the NAK's code, or the RNR NAK's timer
	ECNCE    int        `json:"ecn_ce,omitempty"`
}

// EventFlow names a flow of an event: its key and the QP that sends it.
type EventFlow struct {
	FlowKey
	SQP uint32 `json:"sqp"`
}

// Times of the scenarios.
const (
	incastSenders  = 16
	incastGap      = 3315 // ns between frames of a sender: 4154-byte frames at about 10 Gb/s
	incastFrames   = 903  // 3 ms
	stormGap       = 50_000
	stormFrames    = 6000
	fanInSenders   = 64
	fanInGap       = 66_460 // 0.5 Gb/s
	fanInFrames    = 300
	timeoutNS      = 16_000_000
	rnrTimerNS     = 1_280_000
	rnrTimerCode   = 14
	stormSlotNS    = 350 * 1_000_000 // time the storm takes, with room after it
	scenarioSlotNS = 60 * 1_000_000  // time each other scenario takes, with room
)

// scripted is a frame a scenario writes: a RoCE packet, or a PFC frame.
type scripted struct {
	t   int64
	p   packet
	pfc *pfcFrame
}

// scenarioHost returns scenario host n (from 1): 02:00:00:fa:00:n,
// 10.250.0.n, fd00::fa:n, apart from the hosts of the background traffic.
func scenarioHost(n int) host {
	var h host
	h.mac = [6]byte{0x02, 0, 0, 0xfa, byte(n >> 8), byte(n)}
	h.ip4 = [4]byte{10, 250, byte(n >> 8), byte(n)}
	h.ip6 = [16]byte{0xfd, 0x00, 14: byte(n >> 8), 15: byte(n)}
	h.ip6[12], h.ip6[13] = 0, 0xfa
	h.addr = [2]netip.Addr{netip.AddrFrom4(h.ip4), netip.AddrFrom16(h.ip6)}
	return h
}

// script builds the frames of the scenarios of cfg.
type script struct {
	s      *Source
	rng    rng
	frames []scripted
	truth  []Event
	looks  []Event
	qp     uint32 // next QP number
}

// makeScenario adds the scenario hosts and connections to s, with their
// flows' keys and sending QPs appended to keys and sqp, and writes the
// script; it returns keys and sqp.
func (s *Source) makeScenario(keys []FlowKey, sqp []uint32) ([]FlowKey, []uint32, error) {
	sc := s.cfg.Scenario
	if sc == 0 {
		return keys, sqp, nil
	}
	// Each scenario has a slot of time, spread evenly over the duration
	// with equal gaps between them, in the order of the constants.
	slot := func(x Scenario) int64 {
		if x == ScenarioPFCStorm {
			return stormSlotNS
		}
		return scenarioSlotNS
	}
	free, n := int64(s.cfg.Duration), int64(0)
	for x := Scenario(1); x < scenarioEnd; x <<= 1 {
		if sc&x != 0 {
			free, n = free-slot(x), n+1
		}
	}
	if free < 0 {
		return nil, nil, fmt.Errorf("synth: duration %v is too short for the scenarios %s, which take %v: %w",
			s.cfg.Duration, sc, time.Duration(int64(s.cfg.Duration)-free), ErrConfig)
	}
	gap := free / (n + 1)
	b := &script{s: s, rng: newRNG(s.cfg.Seed ^ 0x5ce7a210), qp: 0x100}
	t := s.cfg.Start + gap
	for x := Scenario(1); x < scenarioEnd; x <<= 1 {
		if sc&x == 0 {
			continue
		}
		at := t + int64(b.rng.intn(int(min(gap, 1_000_000))+1))
		if w := int64(s.cfg.Window); x != ScenarioPFCStorm && at/w != (at+scenarioSlotNS)/w && scenarioSlotNS < w {
			// Within one window, so that the truth's events are a
			// window's.
			at = (at/w+1)*w + 1_000_000
		}
		b.add(x, at)
		t += slot(x) + gap
	}
	slices.SortStableFunc(b.frames, func(x, y scripted) int { return cmp.Compare(x.t, y.t) })
	slices.SortFunc(b.truth, func(x, y Event) int { return cmp.Compare(x.StartNS, y.StartNS) })
	slices.SortFunc(b.looks, func(x, y Event) int { return cmp.Compare(x.StartNS, y.StartNS) })
	s.script, s.scriptTruth, s.scriptLooks = b.frames, b.truth, b.looks
	for i := len(keys) / 2; i < len(s.conns); i++ {
		c := &s.conns[i]
		a, bb := s.hosts[c.ha].addr[0], s.hosts[c.hb].addr[0]
		keys = append(keys, FlowKey{Src: a, Dst: bb, DQP: c.qpB}, FlowKey{Src: bb, Dst: a, DQP: c.qpA})
		sqp = append(sqp, c.qpA, c.qpB)
	}
	return keys, sqp, nil
}

// host adds a scenario host and returns its index.
func (b *script) host() int32 {
	s := b.s
	s.hosts = append(s.hosts, scenarioHost(len(s.hosts)-s.cfg.Hosts+1))
	return int32(len(s.hosts) - 1)
}

// conn adds a scenario connection from host a to host bb (IPv4, no tag,
// path MTU 4096), its PSNs starting at psn.
func (b *script) conn(a, bb int32, psn uint32) int32 {
	s := b.s
	id := int32(len(s.conns))
	c := conn{id: id, heapPos: -1, ha: a, hb: bb, pmtu: 4096, frontier: psn, epsn: psn}
	c.qpA, c.qpB = b.qp, b.qp+1
	b.qp += 2
	c.flowLabel = flowLabel(c.qpA, c.qpB)
	c.sport = udpSourcePort(c.flowLabel)
	c.rkey = uint32(b.rng.next())
	c.va = 0x7f00_0000_0000
	s.conns = append(s.conns, c)
	return id
}

// flow returns the requests' flow of connection id.
func (b *script) flow(id int32) *EventFlow {
	c := &b.s.conns[id]
	return &EventFlow{FlowKey{Src: b.s.hosts[c.ha].addr[0], Dst: b.s.hosts[c.hb].addr[0], DQP: c.qpB}, c.qpA}
}

// req scripts request op of connection id at t, PSN psn, with payload
// bytes and, in a RETH, dma bytes (a READ request: no payload, and a PSN
// per response packet).
func (b *script) req(id int32, t int64, op decode.Opcode, psn uint32, payload, dma int, ce bool) {
	c := &b.s.conns[id]
	p := packet{toB: true, flow: 2 * id, op: op, psn: psn & psnMask, npsn: 1, dqp: c.qpB, mig: true,
		rkey: c.rkey, va: c.va, payload: payload, ce: ce, ackReq: op.EndsMessage(), dmaLen: uint32(dma)}
	if op.IsReadRequest() {
		p.payload, p.npsn = 0, max(1, (uint32(dma)+c.pmtu-1)/c.pmtu)
	}
	b.frames = append(b.frames, scripted{t: t, p: p})
}

// write scripts a WRITE message of n packets of 4096 bytes from PSN psn,
// gap ns apart from t; ce marks the packets for which it says so. It
// returns the time of the last packet.
func (b *script) write(id int32, t, gap int64, psn uint32, n int, ce func(int) bool) int64 {
	for i := range n {
		op := dataOpcode(msgWrite, uint32(i), uint32(n))
		b.req(id, t+int64(i)*gap, op, psn+uint32(i), 4096, n*4096, ce != nil && ce(i))
	}
	return t + int64(n-1)*gap
}

// answer scripts a packet from B to A of connection id at t: an ACK, NAK
// or RNR NAK (syndrome) for psn, a READ response (op) or a CNP.
func (b *script) answer(id int32, t int64, op decode.Opcode, psn uint32, syndrome uint8, payload int) {
	c := &b.s.conns[id]
	p := packet{flow: 2*id + 1, op: op, psn: psn & psnMask, dqp: c.qpA, mig: true, syndrome: syndrome, payload: payload}
	if op.IsCNP() {
		p = packet{flow: 2*id + 1, op: op, dqp: c.qpA, becn: true}
	}
	b.frames = append(b.frames, scripted{t: t, p: p})
}

// pause scripts a PFC frame from mac pausing prio for quanta at t.
func (b *script) pause(t int64, mac [6]byte, prio int, quanta uint16) {
	f := &pfcFrame{src: mac, enable: 1 << prio}
	f.quanta[prio] = quanta
	b.frames = append(b.frames, scripted{t: t, pfc: f})
}

// scenarioMAC returns the source MAC of a scenario's PFC frames.
func scenarioMAC(n byte) [6]byte { return [6]byte{0x0c, 0x42, 0xa1, 0x00, 0x00, n} }

// macString formats a MAC as the report does.
func macString(m [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// add scripts scenario x from time t.
func (b *script) add(x Scenario, t int64) {
	r := &b.rng
	switch x {
	case ScenarioPFCStorm:
		mac := scenarioMAC(1)
		for i := range int64(stormFrames) {
			b.pause(t+i*stormGap, mac, 4, 0xffff)
		}
		end := t + stormFrames*stormGap
		b.pause(end, mac, 4, 0) // XON
		b.truth = append(b.truth, Event{Kind: "pfc_storm", StartNS: t, EndNS: end, MAC: macString(mac), Priority: 4, Frames: stormFrames + 1})

	case ScenarioIncast, ScenarioFanIn:
		senders, gap, frames, kind := incastSenders, int64(incastGap), incastFrames, "incast"
		if x == ScenarioFanIn {
			senders, gap, frames, kind = fanInSenders, fanInGap, fanInFrames, "fan_in"
		}
		dst := b.host()
		e := Event{Kind: kind, StartNS: t, Dst: b.s.hosts[dst].addr[0]}
		for k := range senders {
			id := b.conn(b.host(), dst, uint32(r.intn(1<<20)))
			start := t + int64(r.intn(20_000))
			if k == 0 {
				start = t
			}
			psn := b.s.conns[id].epsn
			cnpAt := int64(0)
			for m := 0; m < frames; m += 16 { // messages of 16 packets
				n := min(16, frames-m)
				mt := start + int64(m)*gap
				last := b.write(id, mt, gap, psn, n, func(i int) bool {
					// 5 % CE marks after the first millisecond
					ce := x == ScenarioIncast && mt+int64(i)*gap-t > 1_000_000 && (m+i)%20 == 7
					if ce && mt+int64(i)*gap > cnpAt+50_000 {
						cnpAt = mt + int64(i)*gap
						b.answer(id, cnpAt+2000, 0x81, 0, 0, 0)
					}
					return ce
				})
				psn += uint32(n)
				b.answer(id, last+3000, 0x11, psn-1, synAck, 0)
				e.EndNS = max(e.EndNS, last)
			}
			e.Senders = append(e.Senders, *b.flow(id))
		}
		slices.SortFunc(e.Senders, func(p, q EventFlow) int { return p.Compare(q.FlowKey) })
		if x == ScenarioIncast {
			b.truth = append(b.truth, e)
		} else {
			b.looks = append(b.looks, e)
		}

	case ScenarioNAK:
		// A message of 32 packets 2 µs apart; packet 10 is lost after
		// the mirror; packet 11 makes the responder NAK 10; the
		// requester, having sent up to 14, goes back to 10.
		id := b.conn(b.host(), b.host(), uint32(r.intn(1<<20)))
		psn := b.s.conns[id].epsn
		const gap, lost, sent = 2000, 10, 15
		for i := range sent {
			b.req(id, t+int64(i)*gap, dataOpcode(msgWrite, uint32(i), 32), psn+uint32(i), 4096, 32*4096, false)
		}
		nak := t + (lost+1)*gap + 3000
		b.answer(id, nak, 0x11, psn+lost, synNAKSeq, 0)
		again := nak + 6000
		for i := lost; i < 32; i++ {
			b.req(id, again+int64(i-lost)*gap, dataOpcode(msgWrite, uint32(i), 32), psn+uint32(i), 4096, 32*4096, false)
		}
		b.answer(id, again+int64(32-lost)*gap+3000, 0x11, psn+31, synAck, 0)
		b.truth = append(b.truth, Event{Kind: "retransmission", StartNS: nak, EndNS: again + (sent-1-lost)*gap,
			Flow: b.flow(id), Cause: "nak", FirstPSN: (psn + lost) & psnMask, Resent: sent - lost, StallNS: again - nak})

	case ScenarioTimeout:
		// A message answered, then one whose last packet is lost after
		// the mirror: no ACK, 16 ms of silence, the message again.
		id := b.conn(b.host(), b.host(), uint32(r.intn(1<<20)))
		psn := b.s.conns[id].epsn
		last := b.write(id, t, 2000, psn, 8, nil)
		b.answer(id, last+3000, 0x11, psn+7, synAck, 0)
		last = b.write(id, last+10_000, 2000, psn+8, 8, nil)
		again := last + timeoutNS
		end := b.write(id, again, 2000, psn+8, 8, nil)
		b.answer(id, end+3000, 0x11, psn+15, synAck, 0)
		b.truth = append(b.truth, Event{Kind: "retransmission", StartNS: last, EndNS: end, Flow: b.flow(id),
			Cause: "timeout", FirstPSN: (psn + 8) & psnMask, Resent: 8, StallNS: timeoutNS})

	case ScenarioRNR:
		id := b.conn(b.host(), b.host(), uint32(r.intn(1<<20)))
		psn := b.s.conns[id].epsn
		b.req(id, t, 0x04, psn, 512, 0, false) // SEND Only
		b.answer(id, t+3000, 0x11, psn, synRNR|rnrTimerCode, 0)
		again := t + 3000 + rnrTimerNS
		b.req(id, again, 0x04, psn, 512, 0, false)
		b.answer(id, again+3000, 0x11, psn, synAck, 0)
		b.req(id, again+10_000, 0x04, psn+1, 512, 0, false)
		b.answer(id, again+13_000, 0x11, psn+1, synAck, 0)
		b.truth = append(b.truth, Event{Kind: "retransmission", StartNS: t + 3000, EndNS: again, Flow: b.flow(id),
			Cause: "rnr", FirstPSN: psn & psnMask, Resent: 1, StallNS: rnrTimerNS, NAKCode: rnrTimerCode})

	case ScenarioCEWithoutCNP:
		// 50 messages of 8 packets, 100 µs apart, every fourth packet
		// CE-marked, each message ACKed; no CNP.
		id := b.conn(b.host(), b.host(), uint32(r.intn(1<<20)))
		psn := b.s.conns[id].epsn
		e := Event{Kind: "ce_without_cnp", Flow: b.flow(id)}
		for m := range 50 {
			mt := t + int64(m)*8*100_000
			last := b.write(id, mt, 100_000, psn, 8, func(i int) bool { return i%4 == 1 })
			b.answer(id, last+3000, 0x11, psn+7, synAck, 0)
			psn += 8
			if m == 0 {
				e.StartNS = mt + 100_000
			}
			e.EndNS = mt + 5*100_000
		}
		e.ECNCE = 100
		b.truth = append(b.truth, e)

	case ScenarioPauses:
		mac := scenarioMAC(2)
		for i := range int64(10) {
			b.pause(t+i*10_000_000, mac, 3, 0xffff)
		}
		b.looks = append(b.looks, Event{Kind: "isolated_pauses", StartNS: t, EndNS: t + 9*10_000_000, MAC: macString(mac), Priority: 3, Frames: 10})

	case ScenarioPSNWrap:
		id := b.conn(b.host(), b.host(), psnMask-7)
		last := b.write(id, t, 2000, psnMask-7, 16, nil)
		b.answer(id, last+3000, 0x11, 7, synAck, 0)
		last = b.write(id, last+10_000, 2000, 8, 4, nil)
		b.answer(id, last+3000, 0x11, 11, synAck, 0)
		b.looks = append(b.looks, Event{Kind: "psn_wrap", StartNS: t, EndNS: last, Flow: b.flow(id)})

	case ScenarioReads:
		// Four READs of 256 KiB (64 PSNs each), each answered by 64
		// responses, then a WRITE at the PSN after the last READ's span.
		id := b.conn(b.host(), b.host(), uint32(r.intn(1<<20)))
		psn := b.s.conns[id].epsn
		at := t
		for range 4 {
			b.req(id, at, 0x0C, psn, 0, 256<<10, false)
			for i := range uint32(64) {
				op := decode.Opcode(0x0E) // READ response Middle
				switch i {
				case 0:
					op = 0x0D
				case 63:
					op = 0x0F
				}
				b.answer(id, at+5000+int64(i)*330, op, psn+i, synAck, 4096)
			}
			psn += 64
			at += 5000 + 64*330 + 2000
		}
		last := b.write(id, at, 2000, psn, 4, nil)
		b.answer(id, last+3000, 0x11, psn+3, synAck, 0)
		b.looks = append(b.looks, Event{Kind: "read_responses", StartNS: t, EndNS: last, Flow: b.flow(id)})
	}
}

// writeScripted writes scripted frame f into buf and counts it.
func (s *Source) writeScripted(buf []byte, f *scripted) (wire, captured int) {
	if f.pfc != nil {
		wire, captured = writePFC(buf, f.pfc)
		s.tally.count(f.t, s.encap+wire, classPFC, nil, f.pfc)
		return wire, captured
	}
	p := &f.p
	p.c = &s.conns[p.flow/2]
	wire, captured = s.writeRoCE(buf, p)
	s.tally.count(f.t, s.encap+wire, classRoCE, p, nil)
	return wire, captured
}
