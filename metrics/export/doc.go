// Package export writes rocescope's reports: JSON lines (the report
// contract), CSV, a terminal table, and Prometheus exposition over HTTP.
// Sub-package html writes a self-contained HTML page.
//
// A [Sink] is fed reports in window order by one goroutine. The text sinks
// ([JSONLines], [CSV], [Table]) hand each window to their writer in one
// Write as soon as they are given it, so that a pipe or file shows a
// window when it closes. [Prometheus] is safe for concurrent use (its HTTP
// server reads what Update stored) and bounds the connections it holds.
package export
