package capture

import (
	"context"
	"errors"
	"io"
	"os"
)

// Each reads src until it ends and calls fn with every batch that holds
// frames, also one that comes with an error. It returns nil when src ends
// (io.EOF or os.ErrClosed), ctx.Err() when ctx is done between batches, and
// otherwise the first error of src or fn. b is the batch src fills; its
// frames are valid only during fn.
func Each(ctx context.Context, src Source, b *Batch, fn func(*Batch) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := src.Next(b)
		if len(b.Frames) > 0 {
			if ferr := fn(b); ferr != nil {
				return ferr
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrClosed):
			return nil
		default:
			return err
		}
	}
}
