//go:build !unix

package file

// cpuTime returns 0: this platform's CPU time is not read.
func cpuTime() int64 { return 0 }
