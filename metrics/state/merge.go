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
	// ErrDuplicate: a host delivered the same window twice (of the same
	// segment of its capture).
	ErrDuplicate = errors.New("host delivered the window twice")
	// ErrLate: a window arrived after the merger handed out it or a later
	// one.
	ErrLate = errors.New("window arrived after it or a later one was taken")
)

// Merger merges the window states of several hosts, as `rocescope merge`
// reads them: it aligns them by window start, merges those of the same
// window with [Window.Merge], and refuses what would make the merged window
// wrong: a window length other than the first state's, a state naming no
// host, a host delivering a window it already delivered, and a window that
// was already taken. The states of one host and window from different
// segments of its capture (after its clock stepped back) hold different
// frames, and merge. The zero value is not usable; call [NewMerger]. A
// Merger is not safe for concurrent use.
type Merger struct {
	length   int64  // window length of the first state
	lengthOf string // where the first state came from
	pending  map[int64]*mergeWindow
	taken    int64             // start of the newest window taken
	spare    []*metrics.Window // windows merged into others, to decode into again
}

// mergeWindow is a window being merged and where its states came from.
type mergeWindow struct {
	w    *metrics.Window
	from map[delivery]string // the source that delivered each host's segment
}

// delivery is a host's state of a window: one per segment of its capture.
type delivery struct {
	host    string
	segment uint32
}

// NewMerger returns an empty Merger.
func NewMerger() *Merger {
	return &Merger{pending: make(map[int64]*mergeWindow), taken: -1 << 62}
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
	if m.length == 0 {
		m.length, m.lengthOf = w.Length, src
	}
	p, ok := m.pending[w.Start]
	if !ok {
		p = &mergeWindow{w: w, from: make(map[delivery]string, len(w.Hosts))}
		m.pending[w.Start] = p
	} else {
		for _, h := range w.Hosts {
			if prev, dup := p.from[delivery{h, w.Segment}]; dup {
				return fmt.Errorf("state: %s: window %s: host %s already delivered it%s in %s: %w", src, at(), h, segmentNote(w.Segment), prev, ErrDuplicate)
			}
		}
		if err := p.w.Merge(w); err != nil {
			return fmt.Errorf("state: %s: %w", src, err)
		}
	}
	for _, h := range w.Hosts {
		p.from[delivery{h, w.Segment}] = src
	}
	if p.w != w {
		m.Recycle(w) // merged: its memory can serve again
	}
	return nil
}

// maxSpare bounds the windows a Merger keeps to decode into.
const maxSpare = 4

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
	if n := len(m.spare); n > 0 {
		w := m.spare[n-1]
		m.spare = m.spare[:n-1]
		return w
	}
	return new(metrics.Window)
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
	p.w.Normalize()
	return p.w
}
