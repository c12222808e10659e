package synth

import (
	"cmp"
	"net/netip"
	"slices"
)

// Truth is the exact ground truth of a generated trace, per window and in
// total; the package documentation defines every field. It is complete
// once the Source's Next has returned io.EOF, and encodes with
// encoding/json.
type Truth struct {
	Seed     uint64 `json:"seed"`
	WindowNS int64  `json:"window_ns"` // window length
	StartNS  int64  `json:"start_ns"`  // start of the first window
	// Windows lists the windows that hold at least one frame, in time order.
	Windows []Window `json:"windows"`
	// Total sums the windows; its Flows is the number of distinct flows
	// with a RoCE packet anywhere in the trace.
	Total Counts `json:"total"`
	// PerFlow sums each flow's per-window entries over the trace (RateBPS
	// zero), sorted by key.
	PerFlow []Flow `json:"per_flow"`
	// JitterFlows are the request directions (A→B) of the connections
	// made to swing in rate between adjacent windows, sorted by key.
	JitterFlows []FlowKey `json:"jitter_flows"`
	// Events are the troubles Config.Scenario injected, and LookAlikes
	// its healthy traffic that must raise no event, by start.
	Events     []Event `json:"events,omitempty"`
	LookAlikes []Event `json:"look_alikes,omitempty"`
}

// Window is the truth of one window: the frames with
// StartNS <= Time < StartNS + Truth.WindowNS.
type Window struct {
	StartNS int64 `json:"start_ns"`
	Counts
	// PerFlow lists the flows with at least one RoCE packet in the window,
	// sorted by key.
	PerFlow []Flow `json:"per_flow"`
}

// Counts are the frame counters of a window or of the whole trace.
type Counts struct {
	Packets         uint64             `json:"packets"`
	Bytes           uint64             `json:"bytes"`
	RoCEPackets     uint64             `json:"roce_packets"`
	OtherPackets    uint64             `json:"other_packets"`
	Flows           uint64             `json:"flows"`
	PayloadBytes    uint64             `json:"payload_bytes"`
	Opcodes         map[uint8]uint64   `json:"opcodes"`
	Messages        uint64             `json:"messages"`
	CNP             uint64             `json:"cnp"`
	CNPUnattributed uint64             `json:"cnp_unattributed"`
	ECNCE           uint64             `json:"ecn_ce"`
	FECN            uint64             `json:"fecn"`
	BECN            uint64             `json:"becn"`
	NAKs            uint64             `json:"naks"`
	RNRNAKs         uint64             `json:"rnr_naks"`
	Acks            uint64             `json:"acks"`
	Retransmits     uint64             `json:"retransmits"`
	PSNGaps         uint64             `json:"psn_gaps"`
	PFC             map[uint8]PFCCount `json:"pfc"`
}

// PFCCount counts the PFC frames that enable one priority and the pause
// quanta they carry for it.
type PFCCount struct {
	Frames uint64 `json:"frames"`
	Quanta uint64 `json:"quanta"`
}

// FlowKey identifies a flow: one direction of a connection.
type FlowKey struct {
	Src netip.Addr `json:"src"`
	Dst netip.Addr `json:"dst"`
	DQP uint32     `json:"dqp"` // BTH destination QP
}

// Compare orders keys by source, destination, then destination QP.
func (k FlowKey) Compare(o FlowKey) int {
	if c := k.Src.Compare(o.Src); c != 0 {
		return c
	}
	if c := k.Dst.Compare(o.Dst); c != 0 {
		return c
	}
	return cmp.Compare(k.DQP, o.DQP)
}

// Flow is the truth of one flow in a window (or, in Truth.PerFlow, over
// the trace).
type Flow struct {
	FlowKey
	SQP          uint32  `json:"sqp"` // the sending QP
	Packets      uint64  `json:"packets"`
	Bytes        uint64  `json:"bytes"`
	RateBPS      float64 `json:"rate_bps,omitempty"`
	PayloadBytes uint64  `json:"payload_bytes"`
	Messages     uint64  `json:"messages"`
	ECNCE        uint64  `json:"ecn_ce"`
	CNPReceived  uint64  `json:"cnp_received"`
	Retransmits  uint64  `json:"retransmits"`
	PSNGaps      uint64  `json:"psn_gaps"`
}

// RateBPS returns the rate in bits per second of bytes sent in one window:
// bytes * 8 / window seconds.
func (t *Truth) RateBPS(bytes uint64) float64 {
	return float64(bytes) * 8 / (float64(t.WindowNS) / 1e9)
}

// Window returns the window that starts at startNS, or nil when no frame
// fell in it.
func (t *Truth) Window(startNS int64) *Window {
	i, ok := slices.BinarySearchFunc(t.Windows, startNS, func(w Window, s int64) int { return cmp.Compare(w.StartNS, s) })
	if !ok {
		return nil
	}
	return &t.Windows[i]
}

// Flow returns the flow with key k in w, or nil when it sent no RoCE
// packet in the window.
func (w *Window) Flow(k FlowKey) *Flow { return findFlow(w.PerFlow, k) }

// Flow returns the trace totals of the flow with key k, or nil.
func (t *Truth) Flow(k FlowKey) *Flow { return findFlow(t.PerFlow, k) }

// findFlow looks k up in flows sorted by key.
func findFlow(flows []Flow, k FlowKey) *Flow {
	i, ok := slices.BinarySearchFunc(flows, k, func(f Flow, k FlowKey) int { return f.FlowKey.Compare(k) })
	if !ok {
		return nil
	}
	return &flows[i]
}

// flowCounts are the per-window counters of one flow while the window is
// open.
type flowCounts struct {
	packets, bytes, payload, messages, ecnce, cnpRecv, retrans, gaps uint64
}

// add adds o to f.
func (f *flowCounts) add(o *flowCounts) {
	f.packets += o.packets
	f.bytes += o.bytes
	f.payload += o.payload
	f.messages += o.messages
	f.ecnce += o.ecnce
	f.cnpRecv += o.cnpRecv
	f.retrans += o.retrans
	f.gaps += o.gaps
}

// flowState is what the truth keeps about a flow across windows.
type flowState struct {
	epsn      uint32 // PSN after the furthest request seen
	epsnValid bool
	seen      bool // had a RoCE packet in the trace
	touched   bool // in the open window's touched list
}

// tally accumulates the truth frame by frame. Counting touches fixed
// arrays and per-flow slices indexed by flow number; maps and sorted lists
// are built once per window, when it closes.
type tally struct {
	windowNS int64
	win      int64 // index of the open window
	open     bool

	c        Counts // scalar counters of the open window (maps unused)
	opcodes  [256]uint64
	pfc      [8]PFCCount
	flows    []flowCounts // open window, by flow number
	touched  []int32      // flows with counts in the open window
	state    []flowState
	totals   []flowCounts // over the trace, by flow number
	keys     []FlowKey    // by flow number
	sqp      []uint32     // by flow number
	rank     []int32      // position of each flow in key order
	truth    Truth
	totalOps [256]uint64
	totalPFC [8]PFCCount
}

// newTally returns a tally for flows with the given keys and source QPs.
func newTally(seed uint64, window int64, keys []FlowKey, sqp []uint32) *tally {
	n := len(keys)
	t := &tally{
		windowNS: window,
		flows:    make([]flowCounts, n),
		touched:  make([]int32, 0, n),
		state:    make([]flowState, n),
		totals:   make([]flowCounts, n),
		keys:     keys,
		sqp:      sqp,
		rank:     make([]int32, n),
		truth:    Truth{Seed: seed, WindowNS: window},
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return keys[a].Compare(keys[b]) })
	for r, f := range order {
		t.rank[f] = int32(r)
	}
	return t
}

// frameClass is what a frame is, for the counters.
type frameClass uint8

const (
	classOther frameClass = iota // background: ARP, UDP, TCP
	classPFC                     // PFC pause frame
	classRoCE                    // RoCEv2 packet
)

// count adds one frame at time t of on-wire length wire; p describes it
// when it is a RoCE packet, pfc when it is a PFC frame.
func (t *tally) count(tm int64, wire int, class frameClass, p *packet, pfc *pfcFrame) {
	w := tm / t.windowNS
	if !t.open || w != t.win {
		if t.open {
			t.close()
		}
		t.win, t.open = w, true
	}
	c := &t.c
	c.Packets++
	c.Bytes += uint64(wire)
	switch class {
	case classOther:
		c.OtherPackets++
	case classPFC:
		c.OtherPackets++
		for prio := range t.pfc {
			if pfc.enable&(1<<prio) != 0 {
				t.pfc[prio].Frames++
				t.pfc[prio].Quanta += uint64(pfc.quanta[prio])
			}
		}
	case classRoCE:
		t.roce(wire, p)
	}
}

// roce counts a RoCE packet.
func (t *tally) roce(wire int, p *packet) {
	c := &t.c
	op := p.op
	c.RoCEPackets++
	c.PayloadBytes += uint64(p.payload)
	t.opcodes[op]++
	f := t.touch(p.flow)
	f.packets++
	f.bytes += uint64(wire)
	f.payload += uint64(p.payload)
	if p.ce {
		c.ECNCE++
		f.ecnce++
	}
	if p.becn {
		c.BECN++
	}
	if op.EndsMessage() {
		c.Messages++
		f.messages++
	}
	switch {
	case op.IsCNP():
		c.CNP++
		t.touch(p.flow^1).cnpRecv++ // flows 2i and 2i+1 are the two directions
	case op.IsAcknowledge():
		switch p.syndrome >> 5 {
		case 0:
			c.Acks++
		case 1:
			c.RNRNAKs++
		case 3:
			c.NAKs++
		}
	case op.IsRequest():
		s := &t.state[p.flow]
		if s.epsnValid {
			switch d := (p.psn - s.epsn) & psnMask; {
			case d == 0:
			case d < psnHalf:
				c.PSNGaps++
				f.gaps++
			default:
				c.Retransmits++
				f.retrans++
				return
			}
		}
		s.epsn, s.epsnValid = (p.psn+p.npsn)&psnMask, true
	}
}

// touch returns the open window's counters of flow i.
func (t *tally) touch(i int32) *flowCounts {
	if s := &t.state[i]; !s.touched {
		s.touched = true
		t.touched = append(t.touched, i)
	}
	return &t.flows[i]
}

// close appends the open window to the truth and resets the counters.
func (t *tally) close() {
	w := Window{StartNS: t.win * t.windowNS, Counts: t.c}
	w.Opcodes = opcodeMap(&t.opcodes)
	w.PFC = pfcMap(&t.pfc)
	for i, n := range t.opcodes {
		t.totalOps[i] += n
	}
	for i := range t.pfc {
		t.totalPFC[i].Frames += t.pfc[i].Frames
		t.totalPFC[i].Quanta += t.pfc[i].Quanta
	}
	slices.SortFunc(t.touched, func(a, b int32) int { return cmp.Compare(t.rank[a], t.rank[b]) })
	for _, i := range t.touched {
		f := &t.flows[i]
		if f.packets == 0 {
			w.CNPUnattributed += f.cnpRecv // a CNP for a flow that sent nothing in the window
		} else {
			w.PerFlow = append(w.PerFlow, t.flow(i, f, t.truth.RateBPS(f.bytes)))
			t.totals[i].add(f)
			if !t.state[i].seen {
				t.state[i].seen = true
				t.truth.Total.Flows++
			}
		}
		*f = flowCounts{}
		t.state[i].touched = false
	}
	w.Counts.Flows = uint64(len(w.PerFlow))
	t.touched = t.touched[:0]
	addCounts(&t.truth.Total, &w.Counts)
	t.truth.Windows = append(t.truth.Windows, w)
	t.c, t.opcodes, t.pfc = Counts{}, [256]uint64{}, [8]PFCCount{}
}

// flow returns the Flow of flow number i with counters f.
func (t *tally) flow(i int32, f *flowCounts, rate float64) Flow {
	return Flow{
		FlowKey: t.keys[i], SQP: t.sqp[i], Packets: f.packets, Bytes: f.bytes, RateBPS: rate,
		PayloadBytes: f.payload, Messages: f.messages, ECNCE: f.ecnce, CNPReceived: f.cnpRecv,
		Retransmits: f.retrans, PSNGaps: f.gaps,
	}
}

// addCounts adds the scalar counters of w to tot (Flows excepted).
func addCounts(tot, w *Counts) {
	tot.Packets += w.Packets
	tot.Bytes += w.Bytes
	tot.RoCEPackets += w.RoCEPackets
	tot.OtherPackets += w.OtherPackets
	tot.PayloadBytes += w.PayloadBytes
	tot.Messages += w.Messages
	tot.CNP += w.CNP
	tot.CNPUnattributed += w.CNPUnattributed
	tot.ECNCE += w.ECNCE
	tot.FECN += w.FECN
	tot.BECN += w.BECN
	tot.NAKs += w.NAKs
	tot.RNRNAKs += w.RNRNAKs
	tot.Acks += w.Acks
	tot.Retransmits += w.Retransmits
	tot.PSNGaps += w.PSNGaps
}

// finish closes the last window and completes the totals.
func (t *tally) finish() *Truth {
	if t.open {
		t.close()
		t.open = false
	}
	tr := &t.truth
	tr.Total.Opcodes = opcodeMap(&t.totalOps)
	tr.Total.PFC = pfcMap(&t.totalPFC)
	if len(tr.Windows) > 0 {
		tr.StartNS = tr.Windows[0].StartNS
	}
	order := make([]int32, 0, len(t.totals))
	for i := range t.totals {
		if t.state[i].seen {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(t.rank[a], t.rank[b]) })
	tr.PerFlow = make([]Flow, 0, len(order))
	for _, i := range order {
		tr.PerFlow = append(tr.PerFlow, t.flow(i, &t.totals[i], 0))
	}
	return tr
}

// opcodeMap returns the non-zero counts of ops by opcode.
func opcodeMap(ops *[256]uint64) map[uint8]uint64 {
	m := make(map[uint8]uint64)
	for op, n := range ops {
		if n != 0 {
			m[uint8(op)] = n
		}
	}
	return m
}

// pfcMap returns the priorities that some PFC frame enabled.
func pfcMap(pfc *[8]PFCCount) map[uint8]PFCCount {
	m := make(map[uint8]PFCCount)
	for prio, n := range pfc {
		if n.Frames != 0 {
			m[uint8(prio)] = n
		}
	}
	return m
}
