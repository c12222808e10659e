package decode_test

import (
	"testing"

	"github.com/rocescope/rocescope/decode"
)

var sinkBuf []byte

// TestNoAllocs proves that Decode and AppendJSON (into a buffer with room)
// never allocate, for every hand-made and synthetic frame.
func TestNoAllocs(t *testing.T) {
	type frame struct {
		name string
		link decode.LinkType
		port uint16
		data []byte
	}
	var frames []frame
	for _, c := range decodeCases(t) {
		frames = append(frames, frame{c.name, c.link, c.port, c.frame})
	}
	for _, path := range testdataFiles(t) {
		link, recs, err := readPcap(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			frames = append(frames, frame{path, link, 0, r.data})
		}
	}
	var p decode.Packet
	buf := make([]byte, 0, 4096)
	for _, f := range frames {
		d := decode.Decoder{RoCEPort: f.port}
		if n := testing.AllocsPerRun(100, func() { sinkErr = d.Decode(&p, f.data, f.link) }); n != 0 {
			t.Errorf("%s: Decode allocates %v times", f.name, n)
		}
		if n := testing.AllocsPerRun(100, func() { sinkBuf = p.AppendJSON(buf[:0]) }); n != 0 {
			t.Errorf("%s: AppendJSON allocates %v times", f.name, n)
		}
	}
}

func TestPacketPredicates(t *testing.T) {
	want := map[string]struct{ roce, ce bool }{
		"RoCEv2 NAK, bytes by hand":                         {true, false},
		"RoCEv1 SEND Only with ECN-CE, bytes by hand":       {true, true},
		"IB UD SEND Only Immediate with pad, bytes by hand": {true, false},
		"QinQ IPv6 with extension headers":                  {true, true},
		"CNP with ECN-CE and BECN":                          {true, true},
		"PFC":                                               {false, false},
		"UDP to another port":                               {false, false},
		"GRH payload length shorter than BTH and ICRC":      {false, true},
	}
	seen := 0
	for _, c := range decodeCases(t) {
		w, ok := want[c.name]
		if !ok {
			continue
		}
		seen++
		var p decode.Packet
		_ = p.Decode(c.frame, c.link)
		if p.IsRoCE() != w.roce || p.ECNCE() != w.ce {
			t.Errorf("%s: IsRoCE %v ECNCE %v, want %v %v", c.name, p.IsRoCE(), p.ECNCE(), w.roce, w.ce)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of %d cases found", seen, len(want))
	}
}
