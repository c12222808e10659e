package clickhouse

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Target
	}{
		{"clickhouse://ch1:9123/rs", &Target{Addr: "ch1:9123", Database: "rs", Spill: filepath.Join(os.TempDir(), "rocescope-clickhouse-ch1_9123-rs")}},
		{"clickhouse://ch1/rs_2?spill=/var/spool/rs", &Target{Addr: "ch1:8123", Database: "rs_2", Spill: "/var/spool/rs"}},
		{"clickhouse://[::1]:8124/rs", &Target{Addr: "[::1]:8124", Database: "rs", Spill: filepath.Join(os.TempDir(), "rocescope-clickhouse-__1_8124-rs")}},
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
