package synth

import (
	"io"
	"math"
	"math/bits"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
)

// patternSlack is the range of offsets payloads start at in the byte
// pattern they are copied from.
const patternSlack = 4096

// host is one end of connections and background traffic.
type host struct {
	mac  [6]byte
	ip4  [4]byte
	ip6  [16]byte
	addr [2]netip.Addr // IPv4, IPv6
}

// Source generates a synthetic RoCEv2 trace and its exact truth. It
// implements capture.Source; see the package documentation.
type Source struct {
	cfg     *settings
	rng     rng
	hosts   []host
	conns   []conn
	alias   alias
	jitter  []int32     // jitter connections
	jitCum  [2][]uint64 // cumulative 53-bit thresholds of the jitter connections, by window parity
	heap    []int32     // connections with reactive packets, by due time
	tally   *tally
	pattern []byte
	arena   []byte
	slot    int // bytes per frame in arena
	encap   int // bytes of mirror encapsulation before each frame
	greSeq  uint32
	k       int // frames generated
	pkt     packet

	// The scenarios' frames, in time order, and their truth; si is the
	// next to write, and tNext the time of background frame k once drawn.
	script      []scripted
	scriptTruth []Event
	scriptLooks []Event
	si          int
	tNext       int64
	tDrawn      bool

	received atomic.Uint64
	closed   atomic.Bool
	truth    *Truth
}

var _ capture.Source = (*Source)(nil)

// New returns a Source for cfg (nil means all defaults), or an error
// wrapping ErrConfig.
func New(cfg *Config) (*Source, error) {
	st, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: st, rng: newRNG(st.Seed)}
	s.encap = erspanLen(st.ERSPAN)
	s.slot = s.encap + maxFrame
	if st.SnapLen > 0 {
		s.slot = min(st.SnapLen, s.slot)
	}
	s.pattern = make([]byte, 2*patternSlack+maxPayload+64)
	for i := 0; i < len(s.pattern); i += 8 {
		v := s.rng.next()
		for j := 0; j < 8 && i+j < len(s.pattern); j++ {
			s.pattern[i+j] = byte(v >> (8 * j))
		}
	}
	s.makeHosts()
	keys, sqp := s.makeConns()
	if keys, sqp, err = s.makeScenario(keys, sqp); err != nil {
		return nil, err
	}
	s.tally = newTally(st.Seed, int64(st.Window), keys, sqp)
	s.tally.truth.JitterFlows = s.jitterKeys(keys)
	return s, nil
}

// makeHosts makes the hosts: 02:00:00:00:hh:ll, 10.0.hh.ll+1 and
// fd00::hh:ll+1 style addresses, in host order.
func (s *Source) makeHosts() {
	s.hosts = make([]host, s.cfg.Hosts)
	for i := range s.hosts {
		h := &s.hosts[i]
		n := i + 1
		h.mac = [6]byte{0x02, 0, 0, 0, byte(n >> 8), byte(n)}
		h.ip4 = [4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}
		h.ip6 = [16]byte{0xfd, 0x00, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, byte(n >> 16), byte(n >> 8), byte(n)}
		h.addr = [2]netip.Addr{netip.AddrFrom4(h.ip4), netip.AddrFrom16(h.ip6)}
	}
}

// makeConns makes the connections and their weights, and returns the keys
// of their flows (2i and 2i+1 for connection i) and the QPs that send them.
func (s *Source) makeConns() (keys []FlowKey, sqp []uint32) {
	c, r := s.cfg, &s.rng
	s.conns = make([]conn, c.Flows)
	used := make(map[uint32]bool, 2*c.Flows)
	qpn := func() uint32 {
		for {
			q := uint32(r.between(0x100, psnMask))
			if !used[q] {
				used[q] = true
				return q
			}
		}
	}
	keys = make([]FlowKey, 2*c.Flows)
	sqp = make([]uint32, 2*c.Flows)
	for i := range s.conns {
		x := &s.conns[i]
		x.id, x.heapPos = int32(i), -1
		x.ha = int32(r.intn(c.Hosts))
		x.hb = int32(r.intn(c.Hosts - 1))
		if x.hb >= x.ha {
			x.hb++
		}
		x.qpA, x.qpB = qpn(), qpn()
		x.flowLabel = flowLabel(x.qpA, x.qpB)
		x.sport = udpSourcePort(x.flowLabel)
		x.v6 = r.chance(c.ipv6)
		if r.chance(c.vlan) {
			x.vlan = uint16(r.between(100, 107))
		}
		x.pmtu = uint32(c.PMTU)
		if x.pmtu == 0 {
			x.pmtu = []uint32{1024, 4096}[r.intn(2)]
		}
		x.rkey = uint32(r.next())
		x.va = 0x7f00_0000_0000 + uint64(r.intn(1<<24))<<12
		start := uint32(r.intn(psnMask + 1))
		if r.intn(8) == 0 {
			start = psnMask - uint32(r.intn(256)) // wraps soon
		}
		x.frontier, x.epsn = start, start
		fam := 0
		if x.v6 {
			fam = 1
		}
		a, b := s.hosts[x.ha].addr[fam], s.hosts[x.hb].addr[fam]
		keys[2*i] = FlowKey{Src: a, Dst: b, DQP: x.qpB}
		keys[2*i+1] = FlowKey{Src: b, Dst: a, DQP: x.qpA}
		sqp[2*i], sqp[2*i+1] = x.qpA, x.qpB
	}
	s.heap = make([]int32, 0, c.Flows)

	// Weights: a random order of the connections; the first JitterFlows
	// are the jitter connections, the rest get Zipf weights by rank.
	order := make([]int32, c.Flows)
	for i := range order {
		order[i] = int32(i)
	}
	for i := len(order) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	s.jitter = order[:c.JitterFlows]
	for _, j := range s.jitter {
		s.conns[j].scale = c.MaxMessage
	}
	for par := range s.jitCum {
		sum := 0.0
		s.jitCum[par] = make([]uint64, len(s.jitter))
		for j := range s.jitter {
			share := c.JitterShare
			if (j+par)%2 == 1 {
				share /= 10
			}
			sum += share
			s.jitCum[par][j] = uint64(probOf(sum))
		}
	}
	rest := order[c.JitterFlows:]
	w := make([]float64, len(rest))
	for rank, i := range rest {
		w[rank] = 1 / math.Pow(float64(rank+1), c.ZipfS)
		s.conns[i].scale = max(1, int(float64(c.MaxMessage)*w[rank]))
	}
	s.alias = newAlias(rest, w)
	return keys, sqp
}

// jitterKeys returns the keys of the request flows of the jitter
// connections, sorted.
func (s *Source) jitterKeys(keys []FlowKey) []FlowKey {
	var out []FlowKey
	for _, j := range s.jitter {
		out = append(out, keys[2*j])
	}
	slices.SortFunc(out, FlowKey.Compare)
	return out
}

// flowLabel derives the IPv6 flow label of a connection from its QP pair,
// as Linux's rdma_calc_flow_label does: both directions get the same one.
func flowLabel(a, b uint32) uint32 {
	v := uint64(a) * uint64(b)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v & 0xfffff)
}

// udpSourcePort derives the UDP source port from a flow label, as Linux's
// rdma_flow_label_to_udp_sport does (range 0xC000-0xFFFF).
func udpSourcePort(fl uint32) uint16 {
	lo, hi := fl&0x3fff, fl&0xfc000
	lo ^= hi >> 14
	return uint16(lo | 0xc000)
}

// Next fills b with the next frames, in time order, and returns io.EOF
// after the last one. The frames' bytes stay valid until the next call to
// Next or Close.
func (s *Source) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	if s.closed.Load() {
		return os.ErrClosed
	}
	if s.k >= s.cfg.Packets && s.si >= len(s.script) {
		s.finish()
		return io.EOF
	}
	n := cap(b.Frames)
	if n == 0 {
		return capture.ErrNoRoom
	}
	if len(s.arena) < n*s.slot {
		s.arena = make([]byte, n*s.slot)
	}
	for i := 0; i < n && (s.k < s.cfg.Packets || s.si < len(s.script)); i++ {
		buf := s.arena[i*s.slot : (i+1)*s.slot]
		if !s.tDrawn && s.k < s.cfg.Packets {
			s.tNext, s.tDrawn = s.timeOf(s.k), true
		}
		var t int64
		var wire, captured int
		if s.si < len(s.script) && (!s.tDrawn || s.script[s.si].t < s.tNext) {
			// A scenario's frame, which draws no random number, so that
			// the background traffic stays what it is without it.
			f := &s.script[s.si]
			s.si++
			t = f.t
			wire, captured = s.writeScripted(buf[s.encap:], f)
		} else {
			t, s.tDrawn = s.tNext, false
			wire, captured = s.frame(buf[s.encap:], t)
			s.k++
		}
		if s.encap > 0 {
			wire, captured = s.mirror(buf, wire, t), s.encap+captured
		}
		b.Frames = capture.AppendFrame(b.Frames, buf[:captured:captured], t, uint32(wire), decode.LinkEthernet, 0)
	}
	s.received.Add(uint64(len(b.Frames)))
	return nil
}

// finish completes the truth once.
func (s *Source) finish() {
	if s.truth == nil {
		s.truth = s.tally.finish()
		s.truth.Events, s.truth.LookAlikes = s.scriptTruth, s.scriptLooks
	}
}

// Truth returns the ground truth of the whole trace once Next has returned
// io.EOF, and nil before.
func (s *Source) Truth() *Truth { return s.truth }

// Stats returns the frames delivered so far; Dropped and Errors stay zero.
func (s *Source) Stats() capture.Stats { return capture.Stats{Received: s.received.Load()} }

// Close makes later calls to Next return os.ErrClosed. It is idempotent.
func (s *Source) Close() error {
	s.closed.Store(true)
	return nil
}

// timeOf returns the time of frame k: frames are spread evenly over the
// duration, each at a random offset within its share of it, so times
// increase with k.
func (s *Source) timeOf(k int) int64 {
	d, n := uint64(s.cfg.Duration), uint64(s.cfg.Packets)
	lo, hi := mulDiv(uint64(k), d, n), mulDiv(uint64(k)+1, d, n)
	t := s.cfg.Start + int64(lo)
	if hi > lo {
		t += int64(s.rng.below(hi - lo))
	}
	return t
}

// mulDiv returns a*b/c rounded down, for a <= c.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// frame writes the frame at time t into buf and returns its on-wire and
// captured lengths.
func (s *Source) frame(buf []byte, t int64) (wire, captured int) {
	r := &s.rng
	switch {
	case r.chance(s.cfg.other):
		return s.background(buf, t)
	case r.chance(s.cfg.pfcAfterOther):
		return s.pfc(buf, t)
	}
	p := &s.pkt
	for {
		if len(s.heap) > 0 && s.conns[s.heap[0]].due <= t {
			s.reactive(&s.conns[s.heap[0]], t, p)
			break
		}
		c := s.pickAllowed(t)
		if !c.canSend() {
			s.reactive(c, t, p)
			break
		}
		if s.request(c, t, p) {
			break
		}
	}
	wire, captured = s.writeRoCE(buf, p)
	s.tally.count(t, s.encap+wire, classRoCE, p, nil)
	return wire, captured
}

// pick draws a connection by weight: a jitter connection with its share
// of the frames in t's window, else one of the others by Zipf weight.
func (s *Source) pick(t int64) int32 {
	u := s.rng.next() >> 11
	if len(s.jitter) > 0 {
		cum := s.jitCum[(t/int64(s.cfg.Window))&1]
		if u < cum[len(cum)-1] {
			j, _ := slices.BinarySearch(cum, u+1)
			return s.jitter[j]
		}
	}
	return s.alias.pick(&s.rng)
}

// pickAllowed returns the connection whose requester sends next: a
// connection throttled by CNPs to a fraction of its rate takes the slot
// with that probability, else another is drawn (at most 8 draws).
func (s *Source) pickAllowed(t int64) *conn {
	for range 7 {
		c := &s.conns[s.pick(t)]
		if r := c.rate(t); r == fullRate || uint32(s.rng.next()>>48) < r {
			return c
		}
	}
	return &s.conns[s.pick(t)]
}

// reschedule puts c at its place in the heap of reactive packets.
func (s *Source) reschedule(c *conn) {
	c.due = c.nextDue()
	switch {
	case c.due == 0 && c.heapPos >= 0:
		s.heapRemove(c)
	case c.due != 0 && c.heapPos < 0:
		c.heapPos = int32(len(s.heap))
		s.heap = append(s.heap, c.id)
		s.heapUp(int(c.heapPos))
	case c.due != 0:
		s.heapUp(int(c.heapPos))
		s.heapDown(int(c.heapPos))
	}
}

// heapRemove takes c out of the heap.
func (s *Source) heapRemove(c *conn) {
	i, last := int(c.heapPos), len(s.heap)-1
	s.heapSwap(i, last)
	s.heap = s.heap[:last]
	c.heapPos = -1
	if i < last {
		s.heapUp(i)
		s.heapDown(i)
	}
}

// heapLess orders the heap by due time, then connection.
func (s *Source) heapLess(i, j int) bool {
	a, b := &s.conns[s.heap[i]], &s.conns[s.heap[j]]
	return a.due < b.due || a.due == b.due && a.id < b.id
}

func (s *Source) heapSwap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.conns[s.heap[i]].heapPos = int32(i)
	s.conns[s.heap[j]].heapPos = int32(j)
}

func (s *Source) heapUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.heapLess(i, p) {
			return
		}
		s.heapSwap(i, p)
		i = p
	}
}

func (s *Source) heapDown(i int) {
	for {
		l, m := 2*i+1, i
		if l < len(s.heap) && s.heapLess(l, m) {
			m = l
		}
		if l+1 < len(s.heap) && s.heapLess(l+1, m) {
			m = l + 1
		}
		if m == i {
			return
		}
		s.heapSwap(i, m)
		i = m
	}
}

// pfc writes a PFC frame: mostly priority 3, sometimes 3 and 4; mostly
// XOFF (quanta 0xffff), sometimes XON (0) or a random pause.
func (s *Source) pfc(buf []byte, t int64) (wire, captured int) {
	r := &s.rng
	f := pfcFrame{src: [6]byte{0x02, 0x5e, 0, 0, 0, byte(1 + r.intn(4))}, enable: 1 << 3}
	if r.intn(10) == 0 {
		f.enable |= 1 << 4
	}
	for prio := range f.quanta {
		if f.enable&(1<<prio) == 0 {
			continue
		}
		switch u := r.intn(10); {
		case u < 7:
			f.quanta[prio] = 0xffff
		case u < 9:
		default:
			f.quanta[prio] = uint16(r.between(1, 0xfffe))
		}
	}
	wire, captured = writePFC(buf, &f)
	s.tally.count(t, s.encap+wire, classPFC, nil, &f)
	return wire, captured
}

// Ports of background UDP and TCP: away from the range RoCE source ports
// take (0xC000-0xFFFF), so that analyzers and tests can tell them apart.
const bgPortMin, bgPortMax = 20000, 29999

// background writes an ARP request, or a UDP datagram or TCP segment
// between two hosts on ports bgPortMin..bgPortMax; one UDP datagram in
// sixteen comes from port 4791 (which does not make it RoCE).
func (s *Source) background(buf []byte, t int64) (wire, captured int) {
	r := &s.rng
	a := r.intn(s.cfg.Hosts)
	b := r.intn(s.cfg.Hosts - 1)
	if b >= a {
		b++
	}
	g := background{kind: r.intn(bgKinds), payOff: r.intn(len(backgroundText) - 1460),
		l2:    l2{src: &s.hosts[a], dst: &s.hosts[b], v6: r.chance(s.cfg.ipv6), flow: uint32(r.intn(1 << 20))},
		sport: uint16(r.between(bgPortMin, bgPortMax)), dport: uint16(r.between(bgPortMin, bgPortMax)), seq: uint32(r.next())}
	if r.chance(s.cfg.vlan) {
		g.l2.vlan = uint16(r.between(100, 107))
	}
	switch g.kind {
	case bgUDP:
		g.payload = r.between(8, 512)
		if r.intn(16) == 0 {
			g.sport = decode.DefaultRoCEPort
		}
	case bgTCP:
		g.payload = r.between(0, 1460)
	}
	wire, captured = s.writeBackground(buf, &g)
	s.tally.count(t, s.encap+wire, classOther, nil, nil)
	return wire, captured
}

// alias samples connections by weight in constant time (Walker's alias
// method, with integer thresholds).
type alias struct {
	ids   []int32
	alias []int32
	thr   []uint64 // 53-bit threshold of keeping the drawn slot
}

// newAlias returns an alias table for ids with weights w.
func newAlias(ids []int32, w []float64) alias {
	n := len(ids)
	a := alias{ids: ids, alias: make([]int32, n), thr: make([]uint64, n)}
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	scaled := make([]float64, n)
	var small, large []int32
	for i, x := range w {
		scaled[i] = float64(x * float64(n) / sum)
		if scaled[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		l, g := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		a.thr[l], a.alias[l] = uint64(probOf(scaled[l])), g
		scaled[g] = float64(scaled[g] + scaled[l] - 1)
		if scaled[g] < 1 {
			large = large[:len(large)-1]
			small = append(small, g)
		}
	}
	for _, i := range append(small, large...) {
		a.thr[i], a.alias[i] = 1<<53, i
	}
	return a
}

// pick returns a connection id.
func (a *alias) pick(r *rng) int32 {
	i := r.intn(len(a.ids))
	if r.next()>>11 < a.thr[i] {
		return a.ids[i]
	}
	return a.ids[a.alias[i]]
}
