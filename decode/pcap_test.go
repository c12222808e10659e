package decode_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocescope/rocescope/decode"
)

// record is one frame of a capture file.
type record struct {
	data    []byte
	origLen int
}

// readPcap reads a classic pcap file (either byte order, micro- or
// nanosecond timestamps) with a reader kept deliberately independent of the
// project's capture package; the tshark comparisons check every record's
// lengths against tshark's frame.len and frame.cap_len.
func readPcap(path string) (decode.LinkType, []record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	if len(b) < 24 {
		return 0, nil, fmt.Errorf("%s: %w", path, errShortPcap)
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return 0, nil, fmt.Errorf("%s: %w", path, errNotPcap)
	}
	link := decode.LinkType(bo.Uint32(b[20:24]) & 0xffff)
	var recs []record
	for off := 24; off < len(b); {
		if len(b)-off < 16 {
			return 0, nil, fmt.Errorf("%s: record %d at offset %d: %w", path, len(recs)+1, off, errShortPcap)
		}
		incl, orig := int(bo.Uint32(b[off+8:])), int(bo.Uint32(b[off+12:]))
		off += 16
		if len(b)-off < incl {
			return 0, nil, fmt.Errorf("%s: record %d at offset %d: %w", path, len(recs)+1, off, errShortPcap)
		}
		recs = append(recs, record{data: b[off : off+incl : off+incl], origLen: orig})
		off += incl
	}
	return link, recs, nil
}

var (
	errShortPcap = errors.New("pcap file cut short")
	errNotPcap   = errors.New("not a classic pcap file")
)

// writePcap writes frames as a little-endian microsecond pcap file of link
// type link into dir and returns its path.
func writePcap(tb testing.TB, dir, name string, link decode.LinkType, frames [][]byte) string {
	tb.Helper()
	b := make([]byte, 24, 1024)
	binary.LittleEndian.PutUint32(b[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(b[4:], 2)
	binary.LittleEndian.PutUint16(b[6:], 4)
	binary.LittleEndian.PutUint32(b[16:], 262144)
	binary.LittleEndian.PutUint32(b[20:], uint32(link))
	for i, f := range frames {
		var h [16]byte
		binary.LittleEndian.PutUint32(h[0:], uint32(i+1))
		binary.LittleEndian.PutUint32(h[8:], uint32(len(f)))
		binary.LittleEndian.PutUint32(h[12:], uint32(len(f)))
		b = append(append(b, h[:]...), f...)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}
