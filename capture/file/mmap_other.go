//go:build !unix

package file

import "os"

// mapFile reports that files are not mapped on this platform: they are read.
func mapFile(*os.File, int64) ([]byte, bool) { return nil, false }

// unmapFile is never called on this platform.
func unmapFile([]byte) error { return nil }
