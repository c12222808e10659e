//go:build linux

package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHangUpReportsOpenWindow feeds testdata/demo.pcap (three windows) to
// replay - through a pipe that stays open, and hangs up once the first two
// windows are out: SIGHUP, like SIGINT and SIGTERM, must end the run with
// the open window reported and exit status 130. Started with SIGHUP
// ignored (nohup), the run must go on past a hang-up.
func TestHangUpReportsOpenWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rocescope")
	}
	bin, err := buildRocescope(t, "")
	if err != nil {
		t.Fatal(err)
	}
	demo, err := os.ReadFile("../../testdata/demo.pcap")
	if err != nil {
		t.Fatal(err)
	}
	// A test run under nohup would pass SIGHUP ignored on to the children,
	// which then rightly go on past it. A handler here, even one nobody
	// reads, makes exec start them with the default action instead.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin, "replay", "--format", "jsonl", "--workers", "1", "-")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			go stdin.Write(demo)
			lines := make(chan int, 8)
			go func() {
				defer close(lines)
				buf, n := make([]byte, 1<<16), 0
				for {
					k, err := stdout.Read(buf)
					n += strings.Count(string(buf[:k]), "\n")
					lines <- n
					if err != nil {
						return
					}
				}
			}()
			// The first two windows close when the third one's frames
			// come; the third stays open while the pipe does.
			got := 0
			for deadline := time.After(30 * time.Second); got < 2; {
				select {
				case n, ok := <-lines:
					if !ok {
						t.Fatalf("output ended after %d reports; stderr: %s", got, &stderr)
					}
					got = n
				case <-deadline:
					t.Fatalf("%d reports after 30 s, want 2; stderr: %s", got, &stderr)
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			hung := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
			for n := range lines {
				got = n
			}
			err = cmd.Wait()
			if !hung.Stop() {
				t.Fatalf("still running 30 s after %v; stderr: %s", sig, &stderr)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 130 {
				t.Errorf("after %v: %v, want exit status 130", sig, err)
			}
			if got != 3 || !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("after %v: %d reports and stderr %q, want 3 (the open window too) and \"interrupted\"", sig, got, &stderr)
			}
		})
	}
	t.Run("nohup", func(t *testing.T) {
		cmd := exec.Command("nohup", bin, "replay", "--format", "jsonl", "-")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stdout strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if _, err := stdin.Write(demo); err != nil {
			t.Fatalf("write after SIGHUP: %v (did it exit?)", err)
		}
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("nohup rocescope replay - after SIGHUP: %v, want exit status 0", err)
		}
		if n := strings.Count(stdout.String(), "\n"); n != 3 {
			t.Errorf("%d reports, want 3", n)
		}
	})
}
