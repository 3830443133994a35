package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// GroupOffset is a consumer group's committed offset of one partition, with the partition's high
// watermark, at a scrape.
type GroupOffset struct {
	Group         string
	Topic         string
	Partition     int32
	Committed     int64
	HighWatermark int64
}

// groupLag exports consumer group lag: high watermark minus committed offset, per group and
// partition (the partitions a group has committed for; labels bounded by groups × partitions).
type groupLag struct {
	offsets           func() []GroupOffset
	lag, committedOff *prometheus.Desc
}

// NewGroupLag returns a collector of consumer group lag read from offsets at each scrape.
func NewGroupLag(offsets func() []GroupOffset) prometheus.Collector {
	labels := []string{"group", "topic", "partition"}
	return &groupLag{offsets: offsets,
		lag:          prometheus.NewDesc("runnel_group_lag_records", "Records between a consumer group's committed offset and the partition's high watermark.", labels, nil),
		committedOff: prometheus.NewDesc("runnel_group_committed_offset", "A consumer group's committed offset of the partition.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (g *groupLag) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.lag
	ch <- g.committedOff
}

// Collect implements prometheus.Collector.
func (g *groupLag) Collect(ch chan<- prometheus.Metric) {
	for _, o := range g.offsets() {
		labels := []string{o.Group, o.Topic, strconv.Itoa(int(o.Partition))}
		ch <- prometheus.MustNewConstMetric(g.committedOff, prometheus.GaugeValue, float64(o.Committed), labels...)
		ch <- prometheus.MustNewConstMetric(g.lag, prometheus.GaugeValue, float64(max(o.HighWatermark-o.Committed, 0)), labels...)
	}
}
