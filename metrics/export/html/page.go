package html

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/rocescope/rocescope/metrics/report"
)

// Options shape a page. The zero value of each field selects its default;
// a nil *Options means all defaults. The page copies the Options.
type Options struct {
	Title        string   // page title; default "rocescope report"
	Inputs       []string // what was analyzed: capture files, interfaces, state files
	ElephantRate float64  // bits/s; drawn as the elephant threshold line (0: no line)
	JitterRate   float64  // bits/s; drawn as the jitter threshold line (0: no line)
	MaxPoints    int      // points per series at most; default 2000
	MaxFlows     int      // flows charted at most; default 1000
	MaxEvents    int      // events kept at most; default 1000
}

// Defaults of [Options].
const (
	DefaultTitle     = "rocescope report"
	DefaultMaxPoints = 2000
	DefaultMaxFlows  = 1000
	DefaultMaxEvents = 1000
)

// ErrOrder is wrapped by Write errors: a window that does not follow the
// previous one in time, or whose length differs.
var ErrOrder = errors.New("windows out of order")

// Page collects window reports and writes them as one self-contained HTML
// page: the chart library, the style and every figure are inside it, so it
// opens from disk without a network.
//
// Memory is bounded whatever the run's length. A series holds at most
// MaxPoints points: when a window falls past the last point, neighbouring
// points are merged in pairs and each point then covers twice as many
// windows (counts add up; rates, levels and quantiles keep their largest
// value, and throughput its smallest too). At most MaxFlows flows of the top lists and of the events are charted: when the
// page is full, a new flow replaces the charted flow with the fewest bytes
// if it has more bytes in its window, else it is left out; the page says
// how often either happened. At most MaxEvents events are kept, each
// once however many windows reported it. A Page is not safe for
// concurrent use.
type Page struct {
	opts Options

	first, last int64 // indexes (start/length) of the first and last window
	length      int64 // window length, ns; 0 before the first window
	width       int64 // windows per point, a power of two
	windows     int
	exact       int // windows whose per-flow figures are exact
	hosts       []string
	flowsMethod string
	flowsRelErr float64 // the largest stated error of the distinct-flow estimates

	points []figures // points[i] covers windows first+i·width ... first+(i+1)·width-1

	flows   []flowTrack
	index   map[flowID]int // position of each charted flow in flows
	evicted int            // charted flows replaced by a larger newcomer
	refused int            // top-list entries left out because the page was full

	events        []eventTrack                 // by first report
	eventIndex    map[report.EventID]int       // position of each event in events
	eventsRefused int                          // events left out because the page held MaxEvents
	eventsOmitted [report.NumEventKinds]uint64 // events the reports did not list (their --max-events)
}

// flowTrack is what the page keeps of one charted flow: its totals over
// the windows whose top list it made, and its samples per point.
type flowTrack struct {
	id                                   flowID
	sqp                                  uint32
	sqpKnown                             bool
	bytes, packets, cnp, ecnCE, ret      uint64
	peak                                 float64 // bits/s, largest window rate
	windows, elephant, jitter, estimated int     // windows in the top list, and of them as elephant, jitter, estimated
	samples                              []flowPoint
}

// flowPoint is a flow's figures in one point.
type flowPoint struct {
	point       int
	rate, delta float64 // largest rate and rate change, bits/s (absent: no window of the point had a previous one)
	cnp         uint64
	flags       uint8 // flagElephant, flagJitter
}

// Flags of a flowPoint: the flow was an elephant or a jitter flow in a
// window of the point.
const (
	flagElephant = 1 << iota
	flagJitter
)

// NewPage returns an empty page.
func NewPage(o *Options) (*Page, error) {
	var opts Options
	if o != nil {
		opts = *o
		opts.Inputs = slices.Clone(o.Inputs)
	}
	if opts.Title == "" {
		opts.Title = DefaultTitle
	}
	if opts.MaxPoints == 0 {
		opts.MaxPoints = DefaultMaxPoints
	}
	if opts.MaxFlows == 0 {
		opts.MaxFlows = DefaultMaxFlows
	}
	if opts.MaxEvents == 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	if opts.MaxPoints < 2 || opts.MaxFlows < 1 || opts.MaxEvents < 1 {
		return nil, fmt.Errorf("html: max points %d, max flows %d and max events %d: want at least 2, 1 and 1", opts.MaxPoints, opts.MaxFlows, opts.MaxEvents)
	}
	if !(opts.ElephantRate >= 0 && opts.JitterRate >= 0) {
		return nil, fmt.Errorf("html: elephant rate %v and jitter rate %v: want 0 or more", opts.ElephantRate, opts.JitterRate)
	}
	return &Page{opts: opts, width: 1, index: make(map[flowID]int), eventIndex: make(map[report.EventID]int)}, nil
}

// add adds one window to the page.
func (p *Page) add(w window) error {
	if w.length <= 0 {
		return fmt.Errorf("html: window at %d has length %d: %w", w.start, w.length, ErrOrder)
	}
	idx := w.start / w.length
	// A window's rate change is from the window before it, when the page
	// has it: the first window of a run, or one after a gap, has none.
	hasPrev := p.windows > 0 && idx == p.last+1
	if p.windows == 0 {
		p.first, p.length = idx, w.length
	} else if w.length != p.length || idx <= p.last {
		return fmt.Errorf("html: window %d+%d after window %d+%d: %w", w.start, w.length, p.last*p.length, p.length, ErrOrder)
	}
	p.last = idx
	p.windows++
	if w.exact {
		p.exact++
	}
	for _, h := range w.hosts {
		if i, found := slices.BinarySearch(p.hosts, h); !found {
			p.hosts = slices.Insert(p.hosts, i, h)
		}
	}
	p.flowsMethod = w.flowsMethod
	p.flowsRelErr = max(p.flowsRelErr, w.flowsRelErr)

	for (idx-p.first)/p.width >= int64(p.opts.MaxPoints) {
		p.halve()
	}
	pt := int((idx - p.first) / p.width)
	for len(p.points) <= pt {
		p.points = append(p.points, figures{})
	}
	p.points[pt].add(&w.figures)
	for i := range w.top {
		p.track(&w.top[i], pt, hasPrev)
	}
	for i := range w.events {
		p.trackEvent(&w.events[i])
	}
	for k, n := range w.eventsOmitted {
		p.eventsOmitted[k] += n
	}
	return nil
}

// halve merges the points in pairs, doubling the windows each covers.
func (p *Page) halve() {
	p.width *= 2
	n := (len(p.points) + 1) / 2
	for i := range n {
		merged := p.points[2*i]
		if 2*i+1 < len(p.points) {
			merged.add(&p.points[2*i+1])
		}
		p.points[i] = merged
	}
	clear(p.points[n:])
	p.points = p.points[:n]
	for i := range p.flows {
		f := &p.flows[i]
		out := f.samples[:0]
		for _, s := range f.samples {
			s.point /= 2
			out = appendPoint(out, s)
		}
		f.samples = out
	}
}

// track adds a flow of a window's top list to the charted flows; its rate
// change counts when the window has a previous one.
func (p *Page) track(s *flowSample, pt int, hasPrev bool) {
	i, ok := p.index[s.id]
	if !ok {
		if len(p.flows) < p.opts.MaxFlows {
			i = len(p.flows)
			p.flows = append(p.flows, flowTrack{})
		} else {
			i = 0
			for j := range p.flows {
				if p.flows[j].bytes < p.flows[i].bytes {
					i = j
				}
			}
			if p.flows[i].bytes >= s.bytes {
				p.refused++
				return
			}
			delete(p.index, p.flows[i].id)
			p.evicted++
		}
		p.flows[i] = flowTrack{id: s.id, samples: p.flows[i].samples[:0]}
		p.index[s.id] = i
	}
	f := &p.flows[i]
	if s.sqpKnown {
		f.sqp, f.sqpKnown = s.sqp, true
	}
	f.bytes += s.bytes
	f.packets += s.packets
	f.cnp += s.cnp
	f.ecnCE += s.ecnCE
	f.ret += s.ret
	f.peak = max(f.peak, s.rate)
	f.windows++
	var flags uint8
	if s.elephant {
		f.elephant++
		flags |= flagElephant
	}
	if s.jitter {
		f.jitter++
		flags |= flagJitter
	}
	if s.estimated {
		f.estimated++
	}
	delta := absent
	if hasPrev {
		delta = s.delta
	}
	f.samples = appendPoint(f.samples, flowPoint{point: pt, rate: s.rate, delta: delta, cnp: s.cnp, flags: flags})
}

// appendPoint appends s to samples, or merges it into the last sample when
// that is of the same point.
func appendPoint(samples []flowPoint, s flowPoint) []flowPoint {
	k := len(samples) - 1
	if k < 0 || samples[k].point != s.point {
		return append(samples, s)
	}
	x := &samples[k]
	x.rate = max(x.rate, s.rate)
	if math.IsNaN(x.delta) || s.delta > x.delta {
		x.delta = s.delta // absent only when both are
	}
	x.cnp += s.cnp
	x.flags |= s.flags
	return samples
}
