//go:build unix

package file

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture"

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

// TestNamedPipeClose closes a source whose Next waits for a named pipe:
// with no writer (where open(2) of the pipe blocks), with a writer that
// sends nothing, and merged with a regular file. Next must return
// os.ErrClosed within a second of Close.
func TestNamedPipeClose(t *testing.T) {
	pc, _ := basePcap(65535)
	regular := writeTemp(t, pc)[0]
	for _, c := range []struct {
		name   string
		writer bool
		other  bool
	}{
		{"no writer", false, false},
		{"silent writer", true, false},
		{"no writer, merged", false, true},
		{"silent writer, merged", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fifo")
			if err := unix.Mkfifo(path, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			// unblock ends an open(2) of the pipe that still blocks, so
			// that a failing test leaves no thread behind.
			unblock := func() {
				if f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			}
			paths := []string{path}
			if c.other {
				paths = append(paths, regular)
			}
			src, err := Open(paths, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.writer {
				// A writer's open blocks until the reader opens the pipe.
				writer := make(chan *os.File, 1)
				go func() {
					f, _ := os.OpenFile(path, os.O_WRONLY, 0)
					writer <- f
				}()
				defer func() {
					unblock()
					if f := <-writer; f != nil {
						f.Close()
					}
				}()
			}
			done := make(chan error, 1)
			go func() { done <- src.Next(capture.NewBatch(8)) }()
			time.Sleep(200 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("Next returned %v before Close", err)
			default:
			}
			start := time.Now()
			if err := src.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, os.ErrClosed) {
					t.Errorf("Next after Close = %v, want os.ErrClosed", err)
				}
				t.Logf("Next returned %v after %v", err, time.Since(start))
			case <-time.After(5 * time.Second):
				unblock()
				t.Fatal("Next still blocked 5 s after Close")
			}
			if err := src.Next(capture.NewBatch(8)); !errors.Is(err, os.ErrClosed) {
				t.Errorf("Next after Close = %v, want os.ErrClosed", err)
			}
		})
	}
}

// TestStdinPipeClose closes a source whose Next waits on standard input
// ("-") that is a pipe whose writer sends nothing, as in
// "sleep 100 | rocescope replay -": Next must return os.ErrClosed within a
// second of Close, as for a named pipe given by its name.
func TestStdinPipeClose(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	src, err := open([]string{"-"}, nil, r)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- src.Next(capture.NewBatch(8)) }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Next returned %v before Close", err)
	default:
	}
	start := time.Now()
	if err := src.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Next after Close = %v, want os.ErrClosed", err)
		}
		t.Logf("Next returned %v after %v", err, time.Since(start))
	case <-time.After(5 * time.Second):
		w.Close() // ends the read, so that the test leaves no goroutine blocked
		t.Fatal("Next still blocked 5 s after Close")
	}
}

// TestStdinPipe reads a pcap from standard input that is a pipe.
func TestStdinPipe(t *testing.T) {
	pc, want := basePcap(65535)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.Write(pc)
		w.Close()
	}()
	src, err := open([]string{"-"}, nil, r)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := readAll(t, src, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffFrames(want, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}
