package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rocescope/rocescope/metrics"
)

// FileInputConfig tunes a [FileInput]. The zero value (or nil) reads the
// files once.
type FileInputConfig struct {
	// Read bounds the states decoded; Follow sets its Growing.
	Read ReadOptions
	// Follow keeps reading: the directories are listed again every Poll
	// (default 500ms), and each file is read again from where its
	// states ended. The input then ends only once its context is done,
	// after reading the directories a last time.
	Follow bool
	Poll   time.Duration
}

// DefaultPoll is how often a FileInput with Follow looks for new states.
const DefaultPoll = 500 * time.Millisecond

// FileInput is the [Input] of state files and of directories of state
// files (those named *.rsstate). It reads the files in window order with
// [Files], so that a merge holds a few windows however many the files hold.
//
// Read once, every file must be a state file whose states are in window
// order: an empty file, a file that is not a state file and a damaged
// state are skipped as Read.Skipped, and no file at all is an error. With
// Follow, a state not yet complete (its length and checksum) is read again
// at the next poll, a file that vanishes is forgotten, a file that is not
// a regular file (a FIFO) or not a state file is skipped as Read.Skipped
// and not read again, and so is the rest of a file after a damaged state.
type FileInput struct {
	paths   []string
	cfg     FileInputConfig
	offsets map[string]int64 // state files read: where their next state begins
	refused map[string]bool  // files skipped, not to be read again
	pass    *Files           // the files of the pass under way; nil between passes
	skipped []error          // files refused as the pass began, to say one by one
	passes  int
	last    bool // the pass under way is the last: the context is done
	ticker  *time.Ticker
}

var _ Input = (*FileInput)(nil)

// NewFileInput returns the input of paths: state files and directories.
func NewFileInput(paths []string, cfg *FileInputConfig) *FileInput {
	in := &FileInput{paths: paths, offsets: make(map[string]int64), refused: make(map[string]bool)}
	if cfg != nil {
		in.cfg = *cfg
	}
	if in.cfg.Poll <= 0 {
		in.cfg.Poll = DefaultPoll
	}
	in.cfg.Read.Growing = in.cfg.Follow
	return in
}

// Next implements Input. Between passes over the files, with Follow, it
// waits for the next poll; once ctx is done, it reads the directories a
// last time (regular files only, which do not block) and then ends. Read
// once, a ctx that ends is an error.
func (in *FileInput) Next(ctx context.Context, w *metrics.Window) (Read, error) {
	for {
		if len(in.skipped) > 0 {
			err := in.skipped[0]
			in.skipped = in.skipped[1:]
			return in.read(Read{Skipped: err}), nil
		}
		if in.pass != nil {
			rctx := ctx
			if in.last {
				rctx = context.WithoutCancel(ctx)
			}
			path, off, err := in.pass.Next(rctx, w)
			switch {
			case err == nil:
				in.offsets[path] = off
				return in.read(Read{State: true, Source: path}), nil
			case err == io.EOF:
				in.pass = nil
				if !in.cfg.Follow || in.last {
					return Read{Settled: math.MaxInt64, Final: true, Progress: End}, nil
				}
				return Read{Settled: math.MaxInt64, Progress: Current}, nil
			case ctx.Err() != nil && errors.Is(err, ctx.Err()):
				if !in.cfg.Follow {
					return Read{}, err
				}
				in.pass, in.last = nil, true // interrupted: read a last time
				continue
			case in.cfg.Follow && errors.Is(err, fs.ErrNotExist):
				continue // removed since the listing
			}
			in.refused[path] = true
			return in.read(Read{Skipped: err}), nil
		}
		if in.passes > 0 {
			if !in.cfg.Follow || in.last {
				return Read{Settled: math.MaxInt64, Final: true, Progress: End}, nil
			}
			if in.ticker == nil {
				in.ticker = time.NewTicker(in.cfg.Poll)
			}
			select {
			case <-ctx.Done():
				in.ticker.Stop()
				in.last = true
			case <-in.ticker.C:
			}
		}
		if err := in.begin(ctx); err != nil {
			return Read{}, err
		}
	}
}

// read completes r, read within a pass.
func (in *FileInput) read(r Read) Read {
	r.Settled, r.Final, r.Progress = math.MaxInt64, !in.cfg.Follow, Behind
	if in.pass != nil {
		if head, ok := in.pass.Head(); ok {
			r.Settled = head
		}
	}
	return r
}

// begin lists the files and starts a pass over those with states not read
// yet.
func (in *FileInput) begin(ctx context.Context) error {
	in.passes++
	if in.last {
		ctx = context.WithoutCancel(ctx)
	}
	files, err := stateFiles(in.paths)
	if err != nil {
		return err
	}
	if !in.cfg.Follow && len(files) == 0 {
		return fmt.Errorf("state: no %s files in %s", Ext, strings.Join(in.paths, ", "))
	}
	for f := range in.offsets {
		if _, found := slices.BinarySearch(files, f); !found {
			delete(in.offsets, f) // gone (retention clean-up)
			delete(in.refused, f)
		}
	}
	pass := NewFiles(&in.cfg.Read)
	for _, f := range files {
		off, read := in.offsets[f]
		if in.refused[f] {
			continue
		}
		if read {
			if fi, err := os.Stat(f); err == nil && fi.Size() == off {
				continue // nothing new
			}
		}
		switch err := pass.Add(ctx, f, off); {
		case err == nil || err == io.EOF && in.cfg.Follow:
			in.offsets[f] = off
		case err == io.EOF:
			in.skipped = append(in.skipped, fmt.Errorf("state: %s: no window state in the file: %w", f, metrics.ErrState))
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			if !in.cfg.Follow {
				return err
			}
			in.last, in.skipped = true, nil // interrupted: read a last time
			return in.begin(ctx)
		case in.cfg.Follow && errors.Is(err, fs.ErrNotExist):
			// deleted since the listing, or a dangling symlink
		default:
			in.refused[f] = true
			in.skipped = append(in.skipped, err)
		}
	}
	in.pass = pass
	return nil
}

// Done implements Input: files are not acknowledged.
func (in *FileInput) Done(context.Context, int64) error { return nil }

// Drop implements Input: files are not acknowledged.
func (in *FileInput) Drop(int64) {}

// stateFiles expands directories into their state files, and returns
// every file in name order.
func stateFiles(paths []string) ([]string, error) {
	var files []string
	for _, a := range paths {
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		for _, de := range ents {
			if !de.IsDir() && strings.HasSuffix(de.Name(), Ext) {
				files = append(files, filepath.Join(a, de.Name()))
			}
		}
	}
	slices.Sort(files)
	return files, nil
}
