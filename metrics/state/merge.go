package state

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rocescope/rocescope/metrics"
)

// Errors of [Merger.Add], besides [metrics.ErrMismatch] and [metrics.ErrState].
var (
	// ErrDuplicate: a host delivered the same part of a window twice (of
	// the same segment of its capture).
	ErrDuplicate = errors.New("host delivered the same part of a window twice")
	// ErrLate: a window arrived after the merger handed out it or a later
	// one.
	ErrLate = errors.New("window arrived after it or a later one was taken")
)

// Merger merges the window states of several hosts, as `rocescope merge`
// reads them: it aligns them by window start, merges those of the same
// window with [Window.Merge], and refuses what would make the merged window
// wrong: a window length other than the first state's, a state naming no
// host or a host name [metrics.CheckHost] refuses, a host delivering part of
// a window it already delivered, and a window that was already taken.
//
// A host may deliver several states of one window that hold different
// frames, and those merge: states of different segments of its capture
// (after its clock stepped back), and states of one segment that cover
// parts of the window apart in time (Window.From and To), such as the last
// window of a capture and the first of the capture that restarted it. A
// state of a host and segment whose time overlaps one the host delivered
// already is a duplicate. The zero value is not usable; call [NewMerger].
// A Merger is not safe for concurrent use.
type Merger struct {
	length   int64  // window length of the first state
	lengthOf string // where the first state came from
	pending  map[int64]*mergeWindow
	taken    int64             // start of the newest window taken, or metrics.NoWindow
	spare    []*metrics.Window // windows merged into others, to decode into again
	lowSpare int               // fewest spare windows held since the last trim
	takes    int               // windows taken since the last trim
}

// mergeWindow is a window being merged and where its states came from.
type mergeWindow struct {
	w          *metrics.Window
	deliveries []delivery
}

// delivery is a host's state of a window: the segment of its capture, the
// part of the window it covered and where it came from.
type delivery struct {
	host     string
	segment  uint32
	from, to int64
	src      string
}

// NewMerger returns an empty Merger.
func NewMerger() *Merger {
	return &Merger{pending: make(map[int64]*mergeWindow), taken: metrics.NoWindow}
}

// Add merges w, which came from src (a file name, for errors), into the
// pending window of its start. The Merger owns w afterwards: the caller may
// read it until its next call of Spare. On error
// nothing is merged and the error names src and the window.
func (m *Merger) Add(src string, w *metrics.Window) error {
	at := func() string { return time.Unix(0, w.Start).UTC().Format(time.RFC3339Nano) }
	switch {
	case m.length != 0 && w.Length != m.length:
		return fmt.Errorf("state: %s: window %s: length %v differs from %v in %s: %w",
			src, at(), time.Duration(w.Length), time.Duration(m.length), m.lengthOf, metrics.ErrMismatch)
	case !sortedDistinct(w.Hosts):
		return fmt.Errorf("state: %s: window %s: hosts %q are not a sorted list of distinct names: %w", src, at(), w.Hosts, metrics.ErrState)
	case w.Start <= m.taken:
		return fmt.Errorf("state: %s: window %s of %s: %w", src, at(), w.Hosts, ErrLate)
	}
	for _, h := range w.Hosts {
		if err := metrics.CheckHost(h); err != nil {
			return fmt.Errorf("state: %s: window %s: %w: %w", src, at(), err, metrics.ErrState)
		}
	}
	from, to := coverage(w)
	p, ok := m.pending[w.Start]
	if ok {
		for _, d := range p.deliveries {
			if d.segment == w.Segment && d.from < to && from < d.to && slices.Contains(w.Hosts, d.host) {
				return fmt.Errorf("state: %s: window %s: host %s already delivered it%s in %s: %w", src, at(), d.host, segmentNote(w.Segment), d.src, ErrDuplicate)
			}
		}
		if err := p.w.Merge(w); err != nil {
			return fmt.Errorf("state: %s: %w", src, err)
		}
	} else {
		p = &mergeWindow{w: w}
		m.pending[w.Start] = p
	}
	if m.length == 0 {
		m.length, m.lengthOf = w.Length, src
	}
	for _, h := range w.Hosts {
		p.deliveries = append(p.deliveries, delivery{host: h, segment: w.Segment, from: from, to: to, src: src})
	}
	if p.w != w {
		m.Recycle(w) // merged: its memory can serve again
	}
	return nil
}

// coverage returns the part of its window a state covered: From to To, or
// the whole window when they do not bound a part of it (a window made by
// hand), so that two such states of a host overlap.
func coverage(w *metrics.Window) (from, to int64) {
	if w.Start <= w.From && w.From < w.To && w.To-w.Start <= w.Length {
		return w.From, w.To
	}
	return w.Start, w.Start + w.Length
}

// maxSpare bounds the windows a Merger keeps to decode into, and
// trimEvery is how many windows are taken between two trims of those it
// keeps but did not need. As many windows are pending and spare as were
// pending at most lately: a window's sketches (megabytes) are reused as
// the number pending swings, not made anew and dropped.
const (
	maxSpare  = 64
	trimEvery = 32
)

// Recycle gives back a window Take returned, once the caller is done with
// it, for Spare to hand out again.
func (m *Merger) Recycle(w *metrics.Window) {
	if len(m.spare) < maxSpare {
		m.spare = append(m.spare, w)
	}
}

// Spare returns a window to decode the next state into with a
// [Reader]: one whose state an Add merged into another window, or that was
// recycled (its sketches are reused), or a new one. Its contents are
// undefined.
func (m *Merger) Spare() *metrics.Window {
	n := len(m.spare)
	if n == 0 {
		m.lowSpare = 0
		return new(metrics.Window)
	}
	w := m.spare[n-1]
	m.spare[n-1] = nil
	m.spare = m.spare[:n-1]
	m.lowSpare = min(m.lowSpare, n-1)
	return w
}

// trim drops the spare windows that were not needed since the last trim
// but one, every trimEvery windows taken.
func (m *Merger) trim() {
	if m.takes++; m.takes < trimEvery {
		return
	}
	if unused := m.lowSpare - 1; unused > 0 {
		n := len(m.spare) - unused
		clear(m.spare[n:])
		m.spare = m.spare[:n]
	}
	m.takes, m.lowSpare = 0, len(m.spare)
}

// sortedDistinct reports whether hosts is a non-empty, strictly increasing
// list, as Window.Hosts must be.
func sortedDistinct(hosts []string) bool {
	for i := 1; i < len(hosts); i++ {
		if hosts[i-1] >= hosts[i] {
			return false
		}
	}
	return len(hosts) > 0
}

// Pending returns the starts of the windows not yet taken, in time order.
func (m *Merger) Pending() []int64 {
	return slices.Sorted(maps.Keys(m.pending))
}

// Len returns the number of pending windows.
func (m *Merger) Len() int { return len(m.pending) }

// Hosts returns the hosts merged into the pending window that starts at
// start, sorted; the Merger owns the slice.
func (m *Merger) Hosts(start int64) []string {
	if p, ok := m.pending[start]; ok {
		return p.w.Hosts
	}
	return nil
}

// Has reports whether host delivered the pending window that starts at
// start.
func (m *Merger) Has(start int64, host string) bool {
	p, ok := m.pending[start]
	if !ok {
		return false
	}
	_, found := slices.BinarySearch(p.w.Hosts, host) // every host merged in, in any segment
	return found
}

// segmentNote says which segment a state is of, after the first.
func segmentNote(segment uint32) string {
	if segment == 0 {
		return ""
	}
	return fmt.Sprintf(" (segment %d of its capture)", segment)
}

// Oldest returns the start of the oldest pending window, and false if none
// is pending.
func (m *Merger) Oldest() (int64, bool) {
	if len(m.pending) == 0 {
		return 0, false
	}
	return slices.Min(slices.Collect(maps.Keys(m.pending))), true
}

// Take removes the oldest pending window and returns it normalized, or nil
// if none is pending. A later Add of a window at or before it fails with
// [ErrLate]: the reports built from taken windows cannot change any more.
func (m *Merger) Take() *metrics.Window {
	start, ok := m.Oldest()
	if !ok {
		return nil
	}
	p := m.pending[start]
	delete(m.pending, start)
	m.taken = start
	m.trim()
	p.w.Normalize()
	return p.w
}

// Discard removes the pending window that starts at start without taking
// it: the windows taken stay as they were, and a later Add of that window
// starts it anew.
func (m *Merger) Discard(start int64) {
	if p, ok := m.pending[start]; ok {
		delete(m.pending, start)
		m.Recycle(p.w)
	}
}

// Reset forgets every pending window, and that any window was taken: the
// states of all of them may be added again.
func (m *Merger) Reset() {
	for s := range m.pending {
		m.Discard(s)
	}
	m.taken = metrics.NoWindow
}
