// The admin endpoints of a running server: health and readiness through its life, /metrics
// during a franz-go produce/consume run, /v1/status and `runnel status`.
package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/cli"
	"github.com/runnel-dev/runnel/internal/server"
)

// adminGet GETs path from the admin server at addr and returns the status code and body.
func adminGet(t *testing.T, addr, path string) (int, string, error) {
	t.Helper()
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// expectStatus checks that GET path answers code.
func expectStatus(t *testing.T, addr, path string, code int, when string) {
	t.Helper()
	got, body, err := adminGet(t, addr, path)
	if err != nil || got != code {
		t.Errorf("%s: GET %s = %d %q, %v; want %d", when, path, got, body, err, code)
	}
}

// scrape GETs /metrics and returns every sample by its series as printed, e.g.
// `runnel_topic_records_in_total{topic="t"}`.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	code, body, err := adminGet(t, addr, "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, %v", code, err)
	}
	samples := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		samples[line[:i]] = v
	}
	return samples
}

// sumSeries adds up the samples of metric name whose labels contain label (e.g. `topic="t"`).
func sumSeries(samples map[string]float64, name, label string) float64 {
	var sum float64
	for k, v := range samples {
		if strings.HasPrefix(k, name+"{") && strings.Contains(k, label) {
			sum += v
		}
	}
	return sum
}

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func TestHealthAndReadiness(t *testing.T) {
	s, err := server.Open(server.Config{
		DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Console: &bytes.Buffer{},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer s.Close()
	admin := s.AdminAddr()
	if strings.HasSuffix(admin, ":0") {
		t.Fatalf("AdminAddr() = %s; want the bound port", admin)
	}
	expectStatus(t, admin, "/healthz", http.StatusOK, "before Serve")
	expectStatus(t, admin, "/readyz", http.StatusServiceUnavailable, "before Serve")
	expectStatus(t, admin, "/metrics", http.StatusOK, "before Serve")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	if !waitFor(func() bool { code, _, _ := adminGet(t, admin, "/readyz"); return code == http.StatusOK }) {
		t.Fatal("/readyz did not answer 200 while serving")
	}
	expectStatus(t, admin, "/healthz", http.StatusOK, "serving")
	st := s.Status()
	if st.State != "serving" || !st.Ready || st.KafkaAddr != ln.Addr().String() || st.AdminAddr != admin || st.ClusterID == "" {
		t.Errorf("Status() while serving = %+v; want serving, ready, kafka %s, admin %s, a cluster id", st, ln.Addr(), admin)
	}

	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	expectStatus(t, admin, "/readyz", http.StatusServiceUnavailable, "after shutdown")
	expectStatus(t, admin, "/healthz", http.StatusOK, "after shutdown, before Close")
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if code, _, err := adminGet(t, admin, "/healthz"); err == nil {
		t.Errorf("after Close: GET /healthz = %d; want the admin server gone", code)
	}
}

func TestMetricsDuringProduceConsume(t *testing.T) {
	const topic, records = "metered", 300
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	admin := b.s.AdminAddr()
	server.CreateTopicT(t, b.s, topic, 3, map[string]string{"write.caching": "false"})
	in := `runnel_topic_records_in_total{topic="metered"}`
	before := scrape(t, admin)
	if before[in] != 0 {
		t.Fatalf("%s = %v before producing; want 0", in, before[in])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	producer, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := range records {
		producer.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i))}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Key, err)
			}
		})
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// A request is counted once its response is written, just after the client has it.
	produces := `runnel_kafka_requests_total{api="Produce"}`
	waitFor(func() bool { return scrape(t, admin)[produces] > 0 })
	m := scrape(t, admin)
	if m[in] != records {
		t.Errorf("%s = %v after producing %d records; want exactly %d", in, m[in], records, records)
	}
	for series, atLeast := range map[string]float64{
		`runnel_topic_bytes_in_total{topic="metered"}`:               1,
		`runnel_kafka_requests_total{api="Produce"}`:                 1,
		`runnel_kafka_requests_total{api="Metadata"}`:                1,
		`runnel_flush_sync_duration_seconds_count`:                   1, // acks=all without write caching: fsyncs
		`runnel_flush_syncs_total`:                                   1,
		`runnel_flush_batches_per_sync_count`:                        1,
		`runnel_kafka_connections_accepted_total`:                    1,
		`runnel_kafka_connections_open`:                              1,
		`runnel_kafka_request_duration_seconds_count{api="Produce"}`: 1,
		`runnel_raft_wal_sync_seconds_count{group="controller"}`:     1, // the topic's creation was committed
	} {
		if m[series] < atLeast {
			t.Errorf("%s = %v after producing; want >= %v", series, m[series], atLeast)
		}
	}
	for _, name := range []string{"runnel_partition_log_end_offset", "runnel_partition_high_watermark"} {
		if got := sumSeries(m, name, `topic="metered"`); got != records {
			t.Errorf("sum of %s = %v; want %d", name, got, records)
		}
	}
	if got := sumSeries(m, "runnel_partition_size_bytes", `topic="metered"`); got <= 0 {
		t.Errorf("sum of runnel_partition_size_bytes = %v; want > 0", got)
	}
	if m["runnel_flush_backlog_bytes"] != 0 || m["runnel_ready"] != 1 || m["go_goroutines"] == 0 {
		t.Errorf("flush backlog %v, ready %v, go_goroutines %v; want 0, 1, > 0", m["runnel_flush_backlog_bytes"], m["runnel_ready"], m["go_goroutines"])
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for seen := 0; seen < records; {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consuming after %d records: %v", seen, err)
		}
		seen += fetches.NumRecords()
	}
	out := `runnel_topic_records_out_total{topic="metered"}`
	if !waitFor(func() bool { return scrape(t, admin)[out] >= records }) {
		t.Errorf("%s = %v after consuming %d records; want >= %d", out, scrape(t, admin)[out], records, records)
	}
	m = scrape(t, admin)
	if bytesIn, bytesOut := m[`runnel_topic_bytes_in_total{topic="metered"}`], m[`runnel_topic_bytes_out_total{topic="metered"}`]; bytesOut < bytesIn {
		t.Errorf("bytes out %v < bytes in %v after consuming everything", bytesOut, bytesIn)
	}
	if m[`runnel_kafka_requests_total{api="Fetch"}`] < 1 {
		t.Errorf("no Fetch requests counted")
	}

	// An error code per partition: ListOffsets for a partition that does not exist.
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 99, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := consumer.Broker(0).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("ListOffsets of partition 99: error %d; want UNKNOWN_TOPIC_OR_PARTITION", code)
	}
	errSeries := `runnel_kafka_request_errors_total{api="ListOffsets",error="UNKNOWN_TOPIC_OR_PARTITION"}`
	if !waitFor(func() bool { return scrape(t, admin)[errSeries] == 1 }) {
		t.Errorf("%s = %v; want 1", errSeries, scrape(t, admin)[errSeries])
	}
}

func TestStatusEndpointAndCommand(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("orders", 2)
	p := b.s.Topics().List()[0].Partitions[1]
	if _, _, err := p.Replica.Append(threeRecordBatch()); err != nil {
		t.Fatal(err)
	}
	admin := b.s.AdminAddr()

	code, body, err := adminGet(t, admin, "/v1/status")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/status = %d, %v", code, err)
	}
	var st server.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("decoding /v1/status: %v\n%s", err, body)
	}
	if st.State != "serving" || len(st.Topics) != 1 || st.Topics[0].Name != "orders" || len(st.Topics[0].Partitions) != 2 {
		t.Fatalf("/v1/status = %s; want serving with orders' 2 partitions", body)
	}
	if got := st.Topics[0].Partitions[1]; got.EndOffset != 3 || got.SizeBytes == 0 {
		t.Errorf("orders/1 in /v1/status = %+v; want end offset 3 and a size", got)
	}

	root := cli.NewRoot("test")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"status", "--admin-addr", admin})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("runnel status: %v", err)
	}
	for _, want := range []string{"node 0", "serving (ready)", "TOPIC", "orders"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("runnel status output lacks %q:\n%s", want, out.String())
		}
	}
}

// threeRecordBatch is a producer batch of three records.
func threeRecordBatch() []byte {
	var body []byte
	for i := range 3 {
		body = batch.AppendRecord(body, 0, int32(i), []byte{'k', byte('0' + i)}, []byte("value"), 0, nil)
	}
	return batch.AppendBatch(nil, batch.Header{
		LastOffsetDelta: 2, BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 3,
	}, body)
}
