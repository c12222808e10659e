package afxdp

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

func TestOpError(t *testing.T) {
	chain := fmt.Errorf("map create: %w (MEMLOCK may be too low, consider rlimit.RemoveMemlock)", syscall.EPERM)
	for _, c := range []struct {
		err  *OpError
		want string
	}{
		{&OpError{Op: "load XDP program", Iface: "eth1", Queue: -1, Err: chain},
			"afxdp: eth1: load XDP program: permission denied: capturing with AF_XDP needs root, or CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW"},
		{&OpError{Op: "copy-mode socket", Iface: "eth1", Queue: 3, Err: fmt.Errorf("bind: %w", syscall.EBUSY)},
			"afxdp: eth1: queue 3: copy-mode socket: bind: device or resource busy"},
		{&OpError{Op: "zero-copy socket", Iface: "eth1", Queue: 0, Err: fmt.Errorf("bind: %w", syscall.EACCES)},
			"afxdp: eth1: queue 0: zero-copy socket: permission denied: capturing with AF_XDP needs root, or CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if !errors.Is(fmt.Errorf("wrapped: %w", c.err), c.err.Err) {
			t.Errorf("%q does not unwrap to %v", c.err, c.err.Err)
		}
	}
	if !errors.Is(&OpError{Err: chain}, os.ErrPermission) {
		t.Error("a permission OpError is not os.ErrPermission")
	}
}
