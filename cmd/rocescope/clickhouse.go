package main

import (
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/export/clickhouse"
)

// clickhouseSink opens the ClickHouse report output -o names; --format
// does not apply to it.
func clickhouseSink(output string) (export.Sink, func() error, error) {
	t, err := clickhouse.ParseURL(output)
	if err != nil {
		return nil, nil, usagef("-o: %v", err)
	}
	s, err := clickhouse.New(t, nil)
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}
