// Package metrics is rocescope's engine: it turns captured frames into
// per-window states (exact counters, exact per-flow records, sketches) that
// merge across workers and hosts. Reports are built from those states by
// package [github.com/rocescope/rocescope/metrics/report], written by
// [github.com/rocescope/rocescope/metrics/export], and the states travel
// between hosts through [github.com/rocescope/rocescope/metrics/state].
//
// # Pipeline
//
// An [Engine] runs one reader per [capture.Source]. A reader decodes each
// frame once, counts the figures that need no per-flow state (packets,
// bytes, the opcode histogram, congestion and pause frames) and hands every
// RoCE frame, as an event in a batch of 256, to the worker (shard) that owns
// its connection: a hash of the two addresses and the UDP source port, so
// both directions of a connection meet on one shard. A shard owns a slice of
// the bounded QP table and its part of the open windows, without locks.
// With one worker and one source all of it runs on the caller's goroutine;
// otherwise each reader and each shard has its own, and batches (never
// single frames) move between them over channels, recycled through free
// lists.
//
// # Flow state
//
// A table entry holds a flow's PSN tracking, pairing and pending requests,
// and its counters in the window it last sent in, in two parts: a hot one
// of two cache lines (the key, the counts every frame makes in narrow
// fields, PSN tracking, the burst-slot runs), all a data packet or an ACK
// of a known flow reads and writes, and a cold one of four lines (the
// activity profile, the window bookkeeping, the NAK, gap and
// retransmission episode state, the pending requests and the latencies
// matched) touched only by rarer frames, answers and a new window; what
// else a frame counts goes to the flow's record in the open window's list.
// The slab of entries and its indexes live in memory mapped with a
// request for huge pages where they pay. A frame updates the entry in
// place; its counters move into the window's flow list once, when the
// flow's first frame of a newer window arrives or when the window closes.
// A flow with no frame in a window is not part of it. Latency matches
// count in the window of the answer (its quantiles), and on the
// requester's flow when that flow sent in the same window.
//
// # Diagnoses
//
// The window state holds what the reports' events need below the window,
// so that merged states name the events one host would: per flow an
// activity profile at the burst interval ([Activity]; a frame touches only
// the runs of slots in its entry's hot part, folded into the profile two
// at a time), per source MAC and priority the time PFC frames paused
// ([PauseRecord], kept by the readers), and per flow its retransmission
// episodes with their cause ([Retransmission]: the NAK or RNR NAK its
// reverse direction carried, which the entry remembers, else a timeout).
//
// # Windows and the closing protocol
//
// Windows are aligned to multiples of the window length since the Unix
// epoch, by frame time, so replays are deterministic and hosts agree on
// window boundaries. At most two windows are open: the newest and the one
// before it, for late frames (Config.Lateness).
//
//  1. A reader closes window w when its clock (the newest frame time, and
//     in a live capture the wall clock) passes the end of w plus the
//     lateness. It hands its counters of w to the collector, then puts a
//     close mark "≤ w" behind its events in every shard's queue.
//  2. A shard closes w once every reader's mark reached it: all events of
//     w are then handled, since a reader's events precede its mark. It
//     moves the counters still in its entries into w's flow list, puts the
//     list in canonical order (by flow hash, then key), feeds the flow
//     records to the window's sketches, hands w to the collector and tells
//     it its own mark. A shard keeps two windows open in a ring; when
//     a reader lags the others by more than a window, its frames of a
//     window the ring closed count in a late part of that window, which
//     closes with its mark and which the collector merges in: every figure
//     of a frame is in the window its reader counted it in.
//  3. The collector emits w once every reader and every shard marked it
//     closed: the first shard window becomes the host's window, the others
//     merge into it (shards hold disjoint flows: their sorted lists merge in
//     one pass, a late part's are sorted again), the readers' counters are
//     added, and the heavy-hitter table is fed the exact records in
//     canonical order, so that a window's state is the same for any number of
//     workers (see Determinism). Windows are emitted in order, every one
//     of them, also when empty.
//
// A frame older than the oldest open window is counted late in it. A run of
// them (a clock stepped back) ends the segment: the reader holds the run
// until it is long enough to confirm the step, every window is emitted as
// at the end of the input, and the readers, tables and collector start
// again at the new time with the run's frames, in the next segment
// (Window.Segment), whose windows may start where windows of the earlier
// one did. A frame far ahead
// of the clock is held in the newest window until enough frames confirm
// the jump (see TimeJumps).
//
// # Determinism
//
// A window's state is the same, byte for byte, for any number of workers
// while the QP tables hold every flow: its Evictions and UntrackedPackets
// are 0. Each worker holds Config.TableSize/Config.Workers flows of its own
// connections, so past that which flows are tracked depends on the
// workers, and then so may the flow list, the counters kept per flow
// (Evictions, UntrackedPackets, Retransmits, PSNGaps, OutOfOrder,
// ReadLatencyUnmatched), the latency quantiles and the heavy-hitter table,
// which untracked flows feed frame by frame on their worker. What does not
// depend on the workers then: every other counter, the distinct-flow and
// Count-Min sketches, and the packets of the flow list and the untracked
// ones together, RoCEPackets (TestDeterminismPastTheTable).
//
// # Lifetime and concurrency
//
// An Engine may run once at a time; Run returns when its sources are
// exhausted, one fails, the emit function fails or the context is done, and
// emits every window still open before it returns. The [Window] given to
// emit is lent: it is reused once emit returns. The QP tables and windows
// are kept between runs of one Engine, so that their memory is reused. A
// Window is not safe for concurrent use. Window states ([Window.AppendBinary],
// [Window.UnmarshalBinary]) are versioned, checksummed bytes.
package metrics
