// Package state moves rocescope's window states between hosts and merges
// them: [Writer] appends each window's state (the versioned, checksummed
// bytes of metrics.Window.AppendBinary) to a file, [Reader] reads them back
// in order, and a [Merger] aligns the states of several hosts by window and
// merges those of one window with metrics.Window.Merge, the same function
// that merges the shards of one host.
//
// Writers, Readers and Mergers are not safe for concurrent use.
package state
