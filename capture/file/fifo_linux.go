//go:build linux

package file

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openInput opens path for reading without blocking: a named pipe is
// opened with O_NONBLOCK, which open(2) of a pipe without a writer would
// otherwise wait for, where nothing could interrupt it. Call waitInput
// before reading.
func openInput(path string) (*os.File, error) {
	flag := os.O_RDONLY
	if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		flag |= unix.O_NONBLOCK
	}
	return os.OpenFile(path, flag, 0)
}

// waitInput waits, if f is a named pipe, until a writer has sent bytes or
// has come and gone; then reads no longer see the end of the pipe merely
// for want of a writer. The wait is in the runtime's poller, so closing f
// ends it with an error (Linux reports no hang-up to a reader that has seen
// no writer yet). Other files return at once.
func waitInput(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds[:], 0)
		if err == unix.EINTR {
			return false
		}
		if err != nil {
			perr = err
			return true
		}
		return n > 0
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("waiting for a writer of the pipe: %w", err)
	}
	return nil
}

// stdinPipe returns a path that opens anew the pipe stdin reads, when stdin
// is an *os.File of a pipe, and "" otherwise. Read through its own file
// description, opened without blocking, the pipe is in the runtime's
// poller, so that Close ends a read that waits for a silent writer, as it
// does for a named pipe; standard input itself stays in blocking mode for
// whoever else reads it.
func stdinPipe(stdin io.Reader) string {
	f, ok := stdin.(*os.File)
	if !ok {
		return ""
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return ""
	}
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
}
