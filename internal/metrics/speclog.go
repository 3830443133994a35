package metrics

import (
	"strconv"
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

// TotalOrderTopic is a total-order topic's sequencing state as this node's replica of the
// sequencer group has applied it, with the counters of the shards this node leads.
type TotalOrderTopic struct {
	Topic        string
	View, Window uint64
	Confirmed    uint64 // positions confirmed (the committed prefix)
	Shards       []TotalOrderShard
}

// TotalOrderShard is one shard: its quota in the current window (0: benched or out), whether it
// is benched as a straggler or failed, and, when this node runs it, its runner's counts.
type TotalOrderShard struct {
	Shard                                                  int32
	Quota                                                  int64
	Benched, Failed                                        bool
	Local                                                  bool
	Reports, LagFixReports, Drains, NoOpEntries, NoOpSlots uint64
	Rebases                                                uint64
}

// TotalOrder exposes the total-order topics' sequencing state at scrape time: views, windows,
// quotas, stragglers and failed shards from the sequencer's applied state, and the protocol's
// actions (reports, lag-fix answers, backlogs drained, no-ops) from the shards this node leads.
type TotalOrder struct {
	source                                            func() []TotalOrderTopic
	view, window, confirmed                           *prometheus.Desc
	quota, benched, failed                            *prometheus.Desc
	reports, lagFixes, drains, noOpEntries, noOpSlots *prometheus.Desc
	rebases                                           *prometheus.Desc
}

// NewTotalOrder returns the collector; source is called at each scrape.
func NewTotalOrder(source func() []TotalOrderTopic) *TotalOrder {
	topic, sh := []string{"topic"}, []string{"topic", "shard"}
	return &TotalOrder{source: source,
		view:        prometheus.NewDesc("runnel_speclog_view", "A total-order topic's view (goes up at each whole-shard failure).", topic, nil),
		window:      prometheus.NewDesc("runnel_speclog_window", "A total-order topic's current window of cuts.", topic, nil),
		confirmed:   prometheus.NewDesc("runnel_speclog_confirmed_positions", "Positions of a total-order topic confirmed (records and no-ops).", topic, nil),
		quota:       prometheus.NewDesc("runnel_speclog_shard_quota", "A shard's positions per cut in the current window.", sh, nil),
		benched:     prometheus.NewDesc("runnel_speclog_shard_benched", "1 while a shard is benched as a straggler (quota 0), else 0.", sh, nil),
		failed:      prometheus.NewDesc("runnel_speclog_shard_failed", "1 while a shard is out after a whole-shard failure, else 0.", sh, nil),
		reports:     prometheus.NewDesc("runnel_speclog_shard_reports_total", "Reports a shard led on this node sent to the sequencer.", sh, nil),
		lagFixes:    prometheus.NewDesc("runnel_speclog_shard_lag_fix_reports_total", "Of the reports, answers to a lag-fix signal.", sh, nil),
		drains:      prometheus.NewDesc("runnel_speclog_shard_backlog_drains_total", "Of the reports, backlogs past runnel.order.drain.cuts reported at once.", sh, nil),
		noOpEntries: prometheus.NewDesc("runnel_speclog_shard_noop_entries_total", "Coalesced no-op entries a shard led on this node appended.", sh, nil),
		noOpSlots:   prometheus.NewDesc("runnel_speclog_shard_noop_slots_total", "Positions those no-op entries fill.", sh, nil),
		rebases:     prometheus.NewDesc("runnel_speclog_shard_rebases_total", "Times a shard led on this node moved onto a newer sequencer state it could not follow entry by entry.", sh, nil),
	}
}

// Describe implements prometheus.Collector.
func (t *TotalOrder) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{t.view, t.window, t.confirmed, t.quota, t.benched, t.failed, t.reports, t.lagFixes, t.drains, t.noOpEntries, t.noOpSlots, t.rebases} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (t *TotalOrder) Collect(ch chan<- prometheus.Metric) {
	for _, tp := range t.source() {
		ch <- prometheus.MustNewConstMetric(t.view, prometheus.GaugeValue, float64(tp.View), tp.Topic)
		ch <- prometheus.MustNewConstMetric(t.window, prometheus.GaugeValue, float64(tp.Window), tp.Topic)
		ch <- prometheus.MustNewConstMetric(t.confirmed, prometheus.GaugeValue, float64(tp.Confirmed), tp.Topic)
		for _, s := range tp.Shards {
			id := strconv.Itoa(int(s.Shard))
			ch <- prometheus.MustNewConstMetric(t.quota, prometheus.GaugeValue, float64(s.Quota), tp.Topic, id)
			ch <- prometheus.MustNewConstMetric(t.benched, prometheus.GaugeValue, boolValue(s.Benched), tp.Topic, id)
			ch <- prometheus.MustNewConstMetric(t.failed, prometheus.GaugeValue, boolValue(s.Failed), tp.Topic, id)
			if !s.Local {
				continue
			}
			for _, c := range []struct {
				d *prometheus.Desc
				v uint64
			}{{t.reports, s.Reports}, {t.lagFixes, s.LagFixReports}, {t.drains, s.Drains}, {t.noOpEntries, s.NoOpEntries}, {t.noOpSlots, s.NoOpSlots}, {t.rebases, s.Rebases}} {
				ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v), tp.Topic, id)
			}
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
