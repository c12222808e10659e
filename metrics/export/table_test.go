package export

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

func TestTableUnits(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{formatRate(0), "0 Mb/s"},
		{formatRate(520_770), "0.521 Mb/s"},
		{formatRate(15_312_000), "15.3 Mb/s"},
		{formatRate(999_400_000), "999 Mb/s"},
		{formatRate(999_600_000), "1.00 Gb/s"},
		{formatRate(137.86e9), "138 Gb/s"},
		{formatRate(9.996e9), "10.0 Gb/s"},
		{sig3(0.0033331), "0.00333"},
		{sig3(4.571), "4.57"},
		{FormatBytes(999), "999 B"},
		{FormatBytes(1000), "1.00 kB"},
		{FormatBytes(827_200), "827 kB"},
		{FormatBytes(999_600), "1.00 MB"},
		{FormatBytes(514_800_000), "515 MB"},
		{micros(676_290), "676.29"},
		{micros(1_217_201_846), "1217201.85"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestTableLongAddresses: the hosts of a merge wrap within the width, and
// flows whose addresses do not fit beside the
// figures at 80 columns get two lines each (addresses, then figures with
// hex QPs); at 132 they fit on one line, and the room left takes optional columns.
func TestTableLongAddresses(t *testing.T) {
	a := decode.AddrFrom16(netip.MustParseAddr("fe80::1234:5678:9abc:def0").As16())
	b := decode.AddrFrom16(netip.MustParseAddr("fe80::1234:5678:9abc:def1").As16())
	f := report.FlowReport{FlowRecord: metrics.FlowRecord{Key: metrics.FlowKey{Src: a, Dst: b, DQP: 0x11}}, Rate: 40e9, Elephant: true}
	f.C[metrics.FlowBytes] = 5e9
	var hosts []string
	for i := range 12 {
		hosts = append(hosts, fmt.Sprintf("capture-host-%02d", i))
	}
	r := &report.Report{Window: &metrics.Window{Start: 1_700_000_000e9, Length: 1e9, Hosts: hosts}, Top: []report.FlowReport{f}}
	for _, tc := range []struct {
		width int
		rows  []string
	}{
		{80, []string{
			"  src → dst",
			"  dqp      sqp          bytes       rate    packets     msgs     CNP flags",
			"  fe80::1234:5678:9abc:def0 → fe80::1234:5678:9abc:def1",
			"  0x000011 -          5.00 GB  40.0 Gb/s          0        0       0 E",
		}},
		{132, []string{
			"  src                       dst                       dqp      sqp          bytes       rate    packets     msgs     CNP flags",
			"  fe80::1234:5678:9abc:def0 fe80::1234:5678:9abc:def1 0x000011 -          5.00 GB  40.0 Gb/s          0        0       0 E",
		}},
	} {
		var out bytes.Buffer
		if err := NewTable(&out, &TableOptions{Width: tc.width}).Write(r); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n\n"), "\n")
		if !strings.HasPrefix(lines[0], "window 2023-11-14T22:13:20Z  1s  host capture-host-00,  capture-host-01,") {
			t.Errorf("width %d: header %q", tc.width, lines[0])
		}
		for _, l := range lines {
			if utf8.RuneCountInString(l) > tc.width {
				t.Errorf("width %d: line too long: %q", tc.width, l)
			}
		}
		if got := strings.Join(lines[len(lines)-len(tc.rows):], "\n"); got != strings.Join(tc.rows, "\n") {
			t.Errorf("width %d: flow rows\n%s\nwant\n%s", tc.width, got, strings.Join(tc.rows, "\n"))
		}
	}
}
