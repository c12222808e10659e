package export

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// callLog is a sink that logs the calls it gets and fails those named in
// fail.
type callLog struct {
	name  string
	calls *[]string
	fail  map[string]bool
}

func (s *callLog) call(what string) error {
	*s.calls = append(*s.calls, s.name+"."+what)
	if s.fail[what] {
		return errors.New(s.name + " " + what + " failed")
	}
	return nil
}

func (s *callLog) Write(*report.Report) error { return s.call("write") }
func (s *callLog) Flush() error               { return s.call("flush") }

// syncingLog is a callLog that is a Syncer too.
type syncingLog struct{ callLog }

func (s *syncingLog) Sync(context.Context) error { return s.call("sync") }

// TestTee: every sink gets every call in order, a failing sink keeps no
// other from its call, the errors come back joined, and Sync reaches only
// the sinks that sync.
func TestTee(t *testing.T) {
	var calls []string
	a := &callLog{name: "a", calls: &calls, fail: map[string]bool{"write": true}}
	b := &syncingLog{callLog{name: "b", calls: &calls, fail: map[string]bool{"sync": true}}}
	c := &syncingLog{callLog{name: "c", calls: &calls}}
	tee := NewTee(a, b, c)
	r := &report.Report{Window: &metrics.Window{}}
	werr := tee.Write(r)
	ferr := tee.Flush()
	serr := tee.Sync(context.Background())
	want := []string{"a.write", "b.write", "c.write", "a.flush", "b.flush", "c.flush", "b.sync", "c.sync"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if werr == nil || werr.Error() != "a write failed" || ferr != nil || serr == nil || serr.Error() != "b sync failed" {
		t.Errorf("Write = %v, Flush = %v, Sync = %v", werr, ferr, serr)
	}
}
