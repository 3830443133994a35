package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// SharePartition is a share-partition this node leads, at a scrape.
type SharePartition struct {
	Group, Topic string
	Partition    int32
	Start        int64 // the share-partition start offset
	Lag          int64 // records from the start to the high watermark not done with
	Acquired     int64 // records locked by consumers
}

// ShareGroup is a share group's counts on this node since it started.
type ShareGroup struct {
	Group     string
	Delivered int64
	Acked     map[string]int64 // by acknowledgement type
}

// ShareSource reads the node's share groups at each scrape.
type ShareSource func() ([]SharePartition, []ShareGroup)

// shares exports share groups (KIP-932): per share-partition (labels bounded by groups ×
// partitions, on the partition's leader) and per group.
type shares struct {
	read                    ShareSource
	start, lag, acquired    *prometheus.Desc
	delivered, acknowledged *prometheus.Desc
}

// NewShares returns a collector of the share groups read from read at each scrape.
func NewShares(read ShareSource) prometheus.Collector {
	labels := []string{"group", "topic", "partition"}
	return &shares{read: read,
		start:        prometheus.NewDesc("runnel_share_start_offset", "A share group's start offset of the partition (SPSO): every record before it is done with.", labels, nil),
		lag:          prometheus.NewDesc("runnel_share_lag_records", "Records of the partition, from the share group's start offset to the high watermark, not yet accepted, rejected or archived.", labels, nil),
		acquired:     prometheus.NewDesc("runnel_share_acquired_records", "Records of the partition locked by the share group's consumers (delivered, not yet acknowledged).", labels, nil),
		delivered:    prometheus.NewDesc("runnel_share_delivered_records_total", "Records delivered to a share group's consumers by this node (each delivery of a record counts).", []string{"group"}, nil),
		acknowledged: prometheus.NewDesc("runnel_share_acknowledged_records_total", "Records a share group's consumers acknowledged on this node, by type (accept, release, reject, gap, renew), once persisted.", []string{"group", "type"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *shares) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.start, s.lag, s.acquired, s.delivered, s.acknowledged} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *shares) Collect(ch chan<- prometheus.Metric) {
	parts, groups := s.read()
	for _, p := range parts {
		labels := []string{p.Group, p.Topic, strconv.Itoa(int(p.Partition))}
		ch <- prometheus.MustNewConstMetric(s.start, prometheus.GaugeValue, float64(p.Start), labels...)
		ch <- prometheus.MustNewConstMetric(s.lag, prometheus.GaugeValue, float64(p.Lag), labels...)
		ch <- prometheus.MustNewConstMetric(s.acquired, prometheus.GaugeValue, float64(p.Acquired), labels...)
	}
	for _, g := range groups {
		ch <- prometheus.MustNewConstMetric(s.delivered, prometheus.CounterValue, float64(g.Delivered), g.Group)
		for typ, n := range g.Acked {
			ch <- prometheus.MustNewConstMetric(s.acknowledged, prometheus.CounterValue, float64(n), g.Group, typ)
		}
	}
}
