package logstore

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/txn"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// Errors returned by a Log.
var (
	ErrOffsetOutOfRange = errors.New("logstore: offset out of range")
	ErrClosed           = errors.New("logstore: log is closed")
	ErrNotBatchBoundary = errors.New("logstore: offset is not a batch boundary")
	ErrTruncated        = errors.New("logstore: truncated while waiting for durability")
	ErrPoisoned         = errors.New("logstore: log poisoned by a failed write or sync")
)

// Options configure Open.
type Options struct {
	FS      vfs.FS       // defaults to vfs.Default
	Dir     string       // the partition's directory; created if missing
	Config  Config       // validated by Open
	Flusher *Flusher     // the group-commit flusher shared by the logs of a disk; required
	Logger  *slog.Logger // defaults to slog.Default()
	Now     func() time.Time
}

// Log is the log of one partition: segments of Kafka v2 batches with their indexes.
//
// Lock order: maintMu, then appendMu, then mu, then Flusher.mu. maintMu serialises maintenance
// (retention, compaction, truncation, start-offset moves); appendMu serialises appends and rolls;
// mu guards the fields below it (appends Lock it only to publish, readers RLock it briefly and do
// their I/O outside it, holding a segment reference).
type Log struct {
	fs      vfs.FS
	dir     string
	flusher *Flusher
	scope   *syncScope // the file system one SyncFS covers with other logs'; nil: fsync only
	logger  *slog.Logger
	now     func() time.Time

	maintMu  sync.Mutex
	appendMu sync.Mutex

	mu         sync.RWMutex
	cfg        Config
	segments   []*segment // ascending by base; the last is active
	logStart   int64
	firstDirty int64 // compaction has cleaned every offset below
	err        error // the first write or sync failure; the log is poisoned
	reopenable bool  // err is a write refused for want of space (Reopenable)
	closed     bool
	truncGen   uint64       // bumped by Truncate so a sync that started before it claims nothing
	truncs     []truncation // recent truncations, for waiters that a truncation overtook
	maintWait  atomic.Int32 // operations waiting for maintMu: a compaction pass yields to them

	producers *txn.Partition // idempotent producer state; guarded by appendMu
	aborted   *abortedIndex  // the aborted-transaction index (aborted.go)
	// firstUnstable is producers.FirstUnstable(), published for readers (-1: no open transaction).
	firstUnstable atomic.Int64

	durable   int64  // every offset below is durable
	onDurable func() // called when durable moves (SetDurableHook)
	// retentionBound, if set, is the offset retention may not delete at or past (SetRetentionBound);
	// called without the log's locks.
	retentionBound func() int64
	durableCh      chan struct{} // closed (and replaced) when durable moves or err is set
	syncQueued     bool          // the log waits in the flusher's queue
	dirDirty       bool          // a segment file was created since the directory was last synced
	unsynced       int64         // bytes appended since the last sync started
	unsyncedMsgs   int64         // records appended since the last sync started
	unsyncedSince  time.Time     // when the oldest unsynced append happened (zero: none)
	unsyncedBatch  int64         // batches appended since the last sync started
	// What the sync in flight covers (zero when none runs), for FlushLag.
	syncing      int64
	syncingMsgs  int64
	syncingSince time.Time

	// Preallocation (prealloc.go).
	fill      *zeroFill       // the zero fill in progress, or nil
	appended  int64           // bytes appended while preallocation applies, for the write rate
	rate      float64         // bytes/s appended, measured over at least rateWindow
	rateAt    time.Time       // start of the current rate window
	rateBytes int64           // appended at rateAt
	fillRetry time.Time       // no fill before this (set after a failed one)
	spawnFill func(*zeroFill) // runs a fill: in a goroutine (tests may run it otherwise)
}

// truncation records that the log was cut back to offset at generation gen.
type truncation struct {
	gen    uint64
	offset int64
}

// maxTruncHistory bounds Log.truncs; a waiter older than the history assumes the worst.
const maxTruncHistory = 16

// noteTruncationLocked bumps the generation, records the cut, and wakes durability waiters so
// they can tell that their offsets are gone. Callers hold mu.
func (l *Log) noteTruncationLocked(offset int64) {
	l.truncGen++
	l.truncs = append(l.truncs, truncation{l.truncGen, offset})
	if len(l.truncs) > maxTruncHistory {
		l.truncs = l.truncs[len(l.truncs)-maxTruncHistory:]
	}
	close(l.durableCh)
	l.durableCh = make(chan struct{})
}

// truncatedSinceLocked returns the lowest offset cut since generation gen, or ok=false if none.
func (l *Log) truncatedSinceLocked(gen uint64) (int64, bool) {
	if gen == l.truncGen {
		return 0, false
	}
	if len(l.truncs) == 0 || l.truncs[0].gen > gen+1 {
		return 0, true // older than the history: assume everything was cut
	}
	low, found := int64(math.MaxInt64), false
	for _, t := range l.truncs {
		if t.gen > gen {
			low, found = min(low, t.offset), true
		}
	}
	return low, found
}

// lockMaint takes maintMu, first telling a running compaction pass to yield.
func (l *Log) lockMaint() {
	l.maintWait.Add(1)
	l.maintMu.Lock()
	l.maintWait.Add(-1)
}

// writebackBytes is how much unsynced data a log accumulates before it asks the flusher for a
// sync on its own, with nobody waiting. It bounds the fsync a roll has to do under appendMu (a
// roll syncs the sealed segment), which would otherwise stall every appender for as long as
// writing out a whole segment takes.
const writebackBytes = 32 << 20

// Open opens or creates the log in opts.Dir and recovers it: interrupted compactions are
// finished or discarded, stale or missing indexes are rebuilt, and a torn or corrupt tail is
// truncated. Every batch that was synced before a crash is there afterwards; nothing else is.
func Open(opts Options) (*Log, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Flusher == nil {
		return nil, errors.New("logstore: Options.Flusher is required")
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	l := &Log{
		fs: opts.FS, dir: strings.TrimSuffix(opts.Dir, "/"), flusher: opts.Flusher,
		logger: opts.Logger.With("dir", opts.Dir), now: opts.Now, cfg: opts.Config,
		durableCh: make(chan struct{}),
	}
	l.spawnFill = func(f *zeroFill) { go l.runFill(f) }
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	if s, ok := l.fs.(vfs.FSSyncer); ok {
		if key, ok := s.SyncFSScope(l.dir); ok {
			l.scope = &syncScope{fs: s, key: key}
		}
	}
	if err := l.recover(); err != nil {
		for _, s := range l.segments {
			s.release()
		}
		if l.aborted != nil {
			l.aborted.close()
		}
		err = fmt.Errorf("logstore: recovering %s: %w", l.dir, err)
		// A failed write or sync of the recovery may have lost the log's unsynced tail, and
		// the kernel reports a writeback error once: a retry may open it.
		l.flusher.poisoned(err)
		return nil, err
	}
	l.flusher.register(l)
	return l, nil
}

// recover loads the segments; see Open.
func (l *Log) recover() error {
	bases, err := l.tidyDir()
	if err != nil {
		return err
	}
	cp, _, err := readCheckpoint(l.fs, l.dir)
	switch {
	case errors.Is(err, errBadCheckpoint):
		l.logger.Warn("logstore: the checkpoint file is damaged; the log starts at its first segment", "dir", l.dir)
		cp = checkpoint{}
	case err != nil:
		return err
	}
	for i, base := range bases {
		f, err := l.fs.OpenReadWrite(segmentName(l.dir, base, logSuffix))
		if err != nil {
			return err
		}
		s := newSegment(f, base)
		l.segments = append(l.segments, s)
		last := i == len(bases)-1
		if !last && s.loadIndexes(l.fs, l.dir) {
			continue
		}
		limit := int64(math.MaxInt64)
		if !last {
			limit = bases[i+1]
		}
		res, err := s.scan(limit, l.cfg.IndexIntervalBytes, last)
		if err != nil {
			return err
		}
		if res.reason != nil {
			if err := l.cutAfter(s, res, bases[i+1:]); err != nil {
				return err
			}
			break
		}
		if res.fileSize > res.end { // preallocated zeros a crash left behind
			l.logger.Info("logstore: cutting preallocated zeros after the last batch", "segment", s.base,
				"position", res.end, "bytes", res.fileSize-res.end)
			if err := s.f.Truncate(res.end); err != nil { // synced below, with the rest of the tail
				return err
			}
		}
	}
	if len(l.segments) == 0 {
		if err := l.createSegment(cp.logStart); err != nil {
			return err
		}
	}
	l.logStart = max(cp.logStart, l.segments[0].base)
	if l.logStart > l.endOffsetLocked() {
		l.logStart = l.endOffsetLocked()
	}
	l.firstDirty = min(max(cp.firstDirty, l.logStart), l.endOffsetLocked())
	// The recovered tail may sit in the page cache only: make it durable before claiming it is.
	if err := l.active().f.Sync(); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	l.durable = l.endOffsetLocked()
	l.active().created = l.now()
	if l.aborted, err = openAbortedIndex(l.fs, l.dir); err != nil {
		return err
	}
	return l.loadProducers()
}

// cutAfter truncates segment s where its scan stopped and removes every later segment: nothing
// after a bad batch can be trusted to follow it.
func (l *Log) cutAfter(s *segment, res scanResult, later []int64) error {
	l.logger.Warn("logstore: truncating a torn or corrupt tail", "segment", s.base, "position", res.end,
		"reason", res.reason, "later_segments_removed", len(later))
	// Later segments go first, durably: a crash in between must not leave them behind a cut
	// segment, which would be a hole in the offsets.
	for _, base := range later {
		if err := removeSegmentFiles(l.fs, l.dir, base); err != nil {
			return err
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	if err := s.f.Truncate(res.end); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	// Stale index files would describe a different size; drop them so nobody trusts them.
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := l.fs.Remove(segmentName(l.dir, s.base, suffix)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return err
		}
	}
	return l.fs.SyncDir(l.dir)
}

// tidyDir finishes or discards interrupted operations and returns the segment bases, ascending.
func (l *Log) tidyDir() ([]int64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if strings.HasSuffix(name, swapSuffix) {
			if err := l.finishSwap(name); err != nil {
				return nil, err
			}
		}
	}
	if names, err = l.fs.List(l.dir); err != nil {
		return nil, err
	}
	var bases []int64
	logs := map[int64]bool{}
	for _, name := range names {
		if base, ok := parseSegmentName(name, logSuffix); ok {
			bases = append(bases, base)
			logs[base] = true
		}
	}
	for _, name := range names {
		base, isIndex := parseSegmentName(name, indexSuffix)
		if !isIndex {
			base, isIndex = parseSegmentName(name, timeIndexSuffix)
		}
		if (isIndex && !logs[base]) || strings.HasSuffix(name, cleanedSuffix) || name == checkpointName+".tmp" || name == abortedName+".tmp" {
			if err := l.fs.Remove(l.dir + "/" + name); err != nil {
				return nil, err
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

func parseSegmentName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil && base >= 0
}

func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

func (l *Log) endOffsetLocked() int64 { return l.active().next }

// createSegment creates an empty active segment at base. Callers hold appendMu (or own l).
func (l *Log) createSegment(base int64) error {
	f, err := l.fs.Create(segmentName(l.dir, base, logSuffix))
	if err != nil {
		return err
	}
	s := newSegment(f, base)
	s.created = l.now()
	l.mu.Lock()
	l.segments = append(l.segments, s)
	l.dirDirty = true
	l.mu.Unlock()
	return nil
}

// Append validates b as one producer batch, assigns its base offset and sets its
// partitionLeaderEpoch (both outside the CRC, so b is otherwise written as received), and writes
// it to the active segment. It returns the batch's first and last offsets. The batch is durable
// only once WaitDurable(last+1) returns nil.
//
// Append writes the two fields into b; the caller keeps ownership of b.
func (l *Log) Append(b []byte, leaderEpoch int32) (first, last int64, err error) {
	r, err := l.AppendBatch(b, leaderEpoch)
	return r.First, r.Last, err
}

// AppendBatch is Append for producer batches: a batch of an idempotent producer is checked
// against the partition's producer state first (package txn). A duplicate of one of the
// producer's last batches is not written; the result names the original. A batch that breaks
// the sequence rules is refused with Kafka's error (OUT_OF_ORDER_SEQUENCE_NUMBER,
// INVALID_PRODUCER_EPOCH), and nothing is written.
func (l *Log) AppendBatch(b []byte, leaderEpoch int32) (AppendResult, error) {
	h, err := batch.Validate(b)
	if err != nil {
		return AppendResult{}, err
	}
	if h.IsControl() {
		return AppendResult{}, fmt.Errorf("%w: a producer may not write control batches", kerr.InvalidRecord)
	}
	return l.appendProducerBatch(b, &h, leaderEpoch, false)
}

// AppendCoordinatorBatch appends a transactional batch a coordinator writes on a producer's
// behalf (TxnOffsetCommit's offsets): no sequence (-1), only the producer's epoch is checked, and
// it opens the producer's transaction on the partition like any transactional batch.
func (l *Log) AppendCoordinatorBatch(b []byte, leaderEpoch int32) (AppendResult, error) {
	h, err := batch.Validate(b)
	if err != nil {
		return AppendResult{}, err
	}
	if !h.IsTransactional() || h.IsControl() || h.ProducerID < 0 || h.BaseSequence >= 0 {
		return AppendResult{}, fmt.Errorf("%w: a coordinator batch must be transactional, with a producer id and no sequence", kerr.InvalidRecord)
	}
	return l.appendProducerBatch(b, &h, leaderEpoch, true)
}

func (l *Log) appendProducerBatch(b []byte, hp *batch.Header, leaderEpoch int32, coordinator bool) (AppendResult, error) {
	h := *hp
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	pb := producerBatch(&h)
	if pb.NoSequence && !coordinator {
		return AppendResult{}, fmt.Errorf("%w: a transactional batch without a sequence", kerr.InvalidRecord)
	}
	if h.ProducerID >= 0 {
		dup, err := l.producers.Check(pb)
		if err != nil {
			return AppendResult{}, err
		}
		if dup != nil {
			return AppendResult{First: dup.FirstOffset, Last: dup.LastOffset, Duplicate: true, MaxTimestamp: dup.MaxTimestamp}, nil
		}
	}
	first, last, err := l.appendLocked(b, &h, -1, leaderEpoch)
	if err != nil {
		return AppendResult{}, err
	}
	if h.ProducerID >= 0 {
		l.producers.Apply(pb, first, h.MaxTimestamp, leaderEpoch)
		l.firstUnstable.Store(l.producers.FirstUnstable())
	}
	return AppendResult{First: first, Last: last}, nil
}

// AppendMarker writes a transaction marker (a COMMIT or ABORT control batch) for a producer,
// as the transaction coordinator asks, and closes the producer's open transaction on the
// partition. A marker from an older producer epoch than the partition knows is refused
// (INVALID_PRODUCER_EPOCH), as is one from an older coordinator epoch
// (TRANSACTION_COORDINATOR_FENCED). It returns the marker's offset.
func (l *Log) AppendMarker(m txn.Marker, leaderEpoch int32, timestampMs int64) (int64, error) {
	b := m.AppendBatch(nil, timestampMs)
	h, err := batch.ValidateStored(b)
	if err != nil {
		return 0, err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.producers.CheckMarker(m); err != nil {
		return 0, err
	}
	first, _, err := l.appendLocked(b, &h, -1, leaderEpoch)
	if err != nil {
		return 0, err
	}
	return first, l.applyMarker(m, first, timestampMs)
}

// AppendNoOp writes a total-order shard's no-op entry (batch.NoOp: one control batch spanning
// n.Slots offsets) as leader, and returns its first and last offset.
func (l *Log) AppendNoOp(n batch.NoOp, leaderEpoch int32, timestampMs int64) (first, last int64, err error) {
	b := batch.AppendNoOp(nil, n, timestampMs)
	h, err := batch.ValidateStored(b)
	if err != nil {
		return 0, 0, err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.appendLocked(b, &h, -1, leaderEpoch)
}

// applyMarker applies an appended marker to the producer state and indexes the transaction it
// aborted. The caller holds appendMu.
func (l *Log) applyMarker(m txn.Marker, offset, timestampMs int64) error {
	ab := l.producers.ApplyMarker(m, offset, timestampMs)
	fu := l.producers.FirstUnstable()
	l.firstUnstable.Store(fu)
	if ab == nil {
		return nil
	}
	stable := offset + 1
	if fu >= 0 {
		stable = fu
	}
	if err := l.aborted.add(abortedEntry{Aborted: *ab, LastStable: stable}); err != nil {
		return l.poison("aborted-transaction index write", err)
	}
	return nil
}

// markerOf reads the marker in a stored control batch.
func markerOf(h *batch.Header, b []byte) (txn.Marker, error) {
	c, err := batch.ParseControl(h, b)
	if err != nil {
		return txn.Marker{}, err
	}
	return txn.Marker{ProducerID: h.ProducerID, Epoch: h.ProducerEpoch, Commit: c.Type == batch.ControlCommit, CoordinatorEpoch: c.CoordinatorEpoch}, nil
}

// FirstUnstableOffset is the first offset of the earliest open transaction, or -1 if none is
// open. A read_committed reader may read below min(high watermark, it): the last stable offset.
func (l *Log) FirstUnstableOffset() int64 { return l.firstUnstable.Load() }

// LastStable returns the last stable offset for a high watermark hw. It is never below the log
// start (Kafka raises the first unstable offset to it): an open transaction whose first
// batches retention or DeleteRecords removed holds it at the log start, so a read_committed
// reader below the start is told OFFSET_OUT_OF_RANGE rather than parked there.
func (l *Log) LastStable(hw int64) int64 {
	if fu := l.firstUnstable.Load(); fu >= 0 && fu < hw {
		return max(fu, min(l.StartOffset(), hw))
	}
	return hw
}

// AbortedTransactions returns the aborted transactions with records in [from, upto), as a
// read_committed fetch of that range reports them.
func (l *Log) AbortedTransactions(from, upto int64) ([]txn.Aborted, error) {
	return l.aborted.collect(from, upto)
}

// ErrNotAtEnd is returned by AppendReplica for a batch that does not start at or after the log
// end: the follower's log and the leader's disagree.
var ErrNotAtEnd = errors.New("logstore: replicated batch does not start at the log end")

// AppendReplica appends a batch exactly as the partition's leader wrote it: its base offset and
// partitionLeaderEpoch are kept. The base offset must be at or past the log end (past it only
// where the leader's compaction left a gap). Only the stored form is checked (length, magic,
// CRC): the leader validated the records. The batch is applied to the producer state without
// the sequence checks, so a follower that becomes leader deduplicates as the old leader did.
func (l *Log) AppendReplica(b []byte) (first, last int64, err error) {
	h, err := batch.ValidateStored(b)
	if err != nil {
		return 0, 0, err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if end := l.EndOffset(); h.BaseOffset < end {
		return 0, 0, fmt.Errorf("%w: batch at %d, log end %d", ErrNotAtEnd, h.BaseOffset, end)
	}
	var m txn.Marker
	marker := h.IsControl() && h.IsTransactional() // not a total-order no-op entry
	if h.IsControl() && !marker {
		if _, err := batch.ParseNoOp(&h, b); err != nil {
			return 0, 0, err
		}
	}
	if marker { // parsed before the append: a marker the state cannot take is not written
		if m, err = markerOf(&h, b); err != nil {
			return 0, 0, err
		}
	}
	first, last, err = l.appendLocked(b, &h, h.BaseOffset, h.LeaderEpoch)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case marker:
		err = l.applyMarker(m, first, h.MaxTimestamp)
	case h.IsControl(): // a no-op entry: no producer state
	case h.ProducerID >= 0:
		l.producers.Apply(producerBatch(&h), first, h.MaxTimestamp, h.LeaderEpoch)
		l.firstUnstable.Store(l.producers.FirstUnstable())
	}
	return first, last, err
}

// appendLocked writes the validated batch b at base (-1: at the log end, stamping the base
// offset and leaderEpoch into b); the caller holds appendMu.
func (l *Log) appendLocked(b []byte, hp *batch.Header, base int64, leaderEpoch int32) (first, last int64, err error) {
	h := *hp
	l.mu.RLock()
	err, closed, act, cfg, filling := l.err, l.closed, l.active(), l.cfg, l.fill != nil
	l.mu.RUnlock()
	switch {
	case closed:
		return 0, 0, ErrClosed
	case err != nil:
		return 0, 0, err
	}
	first = act.next
	if base >= 0 {
		first = base
	}
	last = first + int64(h.LastOffsetDelta)
	now := l.now()
	if act.size > 0 && (act.size+int64(len(b)) > cfg.SegmentBytes || act.waitedForRoll(h.MaxTimestamp, now) >= cfg.SegmentMs-act.rollJitter(&cfg) || !act.fits(last)) {
		if act, err = l.roll(act); err != nil {
			return 0, 0, err
		}
	}
	if base < 0 {
		batch.SetBaseOffset(b, first)
		batch.SetLeaderEpoch(b, leaderEpoch)
		h.BaseOffset, h.LeaderEpoch = first, leaderEpoch
	}
	if filling { // only a fill that runs now can overlap: new ones start under appendMu
		l.waitFill(act, act.size+int64(len(b)))
	}
	if _, err := act.f.WriteAt(b, act.size); err != nil {
		return 0, 0, l.poison("write", err)
	}
	l.mu.Lock()
	act.track(&h, act.size, cfg.IndexIntervalBytes)
	fill := l.noteAppendLocked(act, len(b), &cfg, now)
	l.unsynced += int64(len(b))
	l.unsyncedMsgs += int64(h.RecordCount)
	l.unsyncedBatch++
	if l.unsyncedSince.IsZero() {
		l.unsyncedSince = now
		l.flusher.markDirty(l)
	}
	if l.unsynced >= writebackBytes || (cfg.FlushBytes > 0 && l.unsynced >= cfg.FlushBytes) ||
		(cfg.FlushMessages > 0 && l.unsyncedMsgs >= cfg.FlushMessages) {
		l.queueSyncLocked()
	}
	l.mu.Unlock()
	if fill != nil {
		l.spawnFill(fill)
	}
	return first, last, nil
}

// roll seals the active segment (synced, with its index files) and starts a new one. Syncing at
// roll keeps an invariant recovery relies on: only the last segment can have a torn tail.
func (l *Log) roll(act *segment) (*segment, error) {
	l.stopFill(act)
	if err := l.Err(); err != nil { // the fill's fsync may have failed meanwhile
		return nil, err
	}
	if err := l.trimPadding(act); err != nil {
		return nil, l.poison("trim at roll", err)
	}
	if err := act.f.Sync(); err != nil {
		return nil, l.poison("sync at roll", err)
	}
	// No lock needed: act's fields change only under appendMu, which the caller holds.
	if err := act.writeIndexes(l.fs, l.dir); err != nil {
		return nil, l.poison("index write at roll", err)
	}
	// The producer state as of the roll: everything below act.next, which is synced now. Losing
	// it costs only a longer replay at recovery, so a failure is not fatal.
	if err := l.writeSnapshot(act.next); err != nil {
		l.logger.Warn("logstore: writing the producer state snapshot", "offset", act.next, "err", err)
	}
	if err := l.createSegment(act.next); err != nil {
		return nil, l.poison("segment create", err)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active(), nil
}

// poison records the first write or sync failure and returns it. Every later append and every
// wait for durability returns it; nothing written after it is ever reported durable. The
// durability hook hears of it on a goroutine of its own: the caller may hold appendMu or
// maintMu, which the hook's owner takes while holding its own lock (Replica.mu around appends
// and truncations).
// Poison makes the log read-only after a failure of its owner's that concerns it (a replica's
// epoch file could not be written): the registry then treats it as any log a failed write
// poisoned (counted offline; opened again if the failure was a write refused for want of
// space). The first failure stays; it returns the log's error.
func (l *Log) Poison(op string, err error) error { return l.poison(op, err) }

func (l *Log) poison(op string, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := l.err == nil
	perr := l.poisonLocked(op, err)
	if hook := l.onDurable; first && hook != nil {
		go hook()
	}
	return perr
}

func (l *Log) poisonLocked(op string, err error) error {
	if l.err == nil {
		l.err = fmt.Errorf("%w: %s failed; the log is read-only until reopened: %w", ErrPoisoned, op, err)
		l.reopenable = !strings.HasPrefix(op, "sync") && !vfs.IsSyncError(err) && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT))
		l.logger.Error("logstore: log poisoned", "op", op, "err", err)
		l.flusher.poisoned(l.err) // before any waiter hears of it
		close(l.durableCh)
		l.durableCh = make(chan struct{})
	}
	return l.err
}

// Reopenable reports whether the log was poisoned by an operation refused for want of space (a
// full disk or quota, ENOSPC or EDQUOT, not at an fsync): such a failure loses nothing the
// kernel had taken, so the log may be opened again once there is room, its recovery cutting
// what was half written. A failed fsync may have had the kernel drop the pages it could not
// write while they still read back from the page cache: such a log waits for a restart, whose
// registration says this node may have lost writes (the boot mark is gone).
func (l *Log) Reopenable() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.err != nil && l.reopenable
}

// Err returns the error that poisoned the log, or nil.
func (l *Log) Err() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.err
}

// StartOffset is the log start offset: the first offset a read may ask for.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart
}

// EndOffset is the log end offset: the offset the next appended record gets.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.endOffsetLocked()
}

// HighWatermark is the offset below which readers may read: the log end with WriteCaching,
// else the durable offset. (On one node; replication will lower it to what a quorum has.)
func (l *Log) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.cfg.WriteCaching {
		return l.endOffsetLocked()
	}
	return l.durable
}

// WriteCaching reports the log's WriteCaching setting (cheaper than Config on hot paths).
func (l *Log) WriteCaching() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg.WriteCaching
}

// DurableChanged returns a channel closed the next time the durable offset moves (or the log is
// poisoned or closed), for readers waiting on the high watermark.
func (l *Log) DurableChanged() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durableCh
}

// DurableOffset is the offset below which every record is durable.
func (l *Log) DurableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durable
}

// Size is the total size of the log's segment files in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// SetConfig changes the configuration; it applies from the next append or maintenance run.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	l.cfg = cfg
	l.mu.Unlock()
	return nil
}

// Config returns the current configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// Close syncs the log and closes its files. Readers holding slices keep their files open until
// they release them.
func (l *Log) Close() error {
	l.lockMaint()
	defer l.maintMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.flusher.unregister(l)
	segs := l.segments
	act, end := l.active(), l.endOffsetLocked()
	l.mu.Unlock()
	l.stopFill(act)
	perr := l.Err() // after the fill: its fsync may have failed
	var err error
	if perr == nil {
		err = l.trimPadding(act)
	}
	if perr == nil && err == nil {
		err = act.f.Sync()
		// A snapshot at the (now durable) end spares the next Open a replay.
		if err == nil {
			if serr := l.writeSnapshot(end); serr != nil {
				l.logger.Warn("logstore: writing the producer state snapshot", "offset", end, "err", serr)
			}
		}
		l.mu.RLock()
		dirDirty := l.dirDirty
		l.mu.RUnlock()
		if err == nil && dirDirty {
			err = l.fs.SyncDir(l.dir) // a segment or snapshot created since the last sync must survive too
		}
	}
	for _, s := range segs {
		s.release()
	}
	err = errors.Join(err, l.aborted.close())
	l.mu.Lock()
	close(l.durableCh)
	l.durableCh = make(chan struct{})
	l.mu.Unlock()
	return err
}
