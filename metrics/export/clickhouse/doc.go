// Package clickhouse writes reports into ClickHouse: one row per window in
// table windows, one row per reported flow and window in table flows, and
// one row per event and window in table events, in a schema Grafana can
// chart and that ClickHouse 18.16 and current releases both read without
// JSON functions.
//
// # Tables
//
// Every table starts with the same columns, the window's: window_start
// (DateTime('UTC'), the second the window starts in, for Grafana's time
// filters), window_start_ns (Int64, exact), window_ns and covered_ns, host
// (the report's: its hosts joined by commas), segment (the part of the
// host's capture, after a clock step back) and written_ns (when the sink
// wrote the row, the version). Then a window row has the report's scalar
// keys under their names (DESIGN.md), and its objects spread over typed
// columns: opcodes, nak_codes, decode_errors and pfc as Nested arrays
// (opcodes.opcode and opcodes.packets, ...), the latency summaries as
// read_latency_count and read_latency_p50_ns ... read_latency_max_ns
// (null without a sample), sketch_error as sketch_error_flows_rel_err and
// so on, events_omitted as events_omitted.kind and .count. A flow row has
// in_top (the flow is in the top list) and the report's flow keys, its
// opcodes again as arrays (and opcodes_other). A flow row is written for
// every flow of a report made with --exact, else for each flow of the
// lists top_flows, elephants, jitter, top_cnp, top_retransmits and
// event_flows, once. An event row has the report's event keys (kind, id,
// start_ns, end_ns, ongoing), event_start (start_ns's second, a
// DateTime), and the keys of every kind as columns, those of other kinds
// at their defaults: src, dst (an incast's destination), dqp, dqp_hex,
// sqp, sqp_hex; sender_count, sources, peak_bps, bytes, ecn_ce, cnp and an
// incast's senders as the Nested senders (senders.src ... senders.bytes,
// senders.share); mac, priority, paused_ns, paused_fraction, frames;
// cause, first_psn, resent, stall_ns, nak_code, rnr_timer, merged;
// packets, reverse_packets. An event that goes on into the next window
// has a row there too, with the same id and start_ns and the figures of
// its part in that window: grouped by kind and id and summed, it counts
// once.
//
// # Idempotency
//
// The tables are ReplacingMergeTree(written_ns), partitioned by day
// (toYYYYMMDD(window_start)) and ordered by (window_start, host, segment,
// window_start_ns), flows then by (src, dst, dqp) and events by (kind,
// id): one row per window, host, segment (and flow or event), the last
// written. A rerun of the same capture,
// or a batch sent again because the server's answer was lost, replaces
// rows instead of adding copies; ClickHouse removes the replaced rows when
// it merges parts, so queries that must be exact read the tables with
// FINAL (or pick each key's row with argMax(..., written_ns)).
//
// [New] makes the database and the tables that are missing. A table that
// exists must be the sink's (engine, sorting and partition keys, the types
// of the columns both have); the sink adds the columns it lacks (the
// report gained keys) and refuses, with [ErrSchema] and a line on the
// error log that says what to do, a table of another schema (an earlier
// rocescope's plain MergeTree with JSON strings), rather than mix its rows
// into it. With a TTL (?ttl=30d) it drops, when it starts and hourly, the
// days whose rows are all older than that.
//
// # Delivery
//
// Rows are sent over ClickHouse's HTTP interface as INSERT ... FORMAT
// JSONEachRow (a row leaves out the columns at their type's default, which
// the server fills in), in batches of windows. A goroutine sends them, so that Write
// and Flush do not wait for the server; a server that is down or slow is
// retried with exponential backoff (a line on the error log at the first
// failure, another when it works again) while batches queue up to a bound,
// and a batch that does not fit, or is still unsent when Close's time is
// up, is appended to the spill file. New loads the spill files of earlier
// runs and sends them first, and removes each once its rows are in.
// [Sink.Sync] (export.Syncer) queues the current batch and waits until
// every batch queued is inserted (or, at Close, spilled and fsynced):
// while the server is down it waits, so that a merge does not acknowledge
// windows whose rows are only in memory.
//
// Rows the server refuses for good (an exception parsing them) are not
// retried: the sink inserts the batch's windows one by one, and the
// windows refused go to the dead-letter file with a line on the error log
// naming them and the file; the rest go on. A window ClickHouse's DateTime
// cannot hold (before 1970, from 2106) is refused the same way by Write.
//
// # Spill directory
//
// Spill and dead-letter files live in a private directory: ?spill=DIR, by
// default [DefaultSpillDir] (under the user's state directory, never a
// shared one such as /tmp). The sink makes it 0700 and refuses to use a
// directory or load a file that another user owns or may write, or a
// symbolic link; a spill file's last line cut by a crash is moved to the
// dead-letter file and the rows before it are loaded. See spill.go for the
// format.
//
// # Concurrency
//
// A Sink's Write, Flush and Sync are called from one goroutine; Close
// once, after the last Write. Stats may be called from any goroutine.
package clickhouse
