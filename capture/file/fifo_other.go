//go:build !linux

package file

import (
	"io"
	"os"
)

// openInput opens path for reading. Opening a named pipe blocks until a
// writer opens it, and Close cannot interrupt that here.
func openInput(path string) (*os.File, error) { return os.Open(path) }

// waitInput has nothing to wait for on this platform.
func waitInput(*os.File) error { return nil }

// stdinPipe returns "": standard input is read as it is, and Close cannot
// interrupt a read that waits on it here.
func stdinPipe(io.Reader) string { return "" }
