package main

import (
	"io"

	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/export/ipfix"
)

// ipfixSink opens the IPFIX output -o names; its failures to send are
// reported on errLog, and rocePort is the destination port of its RoCEv2
// flows.
func ipfixSink(output string, errLog io.Writer, rocePort uint16) (export.Sink, func() error, error) {
	t, err := ipfix.ParseURL(output)
	if err != nil {
		return nil, nil, usagef("-o: %v", err)
	}
	o := t.Options
	o.ErrorLog, o.RoCEPort = errLog, rocePort
	s, err := ipfix.New(t, &o)
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}
