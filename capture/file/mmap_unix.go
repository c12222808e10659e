//go:build unix

package file

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps size bytes of f read-only. ok is false when the file cannot
// be mapped; the caller then reads it instead.
func mapFile(f *os.File, size int64) (data []byte, ok bool) {
	if size <= 0 || int64(int(size)) != size {
		return nil, false
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, false
	}
	// Advice only: a failure changes nothing but speed.
	_ = unix.Madvise(data, unix.MADV_SEQUENTIAL)
	return data, true
}

// unmapFile releases a mapping made by mapFile.
func unmapFile(data []byte) error { return unix.Munmap(data) }
