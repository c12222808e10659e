package capture_test

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/rocescope/rocescope/capture"
)

// scripted is a source that returns prepared batch sizes and errors.
type scripted struct {
	sizes []int
	errs  []error
	calls int
}

func (s *scripted) Next(b *capture.Batch) error {
	i := s.calls
	s.calls++
	b.Frames = b.Frames[:s.sizes[i]]
	return s.errs[i]
}
func (s *scripted) Stats() capture.Stats { return capture.Stats{} }
func (s *scripted) Close() error         { return nil }

func TestEach(t *testing.T) {
	damage := errors.New("damaged")
	stop := errors.New("stop")
	for _, c := range []struct {
		name    string
		sizes   []int
		errs    []error
		fnErr   error
		want    error
		batches []int // sizes fn saw
	}{
		{"frames then EOF", []int{3, 0, 2, 0}, []error{nil, nil, nil, io.EOF}, nil, nil, []int{3, 2}},
		{"frames with EOF", []int{3, 1}, []error{nil, io.EOF}, nil, nil, []int{3, 1}},
		{"closed", []int{2, 0}, []error{nil, os.ErrClosed}, nil, nil, []int{2}},
		{"frames before damage", []int{2, 1}, []error{nil, damage}, nil, damage, []int{2, 1}},
		{"fn fails", []int{2, 2}, []error{nil, nil}, stop, stop, []int{2}},
	} {
		src := &scripted{sizes: c.sizes, errs: c.errs}
		var saw []int
		err := capture.Each(context.Background(), src, capture.NewBatch(4), func(b *capture.Batch) error {
			saw = append(saw, len(b.Frames))
			return c.fnErr
		})
		if !errors.Is(err, c.want) || err != nil && c.want == nil || len(saw) != len(c.batches) {
			t.Errorf("%s: Each = %v after batches %v; want %v after %v", c.name, err, saw, c.want, c.batches)
			continue
		}
		for i := range saw {
			if saw[i] != c.batches[i] {
				t.Errorf("%s: batches %v, want %v", c.name, saw, c.batches)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src := &scripted{sizes: []int{1}, errs: []error{nil}}
	if err := capture.Each(ctx, src, capture.NewBatch(4), func(*capture.Batch) error { return nil }); !errors.Is(err, context.Canceled) || src.calls != 0 {
		t.Errorf("Each with a done context = %v after %d calls, want context.Canceled before any", err, src.calls)
	}
}
