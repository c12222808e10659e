package capture_test

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
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

// TestAppendFrame checks that AppendFrame gives what append with a
// composite literal gives, into spare capacity (in place, overwriting what
// the element held) and past it (growing).
func TestAppendFrame(t *testing.T) {
	data := []byte{1, 2, 3}
	want := capture.Frame{Data: data, Time: -5, OrigLen: 1500, Link: decode.LinkRaw, Port: 7}
	stale := capture.Frame{Data: []byte{9}, Time: 1, OrigLen: 2, Link: decode.LinkEthernet, Port: 3}
	spare := []capture.Frame{stale, stale}[:1] // the spare element holds a stale frame
	for _, frames := range [][]capture.Frame{spare, {stale}, nil} {
		n, c := len(frames), cap(frames)
		got := capture.AppendFrame(frames, want.Data, want.Time, want.OrigLen, want.Link, want.Port)
		ref := append(frames[:n:n], want)
		if len(got) != n+1 || !reflect.DeepEqual(got, ref) {
			t.Fatalf("AppendFrame onto %d of cap %d = %+v, want %+v", n, c, got, ref)
		}
		if n < c && &got[0] != &frames[:1][0] {
			t.Errorf("AppendFrame onto %d of cap %d moved the frames", n, c)
		}
	}
}
