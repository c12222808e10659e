package file

import (
	"encoding/binary"
)

// This file builds capture files byte by byte, following the format
// specifications, independently of the reader and the writer.

// pcapHeader returns a classic pcap file header.
func pcapHeader(o binary.AppendByteOrder, magic uint32, snap, link uint32) []byte {
	b := o.AppendUint32(nil, magic)
	b = o.AppendUint16(b, 2)
	b = o.AppendUint16(b, 4)
	b = o.AppendUint32(b, 0) // thiszone
	b = o.AppendUint32(b, 0) // sigfigs
	b = o.AppendUint32(b, snap)
	return o.AppendUint32(b, link)
}

// pcapRecord appends a classic pcap record.
func pcapRecord(dst []byte, o binary.AppendByteOrder, sec, frac uint32, data []byte, orig uint32) []byte {
	dst = o.AppendUint32(dst, sec)
	dst = o.AppendUint32(dst, frac)
	dst = o.AppendUint32(dst, uint32(len(data)))
	dst = o.AppendUint32(dst, orig)
	return append(dst, data...)
}

// pad4 pads b with zeros to a multiple of 4 bytes.
func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// appendBlock appends a pcapng block of type typ around body.
func appendBlock(dst []byte, typ uint32, body []byte, o binary.AppendByteOrder) []byte {
	n := uint32(12 + len(pad4(append([]byte(nil), body...))))
	dst = o.AppendUint32(dst, typ)
	dst = o.AppendUint32(dst, n)
	dst = pad4(append(dst, body...))
	return o.AppendUint32(dst, n)
}

// shbBody returns the body of a section header block, version 1.0,
// unknown section length, no options.
func shbBody(o binary.AppendByteOrder) []byte {
	b := o.AppendUint32(nil, 0x1a2b3c4d)
	b = o.AppendUint16(b, 1)
	b = o.AppendUint16(b, 0)
	return o.AppendUint64(b, ^uint64(0))
}

// option returns one pcapng option, padded.
func option(o binary.AppendByteOrder, code uint16, value []byte) []byte {
	b := o.AppendUint16(nil, code)
	b = o.AppendUint16(b, uint16(len(value)))
	return pad4(append(b, value...))
}

// idbBody returns the body of an interface description block with the
// given options (without the end-of-options marker).
func idbBody(o binary.AppendByteOrder, link uint16, snap uint32, opts []byte) []byte {
	b := o.AppendUint16(nil, link)
	b = o.AppendUint16(b, 0)
	b = o.AppendUint32(b, snap)
	if len(opts) > 0 {
		b = append(b, opts...)
		b = append(b, 0, 0, 0, 0)
	}
	return b
}

// epbBody returns the body of an enhanced packet block.
func epbBody(o binary.AppendByteOrder, id uint32, ts uint64, data []byte, orig uint32) []byte {
	b := o.AppendUint32(nil, id)
	b = o.AppendUint32(b, uint32(ts>>32))
	b = o.AppendUint32(b, uint32(ts))
	b = o.AppendUint32(b, uint32(len(data)))
	b = o.AppendUint32(b, orig)
	return append(b, data...)
}

// pbBody returns the body of an obsolete packet block.
func pbBody(o binary.AppendByteOrder, id uint16, ts uint64, data []byte, orig uint32) []byte {
	b := o.AppendUint16(nil, id)
	b = o.AppendUint16(b, 0) // drops
	b = o.AppendUint32(b, uint32(ts>>32))
	b = o.AppendUint32(b, uint32(ts))
	b = o.AppendUint32(b, uint32(len(data)))
	b = o.AppendUint32(b, orig)
	return append(b, data...)
}

// spbBody returns the body of a simple packet block.
func spbBody(o binary.AppendByteOrder, data []byte, orig uint32) []byte {
	return append(o.AppendUint32(nil, orig), data...)
}

// isbBody returns the body of an interface statistics block with the given
// options (without the end-of-options marker).
func isbBody(o binary.AppendByteOrder, id uint32, ts uint64, opts []byte) []byte {
	b := o.AppendUint32(nil, id)
	b = o.AppendUint32(b, uint32(ts>>32))
	b = o.AppendUint32(b, uint32(ts))
	if len(opts) > 0 {
		b = append(b, opts...)
		b = append(b, 0, 0, 0, 0)
	}
	return b
}
