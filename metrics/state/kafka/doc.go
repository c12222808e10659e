// Package kafka carries window states between capture hosts and mergers
// over a Kafka topic, with github.com/twmb/franz-go.
//
// # Records
//
// A [Producer] writes each closed window's state, the bytes of
// [metrics.Window.AppendBinary] unchanged, as one record: the key is the
// window start (8 bytes, big-endian, ns since the Unix epoch), so that every
// host's state of a window lands in one partition, and the headers name the
// host, the window start and length (decimal ns), the state version and the
// part ("1/1"). A state larger than a record may be (the topic's
// max.message.bytes less room for framing, asked of the brokers before the
// first state, or the Target's MaxRecordBytes) is split into parts
// ("1/3", "2/3", "3/3"): windows of the same start and host whose merge is
// the whole state — the first part holds the counters and CM messages, the
// sketches go whole into the first parts they fit, and the flows are dealt
// out in runs of the sorted flow list. Merging a sketch with an empty one
// leaves it unchanged, so the parts merge exactly.
//
// # Consuming
//
// A [Consumer] reads the topic as a member of a consumer group and is the
// state.Input of a merge. It puts the parts of each host's state back
// together and hands out whole host states, taking the records it fetched
// in window order across its partitions (a partition whose queue of
// fetched records is full is paused, so that memory stays bounded however
// long the backlog). A record that is not a state, or whose state does not
// decode, is skipped and named by topic, partition and offset. The merge
// writes the reports and then calls [Consumer.Done] with the newest window
// reported: the committed offset of a partition is that of the oldest
// record of a window not yet reported, and the commit's metadata holds the
// newest window reported, so that a consumer taking the partition over
// (after a restart or a rebalance) skips the states of windows already
// reported and reads those of every other window again. A window is
// reported at least once, and twice only when a merger stopped between
// writing its report and committing. States the merge refuses (far ahead
// of the other hosts') are dropped ([Consumer.Drop]) without moving the
// metadata's window. The committed offsets of partitions as they are
// assigned are read again at each poll until that succeeds; their records
// wait meanwhile. What a report carries over from the window before it
// (jitter, prev_rate_bps, learned QP pairs) is exact when one consumer
// reads every window in order; a consumer that restarts, or shares the
// partitions with others, measures it against the windows it reported
// itself.
//
// # Concurrency and lifetime
//
// A Producer's Write may be called from one goroutine at a time. It
// encodes the state (the caller reuses the window) and never waits for the
// brokers: a bounded queue feeds a goroutine that splits states and hands
// records to the client, whose buffer is bounded too; what does not fit or
// is not delivered in time is counted and reported, one message per state.
// Close flushes for at most its timeout and says what was not delivered. A
// Consumer is used by one goroutine; its rebalance callbacks run only
// while Next polls the brokers.
package kafka
