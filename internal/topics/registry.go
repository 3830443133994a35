// Package topics holds the topic metadata of a node — names, ids, partitions, configs — and
// the partition logs, persisted in the data directory:
//
//	<data-dir>/topics/<topic>/topic.json     {"id": "<32 hex>", "partitions": N, "configs": {...}}
//	<data-dir>/topics/<topic>/<partition>/   the partition's log (package logstore)
//
// topic.json is replaced atomically (temporary file, fsync, rename, directory fsync). A deleted
// topic's directory is first renamed to "<topic>.<id>.deleted" (atomic), then removed; a leftover
// one is removed on open. In a cluster this state will move to the controller's Raft log; the
// Registry's methods are the operations the controller will replicate.
package topics

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// Errors of topic operations; the broker maps them to Kafka error codes.
var (
	ErrUnknownTopic      = errors.New("topics: unknown topic")
	ErrTopicExists       = errors.New("topics: topic already exists")
	ErrInvalidTopic      = errors.New("topics: invalid topic name")
	ErrInvalidPartitions = errors.New("topics: invalid number of partitions")
)

// MaxPartitions bounds a topic's partitions on one node.
const MaxPartitions = 10000

// Partition is one partition of a topic and its log.
type Partition struct {
	Topic string
	Index int32
	Log   *logstore.Log

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every append
}

// Changed returns a channel closed at the next append (for fetch long polls).
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
	defaults *defaults

	mu     sync.RWMutex
	byName map[string]*Topic
	byID   map[[16]byte]*Topic
}

// Options configure a Registry.
type Options struct {
	FS         vfs.FS               // nil: the operating system's
	DataDir    string               // topics live in DataDir/topics
	Flusher    *logstore.Flusher    // required
	Maintainer *logstore.Maintainer // runs retention and compaction; nil: none
	Logger     *slog.Logger         // nil: slog.Default()
}

// Open loads every topic under dataDir/topics, opening (and recovering) its partition logs.
func Open(opts Options) (*Registry, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Registry{fs: opts.FS, dir: filepath.Join(opts.DataDir, "topics"), flusher: opts.Flusher, maint: opts.Maintainer,
		logger: opts.Logger, byName: map[string]*Topic{}, byID: map[[16]byte]*Topic{}}
	if err := r.fs.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	d, err := loadDefaults(r.fs, opts.DataDir)
	if err != nil {
		return nil, err
	}
	r.defaults = d
	names, err := r.fs.List(r.dir)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".deleted") {
			if err := vfs.RemoveAll(r.fs, filepath.Join(r.dir, name)); err != nil {
				return nil, err
			}
			continue
		}
		t, err := r.load(name)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("topics: loading %s: %w", name, err)
		}
		if t != nil {
			r.byName[t.Name], r.byID[t.ID] = t, t
		}
	}
	return r, nil
}

func (r *Registry) load(name string) (*Topic, error) {
	b, err := vfs.ReadFile(r.fs, filepath.Join(r.dir, name, "topic.json"))
	if errors.Is(err, vfs.ErrNotExist) {
		r.logger.Warn("topics: skipping a directory without topic.json", "dir", filepath.Join(r.dir, name))
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var tf topicFile
	if err := json.Unmarshal(b, &tf); err != nil {
		return nil, err
	}
	idb, err := hex.DecodeString(tf.ID)
	if err != nil || len(idb) != 16 {
		return nil, fmt.Errorf("bad topic id %q", tf.ID)
	}
	t := &Topic{Name: name, Configs: tf.Configs, defaults: r.defaults}
	copy(t.ID[:], idb)
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	if err := r.openPartitions(t, 0, tf.Partitions); err != nil {
		return nil, err
	}
	return t, nil
}

// openPartitions opens (creating) partitions [from, to) of t, appending them to t.Partitions.
func (r *Registry) openPartitions(t *Topic, from, to int32) error {
	cfg := logConfig(t.Configs, r.defaults)
	for i := from; i < to; i++ {
		l, err := logstore.Open(logstore.Options{FS: r.fs, Dir: filepath.Join(r.dir, t.Name, strconv.Itoa(int(i))),
			Config: cfg, Flusher: r.flusher, Logger: r.logger})
		if err != nil {
			return err
		}
		t.Partitions = append(t.Partitions, &Partition{Topic: t.Name, Index: i, Log: l, changed: make(chan struct{})})
		if r.maint != nil {
			r.maint.Add(l)
		}
	}
	return nil
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

// ValidateConfigs checks a set of topic configs, over the current broker defaults.
func (r *Registry) ValidateConfigs(configs map[string]string) error {
	for k, v := range configs {
		if err := CheckConfig(k, v); err != nil {
			return err
		}
	}
	return logConfig(configs, r.defaults).Validate()
}

// Create creates a topic. With validateOnly it checks everything and changes nothing.
func (r *Registry) Create(name string, partitions int32, configs map[string]string, validateOnly bool) (*Topic, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if partitions < 1 || partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: %d is outside [1, %d]", ErrInvalidPartitions, partitions, MaxPartitions)
	}
	if err := r.ValidateConfigs(configs); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	if validateOnly {
		return &Topic{Name: name, Configs: configs, defaults: r.defaults}, nil
	}
	t := &Topic{Name: name, Configs: cloneMap(configs), defaults: r.defaults}
	if _, err := rand.Read(t.ID[:]); err != nil {
		return nil, err
	}
	if err := r.fs.MkdirAll(filepath.Join(r.dir, name), 0o755); err != nil {
		return nil, err
	}
	if err := r.openPartitions(t, 0, partitions); err != nil {
		r.closeTopic(t)
		return nil, err
	}
	if err := r.persist(t); err != nil {
		r.closeTopic(t)
		return nil, err
	}
	r.byName[name], r.byID[t.ID] = t, t
	return t, nil
}

// persist writes topic.json atomically.
func (r *Registry) persist(t *Topic) error {
	b, err := json.Marshal(topicFile{ID: hex.EncodeToString(t.ID[:]), Partitions: int32(len(t.Partitions)), Configs: t.Configs})
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(r.fs, filepath.Join(r.dir, t.Name), "topic.json", b)
}

// Delete removes a topic and its data.
func (r *Registry) Delete(name string) error {
	r.mu.Lock()
	t, ok := r.byName[name]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	delete(r.byName, name)
	delete(r.byID, t.ID)
	r.mu.Unlock()
	r.closeTopic(t)
	gone := filepath.Join(r.dir, fmt.Sprintf("%s.%x.deleted", name, t.ID))
	if err := r.fs.Rename(filepath.Join(r.dir, name), gone); err != nil {
		return err
	}
	if err := r.fs.SyncDir(r.dir); err != nil {
		return err
	}
	return vfs.RemoveAll(r.fs, gone)
}

// CreatePartitions grows a topic to total partitions.
func (r *Registry) CreatePartitions(name string, total int32, validateOnly bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.byName[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	have := int32(len(t.Partitions))
	if total <= have || total > MaxPartitions {
		return fmt.Errorf("%w: topic has %d partitions; asked for %d (it can only grow, up to %d)", ErrInvalidPartitions, have, total, MaxPartitions)
	}
	if validateOnly {
		return nil
	}
	nt := *t
	nt.Partitions = append([]*Partition(nil), t.Partitions...)
	if err := r.openPartitions(&nt, have, total); err != nil {
		return err
	}
	if err := r.persist(&nt); err != nil {
		return err
	}
	r.byName[name], r.byID[t.ID] = &nt, &nt
	return nil
}

// SetConfigs replaces a topic's explicitly set configs.
func (r *Registry) SetConfigs(name string, configs map[string]string, validateOnly bool) error {
	if err := r.ValidateConfigs(configs); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.byName[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if validateOnly {
		return nil
	}
	nt := *t
	nt.Configs = cloneMap(configs)
	if err := r.persist(&nt); err != nil {
		return err
	}
	cfg := logConfig(nt.Configs, r.defaults)
	for _, p := range nt.Partitions {
		if err := p.Log.SetConfig(cfg); err != nil {
			return err
		}
	}
	r.byName[name], r.byID[t.ID] = &nt, &nt
	return nil
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
	r.mu.Lock()
	ts := r.byName
	r.byName, r.byID = map[string]*Topic{}, map[[16]byte]*Topic{}
	r.mu.Unlock()
	var errs []error
	for _, t := range ts {
		errs = append(errs, r.closeTopic(t))
	}
	return errors.Join(errs...)
}

func (r *Registry) closeTopic(t *Topic) error {
	var errs []error
	for _, p := range t.Partitions {
		if r.maint != nil {
			r.maint.Remove(p.Log)
		}
		if err := p.Log.Close(); err != nil && !errors.Is(err, logstore.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Dir returns the directory holding the topics (<data-dir>/topics): the node's one log dir.
func (r *Registry) Dir() string { return r.dir }
