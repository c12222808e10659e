package clickhouse

import (
	"bytes"
	"strconv"
	"time"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// batch is the rows of some windows, for every table, in JSONEachRow.
type batch struct {
	rows [numTables][]byte
	wins []window // the windows whose rows it holds, in order
	// file is the spill file its rows were loaded from: it is removed
	// once every row is inserted, refused or spilled again.
	file  *spillFile
	bytes int64  // of rows when queued
	seq   uint64 // its place in the queue, from 1
}

// window is where the rows of one window of a batch end in each table,
// and what names the window in messages.
type window struct {
	end   [numTables]int
	start int64 // ns
	host  string
}

// String names the window in messages.
func (w *window) String() string {
	s := time.Unix(0, w.start).UTC().Format(time.RFC3339Nano)
	if w.host != "" {
		s += " of host " + w.host
	}
	return s
}

// one returns the rows of window i as a batch of their own.
func (b *batch) one(i int) *batch {
	var from [numTables]int
	if i > 0 {
		from = b.wins[i-1].end
	}
	o := &batch{wins: []window{b.wins[i]}}
	for t := range o.rows {
		o.rows[t] = b.rows[t][from[t]:b.wins[i].end[t]]
		o.wins[0].end[t] = len(o.rows[t])
	}
	return o
}

// from returns the rows of windows i and later as a batch of their own.
func (b *batch) from(i int) *batch {
	o := &batch{}
	var from [numTables]int
	if i > 0 {
		from = b.wins[i-1].end
	}
	for t := range o.rows {
		o.rows[t] = b.rows[t][from[t]:]
	}
	for _, w := range b.wins[i:] {
		for t := range w.end {
			w.end[t] -= from[t]
		}
		o.wins = append(o.wins, w)
	}
	return o
}

// size returns the bytes of b's rows.
func (b *batch) size() int64 {
	var n int
	for _, r := range b.rows {
		n += len(r)
	}
	return int64(n)
}

// rowWriter turns reports into rows, reusing its scratch space.
type rowWriter struct {
	lead []byte
	top  map[metrics.FlowKey]bool
	seen map[metrics.FlowKey]bool
}

// add appends the rows of r, written at writtenNs, to b: a window row,
// a flow row for every flow of a report made with --exact, else for each
// flow of its lists (top, elephants, jitter, top_cnp, top_retransmits,
// event_flows), once, and an event row for each of its events.
func (rw *rowWriter) add(b *batch, r *report.Report, writtenNs int64) {
	rw.lead = appendLead(rw.lead[:0], r.Window, writtenNs)
	b.rows[tWindows] = appendRow(b.rows[tWindows], rw.lead, windowColumns, r)
	if rw.top == nil {
		rw.top, rw.seen = make(map[metrics.FlowKey]bool), make(map[metrics.FlowKey]bool)
	}
	clear(rw.top)
	for i := range r.Top {
		rw.top[r.Top[i].Key] = true
	}
	flows := b.rows[tFlows]
	if r.All != nil {
		for i := range r.All {
			flows = appendRow(flows, rw.lead, flowColumns, flowRow{&r.All[i], rw.top[r.All[i].Key]})
		}
	} else {
		clear(rw.seen)
		for _, list := range [][]report.FlowReport{r.Top, r.Elephants, r.Jitter, r.TopCNP, r.TopRetransmits, r.EventFlows} {
			for i := range list {
				if k := list[i].Key; !rw.seen[k] {
					rw.seen[k] = true
					flows = appendRow(flows, rw.lead, flowColumns, flowRow{&list[i], rw.top[k]})
				}
			}
		}
	}
	b.rows[tFlows] = flows
	for i := range r.Events {
		b.rows[tEvents] = appendRow(b.rows[tEvents], rw.lead, eventColumns, &r.Events[i])
	}
	w := window{start: r.Window.Start, host: hostOf(r.Window)}
	for t := range b.rows {
		w.end[t] = len(b.rows[t])
	}
	b.wins = append(b.wins, w)
}

// rowStart returns the window_start_ns of a row as appendLead writes it.
func rowStart(row []byte) (int64, bool) {
	const key = `"window_start_ns":`
	i := bytes.Index(row, []byte(key))
	if i < 0 {
		return 0, false
	}
	row = row[i+len(key):]
	end := bytes.IndexByte(row, ',')
	if end < 0 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(row[:end]), 10, 64)
	return v, err == nil
}
