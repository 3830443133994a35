package metrics

import (
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka is what the Kafka listener counts: requests, errors, connections, in-flight bytes and
// the data in and out per topic. The broker calls its methods on the hot path; they are cheap
// (atomic adds, no allocation once a series exists) and safe for concurrent use. A nil *Kafka
// counts nothing, so a broker without metrics needs no checks.
//
// It is a prometheus.Collector: register it with the registry the admin endpoint serves.
type Kafka struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	errors        *prometheus.CounterVec
	connErrors    *prometheus.CounterVec
	authFailures  *prometheus.CounterVec
	throttles     *prometheus.CounterVec
	throttleTime  *prometheus.CounterVec
	produceStages *prometheus.HistogramVec
	stageObs      [5]prometheus.Observer   // produceStages' series, resolved once: read, handle, commit, queue, write
	topicStages   *prometheus.HistogramVec // the same by topic; not on /metrics (TopicStages)
	limitWaits    *prometheus.CounterVec
	connsOpen     prometheus.Gauge
	connsAccepted prometheus.Counter
	inflightBytes prometheus.Gauge

	apis [kmsg.MaxKey + 1]atomic.Pointer[apiSeries] // made on an API's first request

	topics      sync.Map // topic name → *topicCounters
	topicExists func(name string) bool
	topicDescs  [4]*prometheus.Desc // bytes in, records in, bytes out, records out
}

// apiSeries are one API's request series, looked up once.
type apiSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// topicCounters are one topic's data counters.
type topicCounters struct {
	bytesIn, recordsIn, bytesOut, recordsOut atomic.Uint64
	stages                                   atomic.Pointer[[5]prometheus.Observer] // topicStages' series, made on the first produce
}

// RequestDurationBuckets are the request latency histogram's bucket upper bounds, in seconds:
// 100 µs to 13 s, doubling.
var RequestDurationBuckets = prometheus.ExponentialBuckets(100e-6, 2, 18)

// NewKafka returns the Kafka listener's metrics. topicExists, if not nil, is asked at every
// scrape about each topic with counters: the counters of a topic that no longer exists are
// dropped, so deleted topics do not pile up series.
func NewKafka(topicExists func(name string) bool) *Kafka {
	m := &Kafka{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_kafka_requests_total",
			Help: "Kafka requests handled, by API.",
		}, []string{"api"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runnel_kafka_request_duration_seconds",
			Help:    "Time from reading a Kafka request to writing its response, by API. Fetch includes its long-poll wait.",
			Buckets: RequestDurationBuckets,
		}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_kafka_request_errors_total",
			Help: "Error codes in Kafka responses, by API and error (one per top-level, topic or partition error).",
		}, []string{"api", "error"}),
		connErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_kafka_connection_errors_total",
			Help: "Connections closed by an error, by where it happened: read, write or protocol; or closed as idle (connections.max.idle.ms).",
		}, []string{"reason"}),
		produceStages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runnel_kafka_produce_stage_seconds",
			Help:    "Where a produce request's time goes, by stage: read (the body, and waiting for memory), handle (parse and append, on the connection's read loop), commit (until the records are committed: replication, fsync, sequencing), queue (behind earlier responses of the connection), write (the response to the socket).",
			Buckets: RequestDurationBuckets,
		}, []string{"stage"}),
		topicStages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runnel_topic_produce_stage_seconds",
			Help:    "runnel_kafka_produce_stage_seconds by topic: each produce request counts for every topic it carries.",
			Buckets: RequestDurationBuckets,
		}, []string{"topic", "stage"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_kafka_authentication_failures_total",
			Help: "Failed SASL authentications, by listener.",
		}, []string{"listener"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_kafka_quota_throttled_total",
			Help: "Responses that throttled their client for a client quota, by the quota it went over (producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate, connection_creation_rate; max.connection.creation.rate: a listener waiting to accept).",
		}, []string{"quota"}),
		throttleTime: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_kafka_quota_throttle_seconds_total",
			Help: "Throttle time given to clients for client quotas, by the quota they went over.",
		}, []string{"quota"}),
		limitWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnel_kafka_inflight_limit_waits_total",
			Help: "Requests that waited for in-flight request memory, by the budget that was spent: connection or broker.",
		}, []string{"limit"}),
		connsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runnel_kafka_connections_open",
			Help: "Kafka connections open now.",
		}),
		connsAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runnel_kafka_connections_accepted_total",
			Help: "Kafka connections accepted.",
		}),
		inflightBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runnel_kafka_inflight_request_bytes",
			Help: "Bytes of Kafka requests read and not yet answered, all connections.",
		}),
		topicExists: topicExists,
	}
	for i, name := range []string{"bytes_in", "records_in", "bytes_out", "records_out"} {
		m.topicDescs[i] = prometheus.NewDesc("runnel_topic_"+name+"_total", topicHelp[i], []string{"topic"}, nil)
	}
	for i, stage := range ProduceStageNames {
		m.stageObs[i] = m.produceStages.WithLabelValues(stage)
	}
	return m
}

var topicHelp = [4]string{
	"Record batch bytes appended by produce requests, by topic (idempotent retries answered as duplicates are not counted).",
	"Records appended by produce requests, by topic (idempotent retries answered as duplicates are not counted).",
	"Record batch bytes sent in fetch responses, by topic.",
	"Records in the batches sent in fetch responses, by topic (whole batches, so records before the fetch offset count too).",
}

// Request counts one request of API key, answered (or, without a response, handled) in d.
func (m *Kafka) Request(key int16, d time.Duration) {
	if s := m.api(key); s != nil {
		s.requests.Inc()
		s.duration.Observe(d.Seconds())
	}
}

// ErrorCode counts one non-zero error code in a response of API key.
func (m *Kafka) ErrorCode(key, code int16) {
	if m == nil || code == 0 {
		return
	}
	name := "UNKNOWN_SERVER_ERROR" // what kerr calls codes it does not know: keeps the label bounded
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		name = e.Message
	}
	m.errors.WithLabelValues(kmsg.NameForKey(key), name).Inc()
}

func (m *Kafka) api(key int16) *apiSeries {
	if m == nil || key < 0 || int(key) >= len(m.apis) {
		return nil
	}
	if s := m.apis[key].Load(); s != nil {
		return s
	}
	name := kmsg.NameForKey(key)
	m.apis[key].CompareAndSwap(nil, &apiSeries{m.requests.WithLabelValues(name), m.duration.WithLabelValues(name)})
	return m.apis[key].Load()
}

// Connection error reasons, for ConnectionError.
const (
	ReasonRead     = "read"     // reading from the socket failed
	ReasonWrite    = "write"    // writing a response failed
	ReasonProtocol = "protocol" // a request could not be parsed or is not served
	ReasonIdle     = "idle"     // no progress for connections.max.idle.ms
)

// ConnectionOpened counts an accepted connection.
func (m *Kafka) ConnectionOpened() {
	if m != nil {
		m.connsAccepted.Inc()
		m.connsOpen.Inc()
	}
}

// ConnectionClosed counts a connection closed.
func (m *Kafka) ConnectionClosed() {
	if m != nil {
		m.connsOpen.Dec()
	}
}

// ConnectionError counts a connection closed by an error; reason is one of the Reason constants.
func (m *Kafka) ConnectionError(reason string) {
	if m != nil {
		m.connErrors.WithLabelValues(reason).Inc()
	}
}

// ProduceStageNames are the stages of a produce request, in its order (ProduceStages).
var ProduceStageNames = [5]string{"read", "handle", "commit", "queue", "write"}

// ProduceStages is how long one produce request spent in each of ProduceStageNames.
type ProduceStages [5]time.Duration

// Produce observes the stages of one produce request (see runnel_kafka_produce_stage_seconds),
// for the node and for each topic it carries.
func (m *Kafka) Produce(st ProduceStages, topics iter.Seq[string]) {
	if m == nil {
		return
	}
	for i, d := range st {
		m.stageObs[i].Observe(max(d, 0).Seconds())
	}
	for topic := range topics {
		c := m.topic(topic)
		obs := c.stages.Load()
		if obs == nil {
			obs = new([5]prometheus.Observer)
			for i, stage := range ProduceStageNames {
				obs[i] = m.topicStages.WithLabelValues(topic, stage)
			}
			c.stages.CompareAndSwap(nil, obs)
		}
		for i, d := range st {
			obs[i].Observe(max(d, 0).Seconds())
		}
	}
}

// TopicStages is runnel_topic_produce_stage_seconds, the produce stages by topic: kept for the
// console and not exported on /metrics, where its series (five histograms per topic) would
// outnumber everything else.
func (m *Kafka) TopicStages() prometheus.Collector { return m.topicStages }

// AuthFailed counts a failed SASL authentication on a listener.
func (m *Kafka) AuthFailed(listener string) {
	if m != nil {
		m.authFailures.WithLabelValues(listener).Inc()
	}
}

// Throttled counts a client throttled for d by a client quota.
func (m *Kafka) Throttled(quota string, d time.Duration) {
	if m != nil && d > 0 {
		m.throttles.WithLabelValues(quota).Inc()
		m.throttleTime.WithLabelValues(quota).Add(d.Seconds())
	}
}

// InflightLimitWait counts a request that had to wait for its in-flight memory budget, limit
// being "connection" or "broker".
func (m *Kafka) InflightLimitWait(limit string) {
	if m != nil {
		m.limitWaits.WithLabelValues(limit).Inc()
	}
}

// InflightBytes adds delta (negative when a request is answered) to the in-flight request bytes.
func (m *Kafka) InflightBytes(delta int64) {
	if m != nil {
		m.inflightBytes.Add(float64(delta))
	}
}

// Produced counts a batch of records and bytes appended to topic.
func (m *Kafka) Produced(topic string, bytes, records int) {
	if c := m.topic(topic); c != nil {
		c.bytesIn.Add(uint64(bytes))
		c.recordsIn.Add(uint64(records))
	}
}

// Fetched counts records and bytes of topic sent to a consumer.
func (m *Kafka) Fetched(topic string, bytes, records int) {
	if c := m.topic(topic); c != nil {
		c.bytesOut.Add(uint64(bytes))
		c.recordsOut.Add(uint64(records))
	}
}

func (m *Kafka) topic(name string) *topicCounters {
	if m == nil {
		return nil
	}
	if c, ok := m.topics.Load(name); ok {
		return c.(*topicCounters)
	}
	c, _ := m.topics.LoadOrStore(name, &topicCounters{})
	return c.(*topicCounters)
}

func (m *Kafka) vecs() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.duration, m.errors, m.connErrors, m.authFailures, m.throttles, m.throttleTime, m.produceStages, m.limitWaits,
		m.connsOpen, m.connsAccepted, m.inflightBytes}
}

// Describe implements prometheus.Collector.
func (m *Kafka) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.vecs() {
		c.Describe(ch)
	}
	for _, d := range m.topicDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It drops the counters of topics that no longer exist.
func (m *Kafka) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.vecs() {
		c.Collect(ch)
	}
	m.topics.Range(func(k, v any) bool {
		name, c := k.(string), v.(*topicCounters)
		if m.topicExists != nil && !m.topicExists(name) {
			m.topics.Delete(name) // a racing Produced may be lost with it: the topic is gone
			m.topicStages.DeletePartialMatch(prometheus.Labels{"topic": name})
			return true
		}
		for i, n := range []uint64{c.bytesIn.Load(), c.recordsIn.Load(), c.bytesOut.Load(), c.recordsOut.Load()} {
			ch <- prometheus.MustNewConstMetric(m.topicDescs[i], prometheus.CounterValue, float64(n), name)
		}
		return true
	})
}
