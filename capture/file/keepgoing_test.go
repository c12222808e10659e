package file

import (
	"encoding/binary"
	"testing"
)

// insert returns b with extra inserted at off.
func insert(b []byte, off int, extra ...byte) []byte {
	out := append([]byte(nil), b[:off]...)
	out = append(out, extra...)
	return append(out, b[off:]...)
}

func TestKeepGoing(t *testing.T) {
	pc, pcWant := basePcap(65535)
	ng, ngWant := basePcapng()
	le := binary.LittleEndian
	two := appendBlock(ng, blockEPB, epbBody(le, 5, 0, nil, 0), le) // block 6: unknown interface
	two = appendBlock(two, blockEPB, epbBody(le, 0, (sec0+9)*1e6, seq(1, 2), 2), le)
	for _, c := range []struct {
		name   string
		files  [][]byte
		want   []frame
		errors uint64
	}{
		{"pcap caplen over limit", [][]byte{patch(pc, 50+8, 0xffff0000)}, []frame{pcWant[0], pcWant[2]}, 1},
		{"pcap garbage between records", [][]byte{insert(pc, 76, 0xff, 0xff, 0xff, 0xff, 0xff)}, pcWant, 1},
		{"pcap truncated", [][]byte{pc[:len(pc)-1]}, pcWant[:2], 1},
		{"pcap header", [][]byte{pc[:20]}, nil, 1},
		{"pcapng bad length", [][]byte{patch(ng, 92+4, 45)}, []frame{ngWant[0], ngWant[2]}, 1},
		{"pcapng trailing length", [][]byte{patch(ng, 92+40, 48)}, []frame{ngWant[0], ngWant[2]}, 1},
		{"pcapng unknown interface", [][]byte{patch(ng, 92+8, 1)}, []frame{ngWant[0], ngWant[2]}, 1},
		{"pcapng garbage between blocks", [][]byte{insert(ng, 92, 1, 2, 3, 4, 5, 6, 7, 8)}, ngWant, 1},
		{"pcapng two damaged blocks", [][]byte{patch(two, 48+4, 12345)}, append(ngWant[1:], frame{seq(1, 2), ns0 + 9e9, 2, 1, 0}), 2},
		{"pcapng bad first section", [][]byte{patch(ng, 8, 0)}, nil, 1},
		{"pcapng truncated", [][]byte{ng[:len(ng)-4]}, ngWant[:2], 1},
		{"files", [][]byte{pc, []byte("not a capture"), nil, ng, pc[:60]}, append(append(pcWant[:3:3], ngWant...), pcWant[0]), 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, src, err := readFiles(t, &Options{KeepGoing: true}, c.files...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffFrames(c.want, got); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
			if s := src.Stats(); s.Errors != c.errors || s.Received != uint64(len(c.want)) {
				t.Errorf("Stats() = %+v, want %d received and %d errors", s, len(c.want), c.errors)
			}
		})
	}
}
