package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Objects is what object-storage topics count: where a produce's time goes (waiting in the
// buffer, the object write, the controller commit), object store requests, and the read cache.
// A nil *Objects counts nothing. It is a prometheus.Collector.
type Objects struct {
	stage    *prometheus.HistogramVec // buffer, put, commit, get
	requests *prometheus.CounterVec   // op: put, get
	failures *prometheus.CounterVec   // op: put, get, commit
	bytes    *prometheus.CounterVec   // dir: written, read
	cache    *prometheus.CounterVec   // result: hit, miss
	peer     *prometheus.CounterVec   // result: ok, failed
	files    prometheus.Histogram     // bytes per file written
	slow     prometheus.Counter       // files the slow path committed
	backlog  prometheus.Gauge         // uncommitted journal files the slow path last saw
	removed  prometheus.Counter       // records compaction removed
	cleaned  *prometheus.CounterVec   // dir: read, written by compaction
	merges   *prometheus.CounterVec   // how: local, delegated, delegation_failed, for_controller
	passes   *prometheus.CounterVec   // compaction passes, by the same how
	gcPasses *prometheus.CounterVec   // garbage collection passes, by the same how
	garbage  prometheus.Counter       // objects garbage collection deleted (on the node that did)
}

// NewObjects returns the object topics' metrics.
func NewObjects() *Objects {
	return &Objects{
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runnel_object_stage_seconds",
			Help:    "Time of each stage of object topics' I/O: buffer (a batch waiting for its file's flush), put (writing a file), commit (the controller assigning its offsets), get (a read from the store), peer (a read from the file's owner node).",
			Buckets: RequestDurationBuckets,
		}, []string{"stage"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_object_requests_total",
			Help: "Object store requests made by object topics, by operation (put, get).",
		}, []string{"op"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_object_failures_total",
			Help: "Failed object store requests and commits (each attempt), by operation (put, get, commit).",
		}, []string{"op"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_object_bytes_total",
			Help: "Bytes written to and read from the object store by object topics (dir: written, read), and read from other nodes' caches (dir: peer).",
		}, []string{"dir"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_object_cache_requests_total",
			Help: "Read cache lookups of object topics' reads, by result (hit, miss).",
		}, []string{"result"}),
		peer: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_object_peer_reads_total",
			Help: "Reads of object file ranges from the node that serves the file to this node's zone, by result (ok; failed: the node then read the store).",
		}, []string{"result"}),
		slow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runnel_object_slow_path_commits_total",
			Help: "Journal files the slow path committed because their writers did not (crashed, or could not reach the controller).",
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runnel_object_journal_backlog_files",
			Help: "Uncommitted journal files the slow path saw in its last round (on the active controller): acknowledged lazy data not yet visible.",
		}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runnel_object_compaction_records_removed_total",
			Help: "Records compaction of object topics removed: superseded by a later record of their key, expired tombstones, records without a key.",
		}),
		cleaned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_object_compaction_bytes_total",
			Help: "Bytes compaction of object topics read from and wrote to the object store (dir: read, written).",
		}, []string{"dir"}),
		merges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_object_merges_total",
			Help: "Runs of small object extents merged into one object: on the active controller by how (local: it wrote the object; delegated: another node did; delegation_failed: the node it asked failed, it wrote the object itself), on the node it asked (for_controller).",
		}, []string{"how"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_object_compaction_passes_total",
			Help: "Compaction passes over object partitions: on the active controller by how (local, delegated, delegation_failed), on the node it asked (for_controller).",
		}, []string{"how"}),
		gcPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_object_gc_passes_total",
			Help: "Garbage collection passes over the object store: on the active controller by how (local, delegated, delegation_failed), on the node it asked (for_controller).",
		}, []string{"how"}),
		garbage: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runnel_object_gc_deleted_total",
			Help: "Objects garbage collection deleted from the object store (counted by the node that deleted them): files no extent references, after the grace period.",
		}),
		files: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "runnel_object_file_bytes",
			Help:    "Size of the object files written (one per flush of a node's buffer).",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 10),
		}),
	}
}

// Stage records the duration of one stage (buffer, put, commit, get).
func (o *Objects) Stage(stage string, d time.Duration) {
	if o != nil {
		o.stage.WithLabelValues(stage).Observe(d.Seconds())
	}
}

// Request counts an object store request of op with its bytes, failed or not.
func (o *Objects) Request(op string, bytes int, err error) {
	if o == nil {
		return
	}
	o.requests.WithLabelValues(op).Inc()
	if err != nil {
		o.failures.WithLabelValues(op).Inc()
		return
	}
	switch op {
	case "put":
		o.bytes.WithLabelValues("written").Add(float64(bytes))
		o.files.Observe(float64(bytes))
	case "get":
		o.bytes.WithLabelValues("read").Add(float64(bytes))
	}
}

// PeerRead counts a read from a file's owner node, with its bytes, failed or not.
func (o *Objects) PeerRead(bytes int, err error) {
	if o == nil {
		return
	}
	if err != nil {
		o.peer.WithLabelValues("failed").Inc()
		return
	}
	o.peer.WithLabelValues("ok").Inc()
	o.bytes.WithLabelValues("peer").Add(float64(bytes))
}

// CommitFailed counts a failed commit attempt.
func (o *Objects) CommitFailed() {
	if o != nil {
		o.failures.WithLabelValues("commit").Inc()
	}
}

// Cache counts a read cache lookup.
func (o *Objects) Cache(hit bool) {
	if o == nil {
		return
	}
	if hit {
		o.cache.WithLabelValues("hit").Inc()
	} else {
		o.cache.WithLabelValues("miss").Inc()
	}
}

// SlowCommit counts a file the slow path committed.
func (o *Objects) SlowCommit() {
	if o != nil {
		o.slow.Inc()
	}
}

// Backlog sets the uncommitted journal files the slow path saw.
func (o *Objects) Backlog(n int) {
	if o != nil {
		o.backlog.Set(float64(n))
	}
}

// Compacted counts what a compaction round did.
func (o *Objects) Compacted(removed, read, written int64) {
	if o != nil {
		o.removed.Add(float64(removed))
		o.cleaned.WithLabelValues("read").Add(float64(read))
		o.cleaned.WithLabelValues("written").Add(float64(written))
	}
}

// Merged counts a merged run of extents, by how it was written.
func (o *Objects) Merged(how string) {
	if o != nil {
		o.merges.WithLabelValues(how).Inc()
	}
}

// CompactedBy counts a compaction pass over a partition, by how it was run.
func (o *Objects) CompactedBy(how string) {
	if o != nil {
		o.passes.WithLabelValues(how).Inc()
	}
}

// CollectedBy counts a garbage collection pass, by how it was run.
func (o *Objects) CollectedBy(how string) {
	if o != nil {
		o.gcPasses.WithLabelValues(how).Inc()
	}
}

// GarbageDeleted counts an object garbage collection deleted.
func (o *Objects) GarbageDeleted() {
	if o != nil {
		o.garbage.Inc()
	}
}

func (o *Objects) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.stage, o.requests, o.failures, o.bytes, o.cache, o.peer, o.files, o.slow, o.backlog, o.removed, o.cleaned, o.merges, o.passes, o.gcPasses, o.garbage}
}

// Describe implements prometheus.Collector.
func (o *Objects) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Objects) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}
