package logstore

import (
	"errors"
	"fmt"
	"sort"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/txn"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// The log keeps the idempotent-producer state of its partition (txn.Partition): Append checks
// every producer batch against it and answers duplicates with the original offsets.
//
// The state survives restarts through snapshot files, <offset>.snapshot (format in package txn),
// holding the state of every batch below the offset. One is written when a segment is rolled
// (after the sealed segment is synced, so the log below the offset is durable) and one at a
// clean Close. Recovery loads the newest valid snapshot at or below the log end and replays the
// batches from there; a torn or corrupt snapshot is skipped for an older one. Retention and
// DeleteRecords do not touch the state: a producer whose batches were all deleted is still
// deduplicated until it expires (producer.id.expiration.ms). Truncate rebuilds the state.

const (
	snapshotSuffix = ".snapshot"
	keepSnapshots  = 2 // the newest two: if the newest is torn, recovery falls back to the other
)

// AppendResult says where a batch went.
type AppendResult struct {
	First, Last int64 // the batch's offsets (a duplicate's: the original's)
	// Duplicate is set when the batch repeated one of its producer's last batches: nothing was
	// written, and First and Last are the original's offsets.
	Duplicate bool
	// MaxTimestamp is a duplicate's original max timestamp (its LogAppendTime, on such topics).
	MaxTimestamp int64
}

func producerBatch(h *batch.Header) txn.Batch {
	return txn.Batch{ProducerID: h.ProducerID, Epoch: h.ProducerEpoch, FirstSeq: h.BaseSequence, LastOffsetDelta: h.LastOffsetDelta,
		Transactional: h.IsTransactional(), NoSequence: h.IsTransactional() && h.BaseSequence < 0}
}

// Producers returns the state of every producer the partition remembers, by id. The caller owns
// the result.
func (l *Log) Producers() []txn.Producer {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.producers.Producers()
}

// KnowsProducer reports whether the partition holds state of the producer (it wrote here, and
// has not expired).
func (l *Log) KnowsProducer(producerID int64) bool {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	_, _, ok := l.producers.Sequence(producerID)
	return ok
}

// OpenTransaction returns the producer's open transaction on the partition: its first offset,
// the leader epoch it began in and the producer's epoch, or ok=false.
func (l *Log) OpenTransaction(producerID int64) (first int64, leaderEpoch int32, epoch int16, ok bool) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.producers.Open(producerID)
}

// OpenTransactions returns the producer ids with an open transaction and its first offset.
func (l *Log) OpenTransactions() map[int64]int64 {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.producers.OpenTransactions()
}

// ExpireProducers forgets producers whose last batch is older than the log's
// ProducerIDExpiration at nowMs, and returns how many it forgot.
func (l *Log) ExpireProducers(nowMs int64) int {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	exp := l.Config().ProducerIDExpiration
	if exp <= 0 {
		return 0
	}
	return l.producers.Expire(nowMs, exp.Milliseconds())
}

// writeSnapshot writes the producer state as of offset, synced, and removes all but the newest
// keepSnapshots snapshots. The caller holds appendMu; the state must cover exactly the log
// below offset. The new file's directory entry is made durable by the log's next directory sync.
func (l *Log) writeSnapshot(offset int64) error {
	// Every aborted-transaction entry below offset must be durable before a snapshot says the
	// state below offset needs no replay.
	if err := l.aborted.sync(); err != nil {
		return err
	}
	name := segmentName(l.dir, offset, snapshotSuffix)
	if err := vfs.WriteFileSync(l.fs, name, l.producers.AppendSnapshot(nil, offset)); err != nil {
		// A full disk leaves the file empty or cut: remove it, or every start warns of it.
		if rerr := l.fs.Remove(name); rerr != nil && !errors.Is(rerr, vfs.ErrNotExist) {
			l.logger.Warn("logstore: removing a producer snapshot that failed to write", "file", name, "err", rerr)
		}
		return err
	}
	l.mu.Lock()
	l.dirDirty = true
	l.mu.Unlock()
	offsets, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	for i := 0; i < len(offsets)-keepSnapshots; i++ {
		if err := l.fs.Remove(segmentName(l.dir, offsets[i], snapshotSuffix)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// snapshotOffsets lists the offsets of the snapshot files, ascending.
func (l *Log) snapshotOffsets() ([]int64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, err
	}
	var offsets []int64
	for _, name := range names {
		if off, ok := parseSegmentName(name, snapshotSuffix); ok {
			offsets = append(offsets, off)
		}
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	return offsets, nil
}

// loadProducers rebuilds the producer state for the log as it is: from the newest valid
// snapshot at or below the log end, plus the batches after it. Snapshots above the end (the log
// was truncated below them) are removed. The replay starts at the snapshot, also below the log
// start while its segment is still there (DeleteRecords moves the start inside a segment): the
// batches between them (a producer's later sequences, a transaction's marker) are part of the
// state. A snapshot older than the first segment cannot be brought up to date: the state then
// starts empty at that segment. The caller owns l (recovery) or holds appendMu and maintMu
// (truncation).
func (l *Log) loadProducers() error {
	offsets, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	l.mu.RLock()
	end, first := l.endOffsetLocked(), l.segments[0].base
	l.mu.RUnlock()
	state, from := txn.NewPartition(), int64(0)
	removed := false
	for i := len(offsets) - 1; i >= 0; i-- {
		name := segmentName(l.dir, offsets[i], snapshotSuffix)
		if offsets[i] > end {
			if err := l.fs.Remove(name); err != nil && !errors.Is(err, vfs.ErrNotExist) {
				return err
			}
			removed = true
			continue
		}
		b, err := vfs.ReadFile(l.fs, name)
		if err != nil {
			return err
		}
		off, s, err := txn.ParseSnapshot(b)
		if err == nil && off != offsets[i] {
			err = fmt.Errorf("%w: names offset %d, holds %d", txn.ErrBadSnapshot, offsets[i], off)
		}
		if err != nil {
			l.logger.Warn("logstore: skipping a bad producer state snapshot", "file", name, "err", err)
			continue
		}
		if off < first { // the batches after it are partly gone, and older ones are older still
			break
		}
		state, from = s, off
		break
	}
	// A snapshot above the end must stay gone: once the log grows past it again, it would
	// describe batches that are no longer there.
	if removed {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	l.producers = state
	from = max(from, first)
	// The index entries at or after from are derived again by the replay.
	if err := l.aborted.truncateFrom(from); err != nil {
		return err
	}
	err = l.replayProducers(from, end)
	l.firstUnstable.Store(l.producers.FirstUnstable())
	return err
}

// replayProducers applies the producer batches in [from, end) to the state.
func (l *Log) replayProducers(from, end int64) error {
	l.mu.RLock()
	segs := append([]*segment(nil), l.segments...)
	for _, s := range segs {
		s.acquire()
	}
	l.mu.RUnlock()
	defer func() {
		for _, s := range segs {
			s.release()
		}
	}()
	for _, s := range segs {
		if s.next <= from || s.base >= end {
			continue
		}
		pos := int64(0)
		if from > s.base {
			floor, _ := s.idx.floorByOffset(uint32(from - s.base))
			pos = int64(floor)
		}
		it := batchIter{f: s.f, pos: pos, end: s.size}
		for {
			_, b, ok := it.next()
			if !ok {
				break
			}
			h, err := batch.ParseHeader(b)
			if err != nil {
				return fmt.Errorf("logstore: replaying producer state in segment %d: %w", s.base, err)
			}
			if h.LastOffset() < from || h.BaseOffset >= end || h.ProducerID < 0 {
				continue
			}
			if h.IsControl() {
				m, err := markerOf(&h, b)
				if err != nil {
					return fmt.Errorf("logstore: replaying producer state in segment %d: marker at %d: %w", s.base, h.BaseOffset, err)
				}
				if err := l.applyMarker(m, h.BaseOffset, h.MaxTimestamp); err != nil {
					return err
				}
				continue
			}
			l.producers.Apply(producerBatch(&h), h.BaseOffset, h.MaxTimestamp, h.LeaderEpoch)
		}
		if it.err != nil || it.bad != nil {
			return fmt.Errorf("logstore: replaying producer state in segment %d: %w", s.base, errors.Join(it.err, it.bad))
		}
	}
	return nil
}

// removeProducerFiles removes the producer-state snapshots and the aborted-transaction index
// file (unsynced; readers keep the index's open file until dropProducers closes it).
func (l *Log) removeProducerFiles() error {
	offsets, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	for _, off := range offsets {
		if err := l.fs.Remove(segmentName(l.dir, off, snapshotSuffix)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return err
		}
	}
	if err := l.fs.Remove(l.aborted.name); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return err
	}
	return nil
}

// dropProducers forgets every producer and removes every snapshot: the log restarted empty.
// The caller holds appendMu.
func (l *Log) dropProducers() error {
	if err := l.removeProducerFiles(); err != nil {
		return err
	}
	l.producers = txn.NewPartition()
	l.firstUnstable.Store(-1)
	if err := l.aborted.drop(); err != nil {
		return err
	}
	return l.fs.SyncDir(l.dir)
}
