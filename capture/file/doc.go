// Package file replays capture files as a [capture.Source] and writes
// classic pcap files.
//
// [Open] reads one or more files one after another; "-" names standard
// input. The format is found from the first bytes, never from the name:
// classic pcap (microsecond and nanosecond magic, either byte order),
// pcapng (several sections, several interfaces with their own link types and
// timestamp resolutions; enhanced, simple and obsolete packet blocks; other
// block types are skipped) and either of them compressed with gzip.
// [NewWriter] writes classic pcap with nanosecond timestamps.
//
// # Lifetime of frame bytes
//
// The reader is zero-copy. Frame.Data of every frame that [Source.Next] puts
// into a batch aliases the source's own memory (a read-only mapping of a
// regular file, or one of two read buffers for pipes and compressed input).
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
// [ErrBadMagic], [ErrRecordTooLarge], [ErrBadBlock] or [ErrBadGzip]. Offsets in gzip input
// count decompressed bytes. With Options.KeepGoing the damage is counted in
// Stats().Errors instead and reading goes on at the next plausible record, or
// with the next file where the format leaves nothing to resynchronise on.
//
// Regular files are mapped into memory. Truncating a file while it is being
// read makes the process fail with SIGBUS, as with any mapped file.
package file
