// Package clickhouse writes reports into ClickHouse: one row per window in
// table windows, and one row per reported flow and window in table flows.
//
// # Tables
//
// [New] creates the database and both tables if they are missing, with
// syntax ClickHouse 18.16 and current releases both accept:
//
//	ENGINE = MergeTree()
//	PARTITION BY toYYYYMMDD(toDateTime(intDiv(window_start_ns, 1000000000)))
//	ORDER BY (window_start_ns, host)             -- windows
//	ORDER BY (window_start_ns, src, dst, dqp)    -- flows
//
// The columns are the keys of the JSON lines report (see DESIGN.md), under
// the same names: a window row has every scalar key of the report (counters
// as UInt64, estimates as Float64, booleans as UInt8, host and the window's
// RFC 3339 start as String, hosts as Array(String)), and its objects
// (opcodes, nak_codes, decode_errors, pfc, the latency summaries,
// sketch_error) as JSON strings. A flow row has window_start_ns, host,
// in_top (the flow is in the top list) and every key of the report's flow
// object, opcodes again as a JSON string. The column types are read off a
// probe report when the package starts, so the tables follow the report
// contract without a second list of its keys. A flow row is written for
// every flow of a report made with --exact, else for each flow of the top,
// elephant and jitter lists, once.
//
// # Delivery
//
// Rows are sent over ClickHouse's HTTP interface as INSERT ... FORMAT
// JSONEachRow, in batches of windows. A goroutine sends them, so that Write
// and Flush do not wait for the server; a server that is down or slow is
// retried with exponential backoff while batches queue up to a bound, and
// a batch that does not fit, or is still unsent when Close's time is up,
// is appended to a spill file (JSONEachRow, one file per table, ready for
// INSERT). New loads the spill files of an earlier run and sends them
// first. A batch whose INSERT succeeded at the server but whose answer was
// lost is sent again: rows may then be doubled, never lost. [Sink.Sync]
// (export.Syncer) queues the current batch and waits until every batch
// queued is inserted (or, at Close, spilled and fsynced): while the server
// is down it waits, so that a merge does not acknowledge windows whose
// rows are only in memory.
//
// # Concurrency
//
// A Sink's Write and Flush are called from one goroutine; Close once,
// after the last Write.
package clickhouse
