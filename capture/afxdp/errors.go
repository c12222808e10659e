package afxdp

import (
	"errors"
	"os"
	"strconv"
)

// OpError is a step of opening a capture that the kernel refused: loading
// or attaching the XDP program, or making or binding a queue's socket.
type OpError struct {
	Op    string // what was done: "load XDP program", "copy-mode socket", ...
	Iface string // the interface
	Queue int    // the queue, or -1 for a step on the interface as a whole
	Err   error  // the underlying error, often wrapping a syscall.Errno
}

// Error says what failed where. For a permission error it says what
// capturing needs instead of the underlying error's text, which for a
// BPF call can be long and misleading (it suggests raising the memlock
// limit); Unwrap still returns it.
func (e *OpError) Error() string {
	msg := "afxdp: " + e.Iface
	if e.Queue >= 0 {
		msg += ": queue " + strconv.Itoa(e.Queue)
	}
	msg += ": " + e.Op + ": "
	if errors.Is(e.Err, os.ErrPermission) {
		return msg + "permission denied: capturing with AF_XDP needs root, or CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW"
	}
	return msg + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *OpError) Unwrap() error { return e.Err }
