// Package metrics is rocescope's engine: it turns captured frames into
// per-window flow reports, and merges the window states of several hosts.
//
// # Pipeline
//
// An [Engine] runs one reader goroutine per [capture.Source]. A reader
// decodes each frame once, counts the figures that need no per-flow state
// (packets, bytes, the opcode histogram, congestion and pause frames) and
// hands every RoCE frame, as an event in a batch, to the worker that owns
// its connection: a hash of the two addresses and the UDP source port, so
// both directions of a connection meet on one worker. Each worker owns a
// slice of the bounded QP table (PSN tracking, retransmissions, gaps,
// latency matching, source QP pairing) and its part of the open windows,
// without locks. A collector merges the readers' and workers' parts of a
// window with [Window.Merge], the same function `rocescope merge` uses for
// the states of several hosts, and emits the window once every reader and
// worker has closed it. A [Reporter] builds a [Report] from each window
// (top flows, elephants, jitter, CNP attribution), and the sinks write it
// as JSON lines, CSV or a table; [Prometheus] serves running totals.
//
// # Windows
//
// Windows are aligned to multiples of the window length since the Unix
// epoch, by frame time, so replays are deterministic and hosts agree on
// window boundaries. A window closes when every reader has seen a frame
// (or, live, the clock) past its end plus the allowed lateness; a frame
// older than that is counted late in the first window still open. The
// figures of a window are exact, but the distinct-flow estimate and the
// sketches; per-flow figures are exact for every flow the QP table held
// (Report.Exact says whether that is all of them).
//
// # Lifetime and concurrency
//
// An Engine may run once at a time; Run returns when its sources are
// exhausted, one fails, the emit function fails or the context is done, and
// emits every window still open before it returns. The [Window] given to
// emit is lent: it is reused once emit returns. A Window, a Reporter and
// the sinks are not safe for concurrent use; Prometheus is. Window states
// ([Window.AppendBinary], [StateWriter], [StateReader], [Merger]) are
// versioned, checksummed bytes that travel between hosts.
package metrics
