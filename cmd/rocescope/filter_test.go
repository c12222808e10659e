package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/internal/tsharktest"
)

// TestReplayFiltersAgreeWithTools replays demo.pcap and a generated trace
// of 300 flows over several windows with each filter, and checks that the
// frames analyzed (roce + other + malformed + truncated) are as many as
// tcpdump (for an expression) or tshark's display filter (for the RoCE
// flags) keeps of the same file, that filtered counts the rest, and that
// every window holds packets == roce + other + malformed + truncated +
// filtered.
func TestReplayFiltersAgreeWithTools(t *testing.T) {
	gen, _ := genTrace(t, t.TempDir(), "--duration", "4s")
	// RoCEv2 as rocescope sees it: UDP to 4791 (tshark also dissects
	// some frames to other ports as InfiniBand).
	const roce = "udp.dstport == 4791 && "
	for _, c := range []struct {
		name   string
		files  []string
		flags  []string
		tool   string // "tcpdump" or "tshark"
		filter string // the tool's filter
	}{
		{"expr udp host", []string{demoTrace, gen}, []string{"-f", "udp port 4791 and host 10.0.0.21"}, "tcpdump", "udp port 4791 and host 10.0.0.21"},
		{"expr not udp", []string{demoTrace, gen}, []string{"--filter", "not udp"}, "tcpdump", "not udp"},
		{"expr ip6 or vlan", []string{demoTrace, gen}, []string{"-f", "ip6 or (vlan and udp)"}, "tcpdump", "ip6 or (vlan and udp)"},
		{"qp both directions", []string{demoTrace}, []string{"--qp", "0x4bdaaf,0x9d5d7d"}, "tshark",
			roce + "(infiniband.bth.destqp in {0x4bdaaf,0x9d5d7d} || infiniband.deth.srcqp in {0x4bdaaf,0x9d5d7d})"},
		{"qp decimal", []string{demoTrace}, []string{"--qp", "4971183"}, "tshark", roce + "infiniband.bth.destqp == 4971183"},
		{"op read ack", []string{demoTrace, gen}, []string{"--op", "read,ack"}, "tshark", roce + "infiniband.bth.opcode in {12,13,14,15,16,17,18}"},
		{"op cnp", []string{demoTrace, gen}, []string{"--op", "cnp"}, "tshark", roce + "infiniband.bth.opcode == 129"},
		{"addr and op", []string{demoTrace}, []string{"--addr", "10.0.0.21", "--op", "write"}, "tshark",
			roce + "ip.addr == 10.0.0.21 && infiniband.bth.opcode in {6,7,8,9,10,11}"},
		{"src network v6", []string{demoTrace}, []string{"--src", "fd00::/16"}, "tshark", roce + "ipv6.src == fd00::/16 && infiniband"},
		// tcpdump's "udp" is the outermost header, untagged: no VLAN, no ERSPAN.
		{"dst and expr", []string{demoTrace}, []string{"--dst", "10.0.0.19", "-f", "udp"}, "tshark", roce + "!vlan && !gre && ip.dst == 10.0.0.19 && infiniband"},
	} {
		for _, path := range c.files {
			t.Run(c.name+"/"+path[strings.LastIndex(path, "/")+1:], func(t *testing.T) {
				want := toolCount(t, c.tool, path, c.filter)
				args := append(append([]string{"replay", "--format", "jsonl"}, c.flags...), path)
				code, out, stderr := runCLI(t, args...)
				if code != 0 {
					t.Fatalf("rocescope %s: exit %d: %s", strings.Join(args, " "), code, stderr)
				}
				var packets, analyzed, filtered float64
				for i, r := range reports(t, out) {
					n := r["roce_packets"].(float64) + r["other_packets"].(float64) + r["malformed_packets"].(float64) + r["truncated_packets"].(float64)
					f, ok := r["filtered"].(float64)
					if !ok {
						t.Fatalf("window %d has no filtered key", i)
					}
					if p := r["packets"].(float64); p != n+f {
						t.Errorf("window %d: packets %v != roce+other+malformed+truncated %v + filtered %v", i, p, n, f)
					}
					packets += r["packets"].(float64)
					analyzed += n
					filtered += f
				}
				if int(analyzed) != want || filtered != packets-analyzed || filtered == 0 {
					t.Errorf("%s %s: %v of %v frames analyzed, %v filtered; %s keeps %d", strings.Join(c.flags, " "), path, analyzed, packets, filtered, c.tool, want)
				}
			})
		}
	}
}

// demoTrace is the small trace the repository ships.
const demoTrace = "../../testdata/demo.pcap"

// toolCount returns how many frames of path tcpdump's capture filter or
// tshark's display filter keeps.
func toolCount(t *testing.T, tool, path, filter string) int {
	t.Helper()
	switch tool {
	case "tcpdump":
		if _, err := exec.LookPath("tcpdump"); err != nil {
			t.Skipf("tcpdump not installed: %v", err)
		}
		out, err := exec.Command("tcpdump", "-nqr", path, filter).Output()
		if err != nil {
			t.Fatalf("tcpdump -r %s %q: %v", path, filter, err)
		}
		return bytes.Count(out, []byte("\n"))
	}
	out, err := tsharktest.Run(t, path, "-Y", filter, "-T", "fields", "-e", "frame.number")
	if err != nil {
		t.Fatalf("tshark -Y %q: %v", filter, err)
	}
	return bytes.Count(out, []byte("\n"))
}

// TestDumpFilters checks that dump prints the frames a filter keeps and
// says how many it removed.
func TestDumpFilters(t *testing.T) {
	code, out, stderr := runCLI(t, "dump", "--qp", "0x4bdaaf", demoTrace)
	if code != 0 {
		t.Fatalf("dump: exit %d: %s", code, stderr)
	}
	want := toolCount(t, "tshark", demoTrace, "udp.dstport == 4791 && (infiniband.bth.destqp == 0x4bdaaf || infiniband.deth.srcqp == 0x4bdaaf)")
	if n := strings.Count(out, "\n"); n != want || !strings.Contains(out, `"dqp":4971183`) {
		t.Errorf("dump --qp 0x4bdaaf printed %d frames, want %d", n, want)
	}
	if w := "rocescope dump: 10000 frames, 8620 filtered (--qp 0x4bdaaf)\n"; stderr != w {
		t.Errorf("stderr %q, want %q", stderr, w)
	}
	code, out, _ = runCLI(t, "dump", "--all", "-f", "arp", demoTrace)
	if want := toolCount(t, "tcpdump", demoTrace, "arp"); code != 0 || strings.Count(out, "\n") != want {
		t.Errorf("dump --all -f arp: exit %d, %d frames; want %d", code, strings.Count(out, "\n"), want)
	}
}

// TestFilterUsageErrors checks that a wrong filter is a usage error that
// says what is wrong.
func TestFilterUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"replay", "-f", "udp port", demoTrace}, `filter "udp port": syntax error: at word 1: a value is missing after "udp port"`},
		{[]string{"replay", "-f", "host example.com", demoTrace}, "host names are not looked up"},
		{[]string{"replay", "--qp", "0x1000000", demoTrace}, `invalid argument "0x1000000" for "--qp" flag`},
		{[]string{"dump", "--op", "reads", demoTrace}, `"reads": want send, write, read, atomic, ack, cnp`},
		{[]string{"replay", "--addr", "10.0.0", demoTrace}, `"10.0.0": want an IPv4 or IPv6 address`},
		{[]string{"capture", "-i", "lo", "-f", "udp", "tcp"}, "give the capture filter once"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.says) {
			t.Errorf("rocescope %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), code, stderr, c.says)
		}
	}
}
