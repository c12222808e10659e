//go:build unix

package file

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNamedPipe reads a named pipe: Open must not open it (closing it again
// would cut off the writer), and Next reads it as a stream.
func TestNamedPipe(t *testing.T) {
	ng, want := basePcapng()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	src, err := Open([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	data := gz(t, ng)
	written := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			written <- err
			return
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		written <- err
	}()
	got, err := readAll(t, src, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-written; err != nil {
		t.Fatalf("writing the pipe: %v", err)
	}
	if diff := diffFrames(want, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
	if p := src.Progress(); p.Total != 0 || p.File != 1 {
		t.Errorf("Progress() = %+v, want file 1 of unknown size", p)
	}
}
