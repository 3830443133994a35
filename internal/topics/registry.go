// Package topics is a node's view of its topics — names, ids, partitions, configs, as the
// controller's metadata image has them — and the logs of the partitions hosted here:
//
//	<data-dir>/topics/<topic>/topic.json     {"id": "<32 hex>", "partitions": N, "configs": {...}}
//	<data-dir>/topics/<topic>/<partition>/   a hosted partition's log (package logstore)
//
// The image is the authority; Sync makes the registry and the directory match it. topic.json
// mirrors the image's topic (a node that starts before it has the image can tell which topic a
// directory holds, and an upgraded one-node data dir is imported from it), replaced atomically.
// A directory of a topic the image no longer has, or of a partition no longer hosted here, is
// removed: it is first renamed to "<topic>.<id>~deleted" or "<topic>.<id>.<partition>~deleted"
// (atomic; no topic name has a '~'), then removed; a leftover one is removed on open.
package topics

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// Errors of topic operations; the broker maps them to Kafka error codes.
var (
	ErrUnknownTopic      = errors.New("topics: unknown topic")
	ErrTopicExists       = errors.New("topics: topic already exists")
	ErrInvalidTopic      = errors.New("topics: invalid topic name")
	ErrInvalidPartitions = errors.New("topics: invalid number of partitions")
)

// MaxPartitions bounds a topic's partitions.
const MaxPartitions = 10000

// Partition is one partition of a topic. Log and Replica are set if the partition is hosted
// here, nil otherwise. A Partition never changes once published: a partition that becomes
// hosted (or stops being) is a new Partition.
//
// A partition this node should host whose log failed to open (its recovery failed: an I/O
// error, a full disk) is offline: Log is nil and Offline returns the failure. The rest of the
// topic is served; Sync opens it again once its retry is due (see Registry.RetryAt).
type Partition struct {
	Topic   string
	Index   int32
	Log     *logstore.Log
	Replica *replica.Replica

	offline error // why the log of this hosted partition is not open
	retry   retry // when Sync next tries to open it

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every append
}

// Hosted reports whether this node holds a replica of the partition (with an open log).
func (p *Partition) Hosted() bool { return p.Log != nil }

// Offline returns why this node, which should host the partition, has not opened its log; nil
// if it has, or does not host it.
func (p *Partition) Offline() error { return p.offline }

// Changed returns a channel closed at the next append.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// NotifyAppend wakes everything waiting on Changed.
func (p *Partition) NotifyAppend() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// Topic is a topic's metadata and partitions. Its fields change only under the registry's lock
// and are replaced, not mutated, so a *Topic obtained from the registry can be read freely.
type Topic struct {
	Name       string
	ID         [16]byte
	Configs    map[string]string // explicitly set configs; the caller must not modify it
	Partitions []*Partition

	defaults *defaults // the registry's dynamic broker configs
	// placeholder: published for a topic whose first sync on this node failed (its directory
	// unchecked): its hosted partitions are offline with that failure, and its next sync starts
	// afresh.
	placeholder bool
}

type topicFile struct {
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs"`
}

// Registry is the set of topics of a node.
type Registry struct {
	fs       vfs.FS
	dir      string // <data-dir>/topics
	flusher  *logstore.Flusher
	maint    *logstore.Maintainer
	logger   *slog.Logger
	now      func() time.Time
	defaults *defaults

	syncMu sync.Mutex // one Sync at a time

	// failed: topics whose last sync failed (an I/O error in their directory, an unreadable
	// topic.json), tried again when due; under mu, written under syncMu too.
	failed map[string]*topicFailure
	// cleanupLogged: when a failed removal of deleted topics' directories was last logged;
	// cleanup: when Sync should run to try it again (the zero retry if none is due). Under mu.
	cleanupLogged time.Time
	cleanup       retry
	// poisoned: by partition directory, when the log a failed write or sync poisoned is opened
	// again (reopenPoisoned); under mu, written under syncMu too.
	poisoned map[string]*poisonRetry

	mu     sync.RWMutex
	byName map[string]*Topic
	byID   map[[16]byte]*Topic
	gen    uint64 // counts the names added, removed or given another id, under mu (Generation)

	// Directories renamed for removal, being removed in the background (removeLater), one at a
	// time (rmOne); Close waits for them. rmFailed: the renamed directories whose removal
	// failed, and when a Sync should try again (its own retry, apart from cleanup: a Sync that
	// found nothing wrong itself must not wipe the failure of a removal running beside it).
	rmMu     sync.Mutex
	removing map[string]bool
	rmFailed map[string]retry
	rmOne    sync.Mutex
	rmWG     sync.WaitGroup
}

// Options configure a Registry.
type Options struct {
	FS         vfs.FS               // nil: the operating system's
	DataDir    string               // topics live in DataDir/topics
	Flusher    *logstore.Flusher    // required
	Maintainer *logstore.Maintainer // runs retention and compaction; nil: none
	Logger     *slog.Logger         // nil: slog.Default()
	Now        func() time.Time     // nil: time.Now (when an offline partition is retried)
}

// The wait before a step that failed (opening a log, syncing a topic, removing a deleted one's
// directory) is tried again: the first, doubled after each failure up to the last.
const (
	offlineRetryFirst = time.Second
	offlineRetryMax   = time.Minute
)

// retry is when a step that failed is tried again, and the wait that led there; the zero
// retry is none.
type retry struct {
	at   time.Time
	wait time.Duration
}

// after is the retry of a step that failed at now, following rt (the zero retry for a first
// failure).
func (rt retry) after(now time.Time) retry {
	w := min(max(2*rt.wait, offlineRetryFirst), offlineRetryMax)
	return retry{at: now.Add(w), wait: w}
}

// Open opens the registry of dataDir, empty until the first Sync. It removes the leftovers of
// interrupted topic deletions.
func Open(opts Options) (*Registry, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Registry{fs: opts.FS, dir: filepath.Join(opts.DataDir, "topics"), flusher: opts.Flusher, maint: opts.Maintainer,
		logger: opts.Logger, now: opts.Now, byName: map[string]*Topic{}, byID: map[[16]byte]*Topic{}, defaults: newDefaults(),
		removing: map[string]bool{}, rmFailed: map[string]retry{}, poisoned: map[string]*poisonRetry{}}
	if err := r.fs.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	names, err := r.fs.List(r.dir)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if removal(name) { // renamed for removal before a crash or a stop: nothing needs it
			r.removeLater(filepath.Join(r.dir, name))
		}
	}
	return r, nil
}

// removedSuffix ends the name a directory being removed is renamed to. Topic names have no '~'.
const removedSuffix = "~deleted"

// legacyRemoval is the name earlier builds gave a topic's directory being removed.
var legacyRemoval = regexp.MustCompile(`\.[0-9a-f]{32}\.deleted$`)

// removal reports whether name (in the topics directory) is a directory being removed.
func removal(name string) bool {
	return strings.HasSuffix(name, removedSuffix) || legacyRemoval.MatchString(name)
}

// OnLogFailure has fn called with the failure of every log of the registry that a failed write
// or sync poisons, or whose recovery fails, before anyone waiting on the log hears of it (see
// logstore.Flusher.OnPoison).
func (r *Registry) OnLogFailure(fn func(error)) { r.flusher.OnPoison(fn) }

// LocalTopic is a topic directory found on disk, as its topic.json describes it.
type LocalTopic struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Configs    map[string]string
}

// LocalTopics lists the topic directories of the data dir (for the upgrade of a one-node data
// dir, whose topics the new controller imports).
func (r *Registry) LocalTopics() ([]LocalTopic, error) {
	names, err := r.fs.List(r.dir)
	if err != nil {
		return nil, err
	}
	var out []LocalTopic
	for _, name := range names {
		if removal(name) {
			continue
		}
		tf, ok, err := r.readTopicFile(name)
		if err != nil {
			return nil, fmt.Errorf("topics: %s: %w", name, err)
		}
		if ok {
			out = append(out, LocalTopic{Name: name, ID: tf.id, Partitions: tf.Partitions, Configs: tf.Configs})
		}
	}
	return out, nil
}

type parsedTopicFile struct {
	topicFile
	id [16]byte
}

func (r *Registry) readTopicFile(name string) (parsedTopicFile, bool, error) {
	var tf parsedTopicFile
	b, err := vfs.ReadFile(r.fs, filepath.Join(r.dir, name, "topic.json"))
	if errors.Is(err, vfs.ErrNotExist) {
		return tf, false, nil
	}
	if err != nil {
		return tf, false, err
	}
	if err := json.Unmarshal(b, &tf.topicFile); err != nil {
		return tf, false, err
	}
	idb, err := hex.DecodeString(tf.ID)
	if err != nil || len(idb) != 16 {
		return tf, false, fmt.Errorf("bad topic id %q", tf.ID)
	}
	copy(tf.id[:], idb)
	return tf, true, nil
}

// TopicSpec is a topic as the metadata image has it, and which of its partitions this node
// hosts.
type TopicSpec struct {
	Name       string
	ID         [16]byte
	Configs    map[string]string
	Partitions int32
	Hosted     func(index int32) bool
}

// Hooks connect hosted partitions to replication.
type Hooks struct {
	// Opened is called with a partition whose log was just opened, before the partition is
	// published; its result becomes the partition's Replica.
	Opened func(t *Topic, p *Partition, dir string) (*replica.Replica, error)
	// Closing is called before a hosted partition's log is closed.
	Closing func(t *Topic, p *Partition)
}

// topicFailure is a topic whose sync failed: it stays as it was published (a placeholder if it
// was not) until its retry, or until the image changes its partitions here.
type topicFailure struct {
	id     [16]byte
	err    error
	retry  retry
	hosted []bool // the spec's hosted partitions when it failed
	// unopened: hosted partitions the published form has not opened and does not count
	// offline (added or moved here by the sync that failed).
	unopened []bool
}

// same reports whether spec is the topic f failed on, with the same partitions hosted here.
func (f *topicFailure) same(spec TopicSpec) bool {
	if f.id != spec.ID || int32(len(f.hosted)) != spec.Partitions {
		return false
	}
	for i, h := range f.hosted {
		if spec.Hosted(int32(i)) != h {
			return false
		}
	}
	return true
}

// Sync makes the registry and the data directory match the image: specs are every topic, and
// cluster and node are the dynamic broker configs (cluster-wide and this node's). Logs of newly
// hosted partitions are opened (created if missing), and those no longer hosted closed and
// removed; topics that are gone are deleted. A partition whose log fails to open is offline
// (Partition.Offline), and a topic whose sync fails otherwise (an I/O error in its directory,
// an unreadable topic.json) stays as it was; neither fails anything else, and both are tried
// again after 1 s, the wait doubling to 1 min while they keep failing (RetryAt). A deleted
// topic leaves the registry even if its directory cannot be removed: a later Sync removes it.
// Nothing fails the whole Sync: everything waiting for the metadata to be applied here would
// wait on one topic's disk.
func (r *Registry) Sync(specs []TopicSpec, cluster, node map[string]string, hooks Hooks) {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	defaultsChanged := r.defaults.set(cluster, node)
	want := map[string]bool{}
	var errs []error
	for _, spec := range specs {
		want[spec.Name] = true
		r.mu.RLock()
		f := r.failed[spec.Name]
		r.mu.RUnlock()
		if f != nil && f.same(spec) && r.now().Before(f.retry.at) {
			continue
		}
		// A topic that failed may have missed a change of the defaults meanwhile.
		if err := r.syncTopic(spec, defaultsChanged || f != nil, hooks); err != nil {
			r.topicFailed(spec, f, err)
			continue
		}
		if f != nil {
			r.logger.Info("topics: a topic whose sync failed is in sync again", "topic", spec.Name)
			r.mu.Lock()
			delete(r.failed, spec.Name)
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	for name := range r.failed {
		if !want[name] {
			delete(r.failed, name)
		}
	}
	r.mu.Unlock()
	for _, t := range r.List() {
		if !want[t.Name] {
			errs = append(errs, r.deleteTopic(t, hooks))
		}
	}
	errs = append(errs, r.removeOrphans(want))
	err := errors.Join(errs...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.cleanup = retry{}
		return
	}
	// The topics are gone from the registry; what is left of them on disk a later Sync
	// removes (removeOrphans), when RetryAt says.
	now := r.now()
	r.cleanup = r.cleanup.after(now)
	if r.cleanupLogged.IsZero() || now.Sub(r.cleanupLogged) >= offlineRetryMax {
		r.cleanupLogged = now
		r.logger.Error("topics: removing the directories of deleted topics failed; a later sync tries again", "err", err)
	}
}

// syncTopic brings one topic in line with its spec.
func (r *Registry) syncTopic(spec TopicSpec, defaultsChanged bool, hooks Hooks) error {
	old, _ := r.Get(spec.Name)
	if old != nil && old.ID != spec.ID { // deleted and created again under the same name
		if err := r.deleteTopic(old, hooks); err != nil {
			return err
		}
		old = nil
	}
	if old != nil && old.placeholder { // it holds no log: start afresh
		old = nil
	}
	if old == nil {
		tf, ok, err := r.readTopicFile(spec.Name)
		if err != nil {
			hosted := false
			for i := range spec.Partitions {
				hosted = hosted || spec.Hosted(i)
			}
			if hosted {
				// Which topic the directory holds is unknown: keep it (it may be this one's).
				return fmt.Errorf("reading %s: %w (fix or remove the file; the directory is kept)",
					filepath.Join(r.dir, spec.Name, "topic.json"), err)
			}
			// Whichever topic it held, this node hosts none of its partitions now.
			r.logger.Warn("topics: removing the directory of a topic whose topic.json cannot be read; no partition of it is hosted here",
				"topic", spec.Name, "err", err)
			if err := r.removeTopicDir(spec.Name, [16]byte{}); err != nil {
				return err
			}
		}
		if ok && tf.id != spec.ID {
			// A directory left by an older topic of this name (deleted while this node was down).
			if err := r.removeTopicDir(spec.Name, tf.id); err != nil {
				return err
			}
		}
		if err := r.fs.MkdirAll(filepath.Join(r.dir, spec.Name), 0o755); err != nil {
			return err
		}
	}
	t := &Topic{Name: spec.Name, ID: spec.ID, Configs: maps.Clone(spec.Configs), defaults: r.defaults}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	configChanged := old == nil || !maps.Equal(old.Configs, t.Configs) || defaultsChanged
	cfg := logConfig(t.Configs, r.defaults)
	changed := old == nil || configChanged || int32(len(old.Partitions)) != spec.Partitions
	var opened []*Partition
	published := false
	defer func() { // a failure publishes nothing: the next Sync opens these again
		if !published {
			for _, o := range opened {
				r.closePartition(t, o, hooks, false)
			}
		}
	}()
	now := r.now()
	for i := range spec.Partitions {
		var cur *Partition
		if old != nil && int(i) < len(old.Partitions) {
			cur = old.Partitions[i]
		}
		hosted := spec.Hosted(i)
		switch {
		case cur != nil && cur.offline != nil && hosted && now.Before(cur.retry.at):
			t.Partitions = append(t.Partitions, cur) // offline until its retry
		case cur != nil && cur.offline != nil && !hosted: // moved away while offline
			if err := r.removePartitionDir(t, i); err != nil {
				return err
			}
			t.Partitions = append(t.Partitions, &Partition{Topic: t.Name, Index: i, changed: make(chan struct{})})
			changed = true
		case cur != nil && hosted && cur.Hosted() && cur.Log.Reopenable():
			// Nothing to persist: the partitions and configs are the same (topic.json on a full
			// disk would fail the sync and leave the closed log published).
			p, reopened, err := r.reopenPoisoned(t, cur, cfg, hooks, now)
			switch {
			case err != nil:
				t.Partitions = append(t.Partitions, r.offlinePartition(t, i, nil, err))
			case reopened:
				opened = append(opened, p)
				t.Partitions = append(t.Partitions, p)
			default:
				t.Partitions = append(t.Partitions, cur) // poisoned until its retry
			}
		case cur != nil && cur.Hosted() == hosted:
			if hosted && configChanged {
				if err := cur.Log.SetConfig(cfg); err != nil {
					r.logger.Warn("topics: applying configs", "topic", t.Name, "partition", i, "err", err)
				}
			}
			t.Partitions = append(t.Partitions, cur)
		case hosted:
			p, err := r.openPartition(t, i, cfg, hooks)
			if err != nil {
				t.Partitions = append(t.Partitions, r.offlinePartition(t, i, cur, err))
				continue
			}
			opened = append(opened, p)
			t.Partitions = append(t.Partitions, p)
			changed = true
		default: // not hosted here (any more): close and remove
			r.mu.Lock()
			delete(r.poisoned, r.partitionDir(t.Name, i))
			r.mu.Unlock()
			if cur != nil && cur.Hosted() {
				r.closePartition(t, cur, hooks, true)
			} else if cur == nil {
				// A copy this process never opened, left by a move away from this node
				// while it was down (or by a crash before its removal).
				if err := r.removePartitionDir(t, i); err != nil {
					return err
				}
			}
			t.Partitions = append(t.Partitions, &Partition{Topic: t.Name, Index: i, changed: make(chan struct{})})
			changed = true
		}
	}
	if changed {
		if err := r.persist(t); err != nil {
			return err
		}
	}
	r.mu.Lock()
	if prev, ok := r.byName[t.Name]; !ok || prev.ID != t.ID {
		r.gen++
	}
	r.byName[t.Name], r.byID[t.ID] = t, t
	r.mu.Unlock()
	published = true
	return nil
}

// topicFailed records that spec's sync failed with err (prev: its earlier failure, if any).
// A topic that was not published gets a placeholder, so that this node still knows it (its
// Metadata answers, its configs), with the partitions it should host offline.
func (r *Registry) topicFailed(spec TopicSpec, prev *topicFailure, err error) {
	var last retry
	if prev != nil && prev.id == spec.ID {
		last = prev.retry
	}
	f := &topicFailure{id: spec.ID, err: err, retry: last.after(r.now()), hosted: make([]bool, spec.Partitions),
		unopened: make([]bool, spec.Partitions)}
	old, ok := r.Get(spec.Name)
	if ok && old.ID != spec.ID {
		old, ok = nil, false
	}
	if !ok || old.placeholder {
		t := &Topic{Name: spec.Name, ID: spec.ID, Configs: maps.Clone(spec.Configs), defaults: r.defaults, placeholder: true}
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		for i := range spec.Partitions {
			p := &Partition{Topic: spec.Name, Index: i, changed: make(chan struct{})}
			if spec.Hosted(i) {
				p.offline, p.retry = err, f.retry
			}
			t.Partitions = append(t.Partitions, p)
		}
		r.mu.Lock()
		if ok { // a placeholder of the topic before
			delete(r.byID, old.ID)
		}
		if prev, ok := r.byName[t.Name]; !ok || prev.ID != t.ID {
			r.gen++
		}
		r.byName[t.Name], r.byID[t.ID] = t, t
		r.mu.Unlock()
		old = t
	}
	unopened := 0
	for i := range spec.Partitions {
		f.hosted[i] = spec.Hosted(i)
		if f.hosted[i] && (int(i) >= len(old.Partitions) || !old.Partitions[i].Hosted() && old.Partitions[i].offline == nil) {
			f.unopened[i] = true
		}
		if f.hosted[i] && (int(i) >= len(old.Partitions) || !old.Partitions[i].Hosted()) {
			unopened++
		}
	}
	r.logger.Error("topics: syncing a topic failed; it stays as it was on this node, the rest is served",
		"topic", spec.Name, "unopened_partitions", unopened, "retry_in", f.retry.wait, "err", err)
	r.mu.Lock()
	if r.failed == nil {
		r.failed = map[string]*topicFailure{}
	}
	r.failed[spec.Name] = f
	r.mu.Unlock()
}

// offlinePartition is partition i of t, whose log failed to open with err; prev is the
// partition as published before (nil, not hosted, or offline already).
func (r *Registry) offlinePartition(t *Topic, i int32, prev *Partition, err error) *Partition {
	var last retry
	if prev != nil && prev.offline != nil {
		last = prev.retry
	}
	rt := last.after(r.now()) // after the failed open, which may have taken a while
	r.logger.Error("topics: the log of a partition hosted here failed to open; the partition is offline on this node, "+
		"the rest is served", "topic", t.Name, "partition", i, "dir", r.partitionDir(t.Name, i), "retry_in", rt.wait, "err", err)
	return &Partition{Topic: t.Name, Index: i, offline: err, retry: rt, changed: make(chan struct{})}
}

// poisonRetry is when a poisoned log is opened again: at, after the wait that doubles each time
// the log opened again is poisoned again (up to offlineRetryMax); reopened: it was, at at.
type poisonRetry struct {
	retry
	reopened bool
}

// poisonedHealthy: a log opened again after a poisoning that is poisoned again this long after
// starts a new series of waits (the first, 1 s).
const poisonedHealthy = 10 * offlineRetryMax

// reopenPoisoned opens again, once its wait is over, the log of hosted partition cur that a
// write refused for want of space poisoned (logstore.Log.Reopenable: a full disk, not a failed
// fsync, which waits for a restart): a restart would, and only a restart did before. Its recovery cuts what the failure left half written; on a disk still
// full, the next write poisons it again, and the wait doubles. Kafka takes the log directory
// offline instead, and with a single one halts the broker. It returns cur's successor (reopened)
// or the error of its opening (cur is closed then: the partition is offline); neither while the
// wait runs.
func (r *Registry) reopenPoisoned(t *Topic, cur *Partition, cfg logstore.Config, hooks Hooks, now time.Time) (*Partition, bool, error) {
	dir := r.partitionDir(t.Name, cur.Index)
	r.mu.Lock()
	pr := r.poisoned[dir]
	switch {
	case pr == nil || pr.reopened && now.Sub(pr.at) >= poisonedHealthy:
		pr = &poisonRetry{retry: retry{}.after(now)}
		r.poisoned[dir] = pr
	case pr.reopened: // opened again, poisoned again
		pr.retry, pr.reopened = pr.after(now), false
	}
	due := !now.Before(pr.at)
	if due {
		pr.reopened = true
	}
	r.mu.Unlock()
	if !due {
		return nil, false, nil
	}
	r.logger.Warn("topics: opening again the log a failed write or sync poisoned", "topic", t.Name, "partition", cur.Index,
		"dir", dir, "poisoned_by", cur.Log.Err())
	if err := r.closePartition(t, cur, hooks, false); err != nil {
		r.logger.Warn("topics: closing a poisoned log", "topic", t.Name, "partition", cur.Index, "err", err)
	}
	p, err := r.openPartition(t, cur.Index, cfg, hooks)
	if err != nil {
		return nil, false, err
	}
	return p, true, nil
}

// poisoned reports whether p is hosted with a log a failed write or sync poisoned.
func poisoned(p *Partition) bool { return p.Log != nil && p.Log.Err() != nil }

// Offline returns how many partitions this node should host have no open log or a poisoned one:
// offline ones (Partition.Offline), those a topic's failed sync did not open, and those whose
// log a failed write or sync poisoned until it is opened again.
func (r *Registry) Offline() int {
	n := 0
	for _, t := range r.List() {
		for _, p := range t.Partitions {
			if p.offline != nil || poisoned(p) {
				n++
			}
		}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, f := range r.failed {
		for _, u := range f.unopened {
			if u {
				n++
			}
		}
	}
	return n
}

// Unopened reports whether partition i of topic id is one this node should host and has not
// opened: offline (Partition.Offline), of a topic whose sync failed before it was published, or
// with a log a failed write or sync poisoned, until it is opened again.
func (r *Registry) Unopened(id [16]byte, i int32) bool {
	if t, ok := r.GetByID(id); ok && int(i) < len(t.Partitions) && (t.Partitions[i].offline != nil || poisoned(t.Partitions[i])) {
		return true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, f := range r.failed {
		if f.id == id && int(i) < len(f.unopened) && f.unopened[i] {
			return true
		}
	}
	return false
}

// RetryAt returns when the next Sync should run to open an offline partition's log again, to
// sync a topic whose sync failed, or to remove what a deleted topic left; ok is false if
// nothing is due.
func (r *Registry) RetryAt() (at time.Time, ok bool) {
	earliest := func(rt retry) {
		if !rt.at.IsZero() && (!ok || rt.at.Before(at)) {
			at, ok = rt.at, true
		}
	}
	now, list := r.now(), r.List()
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, t := range list {
		_, failed := r.failed[t.Name] // its own retry (below) governs its partitions
		for _, p := range t.Partitions {
			earliest(p.retry)
			if !failed && p.Log != nil && p.Log.Reopenable() { // due at once if no Sync has seen it poisoned yet
				pr := r.poisoned[r.partitionDir(t.Name, p.Index)]
				if pr == nil || pr.reopened {
					earliest(retry{at: now})
				} else {
					earliest(pr.retry)
				}
			}
		}
	}
	for _, f := range r.failed {
		earliest(f.retry)
	}
	earliest(r.cleanup)
	r.rmMu.Lock()
	for _, rt := range r.rmFailed {
		earliest(rt)
	}
	r.rmMu.Unlock()
	return at, ok
}

func (r *Registry) openPartition(t *Topic, i int32, cfg logstore.Config, hooks Hooks) (*Partition, error) {
	dir := r.partitionDir(t.Name, i)
	l, err := logstore.Open(logstore.Options{FS: r.fs, Dir: dir, Config: cfg, Flusher: r.flusher, Logger: r.logger})
	if err != nil {
		return nil, err
	}
	p := &Partition{Topic: t.Name, Index: i, Log: l, changed: make(chan struct{})}
	if hooks.Opened != nil {
		rep, err := hooks.Opened(t, p, dir)
		if err != nil {
			l.Close()
			return nil, err
		}
		p.Replica = rep
	}
	if r.maint != nil {
		r.maint.Add(l)
	}
	r.logger.Debug("topics: partition opened", "topic", t.Name, "partition", i, "start_offset", l.StartOffset(), "end_offset", l.EndOffset())
	return p, nil
}

// closePartition closes a hosted partition's log; with remove, its directory is deleted too.
func (r *Registry) closePartition(t *Topic, p *Partition, hooks Hooks, remove bool) error {
	if hooks.Closing != nil {
		hooks.Closing(t, p)
	}
	if r.maint != nil {
		r.maint.Remove(p.Log)
	}
	err := p.Log.Close()
	if errors.Is(err, logstore.ErrClosed) {
		err = nil
	}
	if remove {
		err = errors.Join(err, r.removePartitionDir(t, p.Index))
	}
	return err
}

// removePartitionDir removes the directory of a partition this node does not host, if there
// is one, as removeDir does.
func (r *Registry) removePartitionDir(t *Topic, i int32) error {
	src := r.partitionDir(t.Name, i)
	if _, err := r.fs.Stat(src); errors.Is(err, vfs.ErrNotExist) {
		return nil
	}
	r.logger.Info("topics: removing the copy of a partition this node does not host", "topic", t.Name, "partition", i)
	return r.removeDir(src, fmt.Sprintf("%s.%x.%d.%s%s", t.Name, t.ID, i, removalID(), removedSuffix))
}

// removeDir renames src to gone in the topics directory (atomic: a crash midway leaves no half
// copy to be opened later, and Open removes what is left), then removes it in the background.
func (r *Registry) removeDir(src, gone string) error {
	gone = filepath.Join(r.dir, gone)
	if err := r.fs.Rename(src, gone); err != nil {
		return err
	}
	if parent := filepath.Dir(src); parent != r.dir {
		if err := r.fs.SyncDir(parent); err != nil {
			return err
		}
	}
	if err := r.fs.SyncDir(r.dir); err != nil {
		return err
	}
	r.removeLater(gone)
	return nil
}

// removalID tells apart the directories renamed for removal of one topic or partition: a
// partition moved away, back and away again is renamed again while the first copy may still be
// being removed.
func removalID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// removeLater removes dir, a directory renamed for removal, in the background, as Kafka deletes a
// deleted log's files later: a large topic's files take seconds to unlink, and the sync that
// applies the deletion (and with it every image change after it on this node, and the
// DeleteTopics waiting for it) would wait for them. One removal runs at a time; a directory
// already being removed is not taken again. One whose removal fails is left to a later Sync
// (removeOrphans) or Open.
func (r *Registry) removeLater(dir string) {
	r.rmMu.Lock()
	if r.removing[dir] {
		r.rmMu.Unlock()
		return
	}
	r.removing[dir] = true
	r.rmWG.Add(1)
	r.rmMu.Unlock()
	go func() {
		defer r.rmWG.Done()
		r.rmOne.Lock()
		err := vfs.RemoveAll(r.fs, dir)
		r.rmOne.Unlock()
		if err != nil {
			r.mu.Lock()
			now := r.now()
			if r.cleanupLogged.IsZero() || now.Sub(r.cleanupLogged) >= offlineRetryMax {
				r.cleanupLogged = now
				r.logger.Error("topics: removing a deleted directory failed; a later sync tries again", "dir", dir, "err", err)
			}
			r.mu.Unlock()
		}
		r.rmMu.Lock()
		if err != nil {
			r.rmFailed[dir] = r.rmFailed[dir].after(r.now()) // RetryAt: a Sync then (removeOrphans) tries again
		} else {
			delete(r.rmFailed, dir)
		}
		delete(r.removing, dir)
		r.rmMu.Unlock()
	}()
}

// WaitRemovals waits until the directories renamed for removal so far are removed (or their
// removal failed).
func (r *Registry) WaitRemovals() { r.rmWG.Wait() }

func (r *Registry) partitionDir(topic string, i int32) string {
	return filepath.Join(r.dir, topic, strconv.Itoa(int(i)))
}

// persist writes topic.json atomically.
func (r *Registry) persist(t *Topic) error {
	b, err := json.Marshal(topicFile{ID: hex.EncodeToString(t.ID[:]), Partitions: int32(len(t.Partitions)), Configs: t.Configs})
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(r.fs, filepath.Join(r.dir, t.Name), "topic.json", b)
}

// deleteTopic closes a topic's logs and removes its directory.
func (r *Registry) deleteTopic(t *Topic, hooks Hooks) error {
	r.mu.Lock()
	if r.byName[t.Name] == t {
		delete(r.byName, t.Name)
		r.gen++
	}
	if r.byID[t.ID] == t {
		delete(r.byID, t.ID)
	}
	for _, p := range t.Partitions {
		delete(r.poisoned, r.partitionDir(t.Name, p.Index))
	}
	r.mu.Unlock()
	var errs []error
	for _, p := range t.Partitions {
		if p.Hosted() {
			errs = append(errs, r.closePartition(t, p, hooks, false))
		}
	}
	errs = append(errs, r.removeTopicDir(t.Name, t.ID))
	return errors.Join(errs...)
}

func (r *Registry) removeTopicDir(name string, id [16]byte) error {
	src := filepath.Join(r.dir, name)
	if _, err := r.fs.Stat(src); errors.Is(err, vfs.ErrNotExist) {
		return nil
	}
	return r.removeDir(src, fmt.Sprintf("%s.%x.%s%s", name, id, removalID(), removedSuffix))
}

// removeOrphans removes topic directories the image does not have.
func (r *Registry) removeOrphans(want map[string]bool) error {
	names, err := r.fs.List(r.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if removal(name) { // being removed, or a removal that failed after its rename
			r.removeLater(filepath.Join(r.dir, name))
			continue
		}
		if want[name] {
			continue
		}
		tf, _, _ := r.readTopicFile(name)
		r.logger.Info("topics: removing the directory of a topic the cluster does not have", "topic", name)
		errs = append(errs, r.removeTopicDir(name, tf.id))
	}
	return errors.Join(errs...)
}

// ValidateName checks a topic name as Kafka does.
func ValidateName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	case len(name) > 249:
		return fmt.Errorf("%w: longer than 249 characters", ErrInvalidTopic)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has a character other than ASCII letters, digits, '.', '_' and '-'", ErrInvalidTopic, name)
		}
	}
	return nil
}

// Preview returns a topic that is not in the registry, with configs over the registry's
// defaults (the answer to a validate-only CreateTopics).
func (r *Registry) Preview(name string, configs map[string]string) *Topic {
	return &Topic{Name: name, Configs: configs, defaults: r.defaults}
}

// ValidateConfigs checks a set of topic configs, over the current broker defaults.
func (r *Registry) ValidateConfigs(configs map[string]string) error {
	for k, v := range configs {
		if err := CheckConfig(k, v); err != nil {
			return err
		}
	}
	return logConfig(configs, r.defaults).Validate()
}

// Get returns a topic by name.
func (r *Registry) Get(name string) (*Topic, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byName[name]
	return t, ok
}

// GetByID returns a topic by id.
func (r *Registry) GetByID(id [16]byte) (*Topic, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byID[id]
	return t, ok
}

// Generation changes whenever a topic name is added or removed or names another topic id: a
// caller that compares names and ids with an earlier List need not look again while it stays
// the same.
func (r *Registry) Generation() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gen
}

// List returns every topic, sorted by name.
func (r *Registry) List() []*Topic {
	r.mu.RLock()
	out := make([]*Topic, 0, len(r.byName))
	for _, t := range r.byName {
		out = append(out, t)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Close closes every partition log.
func (r *Registry) Close() error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	defer r.rmWG.Wait() // the removals under way: nothing of the registry's outlives Close
	r.mu.Lock()
	ts := r.byName
	r.byName, r.byID = map[string]*Topic{}, map[[16]byte]*Topic{}
	r.mu.Unlock()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		t := ts[name]
		for _, p := range t.Partitions {
			if p.Hosted() {
				errs = append(errs, r.closePartition(t, p, Hooks{}, false))
			}
		}
	}
	return errors.Join(errs...)
}

// Dir returns the directory holding the topics (<data-dir>/topics): the node's one log dir.
func (r *Registry) Dir() string { return r.dir }

// BrokerConfig returns a broker config's value on this node (dynamic for the node, dynamic for
// the cluster, or the default) and where it comes from; ok is false for an unknown name.
func (r *Registry) BrokerConfig(name string) (value string, src Source, ok bool) {
	def, ok := defsByBrokerName[name]
	if !ok {
		return "", SourceDefault, false
	}
	value, src = r.defaults.lookup(def)
	return value, src, true
}
