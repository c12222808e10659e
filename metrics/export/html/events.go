package html

import (
	"strconv"

	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/report"
)

// maxEventSenders bounds the senders of an incast the page keeps: the
// event's sender_count says how many there were.
const maxEventSenders = 16

// eventTrack is an event as the page keeps it: the reports of every
// window it spans (the same ID in each) merged into one, so that the
// timeline draws it once. Its figures add up the windows' parts (each
// report gives the part no earlier one did); its peak, sender count and
// sources are the largest of any window; Start is its earliest, End its
// latest, Ongoing the last window's.
type eventTrack struct {
	e       report.Event // a copy: its kind's figures are the page's own
	windows int          // windows that reported it
}

// trackEvent adds an event of a window to the page's events: a new ID
// takes a place while there is one (MaxEvents), else it is counted as
// left out.
func (p *Page) trackEvent(e *report.Event) {
	if i, ok := p.eventIndex[e.ID]; ok {
		p.events[i].merge(e)
		return
	}
	if len(p.events) >= p.opts.MaxEvents {
		p.eventsRefused++
		return
	}
	p.eventIndex[e.ID] = len(p.events)
	p.events = append(p.events, eventTrack{e: copyEvent(e), windows: 1})
}

// copyEvent returns a copy of e that shares no memory with it, with at
// most maxEventSenders senders.
func copyEvent(e *report.Event) report.Event {
	c := *e
	switch {
	case e.Incast != nil:
		in := *e.Incast
		in.Senders = append([]report.Sender(nil), in.Senders[:min(len(in.Senders), maxEventSenders)]...)
		c.Incast = &in
	case e.PFCStorm != nil:
		st := *e.PFCStorm
		c.PFCStorm = &st
	case e.Retransmission != nil:
		rt := *e.Retransmission
		c.Retransmission = &rt
	case e.CEWithoutCNP != nil:
		ce := *e.CEWithoutCNP
		c.CEWithoutCNP = &ce
	}
	return c
}

// merge adds the report of the event in a later window to t.
func (t *eventTrack) merge(o *report.Event) {
	e := &t.e
	t.windows++
	e.Start, e.End, e.Ongoing = min(e.Start, o.Start), max(e.End, o.End), o.Ongoing
	switch {
	case e.Incast != nil && o.Incast != nil:
		in, x := e.Incast, o.Incast
		in.SenderCount, in.Sources, in.PeakBPS = max(in.SenderCount, x.SenderCount), max(in.Sources, x.Sources), max(in.PeakBPS, x.PeakBPS)
		in.Bytes += x.Bytes
		in.ECNCE += x.ECNCE
		in.CNP += x.CNP
	case e.PFCStorm != nil && o.PFCStorm != nil:
		st := e.PFCStorm
		st.PausedNS += o.PFCStorm.PausedNS
		st.Frames += o.PFCStorm.Frames
		if d := e.End - e.Start; d > 0 {
			st.PausedFraction = min(1, float64(st.PausedNS)/float64(d))
		}
	case e.Retransmission != nil && o.Retransmission != nil:
		e.Retransmission.Resent += o.Retransmission.Resent
		e.Retransmission.Merged = e.Retransmission.Merged || o.Retransmission.Merged
	case e.CEWithoutCNP != nil && o.CEWithoutCNP != nil:
		ce, x := e.CEWithoutCNP, o.CEWithoutCNP
		ce.ECNCE += x.ECNCE
		ce.Packets += x.Packets
		ce.ReversePackets += x.ReversePackets
	}
}

// eventKinds returns the names of the event kinds, in the order of their
// lanes on the timeline, and sets in omitted the events of each kind the
// reports did not list.
func (p *Page) eventKinds(omitted map[string]uint64) []string {
	var kinds []string
	for k := 1; k < report.NumEventKinds; k++ {
		name := report.EventKind(k).String()
		kinds = append(kinds, name)
		if n := p.eventsOmitted[k]; n > 0 {
			omitted[name] = n
		}
	}
	return kinds
}

// eventJSON is an event of the page's figures: the object of the JSON
// lines report's events (the keys of the report contract), with the
// windows that reported it.
type eventJSON eventTrack

// MarshalJSON implements json.Marshaler.
func (t *eventJSON) MarshalJSON() ([]byte, error) {
	b := export.AppendEventJSON(nil, &t.e)
	b = append(b[:len(b)-1], `,"windows":`...)
	return append(strconv.AppendInt(b, int64(t.windows), 10), '}'), nil
}
