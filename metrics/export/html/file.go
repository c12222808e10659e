package html

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rocescope/rocescope/metrics/export"
)

// File is a sink that writes a [Page] to a file. Each Flush that follows
// new windows writes the whole page afresh under a temporary name and
// renames it over the file, so a reader never sees half a page: a replay
// or a capture writes it once, when it ends and flushes, and
// `merge --follow`, which flushes as windows arrive, keeps it current.
// Sync (export.Syncer) also makes the page durable, as a merge needs before
// it commits what it read. A File is not safe for concurrent use.
type File struct {
	page   *Page
	path   string
	dirty  bool // windows were added since the last page was written
	synced bool // the page last written is durable
}

var _ export.Syncer = (*File)(nil)

// NewFile returns a sink writing the page to path. The first Flush writes
// the page even when no window came, so that the file says so.
func NewFile(path string, o *Options) (*File, error) {
	p, err := NewPage(o)
	if err != nil {
		return nil, err
	}
	return &File{page: p, path: path, dirty: true}, nil
}

// Flush writes the page if windows were added since it was last written.
func (f *File) Flush() error {
	if !f.dirty {
		return nil
	}
	return f.write(false)
}

// Sync writes the page if windows were added since it was last written,
// and makes it durable: the page reaches the disk before it is renamed over
// the file, and the rename after it (the directory is synced).
func (f *File) Sync(context.Context) error {
	switch {
	case f.dirty:
		return f.write(true)
	case f.synced:
		return nil
	}
	// Written by Flush, not durable yet.
	err := export.SyncPath(f.path)
	if err == nil {
		err = export.SyncPath(filepath.Dir(f.path))
	}
	if err != nil {
		return fmt.Errorf("html: sync %s: %w", f.path, err)
	}
	f.synced = true
	return nil
}

// write writes the page under a temporary name and renames it over the
// file; durably when sync is set.
func (f *File) write(sync bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+filepath.Base(f.path)+".*")
	if err != nil {
		return fmt.Errorf("html: %w", err)
	}
	_, err = f.page.WriteTo(tmp)
	err = errors.Join(err, tmp.Chmod(0o644))
	if sync && err == nil {
		err = tmp.Sync()
	}
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if sync && err == nil {
		err = export.SyncPath(filepath.Dir(f.path))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("html: write %s: %w", f.path, err)
	}
	f.dirty, f.synced = false, sync
	return nil
}
