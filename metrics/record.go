package metrics

import (
	"bytes"
	"cmp"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/rocescope/rocescope/internal/scratch"
)

// FlowCounter names one exact, additive per-flow figure.
type FlowCounter uint8

// Per-flow counters.
const (
	FlowBytes            FlowCounter = iota // on-wire bytes
	FlowPayloadBytes                        // RDMA payload bytes
	FlowReadLatencySum                      // sum of READ request → first response latencies, ns
	FlowAckLatencySum                       // sum of AckReq request → ACK latencies, ns
	FlowPackets                             // frames
	FlowMessages                            // LAST and ONLY opcodes
	FlowCNP                                 // CNPs against this flow (attributed when the report is built)
	FlowECNCE                               // frames with ECN = CE
	FlowFECN                                // BTH FECN set
	FlowBECN                                // BTH BECN set
	FlowRetransmits                         // request PSN behind the expected one
	FlowPSNGaps                             // request PSN ahead of the expected one
	FlowOutOfOrder                          // request PSN a gap skipped, before any NAK
	FlowAcks                                // ACKs carried
	FlowNAKs                                // NAKs carried
	FlowRNRNAKs                             // RNR NAKs carried
	FlowReadLatencyCount                    // matched READ latencies
	FlowAckLatencyCount                     // matched ACK latencies
	FlowCNPCarried                          // CNPs this flow carried (dest QP = the throttled requester)
	numFlowCounters
)

// NumFlowCounters is the number of per-flow counters: they are
// FlowCounter(0) up to FlowCounter(NumFlowCounters-1).
const NumFlowCounters = int(numFlowCounters)

var flowCounterNames = [numFlowCounters]string{
	FlowBytes:            "bytes",
	FlowPayloadBytes:     "payload_bytes",
	FlowReadLatencySum:   "read_latency_sum_ns",
	FlowAckLatencySum:    "ack_latency_sum_ns",
	FlowPackets:          "packets",
	FlowMessages:         "messages",
	FlowCNP:              "cnp",
	FlowECNCE:            "ecn_ce",
	FlowFECN:             "fecn",
	FlowBECN:             "becn",
	FlowRetransmits:      "retransmits",
	FlowPSNGaps:          "psn_gaps",
	FlowOutOfOrder:       "out_of_order",
	FlowAcks:             "acks",
	FlowNAKs:             "naks",
	FlowRNRNAKs:          "rnr_naks",
	FlowReadLatencyCount: "read_latency_count",
	FlowAckLatencyCount:  "ack_latency_count",
	FlowCNPCarried:       "cnp_carried",
}

// String returns the report key of c.
func (c FlowCounter) String() string {
	if c < numFlowCounters {
		return flowCounterNames[c]
	}
	return "flow_counter"
}

// maxFlowOps is how many distinct opcodes a flow record keeps apart; the
// rest are summed as "other". Flows use few opcodes each (a WRITE stream
// uses four), so this is exact in practice; the window's opcode histogram
// is always exact.
const maxFlowOps = 8

// OpMix is the packets of a flow per BTH opcode.
type OpMix struct {
	Op    [maxFlowOps]uint8  // opcodes, in increasing order
	N     [maxFlowOps]uint64 // packets per opcode; N[i] == 0 ends the list
	Other uint64             // packets of opcodes beyond the first maxFlowOps seen
}

// Add counts n packets of opcode op. The opcodes stay in increasing
// order, the canonical one, so that a window's records need no pass of
// their own to sort them (one cache miss per record); which opcodes a full
// mix keeps apart is the first maxFlowOps seen, as in any order.
func (m *OpMix) Add(op uint8, n uint64) {
	for i := range m.Op {
		switch {
		case m.N[i] == 0:
			m.Op[i], m.N[i] = op, n
			return
		case m.Op[i] == op:
			m.N[i] += n
			return
		case m.Op[i] > op:
			if m.N[maxFlowOps-1] != 0 {
				m.Other += n // full
				return
			}
			copy(m.Op[i+1:], m.Op[i:maxFlowOps-1])
			copy(m.N[i+1:], m.N[i:maxFlowOps-1])
			m.Op[i], m.N[i] = op, n
			return
		}
	}
	m.Other += n
}

// Merge adds the packets of o to m.
func (m *OpMix) Merge(o *OpMix) {
	for i := range o.Op {
		if o.N[i] == 0 {
			break
		}
		m.Add(o.Op[i], o.N[i])
	}
	m.Other += o.Other
}

// FlowRecord is the exact record of one flow in one window, kept by the QP
// table and merged across workers and hosts. Its fields are laid out so
// that, in a table entry, the key, the activity profile and what every
// frame updates (the opcode mix, bytes, payload, packets) take its first
// four cache lines, the profile one of its own.
type FlowRecord struct {
	Key      FlowKey
	SQP      uint32 // source QP, when SQPKnown
	Sport    uint16 // UDP source port (RoCEv2), 0 otherwise
	SQPKnown bool
	Act      Activity // when in the window the flow sent, at the burst interval; on a cache line of its own
	Ops      OpMix
	C        [numFlowCounters]uint64
	hash     uint64 // Key's flow hash under the window's seed, for canonical order
}

// Get returns the value of counter c.
func (r *FlowRecord) Get(c FlowCounter) uint64 { return r.C[c] }

// merge adds o, a record of the same flow, to r.
func (r *FlowRecord) merge(o *FlowRecord) {
	for i := range r.C {
		r.C[i] += o.C[i]
	}
	r.Ops.Merge(&o.Ops)
	r.Act.merge(&o.Act)
	if !r.SQPKnown && o.SQPKnown {
		r.SQP, r.SQPKnown = o.SQP, true
	}
	if r.Sport == 0 {
		r.Sport = o.Sport
	}
}

// Compare orders flow keys by their binary form (see appendBinary),
// comparing the fields in place; it returns -1, 0 or +1.
func (a FlowKey) Compare(b FlowKey) int {
	as, bs := a.Src.As16(), b.Src.As16()
	if c := bytes.Compare(as[:], bs[:]); c != 0 {
		return c
	}
	ad, bd := a.Dst.As16(), b.Dst.As16()
	if c := bytes.Compare(ad[:], bd[:]); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Src.Kind(), b.Src.Kind()), cmp.Compare(a.Dst.Kind(), b.Dst.Kind()), cmp.Compare(a.DQP, b.DQP))
}

// CompareFlows orders records canonically, as a normalized window lists
// them: by flow hash, then by key (two keys with one hash are told apart).
func CompareFlows(a, b *FlowRecord) int {
	if a.hash != b.hash {
		return cmp.Compare(a.hash, b.hash)
	}
	return a.Key.Compare(b.Key)
}

// Hash returns the flow hash of the record's key under the seed of the
// window it belongs to.
func (r *FlowRecord) Hash() uint64 { return r.hash }

// SetHash sets the record's flow hash: the hash of its key under seed.
func (r *FlowRecord) SetHash(seed uint64) { r.hash = r.Key.Hash(seed) }

// flowOrder is scratch space for sorting a window's flow list, its arrays
// made when it first sorts one.
type flowOrder struct {
	a, b  *scratch.Array[sortItem] // the sort items, and radix's other half
	perm  *scratch.Array[uint32]   // of permute: the sorted positions
	count []uint32
	lines lines // of permute: the records to prefetch
}

// sortItem is a record's place in the sort: its hash and position.
type sortItem struct {
	hash uint64
	pos  uint32
}

// normalize puts flows in canonical order (compareFlows) and merges records
// of the same flow (a flow split across hosts by packet), so that a window's
// flow list is the same whatever order its parts arrived in. It sorts an
// index of (hash, position) pairs, 16 bits of hash per pass, which costs a
// few nanoseconds per flow where comparing 290-byte records cost hundreds,
// then moves each record once into its place. A list in order already is
// left where it is. The pass that merges repeated records is skipped when
// the sort found none: on a list of 200 000 records it reads a line of
// each.
func (o *flowOrder) normalize(flows []FlowRecord) []FlowRecord {
	// A list normalized already, as a shard's list is when it closes, or
	// merged from normalized lists (mergeFlows), stays where it is.
	if !inOrder(flows) {
		flows = o.sort(flows)
	}
	return flows
}

// items returns the scratch array of sort items, empty, with room for n.
func (o *flowOrder) items(n int) []sortItem {
	if o.a == nil {
		o.a, o.b, o.perm = scratch.NewArray[sortItem](), scratch.NewArray[sortItem](), scratch.NewArray[uint32]()
	}
	return o.a.Resize(n)[:0]
}

// sort is normalize for a list not in canonical order.
func (o *flowOrder) sort(flows []FlowRecord) []FlowRecord {
	n := len(flows)
	a := o.items(n)[:n]
	for i := range flows {
		a[i] = sortItem{flows[i].hash, uint32(i)}
	}
	items := o.radix(a, o.b.Resize(n))
	// Equal hashes keep their input order in a radix sort: order them by
	// key, so that the result does not depend on the input order. Records
	// of one flow have equal hashes: where no two hashes are equal, no
	// flow is listed twice.
	twice := false
	for i := 0; i < n; {
		j := i + 1
		for j < n && items[j].hash == items[i].hash {
			j++
		}
		if j-i > 1 {
			run := items[i:j]
			slices.SortFunc(run, func(x, y sortItem) int { return flows[x.pos].Key.Compare(flows[y.pos].Key) })
			for k := 1; k < len(run); k++ {
				twice = twice || flows[run[k-1].pos].Key.Equal(&flows[run[k].pos].Key)
			}
		}
		i = j
	}
	// The positions apart, four bytes each: permute follows its cycles
	// through them one dependent load at a time, and a dense array stays
	// in the second-level cache where the sort items would not.
	perm := o.perm.Resize(n)
	for i := range items {
		perm[i] = items[i].pos
	}
	o.permute(flows, perm)
	if twice {
		return merged(flows)
	}
	return flows
}

// merged returns flows, in canonical order, with the records of each flow
// listed more than once merged into its first, in place.
func merged(flows []FlowRecord) []FlowRecord {
	out := flows[:0]
	for i := range flows {
		if k := len(out); k > 0 && out[k-1].Key.Equal(&flows[i].Key) {
			out[k-1].merge(&flows[i])
			continue
		}
		if len(out) == i {
			out = out[:i+1] // in place already: no copy of 300 bytes
			continue
		}
		out = append(out, flows[i])
	}
	return out
}

// inOrder reports whether every record of flows comes after the one before
// it in canonical order: the list is sorted and holds no flow twice.
func inOrder(flows []FlowRecord) bool {
	for i := 1; i < len(flows); i++ {
		if CompareFlows(&flows[i-1], &flows[i]) >= 0 {
			return false
		}
	}
	return true
}

// mergeFlows returns a with b appended, a's capacity holding both, merged
// so that the result is in canonical order when a and b are: one pass from
// the back reads both lists in sequence and moves each record at most once.
// Lists not in order come out in some order, which normalize then sorts.
func mergeFlows(a, b []FlowRecord) []FlowRecord {
	out := a[:len(a)+len(b)]
	i, j := len(a)-1, len(b)-1
	for k := len(out) - 1; j >= 0; k-- {
		// k > i while j ≥ 0: the records of a not yet moved stay intact.
		if i >= 0 && CompareFlows(&a[i], &b[j]) > 0 {
			out[k] = a[i]
			i--
		} else {
			out[k] = b[j]
			j--
		}
	}
	return out
}

// radix sorts a by hash, keeping the input order of equal hashes, with b
// of a's length as the other half, and returns the sorted slice (a or b).
// One pass deals the items into buckets by the top bits of their hashes,
// one to two items a bucket, as a flow hash is uniform, and an insertion
// sort then orders each bucket where it is: each item is written at random
// once. Sorting 16 bits at a time, least significant first, wrote each
// four times: 17.0 ns an item against 10.3 (BenchmarkRadix, on the KVM
// VM); with four items a bucket, 11.2.
func (o *flowOrder) radix(a, b []sortItem) []sortItem {
	n := len(a)
	if n < 256 {
		slices.SortStableFunc(a, byHash)
		return a
	}
	k := min(max(bits.Len(uint(n)), 8), maxBucketBits)
	shift := 64 - k
	if len(o.count) < 1<<k {
		o.count = make([]uint32, 1<<k)
	}
	count := o.count[:1<<k]
	clear(count)
	for _, it := range a {
		count[it.hash>>shift]++
	}
	var sum uint32
	for d, c := range count {
		count[d] = sum
		sum += c
	}
	for _, it := range a {
		d := it.hash >> shift
		b[count[d]] = it
		count[d]++
	}
	start := uint32(0)
	for _, end := range count { // the end of each bucket now
		switch bucket := b[start:end]; {
		case len(bucket) > maxInsertion:
			// Hashes that are not uniform, as a test's.
			slices.SortStableFunc(bucket, byHash)
		case len(bucket) > 1:
			for i := 1; i < len(bucket); i++ {
				it, j := bucket[i], i
				for ; j > 0 && bucket[j-1].hash > it.hash; j-- {
					bucket[j] = bucket[j-1]
				}
				bucket[j] = it
			}
		}
		start = end
	}
	return b
}

// Bounds of radix: the bits of the hash it deals buckets by at most (a
// count array of 1 MiB), and the longest bucket it sorts by insertion.
const (
	maxBucketBits = 18
	maxInsertion  = 32
)

// byHash compares sort items by hash.
func byHash(x, y sortItem) int { return cmp.Compare(x.hash, y.hash) }

// permute moves the records of flows so that position i holds the record
// that was at perm[i], following each cycle of the permutation once. It
// overwrites perm. The records of a cycle are scattered over the list: it
// prefetches them permuteAhead at a time, following the cycle ahead of
// the moves.
func (o *flowOrder) permute(flows []FlowRecord, perm []uint32) {
	l := &o.lines
	for i := range perm {
		if perm[i] == uint32(i) {
			continue
		}
		tmp := flows[i]
		j, ahead := i, i // the records of the cycle up to ahead are asked for
		for {
			if j == ahead {
				for range permuteAhead {
					if ahead = int(perm[ahead]); ahead == i {
						break
					}
					l.span(unsafe.Pointer(&flows[ahead]), unsafe.Sizeof(flows[ahead]))
				}
				l.fetch()
			}
			k := int(perm[j])
			perm[j] = uint32(j)
			if k == i {
				flows[j] = tmp
				break
			}
			flows[j] = flows[k]
			j = k
		}
	}
}

// permuteAhead is how many records of a cycle permute asks for at a time.
const permuteAhead = 8
