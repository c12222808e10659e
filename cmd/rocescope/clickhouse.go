package main

import (
	"io"

	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/export/clickhouse"
)

// clickhouseSink opens the ClickHouse report output -o names; --format
// does not apply to it. Its trouble with the server (down, refusing rows,
// a table of another schema) is said on errLog as it happens.
func clickhouseSink(output string, errLog io.Writer) (export.Sink, func() error, error) {
	t, err := clickhouse.ParseURL(output)
	if err != nil {
		return nil, nil, usagef("-o: %v", err)
	}
	s, err := clickhouse.New(t, &clickhouse.Config{ErrorLog: errLog})
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}
