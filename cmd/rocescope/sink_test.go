package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/testframes"
)

// windowFrames returns a frame of window 0 and one of window 1 that closes
// window 0 (1 s windows).
func windowFrames(t *testing.T) []capture.Frame {
	t.Helper()
	frame := testframes.RoCE{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, Sport: 7, Op: decode.Opcode(4) /* RC SEND Only */, DQP: 0x11, Payload: 64}.Bytes()
	return []capture.Frame{
		{Time: testframes.Epoch, Data: frame, OrigLen: uint32(len(frame)), Link: decode.LinkEthernet},
		{Time: testframes.Epoch + int64(1200*time.Millisecond), Data: frame, OrigLen: uint32(len(frame)), Link: decode.LinkEthernet},
	}
}

// gatedSource delivers a frame of window 0 and one of window 1 (which
// closes window 0), then waits for open to be closed before it ends.
type gatedSource struct {
	frames []capture.Frame
	open   chan struct{}
}

func (s *gatedSource) Next(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	if len(s.frames) == 0 {
		<-s.open
		return io.EOF
	}
	b.Frames = append(b.Frames, s.frames[0])
	s.frames = s.frames[1:]
	return nil
}
func (*gatedSource) Stats() capture.Stats { return capture.Stats{} }
func (*gatedSource) Close() error         { return nil }

// testOptions returns the report flags' defaults, as a command starts with.
func testOptions(t *testing.T) *reportOptions {
	t.Helper()
	var o reportOptions
	o.bind(pflag.NewFlagSet("test", pflag.ContinueOnError))
	o.cfg.Workers, o.cfg.Host = 1, "h"
	return &o
}

// TestReportReachesPipeWhenWindowCloses: window 0's report is readable
// from a pipe while the source still holds window 1 open, in every text
// format.
func TestReportReachesPipeWhenWindowCloses(t *testing.T) {
	for _, format := range []string{"jsonl", "csv", "table"} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		src := &gatedSource{open: make(chan struct{}), frames: windowFrames(t)}
		o := testOptions(t)
		o.format = format
		done := make(chan error, 1)
		go func() {
			done <- (&analysis{opts: o}).run(context.Background(), &env{stdout: w, stderr: io.Discard}, []capture.Source{src})
			w.Close()
		}()
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		select {
		case line := <-lines:
			if line == "" {
				t.Errorf("%s: empty first line", format)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: no report of window 0 on the pipe while window 1 is open", format)
		}
		close(src.open)
		if err := <-done; err != nil {
			t.Errorf("%s: run: %v", format, err)
		}
		for range lines {
		}
		r.Close()
	}
}
