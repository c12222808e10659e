//go:build unix

package clickhouse

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkPrivateDir checks that path is a directory, not a symbolic link,
// of this user, that no other user may write.
func checkPrivateDir(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("spill directory: %w", err)
	}
	return checkPrivate(path, st, true)
}

// openPrivateFile opens the file name with flag (and perm, to create it)
// without following a symbolic link, and checks that it is a regular file
// of this user that no other user may write.
func openPrivateFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s: a symbolic link: %w", name, errNotPrivate)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = checkPrivate(name, st, false)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkPrivate checks what st says of path: a directory (dir) or regular
// file, of this user, that no other user may write.
func checkPrivate(path string, st fs.FileInfo, dir bool) error {
	uid := -1
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		uid = int(sys.Uid)
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s: a symbolic link: %w", path, errNotPrivate)
	case dir && !st.IsDir():
		return fmt.Errorf("%s: not a directory", path)
	case !dir && !st.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file (%v): %w", path, st.Mode().Type(), errNotPrivate)
	case uid != os.Geteuid():
		return fmt.Errorf("%s: owned by uid %d, not by this user (uid %d): %w", path, uid, os.Geteuid(), errNotPrivate)
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s: other users may write it (mode %04o; chmod go-w): %w", path, st.Mode().Perm(), errNotPrivate)
	}
	return nil
}

// lockFile takes an exclusive lock on f without waiting: false if another
// process holds one. The lock lasts until f is closed.
func lockFile(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: lock: %w", f.Name(), err)
	}
	return true, nil
}
