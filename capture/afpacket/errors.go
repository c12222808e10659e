package afpacket

import (
	"errors"
	"os"
	"strconv"
)

// OpError is a failed system call on one of a group's sockets.
type OpError struct {
	Op     string // what was done: "socket", "bind", "setsockopt PACKET_RX_RING", "poll", ...
	Iface  string // the interface
	Socket int    // the socket's index in the group (its Frame.Port)
	Err    error  // the underlying error, usually a syscall.Errno
}

// Error says what failed where; for a permission error it adds that
// capturing needs root or CAP_NET_RAW.
func (e *OpError) Error() string {
	msg := "afpacket: " + e.Iface + ": socket " + strconv.Itoa(e.Socket) + ": " + e.Op + ": " + e.Err.Error()
	if errors.Is(e.Err, os.ErrPermission) {
		msg += " (capturing needs root or CAP_NET_RAW)"
	}
	return msg
}

// Unwrap returns e.Err.
func (e *OpError) Unwrap() error { return e.Err }
