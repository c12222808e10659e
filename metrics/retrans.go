package metrics

import (
	"cmp"
	"slices"
)

// Cause is why a requester sent PSNs again.
type Cause uint8

// Causes of a retransmission episode.
const (
	CauseNone    Cause = iota // not a cause (the zero value)
	CauseNAK                  // a NAK came back first (its code in NAKCode; PSN sequence error is 0)
	CauseRNR                  // an RNR NAK came back first (its timer code in NAKCode)
	CauseTimeout              // no NAK came back: the requester went silent, then resent
	numCauses
)

var causeNames = [numCauses]string{"", "nak", "rnr", "timeout"}

// String returns the cause's report name: "nak", "rnr" or "timeout".
func (c Cause) String() string {
	if c < numCauses {
		return causeNames[c]
	}
	return "cause"
}

// maxEpisodes bounds the retransmission records of one flow in one window:
// the episodes after the last one it allows are counted into it.
const maxEpisodes = 4

// Retransmission is a retransmission episode of a flow, or the part of it
// in one window: a run of request frames whose PSNs are at or below the
// highest the flow sent (24-bit serial arithmetic), from the first such
// frame until a frame with a new PSN. A READ request's PSN span and PSN
// wraps are not retransmissions; nor are PSNs a gap skipped that arrive
// before the responder complains (out of order).
//
// The cause is the NAK or RNR NAK the responder sent on the reverse
// direction since the flow's last episode, if the engine saw one (the
// engine puts both directions of a connection on one worker), else a
// timeout. An episode that goes on into the next window has a record
// there too, with the same Trouble, First and FirstPSN (the same episode)
// and that window's resent frames; Ongoing says that it had not ended when
// the window closed.
type Retransmission struct {
	Key FlowKey
	// Times in ns from the window start (Trouble and First are before it
	// in an episode that began in an earlier window).
	Trouble  int64 // the NAK or RNR NAK, or the last request frame before the silence (timeout)
	First    int64 // the first frame sent again
	Last     int64 // the last frame sent again in this window
	FirstPSN uint32
	Resent   uint32 // frames sent again in this window
	Cause    Cause
	NAKCode  uint8 // the NAK's code, or the RNR NAK's timer (AETH bits 0-4)
	Ongoing  bool  // the episode had not ended when the window closed
	Merged   bool  // later episodes of the flow in this window are counted into this one (maxEpisodes)
}

// Stall returns the time from the trouble to the first frame sent again.
func (r *Retransmission) Stall() int64 { return r.First - r.Trouble }

// compareRetrans orders retransmission records by flow key, then time.
func compareRetrans(a, b *Retransmission) int {
	return cmp.Or(a.Key.Compare(b.Key), cmp.Compare(a.Trouble, b.Trouble), cmp.Compare(a.First, b.First),
		cmp.Compare(a.Last, b.Last), cmp.Compare(a.FirstPSN, b.FirstPSN), cmp.Compare(a.Resent, b.Resent),
		cmp.Compare(a.Cause, b.Cause), cmp.Compare(a.NAKCode, b.NAKCode), compareBool(a.Ongoing, b.Ongoing),
		compareBool(a.Merged, b.Merged))
}

// sortRetrans puts retransmission records in canonical order.
func sortRetrans(rs []Retransmission) {
	slices.SortFunc(rs, func(a, b Retransmission) int { return compareRetrans(&a, &b) })
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
