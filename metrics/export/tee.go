package export

import (
	"context"
	"errors"

	"github.com/rocescope/rocescope/metrics/report"
)

// Syncer is a Sink that can make durable what it was given: once Sync
// returns nil, every report written before it survives a crash of this
// process (a merger commits its inputs only then).
type Syncer interface {
	Sync(ctx context.Context) error
}

// Tee writes every report to each of several sinks, in the order given,
// so that one run can write a report file and export to servers. A sink
// that fails does not keep the others from the report: Write, Flush and
// Sync go through every sink and return their errors joined.
type Tee struct {
	sinks []Sink
}

var (
	_ Sink   = (*Tee)(nil)
	_ Syncer = (*Tee)(nil)
)

// NewTee returns a sink that writes to each of sinks.
func NewTee(sinks ...Sink) *Tee { return &Tee{sinks: sinks} }

// Write writes r to every sink.
func (t *Tee) Write(r *report.Report) error {
	var errs []error
	for _, s := range t.sinks {
		errs = append(errs, s.Write(r))
	}
	return errors.Join(errs...)
}

// Flush flushes every sink.
func (t *Tee) Flush() error {
	var errs []error
	for _, s := range t.sinks {
		errs = append(errs, s.Flush())
	}
	return errors.Join(errs...)
}

// Sync syncs the sinks that are Syncers; the others keep nothing back
// that a sync could save.
func (t *Tee) Sync(ctx context.Context) error {
	var errs []error
	for _, s := range t.sinks {
		if y, ok := s.(Syncer); ok {
			errs = append(errs, y.Sync(ctx))
		}
	}
	return errors.Join(errs...)
}
