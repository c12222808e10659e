package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"
)

// fakeTerm is a terminal of the given width whose bytes go to screen;
// standard output and error of one terminal share the screen.
type fakeTerm struct {
	screen io.Writer
	width  int
}

func (f fakeTerm) Write(p []byte) (int, error) { return f.screen.Write(p) }
func (fakeTerm) Terminal() bool                { return true }
func (f fakeTerm) Width() int                  { return f.width }

// TestConsoleSharesTerminal checks the byte stream of a terminal that
// shows a progress line and reports: the line is erased before a report,
// drawn again after a report that ends its line (not after a partial
// one), cut to the width, and erased at the end.
func TestConsoleSharesTerminal(t *testing.T) {
	var screen bytes.Buffer
	term := fakeTerm{&screen, 20}
	con := &console{status: term, width: term.width}
	out := con.writer(term)
	out.Write([]byte("report 0\n"))
	con.show("P1 frames")
	out.Write([]byte("report 1 line 1\nreport 1 "))
	con.show("P2 frames, more than twenty columns")
	out.Write([]byte("line 2\n"))
	con.clear()
	out.Write([]byte("last\n"))
	const e = eraseLine
	want := "report 0\n" +
		e + "P1 frames" +
		e + "report 1 line 1\nreport 1 " +
		"line 2\n" + e + "P2 frames, more tha" +
		e +
		"last\n"
	if got := screen.String(); got != want {
		t.Errorf("terminal bytes\n got %q\nwant %q", got, want)
	}
}

// TestProgressOnlyOnTerminal runs an analysis that draws progress every
// millisecond. With standard error a terminal (the same one as standard
// output), the byte stream splits at each erase into progress texts and
// whole report lines, never a mix, and no progress is left at the end.
// With standard error not a terminal, nothing is written there.
func TestProgressOnlyOnTerminal(t *testing.T) {
	for _, stderrTerm := range []bool{true, false} {
		var screen, errb syncBuffer
		var stderr io.Writer = &errb
		if stderrTerm {
			stderr = fakeTerm{&screen, 80}
		}
		o := testOptions(t)
		o.format = "jsonl"
		src := &gatedSource{open: make(chan struct{}), frames: windowFrames(t)}
		done := make(chan error, 1)
		go func() {
			a := &analysis{opts: o, progressEvery: time.Millisecond}
			done <- a.run(context.Background(), &env{stdout: fakeTerm{&screen, 80}, stderr: stderr}, []capture.Source{src})
		}()
		if stderrTerm {
			waitFor(t, "progress after window 0", func() bool {
				s := screen.String()
				return strings.Contains(s, "\n"+eraseLine+"rocescope: ")
			})
		} else {
			waitFor(t, "window 0", func() bool { return strings.Contains(screen.String(), "\n") })
		}
		close(src.open)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The run's line comes last, on standard error, once progress
		// is erased.
		got := screen.String()
		if stderrTerm {
			// after the erased progress line, on the same line
			i := strings.LastIndex(got, eraseLine) + len(eraseLine)
			if before, _ := lastWords(t, got[i:]); before != "" {
				t.Errorf("stderr a terminal: got %q before the run's line", before)
			}
			got = got[:i]
		} else if before, _ := lastWords(t, errb.String()); before != "" {
			t.Errorf("stderr not a terminal: got %q before the run's line", before)
		}
		reports := 0
		for i, piece := range strings.Split(got, eraseLine) {
			switch {
			case piece == "":
			case strings.HasPrefix(piece, "rocescope: ") && !strings.Contains(piece, "\n"):
				if i == strings.Count(got, eraseLine) {
					t.Errorf("progress left on the screen: %q", piece)
				}
			case strings.HasPrefix(piece, "{") && strings.HasSuffix(piece, "}\n") && !strings.Contains(piece, "rocescope:"):
				reports += strings.Count(piece, "\n")
			default:
				t.Errorf("garbled piece %q", piece)
			}
		}
		if reports != 2 {
			t.Errorf("stderr terminal %v: %d report lines, want 2:\n%q", stderrTerm, reports, got)
		}
	}
}
