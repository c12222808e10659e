//go:build unix

package testfifo

import "syscall"

// Make makes a FIFO at path.
func Make(path string) error { return syscall.Mkfifo(path, 0o644) }
