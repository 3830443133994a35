package logstore

import (
	"errors"
	"fmt"
	"math"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// SetRetentionBound installs fn, the offset retention may not delete at or past, as Kafka's
// deletableSegments stops at the high watermark: a replica's (replica.Replica.RetentionBound).
// fn is called without the log's locks and must not call into the log.
func (l *Log) SetRetentionBound(fn func() int64) {
	l.mu.Lock()
	l.retentionBound = fn
	l.mu.Unlock()
}

// EnforceRetention applies the delete policy: it removes the oldest segments while their newest
// record is older than retention.ms or the log is larger than retention.bytes without them, and
// every segment wholly below the log start offset. As in Kafka, an expired active segment (or
// any, with retention.bytes=0) is rolled first so it can go too. Neither goes past the retention bound (SetRetentionBound). It
// returns how many segments it removed.
func (l *Log) EnforceRetention() (int, error) {
	l.mu.RLock()
	boundFn := l.retentionBound
	l.mu.RUnlock()
	bound := int64(math.MaxInt64)
	if boundFn != nil {
		bound = boundFn() // before the maintenance lock: a replica's lock is taken with it held on truncation
	}
	l.lockMaint()
	defer l.maintMu.Unlock()
	cfg := l.Config()
	nowMs := l.now().UnixMilli()
	expired := func(s *segment) bool {
		return cfg.Delete && cfg.RetentionMs >= 0 && s.largestTimestamp() < nowMs-cfg.RetentionMs.Milliseconds()
	}
	l.appendMu.Lock()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		l.appendMu.Unlock()
		return 0, ErrClosed
	}
	act, perr := l.active(), l.err
	allExpired := act.size > 0 && expired(act) && act.next <= bound
	for _, s := range l.segments {
		allExpired = allExpired && expired(s)
	}
	// retention.bytes=0: the log is over it without even its active segment, so that one goes
	// too (Kafka's deleteRetentionSizeBreachedSegments takes the active segment when the bytes
	// before it leave diff - size >= 0, which only 0 allows, and rolls it).
	allOverSize := act.size > 0 && cfg.Delete && cfg.RetentionBytes == 0 && act.next <= bound
	l.mu.RUnlock()
	if (allExpired || allOverSize) && perr == nil {
		if _, err := l.roll(act); err != nil {
			l.appendMu.Unlock()
			return 0, err
		}
	}
	l.appendMu.Unlock()

	l.mu.Lock()
	var total int64
	for _, s := range l.segments {
		total += s.size
	}
	n := 0
	for ; n < len(l.segments)-1; n++ {
		s := l.segments[n]
		overSize := cfg.Delete && cfg.RetentionBytes >= 0 && total-s.size >= cfg.RetentionBytes
		if s.next > l.logStart && (!expired(s) && !overSize || s.next > bound) {
			break
		}
		total -= s.size
	}
	victims := append([]*segment(nil), l.segments[:n]...)
	l.segments = append([]*segment(nil), l.segments[n:]...)
	moved := l.logStart < l.segments[0].base
	l.logStart = max(l.logStart, l.segments[0].base)
	l.firstDirty = max(l.firstDirty, l.logStart)
	cp := checkpoint{logStart: l.logStart, firstDirty: l.firstDirty}
	l.mu.Unlock()
	return n, l.dropSegments(victims, moved, cp)
}

// dropSegments unlinks segments already taken out of the list, and rewrites the checkpoint if
// the log start moved. Readers holding them keep their files until they release them.
func (l *Log) dropSegments(victims []*segment, writeCP bool, cp checkpoint) error {
	var errs []error
	for _, s := range victims {
		errs = append(errs, removeSegmentFiles(l.fs, l.dir, s.base))
		s.release()
	}
	if writeCP {
		errs = append(errs, writeCheckpoint(l.fs, l.dir, cp))
	}
	errs = append(errs, l.aborted.trimBelow(l.StartOffset(), l.dir))
	return errors.Join(errs...)
}

// AdvanceStartOffset moves the log start offset forward to offset (DeleteRecords). It is durable
// when AdvanceStartOffset returns; reads below it fail with ErrOffsetOutOfRange from then on, and
// segments wholly below it are removed. offset may not pass the log end.
func (l *Log) AdvanceStartOffset(offset int64) error {
	l.lockMaint()
	defer l.maintMu.Unlock()
	l.mu.RLock()
	start, end, firstDirty, closed := l.logStart, l.endOffsetLocked(), l.firstDirty, l.closed
	l.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case offset > end:
		return fmt.Errorf("%w: start offset %d past the log end %d", ErrOffsetOutOfRange, offset, end)
	case offset <= start:
		return nil
	}
	cp := checkpoint{logStart: offset, firstDirty: max(firstDirty, offset)}
	if err := writeCheckpoint(l.fs, l.dir, cp); err != nil {
		// A full disk: the segments wholly below offset go first, as retention removes them
		// (files, then the checkpoint), which may make the room the checkpoint needs, so that
		// DeleteRecords can free a full disk. A crash between the two recovers a start between
		// the old and the new, as after retention.
		ferr := l.freeBelow(offset) // its index trim may fail on the full disk; the files are gone
		if err := writeCheckpoint(l.fs, l.dir, cp); err != nil {
			return errors.Join(err, ferr)
		}
	}
	l.mu.Lock()
	l.logStart, l.firstDirty = cp.logStart, cp.firstDirty
	victims := l.cutBelowLocked(offset)
	l.mu.Unlock()
	return l.dropSegments(victims, false, cp)
}

// cutBelowLocked takes the segments wholly below offset (never the active one) out of the log
// and returns them; under mu (and maintMu).
func (l *Log) cutBelowLocked(offset int64) []*segment {
	n := 0
	for n < len(l.segments)-1 && l.segments[n].next <= offset {
		n++
	}
	victims := append([]*segment(nil), l.segments[:n]...)
	l.segments = append([]*segment(nil), l.segments[n:]...)
	return victims
}

// freeBelow removes the segments wholly below offset (never the active one), moving the log
// start to the first segment kept, as retention does; under maintMu.
func (l *Log) freeBelow(offset int64) error {
	l.mu.Lock()
	victims := l.cutBelowLocked(offset)
	if len(victims) == 0 {
		l.mu.Unlock()
		return nil
	}
	l.logStart = max(l.logStart, l.segments[0].base)
	l.firstDirty = max(l.firstDirty, l.logStart)
	cp := checkpoint{logStart: l.logStart, firstDirty: l.firstDirty}
	l.mu.Unlock()
	l.logger.Warn("logstore: the log start could not be saved; removing the segments below it first", "dir", l.dir, "offset", offset, "segments", len(victims))
	return l.dropSegments(victims, false, cp)
}

// Truncate drops every batch at or after offset, which must be a batch boundary (the base offset
// of a batch, the log end, or an offset compaction removed), so the log ends at offset — or, for
// an offset inside a gap compaction left, at the end of the last batch below it, the end a
// restart would recover. The
// truncation is durable when Truncate returns. Truncating at or below the log start empties the
// log and restarts it at offset. It returns the new log end offset.
func (l *Log) Truncate(offset int64) (int64, error) {
	l.lockMaint()
	defer l.maintMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	act := l.active()
	l.mu.RUnlock()
	l.stopFill(act) // no zero fill may write past the cut
	l.mu.RLock()
	end, start, perr, closed := l.endOffsetLocked(), l.logStart, l.err, l.closed
	l.mu.RUnlock()
	switch {
	case closed:
		return 0, ErrClosed
	case perr != nil:
		return 0, perr
	case offset >= end:
		return end, nil
	case offset <= start:
		if err := l.truncateFully(offset); err != nil {
			return 0, err
		}
		return offset, l.dropProducers()
	}
	v, from, ok, err := l.viewFor(offset)
	if err != nil || !ok {
		return 0, fmt.Errorf("logstore: truncate to %d: no segment holds it: %v", offset, err)
	}
	defer v.seg.release()
	if from > offset {
		// offset is in a gap before v's segment (a segment that recovery rebuilt ends at its
		// last batch, below the next one's base): the log ends with the segment before it.
		// Cut inside v's segment, the log would end at its base, past offset.
		prev, size, next := l.segmentBefore(v.seg)
		if prev == nil {
			if err := l.truncateFully(offset); err != nil {
				return 0, err
			}
			return offset, l.dropProducers()
		}
		defer prev.release()
		// At its end, not at offset: the compaction point must not stay above the new log end
		// (records appended in [next, offset) would count as cleaned).
		if err := l.cutAt(prev, size, next); err != nil {
			return 0, l.poison("truncate", err)
		}
		if err := l.loadProducers(); err != nil {
			return 0, l.poison("producer state rebuild after truncate", err)
		}
		return l.EndOffset(), nil
	}
	pos, err := v.findBatch(from)
	if err != nil {
		return 0, err
	}
	if base, ok := v.batchBaseAt(pos); ok && base < offset {
		return 0, fmt.Errorf("%w: %d is inside the batch at %d", ErrNotBatchBoundary, offset, base)
	}
	if err := l.cutAt(v.seg, pos, offset); err != nil {
		return 0, l.poison("truncate", err)
	}
	// The producer state must forget the batches cut off: rebuild it from a snapshot below the
	// cut (those above are removed) and the log.
	if err := l.loadProducers(); err != nil {
		return 0, l.poison("producer state rebuild after truncate", err)
	}
	return l.EndOffset(), nil
}

// ResetTo empties the log and restarts it at offset, durably, forgetting every producer: a
// replica whose log ends before its leader's log start starts over from there.
func (l *Log) ResetTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("logstore: reset to negative offset %d", offset)
	}
	l.lockMaint()
	defer l.maintMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	act, perr, closed := l.active(), l.err, l.closed
	l.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case perr != nil:
		return perr
	}
	l.stopFill(act)
	if err := l.truncateFully(offset); err != nil {
		return err
	}
	return l.dropProducers()
}

// batchBaseAt reads the base offset of the batch at pos, if there is one.
func (v *view) batchBaseAt(pos int64) (int64, bool) {
	var base int64
	found := false
	_ = v.walk(pos, func(_ int64, _ int, b, _ int64) bool { base, found = b, true; return false })
	return base, found
}

// segmentBefore returns the segment before s, acquired (the caller releases it), its size and
// its next offset; nil if s is the first.
func (l *Log) segmentBefore(s *segment) (*segment, int64, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i, x := range l.segments {
		if x == s && i > 0 {
			p := l.segments[i-1]
			p.acquire()
			return p, p.size, p.next
		}
	}
	return nil, 0, 0
}

// cutAt truncates segment s's file at pos (where offset's batch, or the first batch after
// offset, starts), removes every later segment, and makes s active. Callers hold maintMu and
// appendMu. Order matters for crashes: the lowered compaction point is persisted first (records
// appended after the cut must be compacted again), later segments are removed durably before s
// is cut (else a crash could leave them behind a hole), and s is synced before anything claims
// durability again.
func (l *Log) cutAt(s *segment, pos, offset int64) error {
	l.mu.RLock()
	cp := checkpoint{logStart: l.logStart, firstDirty: min(l.firstDirty, offset)}
	l.mu.RUnlock()
	if err := writeCheckpoint(l.fs, l.dir, cp); err != nil {
		return err
	}
	l.mu.Lock()
	i := 0
	for l.segments[i] != s {
		i++
	}
	later := append([]*segment(nil), l.segments[i+1:]...)
	l.segments = l.segments[: i+1 : i+1]
	l.firstDirty = cp.firstDirty
	s.size, s.next, s.idx = min(s.size, pos), min(s.next, offset), segmentIndex{} // readers see the cut now
	l.noteTruncationLocked(offset)
	l.mu.Unlock()
	for _, v := range later {
		if err := removeSegmentFiles(l.fs, l.dir, v.base); err != nil {
			return err
		}
		v.release()
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	if err := s.f.Truncate(pos); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} { // s is active again
		if err := l.fs.Remove(segmentName(l.dir, s.base, suffix)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return err
		}
	}
	l.mu.RLock()
	interval := l.cfg.IndexIntervalBytes
	l.mu.RUnlock()
	fresh := newSegment(s.f, s.base) // rebuilt unlocked; s's own reference keeps the file open
	res, err := fresh.scan(math.MaxInt64, interval, false)
	if err == nil && res.reason != nil {
		err = fmt.Errorf("logstore: segment %d after truncation: %w", s.base, res.reason)
	}
	if err != nil {
		return err
	}
	if fresh.next < cp.firstDirty {
		// The cut fell in a gap compaction left (or a segment it emptied): the log ends below
		// offset, and records appended from its end must not count as cleaned. Persisted before
		// any append: a checkpoint above the end would hold after a crash once the log grew.
		cp.firstDirty = fresh.next
		if err := writeCheckpoint(l.fs, l.dir, cp); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.firstDirty = min(l.firstDirty, cp.firstDirty)
	s.size, s.next, s.maxTimestamp, s.maxTsRel, s.firstTs = fresh.size, fresh.next, fresh.maxTimestamp, fresh.maxTsRel, fresh.firstTs
	s.idx, s.bytesSinceIndex, s.created = fresh.idx, fresh.bytesSinceIndex, l.now()
	// Active again, it takes new records, tombstones among them, that no compaction has seen:
	// a first-cleaning stamp kept from before would let the next pass drop them at once
	// instead of after delete.retention.ms. The tombstones below the cut start their clock
	// again (they live longer, never shorter).
	s.cleanedAt = 0
	s.alloc, s.padded = pos, false // the file ends at pos now
	l.durable = s.next
	l.noteTruncationLocked(s.next) // a sync round that started during the cut claims nothing
	return nil
}

// truncateFully removes every segment and restarts the log empty at offset. Callers hold
// maintMu and appendMu.
func (l *Log) truncateFully(offset int64) error {
	l.mu.RLock()
	victims := l.segments
	l.mu.RUnlock()
	for _, s := range victims { // readers keep reading the unlinked files until the swap below
		if err := removeSegmentFiles(l.fs, l.dir, s.base); err != nil {
			return l.poison("truncate", err)
		}
	}
	f, err := l.fs.Create(segmentName(l.dir, offset, logSuffix))
	if err != nil {
		return l.poison("truncate", err)
	}
	ns := newSegment(f, offset)
	ns.created = l.now()
	// The old log's producer snapshots and aborted-transaction index go before the checkpoint
	// commits the empty log (its directory sync makes both durable): found after a crash, a
	// snapshot brought back the old log's producers, an open transaction among them, which no
	// marker would ever close. The caller drops the producer state in memory (dropProducers).
	if err := l.removeProducerFiles(); err != nil {
		ns.release()
		return l.poison("truncate", err)
	}
	cp := checkpoint{logStart: offset, firstDirty: offset}
	if err := writeCheckpoint(l.fs, l.dir, cp); err != nil { // also syncs the directory
		ns.release()
		return l.poison("truncate", err)
	}
	l.mu.Lock()
	l.segments = []*segment{ns}
	l.noteTruncationLocked(offset)
	l.logStart, l.firstDirty, l.durable = offset, offset, offset
	l.mu.Unlock()
	for _, s := range victims {
		s.release()
	}
	return nil
}
