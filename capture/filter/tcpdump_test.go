package filter

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
)

// tcpdumpExprs are expressions compared with tcpdump on real and
// generated captures.
var tcpdumpExprs = []string{
	"udp port 4791",
	"udp dst port 4791",
	"udp src port 4791",
	"host 10.0.0.21",
	"udp port 4791 and host 10.0.0.21",
	"host 10.0.0.21 and host 10.0.0.19 or host 10.0.0.7",
	"host 10.0.0.7 or host 10.0.0.21 and host 10.0.0.19",
	"ip6",
	"ip",
	"arp",
	"not udp",
	"tcp",
	"icmp or icmp6",
	"ether proto 0x8808",
	"ether proto 0x8915 or ether proto 0x86dd",
	"ether src 02:00:00:00:00:01 or ether dst ff:ff:ff:ff:ff:ff",
	"dst net 10.0.0.0/24 and not src 10.0.0.7",
	"net 10.0.0.0/27",
	"src 10.0.0.21",
	"dst port 4791 and src host 10.0.0.7",
	"not host 10.0.0.21 and udp",
	"(host 10.0.0.7 or host 10.0.0.21) and not port 4791",
	"ip6 and udp",
	"ip6 net fd00::/16",
	"src net fd00:0:0:1::/64 and dst port 4791",
	"host fd00:0:0:1::1d",
	"portrange 4000-5000",
	"port 4791 or 53",
	"proto 47",
	"ip proto 17",
	"ip6 proto 17",
	"vlan",
	"vlan and udp port 4791",
	"vlan 100",
	"vlan and vlan",
	"ether host 02:00:00:00:00:01",
	"! ( udp && port 4791 ) || arp",
	"tcp src port 80 or udp dst port 53",
}

// sharedCaptures holds real captures, test input only: ../shared/captures
// beside the module root.
const sharedCaptures = "../../../shared/captures"

// TestAgainstTcpdump counts the frames of captures each expression
// matches, against tcpdump -r FILE EXPR: demo.pcap, and without -short the
// shared real captures (46 files of RoCEv2, soft-RoCE and IB traffic).
func TestAgainstTcpdump(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Skipf("tcpdump not installed: %v", err)
	}
	files := []string{"../../testdata/demo.pcap"}
	if !testing.Short() {
		// The shared real captures (see their README), when present.
		out, _ := exec.Command("find", sharedCaptures, "-name", "*.pcap*", "-size", "-5M").Output()
		files = append(files, strings.Fields(string(out))...)
	}
	for _, path := range files {
		for _, text := range tcpdumpExprs {
			want, err := tcpdumpCount(path, text)
			if err != nil {
				t.Logf("%s: %q: tcpdump: %v", path, text, err)
				continue
			}
			e, err := Compile(text)
			if err != nil {
				t.Errorf("Compile(%q): %v", text, err)
				continue
			}
			if got := countMatches(t, path, e); got != want {
				t.Errorf("%s: %q: %d frames match, tcpdump says %d", path, text, got, want)
			}
		}
	}
}

// tcpdumpCount returns how many frames of path tcpdump prints for expr.
func tcpdumpCount(path, expr string) (int, error) {
	out, err := exec.Command("tcpdump", "-nqr", path, expr).Output()
	if err != nil {
		return 0, err
	}
	return strings.Count(string(out), "\n"), nil
}

func countMatches(t *testing.T, path string, e *Expr) int {
	src, err := file.Open([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	n := 0
	b := capture.NewBatch(256)
	for {
		err := src.Next(b)
		for _, f := range b.Frames {
			if e.Match(f.Data, f.Link) {
				n++
			}
		}
		if err != nil {
			return n
		}
	}
}
