package metrics

import (
	"bytes"
	"cmp"
	"slices"
)

// PauseRuns is how many runs of paused time a PauseRecord keeps per window.
const PauseRuns = 8

// PauseRecord is what the PFC frames from one source MAC did to one
// priority in a window: how many there were, and when the priority was
// paused, as up to PauseRuns runs of paused time.
//
// A PFC frame with quanta q pauses its priority for q × 512 bit times at
// Config.LinkRate from its arrival, and a later frame from the same MAC
// replaces what is left (quanta 0 resumes at once), so the paused time is
// exact, clipped to the window (a pause that outlasts it goes on in the next
// window's record when its source sends a frame there). A run is paused time
// without a gap; a new run beyond PauseRuns joins the two closest in time,
// and then spans the gap between them, so a run says how long it spans and
// how much of that was paused.
type PauseRecord struct {
	MAC      [6]byte // source MAC of the PFC frames
	Priority uint8
	Frames   uint64 // PFC frames from MAC whose class-enable vector has Priority
	Runs     [PauseRuns]PauseRun
}

// PauseRun is a span of a window in which a priority was paused, wholly
// or (when runs were joined) in part.
type PauseRun struct {
	Start, End int64 // ns from the window start, End > Start
	Paused     int64 // ns paused within [Start, End)
	Frames     uint64
}

// Len returns the number of runs of p.
func (p *PauseRecord) Len() int {
	n := 0
	for n < PauseRuns && p.Runs[n].End > p.Runs[n].Start {
		n++
	}
	return n
}

// RunList returns the runs of p, in time order; the slice aliases p.
func (p *PauseRecord) RunList() []PauseRun { return p.Runs[:p.Len()] }

func (r PauseRun) bounds() (int64, int64) { return r.Start, r.End }

func (r PauseRun) join(o PauseRun) PauseRun {
	j := PauseRun{Start: min(r.Start, o.Start), End: max(r.End, o.End), Frames: r.Frames + o.Frames}
	// Two hosts that saw the same frames pause the same time twice.
	j.Paused = min(r.Paused+o.Paused, j.End-j.Start)
	return j
}

// addRun adds paused time [start, end) of frames frames. It extends the
// last run when the time follows it without a gap, the usual case.
func (p *PauseRecord) addRun(start, end int64, frames uint64) {
	if end <= start {
		return
	}
	r := PauseRun{Start: start, End: end, Paused: end - start, Frames: frames}
	n := p.Len()
	if n > 0 && start == p.Runs[n-1].End {
		p.Runs[n-1] = p.Runs[n-1].join(r)
		return
	}
	var buf [PauseRuns + 1]PauseRun
	copy(buf[:], p.Runs[:n])
	buf[n] = r
	p.setRuns(combineRuns(buf[:n+1], PauseRuns))
}

// trim cuts the last run back to end: a pause that a later frame replaced
// before it ran out.
func (p *PauseRecord) trim(end int64) {
	n := p.Len()
	if n == 0 {
		return
	}
	last := &p.Runs[n-1]
	if cut := last.End - end; cut > 0 {
		last.End, last.Paused = end, max(0, last.Paused-cut)
		if last.End <= last.Start {
			*last = PauseRun{}
		}
	}
}

// merge adds o, the record of the same MAC and priority from another
// reader or host.
func (p *PauseRecord) merge(o *PauseRecord) {
	p.Frames += o.Frames
	var buf [2 * PauseRuns]PauseRun
	n := copy(buf[:], p.RunList())
	n += copy(buf[n:], o.RunList())
	p.setRuns(combineRuns(buf[:n], PauseRuns))
}

func (p *PauseRecord) setRuns(rs []PauseRun) {
	p.Runs = [PauseRuns]PauseRun{}
	copy(p.Runs[:], rs)
}

// comparePause orders pause records by MAC, then priority.
func comparePause(a, b *PauseRecord) int {
	return cmp.Or(bytes.Compare(a.MAC[:], b.MAC[:]), cmp.Compare(a.Priority, b.Priority))
}

// normalizePauses sorts records by MAC and priority and merges those of the
// same pair.
func normalizePauses(ps []PauseRecord) []PauseRecord {
	slices.SortFunc(ps, func(a, b PauseRecord) int { return comparePause(&a, &b) })
	out := ps[:0]
	for i := range ps {
		if k := len(out); k > 0 && comparePause(&out[k-1], &ps[i]) == 0 {
			out[k-1].merge(&ps[i])
			continue
		}
		out = append(out, ps[i])
	}
	return out
}

// pauseKey is a source MAC and a priority.
type pauseKey struct {
	mac  [6]byte
	prio uint8
}

// pauseTrack is what a reader remembers of one source MAC and priority
// between its PFC frames.
type pauseTrack struct {
	last  int64 // time of the last frame
	until int64 // when the last frame's pause runs out
	win   int64 // reader window whose record the last frame went into
}

// maxPauseKeys bounds the MAC and priority pairs a reader follows, and the
// pause records of a reader's window: PFC frames beyond them count in the
// PFC counters and in pfc_untracked only.
const maxPauseKeys = 4096

// pause accounts a PFC frame at time t from mac that pauses priority prio
// for quanta, in reader window rw.
func (r *reader) pause(rw *readerWindow, mac [6]byte, prio uint8, quanta uint16, t int64) {
	k := pauseKey{mac, prio}
	rec := rw.pauseRecord(k)
	tr, ok := r.tracks[k]
	if rec == nil || !ok && !r.track(k) {
		rw.counters[PFCUntracked]++
		return
	}
	rec.Frames++
	start := rw.index * r.winLen
	if t < start || t-start >= r.winLen || t < tr.last {
		// A late frame, or one out of time order: counted, but its
		// pause is not placed.
		return
	}
	// Runs are in ns from the window start.
	off, until := t-start, tr.until-start
	switch {
	case tr.win != rw.index && until > 0:
		// The pause of a frame of an earlier window runs on into this
		// one, until now.
		rec.addRun(0, min(until, off), 0)
	case tr.win == rw.index && until > off:
		// This frame replaces the rest of the last one's pause.
		rec.trim(off)
	}
	d := int64(float64(quanta) * r.quantumNS)
	if d > 0 {
		rec.addRun(off, min(off+d, r.winLen), 1)
	} else if n := rec.Len(); n > 0 && rec.Runs[n-1].End == off {
		rec.Runs[n-1].Frames++ // a resume ends the run
	}
	r.tracks[k] = pauseTrack{last: t, until: t + d, win: rw.index}
}

// track makes room to follow key k, forgetting pairs that paused nothing
// for the last two windows when the table is full; it reports whether k can
// be followed.
func (r *reader) track(k pauseKey) bool {
	if len(r.tracks) >= maxPauseKeys {
		for key, tr := range r.tracks {
			if tr.until < r.maxT-2*r.winLen {
				delete(r.tracks, key)
			}
		}
		if len(r.tracks) >= maxPauseKeys {
			return false
		}
	}
	r.tracks[k] = pauseTrack{}
	return true
}

// pauseRecord returns rw's record for k, adding it, or nil when rw holds
// maxPauseKeys records already.
func (rw *readerWindow) pauseRecord(k pauseKey) *PauseRecord {
	if i, ok := rw.pauseAt[k]; ok {
		return &rw.pauses[i]
	}
	if len(rw.pauses) >= maxPauseKeys {
		return nil
	}
	if rw.pauseAt == nil {
		rw.pauseAt = make(map[pauseKey]int32)
	}
	rw.pauseAt[k] = int32(len(rw.pauses))
	rw.pauses = append(rw.pauses, PauseRecord{MAC: k.mac, Priority: k.prio})
	return &rw.pauses[len(rw.pauses)-1]
}
