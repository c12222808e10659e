package capture_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/rocescope/rocescope/capture"
)

func TestInterfaceError(t *testing.T) {
	for _, c := range []struct {
		err  *capture.InterfaceError
		want string
		is   error
	}{
		{&capture.InterfaceError{Iface: "nonexist0", Err: capture.ErrInterfaceNotFound}, "capture: interface nonexist0 not found", capture.ErrInterfaceNotFound},
		{&capture.InterfaceError{Iface: "vb0", Err: capture.ErrInterfaceGone}, "capture: interface vb0 disappeared", capture.ErrInterfaceGone},
		{&capture.InterfaceError{Iface: "eth1", Err: os.ErrPermission}, "capture: interface eth1: permission denied", os.ErrPermission},
	} {
		wrapped := fmt.Errorf("afxdp: queue 0: %w", c.err)
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if !errors.Is(wrapped, c.is) {
			t.Errorf("errors.Is(%q, %v) = false", wrapped, c.is)
		}
		var ie *capture.InterfaceError
		if !errors.As(wrapped, &ie) || ie.Iface != c.err.Iface {
			t.Errorf("errors.As(%q) did not find the interface %s", wrapped, c.err.Iface)
		}
	}
	if errors.Is(&capture.InterfaceError{Iface: "x", Err: capture.ErrInterfaceGone}, capture.ErrInterfaceNotFound) {
		t.Error("a disappeared interface matches ErrInterfaceNotFound")
	}
}
