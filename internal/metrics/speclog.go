package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SpecLog is what the node's SpecLog service measures of the appends it answers: how long an
// append took to become durable (written and replicated as the topic requires) and then to be
// sequenced (its positions in a committed cut). Client-side latency minus these is the network,
// gRPC and the client. A nil *SpecLog counts nothing. It is a prometheus.Collector.
type SpecLog struct {
	stages             *prometheus.HistogramVec
	durable, sequenced prometheus.Observer
}

// NewSpecLog returns the SpecLog service's metrics.
func NewSpecLog() *SpecLog {
	s := &SpecLog{stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "runnel_speclog_append_stage_seconds",
		Help:    "Time of each SpecLog append on the node by stage: durable (received → written and replicated), sequenced (durable → positions committed by the sequencer).",
		Buckets: RequestDurationBuckets,
	}, []string{"stage"})}
	s.durable, s.sequenced = s.stages.WithLabelValues("durable"), s.stages.WithLabelValues("sequenced")
	return s
}

// Append observes one append's stages.
func (s *SpecLog) Append(durable, sequenced time.Duration) {
	if s == nil {
		return
	}
	s.durable.Observe(durable.Seconds())
	s.sequenced.Observe(sequenced.Seconds())
}

// Describe implements prometheus.Collector.
func (s *SpecLog) Describe(ch chan<- *prometheus.Desc) { s.stages.Describe(ch) }

// Collect implements prometheus.Collector.
func (s *SpecLog) Collect(ch chan<- prometheus.Metric) { s.stages.Collect(ch) }
