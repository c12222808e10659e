// Package export writes rocescope's reports: JSON lines (the report
// contract), CSV, a terminal table, and Prometheus exposition over HTTP.
// Sub-package html writes a self-contained HTML page.
//
// Every output shows a window's events (the diagnoses): the JSON lines'
// events key, the table's "!" lines first in each window, CSV event rows,
// and on the Prometheus endpoint rocescope_events_total{kind}, each event
// counted once however many windows it spans.
//
// A [Sink] is fed reports in window order by one goroutine. The text sinks
// ([JSONLines], [CSV], [Table]) hand each window to their writer in one
// Write as soon as they are given it, so that a pipe or file shows a
// window when it closes. [Prometheus] is safe for concurrent use (its HTTP
// server reads what Update stored) and bounds the connections it holds.
//
// A sink that can make what it wrote durable is a [Syncer]: the text sinks
// fsync the file they write to (and do nothing for a pipe or terminal),
// the ClickHouse sink waits until its rows are inserted. [Sync] flushes a
// sink and syncs it if it is one; a merge calls it before it acknowledges
// the states of the windows written.
package export
