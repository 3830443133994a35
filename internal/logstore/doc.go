// Package logstore is the log of one partition: Kafka v2 record batches, stored as received,
// in segment files with sparse indexes, recovered after crashes, trimmed by retention, cleaned
// by compaction, and made durable by a group-commit flusher shared across partitions.
//
// A partition directory:
//
//	00000000000000000000.log        batches with offsets from 0, back to back, exactly as
//	00000000000000000000.index      Kafka's wire format (see package batch): baseOffset and
//	00000000000000000000.timeindex  partitionLeaderEpoch set by Append, nothing else changed
//	00000000000000004711.log        the next segment starts at offset 4711 ...
//	00000000000000004711.index      ... its indexes are written when it is sealed
//	checkpoint                      log start offset and compaction progress
//
// A segment's offsets lie in [base, next): next is the base of the following segment. Sealed
// segments never change except by compaction, which replaces them whole. Only the last (active)
// segment takes appends, and it is the only one that can have a torn tail after a crash: rolling
// to a new segment first syncs the old one and writes its indexes.
//
// Indexes are in memory (binary searched) and written to their files when a segment is sealed;
// their header carries a CRC and the log size they describe, so a stale, torn or missing index
// is detected and rebuilt from the log on open. The file layouts are in index.go and
// checkpoint.go; the whole format is in docs/on-disk-format.md.
//
// Recovery (Open): finish a committed compaction swap (".log.swap"), discard an uncommitted one
// (".log.cleaned"), load sealed segments by their indexes (rebuilding those that fail), and scan
// the active segment batch by batch, checking length, magic, CRC and offsets; the first bad batch
// and everything after it are truncated. Then the tail is synced, so DurableOffset is exact.
//
// Durability: Append writes to the page cache. WaitDurable(ctx, end) queues the log with the
// Flusher, whose goroutine syncs every queued log in one round, so concurrent appenders share
// fsyncs. The first failed write or sync poisons the log: every later Append and WaitDurable
// returns that error and DurableOffset never moves again until the log is reopened (and
// recovered), because after a failed fsync the page cache may no longer hold what was written.
package logstore
