package metrics

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/mapped"
	"github.com/rocescope/rocescope/sketch"
)

// ErrMismatch is wrapped by Merge errors: windows of different start,
// length or sketch configuration.
var ErrMismatch = errors.New("windows do not match")

// NoWindow is a window start before every window a state can hold: the
// engine's windows start within ±(2^63-1) ns, rounded towards zero to a
// multiple of their length, so never at math.MinInt64. A merger that has
// taken no window yet stands at NoWindow.
const NoWindow int64 = math.MinInt64

// Window is the complete, mergeable state of one window: exact counters,
// the exact records of the flows the QP tables held, and the sketches. The
// engine builds one per worker and window and merges them into the host's
// window; `rocescope merge` merges the windows of several hosts with the same
// [Window.Merge]. A Window is not safe for concurrent use.
type Window struct {
	Start  int64    // window start, ns since the Unix epoch, a multiple of Length
	Length int64    // window length, ns
	Hosts  []string // hosts whose state is in this window, sorted, no duplicates
	// From and To bound the part of the window the input covered, ns:
	// less than [Start, Start+Length) for the first and last windows of a
	// capture or trace. Rates are computed over it.
	From, To int64
	// Segment is the part of its host's capture the window belongs to: 0,
	// and one more after each clock step back, whose windows start again
	// at the new time (see the package doc). Two states of one host and
	// window from different segments hold different frames, and merge.
	Segment uint32
	// Burst is the burst interval of the flows' activity profiles, ns
	// (Config.Burst); 0 in a state of a version before them.
	Burst int64

	Counters Counters
	Flows    []FlowRecord // exact flow records; canonical (by flow hash, then key) after Normalize
	CM       []CMMessage  // CM MADs seen, in arrival order per source
	// Pauses are what PFC frames paused, per source MAC and priority;
	// by MAC and priority after Normalize.
	Pauses []PauseRecord
	// Retrans are the flows' retransmission episodes (their parts in this
	// window); by flow key and time after Normalize.
	Retrans []Retransmission

	Distinct     *sketch.Distinct      // distinct flows
	FlowBytes    *sketch.CountMin      // bytes per flow
	FlowPackets  *sketch.CountMin      // packets per flow
	Top          *sketch.TopK[FlowKey] // heavy hitters by bytes
	ReadLatency  *sketch.Quantile      // READ request → first response, ns
	AckLatency   *sketch.Quantile      // AckReq request → ACK, ns
	sketchConfig sketchConfig
	order        flowOrder // scratch space of Normalize
	late         bool      // a shard's late part of a window it closed before (shard.lateWindow)
	list         int64     // the number of its flow list in the shard filling it (shard.newList)
	flowMem      *region   // the mapping the shard that filled Flows grew it in, if any (see growFlows)
}

// CMMessage is what a connection management MAD tells about a connection:
// a REQ carries the requester's QPN, a REP the responder's QPN and the REQ's
// communication ID, which pairs them.
type CMMessage struct {
	Src, Dst     decode.Addr
	AttrID       uint16
	LocalCommID  uint32
	RemoteCommID uint32
	LocalQPN     uint32
}

// sketchConfig is what shapes the sketches; windows merge only when equal.
type sketchConfig struct {
	Seed         uint64
	DistinctBits int
	CMDepth      int
	CMWidth      int
	TopKSize     int
}

func (c *Config) sketchConfig() sketchConfig {
	return sketchConfig{Seed: c.Seed, DistinctBits: c.DistinctBits, CMDepth: c.CMDepth, CMWidth: c.CMWidth, TopKSize: c.TopKSize}
}

// newWindow returns an empty window with sketches shaped by cfg.
func newWindow(cfg *Config) (*Window, error) {
	w, err := newBareWindow(cfg)
	if err != nil {
		return nil, err
	}
	fs, err := newFlowSketches(w.sketchConfig)
	if err != nil {
		return nil, err
	}
	w.setFlowSketches(fs)
	return w, nil
}

// newBareWindow is newWindow without the flow sketches, which the pool's
// windows take apart (windowPool.sketches).
func newBareWindow(cfg *Config) (*Window, error) {
	sc := cfg.sketchConfig()
	w := &Window{sketchConfig: sc, Burst: int64(cfg.Burst)}
	var err error
	if w.Top, err = sketch.NewTopK[FlowKey](sketch.TopKConfig{K: sc.TopKSize, Seed: sc.Seed}); err != nil {
		return nil, fmt.Errorf("metrics: top-k sketch: %w", err)
	}
	if w.ReadLatency, err = sketch.NewQuantile(sketch.QuantileConfig{}); err != nil {
		return nil, fmt.Errorf("metrics: quantile sketch: %w", err)
	}
	if w.AckLatency, err = sketch.NewQuantile(sketch.QuantileConfig{}); err != nil {
		return nil, fmt.Errorf("metrics: quantile sketch: %w", err)
	}
	return w, nil
}

// flowSketches are the sketches of a window that count every flow, the
// largest (megabytes each): the engine fills them when the window closes,
// and before only with the frames of flows its QP tables cannot hold, so
// that its windows take them only then (windowPool.sketches).
type flowSketches struct {
	distinct       *sketch.Distinct
	bytes, packets *sketch.CountMin
}

func newFlowSketches(sc sketchConfig) (fs flowSketches, err error) {
	if fs.distinct, err = sketch.NewDistinct(sketch.DistinctConfig{Bits: sc.DistinctBits, Seed: sc.Seed}); err != nil {
		return fs, fmt.Errorf("metrics: distinct sketch: %w", err)
	}
	cm := sketch.CountMinConfig{Depth: sc.CMDepth, Width: sc.CMWidth, Seed: sc.Seed}
	if fs.bytes, err = newMappedCountMin(cm); err != nil {
		return fs, err
	}
	if fs.packets, err = newMappedCountMin(cm); err != nil {
		return fs, err
	}
	return fs, nil
}

// newMappedCountMin returns a Count-Min sketch shaped by cfg whose
// counters live in a region of their own, freed when the sketch is
// collected: a flow's bytes or packets land on a random counter of each
// row, so that a window's flows touch every page of the megabytes of
// counters, and read each before writing it: they are committed at once
// (Populate), not a fault or two a page (1 024 faults of 4 KiB a run for
// the two sketches on the Go heap).
func newMappedCountMin(cfg sketch.CountMinConfig) (*sketch.CountMin, error) {
	n, err := cfg.Counters()
	if err != nil {
		return nil, fmt.Errorf("metrics: count-min sketch: %w", err)
	}
	counters, mem := makeArray[uint64](n)
	mem.mem.Populate() // counters are read before they are written
	c, err := sketch.NewCountMinIn(cfg, counters)
	if err != nil {
		mem.free()
		return nil, fmt.Errorf("metrics: count-min sketch: %w", err)
	}
	runtime.AddCleanup(c, (*region).free, &mem)
	return c, nil
}

// setFlowSketches gives w the flow sketches fs, which may be none.
func (w *Window) setFlowSketches(fs flowSketches) {
	w.Distinct, w.FlowBytes, w.FlowPackets = fs.distinct, fs.bytes, fs.packets
}

// takeFlowSketches returns the flow sketches of w, which is left with none.
func (w *Window) takeFlowSketches() flowSketches {
	fs := flowSketches{w.Distinct, w.FlowBytes, w.FlowPackets}
	w.setFlowSketches(flowSketches{})
	return fs
}

// reset empties the sketches.
func (fs flowSketches) reset() {
	fs.distinct.Reset()
	fs.bytes.Reset()
	fs.packets.Reset()
}

// mustValid returns v, made from a configuration already validated, which
// cannot fail.
func mustValid[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("metrics: allocation failed after validation: %v", err))
	}
	return v
}

// Index returns the window's index: its start divided by its length.
func (w *Window) Index() int64 { return w.Start / w.Length }

// Seed returns the flow hash seed of the window's sketches.
func (w *Window) Seed() uint64 { return w.sketchConfig.Seed }

// reset empties w for reuse as window start, keeping its memory. The flow
// sketches are left: the pool takes them, and resets them, when a window
// comes back (windowPool.put).
func (w *Window) reset(start, length int64) {
	// Segment is left: the engine sets it on every window it emits.
	w.Start, w.Length = start, length
	w.From, w.To = start, start
	w.late = false
	w.Hosts = w.Hosts[:0]
	w.Counters = Counters{}
	w.markWritten()
	w.Flows = w.Flows[:0]
	w.CM = w.CM[:0]
	w.Pauses = w.Pauses[:0]
	w.Retrans = w.Retrans[:0]
	w.Top.Reset()
	w.ReadLatency.Reset()
	w.AckLatency.Reset()
}

// Merge adds o, the state of the same window from another worker or host,
// to w. Both must have the same start, length and sketch configuration.
// The flow list of w is left unnormalized; call Normalize before reading it.
func (w *Window) Merge(o *Window) error { return w.merge(o, false) }

// mergeDisjoint is Merge for windows that saw disjoint sets of flows, such
// as the shards of one host: their heavy-hitter tables merge exactly.
func (w *Window) mergeDisjoint(o *Window) error { return w.merge(o, true) }

func (w *Window) merge(o *Window, disjoint bool) error {
	if w.Start != o.Start || w.Length != o.Length {
		return fmt.Errorf("metrics: merge window %d+%d with %d+%d: %w", w.Start, w.Length, o.Start, o.Length, ErrMismatch)
	}
	if w.sketchConfig != o.sketchConfig {
		return fmt.Errorf("metrics: merge window %d: sketch configuration %+v differs from %+v: %w", w.Start, o.sketchConfig, w.sketchConfig, ErrMismatch)
	}
	// A state of a version before activity profiles (burst 0) has none
	// and merges with any.
	if w.Burst != o.Burst && w.Burst != 0 && o.Burst != 0 {
		return fmt.Errorf("metrics: merge window %d: burst interval %d ns differs from %d ns: %w", w.Start, o.Burst, w.Burst, ErrMismatch)
	}
	mergeTop := w.Top.Merge
	if disjoint {
		mergeTop = w.Top.MergeDisjoint
	}
	for _, err := range []error{
		w.mergeFlowSketches(o),
		mergeTop(o.Top),
		w.ReadLatency.Merge(o.ReadLatency),
		w.AckLatency.Merge(o.AckLatency),
	} {
		if err != nil {
			return fmt.Errorf("metrics: merge window %d: %w", w.Start, err)
		}
	}
	w.cover(o.From, o.To)
	w.Burst = max(w.Burst, o.Burst)
	w.Counters.Add(&o.Counters)
	if disjoint {
		w.mergeShardFlows(o)
	} else {
		roomFlows(w, len(o.Flows)) // in the window's region, not the heap: see growFlows
		w.Flows = append(w.Flows, o.Flows...)
	}
	w.CM = append(w.CM, o.CM...)
	w.Pauses = append(w.Pauses, o.Pauses...)
	w.Retrans = append(w.Retrans, o.Retrans...)
	for _, h := range o.Hosts {
		if i, found := slices.BinarySearch(w.Hosts, h); !found {
			w.Hosts = slices.Insert(w.Hosts, i, h)
		}
	}
	return nil
}

// mergeFlowSketches merges the flow sketches of o into w's. A shard's
// window has them only when its QP table could not hold a flow: w takes
// o's when it has none, and keeps its own when o has none.
func (w *Window) mergeFlowSketches(o *Window) error {
	switch {
	case o.FlowBytes == nil:
		return nil
	case w.FlowBytes == nil:
		w.setFlowSketches(o.takeFlowSketches())
		return nil
	}
	return errors.Join(w.Distinct.Merge(o.Distinct), w.FlowBytes.Merge(o.FlowBytes), w.FlowPackets.Merge(o.FlowPackets))
}

// mergeShardFlows merges the flow list of o, a window of another shard, into
// w's: two normalized lists make a normalized one (mergeFlows). When w's
// list is empty (the first shard's window, and the only one with one
// worker), or when w's list has no room for both and o's has more, the two
// swap lists first, which the result does not depend on: an empty list
// takes o's without a record copied, and a merge writes into memory used
// before, growing the larger list into pages never touched only by what
// neither holds (two workers at 100 k connections, 12 M frames: a merge
// whose lists had room for 51 922 and 103 322 of 103 936 records grew the
// smaller one, 4 496 page faults; the larger one, 53 pages).
func (w *Window) mergeShardFlows(o *Window) {
	if n := len(w.Flows) + len(o.Flows); o.flowMem != nil && o.flowMem.holds(o.Flows) && (len(w.Flows) == 0 || cap(w.Flows) < n && cap(o.Flows) > cap(w.Flows)) {
		w.swapFlows(o)
	}
	roomFlows(w, len(o.Flows))
	w.Flows = mergeFlows(w.Flows, o.Flows)
}

// swapFlows exchanges the flow lists of w and o, with the memory each
// lives in.
func (w *Window) swapFlows(o *Window) {
	a, b := w.flowRegion(), o.flowRegion()
	*a, *b = *b, *a
	w.Flows, o.Flows = o.Flows, w.Flows
}

// swapFlowMem moves the flow records of w into the memory of next's flow
// list, and gives next w's memory, when more records have been written in
// next's so far: next is a window just taken from the pool or free in it,
// whose records are dropped. A list swaps just before it takes the bulk
// of its records (a window's when the next window opens and its flows move
// on; when it closes, the shard's spare list its records are written into,
// or the window's own when most of its flows moved on), so that of the
// lists in flight only one list's memory grows to a window's flows and the
// rest stay small: on this kind of VM the first touch of a page costs
// ~14 µs, 3.5 ms a MiB.
func (w *Window) swapFlowMem(next *Window) {
	if next.flowMem == nil || !next.flowMem.holds(next.Flows) {
		return
	}
	if next.flowsWritten() > w.flowsWritten() && cap(next.Flows) >= len(w.Flows) {
		w.moveFlows(next)
	}
}

// moveFlows moves the flow records of w into the memory of to's flow list,
// which has room for them, and gives to w's memory, its list emptied (to's
// records are dropped).
func (w *Window) moveFlows(to *Window) {
	to.markWritten() // its records' count, before they are dropped
	to.Flows = append(to.Flows[:0], w.Flows...)
	w.takeFlows(to)
}

// takeFlows gives w the flow list of o with the memory it lives in, and o
// w's memory, its list emptied (w's records are dropped), each memory's
// mark keeping the records written in it.
func (w *Window) takeFlows(o *Window) {
	w.markWritten()
	o.markWritten()
	w.swapFlows(o)
	o.Flows = o.Flows[:0]
}

// flowsWritten returns how many records have been written in the memory
// of w's flow list so far: its region's mark (region.high), or the list's
// own length when that is more.
func (w *Window) flowsWritten() int {
	if w.flowMem == nil {
		return len(w.Flows)
	}
	return max(w.flowMem.high, len(w.Flows))
}

// commitFlows commits the pages of w's list from its first record never
// written up to record n, which the caller is about to write in order and
// has made room for: a page committed at once costs less than one faulted
// in by a write (mapped.Commit).
func (w *Window) commitFlows(n int) {
	if from := w.flowsWritten(); n > from {
		mapped.Commit(w.Flows[from:n])
	}
}

// markWritten folds the list's length into its region's mark, before the
// list is emptied or moves to other memory, so that the mark keeps the
// records written there.
func (w *Window) markWritten() {
	if w.flowMem != nil {
		w.flowMem.high = w.flowsWritten()
	}
}

// releaseFlows empties w's flow list and returns the memory it grew in
// to the kernel.
func (w *Window) releaseFlows() {
	w.Flows = nil
	if w.flowMem != nil {
		w.flowMem.free()
	}
}

// flowRegion returns the region of w's flow list memory, empty until
// growFlows maps one; it is freed with the window.
func (w *Window) flowRegion() *region {
	if w.flowMem == nil {
		w.flowMem = new(region)
		runtime.AddCleanup(w, (*region).free, w.flowMem)
	}
	return w.flowMem
}

// cover widens the window's covered part to include [from, to).
func (w *Window) cover(from, to int64) { w.From, w.To = union(w.From, w.To, from, to) }

// union returns the smallest interval holding [a0, a1) and [b0, b1), an
// empty interval holding nothing.
func union(a0, a1, b0, b1 int64) (int64, int64) {
	switch {
	case b0 >= b1:
		return a0, a1
	case a0 >= a1:
		return b0, b1
	}
	return min(a0, b0), max(a1, b1)
}

// covered returns From and To when they bound a part of the window, and
// an empty part at Start otherwise (a window made by hand).
func (w *Window) covered() (from, to int64) {
	if w.Start <= w.From && w.From <= w.To && w.To-w.Start <= w.Length {
		return w.From, w.To
	}
	return w.Start, w.Start
}

// Covered returns how much of the window the input covered, in ns: 0 when
// that is not known.
func (w *Window) Covered() int64 {
	from, to := w.covered()
	return to - from
}

// countFlows feeds the exact flow records of a normalized window to its
// flow sketches and, in canonical order, to its heavy-hitter table, so
// that both are the same whatever number of workers built the window: the
// sketches' counts are sums and their bits unions, which no order changes.
// Flows the QP tables could not hold were fed to them frame by frame.
// Done once on the host's list rather than on each shard's, it touches one
// set of sketches, where each shard's window would need its own (megabytes
// of memory, a page fault per 4 KiB on first touch) and a merge. l is
// scratch for the prefetches. With two scratches (l2 not nil), it counts
// on two goroutines, each sketch on one of them in the list's order, so
// that the counts are the same: the last window of a run would otherwise
// be counted on one core while the other has nothing left to do (a window
// of 189 k flows took about 9 ms).
func (w *Window) countFlows(l, l2 *lines) {
	if l2 == nil {
		w.countSketches(l, true, true)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.countSketches(l2, false, true) })
	w.countSketches(l, true, false)
	wg.Wait()
}

// countSketches feeds the flow records to the distinct flows and the bytes
// per flow (bytes), and to the packets per flow and the heavy hitters
// (packets).
func (w *Window) countSketches(l *lines, bytes, packets bool) {
	flows := w.Flows
	for i := range flows {
		if j := i + sketchAhead; j < len(flows) {
			if bytes {
				*l = w.FlowBytes.Cells(flows[j].hash, *l)
			}
			if packets {
				*l = w.FlowPackets.Cells(flows[j].hash, *l)
			}
			l.fetch()
		}
		f := &flows[i]
		if bytes {
			w.Distinct.Insert(f.hash)
			w.FlowBytes.Add(f.hash, f.C[FlowBytes])
		}
		if packets {
			w.FlowPackets.Add(f.hash, f.C[FlowPackets])
			w.Top.UpdateRef(f.hash, &f.Key, f.C[FlowBytes])
		}
	}
}

// sketchAhead is how many records ahead of the one it counts countFlows
// asks for the record's Count-Min counters: as many as their misses take to
// come in, at about 10 ns a record.
const sketchAhead = 16

// Normalize puts the flow list, the CM messages, the pause records and the
// retransmission records in canonical order, merging records of the same
// flow (a flow split across hosts by packet) and of the same source MAC
// and priority.
func (w *Window) Normalize() {
	w.Flows = w.order.normalize(w.Flows)
	w.normalizeRest()
}

// normalizeRest is Normalize but for the flow list, for a window whose list
// is in canonical order already.
func (w *Window) normalizeRest() {
	w.Pauses = normalizePauses(w.Pauses)
	sortRetrans(w.Retrans)
	slices.SortFunc(w.CM, func(a, b CMMessage) int {
		if c := (FlowKey{Src: a.Src, Dst: a.Dst}).Compare(FlowKey{Src: b.Src, Dst: b.Dst}); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.AttrID, b.AttrID), cmp.Compare(a.LocalCommID, b.LocalCommID),
			cmp.Compare(a.RemoteCommID, b.RemoteCommID), cmp.Compare(a.LocalQPN, b.LocalQPN))
	})
}
