package html

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File is a sink that writes a [Page] to a file. Each Flush that follows
// new windows writes the whole page afresh under a temporary name and
// renames it over the file, so a reader never sees half a page: a replay
// or a capture writes it once, when it ends and flushes, and
// `merge --follow`, which flushes as windows arrive, keeps it current.
// A File is not safe for concurrent use.
type File struct {
	page  *Page
	path  string
	dirty bool // windows were added since the last page was written
}

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
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+filepath.Base(f.path)+".*")
	if err != nil {
		return fmt.Errorf("html: %w", err)
	}
	_, err = f.page.WriteTo(tmp)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("html: write %s: %w", f.path, err)
	}
	f.dirty = false
	return nil
}
