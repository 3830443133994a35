package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterState is what the cluster collector reads at each scrape: the metadata image as this
// node sees it, and the replicas it leads.
type ClusterState struct {
	LiveNodes, FencedNodes int
	ActiveController       bool  // this node is the active controller
	Partitions             int   // every partition of the cluster
	Offline                int   // partitions without a leader
	UnderReplicated        int   // partitions whose ISR is smaller than their replica set
	Leaders                int   // partitions led here
	LeadershipsTaken       int64 // times a replica here became leader
	ThrottledBytes         int64 // bytes sent to followers under a replication quota
	Lags                   []ReplicaLag
	TransportSentBytes     int64
	TransportDropped       int64
}

// ReplicaLag is how far a partition's slowest follower is behind the leader here.
type ReplicaLag struct {
	Topic     string
	Partition int32
	Records   int64
}

type clusterCollector struct {
	src                                                func() ClusterState
	nodes, active, parts, offline, under, leaders, lag *prometheus.Desc
	taken, sent, dropped, throttled                    *prometheus.Desc
}

// NewCluster returns a collector of cluster and replication metrics read from src.
func NewCluster(src func() ClusterState) prometheus.Collector {
	return &clusterCollector{src: src,
		nodes:   prometheus.NewDesc("runnel_cluster_nodes", "Registered nodes, by state (live or fenced), as this node's metadata has them.", []string{"state"}, nil),
		active:  prometheus.NewDesc("runnel_controller_active", "1 if this node is the active controller (the controller quorum's Raft leader).", nil, nil),
		parts:   prometheus.NewDesc("runnel_cluster_partitions", "Partitions of every topic.", nil, nil),
		offline: prometheus.NewDesc("runnel_cluster_offline_partitions", "Partitions without a leader.", nil, nil),
		under:   prometheus.NewDesc("runnel_cluster_under_replicated_partitions", "Partitions whose in-sync replicas are fewer than their replicas.", nil, nil),
		leaders: prometheus.NewDesc("runnel_partitions_led", "Partitions this node leads.", nil, nil),
		lag:     prometheus.NewDesc("runnel_partition_replica_lag_records", "For a partition led here: records its slowest follower has not acknowledged.", []string{"topic", "partition"}, nil),
		taken:   prometheus.NewDesc("runnel_leaderships_taken_total", "Times a replica on this node became a partition's leader (elections and transfers won).", nil, nil),
		sent:    prometheus.NewDesc("runnel_transport_sent_bytes_total", "Bytes sent to other nodes (Raft, replication, RPCs).", nil, nil),
		dropped: prometheus.NewDesc("runnel_transport_dropped_frames_total", "Frames to other nodes dropped (a full queue, a broken connection).", nil, nil),
		throttled: prometheus.NewDesc("runnel_replication_throttled_bytes_total",
			"Bytes this node sent as leader to out-of-sync followers under a replication quota (leader/follower.replication.throttled.rate).", nil, nil),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.nodes, c.active, c.parts, c.offline, c.under, c.leaders, c.lag, c.taken, c.sent, c.dropped, c.throttled} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.nodes, float64(s.LiveNodes), "live")
	gauge(c.nodes, float64(s.FencedNodes), "fenced")
	active := 0.0
	if s.ActiveController {
		active = 1
	}
	gauge(c.active, active)
	gauge(c.parts, float64(s.Partitions))
	gauge(c.offline, float64(s.Offline))
	gauge(c.under, float64(s.UnderReplicated))
	gauge(c.leaders, float64(s.Leaders))
	for _, l := range s.Lags {
		gauge(c.lag, float64(l.Records), l.Topic, strconv.Itoa(int(l.Partition)))
	}
	ch <- prometheus.MustNewConstMetric(c.taken, prometheus.CounterValue, float64(s.LeadershipsTaken))
	ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(s.TransportSentBytes))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.TransportDropped))
	ch <- prometheus.MustNewConstMetric(c.throttled, prometheus.CounterValue, float64(s.ThrottledBytes))
}
