// Package enginetest runs the metrics engine for the tests of the packages
// built on it (reports, exporters, window states). It is a test kit: nothing
// outside tests uses it.
package enginetest

import (
	"context"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/metrics"
)

// Run runs an engine configured by cfg over sources and returns its windows,
// each a copy (decoded from its state) that outlives the run.
func Run(tb testing.TB, cfg *metrics.Config, sources ...capture.Source) []*metrics.Window {
	tb.Helper()
	e, err := metrics.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	var out []*metrics.Window
	err = e.Run(context.Background(), sources, func(w *metrics.Window) error {
		b, err := w.AppendBinary(nil)
		if err != nil {
			return err
		}
		var c metrics.Window
		if err := c.UnmarshalBinary(b); err != nil {
			return err
		}
		out = append(out, &c)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
