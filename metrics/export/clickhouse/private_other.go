//go:build !unix

package clickhouse

import (
	"fmt"
	"io/fs"
	"os"
)

// checkPrivateDir checks that path is a directory, not a symbolic link.
// Owners are not checked on this system.
func checkPrivateDir(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("spill directory: %w", err)
	}
	if st.Mode()&fs.ModeSymlink != 0 || !st.IsDir() {
		return fmt.Errorf("%s: not a directory: %w", path, errNotPrivate)
	}
	return nil
}

// openPrivateFile opens the file name with flag (and perm, to create it)
// and checks that it is a regular file. Owners are not checked on this
// system.
func openPrivateFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if st, err := os.Lstat(name); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%v): %w", name, st.Mode().Type(), errNotPrivate)
	}
	return os.OpenFile(name, flag, perm)
}

// lockFile does nothing on this system: two sinks must not share a spill
// directory.
func lockFile(*os.File) (bool, error) { return true, nil }
