package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Raft is what the node's Raft groups count: the fsyncs of their logs. A cut of a total-order
// topic commits only after the sequencer's fsync, and metadata only after the controller's, so
// their tails show in confirmations and admin calls. A nil *Raft counts nothing. It is a
// prometheus.Collector.
type Raft struct {
	walSync *prometheus.HistogramVec
	obs     map[string]prometheus.Observer
}

// NewRaft returns the Raft groups' metrics.
func NewRaft() *Raft {
	r := &Raft{walSync: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "runnel_raft_wal_sync_seconds",
		Help:    "Duration of each fsync of a Raft log this node keeps, by group (controller, sequencer).",
		Buckets: RequestDurationBuckets,
	}, []string{"group"})}
	r.obs = map[string]prometheus.Observer{}
	for _, g := range []string{"controller", "sequencer"} {
		r.obs[g] = r.walSync.WithLabelValues(g)
	}
	return r
}

// WALSync observes one fsync of group's log.
func (r *Raft) WALSync(group string, d time.Duration) {
	if r == nil {
		return
	}
	if o := r.obs[group]; o != nil {
		o.Observe(d.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (r *Raft) Describe(ch chan<- *prometheus.Desc) { r.walSync.Describe(ch) }

// Collect implements prometheus.Collector.
func (r *Raft) Collect(ch chan<- prometheus.Metric) { r.walSync.Collect(ch) }
