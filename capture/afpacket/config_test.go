package afpacket

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestValidateDefaults(t *testing.T) {
	for _, cfg := range []*Config{nil, {}} {
		s, err := validate(cfg, 4096)
		if err != nil {
			t.Fatal(err)
		}
		want := Config{Sockets: 1, BlockSize: 4 << 20, NumBlocks: 32, FrameSize: 2048, SnapLen: 262144,
			Fanout: "hash", BlockTimeout: 10 * time.Millisecond}
		if s.Config != want || s.fanoutMode != 0 {
			t.Errorf("validate(%v) = %+v mode %d, want %+v mode 0", cfg, s.Config, s.fanoutMode, want)
		}
	}
	for sockets, blocks := range map[int]int{8: 32, 16: 16, 32: 8, 64: 8} {
		if s, err := validate(&Config{Sockets: sockets}, 4096); err != nil || s.NumBlocks != blocks {
			t.Errorf("%d sockets: %d blocks per ring (%v), want %d", sockets, s.NumBlocks, err, blocks)
		}
	}
	cfg := &Config{Sockets: 3, Fanout: "qm", All: true}
	s, err := validate(cfg, 4096)
	if err != nil || s.fanoutMode != 5 || s.Sockets != 3 || !s.All {
		t.Errorf("validate(%+v) = %+v, %v", cfg, s, err)
	}
	if cfg.BlockSize != 0 {
		t.Error("validate modified its argument")
	}
}

func TestValidateErrors(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{Sockets: -1}, "Sockets"},
		{Config{Sockets: 1025}, "Sockets"},
		{Config{BlockSize: 2048}, "BlockSize"},
		{Config{BlockSize: 3 * 4096}, "BlockSize"},
		{Config{NumBlocks: -1}, "NumBlocks"},
		{Config{FrameSize: 100}, "FrameSize"},
		{Config{FrameSize: 48}, "FrameSize"},
		{Config{BlockSize: 8192, FrameSize: 8192 * 2}, "FrameSize"},
		{Config{SnapLen: -1}, "SnapLen"},
		{Config{BlockTimeout: time.Microsecond}, "BlockTimeout"},
		{Config{Fanout: "rollover"}, "Fanout"},
	} {
		_, err := validate(&c.cfg, 4096)
		if err == nil || !strings.Contains(err.Error(), "afpacket: "+c.field+" ") {
			t.Errorf("validate(%+v) = %v, want an error about %s", c.cfg, err, c.field)
		}
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "AF_PACKET TPACKET_V3, 1 socket, filter roce, ring 32 x 4096 KiB per socket"},
		{Config{Sockets: 2, All: true, NumBlocks: 8, BlockSize: 1 << 20}, "AF_PACKET TPACKET_V3, 2 sockets, fanout hash, filter none (all frames), ring 8 x 1024 KiB per socket"},
	} {
		s, err := validate(&c.cfg, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.describe(); got != c.want {
			t.Errorf("describe = %q, want %q", got, c.want)
		}
	}
}

func TestOpError(t *testing.T) {
	err := error(&OpError{Op: "socket", Iface: "eth1", Socket: 2, Err: syscall.EPERM})
	if !errors.Is(err, os.ErrPermission) || !errors.Is(err, syscall.EPERM) {
		t.Errorf("%v does not unwrap to EPERM", err)
	}
	want := "afpacket: eth1: socket 2: socket: operation not permitted (capturing needs root or CAP_NET_RAW)"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	other := &OpError{Op: "bind", Iface: "eth1", Err: syscall.ENODEV}
	if strings.Contains(other.Error(), "CAP_NET_RAW") {
		t.Errorf("%q blames privileges", other)
	}
}
