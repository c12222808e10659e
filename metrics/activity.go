package metrics

import (
	"cmp"
	"math"
	"slices"
)

// ActivityRuns is how many runs of burst slots a flow's activity profile
// keeps per window (Activity.add is written for four).
const ActivityRuns = 4

// Run is a run of burst slots of a window in which a flow sent frames, and
// what it sent in them. Slots are Window.Burst long and counted from the
// window start. A run the profile made by joining two (see [Activity]) also
// holds the slots between them, in which the flow may have sent nothing.
type Run struct {
	Bytes      uint64 // on-wire bytes
	Start, End uint16 // slots [Start, End) of the window; End > Start
	ECNCE      uint16 // frames marked CE (saturates at 2^16-1)
	CNP        uint16 // CNPs the flow carried (saturates at 2^16-1)
}

// Activity is a flow's activity profile in a window: when, at the burst
// interval, it sent, as up to ActivityRuns runs of slots in time order,
// apart from each other by at least one idle slot. The engine folds the
// slots a flow sends in into the profile one at a time (a frame touches
// only a slot accumulator in the flow's table entry); a slot next to the
// last run extends it, and a new run beyond ActivityRuns joins the two runs
// closest in time (the smallest gap, the earliest of equal ones), so that
// the profile stays 64 bytes, a cache line, however the flow sends. A
// window holds at most MaxSlots burst slots.
//
// The profile is exact (each run holds exactly the slots with frames, and
// their bytes and marks) while the flow's sending falls into at most
// ActivityRuns runs of consecutive slots; beyond that the joined runs span
// idle slots, and how the bytes of a run spread over its slots is
// estimated as even. It is a function of the flow's frames in time order,
// so the same on any number of workers, and the profiles of a flow split
// between hosts by packet merge symmetrically (the union of both, reduced
// by the same rule).
type Activity [ActivityRuns]Run

// Len returns the number of runs.
func (a *Activity) Len() int {
	n := ActivityRuns // full, the common case of a flow that sends now and then
	for n > 0 && a[n-1].End == 0 {
		n--
	}
	return n
}

// Runs returns the runs, in time order. The slice aliases a.
func (a *Activity) Runs() []Run { return a[:a.Len()] }

// Bytes returns the bytes of all runs.
func (a *Activity) Bytes() uint64 {
	var n uint64
	for _, r := range a.Runs() {
		n += r.Bytes
	}
	return n
}

// add folds r, a run of a flow's frames, into the profile. Runs usually
// come in time order, each after the last: that costs a look at the last
// run, or at the gaps when the profile is full. It writes runs a field at
// a time (set, absorb): a run just built is in narrow stores, which a
// copy's 16-byte loads would wait for.
func (a *Activity) add(r Run) {
	n := a.Len()
	if n == 0 {
		a[0].set(&r)
		return
	}
	last := &a[n-1]
	switch {
	case r.Start >= last.Start && r.Start <= last.End:
		last.absorb(&r)
	case r.Start > last.End && n < ActivityRuns:
		a[n].set(&r)
	case r.Start > last.End:
		// Full: join the closest pair among the runs and r, the
		// earliest of equal gaps.
		best, gap := 1, a[1].Start-a[0].End
		if g := a[2].Start - a[1].End; g < gap {
			best, gap = 2, g
		}
		if g := a[3].Start - a[2].End; g < gap {
			best, gap = 3, g
		}
		if r.Start-a[3].End < gap {
			a[3].absorb(&r)
			return
		}
		a[best-1].absorb(&a[best])
		for i := best; i < ActivityRuns-1; i++ {
			a[i] = a[i+1]
		}
		a[ActivityRuns-1].set(&r)
	default:
		// Out of time order (frames of several sources interleaved):
		// the general rule.
		var buf [ActivityRuns + 1]Run
		copy(buf[:], a[:n])
		buf[n] = r
		a.set(combineRuns(buf[:n+1], ActivityRuns))
	}
}

// minGap returns the shortest gap between the first three runs of a and a
// fourth that starts in slot s.
func (a *Activity) minGap(s uint16) uint16 {
	return min(a[1].Start-a[0].End, a[2].Start-a[1].End, s-a[2].End)
}

// merge adds o, the profile of the same flow in the same window from
// another host, to a.
func (a *Activity) merge(o *Activity) {
	if o.Len() == 0 {
		return
	}
	var buf [2 * ActivityRuns]Run
	n := copy(buf[:], a.Runs())
	n += copy(buf[n:], o.Runs())
	a.set(combineRuns(buf[:n], ActivityRuns))
}

// set makes rs, at most ActivityRuns runs, the profile.
func (a *Activity) set(rs []Run) {
	*a = Activity{}
	copy(a[:], rs)
}

func (r Run) bounds() (int64, int64) { return int64(r.Start), int64(r.End) }

func (r Run) join(o Run) Run {
	r.absorb(&o)
	return r
}

// absorb makes r the run join gives of r and o, in place.
func (r *Run) absorb(o *Run) {
	r.Start, r.End = min(r.Start, o.Start), max(r.End, o.End)
	r.ECNCE, r.CNP = satAdd16(r.ECNCE, o.ECNCE), satAdd16(r.CNP, o.CNP)
	r.Bytes += o.Bytes
}

// set makes r a copy of o, a field at a time.
func (r *Run) set(o *Run) {
	r.Bytes = o.Bytes
	r.Start, r.End, r.ECNCE, r.CNP = o.Start, o.End, o.ECNCE, o.CNP
}

// MaxSlots is the most burst slots a window may hold (Config.Burst).
const MaxSlots = math.MaxUint16

// satAdd16 adds, saturating at the largest uint16.
func satAdd16(a, b uint16) uint16 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint16
}

// spanner is what combineRuns needs of a run: its bounds, and the run two
// make together.
type spanner[R any] interface {
	bounds() (lo, hi int64)
	join(R) R // the smallest run covering both, with both runs' sums
}

// combineRuns puts rs in time order, joins the runs that overlap or touch,
// then joins the two runs closest in time (the smallest gap, the earliest of
// equal gaps) until at most k remain, and returns them (rs[:n]). The result
// depends only on the set of runs, not on their order.
func combineRuns[R spanner[R]](rs []R, k int) []R {
	slices.SortFunc(rs, func(a, b R) int {
		alo, ahi := a.bounds()
		blo, bhi := b.bounds()
		return cmp.Or(cmp.Compare(alo, blo), cmp.Compare(ahi, bhi))
	})
	n := 0
	for _, r := range rs {
		if n > 0 {
			_, hi := rs[n-1].bounds()
			if lo, _ := r.bounds(); lo <= hi {
				rs[n-1] = rs[n-1].join(r)
				continue
			}
		}
		rs[n] = r
		n++
	}
	gap := func(i int) int64 {
		_, hi := rs[i-1].bounds()
		lo, _ := rs[i].bounds()
		return lo - hi
	}
	for ; n > k; n-- {
		best := 1
		for i := 2; i < n; i++ {
			if gap(i) < gap(best) {
				best = i
			}
		}
		rs[best-1] = rs[best-1].join(rs[best])
		copy(rs[best:n], rs[best+1:n])
	}
	return rs[:n]
}
