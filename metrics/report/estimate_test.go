package report_test

import (
	"testing"

	"github.com/rocescope/rocescope/capture"
	"github.com/rocescope/rocescope/decode"
	"github.com/rocescope/rocescope/internal/enginetest"
	"github.com/rocescope/rocescope/internal/testframes"
	"github.com/rocescope/rocescope/metrics"
	"github.com/rocescope/rocescope/metrics/report"
)

// TestEstimatedFlowsAreBounded overfills a QP table of 64 flows with 5 000
// one-frame flows and three heavy ones, and checks every flow of the top
// list that only the sketches saw against the exact figures counted here:
// its bytes and packets are upper bounds, never an unknown 0, and BytesMin a
// lower bound; the heavy flows are all listed.
func TestEstimatedFlowsAreBounded(t *testing.T) {
	type exact struct{ packets, bytes uint64 }
	truth := map[metrics.FlowKey]exact{}
	var frames []capture.Frame
	add := func(i int, payload int) {
		f := testframes.RoCE{Src: [4]byte{10, 1, byte(i >> 8), byte(i)}, Dst: [4]byte{10, 2, 0, 1}, Sport: uint16(1000 + i),
			Op: 0x0a, DQP: uint32(i + 1), Ext: testframes.RETH(uint32(payload)), Payload: payload}
		b := f.Bytes()
		frames = append(frames, capture.Frame{Data: b, OrigLen: uint32(len(b)), Time: testframes.Epoch + int64(len(frames)), Link: decode.LinkEthernet})
		k := metrics.FlowKey{Src: decode.AddrFrom4(f.Src), Dst: decode.AddrFrom4(f.Dst), DQP: f.DQP}
		e := truth[k]
		truth[k] = exact{e.packets + 1, e.bytes + uint64(len(b))}
	}
	for i := range 5000 {
		add(i, 64)
		if i >= 1000 && i%100 == 0 { // once the table is full: only the sketches see them
			for h := range 3 {
				add(6000+h, 4000) // the heavy flows, spread over the trace
			}
		}
	}
	cfg := &metrics.Config{Workers: 1, Host: "h", TableSize: 64, Top: 10}
	wins := enginetest.Run(t, cfg, &testframes.Source{Frames: frames, Per: 64})
	if len(wins) != 1 {
		t.Fatalf("%d windows, want 1", len(wins))
	}
	rp, err := report.NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rp.Build(wins[0])
	if r.Exact {
		t.Fatal("the window is exact: the table did not overflow")
	}
	heavy, estimated := 0, 0
	for _, f := range r.Top {
		want, ok := truth[f.Key]
		if !ok {
			t.Errorf("flow %v is not in the trace", f.Key)
			continue
		}
		if f.Key.DQP > 6000 {
			heavy++
		}
		if !f.Estimated {
			if f.C[metrics.FlowBytes] != want.bytes || f.C[metrics.FlowPackets] != want.packets {
				t.Errorf("tracked flow %v: %d bytes %d packets, want %d and %d", f.Key, f.C[metrics.FlowBytes], f.C[metrics.FlowPackets], want.bytes, want.packets)
			}
			continue
		}
		estimated++
		if b := f.C[metrics.FlowBytes]; f.BytesMin > want.bytes || b < want.bytes {
			t.Errorf("estimated flow %v: bytes in [%d, %d], the truth %d is outside", f.Key, f.BytesMin, b, want.bytes)
		}
		if p := f.C[metrics.FlowPackets]; p < want.packets || p == 0 {
			t.Errorf("estimated flow %v: packets %d, the truth is %d", f.Key, p, want.packets)
		}
	}
	if heavy != 3 || estimated == 0 {
		t.Errorf("top list has %d of the 3 heavy flows and %d estimated flows; want 3 and some", heavy, estimated)
	}
}
