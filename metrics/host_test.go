package metrics

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckHost: the host names reports and state files may carry, and
// those that would be terminal controls, a spreadsheet formula, two hosts
// in a comma-joined list, or too long a file name.
func TestCheckHost(t *testing.T) {
	for _, h := range []string{"cap1", "cap-1.example.com", "rack7/cap_2", "ホスト", "a=b", strings.Repeat("h", MaxHost)} {
		if err := CheckHost(h); err != nil {
			t.Errorf("CheckHost(%q): %v, want nil", h, err)
		}
	}
	for _, h := range []string{"", "cap 1", "cap\t1", "a,b", "\x1b[31mred", "cap\u202e1", "cap\xff", "=SUM(A1)", "+1", "-rf", "@x",
		strings.Repeat("h", MaxHost+1)} {
		if err := CheckHost(h); !errors.Is(err, ErrHost) {
			t.Errorf("CheckHost(%q): %v, want ErrHost", h, err)
		}
	}
}
