package clickhouse

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Target
	}{
		{"clickhouse://ch1:9123/rs", &Target{Addr: "ch1:9123", Database: "rs"}},
		{"clickhouse://ch1/rs_2?spill=/var/spool/rs", &Target{Addr: "ch1:8123", Database: "rs_2", Spill: "/var/spool/rs"}},
		{"clickhouse://[::1]:8124/rs?ttl=30d", &Target{Addr: "[::1]:8124", Database: "rs", TTL: 30 * 24 * time.Hour}},
		{"clickhouse://ch1/rs?ttl=30", nil},
		{"clickhouse://ch1/rs?ttl=0d", nil},
		{"clickhouse://ch1/rs?ttl=12h", nil},
		{"clickhouse://ch1/rs?spil=/x", nil},
		{"clickhouse://ch1:8123/", nil},
		{"clickhouse://ch1:8123/a;drop", nil},
		{"clickhouse:///rs", nil},
		{"http://ch1:8123/rs", nil},
	} {
		got, err := ParseURL(tc.in)
		if tc.want == nil {
			if !errors.Is(err, ErrTarget) {
				t.Errorf("ParseURL(%q): %v, want ErrTarget", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseURL(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

// TestDefaultSpillDir: the spill directory is the service's state
// directory, else the user's, never a shared temporary directory.
func TestDefaultSpillDir(t *testing.T) {
	tg := &Target{Addr: "[::1]:8124", Database: "rs"}
	for _, tc := range []struct{ state, xdg, home, want string }{
		{"/var/lib/rocescope:/other", "/x", "/home/u", "/var/lib/rocescope/rocescope/clickhouse/__1_8124-rs"},
		{"", "/x/state", "/home/u", "/x/state/rocescope/clickhouse/__1_8124-rs"},
		{"", "", "/home/u", "/home/u/.local/state/rocescope/clickhouse/__1_8124-rs"},
	} {
		t.Setenv("STATE_DIRECTORY", tc.state)
		t.Setenv("XDG_STATE_HOME", tc.xdg)
		t.Setenv("HOME", tc.home)
		got, err := DefaultSpillDir(tg)
		if err != nil || got != tc.want {
			t.Errorf("STATE_DIRECTORY=%q XDG_STATE_HOME=%q HOME=%q: %q, %v; want %q", tc.state, tc.xdg, tc.home, got, err, tc.want)
		}
	}
	t.Setenv("STATE_DIRECTORY", "")
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "")
	if got, err := DefaultSpillDir(tg); err == nil || !strings.Contains(err.Error(), "?spill=DIR") {
		t.Errorf("without a home: %q, %v; want an error that asks for ?spill=DIR", got, err)
	}
}
