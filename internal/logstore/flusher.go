package logstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// Flusher group-commits fsyncs for many logs. A waiter queues its log and sleeps; the flusher's
// goroutine takes everything queued, syncs those logs concurrently, and wakes their waiters.
// While a round runs, new requests queue up for the next one, so under load every fsync covers
// the appends of many waiters, on one partition and across partitions.
type Flusher struct {
	mu     sync.Mutex
	queue  []*Log
	logs   map[*Log]struct{} // every open log
	dirty  map[*Log]struct{} // logs that had unsynced data at their last append: the flush.ms check
	wake   chan struct{}     // buffered 1: "the queue is not empty"
	done   chan struct{}
	exited chan struct{}

	maxParallel int

	onPoison atomic.Pointer[func(error)] // OnPoison's function

	// Counters, for metrics and tests.
	Rounds atomic.Int64 // sync rounds run
	Syncs  atomic.Int64 // sync calls made: a log's fsync, or one SyncFS for several logs (directory syncs not counted)

	preallocFills, preallocBytes atomic.Int64 // zero fills of the logs (prealloc.go)

	syncSeconds    *Histogram
	batchesPerSync *Histogram
	logsPerRound   *Histogram
}

// OnPoison has fn called with the failure of every log of this flusher that a failed write or
// sync poisons, or whose recovery fails (Open): that log's unsynced writes may be lost. It is
// called before the failure is returned to anyone, with the log's lock held: fn must be quick
// and must not use the log.
func (f *Flusher) OnPoison(fn func(error)) { f.onPoison.Store(&fn) }

func (f *Flusher) poisoned(err error) {
	if fn := f.onPoison.Load(); fn != nil {
		(*fn)(err)
	}
}

// NewFlusher starts a flusher. maxParallel bounds the fsyncs in flight at once (<= 0: 16).
func NewFlusher(maxParallel int) *Flusher {
	if maxParallel <= 0 {
		maxParallel = 16
	}
	f := &Flusher{wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{}),
		maxParallel: maxParallel, logs: map[*Log]struct{}{}, dirty: map[*Log]struct{}{},
		syncSeconds: NewHistogram(syncLatencyBounds), batchesPerSync: NewHistogram(countBounds),
		logsPerRound: NewHistogram(countBounds)}
	go f.run()
	go f.tick()
	return f
}

// flushTick is how often the flusher looks for data unsynced longer than its log's flush.ms.
const flushTick = 5 * time.Millisecond

func (f *Flusher) register(l *Log) {
	f.mu.Lock()
	f.logs[l] = struct{}{}
	f.mu.Unlock()
}

func (f *Flusher) unregister(l *Log) {
	f.mu.Lock()
	delete(f.logs, l)
	delete(f.dirty, l)
	f.mu.Unlock()
}

// markDirty puts l in the set the flush.ms check looks at (at its first unsynced append since
// a sync), markClean takes it out (when a sync takes everything unsynced). Both are called with
// l.mu held, so the set always matches unsyncedSince.
func (f *Flusher) markDirty(l *Log) {
	f.mu.Lock()
	if _, open := f.logs[l]; open {
		f.dirty[l] = struct{}{}
	}
	f.mu.Unlock()
}

func (f *Flusher) markClean(l *Log) {
	f.mu.Lock()
	delete(f.dirty, l)
	f.mu.Unlock()
}

// tick queues every log whose oldest unsynced append is older than its flush.ms. Only logs
// with unsynced data are looked at: a thousand idle partitions cost nothing here.
func (f *Flusher) tick() {
	t := time.NewTicker(flushTick)
	defer t.Stop()
	var logs []*Log
	for {
		select {
		case <-f.done:
			return
		case <-t.C:
		}
		f.mu.Lock()
		logs = logs[:0]
		for l := range f.dirty {
			logs = append(logs, l)
		}
		f.mu.Unlock()
		for _, l := range logs { // l.mu before f.mu (enqueue): the lock order
			l.mu.Lock()
			if !l.unsyncedSince.IsZero() && l.cfg.FlushInterval > 0 && l.now().Sub(l.unsyncedSince) >= l.cfg.FlushInterval {
				l.queueSyncLocked()
			}
			l.mu.Unlock()
		}
	}
}

// syncFSThreshold is how many logs of one file system a round must sync before one SyncFS
// replaces their fsyncs: syncfs(2) measured ~2.3× cheaper than 8 fsyncs (docs/benchmarks.md),
// and it flushes the file system's other dirty files too, so it pays off only for several.
const syncFSThreshold = 4

// syncScope is a file system one SyncFS makes durable: a vfs.FS and the key of the file
// system (device) under it (vfs.FSSyncer.SyncFSScope).
type syncScope struct {
	fs  vfs.FSSyncer
	key uint64
}

// bySyncer splits a round's logs into groups that share a file system whose SyncFS makes them
// durable (with at least syncFSThreshold logs) and the rest, synced one by one. Logs on two file
// systems of one vfs.FS (a mount inside the data dir) are two groups; logs on a file system
// whose syncfs syncs nothing (FUSE) are synced one by one.
func (f *Flusher) bySyncer(logs []*Log) (map[syncScope][]*Log, []*Log) {
	if len(logs) < syncFSThreshold {
		return nil, logs // the usual round: no group can be big enough
	}
	groups := map[syncScope][]*Log{}
	var single []*Log
	for _, l := range logs {
		if l.scope != nil {
			groups[*l.scope] = append(groups[*l.scope], l)
		} else {
			single = append(single, l)
		}
	}
	for s, ls := range groups {
		if len(ls) < syncFSThreshold {
			single = append(single, ls...)
			delete(groups, s)
		}
	}
	return groups, single
}

// Close stops the flusher after its current round. Logs must not wait on it afterwards.
func (f *Flusher) Close() {
	close(f.done)
	<-f.exited
}

func (f *Flusher) enqueue(l *Log) {
	f.mu.Lock()
	f.queue = append(f.queue, l)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *Flusher) run() {
	defer close(f.exited)
	sem := make(chan struct{}, f.maxParallel)
	var wg sync.WaitGroup
	for {
		select {
		case <-f.done:
			return
		case <-f.wake:
		}
		f.mu.Lock()
		logs := f.queue
		f.queue = nil
		f.mu.Unlock()
		if len(logs) == 0 {
			continue
		}
		f.Rounds.Add(1)
		f.logsPerRound.Observe(float64(len(logs)))
		together, single := f.bySyncer(logs)
		for scope, ls := range together {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				syncTogether(scope.fs, ls)
			}()
		}
		for _, l := range single {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				l.syncOnce()
			}()
		}
		wg.Wait()
	}
}

// syncPrep is what one sync of a log covers, taken before the sync starts.
type syncPrep struct {
	act      *segment // referenced until syncFinish
	target   int64    // every offset below is durable once the sync succeeds
	dirDirty bool
	gen      uint64 // truncation generation: a truncation meanwhile voids the claim
	batches  int64
}

// syncPrepare takes what a sync of l must cover, or reports that there is nothing to sync.
func (l *Log) syncPrepare() (syncPrep, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncQueued = false
	if l.err != nil || l.closed {
		return syncPrep{}, false
	}
	p := syncPrep{act: l.active(), target: l.endOffsetLocked(), dirDirty: l.dirDirty, gen: l.truncGen, batches: l.unsyncedBatch}
	if p.target <= l.durable && !p.dirDirty {
		return syncPrep{}, false
	}
	l.dirDirty = false
	l.syncing, l.syncingMsgs, l.syncingSince = l.unsynced, l.unsyncedMsgs, l.unsyncedSince
	l.unsynced, l.unsyncedMsgs, l.unsyncedSince, l.unsyncedBatch = 0, 0, time.Time{}, 0
	l.flusher.markClean(l)
	p.act.acquire()
	return p, true
}

// syncFinish completes a sync of l whose file data sync returned err: it syncs the directory
// if a segment was created, then claims the target (or poisons the log) and wakes the waiters.
func (l *Log) syncFinish(p syncPrep, err error) {
	if err == nil && p.dirDirty {
		err = l.fs.SyncDir(l.dir)
	}
	l.flusher.batchesPerSync.Observe(float64(p.batches))
	p.act.release()

	l.mu.Lock()
	l.syncing, l.syncingMsgs, l.syncingSince = 0, 0, time.Time{}
	if err != nil {
		l.poisonLocked("sync", err)
		hook := l.onDurable
		l.mu.Unlock()
		if hook != nil {
			hook()
		}
		return
	}
	// Claim the target only if no truncation happened meanwhile. (A roll meanwhile is fine: it
	// synced the segment it sealed.) Either way wake the waiters: a round that lost a race to a
	// truncation claims nothing, and its waiters must queue the log again, not sleep forever.
	moved := false
	if p.gen == l.truncGen && p.target > l.durable && l.err == nil {
		l.durable = min(p.target, l.endOffsetLocked())
		moved = true
	}
	hook := l.onDurable
	if moved && hook != nil { // before the waiters wake: they see what the hook did
		l.mu.Unlock()
		hook()
		l.mu.Lock()
	}
	close(l.durableCh)
	l.durableCh = make(chan struct{})
	l.mu.Unlock()
}

// SetDurableHook installs fn, called (without the log's locks held) each time the durable offset
// moves and when the log is poisoned: by a failed sync of appended data, or by any other failed
// write or sync (a zero fill's, a compaction's, ...; then on a goroutine of its own). Replication
// uses it to acknowledge fsynced data and to stop a replica whose log failed. fn must not block.
func (l *Log) SetDurableHook(fn func()) {
	l.mu.Lock()
	l.onDurable = fn
	l.mu.Unlock()
}

// syncOnce makes everything appended so far durable with an fsync of the active segment.
func (l *Log) syncOnce() {
	p, ok := l.syncPrepare()
	if !ok {
		return
	}
	start := time.Now()
	err := p.act.f.Sync()
	l.flusher.observeSync(start)
	l.syncFinish(p, err)
}

// observeSync counts a sync that started at start. It runs before the sync's waiters wake,
// so a caller that waited for durability sees the sync in Stats.
func (f *Flusher) observeSync(start time.Time) {
	f.syncSeconds.Observe(time.Since(start).Seconds())
	f.Syncs.Add(1)
}

// syncTogether makes logs that share a file system durable with one SyncFS instead of one
// fsync each, and returns how many it synced. If the SyncFS fails, every log it covered is
// poisoned: the error does not say which file lost data.
func syncTogether(fsys vfs.FSSyncer, logs []*Log) int {
	preps := make([]syncPrep, 0, len(logs))
	synced := make([]*Log, 0, len(logs))
	for _, l := range logs {
		if p, ok := l.syncPrepare(); ok {
			preps, synced = append(preps, p), append(synced, l)
		}
	}
	if len(preps) == 0 {
		return 0
	}
	start := time.Now()
	err := fsys.SyncFS(preps[0].act.f)
	synced[0].flusher.observeSync(start)
	for i, l := range synced {
		l.syncFinish(preps[i], err)
	}
	return len(preps)
}

// SyncSoon queues the log for the flusher's next round without waiting for it: what is
// appended now becomes durable (and, without write caching, visible to readers) within about
// one fsync, sharing it with every other log of the round.
func (l *Log) SyncSoon() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && l.err == nil && l.durable < l.endOffsetLocked() {
		l.queueSyncLocked()
	}
}

// queueSyncLocked puts the log in the flusher's queue unless it is there already. Callers hold
// mu.
func (l *Log) queueSyncLocked() {
	if !l.syncQueued {
		l.syncQueued = true
		l.flusher.enqueue(l)
	}
}

// WaitDurable waits until every offset below end is durable (end is typically last+1 from
// Append), sharing the fsync with every other waiter of the same round. It returns the error that
// poisoned the log if a write or sync failed, and never reports durability that a failed sync
// put in doubt.
//
// Durability is of offsets: if a Truncate below end overtakes the wait, WaitDurable returns
// ErrTruncated, since the batch the caller appended is gone.
func (l *Log) WaitDurable(ctx context.Context, end int64) error {
	l.mu.Lock()
	gen := l.truncGen
	l.mu.Unlock()
	for {
		l.mu.Lock()
		if low, cut := l.truncatedSinceLocked(gen); cut && end > low {
			l.mu.Unlock()
			return fmt.Errorf("%w: offsets below %d were cut at %d while waiting", ErrTruncated, end, low)
		}
		switch {
		case l.err != nil:
			err := l.err
			l.mu.Unlock()
			return err
		case l.durable >= end:
			l.mu.Unlock()
			return nil
		case l.closed:
			l.mu.Unlock()
			return ErrClosed
		case end > l.endOffsetLocked():
			next := l.endOffsetLocked()
			l.mu.Unlock()
			return fmt.Errorf("logstore: wait for durability up to %d past the log end %d: %w", end, next, ErrOffsetOutOfRange)
		}
		ch := l.durableCh
		l.queueSyncLocked()
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
