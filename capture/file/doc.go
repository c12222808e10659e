// Package file replays capture files as a [capture.Source] and writes
// classic pcap files.
//
// [Open] reads one or more files one after another; "-" names standard
// input. The format is found from the first bytes, never from the name:
//
//   - classic pcap, with the microsecond or the nanosecond magic, in either
//     byte order;
//   - pcapng: several sections in either byte order, several interfaces
//     with their own link types, snap lengths and timestamp resolutions
//     (if_tsresol, decimal or binary, and if_tsoffset); enhanced, simple and
//     obsolete packet blocks; interface statistics blocks, whose drop
//     counters (isb_ifdrop, isb_osdrop) make Stats().Dropped; every other
//     block type is skipped;
//   - either of them compressed with gzip.
//
// [NewWriter] writes classic pcap with nanosecond timestamps.
//
// # Frames
//
// Frame.Time is in ns since the Unix epoch, Frame.OrigLen is the record's
// original length and len(Frame.Data) its captured length. Like libpcap and
// Wireshark, the reader takes records longer than the file's or the
// interface's snap length, and records whose captured length exceeds their
// original length; OrigLen is then the original length as the file gives
// it, smaller than len(Data), which is what tshark shows as frame.len.
// Frame.Link is the file's link type (the low 16 bits of the pcap header
// field, whose high bits describe the FCS) or the pcapng interface's,
// passed through as [decode.LinkType]; Frame.Port is the pcapng interface
// ID, 0 for pcap (a section may have up to 2^20 interfaces; those from
// 65535 on share Port 65535). A simple packet block has no timestamp: its
// frame gets the time of the previous packet of its section.
//
// Next fills the whole batch, going from one file to the next within a
// call. It returns fewer frames only at the end of the input, before an
// error, or when unmapped input has filled both read buffers with frames of
// the batch.
//
// # Lifetime of frame bytes
//
// The reader is zero-copy. Frame.Data of every frame that [Source.Next] puts
// into a batch aliases the source's own memory: a read-only mapping of a
// regular file, or one of two read buffers (4 MiB each) for pipes and gzip.
// The bytes stay valid until the next call to Next or Close; copy them to
// keep them longer, and never write to them. Frame.Data has its capacity
// cut to its length, so appending to it copies.
//
// # Concurrency
//
// A Source is owned by one goroutine: Next must not be called concurrently
// with itself. Stats, Progress and Close may be called from any goroutine at
// any time. Close is idempotent; a Next running at the time of Close returns
// os.ErrClosed with an empty batch, and so does every later Next.
//
// A Writer is not safe for concurrent use.
//
// # Damage
//
// A damaged input yields an error that names the file, the record or block
// number (1-based) and the byte offset, and wraps one of [ErrTruncated],
// [ErrBadMagic], [ErrRecordTooLarge], [ErrBadBlock], [ErrBadRecord] or
// [ErrBadGzip].
// Offsets in gzip input count decompressed bytes. Next first returns the
// frames before the damage, then the error, and then the same error again.
// With Options.KeepGoing the damage is counted in Stats().Errors instead and
// reading goes on at the next plausible record, or with the next file.
//
// Records longer than Options.SnapLimit, and pcapng section, interface and
// packet blocks longer than it plus 64 KiB, are damage: no length field
// makes the reader allocate. Longer blocks of other types are skipped
// without being buffered.
//
// Regular files are mapped into memory. A file is read up to the size it
// had when its turn came; truncating it while it is read makes the process
// fail with SIGBUS, as with any mapped file.
package file
