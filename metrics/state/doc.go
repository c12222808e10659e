// Package state moves rocescope's window states between hosts and merges
// them: [Writer] appends each window's state (the versioned, checksummed
// bytes of metrics.Window.AppendBinary) to a file, [Reader] reads them back
// in order, and a [Merger] aligns the states of several hosts by window and
// merges those of one window with metrics.Window.Merge, the same function
// that merges the shards of one host. [Files] reads many state files in
// window order, and [Files.Drain] hands their states to a merger and says
// which windows no file can add to any more; [MergeFiles] merges whole
// state files that way, window by window, holding a bounded number of
// windows.
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
// from [Reader.Offset].
//
// Writers, Readers and Mergers are not safe for concurrent use.
package state
