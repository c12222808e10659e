//go:build pcap

package filter

import (
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/capture/file"
)

// TestPureAgreesWithLibpcap compiles every expression of the tcpdump test
// with this package's compiler and with libpcap's, and checks that both
// give the same verdict on every frame of demo.pcap; and that libpcap's
// compiler takes what the subset does not.
func TestPureAgreesWithLibpcap(t *testing.T) {
	src, err := file.Open([]string{"../../testdata/demo.pcap"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var frames []capture.Frame
	b := capture.NewBatch(256)
	for src.Next(b) == nil {
		for _, f := range b.Frames {
			f.Data = append([]byte(nil), f.Data...)
			frames = append(frames, f)
		}
	}
	for _, text := range tcpdumpExprs {
		pure, err := compilePure(text)
		if err != nil {
			t.Fatalf("compilePure(%q): %v", text, err)
		}
		lib, err := Compile(text)
		if err != nil {
			t.Fatalf("Compile(%q) with libpcap: %v", text, err)
		}
		for i, f := range frames {
			if a, b := pure.Match(f.Data, f.Link), lib.Match(f.Data, f.Link); a != b {
				t.Errorf("%q: frame %d: pure Go %v, libpcap %v", text, i+1, a, b)
				break
			}
		}
	}
	for _, text := range []string{"udp[8] = 0x64", "less 100", "greater 1000 and udp"} {
		if _, err := Compile(text); err != nil {
			t.Errorf("Compile(%q) with libpcap: %v", text, err)
		}
	}
}
