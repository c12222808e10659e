package afxdp

import (
	"os"
	"strings"
	"testing"
)

func TestConfigDefaults(t *testing.T) {
	got, err := (*Config)(nil).withDefaults()
	if err != nil {
		t.Fatalf("nil config: %v", err)
	}
	want := Config{FrameSize: 4096, NumFrames: 16384, RingSize: 8192, Mode: "auto", ZeroCopy: "auto", SnapLen: 512}
	if got.FrameSize != want.FrameSize || got.NumFrames != want.NumFrames || got.RingSize != want.RingSize ||
		got.Mode != want.Mode || got.ZeroCopy != want.ZeroCopy || got.SnapLen != want.SnapLen || got.All || len(got.Queues) != 0 {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	in := &Config{Queues: []int{2, 0}, FrameSize: 2048}
	got, err = in.withDefaults()
	if err != nil {
		t.Fatalf("%+v: %v", in, err)
	}
	got.Queues[0] = 9
	if in.Queues[0] != 2 || in.NumFrames != 0 {
		t.Errorf("withDefaults changed its receiver: %+v", in)
	}
}

func TestConfigInvalid(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{FrameSize: 1024}, "frame size 1024"},
		{Config{FrameSize: 3000}, "frame size 3000"},
		{Config{FrameSize: 2 * os.Getpagesize()}, "frame size"},
		{Config{NumFrames: 1000}, "frame count 1000"},
		{Config{NumFrames: 1}, "frame count 1"},
		{Config{RingSize: 100}, "ring size 100"},
		{Config{RingSize: -2}, "ring size -2"},
		{Config{Mode: "native"}, `mode "native"`},
		{Config{ZeroCopy: "yes"}, `zero-copy "yes"`},
		{Config{SnapLen: 63}, "snap length 63: want 64 to 3840"},
		{Config{SnapLen: 3841}, "snap length 3841: want 64 to 3840"},
		{Config{SnapLen: 1793, FrameSize: 2048}, "snap length 1793: want 64 to 1792"},
		{Config{Queues: []int{-1}}, "queue -1"},
		{Config{Queues: []int{70000}}, "queue 70000"},
		{Config{Queues: []int{1, 1}}, "queue 1 listed twice"},
	} {
		_, err := c.cfg.withDefaults()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.cfg, err, c.want)
		}
	}
}
