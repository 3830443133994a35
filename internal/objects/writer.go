// Package objects serves object-storage topics on a node or agent (docs/object-topics.md): the
// writer buffers the batches of all partitions into one file per flush, writes it to the object
// store and has the controller commit it; the reader serves fetches from the files through a
// bounded read cache.
package objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/metrics"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// Defaults of the writer (WarpStream's batch timeout).
const (
	DefaultBatchTimeout = 250 * time.Millisecond
	DefaultBatchBytes   = 4 << 20
	// maxQueuedFiles bounds the files with eager sections flushed but not yet committed:
	// beyond it a flush with eager sections fails them at once (retriable) instead of holding
	// more memory. Files of lazy sections only (answered at the write) wait for their commit
	// up to maxDeferred, a few hundred bytes each.
	maxQueuedFiles = 64
	// DefaultLazyCommitPatience: how long one attempt at committing a file of lazy sections
	// only may take before it is tried again in the slow path's form (no floor, no
	// incarnation).
	DefaultLazyCommitPatience = 2 * time.Second
)

// CommitFunc has the controller commit a file (cluster.Node.CommitFile): the answer per section
// and batch meta, or AlreadyCommitted. An error means the outcome is unknown; the writer
// retries the same commit.
type CommitFunc func(ctx context.Context, c *controller.CommitFile) (controller.Result, error)

// SequenceFiles is how many files a journal sequence holds: a writer's files are
// journal/<run>/<sequence>/<file number>, a new sequence every SequenceFiles files.
const SequenceFiles = 1000

// JournalKey is the object key of a writer run's file seq (from 1).
func JournalKey(run string, seq uint64) string {
	return fmt.Sprintf("journal/%s/%06d/%020d", run, (seq-1)/SequenceFiles, seq)
}

// ParseJournalKey returns the run and file number of a journal key.
func ParseJournalKey(key string) (run string, seq uint64, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != "journal" {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(parts[3], 10, 64)
	if err != nil || seq == 0 || JournalKey(parts[1], seq) != key {
		return "", 0, false
	}
	return parts[1], seq, true
}

// WriterConfig configures a Writer.
type WriterConfig struct {
	Store  objstore.Store
	Commit CommitFunc
	Node   int32
	Run    string // this process run's id: files are journal/<Run>/<seq>
	// Incarnation returns the node's current registration, which a file's commit names.
	Incarnation func() uint64
	// BatchTimeout and BatchBytes: a buffer is flushed this long after its first batch, or
	// once it holds this many bytes, whichever comes first.
	BatchTimeout time.Duration
	BatchBytes   int
	// WriteTimeout bounds the attempts at writing one file (default 10 s); its batches then
	// fail with a retriable error.
	WriteTimeout time.Duration
	// LazyCommitPatience: how long one attempt at committing a file of lazy sections only may
	// take (default 2 s).
	LazyCommitPatience time.Duration
	Cache              *Cache // sections written are kept here for reads (nil: none)
	// Ripcording reports whether the process is in Ripcord mode (nil: never). A file waiting
	// for its commit then gives up its eager sections: their batches fail (retriable, and the
	// producers' retries are sequenced lazily) and the file is committed in the slow path's
	// form, so a controller outage does not hold eager batches until their requests time out.
	Ripcording func() bool
	Metrics    *metrics.Objects
	Logger     *slog.Logger
	// AfterPut and AfterCommit, if set, are called with a file's key once it is written, and
	// once it is committed before its batches are answered (fault injection: a crash there).
	AfterPut, AfterCommit func(key string)
}

// ErrWriterClosed fails what is buffered when the writer closes.
var ErrWriterClosed = fmt.Errorf("%w: the node is shutting down", kerr.NotLeaderForPartition)

// Writer buffers batches for object files. Safe for concurrent use.
type Writer struct {
	cfg    WriterConfig
	logger *slog.Logger
	queue  chan *file // flushed files, in sequence order, waiting for their write
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// The written files, in sequence order, waiting for their commit. Unbounded (files of
	// lazy sections only are answered already and keep little): answering lazy batches never
	// waits for commits, and files are committed strictly in order.
	cqMu     sync.Mutex
	cq       []*file
	cqEager  int           // files in cq with eager batches that have not given them up (giveUpQueued)
	cqWake   chan struct{} // a send (capacity 1) when cq grows or closes
	cqClosed bool
	eager    atomic.Int64 // files with eager sections flushed and not yet committed
	lazy     atomic.Int64 // files of lazy sections only flushed and not yet committed

	runMu     sync.Mutex
	announced time.Time // when the run's marker was last written
	marker    string    // its key

	mu      sync.Mutex
	buf     map[controller.PartitionRef]*section
	bytes   int
	started time.Time // of the buffer's first batch
	timer   *time.Timer
	seq     uint64
	closed  bool
}

// section is one partition's buffered batches.
type section struct {
	batches [][]byte
	heads   []batch.Header
	waits   []*Pending
	// lazy: answered once the file is written (runnel.sequencing=lazy); one lazy batch makes
	// the whole section lazy.
	lazy bool
}

// file is one flush: its sections, its object write's outcome and its commit.
type file struct {
	seq      uint64
	key      string
	sections map[controller.PartitionRef]*section
	body     []byte // until written (then the read cache keeps its sections)
	size     int64
	index    []objtopic.IndexEntry
	put      chan struct{} // closed when the write is done
	putErr   error
	// gaveUp: its eager batches failed while it waited for its commit (Ripcord); it is
	// committed in the slow path's form. Set under Writer.cqMu while queued.
	gaveUp bool
}

// Pending is a buffered batch's answer to come.
type Pending struct {
	done  chan struct{}
	once  sync.Once
	base  int64
	err   error
	added time.Time
}

// Wait waits for the batch's base offset (or its error) until ctx ends.
func (p *Pending) Wait(ctx context.Context) (int64, error) {
	select {
	case <-p.done:
		return p.base, p.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// finish answers the batch; only the first answer counts. A file whose eager batches were
// failed (Ripcord, a stale writer) is retried in its slow form, and the process stopping
// meanwhile fails the file again: a second close of done crashed the process.
func (p *Pending) finish(base int64, err error) {
	p.once.Do(func() {
		p.base, p.err = base, err
		close(p.done)
	})
}

// NewWriter starts a writer; Close stops it.
func NewWriter(cfg WriterConfig) *Writer {
	if cfg.BatchTimeout <= 0 {
		cfg.BatchTimeout = DefaultBatchTimeout
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.LazyCommitPatience <= 0 {
		cfg.LazyCommitPatience = DefaultLazyCommitPatience
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{cfg: cfg, logger: cfg.Logger, queue: make(chan *file, maxQueuedFiles+maxDeferred), cqWake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, done: make(chan struct{}), buf: map[controller.PartitionRef]*section{}}
	go w.writtenLoop()
	go w.commitLoop()
	return w
}

// Append buffers one validated batch (a whole v2 batch, not control; a transactional batch
// never lazy) of an object partition. The batch's bytes must not be modified afterwards. A lazy
// batch is answered (base offset -1) as soon as its file is written; the others once it is
// committed.
func (w *Writer) Append(ref controller.PartitionRef, b []byte, h batch.Header, lazy bool) *Pending {
	p := &Pending{done: make(chan struct{}), added: time.Now()}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		p.finish(-1, ErrWriterClosed)
		return p
	}
	s := w.buf[ref]
	if s != nil && s.lazy != lazy {
		// A section is committed one way or the other. An eager batch in a lazy section would
		// be answered before it has an offset and committed without its producer's sequence
		// checks, and a transactional one not at all (CommitLazy refuses it). Batches of both
		// kinds meet in a partition only as it changes mode (Ripcord, runnel.sequencing):
		// what is buffered goes in a file of its own.
		w.flushLocked()
		s = nil
	}
	if s == nil {
		s = &section{lazy: lazy}
		w.buf[ref] = s
	}
	s.batches, s.heads, s.waits = append(s.batches, b), append(s.heads, h), append(s.waits, p)
	if w.bytes == 0 {
		w.started = p.added
		w.timer = time.AfterFunc(w.cfg.BatchTimeout, w.flushTimer)
	}
	w.bytes += len(b)
	if w.bytes >= w.cfg.BatchBytes {
		w.flushLocked()
	}
	return p
}

func (w *Writer) flushTimer() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bytes > 0 && time.Since(w.started) >= w.cfg.BatchTimeout-time.Millisecond {
		w.flushLocked()
	}
}

// Flush flushes the buffer now (tests, shutdown).
func (w *Writer) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
}

func (w *Writer) flushLocked() {
	if w.bytes == 0 {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.seq++
	f := &file{seq: w.seq, key: JournalKey(w.cfg.Run, w.seq), sections: w.buf, put: make(chan struct{})}
	w.buf, w.bytes = map[controller.PartitionRef]*section{}, 0
	now := time.Now()
	for _, s := range f.sections {
		for _, p := range s.waits {
			w.cfg.Metrics.Stage("buffer", now.Sub(p.added))
		}
	}
	count, limit := &w.lazy, int64(maxDeferred)
	if !f.allLazy() {
		count, limit = &w.eager, maxQueuedFiles
	}
	if n := count.Load(); n >= limit {
		f.putErr = fmt.Errorf("%w: %d object files are waiting for their commit", kerr.RequestTimedOut, n)
		f.fail(f.putErr) // not written: lazy batches fail too
		return
	}
	count.Add(1)
	w.queue <- f // has room: every file in it is counted
	go w.write(f)
}

// fail answers the file's batches with err: all of them if the file was not written, else the
// eager ones (lazy ones were answered at the write; the slow path commits them).
func (f *file) fail(err error) {
	for _, s := range f.sections {
		if s.lazy && f.putErr == nil {
			continue
		}
		for _, p := range s.waits {
			p.finish(-1, err)
		}
	}
}

// write builds the file and writes it, retrying failed writes for up to a few seconds (a write
// whose reply was lost finds its own object on retry).
func (w *Writer) write(f *file) {
	defer close(f.put)
	secs := make([]objtopic.Section, 0, len(f.sections))
	for ref, s := range f.sections {
		secs = append(secs, objtopic.Section{TopicID: ref.Topic, Partition: ref.Partition, Batches: s.batches, Lazy: s.lazy})
	}
	f.body, f.index, f.putErr = objtopic.Build(w.cfg.Node, w.cfg.Incarnation(), time.Now().UnixMilli(), secs)
	if f.putErr != nil {
		return
	}
	if f.putErr = w.announceRun(); f.putErr != nil {
		f.putErr = fmt.Errorf("%w: %v", kerr.RequestTimedOut, f.putErr)
		return
	}
	start := time.Now()
	deadline := start.Add(w.cfg.WriteTimeout)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
		err := w.cfg.Store.PutIfAbsent(ctx, f.key, f.body)
		if errors.Is(err, objstore.ErrExists) { // an earlier attempt's reply was lost?
			var got []byte
			if got, err = w.cfg.Store.Get(ctx, f.key); err == nil && !bytes.Equal(got, f.body) {
				err = fmt.Errorf("objects: %s exists with other contents", f.key)
			}
		}
		cancel()
		w.cfg.Metrics.Request("put", len(f.body), err)
		if err == nil {
			w.cfg.Metrics.Stage("put", time.Since(start))
			if w.cfg.Cache != nil {
				for _, e := range f.index {
					w.cfg.Cache.Add(f.key, e.Offset, f.body[e.Offset:e.Offset+uint64(e.Length)])
				}
			}
			// The commit needs only the index and the batch headers: a file waiting long
			// for it (the controller away) keeps little.
			f.size, f.body = int64(len(f.body)), nil
			for _, s := range f.sections {
				s.batches = nil
			}
			return
		}
		if w.ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			w.logger.Warn("objects: writing a file failed", "key", f.key, "err", err)
			f.putErr = fmt.Errorf("%w: writing object %s: %v", kerr.RequestTimedOut, f.key, err)
			return
		}
		w.logger.Debug("objects: retrying a file write", "key", f.key, "err", err)
		select {
		case <-time.After(backoff):
		case <-w.ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
}

// RunKey is an object that announces a writer run before its journal files, so the slow path
// finds the run's files even if the controller never heard of it (a process that started and
// died while the controller was away, in Ripcord mode). Each announcement is an object of its
// own, named by its time: garbage collection deletes old announcements it listed, and a listing
// taken before an announcement cannot name it, so a run announcing itself again as garbage
// collection runs keeps its new marker.
func RunKey(run string, at time.Time) string { return fmt.Sprintf("runs/%s/%020d", run, at.UnixNano()) }

// MarkerRun is the run a marker announces (runs/<run>/<time>; runs/<run> before markers had
// times).
func MarkerRun(key string) string {
	run, _, _ := strings.Cut(strings.TrimPrefix(key, "runs/"), "/")
	return run
}

// announceRun writes a marker of the run before the run's first file, and again every five
// minutes while the run writes (garbage collection deletes a marker only once it is ten
// minutes old, the run has no file left and no process runs it); the run's previous marker is
// then deleted.
func (w *Writer) announceRun() error {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	if !w.announced.IsZero() && time.Since(w.announced) < 5*time.Minute {
		return nil
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.WriteTimeout)
	defer cancel()
	body := fmt.Appendf(nil, "node %d\n", w.cfg.Node)
	now := time.Now()
	key := RunKey(w.cfg.Run, now)
	if err := w.cfg.Store.Put(ctx, key, body); err != nil {
		return fmt.Errorf("announcing writer run %s: %w", w.cfg.Run, err)
	}
	if w.marker != "" {
		if err := w.cfg.Store.Delete(ctx, w.marker); err != nil { // garbage collection deletes it otherwise
			w.logger.Debug("objects: deleting a run's previous marker", "key", w.marker, "err", err)
		}
	}
	w.announced, w.marker = now, key
	return nil
}

// writtenLoop takes the files in sequence order as their writes finish: it answers lazy
// batches (durable now; before, and independently of, any commit) and queues the files for
// commitLoop, which never makes it wait.
func (w *Writer) writtenLoop() {
	defer func() {
		w.cqMu.Lock()
		w.cqClosed = true
		w.cqMu.Unlock()
		w.wakeCommits()
	}()
	for f := range w.queue {
		select {
		case <-f.put:
		case <-w.ctx.Done():
			<-f.put
		}
		if f.putErr != nil {
			f.fail(f.putErr)
			w.committed(f)
			continue
		}
		for _, s := range f.sections {
			if s.lazy {
				for _, p := range s.waits {
					p.finish(-1, nil)
				}
			}
		}
		if w.cfg.AfterPut != nil {
			w.cfg.AfterPut(f.key)
		}
		w.cqMu.Lock()
		w.cq = append(w.cq, f)
		if !f.allLazy() {
			w.cqEager++
		}
		w.cqMu.Unlock()
		w.wakeCommits()
	}
}

func (w *Writer) wakeCommits() {
	select {
	case w.cqWake <- struct{}{}:
	default:
	}
}

// committed counts a file out of the queue.
func (w *Writer) committed(f *file) {
	if f.allLazy() {
		w.lazy.Add(-1)
	} else {
		w.eager.Add(-1)
	}
}

// commitLoop commits the written files one at a time, strictly in sequence order, so that a
// batch acknowledged after another of its partition has a higher offset, and an idempotent
// producer's batches reach the controller in its order (after an outage, its newer batches do
// not overtake the older ones still waiting, which the controller would refuse as out of
// sequence).
func (w *Writer) commitLoop() {
	defer close(w.done)
	for {
		w.cqMu.Lock()
		if len(w.cq) == 0 {
			closed := w.cqClosed
			w.cqMu.Unlock()
			if closed {
				return
			}
			<-w.cqWake
			continue
		}
		f := w.cq[0]
		w.cq[0] = nil
		w.cq = w.cq[1:]
		if !f.gaveUp && !f.allLazy() {
			w.cqEager--
		}
		w.cqMu.Unlock()
		w.commit(f)
		w.committed(f)
	}
}

// PendingCommits is how many written files wait for their commit.
func (w *Writer) PendingCommits() int {
	w.cqMu.Lock()
	defer w.cqMu.Unlock()
	return len(w.cq)
}

func (f *file) allLazy() bool {
	for _, s := range f.sections {
		if !s.lazy {
			return false
		}
	}
	return true
}

func (f *file) anyLazy() bool {
	for _, s := range f.sections {
		if s.lazy {
			return true
		}
	}
	return false
}

// meta is one BatchMeta of a commit and the buffered batches it stands for.
type meta struct {
	m     objtopic.BatchMeta
	first int // index of its first batch in the section
}

// commitCmd builds a file's commit, and the metas of each section.
func (w *Writer) commitCmd(f *file) (*controller.CommitFile, [][]meta) {
	cmd := &controller.CommitFile{Writer: w.cfg.Run, Node: w.cfg.Node, Incarnation: w.cfg.Incarnation(), Seq: f.seq, Floor: f.seq,
		Key: f.key, Size: f.size}
	metas := make([][]meta, len(f.index))
	for i, e := range f.index {
		ref := controller.PartitionRef{Topic: e.TopicID, Partition: e.Partition}
		s := f.sections[ref]
		metas[i] = batchMetas(s.heads)
		cs := controller.CommitSection{PartitionRef: ref, Offset: e.Offset, Length: e.Length, Lazy: s.lazy}
		for _, m := range metas[i] {
			cs.Batches = append(cs.Batches, m.m)
		}
		cmd.Sections = append(cmd.Sections, cs)
	}
	return cmd, metas
}

// slowForm is cmd as the slow path commits it: the lazy sections only, with no floor and no
// incarnation (idempotent by the run's committed files).
func slowForm(cmd *controller.CommitFile) *controller.CommitFile {
	c := *cmd
	c.Slow, c.Floor, c.Incarnation, c.Sections = true, 0, 0, nil
	for _, s := range cmd.Sections {
		if s.Lazy {
			c.Sections = append(c.Sections, s)
		}
	}
	return &c
}

// maxDeferred bounds the files of lazy sections only waiting for their commit (the controller
// away: Ripcord); beyond it their batches fail (retriable).
const maxDeferred = 100000

// commit commits a written file, retrying until the controller answers. A file of lazy
// sections only (answered already) is retried until it is committed or the writer stops
// (then the slow path commits it), after its first failure in the slow path's form: no floor
// and no incarnation, as this process may have registered again since, or never.
func (w *Writer) commit(f *file) {
	cmd, metas := w.commitCmd(f)
	start := time.Now()
	backoff := 20 * time.Millisecond
	var res controller.Result
	attempt := 5 * time.Second
	lazy := f.allLazy()
	if f.gaveUp { // its eager batches failed while it was queued (giveUpQueued)
		lazy, cmd = true, slowForm(cmd)
	}
	if lazy {
		attempt = w.cfg.LazyCommitPatience
	}
	for {
		if w.ctx.Err() != nil {
			// Stopping: a lazy file is left to the slow path; an eager one's producers retry.
			f.fail(fmt.Errorf("%w: the writer is stopping before committing %s", kerr.RequestTimedOut, f.key))
			return
		}
		ctx, cancel := context.WithTimeout(w.ctx, attempt)
		if w.cfg.Ripcording != nil {
			// An eager attempt ends as the process enters Ripcord mode (the controller away
			// for a second), not after its 5 s, and the files waiting behind this one give
			// up their eager batches then too, as Ripcording says.
			var end context.CancelFunc
			if !lazy {
				end = cancel
			}
			go w.watchRipcord(ctx, end)
		}
		var err error
		res, err = w.cfg.Commit(ctx, cmd)
		cancel()
		if err == nil {
			break
		}
		w.cfg.Metrics.CommitFailed()
		switch {
		case lazy && errors.Is(err, controller.ErrCommitForgotten):
			return // below this run's floor: committed long ago
		case lazy && !cmd.Slow:
			cmd = slowForm(cmd)
		case !lazy && w.cfg.Ripcording != nil && w.cfg.Ripcording():
			// Its eager sections are never committed now (the slow path's form leaves them
			// out), so failing their batches cannot store anything twice.
			f.fail(errRipcord)
			lazy, cmd = true, slowForm(cmd)
		case errors.Is(err, controller.ErrCommitForgotten) || errors.Is(err, controller.ErrStaleWriter):
			// The commit may or may not have happened; the producer is told to retry, and an
			// idempotent producer's retry is recognized if it did.
			f.fail(fmt.Errorf("%w: committing %s: %v", kerr.RequestTimedOut, f.key, err))
			if !f.anyLazy() {
				return
			}
			// Its lazy sections were answered at the write: they are committed now, in the
			// slow path's form (which leaves the eager sections out, and commits a file once),
			// before this writer's later files, rather than by the slow path once the run has
			// been quiet for liveWriterGrace, after them.
			lazy, cmd = true, slowForm(cmd)
		}
		w.logger.Debug("objects: retrying a commit", "key", f.key, "err", err)
		select {
		case <-time.After(backoff):
		case <-w.ctx.Done():
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	w.cfg.Metrics.Stage("commit", time.Since(start))
	if w.cfg.AfterCommit != nil {
		w.cfg.AfterCommit(f.key)
	}
	if res.AlreadyCommitted && !lazy { // by the slow path, which commits only lazy sections
		f.fail(fmt.Errorf("%w: %s was committed without this node's eager batches; retry", kerr.RequestTimedOut, f.key))
		return
	}
	if lazy {
		return // answered at the write
	}
	out := res.Commit
	for i, e := range f.index {
		s := f.sections[controller.PartitionRef{Topic: e.TopicID, Partition: e.Partition}]
		if s.lazy {
			continue // answered at the write
		}
		for j, m := range metas[i] {
			o := out[i][j]
			var err error
			if o.Code != 0 {
				err = fmt.Errorf("%w: %s", kerr.ErrorForCode(o.Code), o.Msg)
			}
			base := o.Base
			for k := m.first; k < m.first+m.m.Count(); k++ {
				if err != nil {
					s.waits[k].finish(-1, err)
					continue
				}
				s.waits[k].finish(base, nil)
				base += int64(s.heads[k].LastOffsetDelta) + 1
			}
		}
	}
}

// ripcordPoll: how often a commit attempt checks whether the process entered Ripcord mode.
const ripcordPoll = 50 * time.Millisecond

// errRipcord fails the eager batches of a file whose commit waits when the process is in
// Ripcord mode.
var errRipcord = fmt.Errorf("%w: the controller is unreachable (Ripcord): retry, the retry is sequenced lazily", kerr.RequestTimedOut)

// watchRipcord runs beside a commit attempt until ctx ends: once the process is in Ripcord
// mode it ends an eager attempt (end, nil for a lazy one) or, while a lazy one goes on, makes
// the files queued behind it give up their eager batches (giveUpQueued), checking at once and
// then every ripcordPoll.
func (w *Writer) watchRipcord(ctx context.Context, end context.CancelFunc) {
	t := time.NewTicker(ripcordPoll)
	defer t.Stop()
	for {
		if w.cfg.Ripcording() {
			if end != nil {
				end()
				return
			}
			w.giveUpQueued()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// giveUpQueued fails the eager batches of the files queued for their commit (Ripcord) and
// marks them to be committed in the slow path's form, which leaves those batches out: a
// producer told to retry one cannot find it stored too. Their lazy batches (answered at the
// write) are committed in order, as ever.
func (w *Writer) giveUpQueued() {
	w.cqMu.Lock()
	defer w.cqMu.Unlock()
	if w.cqEager == 0 { // the queue may hold many lazy files (maxDeferred): not walked for nothing
		return
	}
	for _, f := range w.cq {
		if !f.gaveUp && !f.allLazy() {
			f.gaveUp = true
			w.cqEager--
			f.fail(errRipcord)
		}
	}
}

// batchMetas describes a section's batches for its commit: each idempotent batch on its own,
// each run of other batches as one.
func batchMetas(heads []batch.Header) []meta {
	var out []meta
	for i, h := range heads {
		records := h.LastOffsetDelta + 1
		if h.ProducerID < 0 && len(out) > 0 && out[len(out)-1].m.ProducerID < 0 {
			m := &out[len(out)-1].m
			m.Records += records
			m.Batches = max(m.Batches, 1) + 1
			m.MaxTimestamp = max(m.MaxTimestamp, h.MaxTimestamp)
			continue
		}
		out = append(out, meta{first: i, m: objtopic.BatchMeta{Records: records, ProducerID: h.ProducerID, Epoch: h.ProducerEpoch,
			FirstSeq: h.BaseSequence, Transactional: h.IsTransactional(), MaxTimestamp: h.MaxTimestamp}})
		if h.ProducerID < 0 {
			out[len(out)-1].m.ProducerID = -1
		}
	}
	return out
}

// SetHooks sets the fault injection hooks (see WriterConfig); call it before the first Append.
func (w *Writer) SetHooks(afterPut, afterCommit func(key string)) {
	w.cfg.AfterPut, w.cfg.AfterCommit = afterPut, afterCommit
}

// Close flushes the buffer, waits up to ctx for the files in flight to be committed, and stops.
func (w *Writer) Close(ctx context.Context) {
	w.mu.Lock()
	if !w.closed {
		w.flushLocked()
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-ctx.Done():
		w.cancel()
		<-w.done
	}
	w.cancel()
}
