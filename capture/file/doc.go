// Package file replays capture files as a [capture.Source] and writes
// classic pcap files.
//
// [Open] reads one or more files, merged by frame time (see "Several
// files" below); "-" names standard input. The format is found from the
// first bytes, never from the name:
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
// error, or when the input has filled both read buffers with frames of
// the batch.
//
// # Several files
//
// Several files are merged by frame time, as mergecap merges them: Next
// delivers, over and over, the next frame of the file whose next frame is
// the earliest, and of the first such file in the order given on a tie.
// Each file keeps its own order (a file whose times go backwards is not
// sorted), so the merge is stable. Files that follow each other in time, as
// a rotated capture's do, come out exactly as read one after another; the
// captures of two mirrors of the same minutes come out interleaved, in
// time order. Frame.Port stays the pcapng interface ID within the frame's
// own file (mergecap renumbers interfaces across files; the reader does
// not). Every file is opened at the first Next, and a file that
// cannot be opened fails it (with Options.KeepGoing it is counted and left
// out); each file being read keeps its descriptor and its own two read
// buffers (320 KiB each with the default snap limit, filled 64 KiB at a
// time, so that files the merge has not come to yet hold little) until it
// ends. Up to 256
// frames of each file are read ahead; they stay in the file's memory, not
// copied. Once only one file is left, frames are read straight into the
// batch, as for a single file. Options.Concat reads the files one after
// another instead, each to its end, in the order given.
//
// Progress counts the bytes of all files: Done over Total.
//
// # Lifetime of frame bytes
//
// The reader is zero-copy. Frame.Data of every frame that [Source.Next] puts
// into a batch aliases the source's own memory: one of its two read
// buffers.
// The bytes stay valid until the next call to Next or Close, also when
// files are merged (frames read ahead but not yet delivered keep their
// read buffer from being reused); copy them to keep them longer, and never
// write to them. Frame.Data has its capacity
// cut to its length, so appending to it copies.
//
// # Concurrency
//
// A Source is owned by one goroutine: Next must not be called concurrently
// with itself. Stats, Progress and Close may be called from any goroutine at
// any time. Close is idempotent; a Next running at the time of Close returns
// os.ErrClosed with an empty batch, and so does every later Next.
//
// Close also ends a Next that waits for a named pipe. On Linux a named pipe
// is opened with O_NONBLOCK, so that open(2) does not wait for a writer;
// Next then waits in the runtime's poller until a writer has sent bytes or
// has come and gone, and Close ends that wait. Elsewhere open(2) of a pipe
// without a writer blocks, and Close cannot end it.
//
// A Writer is not safe for concurrent use.
//
// # Damage
//
// A damaged input yields an error that names the file, the record or block
// number (1-based) and the byte offset, and wraps one of [ErrTruncated],
// [ErrBadMagic], [ErrRecordTooLarge], [ErrBadBlock] or [ErrBadGzip].
// Offsets in gzip input count decompressed bytes. Next first returns the
// frames before the damage, then the error, and then the same error again.
// With Options.KeepGoing the damage is counted in Stats().Errors instead and
// reading goes on at the next plausible record, or with the next file.
//
// A file whose first bytes start no known format is not damaged but no
// capture at all ("capture: notes.txt: not a capture file (pcap, pcapng or
// gzip of one): first bytes ..."): its error wraps [ErrNotCapture]
// (and so [ErrBadMagic]) and ends reading even with Options.KeepGoing.
//
// Records longer than Options.SnapLimit, and pcapng section, interface and
// packet blocks longer than it plus 64 KiB, are damage: no length field
// makes the reader allocate. Longer blocks of other types are skipped
// without being buffered.
//
// Files are read into two buffers used in turn (512 KiB each, or the snap
// limit and 64 KiB if more; 320 KiB each per file when files are merged by
// time), a regular file 256 KiB or more at a time. Small buffers cost few
// first touches (each 4 KiB page of a buffer faults once, about 17 µs of
// CPU on the AMD EPYC VM measured) and stay in the processor's cache
// between the copy from the page cache and the decoding. They are not
// mapped files: on
// virtual machines (nested paging) reading a page-cache file through a
// mapping cost 75-80 ns of CPU per 128-byte record against 45-60 through
// read(2) (BenchmarkReadPcap, AMD EPYC VM), the mapping's TLB misses
// outweighing the copy.
package file
