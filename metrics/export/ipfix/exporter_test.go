package ipfix

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocescope/rocescope/capture/synth"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// synthReports returns the reports of a synthetic trace of many flows over
// several windows, IPv4 and IPv6, with CNPs, NAKs and retransmissions.
func synthReports(t testing.TB, packets, conns int) []*report.Report {
	t.Helper()
	src, err := synth.New(&synth.Config{Seed: 7, Packets: packets, Flows: conns, Duration: 3 * time.Second,
		LossProb: 0.005, ECNCEProb: 0.02, RNRProb: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &metrics.Config{Workers: 2, Host: "h"}
	rp, err := report.NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*report.Report
	for _, w := range enginetest.Run(t, cfg, src) {
		rs = append(rs, rp.Build(w))
	}
	return rs
}

// TestExportSynth exports a synthetic trace of 3000 connections over
// three windows and decodes it with goflow2's decoder: every flow of every
// window is one record with every element right.
func TestExportSynth(t *testing.T) {
	rs := synthReports(t, 60000, 3000)
	var flows, cnps, sqpUnknown, v6 int
	for _, r := range rs {
		for i := range r.Window.Flows {
			f := &r.Window.Flows[i]
			flows++
			if r.FlowCNP(i) > 0 {
				cnps++
			}
			if !f.SQPKnown {
				sqpUnknown++
			}
			if f.Key.Src.Kind() == decode.AddrIPv6 {
				v6++
			}
		}
	}
	if len(rs) < 3 || flows < 6000 || cnps == 0 || sqpUnknown == 0 || v6 == 0 {
		t.Fatalf("fixture too small: %d windows, %d flows, %d with CNPs, %d without source QP, %d IPv6", len(rs), flows, cnps, sqpUnknown, v6)
	}
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			o := Options{PEN: 4242, Domain: 9, MaxMessageBytes: 1400, RoCEPort: 4791}
			e, c := newRecorded(t, network, &o)
			for _, r := range rs {
				if err := e.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			checkExport(t, c.msgs, rs, e.o)
			if st := e.Stats(); st.Records != uint64(flows) || st.LostRecords != 0 || st.Messages != uint64(len(c.msgs)) {
				t.Errorf("stats %+v, want %d records in %d messages", st, flows, len(c.msgs))
			}
			// Over TCP each template is sent once per connection.
			ms, _ := goflowDecode(t, c.msgs)
			sent := map[uint16]int{}
			for _, m := range ms {
				for _, id := range m.templates {
					sent[id]++
				}
			}
			for id, n := range sent {
				if network == "tcp" && n != 1 {
					t.Errorf("tcp: template %d sent %d times, want once", id, n)
				}
				if network == "udp" && n < 2 {
					t.Errorf("udp: template %d sent %d times over %d messages, want a refresh every %d", id, n, len(ms), DefaultTemplateRefreshMessages)
				}
			}
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// handWindow returns a window of hand-made flows of every address kind,
// with and without source QPs, and a report of it with no CNPs.
func handWindow() *report.Report {
	w := &metrics.Window{Start: 1_700_000_000_000_000_000, Length: 1e9}
	w.From, w.To = w.Start+1234, w.Start+999_999_999
	gid := func(b byte) decode.Addr { return decode.AddrFromGID([16]byte{0xfe, 0x80, 15: b}) }
	v6 := func(b byte) decode.Addr { return decode.AddrFrom16([16]byte{0xfd, 0, 15: b}) }
	v4 := func(b byte) decode.Addr { return decode.AddrFrom4([4]byte{10, 0, 0, b}) }
	keys := []metrics.FlowKey{
		{Src: v4(1), Dst: v4(2), DQP: 0xffffff},
		{Src: v6(1), Dst: v6(2), DQP: 1},
		{Src: gid(1), Dst: gid(2), DQP: 0x123456},
		{Src: decode.AddrFromLID(7), Dst: decode.AddrFromLID(0xbfff), DQP: 2},
		{Src: v4(3), Dst: v4(4), DQP: 3},
	}
	for i, k := range keys {
		f := metrics.FlowRecord{Key: k, Sport: uint16(49152 + i), SQP: uint32(0x10 + i), SQPKnown: i%2 == 0}
		for c := range f.C {
			f.C[c] = uint64(1+i)<<40 + uint64(c)
		}
		f.Ops.Add(0x0a, 5)   // RC WRITE Only
		f.Ops.Add(0x11, 9)   // RC Acknowledge
		f.Ops.Add(0x64, 1)   // UD SEND Only
		f.Ops.Add(0x81, 2)   // CNP
		f.Ops.Add(0x0c, 1)   // READ request
		f.Ops.Add(0x2e, 1)   // UC: no such operation
		f.Ops.Add(0xa4, 1)   // XRC SEND Only
		f.Ops.Add(0x50, 1)   // RD READ response Only
		f.Ops.Add(0x13, 100) // beyond 8 opcodes: other
		w.Flows = append(w.Flows, f)
	}
	return &report.Report{Window: w}
}

// TestExportEveryKind: flows of every address kind, with and without their
// source QP, decode to the elements the docs list, and a flow whose two
// addresses differ in kind is counted, not sent.
func TestExportEveryKind(t *testing.T) {
	r := handWindow()
	bad := metrics.FlowRecord{Key: metrics.FlowKey{Src: decode.AddrFrom4([4]byte{1, 2, 3, 4}), Dst: decode.AddrFromLID(1)}}
	o := Options{MaxMessageBytes: minMessageBytes()}
	e, c := newRecorded(t, "udp", &o)
	if err := e.Write(r); err != nil {
		t.Fatal(err)
	}
	checkExport(t, c.msgs, []*report.Report{r}, e.o)
	r.Window.Flows = append(r.Window.Flows, bad)
	r.Window.From++ // another window start: the records are told apart
	c.msgs = nil
	if err := e.Write(r); err != nil {
		t.Fatal(err)
	}
	if got := e.Stats().Unexportable; got != 1 {
		t.Errorf("unexportable %d, want 1", got)
	}
	if err := e.Close(); err == nil || !strings.Contains(err.Error(), "1 flow records have addresses of two kinds") {
		t.Errorf("Close = %v, want the unexportable flow named", err)
	}
}

// TestTemplateRefresh: over UDP a template is sent again before its next
// record after TemplateRefreshMessages messages or TemplateRefresh time.
func TestTemplateRefresh(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	r := handWindow()
	r.Window.Flows = r.Window.Flows[:1] // one IPv4 flow with its source QP: template 256
	for _, tc := range []struct {
		name    string
		o       Options
		advance time.Duration
		want    []bool // template sent with the record of each window
	}{
		{"every 3 messages", Options{TemplateRefreshMessages: 3, TemplateRefresh: time.Hour, Now: clock}, 0, []bool{true, false, false, true, false, false, true}},
		{"every 10 s", Options{TemplateRefreshMessages: 1000, TemplateRefresh: 10 * time.Second, Now: clock}, 4 * time.Second, []bool{true, false, false, true, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, c := newRecorded(t, "udp", &tc.o)
			for range tc.want {
				if err := e.Write(r); err != nil {
					t.Fatal(err)
				}
				now = now.Add(tc.advance)
			}
			ms, _ := goflowDecode(t, c.msgs)
			for i, m := range ms {
				if got := len(m.templates) > 0; got != tc.want[i] {
					t.Errorf("message %d: template sent %v, want %v", i, got, tc.want[i])
				}
				if m.exportTime != uint32(time.Unix(1_700_000_000, 0).Add(time.Duration(i)*tc.advance).Unix()) {
					t.Errorf("message %d: export time %d", i, m.exportTime)
				}
			}
		})
	}
}

// TestSequenceGap: a message that cannot be sent still counts in the
// sequence numbers, so the next message shows the collector the gap; the
// failure is logged once and Close reports the loss.
func TestSequenceGap(t *testing.T) {
	var log strings.Builder
	o := Options{ErrorLog: &log, MaxMessageBytes: 9000} // a window a message
	e, c := newRecorded(t, "udp", &o)
	c.fail = map[int]bool{1: true, 2: true}
	r := handWindow()
	for range 3 + recovered {
		if err := e.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	ms, _ := goflowDecode(t, c.msgs)
	n := uint32(len(r.Window.Flows))
	want := []uint32{0, 3 * n, 4 * n}
	ms = ms[:3]
	if len(ms) != len(want) {
		t.Fatalf("%d messages, want %d", len(ms), len(want))
	}
	for i, m := range ms {
		if m.seq != want[i] {
			t.Errorf("message %d: sequence %d, want %d", i, m.seq, want[i])
		}
	}
	if got := strings.Count(log.String(), "\n"); got != 2 || !strings.Contains(log.String(), "works again after 2 failures") {
		t.Errorf("log:\n%s\nwant one line for the failure, one for the recovery", log.String())
	}
	st := e.Stats()
	if st.LostMessages != 2 || st.LostRecords != uint64(2*n) || st.Records != uint64((1+recovered)*n) {
		t.Errorf("stats %+v", st)
	}
	err := e.Close()
	if err == nil || !errors.Is(err, net.ErrClosed) || !strings.Contains(err.Error(), "10 of 55 records (2 messages) could not be sent") {
		t.Errorf("Close = %v", err)
	}
}

// TestPacing: with MaxRate, the messages take at least the time the rate
// allows past the first burst.
func TestPacing(t *testing.T) {
	e, c := newRecorded(t, "udp", &Options{MaxRate: 2000})
	r := handWindow()
	start := time.Now()
	for range 200 {
		if err := e.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	n := len(c.msgs)
	// Less 2 ms: pace sleeps only when a millisecond or more ahead.
	if took, least := time.Since(start), time.Duration(n-paceBurst)*time.Second/2000-2*time.Millisecond; n < 200 || took < least {
		t.Errorf("%d messages in %v, want at least 200 in at least %v", n, took, least)
	}
}

// TestSequenceWraps: sequence numbers count modulo 2^32.
func TestSequenceWraps(t *testing.T) {
	e, c := newRecorded(t, "udp", &Options{MaxMessageBytes: 9000}) // a window a message
	e.seq = 1<<32 - 3
	r := handWindow()
	for range 2 {
		if err := e.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	ms, _ := goflowDecode(t, c.msgs)
	if ms[0].seq != 1<<32-3 || ms[1].seq != 2 {
		t.Errorf("sequence numbers %d, %d, want %d and 2", ms[0].seq, ms[1].seq, uint32(1<<32-3))
	}
}

// TestClosedUDPPort: a UDP collector whose port is closed fails every
// other send (the kernel returns the ICMP error of one send from the
// next): the failure is logged once, not per message, and counted.
func TestClosedUDPPort(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	var log strings.Builder
	e, err := New(&Target{Network: "udp", Addr: addr}, &Options{ErrorLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	r := handWindow()
	for range 20 {
		if err := e.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.Stats(); st.LostMessages < 10 || strings.Count(log.String(), "\n") != 1 || !strings.Contains(log.String(), "connection refused") {
		t.Errorf("stats %+v, log:\n%s\nwant one line naming the refusal", st, log.String())
	}
	if err := e.Close(); err == nil || !strings.Contains(err.Error(), "could not be sent") {
		t.Errorf("Close = %v", err)
	}
}

// TestTCPDown: a TCP collector that is down is an error at once; one
// that goes away is dialed again at the next window, and the windows in
// between are counted lost.
func TestTCPDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if _, err := New(&Target{Network: "tcp", Addr: addr}, nil); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("New to a closed port = %v, want connection refused", err)
	}
	var log strings.Builder
	e, c := newRecorded(t, "tcp", &Options{ErrorLog: &log, MaxMessageBytes: 9000})
	e.t.Addr = addr
	c.fail = map[int]bool{0: true}
	r := handWindow()
	if err := e.Write(r); err != nil { // fails; the connection is dropped
		t.Fatal(err)
	}
	if err := e.Write(r); err != nil { // dials, refused: lost too
		t.Fatal(err)
	}
	st := e.Stats()
	if st.LostRecords != 10 || st.LostMessages != 1 || e.conn != nil {
		t.Errorf("stats %+v, conn %v", st, e.conn)
	}
	if !strings.Contains(log.String(), "write 0") || strings.Count(log.String(), "\n") != 1 {
		t.Errorf("log %q: want the first failure once", log.String())
	}
}

// TestParseURL reads the targets and options of IPFIX URLs and refuses
// bad ones with ErrTarget.
func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Target
	}{
		{"ipfix://127.0.0.1:4739", Target{Network: "udp", Addr: "127.0.0.1:4739"}},
		{"ipfix://collector", Target{Network: "udp", Addr: "collector:4739"}},
		{"ipfix+udp://[::1]:2055", Target{Network: "udp", Addr: "[::1]:2055"}},
		{"ipfix+tcp://c:4740/?pen=2636&domain=7&max-message-bytes=9000&template-refresh=1m&template-refresh-messages=5&max-rate=20000",
			Target{Network: "tcp", Addr: "c:4740", Options: Options{PEN: 2636, Domain: 7, MaxMessageBytes: 9000, TemplateRefresh: time.Minute, TemplateRefreshMessages: 5, MaxRate: 20000}}},
	} {
		got, err := ParseURL(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got.Network != tc.want.Network || got.Addr != tc.want.Addr || got.Options.PEN != tc.want.Options.PEN ||
			got.Options.Domain != tc.want.Options.Domain || got.Options.MaxMessageBytes != tc.want.Options.MaxMessageBytes ||
			got.Options.TemplateRefresh != tc.want.Options.TemplateRefresh || got.Options.TemplateRefreshMessages != tc.want.Options.TemplateRefreshMessages ||
			got.Options.MaxRate != tc.want.Options.MaxRate {
			t.Errorf("%s: %+v, want %+v", tc.in, *got, tc.want)
		}
	}
	for _, bad := range []string{"ipfix://", "ipfix://h:1/x", "ipfix://h?pen=0", "ipfix://h?pen=4294967296", "ipfix://h?domain=x",
		"ipfix://h?max-message-bytes=100", "ipfix://h?max-message-bytes=70000", "ipfix://h?template-refresh=0s",
		"ipfix://h?template-refresh-messages=-1", "ipfix://h?max-rate=-5", "ipfix://h?mtu=1400", "udp://h:1"} {
		if _, err := ParseURL(bad); !errors.Is(err, ErrTarget) {
			t.Errorf("%s: %v, want ErrTarget", bad, err)
		}
	}
}

// TestNTPTime checks dateTimeNanoseconds against hand-computed values.
func TestNTPTime(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want uint64
	}{
		{0, 2208988800 << 32},
		{500_000_000, 2208988800<<32 | 1<<31},
		{1, 2208988800<<32 | 5},           // 2^32/1e9 = 4.29..., rounded up
		{-1, 2208988799<<32 | 0xfffffffc}, // a nanosecond before 1970
		{1_700_000_000_999_999_999, (1700000000+2208988800)<<32 | 0xfffffffc},
	} {
		if got := ntpTime(tc.ns); got != tc.want {
			t.Errorf("ntpTime(%d) = %#x, want %#x", tc.ns, got, tc.want)
		}
		if tc.ns >= 0 {
			if back := ntpToUnix(binaryUint64(ntpTime(tc.ns))); back != tc.ns {
				t.Errorf("ntpTime(%d) reads back as %d", tc.ns, back)
			}
		}
	}
}

func binaryUint64(v uint64) []byte {
	return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// TestDocsListEveryElement: docs/ipfix.md lists every element, with its
// number, type and length, and the smallest message bound.
func TestDocsListEveryElement(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "ipfix.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := 0
	for _, e := range Elements() {
		by := "IANA"
		if e.Enterprise {
			by = "PEN"
		}
		row := fmt.Sprintf("| %d | %s | %s | %s | %d | %s |", e.ID, by, e.Name, e.Type, e.Length, e.About)
		if !strings.Contains(doc, row+"\n") {
			t.Errorf("docs/ipfix.md lacks the row\n%s", row)
		}
		rows++
	}
	if n := strings.Count(doc, "\n| ") - 1; n != rows { // less the header
		t.Errorf("docs/ipfix.md has %d element rows, want %d", n, rows)
	}
	if want := fmt.Sprintf("from %d (a template and a record", minMessageBytes()); !strings.Contains(doc, want) {
		t.Errorf("docs/ipfix.md lacks %q", want)
	}
}
