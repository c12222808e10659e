package synth

import "github.com/rocescope/rocescope/decode"

// Requester and responder limits.
const (
	ringCap  = 16 // messages a requester keeps for go-back-N
	taskCap  = 16 // packets a responder may have queued
	ackEvery = 8  // the responder acknowledges at least every ackEvery request packets
	maxExtra = 8  // a requester sends fewer than maxExtra packets after a NAK was queued

	// maxMessagePSNs bounds a message's PSNs, far below the 2^23 that
	// would make PSN order ambiguous.
	maxMessagePSNs = 1 << 20

	synAck    = 0x1f // AETH ACK syndrome: credit count "invalid" (end-to-end credits unused)
	synNAKSeq = 0x60 // AETH NAK, PSN sequence error
	synRNR    = 0x20 // AETH RNR NAK; the low five bits are the timer

	// Rate control (a simplified DCQCN): a CNP halves the requester's
	// rate, down to fullRate/64 at most, and the rate recovers linearly
	// to fullRate over recoverNS.
	fullRate  = 1 << 16
	minRate   = fullRate / 64
	recoverNS = 5_000_000

	// Wire and reaction times, in ns.
	ackDelayMin, ackDelayMax   = 1000, 4000
	readDelayMin, readDelayMax = 2000, 8000
	cnpDelayMin, cnpDelayMax   = 1000, 3000
)

// msgKind is the operation of a message.
type msgKind uint8

const (
	msgWrite msgKind = iota
	msgWriteImm
	msgSend
	msgSendImm
	msgRead
)

// message is one request message. Everything a requester needs to send
// (or resend) any of its packets is here.
type message struct {
	kind   msgKind
	length uint32 // bytes
	psn    uint32 // first PSN
	pkts   uint32 // request packets: 1 for a READ, else ceil(length/PMTU)
	npsn   uint32 // PSNs consumed: ceil(length/PMTU), at least 1
	va     uint64
	imm    uint32
	payOff int
}

// taskKind is what a responder has queued.
type taskKind uint8

const (
	taskACK taskKind = iota
	taskNAK
	taskRNR
	taskRead
)

// task is a packet (or, for READ responses, a run of packets) the
// responder sends back to the requester.
type task struct {
	kind   taskKind
	due    int64 // earliest time of the next packet
	psn    uint32
	msn    uint32
	length uint32 // READ: bytes
	n, i   uint32 // READ: response packets, packets sent
	payOff int
}

// conn is one RC connection: the requester QP A on host ha and the
// responder QP B on host hb. Flow 2*id runs A→B, flow 2*id+1 B→A.
type conn struct {
	id        int32
	ha, hb    int32
	qpA, qpB  uint32
	sport     uint16
	flowLabel uint32
	v6        bool
	vlan      uint16
	pmtu      uint32
	rkey      uint32
	va        uint64
	scale     int // typical message size

	// Requester: messages hi-ringCap.. hi-1 are in ring (by sequence
	// number modulo ringCap); cur and pkt are the next packet to send.
	ring       [ringCap]message
	hi, cur    int
	pkt        uint32
	frontier   uint32 // PSN after the furthest packet sent
	recovering bool   // a packet was lost or refused; the NAK has not come back yet
	nakQueued  bool   // the responder has queued that NAK
	recSeq     int    // message and packet to resend from
	recPkt     uint32
	extra      int // packets sent since the NAK was queued
	extraMax   int

	// Responder.
	epsn       uint32 // expected PSN
	discarding bool   // waiting for epsn after a NAK
	msn        uint32
	unacked    int
	tasks      [taskCap]task
	th, tn     int   // head and length of tasks
	cnpToA     int64 // due time of a CNP from B to A, 0 for none
	cnpToB     int64 // due time of a CNP from A to B (for CE-marked READ responses)

	// Rate control: the rate right after the last cut, and when.
	rateCut uint32
	cutAt   int64 // 0: never cut

	heapPos int32
	due     int64
}

// rate returns the requester's sending rate at time now, as a fraction of
// fullRate.
func (c *conn) rate(now int64) uint32 {
	d := now - c.cutAt
	if c.cutAt == 0 || d >= recoverNS {
		return fullRate
	}
	return c.rateCut + uint32(uint64(fullRate-c.rateCut)*uint64(d)/recoverNS)
}

// throttle halves the requester's rate at time now, as a CNP arrives.
func (c *conn) throttle(now int64) {
	c.rateCut, c.cutAt = max(minRate, c.rate(now)/2), now
}

// canSend reports whether the requester may send its next packet now:
// not while its responder has no room for two more tasks, nor once it has
// sent its extraMax packets after the one whose NAK is queued. The message
// ring never overflows: from the lost or refused packet on, a requester
// sends at most 1 + maxExtra packets before it waits for the NAK, each
// starting at most one message.
func (c *conn) canSend() bool {
	return c.tn <= taskCap-2 && !(c.recovering && c.nakQueued && c.extra >= c.extraMax)
}

// The ring holds the message of the lost packet and the messages of the
// packets sent after it.
const _ = uint(ringCap - 1 - (1 + maxExtra))

// nextDue returns the time of the connection's next reactive packet, or 0.
func (c *conn) nextDue() int64 {
	d := int64(0)
	for _, t := range [...]int64{c.cnpToA, c.cnpToB} {
		if t != 0 && (d == 0 || t < d) {
			d = t
		}
	}
	if c.tn > 0 {
		if t := c.tasks[c.th].due; d == 0 || t < d {
			d = t
		}
	}
	return d
}

// push queues t, coalescing an ACK with a queued ACK at the tail.
func (c *conn) push(t task) {
	if t.kind == taskACK && c.tn > 0 {
		if last := &c.tasks[(c.th+c.tn-1)%taskCap]; last.kind == taskACK {
			last.psn, last.msn = t.psn, t.msn
			return
		}
	}
	c.tasks[(c.th+c.tn)%taskCap] = t
	c.tn++
}

// pop removes the head task.
func (c *conn) pop() {
	c.th = (c.th + 1) % taskCap
	c.tn--
}

// newMessage appends a message to the ring.
func (s *Source) newMessage(c *conn) {
	r := &s.rng
	m := message{psn: c.frontier, imm: uint32(r.next()), payOff: r.intn(patternSlack)}
	switch u := prob(r.next() >> 11); {
	case u < s.cfg.read:
		m.kind = msgRead
	case u < s.cfg.readOrSend:
		m.kind = msgSend
	default:
		m.kind = msgWrite
	}
	if m.kind != msgRead && r.chance(s.cfg.imm) {
		m.kind++ // the immediate variant
	}
	if r.intn(8) == 0 {
		m.length = uint32(r.between(1, 64)) // small control messages
	} else {
		m.length = uint32(min(1+r.below(2*uint64(c.scale)), uint64(c.pmtu)*maxMessagePSNs))
	}
	m.npsn = max(1, (m.length+c.pmtu-1)/c.pmtu)
	m.pkts = m.npsn
	if m.kind == msgRead {
		m.pkts = 1
	}
	m.va = c.va + uint64(r.intn(1<<20))*64
	c.ring[c.hi%ringCap] = m
	c.hi++
}

// request makes the requester's next packet into p and lets the responder
// receive it. It reports false when the packet was lost before the mirror,
// so that it is not in the trace.
func (s *Source) request(c *conn, now int64, p *packet) bool {
	if c.cur == c.hi {
		s.newMessage(c)
	}
	seq, i := c.cur, c.pkt
	m := &c.ring[seq%ringCap]
	*p = packet{c: c, toB: true, flow: 2 * c.id, seq: seq, idx: i, psn: (m.psn + i) & psnMask, npsn: 1,
		dqp: c.qpB, mig: true, rkey: c.rkey, va: m.va, dmaLen: m.length, imm: m.imm}
	last := i == m.pkts-1
	if m.kind == msgRead {
		p.op, p.npsn = 0x0C, m.npsn
	} else {
		p.op = dataOpcode(m.kind, i, m.pkts)
		p.payload = int(c.pmtu)
		if last {
			p.payload = int(m.length - i*c.pmtu)
		}
		p.payOff = m.payOff + int(i*c.pmtu)%patternSlack
		p.ackReq = last
		p.se = last && (m.kind == msgSend || m.kind == msgSendImm)
	}
	c.pkt++
	if c.pkt == m.pkts {
		c.cur, c.pkt = c.cur+1, 0
	}
	r := &s.rng
	fresh := p.psn == c.frontier
	if fresh {
		c.frontier = (c.frontier + p.npsn) & psnMask
	}
	p.ce = r.chance(s.cfg.ce)
	if c.recovering && c.nakQueued {
		c.extra++
	}
	if fresh && !c.recovering && r.chance(s.cfg.loss) {
		s.startRecovery(c, seq, i, false)
		return !r.chance(s.cfg.lossBefore)
	}
	s.respond(c, now, p)
	return true
}

// startRecovery notes that packet i of message seq must be sent again:
// it was lost, or (refused true) refused with an RNR NAK.
func (s *Source) startRecovery(c *conn, seq int, i uint32, refused bool) {
	c.recovering, c.nakQueued, c.extra = true, refused, 0
	c.recSeq, c.recPkt = seq, i
	c.extraMax = s.rng.intn(maxExtra)
}

// dataOpcode returns the opcode of packet i of a SEND or WRITE message of
// n packets.
func dataOpcode(k msgKind, i, n uint32) decode.Opcode {
	first, last := i == 0, i == n-1
	var base decode.Opcode // SEND First, or RDMA WRITE First
	if k == msgWrite || k == msgWriteImm {
		base = 0x06
	}
	imm := k == msgWriteImm || k == msgSendImm
	switch {
	case first && last && imm && base == 0:
		return 0x05
	case first && last && imm:
		return 0x0B
	case first && last:
		return base + 4 // SEND Only 0x04, WRITE Only 0x0A
	case first:
		return base
	case last && imm:
		return base + 3 // SEND Last with Immediate 0x03, WRITE 0x09
	case last:
		return base + 2
	}
	return base + 1
}

// respond is the responder receiving request p at time now.
func (s *Source) respond(c *conn, now int64, p *packet) {
	r := &s.rng
	if p.ce && c.cnpToA == 0 && r.chance(s.cfg.cnp) {
		c.cnpToA = now + int64(r.between(cnpDelayMin, cnpDelayMax))
	}
	if p.psn != c.epsn {
		if !c.discarding && (p.psn-c.epsn)&psnMask < psnHalf {
			c.push(task{kind: taskNAK, due: now + int64(r.between(ackDelayMin, ackDelayMax)), psn: c.epsn, msn: c.msn})
			c.discarding, c.nakQueued = true, true
		}
		s.reschedule(c)
		return
	}
	c.discarding = false
	if (p.op == 0x00 || p.op == 0x04 || p.op == 0x05) && !c.recovering && r.chance(s.cfg.rnr) {
		c.push(task{kind: taskRNR, due: now + int64(r.between(ackDelayMin, ackDelayMax)), psn: p.psn, msn: c.msn})
		c.discarding = true
		s.startRecovery(c, p.seq, p.idx, true)
		s.reschedule(c)
		return
	}
	c.epsn = (c.epsn + p.npsn) & psnMask
	if p.op.IsReadRequest() {
		c.msn++
		n := p.npsn
		c.push(task{kind: taskRead, due: now + int64(r.between(readDelayMin, readDelayMax)), psn: p.psn,
			msn: c.msn, length: p.dmaLen, n: n, payOff: int(p.va % patternSlack)})
	} else {
		if p.op.EndsMessage() {
			c.msn++
		}
		c.unacked++
		if p.ackReq || c.unacked >= ackEvery {
			c.push(task{kind: taskACK, due: now + int64(r.between(ackDelayMin, ackDelayMax)), psn: p.psn, msn: c.msn})
			c.unacked = 0
		}
	}
	s.reschedule(c)
}

// reactive makes the connection's earliest queued packet from B to A (or
// a CNP from A to B) into p.
func (s *Source) reactive(c *conn, now int64, p *packet) {
	d := c.nextDue()
	switch {
	case d == c.cnpToA:
		*p = packet{c: c, flow: 2*c.id + 1, op: 0x81, dqp: c.qpA, becn: true}
		c.cnpToA = 0
		c.throttle(now)
	case d == c.cnpToB:
		*p = packet{c: c, toB: true, flow: 2 * c.id, op: 0x81, dqp: c.qpB, becn: true}
		c.cnpToB = 0
	default:
		t := &c.tasks[c.th]
		*p = packet{c: c, flow: 2*c.id + 1, op: 0x11, psn: t.psn, dqp: c.qpA, mig: true, msn: t.msn}
		switch t.kind {
		case taskACK:
			p.syndrome = synAck
			c.pop()
		case taskNAK, taskRNR:
			p.syndrome = synNAKSeq
			if t.kind == taskRNR {
				p.syndrome = synRNR | 14 // RNR timer code 14: 1.28 ms
			}
			c.pop()
			c.cur, c.pkt = c.recSeq, c.recPkt // go back N
			c.recovering, c.nakQueued = false, false
		case taskRead:
			s.readResponse(c, t, now, p)
		}
	}
	s.reschedule(c)
}

// readResponse makes the next packet of READ response t into p.
func (s *Source) readResponse(c *conn, t *task, now int64, p *packet) {
	r := &s.rng
	i, n := t.i, t.n
	p.psn = (t.psn + i) & psnMask
	switch {
	case n == 1:
		p.op = 0x10
	case i == 0:
		p.op = 0x0D
	case i == n-1:
		p.op = 0x0F
	default:
		p.op = 0x0E
	}
	p.syndrome = synAck
	p.payload = int(c.pmtu)
	if i == n-1 {
		p.payload = int(t.length - i*c.pmtu)
	}
	p.payOff = (t.payOff + int(i*c.pmtu)) % patternSlack
	p.ce = r.chance(s.cfg.ce)
	if p.ce && c.cnpToB == 0 && r.chance(s.cfg.cnp) {
		c.cnpToB = now + int64(r.between(cnpDelayMin, cnpDelayMax))
	}
	t.i++
	if t.i == n {
		c.pop()
		return
	}
	t.due = now + int64(p.payload)/12 + 1 // back to back at about 100 Gb/s
}
