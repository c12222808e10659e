package main

import (
	"github.com/rocescope/rocescope/metrics/export"
	"github.com/rocescope/rocescope/metrics/export/html"
)

// checkHTML validates the flags of --format html: the page is a file.
func (o *reportOptions) checkHTML() error {
	if o.output == "" || o.output == "-" {
		return usagef("--format html writes a page to a file: give -o FILE.html")
	}
	return nil
}

// htmlSink returns the sink of --format html and the function that writes
// the page when the run ends.
func (o *reportOptions) htmlSink() (export.Sink, func() error, error) {
	if err := o.checkHTML(); err != nil {
		return nil, nil, err
	}
	f, err := html.NewFile(o.output, &html.Options{
		Inputs:       o.inputs,
		ElephantRate: float64(o.elephantRate),
		JitterRate:   float64(o.jitterRate),
	})
	if err != nil {
		return nil, nil, err
	}
	return f, f.Flush, nil
}
