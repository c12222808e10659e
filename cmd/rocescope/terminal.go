package main

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"sync"
)

// tty is a writer that may be a terminal. Standard streams that are
// *os.File get it from fileTTY; tests pass fakes.
type tty interface {
	io.Writer
	// Terminal reports whether the writer is a terminal.
	Terminal() bool
	// Width returns the terminal's width in columns, or 0 when unknown.
	Width() int
}

// ttyOf returns w as a tty, or nil when it cannot be one (a buffer).
func ttyOf(w io.Writer) tty {
	switch w := w.(type) {
	case tty:
		return w
	case *os.File:
		return fileTTY{w}
	}
	return nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	t := ttyOf(w)
	return t != nil && t.Terminal()
}

// fileTTY is an *os.File seen as a tty.
type fileTTY struct{ *os.File }

// Terminal reports whether the file is a character device.
func (f fileTTY) Terminal() bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Width asks the terminal for its size (TIOCGWINSZ where there is one).
func (f fileTTY) Width() int { return windowWidth(f.File) }

// defaultWidth is the width of a table when neither COLUMNS nor the
// terminal says otherwise.
const defaultWidth = 80

// tableWidth returns the columns a table may use on w: $COLUMNS when it is
// a number, else the width of the terminal w is, else 80.
func tableWidth(w io.Writer) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	if t := ttyOf(w); t != nil && t.Terminal() {
		if n := t.Width(); n > 0 {
			return n
		}
	}
	return defaultWidth
}

// eraseLine returns the cursor to the start of the line and erases it.
const eraseLine = "\r\033[K"

// console is the one writer of a terminal that the progress line
// (standard error) and the reports (standard output) share. The progress
// line is erased before a report is written and drawn again once the
// report has ended its line, so that neither garbles the other. It is safe
// for concurrent use.
type console struct {
	mu     sync.Mutex
	status io.Writer // where the progress line is drawn
	width  int       // the terminal's columns; a longer line is cut, as a wrapped one could not be erased
	line   string    // the progress line as drawn; "" when none is
	hidden bool      // the line is erased for a report that has not ended its line
}

// show draws line (ASCII) as the progress line, replacing the one drawn.
func (c *console) show(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.width > 1 && len(line) >= c.width {
		line = line[:c.width-1]
	}
	c.line = line
	if !c.hidden {
		io.WriteString(c.status, eraseLine+line)
	}
}

// clear erases the progress line for good.
func (c *console) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.line != "" && !c.hidden {
		io.WriteString(c.status, eraseLine)
	}
	c.line, c.hidden = "", false
}

// writer returns a writer to out, the terminal's standard output (reports)
// or standard error (messages): each write erases the progress line first
// and draws it again when the write ends a line.
func (c *console) writer(out tty) tty { return &consoleOut{c: c, tty: out} }

// consoleOut writes reports or messages through a console.
type consoleOut struct {
	c *console
	tty
}

// Write writes p between erasing and redrawing the progress line.
func (o *consoleOut) Write(p []byte) (int, error) {
	c := o.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.line != "" && !c.hidden {
		io.WriteString(c.status, eraseLine)
	}
	n, err := o.tty.Write(p)
	c.hidden = c.line != "" && !bytes.HasSuffix(p, []byte("\n"))
	if c.line != "" && !c.hidden {
		io.WriteString(c.status, eraseLine+c.line)
	}
	return n, err
}
