// Package html writes rocescope's reports as one self-contained HTML page:
// the events of the diagnoses first (a timeline with a lane per kind, and
// a table whose flows link to their rows), then the charts an operator
// looks at after an incident (throughput, the
// top flows' rates with the elephant and jitter thresholds, congestion and
// PFC pauses, transport trouble, READ and ACK latency quantiles, the
// operation mix) and a sortable table of the flows, under a header that
// names the inputs, hosts, window, thresholds and totals and says what is
// exact and what is estimated.
//
// # Page
//
// A [Page] collects one report per window and writes the page with
// WriteTo. The chart library (uPlot, vendored whole under vendor/uplot),
// the style, the script and the figures are all inside the page, which
// opens from disk without a network. The figures are one JSON object in
// the page's <script type="application/json" id="data"> element, named
// after the keys of the JSON lines report ("cnp", "pfc.3.frames",
// "read_latency_ns.p99"), so that a program can read them back.
//
// # Charts
//
// The page's script (report.js) is a list of sections, each a function
// that appends its cards; one chart function gives every chart the same
// reading: a time axis in UTC, 24-hour time, whose step is chosen from the
// width of its labels so that they never overlap (the date under the
// first tick and where the day changes), value axes as wide as their
// labels and in the unit their largest tick needs, small counts on their
// own axis beside large ones, and a legend. A chart's div lists its series
// (label, scale, colour) in its data-series attribute. The tests render
// pages in headless Chromium and measure every label uPlot draws on the
// canvases.
//
// # Events
//
// The page keeps every event once, by its ID: the reports of the windows
// an ongoing event spans are merged into one (its figures added up, its
// start the earliest and its end the latest), so the timeline draws it as
// one bar from start to end. The page's figures hold each as the JSON
// lines report writes an event, plus the windows that reported it; the
// flows the events name are charted with the top flows, so that the event
// table links to their rows.
//
// # Bounded memory
//
// A Page keeps a fixed set of numbers per point, at most MaxPoints points
// per series, and a rate sample per point for at most MaxFlows flows of the
// top lists, whatever the length of the run: a capture can feed it for
// days. Past MaxPoints it merges points in pairs (counts add up; rates,
// levels and quantiles keep their largest value, throughput its smallest
// too); past MaxFlows it keeps
// the flows with the most bytes; past MaxEvents (1000) it keeps the first
// events and counts the others, and an incast keeps 16 of its senders. The
// page says when any of these happened.
//
// # Sink
//
// A [File] is the metrics sink: Write adds a window and Flush writes the
// whole page to its file, atomically, when windows came since the last
// Flush. Replay and capture flush once, at the end; merge --follow flushes
// as windows arrive, so the page stays current.
//
// # Concurrency
//
// A Page and a File are not safe for concurrent use.
package html
