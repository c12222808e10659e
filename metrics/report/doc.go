// Package report builds rocescope's per-window reports from merged window
// states: the top flows by bytes, the elephants (rate at or above a
// threshold), the jitter flows (elephants whose rate changed by at least a
// threshold since the previous window), CNPs attributed to the flows they
// throttle, source QPs learned from CM exchanges and from pairing the two
// directions of a connection, latency quantiles, and the window's events
// (incasts, PFC storms, retransmission episodes, CE marks without CNPs; see
// [Event]) with the flows they name and the top flows by CNPs and by
// retransmissions.
//
// A [Reporter] keeps what crosses windows (the previous window's rates, the
// learned QP pairs, the events that reached the previous window's end) and
// is fed windows in time order; it is not safe for concurrent use. Building
// a report reads the window's flow records a few times and copies only the
// flows the report names.
package report
