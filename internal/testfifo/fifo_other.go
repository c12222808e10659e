//go:build !unix

package testfifo

import "errors"

// Make makes a FIFO at path; this system has none (errors.ErrUnsupported).
func Make(path string) error { return errors.ErrUnsupported }
