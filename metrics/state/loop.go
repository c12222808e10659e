package state

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rocescope/rocescope/metrics"
)

// Input is where [Merge] reads window states from: state files and
// directories ([FileInput]), or a Kafka topic (package kafka's Consumer).
// Merge calls its methods from one goroutine.
type Input interface {
	// Next reads the next state into w, reusing w's sketches when they
	// have the state's shape, and says how far the input got. It waits
	// for a state at most until ctx is done or its poll interval passed,
	// and then returns a Read without a state. A state or record that it
	// cannot read it skips, saying why in Read.Skipped. An error ends the
	// merge.
	Next(ctx context.Context, w *metrics.Window) (Read, error)
	// Done says that the reports of the windows up to the one that starts
	// at start, and of every earlier window the input delivered, are
	// written and made durable by every output: their states need not be
	// read again (a Kafka consumer commits its offsets).
	Done(ctx context.Context, start int64) error
	// Drop says that the merge refused every state of the window that
	// starts at start delivered so far (a window far ahead of the other
	// hosts'): none will be reported, and they need not be read again.
	Drop(start int64)
}

// Read is what one [Input.Next] read.
type Read struct {
	// State says that Next decoded a state into its window; Source names
	// where it came from (a file, a topic's partition and offset).
	State  bool
	Source string
	// Skipped is a state or record Next skipped because it could not
	// read it, and why, naming the file and offset or the topic,
	// partition and offset. Merge stops at it, or with
	// MergeConfig.KeepGoing says so and goes on.
	Skipped error
	// Trouble is trouble that may pass, such as brokers that do not
	// answer: the input keeps trying, and Merge says so once.
	Trouble error
	// Settled is the window start no state Next reads later comes
	// before, as far as the input can tell now: metrics.NoWindow when it
	// cannot tell, math.MaxInt64 when it has read everything there is.
	Settled int64
	// Final says that no state of a window before Settled will come at
	// all, so that those windows are done, whichever hosts they lack.
	Final bool
	// Progress says whether the input read everything there is.
	Progress Progress
	// Reset says that the input will deliver the states of every window
	// not yet reported again (a Kafka consumer's partitions changed):
	// Merge forgets them.
	Reset bool
}

// Progress is how far an input got.
type Progress uint8

const (
	_ Progress = iota // not valid
	// Behind: there are states to read still.
	Behind
	// Current: every state there is was read; more may come. Windows
	// wait for their hosts at most MergeConfig.Timeout of wall-clock
	// time.
	Current
	// End: every state was read and none will come: Merge reports every
	// window it holds and returns.
	End
	// Stopped: the input stopped (its context is done) and delivers the
	// states of the windows not reported next time: Merge reports those
	// that are ready and returns.
	Stopped
)

// Output is where [Merge] writes the merged windows.
type Output interface {
	// Write writes the report of the merged window w, which lacks the
	// hosts missing of MergeConfig.Hosts. w is lent until Write returns.
	Write(w *metrics.Window, missing []string) error
	// Sync returns once the reports written so far are durable (see
	// export.Syncer), or ctx is done.
	Sync(ctx context.Context) error
}

// MergeConfig is the policy of [Merge]. The zero value (or nil) means the
// defaults.
type MergeConfig struct {
	// Hosts are the hosts whose states complete a window. Without them, a
	// window is complete once every host seen so far delivered it.
	Hosts []string
	// Timeout bounds how long a window waits for hosts that did not
	// deliver it (default 10s): that long after its first state arrived,
	// or, while the input is behind (a backlog), once the input is that
	// far past the window's start.
	Timeout time.Duration
	// MaxPending bounds the windows the merge holds (default 32): with
	// more, the oldest is reported without the hosts it lacks.
	MaxPending int
	// KeepGoing skips a state that cannot be read or merged (damaged, of
	// another sketch configuration or window length, a host delivering a
	// window again), saying so, instead of stopping at it.
	KeepGoing bool
	// Log receives the warnings, one line each (default: none).
	Log *log.Logger
}

// Defaults of MergeConfig.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultMaxPending = 32
)

// MergeStats counts what [Merge] did with the states it read.
type MergeStats struct {
	Reported   uint64 // windows reported
	Skipped    uint64 // states or records that could not be read or merged
	Duplicates uint64 // states of a part of a window their host delivered already
	Late       uint64 // states of windows reported already
	Ahead      uint64 // states far ahead of the other hosts', refused
	// FirstSkipped is why the first state skipped was.
	FirstSkipped error
}

// maxAhead is how far ahead of the other hosts' newest window a state's
// window may start, at least, before it is held apart: as far as the
// engine lets one frame jump ahead of the others.
const maxAhead = time.Hour

// syncEvery and syncInterval bound the windows written, and the time,
// between two syncs of the outputs while the input is behind; once it is
// current, every window is synced as it is written.
const (
	syncEvery    = 16
	syncInterval = time.Second
)

// hostGrace is how many windows into a backlog the hosts seen are taken
// for every host (without MergeConfig.Hosts): a host whose first state
// comes later than that behind the others' is late for its first windows,
// as a live merge would find it. (Waiting the whole Timeout would hold
// its windows, megabytes each, at the start of every backlog.)
const hostGrace = 2

// finalSync bounds the last sync when the merge was interrupted.
const finalSync = 30 * time.Second

// Merge merges the states in delivers and writes each merged window to
// out, in time order, as soon as it is done: once every host of
// cfg.Hosts (or every host seen) delivered it, or cfg.Timeout passed, or
// the input says no state of it can come any more. It holds at most
// cfg.MaxPending windows, however many the input delivers.
//
// After writing windows Merge syncs out and then tells in which windows
// are done ([Input.Done]): a window whose report is not durable is never
// acknowledged, so that a merge that dies is delivered its states again
// (at least once).
//
// States that cannot be merged are skipped, counted and said on cfg.Log,
// or stop the merge (see MergeConfig.KeepGoing): a state of a window
// reported already (late), and a state of a window more than an hour (and
// two windows) ahead of the newest of every other host (or of the wall
// clock, before any), which is held apart, and accepted only once
// enough states in a row confirm the jump. Merge returns when the input
// reaches its end or stops, or at the first error.
func Merge(ctx context.Context, in Input, out Output, cfg *MergeConfig) (MergeStats, error) {
	g := newMerging(in, out, cfg)
	err := g.run(ctx)
	g.summary()
	return g.stats, err
}

// merging is one run of Merge.
type merging struct {
	in     Input
	out    Output
	cfg    MergeConfig
	m      *Merger
	first  map[int64]time.Time // when each pending window's first state arrived
	seen   map[string]bool     // every host seen
	latest map[string]int64    // the newest window each host delivered
	oldest int64               // the oldest window accepted
	held   []heldState         // states far ahead, held apart
	absent map[string]bool     // hosts of cfg.Hosts missing from the last window reported
	stats  MergeStats

	lastReported int64 // start of the newest window reported
	unsynced     int   // windows written since the last sync
	lastSync     time.Time
	trouble      string // the trouble said last, to say it once
}

// heldState is a state held apart: its window is far ahead of the others'.
type heldState struct {
	src string
	w   *metrics.Window
}

func newMerging(in Input, out Output, cfg *MergeConfig) *merging {
	g := &merging{in: in, out: out, m: NewMerger(), first: make(map[int64]time.Time), seen: make(map[string]bool),
		latest: make(map[string]int64), absent: make(map[string]bool), oldest: math.MaxInt64, lastReported: metrics.NoWindow, lastSync: time.Now()}
	if cfg != nil {
		g.cfg = *cfg
	}
	if g.cfg.Timeout <= 0 {
		g.cfg.Timeout = DefaultTimeout
	}
	if g.cfg.MaxPending <= 0 {
		g.cfg.MaxPending = DefaultMaxPending
	}
	return g
}

// warnf writes a warning.
func (g *merging) warnf(format string, a ...any) {
	if g.cfg.Log != nil {
		g.cfg.Log.Printf(format, a...)
	}
}

// run is Merge's loop.
func (g *merging) run(ctx context.Context) error {
	for {
		w := g.m.Spare()
		r, err := g.in.Next(ctx, w)
		if !r.State || err != nil {
			g.m.Recycle(w)
		}
		if err != nil {
			return errors.Join(err, g.sync(ctx))
		}
		if r.Reset {
			g.reset()
		}
		g.sayTrouble(r.Trouble)
		if r.Skipped != nil {
			if !g.cfg.KeepGoing {
				return errors.Join(r.Skipped, g.sync(ctx))
			}
			g.skipped(r.Skipped)
		}
		if r.State {
			if err := g.add(r.Source, w); err != nil {
				return errors.Join(err, g.sync(ctx))
			}
		}
		if r.Progress == End {
			g.refuseHeld()
		}
		if err := g.emit(&r); err != nil {
			return errors.Join(err, g.sync(ctx))
		}
		switch {
		case r.Progress == End || r.Progress == Stopped:
			return g.sync(ctx)
		case g.unsynced > 0 && (r.Progress != Behind || g.unsynced >= syncEvery || time.Since(g.lastSync) >= syncInterval):
			if err := g.sync(ctx); err != nil {
				return err
			}
		}
	}
}

// sayTrouble says the input's trouble once, and that it is over once it
// is.
func (g *merging) sayTrouble(err error) {
	switch {
	case err == nil && g.trouble != "":
		g.warnf("reading again after: %s", g.trouble)
		g.trouble = ""
	case err != nil && err.Error() != g.trouble:
		g.warnf("%v (trying again)", err)
		g.trouble = err.Error()
	}
}

// reset forgets the pending windows and the states held apart: the input
// delivers them again.
func (g *merging) reset() {
	g.m.Reset()
	clear(g.first)
	for _, h := range g.held {
		g.m.Recycle(h.w)
	}
	g.held = g.held[:0]
}

// add merges the state w, read from src. A state of a window reported
// already is skipped with a warning; a duplicate and a state that does not
// merge are skipped likewise with KeepGoing, and are an error without. A
// state far ahead of the other hosts' is held apart.
func (g *merging) add(src string, w *metrics.Window) error {
	if g.aheadOfOthers(w.Start, w.Length, w.Hosts, true) {
		g.hold(src, w)
		return nil
	}
	err := g.m.Add(src, w)
	switch {
	case err == nil:
		g.accepted(w.Start, w.Hosts)
		g.refuseHeld()
		return nil
	case errors.Is(err, ErrLate):
		g.stats.Late++
		why := "reports up to a later window are out (its host lags more than --timeout behind the others: raise it, and name every host with --hosts)"
		if w.Segment > 0 {
			why = fmt.Sprintf("it is of segment %d, after its capture's clock stepped back, and its window is reported already (a merge of the files once, without --follow, adds it)", w.Segment)
		}
		g.warnf("%v: %s; state skipped", err, why)
	case !g.cfg.KeepGoing:
		g.m.Recycle(w)
		return err
	case errors.Is(err, ErrDuplicate):
		g.stats.Duplicates++
		g.warnf("%v; the first is kept, this state skipped", err)
	default:
		g.skipped(err)
	}
	g.m.Recycle(w)
	return nil
}

// skipped counts and says a state skipped because of err.
func (g *merging) skipped(err error) {
	if g.stats.Skipped++; g.stats.FirstSkipped == nil {
		g.stats.FirstSkipped = err
	}
	g.warnf("%v; skipped", err)
}

// accepted notes a state of the window at start, of hosts, merged.
func (g *merging) accepted(start int64, hosts []string) {
	if _, ok := g.first[start]; !ok {
		g.first[start] = time.Now()
	}
	g.oldest = min(g.oldest, start)
	for _, h := range hosts {
		g.seen[h] = true
		if l, ok := g.latest[h]; !ok || start > l {
			g.latest[h] = start
		}
	}
}

// aheadOfOthers reports whether a window of hosts starts far ahead of the
// newest window of every other host: more than maxAhead, and two windows.
// Before any other host delivered a state, it compares with the wall
// clock if wall is set, and else reports false.
func (g *merging) aheadOfOthers(start, length int64, hosts []string, wall bool) bool {
	ref, any := int64(0), false
	for h, l := range g.latest {
		if !slices.Contains(hosts, h) && (!any || l > ref) {
			ref, any = l, true
		}
	}
	switch {
	case !any && !wall:
		return false
	case !any:
		ref = time.Now().UnixNano()
	}
	return start > ref && uint64(start-ref) > uint64(max(int64(maxAhead), 2*length))
}

// confirmAhead is how many states in a row must be held apart for the jump
// ahead they make to be taken as real: one per host expected, at least 2
// and at most 8.
func (g *merging) confirmAhead() int {
	n := len(g.cfg.Hosts)
	if n == 0 {
		n = len(g.seen)
	}
	return min(max(n, 2), 8)
}

// hold holds w apart. Once confirmAhead states in a row are held, the
// jump is taken as real (the clocks of every host moved, or only the
// hosts ahead deliver any more): they are merged, and the hosts left
// behind are no longer the others' reference.
func (g *merging) hold(src string, w *metrics.Window) {
	g.held = append(g.held, heldState{src, w})
	if len(g.held) < g.confirmAhead() {
		return
	}
	g.warnf("%d states in a row from window %s on are more than %v ahead of the other hosts': taken as a jump of the clocks",
		len(g.held), windowTime(g.held[0].w.Start), maxAhead)
	held := g.held
	g.held = nil
	for h := range g.latest {
		if !slices.ContainsFunc(held, func(s heldState) bool { return slices.Contains(s.w.Hosts, h) }) {
			delete(g.latest, h)
		}
	}
	for _, h := range held {
		err := g.m.Add(h.src, h.w)
		if err == nil {
			g.accepted(h.w.Start, h.w.Hosts)
			continue
		}
		g.skipped(err)
		g.m.Recycle(h.w)
	}
}

// refuseHeld refuses the states held apart: a state that was not ahead
// came after them, or the input ended.
func (g *merging) refuseHeld() {
	for _, h := range g.held {
		g.stats.Ahead++
		g.warnf("state: %s: window %s of %s is more than %v ahead of the other hosts' (a clock ahead, or a damaged state); refused",
			h.src, windowTime(h.w.Start), h.w.Hosts, maxAhead)
		g.in.Drop(h.w.Start)
		g.m.Recycle(h.w)
	}
	g.held = g.held[:0]
}

// emit writes the pending windows that are done, oldest first: every
// window at the input's end; none from the first that a state still to
// come may be of; windows every host delivered, or that waited
// cfg.Timeout; and the oldest while more than cfg.MaxPending are
// pending.
func (g *merging) emit(r *Read) error {
	now := time.Now()
	for {
		start, ok := g.m.Oldest()
		if !ok {
			return nil
		}
		forced := g.m.Len() > g.cfg.MaxPending
		if !forced && !g.ready(r, start, now) {
			return nil
		}
		// A window far ahead of the others' (one that came first of
		// all) would move the merge past every window still to come.
		if g.lastReported == metrics.NoWindow || uint64(start-g.lastReported) > uint64(max(int64(maxAhead), 2*g.m.length)) {
			if hosts := g.m.Hosts(start); g.aheadOfOthers(start, g.m.length, hosts, false) {
				g.stats.Ahead++
				g.warnf("window %s of %s is more than %v ahead of the other hosts' (a clock ahead, or a damaged state); refused",
					windowTime(start), hosts, maxAhead)
				g.m.Discard(start)
				delete(g.first, start)
				g.in.Drop(start)
				continue
			}
		}
		w := g.m.Take()
		delete(g.first, start)
		missing := g.missing(w)
		if forced {
			g.warnf("window %s reported without %s: %d windows were pending, the most the merge holds (--max-pending)",
				windowTime(start), strings.Join(missing, ","), g.m.Len()+1)
		}
		if err := g.out.Write(w, missing); err != nil {
			return err
		}
		g.m.Recycle(w)
		g.lastReported = start
		g.unsynced++
		g.stats.Reported++
	}
}

// ready reports whether the pending window that starts at start is done
// after the read r, at now.
func (g *merging) ready(r *Read, start int64, now time.Time) bool {
	switch {
	case r.Progress == End:
		return true
	case start >= r.Settled:
		return false // a state of it, or of an earlier window, may come still
	case r.Final || len(g.cfg.Hosts) > 0 && g.complete(start, g.cfg.Hosts):
		return true
	case r.Progress == Behind:
		// A backlog, read in the windows' time (of the states accepted:
		// not ahead of the others): a window waits until the input is
		// past its start by as much as a state may lag. The hosts seen
		// complete it once the input is hostGrace windows past the
		// first, when every host had time to show.
		clock := min(r.Settled, g.newest())
		past := func(s int64, d int64) bool { return clock > s && uint64(clock-s) >= uint64(d) }
		if past(start, int64(g.cfg.Timeout)) {
			return true
		} else if len(g.cfg.Hosts) > 0 || !past(g.oldest, min(int64(g.cfg.Timeout), hostGrace*g.m.length)) {
			return false
		}
	}
	if len(g.cfg.Hosts) == 0 && g.complete(start, slices.Collect(maps.Keys(g.seen))) {
		return true
	}
	return r.Progress != Behind && now.Sub(g.first[start]) >= g.cfg.Timeout
}

// newest returns the start of the newest window accepted.
func (g *merging) newest() int64 {
	n := metrics.NoWindow
	for _, l := range g.latest {
		n = max(n, l)
	}
	return n
}

// complete reports whether every host of hosts delivered the window that
// starts at start.
func (g *merging) complete(start int64, hosts []string) bool {
	for _, h := range hosts {
		if !g.m.Has(start, h) {
			return false
		}
	}
	return true
}

// missing returns the hosts of cfg.Hosts that w lacks, and says once per
// host and outage that a host is missing.
func (g *merging) missing(w *metrics.Window) []string {
	var out []string
	for _, h := range g.cfg.Hosts {
		_, has := slices.BinarySearch(w.Hosts, h)
		switch {
		case !has:
			out = append(out, h)
			if !g.absent[h] {
				g.absent[h] = true
				g.warnf("host %s missing from window %s on: reported without it (see missing_hosts)", h, windowTime(w.Start))
			}
		case g.absent[h]:
			g.absent[h] = false
		}
	}
	return out
}

// sync makes the windows written durable and tells the input they are
// done. Once ctx is done (an interrupt), it gets finalSync more.
func (g *merging) sync(ctx context.Context) error {
	if g.unsynced == 0 {
		return nil
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), finalSync)
		defer cancel()
	}
	if err := g.out.Sync(ctx); err != nil {
		return fmt.Errorf("the reports up to window %s are written but not known to be durable, and their states are not acknowledged: %w",
			windowTime(g.lastReported), err)
	}
	g.unsynced, g.lastSync = 0, time.Now()
	return g.in.Done(ctx, g.lastReported)
}

// summary says what was skipped, once the merge is over.
func (g *merging) summary() {
	s := g.stats
	var parts []string
	for _, c := range []struct {
		n    uint64
		what string
	}{{s.Skipped, "not readable or not mergeable"}, {s.Duplicates, "duplicates"}, {s.Late, "late"}, {s.Ahead, "far ahead"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) > 0 {
		g.warnf("%d windows reported; states skipped: %s", s.Reported, strings.Join(parts, ", "))
	}
}

// windowTime formats a window start.
func windowTime(start int64) string { return time.Unix(0, start).UTC().Format(time.RFC3339Nano) }
