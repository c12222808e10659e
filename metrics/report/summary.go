package report

import (
	"github.com/rocescope/rocescope/metrics"
)

// Summary adds the windows of a run up into one report of the whole run:
// what happened in a capture file, per flow. Every counter of its report,
// of the run and of each flow, is the sum of that counter over the
// windows' reports: the same frames, bytes, CNPs (attributed as each
// window attributed them), retransmissions and latencies matched. What is
// not a sum is taken over the run: distinct flows are the union of the
// windows' sketches, latency quantiles those of every latency matched, a
// flow's rate its bytes over the covered time, and an elephant a flow
// whose rate over the run reaches the elephant rate. A run has no
// previous window: a summary has no jitter; nor events, which each
// window's report names.
//
// The summary's window starts where the first window starts and ends
// where the last ends (windows are aligned to multiples of their length
// since the Unix epoch, so it spans whole windows); rates are over the
// part the input covered, from the first frame (or the start of a
// capture) to the last. A Summary holds the flow records of every flow of
// the run and is not safe for concurrent use.
type Summary struct {
	rp           *Reporter // builds the summary's report
	acc          *metrics.Window
	start, end   int64 // the first window's start and the last window's end, ns
	windows      int
	normalized   int    // flows of acc in canonical order, merged
	unattributed uint64 // CNPs no window could attribute
}

// minNormalize is how many flow records a Summary lets pile up before it
// merges the records of the same flow.
const minNormalize = 1 << 12

// NewSummary returns an empty summary of windows made with cfg, whose
// report lists flows as a window's would (Config.Top, Config.Exact).
func NewSummary(cfg *metrics.Config) (*Summary, error) {
	rp, err := NewReporter(cfg)
	if err != nil {
		return nil, err
	}
	rp.summing = true
	return &Summary{rp: rp}, nil
}

// Windows returns how many windows were added.
func (s *Summary) Windows() int { return s.windows }

// Add adds the window of r, a report that a [Reporter] built, to the
// summary. It copies what it keeps, so the window may be reused once Add
// returns.
func (s *Summary) Add(r *Report) error {
	w := r.Window
	if s.acc == nil {
		// A copy of the first window is the summary's, with its
		// sketches shaped as the run's.
		b, err := w.AppendBinary(nil)
		if err != nil {
			return err
		}
		s.acc = new(metrics.Window)
		if err := s.acc.UnmarshalBinary(b); err != nil {
			return err
		}
		s.start, s.end = w.Start, w.Start+w.Length
	} else {
		// Merge adds the states of one window: the summary is merged as
		// if it were w's window, then spans every window again.
		base := s.acc.Start
		s.acc.Start, s.acc.Length = w.Start, w.Length
		err := s.acc.Merge(w)
		s.acc.Start = base
		if err != nil {
			return err
		}
		s.start, s.end = min(s.start, w.Start), max(s.end, w.Start+w.Length)
	}
	// The records of w are the last of the summary's, in w's order: add
	// the CNPs r attributed to each.
	flows := s.acc.Flows[len(s.acc.Flows)-len(w.Flows):]
	for i, n := range r.cnp {
		if i != unattributed {
			flows[i].C[metrics.FlowCNP] += n
		}
	}
	s.unattributed += r.CNPUnattributed
	// What the events of a window are found in means nothing over several
	// (a summary names no events), and would pile up.
	s.acc.Pauses, s.acc.Retrans = s.acc.Pauses[:0], s.acc.Retrans[:0]
	s.acc.Start, s.acc.Length = s.start, s.end-s.start
	s.windows++
	if n := len(s.acc.Flows); n >= 2*max(s.normalized, minNormalize) {
		s.acc.Normalize()
		s.normalized = len(s.acc.Flows)
	}
	return nil
}

// Report returns the report of the windows added so far, nil when none
// was. Its Window is the summary's own: it stays valid until the next Add.
func (s *Summary) Report() *Report {
	if s.acc == nil {
		return nil
	}
	s.acc.Normalize()
	s.normalized = len(s.acc.Flows)
	r := s.rp.Build(s.acc)
	r.CNPUnattributed = s.unattributed
	r.Summary = s.windows
	// The flows' records hold the CNPs attributed to them.
	for i := range s.acc.Flows {
		if n := s.acc.Flows[i].C[metrics.FlowCNP]; n > 0 {
			if r.cnp == nil {
				r.cnp = make(map[int32]uint64)
			}
			r.cnp[int32(i)] = n
		}
	}
	return r
}
