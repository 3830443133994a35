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
	// maxQueuedFiles bounds the files written but not yet committed: beyond it a flush fails
	// its batches at once (retriable) instead of holding more memory.
	maxQueuedFiles = 64
	// DefaultLazyCommitPatience: how long a file of lazy sections only is retried before its
	// commit is deferred (catchUp).
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
	// LazyCommitPatience: how long a file of lazy sections only is retried before its commit
	// is deferred until the controller answers again (default 2 s).
	LazyCommitPatience time.Duration
	Cache              *Cache // sections written are kept here for reads (nil: none)
	Metrics            *metrics.Objects
	Logger             *slog.Logger
	// AfterPut and AfterCommit, if set, are called with a file's key once it is written, and
	// once it is committed before its batches are answered (fault injection: a crash there).
	AfterPut, AfterCommit func(key string)
}

// ErrWriterClosed fails what is buffered when the writer closes.
var ErrWriterClosed = fmt.Errorf("%w: the node is shutting down", kerr.NotLeaderForPartition)

// Writer buffers batches for object files. Safe for concurrent use.
type Writer struct {
	cfg     WriterConfig
	logger  *slog.Logger
	queue   chan *file // flushed files, in sequence order, waiting for their write
	commits chan *file // written files, in sequence order, to commit
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}

	lateMu sync.Mutex
	late   []*controller.CommitFile // deferred commits of answered lazy files, in order

	runMu     sync.Mutex
	announced time.Time // when RunKey was last written

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
	body     []byte
	index    []objtopic.IndexEntry
	put      chan struct{} // closed when the write is done
	putErr   error
}

// Pending is a buffered batch's answer to come.
type Pending struct {
	done  chan struct{}
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

func (p *Pending) finish(base int64, err error) {
	p.base, p.err = base, err
	close(p.done)
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
	w := &Writer{cfg: cfg, logger: cfg.Logger, queue: make(chan *file, maxQueuedFiles), commits: make(chan *file, maxQueuedFiles), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), buf: map[controller.PartitionRef]*section{}}
	go w.writtenLoop()
	go w.commitLoop()
	go w.catchUp()
	return w
}

// Append buffers one validated batch (a whole v2 batch, not transactional, not control) of an
// object partition. The batch's bytes must not be modified afterwards. A lazy batch is
// answered (base offset -1) as soon as its file is written; the others once it is committed.
func (w *Writer) Append(ref controller.PartitionRef, b []byte, h batch.Header, lazy bool) *Pending {
	p := &Pending{done: make(chan struct{}), added: time.Now()}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		p.finish(-1, ErrWriterClosed)
		return p
	}
	s := w.buf[ref]
	if s == nil {
		s = &section{}
		w.buf[ref] = s
	}
	s.batches, s.heads, s.waits = append(s.batches, b), append(s.heads, h), append(s.waits, p)
	s.lazy = s.lazy || lazy
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
	select {
	case w.queue <- f:
	default:
		f.fail(fmt.Errorf("%w: %d object files are waiting for their commit", kerr.RequestTimedOut, maxQueuedFiles))
		return
	}
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

// RunKey is the object that announces a writer run before its first journal file, so the slow
// path finds the run's files even if the controller never heard of it (a process that started
// and died while the controller was away, in Ripcord mode).
func RunKey(run string) string { return "runs/" + run }

// announceRun writes the run's marker before the run's first file, and again every five
// minutes while the run writes (garbage collection deletes a marker only once it is ten
// minutes old, the run has no file left and no process runs it).
func (w *Writer) announceRun() error {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	if !w.announced.IsZero() && time.Since(w.announced) < 5*time.Minute {
		return nil
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.WriteTimeout)
	defer cancel()
	body := fmt.Appendf(nil, "node %d\n", w.cfg.Node)
	if err := w.cfg.Store.Put(ctx, RunKey(w.cfg.Run), body); err != nil {
		return fmt.Errorf("announcing writer run %s: %w", w.cfg.Run, err)
	}
	w.announced = time.Now()
	return nil
}

// writtenLoop takes the files in sequence order as their writes finish: it answers lazy
// batches (durable now; before, and independently of, any commit) and hands the files to
// commitLoop. A file of lazy sections only that finds the commit queue full (the controller
// is slow or unreachable) is left to the slow path rather than holding up later answers.
func (w *Writer) writtenLoop() {
	defer close(w.commits)
	for f := range w.queue {
		select {
		case <-f.put:
		case <-w.ctx.Done():
			<-f.put
		}
		if f.putErr != nil {
			f.fail(f.putErr)
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
		if f.allLazy() {
			select {
			case w.commits <- f:
			default:
				w.logger.Debug("objects: commit queue full; deferring a lazy file's commit", "key", f.key)
				cmd, _ := w.commitCmd(f)
				w.deferCommit(cmd)
			}
			continue
		}
		w.commits <- f
	}
}

// commitLoop commits the written files one at a time, in sequence order, so that a batch
// acknowledged after another of its partition has a higher offset.
func (w *Writer) commitLoop() {
	defer close(w.done)
	for f := range w.commits {
		w.commit(f)
	}
}

func (f *file) allLazy() bool {
	for _, s := range f.sections {
		if !s.lazy {
			return false
		}
	}
	return true
}

// meta is one BatchMeta of a commit and the buffered batches it stands for.
type meta struct {
	m     objtopic.BatchMeta
	first int // index of its first batch in the section
}

// commitCmd builds a file's commit, and the metas of each section.
func (w *Writer) commitCmd(f *file) (*controller.CommitFile, [][]meta) {
	cmd := &controller.CommitFile{Writer: w.cfg.Run, Node: w.cfg.Node, Incarnation: w.cfg.Incarnation(), Seq: f.seq, Floor: f.seq,
		Key: f.key, Size: int64(len(f.body))}
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

// maxDeferred bounds the commits of lazy files the writer keeps to retry itself (a few hundred
// bytes each); beyond it they are left to the slow path alone.
const maxDeferred = 100000

// deferCommit keeps an answered lazy file's commit to retry once the controller answers again
// (catchUp), as a commit of the slow path's kind: no floor, no incarnation (this process may
// have registered since, or never), idempotent by the run's committed files.
func (w *Writer) deferCommit(cmd *controller.CommitFile) {
	c := *cmd
	c.Slow = true
	w.lateMu.Lock()
	if len(w.late) < maxDeferred {
		w.late = append(w.late, &c)
	}
	w.lateMu.Unlock()
}

// catchUp commits the deferred lazy files, in order, whenever the controller answers: after an
// outage the writer drains its own backlog quickly, and the slow path is left the files of
// processes that died.
func (w *Writer) catchUp() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		for {
			w.lateMu.Lock()
			if len(w.late) == 0 {
				w.lateMu.Unlock()
				break
			}
			cmd := w.late[0]
			w.lateMu.Unlock()
			ctx, cancel := context.WithTimeout(w.ctx, w.cfg.LazyCommitPatience)
			_, err := w.cfg.Commit(ctx, cmd)
			cancel()
			if err != nil {
				break // not yet: next tick
			}
			w.lateMu.Lock()
			w.late = w.late[1:]
			w.lateMu.Unlock()
		}
	}
}

func (w *Writer) commit(f *file) {
	cmd, metas := w.commitCmd(f)
	start := time.Now()
	backoff := 20 * time.Millisecond
	var res controller.Result
	attempt := 5 * time.Second
	if f.allLazy() {
		attempt = w.cfg.LazyCommitPatience
	}
	for {
		ctx, cancel := context.WithTimeout(w.ctx, attempt)
		var err error
		res, err = w.cfg.Commit(ctx, cmd)
		cancel()
		if err == nil {
			break
		}
		w.cfg.Metrics.CommitFailed()
		if f.allLazy() && (time.Since(start) > w.cfg.LazyCommitPatience || errors.Is(err, controller.ErrStaleWriter)) {
			// Every batch is answered: commit it later, when the controller answers again.
			w.logger.Debug("objects: deferring a lazy file's commit", "key", f.key, "err", err)
			w.deferCommit(cmd)
			return
		}
		if errors.Is(err, controller.ErrCommitForgotten) || errors.Is(err, controller.ErrStaleWriter) || w.ctx.Err() != nil {
			// Stopping: the commit may or may not happen; the producer is told to retry, and
			// an idempotent producer's retry is recognized if it did.
			f.fail(fmt.Errorf("%w: committing %s: %v", kerr.RequestTimedOut, f.key, err))
			return
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
	if res.AlreadyCommitted { // by the slow path, which commits only lazy sections
		f.fail(fmt.Errorf("%w: %s was committed without this node's eager batches; retry", kerr.RequestTimedOut, f.key))
		return
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
