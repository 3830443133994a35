package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnel-dev/runnel/internal/logstore"
)

// Partition is one partition log's state at a scrape.
type Partition struct {
	Topic         string
	Partition     int32
	StartOffset   int64 // log start offset
	EndOffset     int64 // log end offset
	HighWatermark int64
	SizeBytes     int64
	FlushLag      logstore.FlushLag // appended but not yet durable
}

// StorageSource is where a storage collector reads the node's logs at each scrape.
type StorageSource struct {
	// Partitions appends the state of every open partition log to dst and returns it; the
	// collector owns the result.
	Partitions func(dst []Partition) []Partition
	// Flusher returns the group-commit flusher's statistics.
	Flusher func() logstore.FlusherStats
}

// storage exports the logs' state, read at scrape time from the logs and the flusher (nothing
// is counted twice: the log store keeps the numbers, this only formats them).
type storage struct {
	src StorageSource

	size, start, end, hw, lagBytes, lagRecords, lagSeconds      *prometheus.Desc
	backlogBytes, backlogAge                                    *prometheus.Desc
	rounds, syncs                                               *prometheus.Desc
	syncSeconds, batchesPerSync, logsPerRound, fills, fillBytes *prometheus.Desc
}

// NewStorage returns a collector of partition and flusher metrics read from src.
func NewStorage(src StorageSource) prometheus.Collector {
	part := []string{"topic", "partition"}
	return &storage{
		src:            src,
		size:           prometheus.NewDesc("runnel_partition_size_bytes", "Bytes of the partition's log segments.", part, nil),
		start:          prometheus.NewDesc("runnel_partition_log_start_offset", "The partition's log start offset.", part, nil),
		end:            prometheus.NewDesc("runnel_partition_log_end_offset", "The partition's log end offset: the offset the next record gets.", part, nil),
		hw:             prometheus.NewDesc("runnel_partition_high_watermark", "The partition's high watermark: consumers read below it.", part, nil),
		lagBytes:       prometheus.NewDesc("runnel_partition_flush_lag_bytes", "Bytes appended to the partition and not yet durable.", part, nil),
		lagRecords:     prometheus.NewDesc("runnel_partition_flush_lag_records", "Records appended to the partition and not yet durable.", part, nil),
		lagSeconds:     prometheus.NewDesc("runnel_partition_flush_lag_seconds", "How long the partition's oldest non-durable data has waited.", part, nil),
		backlogBytes:   prometheus.NewDesc("runnel_flush_backlog_bytes", "Bytes appended and not yet durable, all partitions.", nil, nil),
		backlogAge:     prometheus.NewDesc("runnel_flush_backlog_age_seconds", "Age of the oldest non-durable data, all partitions.", nil, nil),
		rounds:         prometheus.NewDesc("runnel_flush_rounds_total", "Group-commit rounds the flusher ran.", nil, nil),
		syncs:          prometheus.NewDesc("runnel_flush_syncs_total", "Log syncs the flusher performed.", nil, nil),
		syncSeconds:    prometheus.NewDesc("runnel_flush_sync_duration_seconds", "Latency of one log sync: file fsync, plus the directory's if needed.", nil, nil),
		batchesPerSync: prometheus.NewDesc("runnel_flush_batches_per_sync", "Appended batches one log sync made durable: the group-commit factor on a partition.", nil, nil),
		logsPerRound:   prometheus.NewDesc("runnel_flush_logs_per_round", "Logs one flusher round synced: the group-commit factor across partitions.", nil, nil),
		fills:          prometheus.NewDesc("runnel_prealloc_fills_total", "Zero fills of preallocated segment space completed (partitions without write caching written fast).", nil, nil),
		fillBytes:      prometheus.NewDesc("runnel_prealloc_bytes_total", "Zero bytes written and fsynced as preallocated segment space: the extra writes of preallocation.", nil, nil),
	}
}

func (s *storage) descs() []*prometheus.Desc {
	return []*prometheus.Desc{s.size, s.start, s.end, s.hw, s.lagBytes, s.lagRecords, s.lagSeconds,
		s.backlogBytes, s.backlogAge, s.rounds, s.syncs, s.syncSeconds, s.batchesPerSync, s.logsPerRound,
		s.fills, s.fillBytes}
}

// Describe implements prometheus.Collector.
func (s *storage) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *storage) Collect(ch chan<- prometheus.Metric) {
	var backlog int64
	var age float64
	if s.src.Partitions != nil {
		for _, p := range s.src.Partitions(nil) {
			labels := []string{p.Topic, strconv.Itoa(int(p.Partition))}
			gauge := func(d *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
			}
			gauge(s.size, float64(p.SizeBytes))
			gauge(s.start, float64(p.StartOffset))
			gauge(s.end, float64(p.EndOffset))
			gauge(s.hw, float64(p.HighWatermark))
			gauge(s.lagBytes, float64(p.FlushLag.Bytes))
			gauge(s.lagRecords, float64(p.FlushLag.Records))
			gauge(s.lagSeconds, p.FlushLag.Age.Seconds())
			backlog += p.FlushLag.Bytes
			age = max(age, p.FlushLag.Age.Seconds())
		}
	}
	ch <- prometheus.MustNewConstMetric(s.backlogBytes, prometheus.GaugeValue, float64(backlog))
	ch <- prometheus.MustNewConstMetric(s.backlogAge, prometheus.GaugeValue, age)
	if s.src.Flusher == nil {
		return
	}
	st := s.src.Flusher()
	ch <- prometheus.MustNewConstMetric(s.rounds, prometheus.CounterValue, float64(st.Rounds))
	ch <- prometheus.MustNewConstMetric(s.syncs, prometheus.CounterValue, float64(st.Syncs))
	ch <- constHistogram(s.syncSeconds, st.SyncSeconds)
	ch <- constHistogram(s.batchesPerSync, st.BatchesPerSync)
	ch <- constHistogram(s.logsPerRound, st.LogsPerRound)
	ch <- prometheus.MustNewConstMetric(s.fills, prometheus.CounterValue, float64(st.PreallocFills))
	ch <- prometheus.MustNewConstMetric(s.fillBytes, prometheus.CounterValue, float64(st.PreallocBytes))
}

// constHistogram exports a log store histogram snapshot, which has Prometheus's shape already
// (cumulative buckets, a count that includes the overflow).
func constHistogram(d *prometheus.Desc, h logstore.HistogramSnapshot) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Buckets[i]
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}
