package objects

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/logevery"
	"github.com/runnel-dev/runnel/internal/metrics"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// MaintainerConfig configures a Maintainer.
type MaintainerConfig struct {
	Store objstore.Store
	// Image is the node's current metadata image; Active reports whether this node is the
	// active controller (it alone merges, collects garbage, applies retention and writes the
	// metadata snapshot); Propose has the controller apply a command. Node is this process's
	// id: every live process runs the slow path for the writer runs the image assigns it
	// (SlowPathOwner).
	Image   func() *controller.Image
	Active  func() bool
	Node    int32
	Propose func(ctx context.Context, cmd *controller.Command) error
	// Config returns a topic's effective config value.
	Config func(topic, name string) string

	RetentionInterval time.Duration // default 30 s
	GCInterval        time.Duration // default 1 min
	// GCGrace: an object is deleted only after no extent has referenced it for this long, so a
	// reader in the middle of a GET never loses its file (default 10 min).
	GCGrace time.Duration
	// OrphanAge: a journal file of a run the image does not know is deleted only once it is
	// this old (default 1 h); other journal files are deleted only once committed.
	OrphanAge time.Duration

	// Merging: every MergeInterval (default 10 s), runs of at least MergeMinRun (default 8)
	// consecutive extents smaller than MergeSmall (default 1 MiB) each, outside a partition's
	// MergeKeepNewest newest extents (default 32: the tail consumers read, often from the
	// writer's cache), are rewritten as one object of up to MergeTarget bytes (default 8 MiB).
	// Reads for it are throttled to MergeBytesPerSec (default 16 MiB/s).
	MergeInterval    time.Duration
	MergeMinRun      int
	MergeSmall       int64
	MergeTarget      int64
	MergeKeepNewest  int
	MergeBytesPerSec int64
	// MergeWorker, if set, has another node write a run's merged object (MergeRun there) and
	// returns its extent, so that the active controller only plans and commits merges, as
	// WarpStream's agents, not its control plane, compact. ErrNoWorker: merge here; any
	// other error: that node failed, merge here.
	MergeWorker func(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent) (*objtopic.Extent, error)
	// CompactWorker, if set, has another node run a compaction pass over a partition
	// (CompactRun there, whose replacements that node proposes) and returns what it did.
	// ErrNoWorker: compact here; any other error: that node failed, compact here.
	CompactWorker func(ctx context.Context, job CompactJob) (CompactStats, error)
	// GCWorker, if set, has another node run a garbage collection pass (GCRun there, which
	// lists and deletes objects and proposes forgotten writers itself) and returns how many
	// objects it deleted. ErrNoWorker: collect here; any other error: that node failed,
	// collect here.
	GCWorker func(ctx context.Context, job GCJob) (int, error)
	// Barrier, if set, waits until this node's image has everything the controller committed
	// before the call; GCRun passes it first, so that a pass asked of a node whose image
	// trails never takes a file the controller's image references for garbage.
	Barrier func(ctx context.Context) error

	// Compaction of topics with cleanup.policy=compact (compact.go): every CompactInterval
	// (default 15 s, as the local log store's), with a key map of at most CompactMaxKeys keys
	// per pass (default 1<<20, about 40 MiB). It reads and writes within MergeBytesPerSec and
	// leaves the MergeKeepNewest newest extents alone, as merging does.
	CompactInterval time.Duration
	CompactMaxKeys  int

	// The slow path (docs/object-topics.md §9): every SlowPathInterval (default 1 s) it lists
	// each writer run's journal from its first uncommitted file and commits every file older
	// than SlowPathGrace (default 3 s, far above a fast-path commit) that is still uncommitted.
	SlowPathInterval time.Duration
	SlowPathGrace    time.Duration
	// CallTimeout bounds each store call of the slow path and the snapshot (default 10 s);
	// merges and GC, which move more bytes per call, get six times as long. A call that takes
	// longer fails and its task tries again next round: a store that never answers a call must
	// not stall maintenance (the slow path's bound depends on it).
	CallTimeout time.Duration

	Metrics *metrics.Objects
	Logger  *slog.Logger
}

// MetadataSnapshotKey is where the active controller keeps a copy of the metadata image (written
// every 2 s when it moved), from which a Ripcord process can start while the controller is away.
const MetadataSnapshotKey = "metadata/image.json"

// Maintainer runs object topics' retention, merging, compaction and garbage collection, planned
// on the active controller (merges, compaction passes and GC passes may run on another node's
// Maintainer), and the slow path on every process.
type Maintainer struct {
	cfg        MaintainerConfig
	store      objstore.Store // cfg.Store, every call bounded by 6 × cfg.CallTimeout
	quick      objstore.Store // cfg.Store, every call bounded by cfg.CallTimeout (slow path, snapshot)
	snapshotAt uint64         // the image index last written to MetadataSnapshotKey

	// Garbage collection. id names this maintainer as a planner of GC passes, planPass numbers
	// its GC ticks (runBulk's goroutine only). The passes this node runs, asked by any planner,
	// share the state under gcMu: the objects seen unreferenced and since when, kept only while
	// one planner's passes come here one after another (gcPlanner, gcPass).
	id         string
	planPass   uint64
	gcMu       sync.Mutex
	gcPlanner  string
	gcPass     uint64
	unrefSince map[string]time.Time

	// The slow path's schedule (its goroutine only): per run, and of the announced runs.
	sched       map[string]runSchedule
	announced   []string
	markersNext time.Time

	// Failures of the quick loop's tasks, logged once and then once a minute while they go on
	// (an unreachable store or a full disk failed them every 2 s, each with a warning).
	snapFails, slowFails failureLog
}

// failureLogEvery is how often a task that keeps failing is logged again.
const failureLogEvery = time.Minute

// failureLog logs a periodic task's failures: the first one, then one a minute with how many
// there were, and once it works again. One goroutine's (the task's).
type failureLog struct {
	n     int // failures in a row
	every logevery.Limiter
}

func (f *failureLog) failed(l *slog.Logger, msg string, err error, now time.Time) {
	f.n++
	f.every.Every = failureLogEvery
	if _, ok := f.every.Allow(now); ok {
		l.Warn(msg, "err", err, "failures_in_a_row", f.n)
	}
}

func (f *failureLog) worked(l *slog.Logger, msg string) {
	if f.n > 1 {
		l.Info(msg+": works again", "failures_in_a_row", f.n)
	}
	f.n = 0
	f.every.Reset()
}

// WriteSnapshot writes the image to MetadataSnapshotKey if it moved since the last write.
func (m *Maintainer) WriteSnapshot(ctx context.Context) error {
	img := m.cfg.Image()
	if img.Index == m.snapshotAt {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.quick.Put(ctx, MetadataSnapshotKey, controller.EncodeImage(img)); err != nil {
		return err
	}
	m.snapshotAt = img.Index
	return nil
}

// NewMaintainer returns a maintainer; Run runs it.
func NewMaintainer(cfg MaintainerConfig) *Maintainer {
	if cfg.RetentionInterval <= 0 {
		cfg.RetentionInterval = 30 * time.Second
	}
	if cfg.GCInterval <= 0 {
		cfg.GCInterval = time.Minute
	}
	if cfg.GCGrace <= 0 {
		cfg.GCGrace = 10 * time.Minute
	}
	if cfg.OrphanAge <= 0 {
		cfg.OrphanAge = time.Hour
	}
	if cfg.MergeInterval <= 0 {
		cfg.MergeInterval = 10 * time.Second
	}
	if cfg.MergeMinRun <= 1 {
		cfg.MergeMinRun = 8
	}
	if cfg.MergeSmall <= 0 {
		cfg.MergeSmall = 1 << 20
	}
	if cfg.MergeTarget <= 0 {
		cfg.MergeTarget = 8 << 20
	}
	if cfg.MergeKeepNewest <= 0 {
		cfg.MergeKeepNewest = 32
	}
	if cfg.MergeBytesPerSec <= 0 {
		cfg.MergeBytesPerSec = 16 << 20
	}
	if cfg.CompactInterval <= 0 {
		cfg.CompactInterval = 15 * time.Second
	}
	if cfg.CompactMaxKeys <= 0 {
		cfg.CompactMaxKeys = 1 << 20
	}
	if cfg.SlowPathInterval <= 0 {
		cfg.SlowPathInterval = time.Second
	}
	if cfg.SlowPathGrace <= 0 {
		cfg.SlowPathGrace = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	return &Maintainer{cfg: cfg, store: objstore.WithTimeout(cfg.Store, 6*cfg.CallTimeout),
		quick: objstore.WithTimeout(cfg.Store, cfg.CallTimeout), id: strconv.Itoa(int(cfg.Node)) + "-" + rand.Text(),
		unrefSince: map[string]time.Time{}, sched: map[string]runSchedule{}}
}

// Run maintains until ctx ends. The slow path and the metadata snapshot run apart from merging,
// retention and GC, so a long merge never holds back a dead writer's records.
func (m *Maintainer) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() { m.runQuick(ctx); close(done) }()
	m.runBulk(ctx)
	<-done
}

func (m *Maintainer) runQuick(ctx context.Context) {
	slow := time.NewTicker(m.cfg.SlowPathInterval)
	defer slow.Stop()
	snap := time.NewTicker(2 * time.Second)
	defer snap.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-snap.C:
			if m.cfg.Active() {
				const msg = "objects: writing the metadata snapshot to the object store"
				if err := m.WriteSnapshot(ctx); err != nil {
					m.snapFails.failed(m.cfg.Logger, msg, err, time.Now())
				} else {
					m.snapFails.worked(m.cfg.Logger, msg)
				}
			}
		case <-slow.C: // on every process, for the runs assigned to it
			const msg = "objects: slow path"
			n, err := m.SlowPath(ctx, time.Now())
			if err != nil {
				m.slowFails.failed(m.cfg.Logger, msg, err, time.Now())
				continue
			}
			m.slowFails.worked(m.cfg.Logger, msg)
			if n > 0 {
				m.cfg.Logger.Info("objects: slow path committed files their writers did not", "files", n)
			}
		}
	}
}

func (m *Maintainer) runBulk(ctx context.Context) {
	ret := time.NewTicker(m.cfg.RetentionInterval)
	defer ret.Stop()
	gc := time.NewTicker(m.cfg.GCInterval)
	defer gc.Stop()
	merge := time.NewTicker(m.cfg.MergeInterval)
	defer merge.Stop()
	compact := time.NewTicker(m.cfg.CompactInterval)
	defer compact.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-merge.C:
			if m.cfg.Active() {
				if n, err := m.Merge(ctx); err != nil {
					m.cfg.Logger.Warn("objects: merging", "err", err)
				} else if n > 0 {
					m.cfg.Logger.Debug("objects: merged", "extents", n)
				}
			}
		case <-compact.C:
			if m.cfg.Active() {
				st, err := m.Compact(ctx, time.Now())
				if err != nil {
					m.cfg.Logger.Warn("objects: compaction", "err", err)
				}
				if st.Partitions > 0 {
					m.cfg.Logger.Debug("objects: compacted", "partitions", st.Partitions, "extents_in", st.ExtentsIn,
						"extents_out", st.ExtentsOut, "records_removed", st.RecordsRemoved, "bytes_read", st.BytesRead, "bytes_written", st.BytesWritten)
				}
				m.cfg.Metrics.Compacted(st.Local())
			}
		case <-ret.C:
			if m.cfg.Active() {
				if err := m.Retention(ctx, time.Now()); err != nil {
					m.cfg.Logger.Warn("objects: retention", "err", err)
				}
			}
		case <-gc.C:
			m.collect(ctx, time.Now())
		}
	}
}

// GCJob is a garbage collection pass the active controller asks of a node: Pass numbers the
// planner's passes, so that the node keeps its grace periods only over consecutive passes of
// one planner (docs/object-topics.md §5).
type GCJob struct {
	Planner string `json:"planner"`
	Pass    uint64 `json:"pass"`
}

// collect runs one GC tick: on the active controller, a pass on the GCWorker's node, else (or
// if that node fails) here. Every tick numbers a pass, run or not, so a node that did not run
// the previous one starts its grace periods afresh.
func (m *Maintainer) collect(ctx context.Context, now time.Time) {
	m.planPass++
	if !m.cfg.Active() {
		return
	}
	job := GCJob{Planner: m.id, Pass: m.planPass}
	how := "local"
	if m.cfg.GCWorker != nil {
		n, err := m.cfg.GCWorker(ctx, job)
		if err == nil {
			m.cfg.Metrics.CollectedBy("delegated")
			if n > 0 {
				m.cfg.Logger.Info("objects: garbage collected by another node", "objects", n)
			}
			return
		}
		if !errors.Is(err, ErrNoWorker) {
			m.cfg.Logger.Warn("objects: the node asked to collect garbage failed; collecting here", "err", err)
			how = "delegation_failed"
		}
	}
	n, err := m.GCRun(ctx, job, now)
	if err != nil {
		m.cfg.Logger.Warn("objects: garbage collection", "err", err)
		return
	}
	m.cfg.Metrics.CollectedBy(how)
	if n > 0 {
		m.cfg.Logger.Info("objects: garbage collected", "objects", n)
	}
}

// GCRun runs a garbage collection pass a planner (the active controller, this node's or
// another's) asked for: it first passes the Barrier, so this node's image is at least the one
// the planner had; the objects seen unreferenced so far count towards their grace periods only
// if this node ran the planner's previous pass (else a file referenced in between, while
// passes ran elsewhere, could be deleted as soon as it is dropped). It returns how many objects
// it deleted.
func (m *Maintainer) GCRun(ctx context.Context, job GCJob, now time.Time) (int, error) {
	if m.cfg.Barrier != nil {
		bctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
		err := m.cfg.Barrier(bctx)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("objects: catching up with the controller before collecting garbage: %w", err)
		}
	}
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	if job.Planner != m.gcPlanner || job.Pass != m.gcPass+1 {
		clear(m.unrefSince)
	}
	m.gcPlanner, m.gcPass = job.Planner, job.Pass
	return m.gc(ctx, now)
}

// Retention proposes the log starts retention.ms and retention.bytes give object partitions,
// and forgets their idempotent producers idle past producer.id.expiration.ms (as a local
// partition's retention pass does).
func (m *Maintainer) Retention(ctx context.Context, now time.Time) error {
	img := m.cfg.Image()
	if err := m.expireProducers(ctx, img, now); err != nil {
		return err
	}
	var items []controller.TrimItem
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		// Compact alone keeps every key's latest record however old: retention applies only
		// with delete in the policy, as in Kafka and the local log.
		if !t.IsObject() || !strings.Contains(m.cfg.Config(name, "cleanup.policy"), "delete") {
			continue
		}
		ms, _ := strconv.ParseInt(m.cfg.Config(name, "retention.ms"), 10, 64)
		bytes, _ := strconv.ParseInt(m.cfg.Config(name, "retention.bytes"), 10, 64)
		if ms < 0 && bytes < 0 {
			continue
		}
		for i, p := range t.Objects {
			if start := p.RetentionStart(now.UnixMilli(), ms, bytes); start > p.Start {
				items = append(items, controller.TrimItem{PartitionRef: controller.PartitionRef{Topic: t.ID, Partition: int32(i)}, Start: start})
			}
		}
	}
	if len(items) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m.cfg.Propose(ctx, &controller.Command{Op: controller.OpTrimObjects, TrimObjects: &controller.TrimObjects{Items: items}})
}

// expireProducers proposes forgetting the object partitions' producers that are idle past
// producer.id.expiration.ms at now.
func (m *Maintainer) expireProducers(ctx context.Context, img *controller.Image, now time.Time) error {
	if img.Level < controller.LevelForgottenWriters {
		return nil // a node of an older version would not apply it
	}
	c := &controller.ExpireProducers{NowMs: now.UnixMilli()}
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		if !t.IsObject() {
			continue
		}
		ms, err := strconv.ParseInt(m.cfg.Config(name, "producer.id.expiration.ms"), 10, 64)
		if err != nil || ms <= 0 {
			continue
		}
		for i, p := range t.Objects {
			if p.ProducersExpirable(c.NowMs, ms) {
				c.Items = append(c.Items, controller.ExpireProducersItem{PartitionRef: controller.PartitionRef{Topic: t.ID, Partition: int32(i)}, ExpirationMs: ms})
			}
		}
	}
	if len(c.Items) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m.cfg.Propose(ctx, &controller.Command{Op: controller.OpExpireProducers, ExpireProducers: c})
}

// GC runs a garbage collection pass continuing this node's previous one, whoever planned it.
func (m *Maintainer) GC(ctx context.Context, now time.Time) (int, error) {
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	return m.gc(ctx, now)
}

// gc deletes the objects no extent references any more, once they have been unreferenced for
// the grace period and their writer is done with them. It returns how many it deleted.
func (m *Maintainer) gc(ctx context.Context, now time.Time) (int, error) {
	img := m.cfg.Image()
	refs := map[string]bool{}
	for _, t := range img.Topics {
		for _, p := range t.Objects {
			for _, e := range p.Extents {
				refs[e.File] = true
			}
		}
	}
	objs, err := m.store.List(ctx, "journal/", "", 0)
	if err != nil {
		return 0, err
	}
	merged, err := m.store.List(ctx, "merged/", "", 0)
	if err != nil {
		return 0, err
	}
	objs = append(objs, merged...)
	listed := make(map[string]bool, len(objs))
	runsWithFiles := map[string]bool{}
	deleted := 0
	for _, o := range objs {
		listed[o.Key] = true
		if run, _, ok := ParseJournalKey(o.Key); ok {
			runsWithFiles[run] = true
		}
		if refs[o.Key] {
			delete(m.unrefSince, o.Key)
			continue
		}
		since, seen := m.unrefSince[o.Key]
		if !seen {
			m.unrefSince[o.Key] = now
			continue
		}
		if now.Sub(since) < m.cfg.GCGrace || !writerDone(img, o.Key, now.Sub(o.Modified) >= m.cfg.OrphanAge) {
			continue
		}
		if err := m.store.Delete(ctx, o.Key); err != nil {
			return deleted, err
		}
		delete(m.unrefSince, o.Key)
		m.cfg.Metrics.GarbageDeleted()
		deleted++
	}
	for k := range m.unrefSince {
		if !listed[k] {
			delete(m.unrefSince, k)
		}
	}
	// A run that is no node's current run and has no file left is forgotten, and its marker
	// deleted (the marker last: a run is found again while it has one).
	markers, err := m.store.List(ctx, "runs/", "", 0)
	if err != nil {
		return deleted, err
	}
	current := map[string]bool{}
	for _, n := range img.Nodes {
		current[n.Run] = true
	}
	forget := func(run string) error {
		c := &controller.ForgetWriter{Writer: run}
		if img.Level >= controller.LevelForgottenWriters { // else a node of an older version forgets the run whole
			c.NowMs = now.UnixMilli()
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return m.cfg.Propose(cctx, &controller.Command{Op: controller.OpForgetWriter, ForgetWriter: c})
	}
	expired := false
	for run := range img.ObjWriters {
		if !current[run] && !runsWithFiles[run] {
			if err := forget(run); err != nil {
				return deleted, err
			}
			expired = true // the forget drops the forgotten runs past their time too
		}
	}
	if !expired && img.Level >= controller.LevelForgottenWriters {
		for _, f := range img.ForgottenWriters {
			if now.UnixMilli()-f.AtMs > controller.ForgottenWriterTTL.Milliseconds() {
				if err := forget(""); err != nil { // no run: only the expiry
					return deleted, err
				}
				break
			}
		}
	}
	for _, o := range markers {
		run := MarkerRun(o.Key)
		// A marker older than the grace period of a run with no file that is no process's
		// current run: its writer never wrote a file, or its files are all gone.
		if !current[run] && !runsWithFiles[run] && now.Sub(o.Modified) >= m.cfg.GCGrace {
			if err := m.store.Delete(ctx, o.Key); err != nil {
				return deleted, err
			}
		}
	}
	// Announcements of processes gone for long (a crash leaves its announcement behind).
	members, err := m.store.List(ctx, MemberPrefix, "", 0)
	if err != nil {
		return deleted, err
	}
	for _, o := range members {
		if now.Sub(o.Modified) >= MemberForget {
			if err := m.store.Delete(ctx, o.Key); err != nil {
				return deleted, err
			}
		}
	}
	return deleted, nil
}

// writerDone reports whether an object's writer will not commit it any more: a journal file is
// committed (by its writer or the slow path, which commits every file it finds), also one of a
// run the image forgot but still remembers (its process may live on, and write files the slow
// path then commits); a journal file of a run the image does not know (never registered, or
// forgotten more than ForgottenWriterTTL ago) once it is old; a merged object is proposed
// within seconds of its write (so one unreferenced for the grace period is garbage).
func writerDone(img *controller.Image, key string, old bool) bool {
	if strings.HasPrefix(key, "merged/") {
		return true
	}
	run, seq, ok := ParseJournalKey(key)
	if !ok {
		return old
	}
	w := img.Writer(run)
	if w == nil {
		return old
	}
	return w.Committed.Covers(int64(seq), int64(seq))
}
