package export

import (
	"bytes"
	"io"
	"strconv"
	"testing"

	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// handReports returns the reports of the hand-made trace, one per window.
func handReports(t *testing.T, cfg *metrics.Config) []*report.Report {
	t.Helper()
	tr := testframes.Trace()
	rp, err := report.NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*report.Report
	for _, w := range enginetest.Run(t, cfg, &testframes.Source{Frames: tr.Frames, Per: 5}) {
		rs = append(rs, rp.Build(w))
	}
	if len(rs) < 2 {
		t.Fatalf("the hand-made trace has %d windows, want at least 2", len(rs))
	}
	return rs
}

// writeLog records every Write call it receives.
type writeLog struct{ calls [][]byte }

func (l *writeLog) Write(p []byte) (int, error) {
	l.calls = append(l.calls, bytes.Clone(p))
	return len(p), nil
}

// TestSinksWriteEachWindowAtOnce: every text sink hands a window's report
// to its writer in one Write before Write returns, so that a pipe or file
// shows window N before window N+1 exists.
func TestSinksWriteEachWindowAtOnce(t *testing.T) {
	rs := handReports(t, &metrics.Config{Workers: 1, Host: "h"})
	for name, open := range map[string]func(io.Writer) Sink{
		"jsonl": func(w io.Writer) Sink { return NewJSONLines(w) },
		"csv":   func(w io.Writer) Sink { return NewCSV(w) },
		"table": func(w io.Writer) Sink { return NewTable(w, nil) },
	} {
		var log writeLog
		s := open(&log)
		for i, r := range rs {
			if err := s.Write(r); err != nil {
				t.Fatal(err)
			}
			if len(log.calls) != i+1 {
				t.Fatalf("%s: %d writes after window %d, want %d", name, len(log.calls), i, i+1)
			}
			if start := strconv.FormatInt(r.Window.Start, 10); name != "table" && !bytes.Contains(log.calls[i], []byte(start)) {
				t.Errorf("%s: write %d lacks window start %s:\n%s", name, i, start, log.calls[i])
			}
		}
		if err := s.Flush(); err != nil || len(log.calls) != len(rs) {
			t.Errorf("%s: Flush = %v and %d writes, want nil and %d", name, err, len(log.calls), len(rs))
		}
	}
}
