package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rocescope/rocescope/metrics"
)

// step is one Read of a scriptInput: the state it delivers (nil for none)
// and the rest of the Read.
type step struct {
	w *metrics.Window
	r Read
}

// scriptInput is an Input that plays steps, then ends, and records what
// Merge did with it in the log it shares with a logOutput.
type scriptInput struct {
	t        *testing.T
	steps    []step
	log      *[]string
	logReads bool              // log each state read too
	spares   []*metrics.Window // the windows Next was given
}

func (s *scriptInput) Next(_ context.Context, w *metrics.Window) (Read, error) {
	s.spares = append(s.spares, w)
	if len(s.steps) == 0 {
		return Read{Settled: math.MaxInt64, Final: true, Progress: End}, nil
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	if st.w != nil {
		if err := w.UnmarshalReusing(encodeWindow(s.t, st.w), 0); err != nil {
			s.t.Fatal(err)
		}
		st.r.State, st.r.Source = true, fmt.Sprintf("%s@%d", st.w.Hosts[0], st.w.Start)
		if s.logReads {
			*s.log = append(*s.log, fmt.Sprint("read ", st.w.Start))
		}
	}
	return st.r, nil
}

func (s *scriptInput) Done(_ context.Context, start int64) error {
	*s.log = append(*s.log, fmt.Sprint("done ", start))
	return nil
}

func (s *scriptInput) Drop(start int64) { *s.log = append(*s.log, fmt.Sprint("drop ", start)) }

// logOutput is an Output that logs what it is asked to do.
type logOutput struct {
	log     *[]string
	syncErr error
}

func (o *logOutput) Write(w *metrics.Window, missing []string) error {
	*o.log = append(*o.log, fmt.Sprintf("write %d %s missing %s", w.Start, strings.Join(w.Hosts, ","), strings.Join(missing, ",")))
	return nil
}

func (o *logOutput) Sync(context.Context) error {
	*o.log = append(*o.log, "sync")
	return o.syncErr
}

// runScript merges the steps with cfg and returns the log, the warnings
// and the input; with logReads, the log has the states read.
func runScript(t *testing.T, cfg MergeConfig, out *logOutput, logReads bool, steps ...step) ([]string, string, *scriptInput, error) {
	t.Helper()
	var lg []string
	var warn bytes.Buffer
	cfg.Log = log.New(&warn, "", 0)
	in := &scriptInput{t: t, steps: steps, log: &lg, logReads: logReads}
	if out == nil {
		out = &logOutput{}
	}
	out.log = &lg
	_, err := Merge(context.Background(), in, out, &cfg)
	return lg, warn.String(), in, err
}

// TestMergeSyncsBeforeDone: the merge acknowledges a window to its input
// only after the output synced its report; a sync that fails acknowledges
// nothing and ends the merge with an error that says so.
func TestMergeSyncsBeforeDone(t *testing.T) {
	a := hostWindows(t, "a", 0, &metrics.Config{Workers: 1})[0]
	s0, s1 := a.Start, a.Start+a.Length
	cur := Read{Settled: math.MaxInt64, Progress: Current}
	steps := []step{{at(t, a, "a", s0), cur}, {at(t, a, "b", s0), cur}, {at(t, a, "a", s1), cur}, {at(t, a, "b", s1), cur}}
	lg, _, _, err := runScript(t, MergeConfig{Hosts: []string{"a", "b"}}, nil, false, steps...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("write %d a,b missing ", s0), "sync", fmt.Sprint("done ", s0),
		fmt.Sprintf("write %d a,b missing ", s1), "sync", fmt.Sprint("done ", s1),
	}
	if diff := cmp.Diff(want, lg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	lg, _, _, err = runScript(t, MergeConfig{Hosts: []string{"a", "b"}}, &logOutput{syncErr: errors.New("disk gone")}, false, steps...)
	if err == nil || !strings.Contains(err.Error(), "not known to be durable") || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("error %v, want one saying the reports are not durable, and why", err)
	}
	if slices.ContainsFunc(lg, func(l string) bool { return strings.HasPrefix(l, "done") }) {
		t.Errorf("a window was acknowledged though its sync failed: %q", lg)
	}
}

// TestMergeKeepsSpareOnSkip: reads that fail (Read.Skipped) hand the window
// they were given back to the merge, which gives the same window to the
// next read, instead of leaving it and taking a new one each time.
func TestMergeKeepsSpareOnSkip(t *testing.T) {
	var steps []step
	for i := range 10 {
		steps = append(steps, step{r: Read{Skipped: fmt.Errorf("bad state %d", i), Settled: metrics.NoWindow, Progress: Behind}})
	}
	_, warn, in, err := runScript(t, MergeConfig{KeepGoing: true}, nil, false, steps...)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range in.spares {
		if w != in.spares[0] {
			t.Fatalf("read %d was given another window than the first", i)
		}
	}
	if n := strings.Count(warn, "; skipped\n"); n != 10 {
		t.Errorf("%d warnings, want 10:\n%s", n, warn)
	}
}

// TestMergeHoldsFutureStates: a state a day ahead of the other hosts' is
// held apart, refused when a state that is not ahead comes (the input is
// told to drop it), and never reported; states far ahead that come enough
// in a row are a jump of the clocks, and are merged.
func TestMergeHoldsFutureStates(t *testing.T) {
	a := hostWindows(t, "a", 0, &metrics.Config{Workers: 1})[0]
	s0, day := a.Start, int64(24*time.Hour)
	cur := Read{Settled: math.MaxInt64, Progress: Current}
	lg, warn, _, err := runScript(t, MergeConfig{Hosts: []string{"a", "b"}}, nil, false,
		step{at(t, a, "a", s0), cur}, step{at(t, a, "b", s0), cur},
		step{at(t, a, "a", s0+day), cur},
		step{at(t, a, "a", s0+a.Length), cur}, step{at(t, a, "b", s0+a.Length), cur})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("write %d a,b missing ", s0), "sync", fmt.Sprint("done ", s0),
		fmt.Sprint("drop ", s0+day),
		fmt.Sprintf("write %d a,b missing ", s0+a.Length), "sync", fmt.Sprint("done ", s0+a.Length),
	}
	if diff := cmp.Diff(want, lg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(warn, fmt.Sprintf("a@%d: window %s", s0+day, windowTime(s0+day))) || !strings.Contains(warn, "refused") {
		t.Errorf("warnings %q: want the future state named and refused", warn)
	}

	// Both hosts jump a day ahead: two states in a row (one per host)
	// confirm it.
	lg, warn, _, err = runScript(t, MergeConfig{Hosts: []string{"a", "b"}}, nil, false,
		step{at(t, a, "a", s0), cur}, step{at(t, a, "b", s0), cur},
		step{at(t, a, "a", s0+day), cur}, step{at(t, a, "b", s0+day), cur})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		fmt.Sprintf("write %d a,b missing ", s0), "sync", fmt.Sprint("done ", s0),
		fmt.Sprintf("write %d a,b missing ", s0+day), "sync", fmt.Sprint("done ", s0+day),
	}
	if diff := cmp.Diff(want, lg); diff != "" {
		t.Errorf("a jump of every host (-want +got):\n%s", diff)
	}
	if !strings.Contains(warn, "taken as a jump of the clocks") {
		t.Errorf("warnings %q: want the jump said", warn)
	}
}

// TestMergeBacklog: while the input is behind, a window waits for its
// hosts until the input is --timeout past it in the windows' time, not in
// wall-clock time; past MaxPending windows, the oldest goes without the
// hosts it lacks, saying so.
func TestMergeBacklog(t *testing.T) {
	a := hostWindows(t, "a", 0, &metrics.Config{Workers: 1})[0]
	s, l := a.Start, a.Length
	behind := func(settled int64) Read { return Read{Settled: settled, Progress: Behind} }
	var steps []step
	for i := range int64(6) {
		steps = append(steps, step{at(t, a, "a", s+i*l), behind(s + i*l + l)})
	}
	lg, _, _, err := runScript(t, MergeConfig{Hosts: []string{"a", "b"}, Timeout: time.Duration(3 * l)}, nil, true, steps...)
	if err != nil {
		t.Fatal(err)
	}
	// Window i goes once the state of window i+3 is read, the last ones
	// at the end.
	var want []string
	for i := range int64(6) {
		want = append(want, fmt.Sprint("read ", s+i*l))
		if i >= 3 {
			want = append(want, fmt.Sprintf("write %d a missing b", s+(i-3)*l))
		}
	}
	for i := range int64(3) {
		want = append(want, fmt.Sprintf("write %d a missing b", s+(i+3)*l))
	}
	want = append(want, "sync", fmt.Sprint("done ", s+5*l))
	if diff := cmp.Diff(want, lg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	lg, warn, _, err := runScript(t, MergeConfig{Hosts: []string{"a", "b"}, MaxPending: 2}, nil, false, steps[:4]...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn, fmt.Sprintf("window %s reported without b: 3 windows were pending, the most the merge holds (--max-pending)", windowTime(s))) {
		t.Errorf("warnings %q: want the forced window said", warn)
	}
	if lg[0] != fmt.Sprintf("write %d a missing b", s) {
		t.Errorf("log %q: want window %d written first", lg, s)
	}
}
