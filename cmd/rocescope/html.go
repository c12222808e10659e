package main

import (
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/export/html"
)

// htmlSink returns the sink of an HTML page written to path and the
// function that writes the page when the run ends.
func (o *reportOptions) htmlSink(path string) (export.Sink, func() error, error) {
	f, err := html.NewFile(path, &html.Options{
		Inputs:       o.inputs,
		ElephantRate: o.cfg.ElephantRate,
		JitterRate:   o.cfg.JitterRate,
	})
	if err != nil {
		return nil, nil, err
	}
	return f, f.Flush, nil
}
