// Package state moves rocescope's window states between hosts and merges
// them: [Writer] appends each window's state (the versioned, checksummed
// bytes of metrics.Window.AppendBinary) to a file, or writes one file per
// window into a directory, [Reader] reads them back in order, and [Merge]
// merges the states of several hosts window by window and writes each
// merged window once it is done.
//
// # Merging
//
// [Merge] is the one merge loop of rocescope. It reads states from an
// [Input]: state files and directories ([FileInput], read once or
// followed), or a Kafka topic (package kafka's Consumer). A [Merger]
// aligns the states by window start and merges those of one window with
// metrics.Window.Merge, the function that merges the shards of one host.
// [MergeConfig] holds the policy: the hosts that complete a window, how
// long a window waits for the others (in wall-clock time, or while the
// input reads a backlog, in the windows' time), how many windows it holds
// at most, and whether a state that cannot be merged stops the merge or is
// skipped. A window is written to an [Output] in time order; a state of a
// window written already is late, and skipped. A state far ahead of every
// other host's (a clock a day ahead, a damaged state) is held apart and
// refused, unless enough states in a row confirm the jump, so that it
// cannot make the other hosts' windows late.
//
// # Delivery
//
// Merge writes windows, has the Output make them durable
// ([Output.Sync]), and only then tells the Input they are done
// ([Input.Done]), which a Kafka consumer takes to commit its offsets. A
// merge that dies between the two is delivered the states of those
// windows again: every window is reported at least once, and a window
// written but not yet done is written again. Outputs that write a window's
// rows under a key (ClickHouse's window_start_ns and host) can drop the
// second copy; a file or pipe shows it twice.
//
// # Untrusted files
//
// State files may come from other hosts, or be something else named like
// one. [Open] opens regular files only, without blocking, and stops reading
// when its context is done; a Reader checks a state's magic before reading
// the rest of it, bounds its length, and refuses a state whose sketches would
// take more memory than ReadOptions.MaxSketchBytes before allocating them. A
// file that ends inside a state is an error wrapping io.ErrUnexpectedEOF, so
// that a reader following a file being written can read it again later
// from [Reader.Offset]. The Merger refuses states whose host names
// metrics.CheckHost refuses, so that no name from a state reaches a
// terminal, a CSV cell or a comma-joined list of hosts.
//
// Writers, Readers, Mergers and inputs are not safe for concurrent use.
package state
