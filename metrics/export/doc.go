// Package export writes rocescope's reports: JSON lines (the report
// contract), CSV, a terminal table, and Prometheus exposition over HTTP.
// Sub-package html writes a self-contained HTML page.
//
// A [Sink] is fed reports in window order by one goroutine; [Prometheus] is
// safe for concurrent use (its HTTP server reads what Update stored).
package export
