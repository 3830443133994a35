package broker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/metrics"
)

// syncBuffer is a bytes.Buffer for a logger that tests read while the broker writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the logged lines that contain every one of parts.
func (b *syncBuffer) lines(parts ...string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		ok := l != ""
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// observedBroker is ctBroker with metrics and a captured log at level; mod may change the config.
func observedBroker(t *testing.T, level slog.Level, mod func(*Config)) (*Broker, string, *prometheus.Registry, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	m := metrics.NewKafka(nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	b, addr, topicReg := ctBroker(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))
		c.Metrics = m
		if mod != nil {
			mod(c)
		}
	})
	ctCreate(t, topicReg, "m", 2, nil)
	return b, addr, reg, logs
}

// metricValue is the value of the counter or gauge name with exactly labels (nil: no labels),
// or of the sample count if it is a histogram; 0 if there is no such series.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m.GetLabel(), labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func labelsMatch(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

// eventually polls cond for up to 5 s: some metrics and log lines come just after a response.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func TestRequestMetrics(t *testing.T) {
	for _, sendfile := range []bool{true, false} {
		name := map[bool]string{true: "sendfile", false: "copy"}[sendfile]
		t.Run(name, func(t *testing.T) {
			_, addr, reg, _ := observedBroker(t, slog.LevelWarn, func(c *Config) { c.DisableSendfile = !sendfile })
			b0, b1 := ctBatch(5, 10), ctBatch(3, 20)
			resp := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"m", 0, b0}, ctPart{"m", 1, b1}, ctPart{"m", 7, ctBatch(1, 1)}))
			if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[2].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("produce to partition 7: error %d; want UNKNOWN_TOPIC_OR_PARTITION", code)
			}
			ctRoundTrip(t, addr, ctFetch(12, 0, 0, "m", 0, 0))
			ctRoundTrip(t, addr, ctFetch(12, 0, 0, "m", 1, 0))

			topic := map[string]string{"topic": "m"}
			want := []struct {
				name   string
				labels map[string]string
				value  float64
			}{
				{"runnel_topic_records_in_total", topic, 8},
				{"runnel_topic_bytes_in_total", topic, float64(len(b0) + len(b1))},
				{"runnel_topic_records_out_total", topic, 8},
				{"runnel_topic_bytes_out_total", topic, float64(len(b0) + len(b1))},
				{"runnel_kafka_requests_total", map[string]string{"api": "Produce"}, 1},
				{"runnel_kafka_requests_total", map[string]string{"api": "Fetch"}, 2},
				{"runnel_kafka_request_duration_seconds", map[string]string{"api": "Fetch"}, 2},
				{"runnel_kafka_request_errors_total", map[string]string{"api": "Produce", "error": "UNKNOWN_TOPIC_OR_PARTITION"}, 1},
				{"runnel_kafka_connections_accepted_total", nil, 3},
			}
			// A request is counted just after its response is written, and every round trip has
			// its own connection: wait until all of them are counted, in whatever order.
			eventually(func() bool {
				for _, w := range want {
					if metricValue(t, reg, w.name, w.labels) != w.value {
						return false
					}
				}
				return true
			})
			for _, w := range want {
				if got := metricValue(t, reg, w.name, w.labels); got != w.value {
					t.Errorf("%s%v = %v; want %v", w.name, w.labels, got, w.value)
				}
			}
			if !eventually(func() bool {
				return metricValue(t, reg, "runnel_kafka_connections_open", nil) == 0 &&
					metricValue(t, reg, "runnel_kafka_inflight_request_bytes", nil) == 0
			}) {
				t.Errorf("after the connections closed: %v open, %v in-flight request bytes; want 0, 0",
					metricValue(t, reg, "runnel_kafka_connections_open", nil), metricValue(t, reg, "runnel_kafka_inflight_request_bytes", nil))
			}
		})
	}
}

func TestSlowRequestLogged(t *testing.T) {
	_, addr, _, logs := observedBroker(t, slog.LevelWarn, func(c *Config) { c.SlowRequestThreshold = time.Nanosecond })
	ctPing(t, addr)
	ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"m", 0, ctBatch(2, 10)}))
	for _, api := range []string{"ApiVersions", "Produce"} {
		var lines []string
		eventually(func() bool { lines = logs.lines("slow request", "api="+api); return len(lines) > 0 })
		if len(lines) != 1 {
			t.Fatalf("slow request lines for %s = %q; want 1 in\n%s", api, lines, logs)
		}
		for _, field := range []string{"level=WARN", "client_id=" + ctClientID, "remote=127.0.0.1:", "version=",
			"total_ms=", "read_ms=", "handle_ms=", "wait_ms=", "queue_ms=", "write_ms="} {
			if !strings.Contains(lines[0], field) {
				t.Errorf("slow request line %q lacks %q", lines[0], field)
			}
		}
	}
}

func TestSlowRequestThresholds(t *testing.T) {
	// The default threshold (500 ms) lets quick requests pass; a fetch may take its long-poll
	// wait on top of the threshold.
	_, addr, _, logs := observedBroker(t, slog.LevelWarn, func(c *Config) { c.SlowRequestThreshold = 0 })
	ctPing(t, addr)
	_, addr2, _, logs2 := observedBroker(t, slog.LevelWarn, func(c *Config) { c.SlowRequestThreshold = 150 * time.Millisecond })
	start := time.Now()
	ctRoundTrip(t, addr2, ctFetch(12, 300, 1, "m", 0, 0)) // nothing to read: waits out 300 ms
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("long poll took %v; want about 300ms", took)
	}
	ctPing(t, addr2)
	time.Sleep(50 * time.Millisecond) // the log line would follow the response
	if lines := logs.lines("slow request"); len(lines) > 0 {
		t.Errorf("default threshold: slow request lines %q; want none", lines)
	}
	if lines := logs2.lines("slow request"); len(lines) > 0 {
		t.Errorf("a long poll within its MaxWaitMillis was logged as slow: %q", lines)
	}
}

func TestConnectionCloseLoggedOnce(t *testing.T) {
	dropped := false
	var mu sync.Mutex
	b, addr, reg, logs := observedBroker(t, slog.LevelInfo, func(c *Config) {
		c.Hooks.DropResponse = func(key int16, _ kmsg.Response) bool {
			mu.Lock()
			defer mu.Unlock()
			if key == kmsg.Metadata.Int16() && !dropped {
				dropped = true
				return true
			}
			return false
		}
	})
	// A protocol error: an unknown API key.
	nc := ctDial(t, addr)
	nc.Write(ctFrame(9999, 0, 1, false, nil))
	ctExpectClosed(t, nc, "unknown API key")
	// A write that never happens: the hook drops the response and closes the connection.
	nc = ctDial(t, addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	nc.Write(ctEncode(req, 1))
	ctExpectClosed(t, nc, "dropped Metadata response")
	// A client that hangs up is not an error.
	ctPing(t, addr)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.Shutdown(ctx) // every connection goroutine has logged what it will log

	closing := logs.lines("closing connection")
	if len(closing) != 2 {
		t.Fatalf("closing-connection lines = %d; want 2 (protocol, write):\n%s", len(closing), logs)
	}
	for _, want := range []string{"on=protocol", "on=write"} {
		if lines := logs.lines("closing connection", want, "reason="); len(lines) != 1 {
			t.Errorf("closing-connection lines with %s = %q; want 1 with a reason", want, lines)
		}
	}
	for _, reason := range []string{metrics.ReasonProtocol, metrics.ReasonWrite} {
		if got := metricValue(t, reg, "runnel_kafka_connection_errors_total", map[string]string{"reason": reason}); got != 1 {
			t.Errorf("connection errors (%s) = %v; want 1", reason, got)
		}
	}
}

func TestEachErrorCode(t *testing.T) {
	produce := &kmsg.ProduceResponse{Topics: []kmsg.ProduceResponseTopic{
		{Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: 0}, {ErrorCode: 3}}},
		{Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: 87}}},
	}}
	fetch := &kmsg.FetchResponse{ErrorCode: 71, Topics: []kmsg.FetchResponseTopic{
		{Partitions: []kmsg.FetchResponseTopicPartition{{ErrorCode: 1}}},
	}}
	// By reflection: nested topics and partitions, and a top-level code.
	createTopics := &kmsg.CreateTopicsResponse{Topics: []kmsg.CreateTopicsResponseTopic{{ErrorCode: 36}, {ErrorCode: 0}, {ErrorCode: 37}}}
	apiVersions := &kmsg.ApiVersionsResponse{ErrorCode: 35, ApiKeys: []kmsg.ApiVersionsResponseApiKey{{ApiKey: 1}}}
	deleteRecords := &kmsg.DeleteRecordsResponse{Topics: []kmsg.DeleteRecordsResponseTopic{
		{Partitions: []kmsg.DeleteRecordsResponseTopicPartition{{ErrorCode: 1}, {ErrorCode: 3}}},
	}}
	for _, tc := range []struct {
		resp kmsg.Response
		want []int16
	}{
		{produce, []int16{3, 87}},
		{fetch, []int16{71, 1}},
		{createTopics, []int16{36, 37}},
		{apiVersions, []int16{35}},
		{deleteRecords, []int16{1, 3}},
		{&kmsg.MetadataResponse{}, nil},
	} {
		var got []int16
		eachErrorCode(tc.resp, func(code int16) { got = append(got, code) })
		if !equalInt16s(got, tc.want) {
			t.Errorf("eachErrorCode(%T) = %v; want %v", tc.resp, got, tc.want)
		}
	}
}

func equalInt16s(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCountRecords(t *testing.T) {
	two := append(ctBatch(5, 10), ctBatch(7, 3)...)
	for _, tc := range []struct {
		name string
		data []byte
		want int
	}{
		{"empty", nil, 0},
		{"one batch", ctBatch(4, 1), 4},
		{"two batches", two, 12},
		{"a torn second header", two[:len(ctBatch(5, 10))+20], 5},
	} {
		if got := countRecords(bytes.NewReader(tc.data), 0, len(tc.data)); got != tc.want {
			t.Errorf("countRecords(%s) = %d; want %d", tc.name, got, tc.want)
		}
	}
}
