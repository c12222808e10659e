package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Target
	}{
		{"kafka://k1:9093,k2/states", &Target{Brokers: []string{"k1:9093", "k2:9092"}, Topic: "states"}},
		{"kafka://127.0.0.1:1,127.0.0.1:2/s?max-record-bytes=65536", &Target{Brokers: []string{"127.0.0.1:1", "127.0.0.1:2"}, Topic: "s", MaxRecordBytes: 65536}},
		{"kafka://k1/s?delivery-timeout=5s", &Target{Brokers: []string{"k1:9092"}, Topic: "s", DeliveryTimeout: 5 * time.Second}},
		{"kafka://k1/s?delivery-timeout=5ms", nil},
		{"kafka://k1/", nil},
		{"kafka://k1/a/b", nil},
		{"kafka://k1,,k2/s", nil},
		{"kafka://k1/s?max-record-bytes=10", nil},
		{"kafka://k1/s?linger=1s", nil},
		{"kafka:/k1/s", nil},
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
