package console

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/runnel-dev/runnel/internal/metrics"
)

// sampler reads the node's metrics every interval and keeps the last n samples of the
// throughput and latency the overview charts show.
type sampler struct {
	g        prometheus.Gatherer
	interval time.Duration
	n        int
	done     chan struct{}
	once     sync.Once

	mu      sync.Mutex
	samples []sample
	prev    *snapshot
}

// sample is one point of the charts.
type sample struct {
	T            int64   `json:"t"` // Unix seconds
	ProduceMBps  float64 `json:"produce_mbps"`
	FetchMBps    float64 `json:"fetch_mbps"`
	RecordsIn    float64 `json:"records_in_per_s"`
	ProduceP99Ms float64 `json:"produce_p99_ms"`
	FetchP99Ms   float64 `json:"fetch_p99_ms"`
	// Stages is where produce requests' time went in the interval: p50 and p99 ms by stage.
	Stages map[string][2]float64 `json:"stages,omitempty"`
	// ObjectStages are object topics' stages in the interval (buffer, put, commit, get).
	ObjectStages map[string][2]float64 `json:"object_stages,omitempty"`
	topicRates   map[string]float64
	topicStages  map[string]map[string][2]float64 // Stages by topic
}

// ProduceStages are the stages of runnel_kafka_produce_stage_seconds, in a request's order.
var ProduceStages = metrics.ProduceStageNames[:]

// ObjectStages are the stages of runnel_object_stage_seconds: a produce's buffer, put and
// commit, then reads' get.
var ObjectStages = []string{"buffer", "put", "commit", "get"}

// snapshot is the cumulative counters at one time.
type snapshot struct {
	at                time.Time
	bytesIn, bytesOut map[string]float64 // per series (bySeries)
	recordsIn         map[string]float64
	topicRecords      map[string]float64
	latency           map[string][]bucket            // by API
	stages            map[string][]bucket            // produce stages
	objectStages      map[string][]bucket            // object topics' stages
	topicStages       map[string]map[string][]bucket // produce stages by topic
}

type bucket struct{ le, count float64 }

func newSampler(g prometheus.Gatherer, interval time.Duration, n int) *sampler {
	s := &sampler{g: g, interval: interval, n: n, done: make(chan struct{})}
	go s.run()
	return s
}

func (s *sampler) stop() { s.once.Do(func() { close(s.done) }) }

func (s *sampler) run() {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	s.take()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.take()
		}
	}
}

func (s *sampler) take() {
	mfs, err := s.g.Gather()
	if err != nil && len(mfs) == 0 {
		return
	}
	cur := &snapshot{at: time.Now(), topicRecords: map[string]float64{}, latency: map[string][]bucket{}, stages: map[string][]bucket{},
		objectStages: map[string][]bucket{}, topicStages: map[string]map[string][]bucket{}}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "runnel_topic_bytes_in_total":
			cur.bytesIn = bySeries(mf)
		case "runnel_topic_bytes_out_total":
			cur.bytesOut = bySeries(mf)
		case "runnel_topic_records_in_total":
			cur.recordsIn = bySeries(mf)
			for _, m := range mf.GetMetric() {
				cur.topicRecords[label(m, "topic")] += m.GetCounter().GetValue()
			}
		case "runnel_kafka_produce_stage_seconds":
			for _, m := range mf.GetMetric() {
				cur.stages[label(m, "stage")] = buckets(m)
			}
		case "runnel_object_stage_seconds":
			for _, m := range mf.GetMetric() {
				cur.objectStages[label(m, "stage")] = buckets(m)
			}
		case "runnel_topic_produce_stage_seconds":
			for _, m := range mf.GetMetric() {
				t := label(m, "topic")
				if cur.topicStages[t] == nil {
					cur.topicStages[t] = map[string][]bucket{}
				}
				cur.topicStages[t][label(m, "stage")] = buckets(m)
			}
		case "runnel_kafka_request_duration_seconds":
			for _, m := range mf.GetMetric() {
				api := label(m, "api")
				if api != "Produce" && api != "Fetch" {
					continue
				}
				cur.latency[api] = buckets(m)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.prev; p != nil {
		dt := cur.at.Sub(p.at).Seconds()
		sm := sample{T: cur.at.Unix(), ProduceMBps: increase(p.bytesIn, cur.bytesIn) / dt / 1e6, FetchMBps: increase(p.bytesOut, cur.bytesOut) / dt / 1e6,
			RecordsIn: increase(p.recordsIn, cur.recordsIn) / dt, ProduceP99Ms: quantileMs(p.latency["Produce"], cur.latency["Produce"], 0.99),
			FetchP99Ms: quantileMs(p.latency["Fetch"], cur.latency["Fetch"], 0.99), topicRates: map[string]float64{},
			Stages: stageQuantiles(p.stages, cur.stages), ObjectStages: stageQuantiles(p.objectStages, cur.objectStages)}
		for t, stages := range cur.topicStages {
			if q := stageQuantiles(p.topicStages[t], stages); q != nil {
				if sm.topicStages == nil {
					sm.topicStages = map[string]map[string][2]float64{}
				}
				sm.topicStages[t] = q
			}
		}
		for t, v := range cur.topicRecords {
			prev := map[string]float64{}
			if pv, ok := p.topicRecords[t]; ok {
				prev[t] = pv
			}
			sm.topicRates[t] = increase(prev, map[string]float64{t: v}) / dt
		}
		s.samples = append(s.samples, sm)
		if len(s.samples) > s.n {
			s.samples = s.samples[len(s.samples)-s.n:]
		}
	}
	s.prev = cur
}

// stageQuantiles are the p50 and p99 ms of each stage with observations between two snapshots
// (nil if none had any).
func stageQuantiles(prev, cur map[string][]bucket) map[string][2]float64 {
	var out map[string][2]float64
	for st, bs := range cur {
		q50, q99 := quantileMs(prev[st], bs, 0.5), quantileMs(prev[st], bs, 0.99)
		if q50 > 0 || q99 > 0 {
			if out == nil {
				out = map[string][2]float64{}
			}
			out[st] = [2]float64{q50, q99}
		}
	}
	return out
}

// bySeries is a counter family's values by series (its labels).
func bySeries(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		var key strings.Builder
		for _, l := range m.GetLabel() {
			key.WriteString(l.GetName() + "=" + l.GetValue() + ",")
		}
		out[key.String()] += m.GetCounter().GetValue()
	}
	return out
}

// increase is how much the counters grew from prev to cur, series by series as Prometheus
// counts it: a series gone (a deleted topic) or new since prev adds nothing, one that fell (a
// reset) adds its value; never negative.
func increase(prev, cur map[string]float64) float64 {
	var d float64
	for k, v := range cur {
		pv, ok := prev[k]
		switch {
		case !ok:
		case v >= pv:
			d += v - pv
		default:
			d += v
		}
	}
	return d
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func buckets(m *dto.Metric) []bucket {
	var bs []bucket
	for _, b := range m.GetHistogram().GetBucket() {
		bs = append(bs, bucket{b.GetUpperBound(), float64(b.GetCumulativeCount())})
	}
	return bs
}

// quantileMs is the q quantile, in ms, of the observations between two cumulative histograms
// (the upper bound of the bucket it falls in); 0 when there were none.
func quantileMs(prev, cur []bucket, q float64) float64 {
	if len(cur) == 0 {
		return 0
	}
	total := cur[len(cur)-1].count
	if len(prev) == len(cur) {
		total -= prev[len(prev)-1].count
	}
	if total <= 0 {
		return 0
	}
	for i, b := range cur {
		n := b.count
		if len(prev) == len(cur) {
			n -= prev[i].count
		}
		if n >= q*total {
			if math.IsInf(b.le, 1) {
				return cur[max(i-1, 0)].le * 1000
			}
			return b.le * 1000
		}
	}
	return cur[len(cur)-1].le * 1000
}

// last is the latest sample, if there is one.
func (s *sampler) last() (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return sample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

func (s *sampler) snapshotSamples() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...)
}

// metricsAPI answers the chart samples: GET /api/v1/metrics, or ?topic=NAME for that topic's
// produce stages in place of the node's.
func (c *Console) metricsAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	samples := []sample{}
	if c.sampler != nil {
		samples = c.sampler.snapshotSamples()
	}
	if topic := r.URL.Query().Get("topic"); topic != "" {
		if sessionOf(r.Context()) != nil && !c.mayDescribe(r, topic) {
			// With login, what a user sees of a topic is what the broker's ACLs let the
			// user's client see: the node's metrics alone told any user a hidden topic's
			// existence and activity.
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"error": "no topic " + topic})
			return
		}
		for i := range samples {
			samples[i].Stages = samples[i].topicStages[topic]
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"samples": samples})
}

// mayDescribe asks the broker, with the request's client, whether the topic is there for it.
func (c *Console) mayDescribe(r *http.Request, topic string) bool {
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	_, adm, err := c.client(r)
	if err != nil {
		return false
	}
	details, err := adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return false
	}
	d, ok := details[topic]
	return ok && d.Err == nil
}
