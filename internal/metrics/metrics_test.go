package metrics

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/runnel-dev/runnel/internal/logstore"
)

// gather collects reg and returns each series as `name{k="v",...}` → value (for a histogram,
// its count under name_count, its sum under name_sum and each bucket under name_bucket).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather = %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := labelString(m.GetLabel(), "")
			switch {
			case m.Counter != nil:
				out[mf.GetName()+labels] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[mf.GetName()+labels] = m.Gauge.GetValue()
			case m.Histogram != nil:
				h := m.Histogram
				out[mf.GetName()+"_count"+labels] = float64(h.GetSampleCount())
				out[mf.GetName()+"_sum"+labels] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					le := `le="` + formatFloat(b.GetUpperBound()) + `"`
					out[mf.GetName()+"_bucket"+labelString(m.GetLabel(), le)] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

func labelString(pairs []*dto.LabelPair, extra string) string {
	var parts []string
	for _, p := range pairs {
		parts = append(parts, p.GetName()+`="`+p.GetValue()+`"`)
	}
	if extra != "" {
		parts = append(parts, extra)
	}
	if len(parts) == 0 {
		return ""
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func expect(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || math.Abs(g-v) > 1e-9*math.Max(1, math.Abs(v)) {
			t.Errorf("%s = %v (present %v); want %v", k, g, ok, v)
		}
	}
}

func TestNilKafkaCountsNothing(t *testing.T) {
	var m *Kafka
	m.Request(0, time.Millisecond)
	m.ErrorCode(0, 3)
	m.ConnectionOpened()
	m.ConnectionClosed()
	m.ConnectionError(ReasonRead)
	m.InflightLimitWait("broker")
	m.InflightBytes(10)
	m.Produced("t", 1, 1)
	m.Fetched("t", 1, 1)
	m.Produce(ProduceStages{}, slices.Values([]string{"t"}))
}

// TestProduceStages: a produce request's stages count for the node and, kept apart from
// /metrics, for each topic it carries; a deleted topic's stage series go with it.
func TestProduceStages(t *testing.T) {
	exists := map[string]bool{"a": true, "b": true}
	m := NewKafka(func(name string) bool { return exists[name] })
	reg, stages := prometheus.NewRegistry(), prometheus.NewRegistry()
	reg.MustRegister(m)
	stages.MustRegister(m.TopicStages())
	ms := time.Millisecond
	m.Produce(ProduceStages{ms, ms, 5 * ms, 0, ms}, slices.Values([]string{"a", "b"}))
	m.Produce(ProduceStages{ms, ms, 50 * ms, 0, ms}, slices.Values([]string{"a"}))
	got := gather(t, reg)
	expect(t, got, map[string]float64{
		`runnel_kafka_produce_stage_seconds_count{stage="commit"}`:              2,
		`runnel_kafka_produce_stage_seconds_bucket{le="0.0064",stage="commit"}`: 1,
	})
	for k := range got {
		if strings.HasPrefix(k, "runnel_topic_produce_stage") {
			t.Fatalf("the topics' stages are on the node's registry: %s", k)
		}
	}
	expect(t, gather(t, stages), map[string]float64{
		`runnel_topic_produce_stage_seconds_count{stage="commit",topic="a"}`:              2,
		`runnel_topic_produce_stage_seconds_count{stage="commit",topic="b"}`:              1,
		`runnel_topic_produce_stage_seconds_bucket{le="0.0064",stage="commit",topic="a"}`: 1,
	})
	delete(exists, "b")
	gather(t, reg) // the node's scrape drops what deleted topics had
	got = gather(t, stages)
	if _, ok := got[`runnel_topic_produce_stage_seconds_count{stage="commit",topic="b"}`]; ok {
		t.Errorf("deleted topic b still has stage series")
	}
	expect(t, got, map[string]float64{`runnel_topic_produce_stage_seconds_count{stage="commit",topic="a"}`: 2})
}

func TestKafka(t *testing.T) {
	exists := map[string]bool{"a": true, "b": true}
	m := NewKafka(func(name string) bool { return exists[name] })
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	m.Request(0, 3*time.Millisecond)  // Produce
	m.Request(0, 30*time.Millisecond) // Produce
	m.Request(1, time.Second)         // Fetch
	m.Request(-1, time.Second)        // not an API: ignored
	m.ErrorCode(0, 3)
	m.ErrorCode(0, 3)
	m.ErrorCode(0, 0)    // not an error
	m.ErrorCode(1, 9999) // a code kerr does not know
	m.ConnectionOpened() // accepted 1, open 1
	m.ConnectionOpened() // accepted 2, open 2
	m.ConnectionClosed() // open 1
	m.InflightBytes(100) //
	m.InflightBytes(-40) // 60
	m.Produced("a", 1000, 10)
	m.Produced("a", 500, 5)
	m.Produced("b", 1, 1)
	m.Fetched("a", 2000, 20)

	expect(t, gather(t, reg), map[string]float64{
		`runnel_kafka_requests_total{api="Produce"}`:                                          2,
		`runnel_kafka_requests_total{api="Fetch"}`:                                            1,
		`runnel_kafka_request_duration_seconds_count{api="Produce"}`:                          2,
		`runnel_kafka_request_duration_seconds_bucket{api="Produce",le="0.0032"}`:             1,
		`runnel_kafka_request_errors_total{api="Produce",error="UNKNOWN_TOPIC_OR_PARTITION"}`: 2,
		`runnel_kafka_request_errors_total{api="Fetch",error="UNKNOWN_SERVER_ERROR"}`:         1,
		`runnel_kafka_connections_accepted_total`:                                             2,
		`runnel_kafka_connections_open`:                                                       1,
		`runnel_kafka_inflight_request_bytes`:                                                 60,
		`runnel_topic_bytes_in_total{topic="a"}`:                                              1500,
		`runnel_topic_records_in_total{topic="a"}`:                                            15,
		`runnel_topic_bytes_out_total{topic="a"}`:                                             2000,
		`runnel_topic_records_out_total{topic="a"}`:                                           20,
		`runnel_topic_records_in_total{topic="b"}`:                                            1,
	})

	delete(exists, "b") // a deleted topic's series go away at the next scrape
	got := gather(t, reg)
	if _, ok := got[`runnel_topic_records_in_total{topic="b"}`]; ok {
		t.Errorf("deleted topic b still has series: %v", got)
	}
	expect(t, got, map[string]float64{`runnel_topic_records_in_total{topic="a"}`: 15})
}

func TestStorage(t *testing.T) {
	h := logstore.NewHistogram([]float64{0.001, 0.01})
	h.Observe(0.0005)
	h.Observe(0.005)
	h.Observe(1)
	src := StorageSource{
		Partitions: func(dst []Partition) []Partition {
			return append(dst,
				Partition{Topic: "t", Partition: 0, StartOffset: 5, EndOffset: 100, HighWatermark: 90, SizeBytes: 4096,
					FlushLag: logstore.FlushLag{Bytes: 300, Records: 10, Age: 20 * time.Millisecond}},
				Partition{Topic: "t", Partition: 1, EndOffset: 7, HighWatermark: 7, SizeBytes: 100,
					FlushLag: logstore.FlushLag{Bytes: 50, Records: 1, Age: 80 * time.Millisecond}})
		},
		Flusher: func() logstore.FlusherStats {
			return logstore.FlusherStats{Rounds: 4, Syncs: 6, SyncSeconds: h.Snapshot(), PreallocFills: 2, PreallocBytes: 1 << 20,
				BatchesPerSync: logstore.NewHistogram([]float64{1}).Snapshot(), LogsPerRound: logstore.NewHistogram([]float64{1}).Snapshot()}
		},
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStorage(src))
	expect(t, gather(t, reg), map[string]float64{
		`runnel_partition_size_bytes{partition="0",topic="t"}`:        4096,
		`runnel_partition_log_start_offset{partition="0",topic="t"}`:  5,
		`runnel_partition_log_end_offset{partition="0",topic="t"}`:    100,
		`runnel_partition_high_watermark{partition="0",topic="t"}`:    90,
		`runnel_partition_high_watermark{partition="1",topic="t"}`:    7,
		`runnel_partition_flush_lag_bytes{partition="0",topic="t"}`:   300,
		`runnel_partition_flush_lag_records{partition="1",topic="t"}`: 1,
		`runnel_partition_flush_lag_seconds{partition="1",topic="t"}`: 0.08,
		`runnel_flush_backlog_bytes`:                                  350,
		`runnel_flush_backlog_age_seconds`:                            0.08,
		`runnel_flush_rounds_total`:                                   4,
		`runnel_flush_syncs_total`:                                    6,
		`runnel_flush_sync_duration_seconds_count`:                    3,
		`runnel_flush_sync_duration_seconds_sum`:                      1.0055,
		`runnel_flush_sync_duration_seconds_bucket{le="0.001"}`:       1,
		`runnel_flush_sync_duration_seconds_bucket{le="0.01"}`:        2,
		`runnel_flush_batches_per_sync_count`:                         0,
		`runnel_flush_logs_per_round_count`:                           0,
		`runnel_prealloc_fills_total`:                                 2,
		`runnel_prealloc_bytes_total`:                                 1 << 20,
	})
}

func TestNewRegistryHasRuntimeMetrics(t *testing.T) {
	got := gather(t, NewRegistry())
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := got[name]; !ok {
			t.Errorf("NewRegistry() lacks %s", name)
		}
	}
}
