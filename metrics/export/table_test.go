package export

import (
	"bytes"
	"fmt"
	"github.com/google/go-cmp/cmp"
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

// TestTableEventsWrapped: event lines fit the width, continuing on
// indented lines; an incast from fewer addresses than flows says so, a
// retransmission that counts later episodes in says so, an ongoing event
// says so, and the events --max-events left out are counted by kind.
func TestTableEventsWrapped(t *testing.T) {
	a := decode.AddrFrom4([4]byte{10, 0, 0, 1})
	b := decode.AddrFrom4([4]byte{10, 0, 0, 2})
	const start = 1_700_000_000e9
	r := &report.Report{Window: &metrics.Window{Start: start, Length: 1e9, Hosts: []string{"h"}}}
	r.Events = []report.Event{
		{Kind: report.EventIncast, Start: start + 5e6, End: start + 7e6, Ongoing: true,
			Incast: &report.Incast{Dst: b, SenderCount: 6, Sources: 4, PeakBPS: 85e9, ECNCE: 12, CNP: 3}},
		{Kind: report.EventRetransmission, Start: start + 1_500, End: start + 9e6,
			Retransmission: &report.Retransmission{Flow: report.Flow{Key: metrics.FlowKey{Src: a, Dst: b, DQP: 0xabcdef}},
				Cause: metrics.CauseNAK, NAKCode: 1, FirstPSN: 7, Resent: 30, StallNS: 2_500, Merged: true}},
	}
	r.EventsOmitted[report.EventRetransmission] = 250
	var out bytes.Buffer
	if err := NewTable(&out, &TableOptions{Width: 80}).Write(r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	want := []string{
		"! 22:13:20.005000 incast → 10.0.0.2  6 senders  peak 85.0 Gb/s over 2ms  CE 12",
		"    CNP 3  from 4 addresses  ongoing",
		"! 22:13:20.000001 retransmission 10.0.0.1 → 10.0.0.2  QP 0xabcdef  PSN 7",
		"    nak (invalid request): 30 resent after 2.5µs stall",
		"    (later episodes counted in)",
		"! not listed (--max-events): 250 retransmission",
	}
	if diff := cmp.Diff(want, lines[1:1+len(want)]); diff != "" {
		t.Errorf("event lines (-want +got):\n%s", diff)
	}
}
