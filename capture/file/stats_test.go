package file

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rocescope/rocescope/capture"
)

// counters returns the options isb_ifdrop and isb_osdrop (when >= 0) and
// an isb_ifrecv of 1000, which is no drop count.
func counters(o binary.AppendByteOrder, ifdrop, osdrop int64) []byte {
	u64 := func(v int64) []byte { return o.AppendUint64(nil, uint64(v)) }
	b := option(o, 4, u64(1000)) // isb_ifrecv
	if ifdrop >= 0 {
		b = append(b, option(o, 5, u64(ifdrop))...)
	}
	if osdrop >= 0 {
		b = append(b, option(o, 7, u64(osdrop))...)
	}
	return b
}

// TestStatisticsDrops reads interface statistics blocks, whose drop
// counters are cumulative per interface, and checks that Stats().Dropped
// grows by the sum of their increases, computed by hand, as the blocks go
// by; in both byte orders.
func TestStatisticsDrops(t *testing.T) {
	for _, o := range []binary.AppendByteOrder{binary.LittleEndian, binary.BigEndian} {
		t.Run(o.String(), func(t *testing.T) {
			ts := uint64(sec0) * 1e6
			pkt := func(f []byte, id uint32) []byte {
				return appendBlock(f, blockEPB, epbBody(o, id, ts, seq(1, 20), 20), o)
			}
			isb := func(f []byte, id uint32, ifdrop, osdrop int64) []byte {
				return appendBlock(f, blockISB, isbBody(o, id, ts, counters(o, ifdrop, osdrop)), o)
			}
			f := appendBlock(nil, blockSHB, shbBody(o), o)
			f = appendBlock(f, blockIDB, idbBody(o, 1, 0, nil), o)
			f = appendBlock(f, blockIDB, idbBody(o, 1, 0, nil), o)
			f = pkt(f, 0)
			f = isb(f, 0, 5, -1) // +5
			f = pkt(f, 1)
			f = isb(f, 0, 8, 2)   // +3 +2
			f = isb(f, 1, 3, -1)  // +3
			f = isb(f, 0, 8, 2)   // +0
			f = isb(f, 1, -1, -1) // no counters
			f = pkt(f, 0)
			f = isb(f, 1, 1, -1) // restarted: +1
			// A new section has new interfaces: their counters start anew.
			f = appendBlock(f, blockSHB, shbBody(o), o)
			f = appendBlock(f, blockIDB, idbBody(o, 1, 0, nil), o)
			f = isb(f, 0, 4, 0) // +4
			f = pkt(f, 0)
			// Dropped after each frame, and at the end.
			want := []uint64{0, 5, 13, 18, 18}
			src, err := Open(writeTemp(t, f), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			b := capture.NewBatch(1)
			var got []uint64
			for src.Next(b) == nil {
				got = append(got, src.Stats().Dropped)
			}
			got = append(got, src.Stats().Dropped)
			if !slices.Equal(got, want) {
				t.Errorf("Dropped after each frame %v, want %v", got, want)
			}
		})
	}
}

// TestStatisticsErrors checks the damage an interface statistics block can
// carry.
func TestStatisticsErrors(t *testing.T) {
	le := binary.LittleEndian
	head := appendBlock(nil, blockSHB, shbBody(le), le)
	head = appendBlock(head, blockIDB, idbBody(le, 1, 0, nil), le)
	for _, c := range []struct {
		name, where string
		body        []byte
	}{
		{"unknown interface", "block 3 at offset 48: bad pcapng block: statistics of interface 1 not described (section has 1)",
			isbBody(le, 1, 0, counters(le, 1, 1))},
		{"short counter", "block 3 at offset 48: bad pcapng block: statistics option 5 of 4 bytes, want 8",
			isbBody(le, 0, 0, option(le, 5, []byte{1, 2, 3, 4}))},
		{"option overruns", "block 3 at offset 48: bad pcapng block: statistics option 7 of 200 bytes overruns the block",
			isbBody(le, 0, 0, le.AppendUint32(nil, 7|200<<16))},
		{"short block", "block 3 at offset 48: bad pcapng block: interface statistics of 16 bytes, want at least 24",
			le.AppendUint32(nil, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			paths := writeTemp(t, appendBlock(head, blockISB, c.body, le))
			src, err := Open(paths, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			_, err = readAll(t, src, 4)
			if want := "capture: " + paths[0] + ": " + c.where; !errors.Is(err, ErrBadBlock) || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %v,\nwant %q", err, want)
			}
		})
	}
}

// erfRecord returns an ERF InfiniBand record (type 21) of 16+n bytes whose
// header gives the record length rlen.
func erfRecord(rlen uint16, n int) []byte {
	h := binary.BigEndian.AppendUint64(nil, 0)
	h = append(h, 21, 0)
	h = binary.BigEndian.AppendUint16(h, rlen)
	h = binary.BigEndian.AppendUint16(h, 0)
	h = binary.BigEndian.AppendUint16(h, uint16(n))
	return append(h, seq(0xa0, n)...)
}

// TestERFRecordLength checks that ERF records whose record length is below
// their 16-byte header (8, and 0) are read like any other, from pcap and
// pcapng: the capture record frames the ERF record, and tshark decodes
// such a record as if its length were sound (decode's tshark test compares
// the decoding of such records in testdata/decode/erf.pcap).
func TestERFRecordLength(t *testing.T) {
	le := binary.LittleEndian
	recs := [][]byte{erfRecord(36, 20), erfRecord(8, 20), erfRecord(0, 20), erfRecord(16, 0)}
	pc := pcapHeader(le, 0xa1b2c3d4, 0, 197)
	ng := appendBlock(nil, blockSHB, shbBody(le), le)
	ng = appendBlock(ng, blockIDB, idbBody(le, 1, 0, nil), le)
	ng = appendBlock(ng, blockIDB, idbBody(le, 197, 0, nil), le)
	var want []frame
	for i, r := range recs {
		pc = pcapRecord(pc, le, sec0+uint32(i), 0, r, uint32(len(r)))
		ng = appendBlock(ng, blockEPB, epbBody(le, 1, uint64(sec0+i)*1e6, r, uint32(len(r))), le)
		want = append(want, frame{r, ns0 + int64(i)*1e9, uint32(len(r)), 197, 0})
	}
	ngWant := slices.Clone(want)
	for i := range ngWant {
		ngWant[i].Port = 1
	}
	for name, c := range map[string]struct {
		file []byte
		want []frame
	}{"pcap": {pc, want}, "pcapng": {ng, ngWant}} {
		got, src, err := readFiles(t, nil, c.file)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := diffFrames(c.want, got); diff != "" {
			t.Errorf("%s: frames (-want +got):\n%s", name, diff)
		}
		if s := src.Stats(); s.Errors != 0 {
			t.Errorf("%s: Stats() = %+v, want no error", name, s)
		}
	}
}
