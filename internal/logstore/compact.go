package logstore

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"golang.org/x/time/rate"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/txn"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// Compaction (cleanup.policy=compact) keeps the latest record of every key, at its original
// offset, as Kafka's log cleaner does:
//
//  0. Due: the dirty sealed segments hold min.cleanable.dirty.ratio of the cleanable bytes, or
//     one holds a record older than max.compaction.lag.ms (compactionDue). Cleanable are the
//     sealed segments before the first unstable offset and before the first segment with a
//     record younger than min.compaction.lag.ms.
//  1. Map: read the dirty sealed segments (offsets >= firstDirty, the active segment excluded)
//     and map md5(key) to the key's last offset. The map is bounded (Compactor.MaxKeys); when it
//     fills, the pass stops at a segment boundary and the rest waits for the next pass.
//  2. Rewrite every sealed segment below the mapped end, in groups that fit segment.bytes, into
//     "<base>.log.cleaned": a record survives if no later offset of its key is mapped. Batches
//     keep their base offset and lastOffsetDelta; a batch losing some records is re-encoded (and
//     recompressed with its codec), one losing none is copied as is, and one losing all is
//     dropped, except that an idempotent producer's batch stays as an empty batch so its
//     sequence numbers survive. Records without a key are dropped, as Kafka drops them.
//     Transactional data is compacted as Kafka's cleaner does it (transactionalCleaning below).
//  3. Swap: sync the cleaned file and rename it to "<base>.log.swap" (the commit point; recovery
//     finishes a swap it finds), unlink the replaced segments, rename the swap file over
//     "<base>.log", write its indexes.
//
// Transactions. A pass cleans only below the first unstable offset (the first offset of the
// earliest open transaction), so every transactional batch it reads is decided: aborted if the
// aborted-transaction index has a range of its producer around it, committed otherwise.
//   - Records of committed transactions are ordinary records: they count as newer values and
//     lose to newer ones.
//   - Records of aborted transactions are removed and never count as values.
//   - A transactional batch left with no records is dropped, unless it is one of the batches its
//     producer's state remembers (kept empty, so that its sequence numbers survive a restart).
//   - A COMMIT or ABORT marker is removed once no batch of its transaction is left before it,
//     its delete horizon has passed (as tombstones'), and it is below every producer
//     state snapshot (the producer state a restart or a truncation rebuilds never replays a
//     transaction's records without its marker, and keeps the epoch the marker set).
//
// Tombstones (null values) and markers expire as in Kafka since KIP-534: the first pass that
// keeps one gives its batch a delete horizon, now + delete.retention.ms by the broker's clock
// (the base timestamp holds it, attribute bit 6; the records' timestamp deltas are re-encoded
// from it), and the first pass after the horizon drops it, so a consumer that reads the log
// within delete.retention.ms sees every delete. Only batches with tombstones or markers are
// rewritten for it. A batch compacted by an older version has no horizon: its segment's
// first-compaction stamp (cleanedAt in the index header) stands for it. The broker's clock, not
// the record timestamp, keeps client clocks out of it.

// Compactor runs compaction within an I/O budget shared by every log it cleans.
type Compactor struct {
	limiter *rate.Limiter
	MaxKeys int // bound on the key map: at about 40 bytes a key, 1<<20 keys is ~40 MiB
}

// NewCompactor returns a compactor that reads and writes at most bytesPerSecond (<= 0: no limit).
func NewCompactor(bytesPerSecond int) *Compactor {
	c := &Compactor{limiter: rate.NewLimiter(rate.Inf, 0), MaxKeys: 1 << 20}
	if bytesPerSecond > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(bytesPerSecond), max(bytesPerSecond, 1<<20))
	}
	return c
}

func (c *Compactor) spend(ctx context.Context, n int) error {
	for n > 0 {
		step := min(n, max(c.limiter.Burst(), 1))
		if err := c.limiter.WaitN(ctx, step); err != nil {
			return err
		}
		n -= step
	}
	return nil
}

// CompactStats says what one compaction pass did.
type CompactStats struct {
	SegmentsIn, SegmentsOut int
	BytesRead, BytesWritten int64
	RecordsRemoved          int64
	MarkersRemoved          int64
}

// txnCleaning is what a compaction pass knows of the transactions in the range it cleans.
type txnCleaning struct {
	aborted  map[int64][]txn.Aborted // by producer id: the aborted transactions' ranges
	remember map[int64]bool          // first offsets of the batches the producer state remembers
	floor    int64                   // markers below it may go: the oldest snapshot's offset
	// retained: the producer's transaction being read has a batch left in the cleaned log.
	retained map[int64]bool
}

// transactionalCleaning gathers what a pass cleaning below limit needs about transactions.
func (l *Log) transactionalCleaning(limit int64) (*txnCleaning, error) {
	tc := &txnCleaning{aborted: map[int64][]txn.Aborted{}, remember: map[int64]bool{}, retained: map[int64]bool{}, floor: math.MaxInt64}
	ab, err := l.aborted.collect(l.StartOffset(), limit)
	if err != nil {
		return nil, err
	}
	for _, a := range ab {
		tc.aborted[a.ProducerID] = append(tc.aborted[a.ProducerID], a)
	}
	for _, p := range l.Producers() {
		for _, b := range p.Batches {
			tc.remember[b.FirstOffset] = true
		}
	}
	offsets, err := l.snapshotOffsets()
	if err != nil {
		return nil, err
	}
	if len(offsets) > 0 {
		tc.floor = offsets[0]
	}
	return tc, nil
}

// isAborted reports whether a transactional batch of producer pid at offset belongs to an
// aborted transaction.
func (tc *txnCleaning) isAborted(pid, offset int64) bool {
	for _, a := range tc.aborted[pid] {
		if a.First <= offset && offset <= a.Last {
			return true
		}
	}
	return false
}

// Compact runs one compaction pass over l if its policy includes compact and its dirty ratio
// reaches min.cleanable.dirty.ratio.
func (c *Compactor) Compact(ctx context.Context, l *Log) (CompactStats, error) {
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return CompactStats{}, ErrClosed
	}
	cfg, firstDirty := l.cfg, l.firstDirty
	sealed := append([]*segment(nil), l.segments[:len(l.segments)-1]...)
	for _, s := range sealed {
		s.acquire()
	}
	l.mu.RUnlock()
	defer func() {
		for _, s := range sealed {
			s.release()
		}
	}()
	var st CompactStats
	if !cfg.Compact || len(sealed) == 0 {
		return st, nil
	}
	// Only below the first unstable offset: an open transaction's outcome is not known.
	limit := sealed[len(sealed)-1].next
	if fu := l.firstUnstable.Load(); fu >= 0 {
		limit = min(limit, fu)
	}
	nowMs := l.now().UnixMilli()
	if cfg.MinCompactionLagMs > 0 { // only segments whose newest record is old enough
		for _, s := range sealed {
			if s.next > firstDirty && s.largestTimestamp() > nowMs-cfg.MinCompactionLagMs {
				limit = min(limit, s.base)
				break
			}
		}
	}
	if !compactionDue(sealed, firstDirty, limit, nowMs, cfg) {
		return st, nil
	}
	tc, err := l.transactionalCleaning(limit)
	if err != nil {
		return st, err
	}
	keys, mappedEnd, err := c.buildMap(ctx, l, sealed, firstDirty, limit, tc, &st)
	if errors.Is(err, errYield) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if mappedEnd <= firstDirty {
		return st, nil // the dirty segments hold an open transaction
	}
	for _, group := range groupSegments(sealed, mappedEnd, cfg.SegmentBytes) {
		if err := c.cleanGroup(ctx, l, group, keys, nowMs, tc, &st); errors.Is(err, errYield) {
			return st, nil // groups cleaned so far stand; firstDirty stays, so the next pass redoes the rest
		} else if err != nil {
			return st, err
		}
	}
	l.mu.Lock()
	l.firstDirty = max(l.firstDirty, mappedEnd)
	cp := checkpoint{logStart: l.logStart, firstDirty: l.firstDirty}
	l.mu.Unlock()
	return st, writeCheckpoint(l.fs, l.dir, cp)
}

// compactionDue reports whether a pass is due, as Kafka's cleaner decides: the dirty segments
// below limit hold more than min.cleanable.dirty.ratio of the bytes below limit (strictly, as
// LogCleanerManager.grabFilthiestCompactedLog: a ratio of 1 leaves it to max.compaction.lag.ms), or one of them
// has a record older than max.compaction.lag.ms (its first batch's timestamp; after a restart,
// which keeps only the newest, that one).
func compactionDue(sealed []*segment, firstDirty, limit, nowMs int64, cfg Config) bool {
	var dirty, total int64
	earliest := int64(math.MaxInt64)
	for _, s := range sealed {
		if s.next > limit {
			break
		}
		total += s.size
		if s.next > firstDirty {
			dirty += s.size
			ts := s.firstTs
			if ts < 0 {
				ts = s.maxTimestamp
			}
			if ts >= 0 {
				earliest = min(earliest, ts)
			}
		}
	}
	overdue := cfg.MaxCompactionLagMs < math.MaxInt64 && earliest < nowMs-cfg.MaxCompactionLagMs
	return dirty > 0 && (float64(dirty) > cfg.MinCleanableDirtyRatio*float64(total) || overdue)
}

type keyHash [md5.Size]byte

// errYield stops a compaction pass because truncation, retention, a start-offset move or Close
// is waiting for the log: a pass can take long within its I/O budget, and they must not wait.
var errYield = errors.New("logstore: compaction yields to other maintenance")

// buildMap maps the keys of the dirty segments to their last offsets and returns the offset up
// to which it mapped.
func (c *Compactor) buildMap(ctx context.Context, l *Log, sealed []*segment, firstDirty, limit int64, tc *txnCleaning, st *CompactStats) (map[keyHash]int64, int64, error) {
	keys := make(map[keyHash]int64)
	mappedEnd := firstDirty
	for _, s := range sealed {
		if s.next <= firstDirty {
			continue
		}
		if s.next > limit || len(keys) >= c.MaxKeys && mappedEnd > firstDirty {
			break
		}
		err := c.eachBatch(ctx, l, s, st, func(h *batch.Header, b []byte) error {
			if h.IsControl() || h.IsTransactional() && tc.isAborted(h.ProducerID, h.BaseOffset) || h.LastOffset() < firstDirty {
				return nil
			}
			return eachRecord(h, b, func(rec *batch.Record, offset int64) {
				if rec.Key != nil && offset >= firstDirty {
					keys[md5.Sum(rec.Key)] = offset
				}
			})
		})
		if err != nil {
			return nil, 0, err
		}
		mappedEnd = s.next
	}
	return keys, mappedEnd, nil
}

// groupSegments splits the sealed segments below end into runs that together fit one segment.
func groupSegments(sealed []*segment, end int64, segmentBytes int64) [][]*segment {
	var groups [][]*segment
	var cur []*segment
	var size int64
	for _, s := range sealed {
		if s.next > end {
			break
		}
		if len(cur) > 0 && (size+s.size > segmentBytes || s.next-cur[0].base > math.MaxUint32) {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, s)
		size += s.size
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// eachBatch calls fn with every batch of s, checked again on the way in (the pair of the check
// made on append).
func (c *Compactor) eachBatch(ctx context.Context, l *Log, s *segment, st *CompactStats, fn func(*batch.Header, []byte) error) error {
	var spendErr error
	it := batchIter{f: s.f, end: s.size, onRead: func(n int) {
		st.BytesRead += int64(n)
		if spendErr == nil {
			spendErr = c.spend(ctx, n)
		}
	}}
	for {
		pos, b, ok := it.next()
		if spendErr != nil {
			return spendErr
		}
		if !ok {
			return errors.Join(it.err, it.bad)
		}
		if l.maintWait.Load() > 0 {
			return errYield
		}
		h, err := batch.ValidateStored(b)
		if err != nil {
			return fmt.Errorf("logstore: segment %d position %d: %w", s.base, pos, err)
		}
		if err := fn(&h, b); err != nil {
			return err
		}
	}
}

// eachRecord calls fn with every record of a batch and its offset.
func eachRecord(h *batch.Header, b []byte, fn func(*batch.Record, int64)) error {
	return batch.EachRecord(h, b, func(rec *batch.Record) { fn(rec, h.BaseOffset+int64(rec.OffsetDelta)) })
}

// cleanGroup rewrites a group of segments into one and swaps it in.
func (c *Compactor) cleanGroup(ctx context.Context, l *Log, group []*segment, keys map[keyHash]int64, nowMs int64, tc *txnCleaning, st *CompactStats) error {
	base := group[0].base
	cleanedName := compactionName(l.dir, base, group[len(group)-1].next, cleanedSuffix)
	f, err := l.fs.Create(cleanedName)
	if err != nil {
		return err
	}
	ns := newSegment(f, base)
	for _, s := range group { // the clock of batches without a delete horizon (older versions')
		if s.cleanedAt == 0 {
			ns.cleanedAt = nowMs
			break
		}
		ns.cleanedAt = max(ns.cleanedAt, s.cleanedAt)
	}
	l.mu.RLock()
	interval := l.cfg.IndexIntervalBytes
	deleteRetention := l.cfg.DeleteRetentionMs.Milliseconds()
	l.mu.RUnlock()
	horizon := nowMs + deleteRetention
	var abortsRemoved map[int64]bool // offsets of the ABORT markers this group drops
	for _, s := range group {
		// A batch compacted before delete horizons were set carries none: its segment's
		// first-compaction stamp stands for it.
		legacyExpired := s.cleanedAt != 0 && s.cleanedAt <= nowMs-deleteRetention
		err := c.eachBatch(ctx, l, s, st, func(h *batch.Header, b []byte) error {
			hz, hasHorizon := h.DeleteHorizon()
			expired := hasHorizon && hz <= nowMs || !hasHorizon && legacyExpired
			keep := func(rec *batch.Record, offset int64) bool {
				if rec.Key == nil {
					return false
				}
				if last, ok := keys[md5.Sum(rec.Key)]; ok && last > offset {
					return false
				}
				return rec.Value != nil || !expired
			}
			var out []byte
			var removed int
			var err error
			switch {
			case h.IsControl():
				switch {
				case tc.retained[h.ProducerID]:
					out = b // its transaction keeps a record: no clock yet
				case expired && h.BaseOffset < tc.floor:
					st.MarkersRemoved++
					if c, err := batch.ParseControl(h, b); err == nil && c.Type == batch.ControlAbort {
						if abortsRemoved == nil {
							abortsRemoved = map[int64]bool{}
						}
						abortsRemoved[h.BaseOffset] = true
					}
				case !hasHorizon && !expired:
					out, _, err = batch.Filter(h, b, func(*batch.Record, int64) bool { return true }, false, horizon)
				default:
					out = b
				}
				delete(tc.retained, h.ProducerID)
			case h.IsTransactional():
				k := keep
				if tc.isAborted(h.ProducerID, h.BaseOffset) {
					k = func(*batch.Record, int64) bool { return false }
				}
				out, removed, err = batch.Filter(h, b, k, tc.remember[h.BaseOffset], horizon)
				if out != nil {
					tc.retained[h.ProducerID] = true
				}
			default:
				// An emptied batch of an idempotent producer stays only if the producer state
				// remembers it (its last sequences, for deduplication after a replay), as Kafka
				// keeps an active producer's last batch: kept all, they would hold 61 bytes per
				// batch ever written.
				out, removed, err = batch.Filter(h, b, keep, h.ProducerID >= 0 && tc.remember[h.BaseOffset], horizon)
			}
			if err != nil || out == nil {
				st.RecordsRemoved += int64(removed)
				return err
			}
			oh, err := batch.ValidateStored(out) // check right before writing
			if err != nil {
				panic(fmt.Sprintf("logstore: compaction built an invalid batch at %d: %v", h.BaseOffset, err))
			}
			if err := c.spend(ctx, len(out)); err != nil {
				return err
			}
			if _, err := f.WriteAt(out, ns.size); err != nil {
				return err
			}
			st.BytesWritten += int64(len(out))
			st.RecordsRemoved += int64(removed)
			ns.track(&oh, ns.size, interval)
			return nil
		})
		if err != nil {
			ns.release()
			_ = l.fs.Remove(cleanedName)
			return err
		}
	}
	ns.next = group[len(group)-1].next
	st.SegmentsIn += len(group)
	st.SegmentsOut++
	// The dropped markers' transactions leave the index before the swap: a crash between the
	// two leaves a marker whose transaction has no record left (only empty batches), which a
	// fetch need not report; the other way round, the index would keep them for good.
	if err := l.aborted.remove(abortsRemoved, l.dir); err != nil {
		ns.release()
		_ = l.fs.Remove(cleanedName)
		return err
	}
	return l.swapIn(group, ns)
}

// Compaction output files are named by the offset range of the group they replace, so that a
// recovery that finds a committed swap knows exactly which segments it replaces:
// "<base>-<end>.log.cleaned" while written, "<base>-<end>.log.swap" once committed, where end is
// the next offset of the group (the base of the segment after it).
func compactionName(dir string, base, end int64, suffix string) string {
	return fmt.Sprintf("%s/%020d-%020d%s", dir, base, end, suffix)
}

func parseCompactionName(name, suffix string) (base, end int64, ok bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 41 || stem[20] != '-' {
		return 0, 0, false
	}
	base, err1 := strconv.ParseInt(stem[:20], 10, 64)
	end, err2 := strconv.ParseInt(stem[21:], 10, 64)
	return base, end, err1 == nil && err2 == nil && base >= 0 && end >= base
}

// swapIn commits a cleaned segment in place of the group it replaces. Any failure after the
// commit point poisons the log: only a reopen (whose recovery finishes the swap) may touch it.
func (l *Log) swapIn(group []*segment, ns *segment) error {
	base, end := ns.base, ns.next
	cleaned, swap := compactionName(l.dir, base, end, cleanedSuffix), compactionName(l.dir, base, end, swapSuffix)
	if err := ns.f.Sync(); err != nil {
		ns.release()
		_ = l.fs.Remove(cleaned)
		return err
	}
	if err := l.fs.Rename(cleaned, swap); err != nil {
		ns.release()
		_ = l.fs.Remove(cleaned)
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil { // the commit point
		ns.release()
		return l.poison("compaction commit", err)
	}
	l.mu.Lock()
	i := 0
	for l.segments[i] != group[0] {
		i++
	}
	segs := append([]*segment(nil), l.segments[:i]...)
	segs = append(segs, ns)
	l.segments = append(segs, l.segments[i+len(group):]...)
	l.mu.Unlock()
	for _, s := range group {
		s.release() // the list's reference; the compactor still holds its own
	}
	if err := l.placeSwap(swap, base, end, ns); err != nil {
		return l.poison("compaction swap", err)
	}
	return nil
}

// placeSwap moves a committed swap file into place: it unlinks the segments in (base, end),
// renames the swap file over the segment at base, and writes the new indexes (ns nil: recovery
// rebuilds them). Recovery runs it again if a crash interrupts it; every step is idempotent.
func (l *Log) placeSwap(swap string, base, end int64, ns *segment) error {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if b, ok := parseSegmentName(n, logSuffix); ok && b > base && b < end {
			if err := removeSegmentFiles(l.fs, l.dir, b); err != nil {
				return err
			}
		}
	}
	// The old indexes of base must be gone, durably, before the new log takes its name: an index
	// is trusted when its recorded log size matches, and the new log could have the old size.
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := l.fs.Remove(segmentName(l.dir, base, suffix)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return err
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	if err := l.fs.Rename(swap, segmentName(l.dir, base, logSuffix)); err != nil {
		return err
	}
	if ns != nil { // ns is published and sealed: its fields no longer change
		if err := ns.writeIndexes(l.fs, l.dir); err != nil {
			return err
		}
	}
	return l.fs.SyncDir(l.dir)
}

// finishSwap completes, at recovery, a compaction that committed its swap file.
func (l *Log) finishSwap(name string) error {
	base, end, ok := parseCompactionName(name, swapSuffix)
	if !ok {
		return nil
	}
	l.logger.Info("logstore: finishing an interrupted compaction", "segment", base, "end", end)
	return l.placeSwap(l.dir+"/"+name, base, end, nil)
}
