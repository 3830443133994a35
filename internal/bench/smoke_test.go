// Smoke test: runnel bench against a Runnel server in the test process. It asserts that the
// bench ran and reported sane, non-zero numbers; never how fast anything was.
package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/bench"
	"github.com/runnel-dev/runnel/internal/cli"
	"github.com/runnel-dev/runnel/internal/server"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startRunnel serves a new Runnel node on a free loopback port until the test ends.
func startRunnel(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.Open(server.Config{
		DataDir: t.TempDir(), KafkaAddr: ln.Addr().String(), AdminAddr: "127.0.0.1:0", Console: &bytes.Buffer{},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		ln.Close()
		t.Fatalf("server.Open = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve = %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return ln.Addr().String()
}

// checkSane fails the test unless res shows records produced and consumed with plausible
// latencies and throughput.
func checkSane(t *testing.T, res *bench.Result) {
	t.Helper()
	c := res.Records
	if c.Sent == 0 || c.Acked != c.Sent || c.ProduceErrors != 0 || c.Unsent != 0 {
		t.Errorf("%s: records sent %d, acked %d, produce errors %d, unsent %d; want all sent records acked",
			res.Label, c.Sent, c.Acked, c.ProduceErrors, c.Unsent)
	}
	if c.Consumed < c.Acked || c.FetchErrors != 0 {
		t.Errorf("%s: consumed %d of %d acked, %d fetch errors", res.Label, c.Consumed, c.Acked, c.FetchErrors)
	}
	for name, s := range map[string]bench.LatencySummary{"produce": res.Produce, "e2e": res.E2E} {
		if s.Count == 0 || s.P50Ms <= 0 || s.P50Ms > s.P99Ms || s.P99Ms > s.MaxMs || s.MaxMs > 60000 {
			t.Errorf("%s: %s latency %+v; want count > 0 and 0 < p50 <= p99 <= max <= 60 s", res.Label, name, s)
		}
	}
	tp := res.Throughput
	if tp.ProduceRecordsPerSec <= 0 || tp.ProduceMBPerSec <= 0 || tp.ConsumeRecordsPerSec <= 0 {
		t.Errorf("%s: throughput %+v; want > 0", res.Label, tp)
	}
	if len(res.Notes) > 0 || len(res.Errors) > 0 {
		t.Errorf("%s: notes %q, errors %+v; want none", res.Label, res.Notes, res.Errors)
	}
}

func TestSmokeBenchRun(t *testing.T) {
	addr := startRunnel(t)
	root := cli.NewRoot("test")
	var out, progress bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&progress)
	root.SetArgs([]string{"bench", "run", "latency-1kb", "--bootstrap", addr, "--json", "--label", "runnel",
		"--rate", "500", "--partitions", "2", "--record-size", "256", "--warmup", "500ms",
		"--duration", "2s", "--topic-config", "write.caching=true", "--drain-timeout", "20s"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("runnel bench run = %v\nstderr:\n%s", err, progress.String())
	}
	var res bench.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("bench run --json output does not parse: %v\n%s", err, out.String())
	}
	// The flags overrode the workload.
	w := res.Workload
	if w.Name != "latency-1kb" || w.Rate != 500 || w.Partitions != 2 || w.RecordSize != 256 ||
		w.TopicConfigs["write.caching"] != "true" || time.Duration(w.Duration) != 2*time.Second {
		t.Errorf("workload after flags = %+v; want latency-1kb at 500 rec/s, 2 partitions, 256 B, 2s, write.caching=true", w)
	}
	checkSane(t, &res)
	if len(res.Intervals) == 0 {
		t.Errorf("no progress intervals in the result; stderr:\n%s", progress.String())
	}
}

// listTopics lists the broker's topics with a new client (a client answers a metadata
// request from what it learnt within the last MetadataMinAge).
func listTopics(addr string) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	return topics.Names(), err
}

// A run that cannot take place deletes the topics it created and only those: here its second
// topic exists already (someone else's), so the run fails after creating its first.
func TestFailedRunDeletesItsTopics(t *testing.T) {
	addr := startRunnel(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "taken-1"); err != nil || r.Err != nil {
		t.Fatalf("create taken-1: %v %v", err, r.Err)
	}
	w, err := bench.LoadWorkload("sparse-feed")
	if err != nil {
		t.Fatal(err)
	}
	w.Topics, w.Duration = 2, bench.Duration(time.Second)
	for _, keep := range []bool{false, true} {
		_, err := bench.Run(ctx, w, bench.Options{Bootstrap: []string{addr}, TopicPrefix: "taken", KeepTopics: keep})
		if err == nil || !strings.Contains(err.Error(), "taken-1") {
			t.Fatalf("KeepTopics %v: Run = %v; want an error naming taken-1", keep, err)
		}
		if left, err := listTopics(addr); err != nil || !slices.Equal(left, []string{"taken-1"}) {
			t.Errorf("KeepTopics %v: topics after the failed run: %v, %v; want only taken-1", keep, left, err)
		}
	}
}

// topicsSeen is a progress writer that lists the broker's topics at every progress line and
// keeps the most it saw at once.
type topicsSeen struct {
	t    *testing.T
	addr string
	most int
}

func (s *topicsSeen) Write(p []byte) (int, error) {
	topics, err := listTopics(s.addr)
	if err != nil {
		s.t.Errorf("listing topics during the comparison: %v", err)
	}
	s.most = max(s.most, len(topics))
	return len(p), nil
}

// Compare runs both fairness pairs; Runnel stands in for Kafka too (it takes flush.messages).
// Every run's topics stay until the comparison is over (a deletion during another run would
// land on its fsyncs), and are gone after.
func TestSmokeCompare(t *testing.T) {
	addr := startRunnel(t)
	w, err := bench.LoadWorkload("sparse-feed")
	if err != nil {
		t.Fatal(err)
	}
	w.Partitions, w.Rate, w.Warmup, w.Duration = 8, 200, 0, bench.Duration(1200*time.Millisecond)
	seen := &topicsSeen{t: t, addr: addr}
	cmp, err := bench.Compare(context.Background(), w, bench.CompareOptions{
		Runnel: []string{addr}, Kafka: []string{addr}, Run: bench.Options{DrainTimeout: 20 * time.Second, Progress: seen}})
	if err != nil {
		t.Fatalf("Compare = %v", err)
	}
	if seen.most != 4 {
		t.Errorf("at most %d topics at once during the comparison's four runs; want 4 (every run's kept to the end)", seen.most)
	}
	if left, err := listTopics(addr); err != nil || len(left) != 0 {
		t.Errorf("topics after the comparison: %v, %v; want none", left, err)
	}
	if len(cmp.Pairs) != 2 {
		t.Fatalf("Compare ran %d pairs; want 2", len(cmp.Pairs))
	}
	for _, p := range cmp.Pairs {
		checkSane(t, p.Runnel)
		checkSane(t, p.Kafka)
		if got := p.Kafka.Workload.TopicConfigs; p.Pair.Name == "fsync" && got["flush.messages"] != "1" {
			t.Errorf("pair fsync: kafka topic configs %v; want flush.messages=1", got)
		}
	}
	var buf bytes.Buffer
	cmp.WriteText(&buf)
	if !bytes.Contains(buf.Bytes(), []byte("ratio")) {
		t.Errorf("comparison text has no ratio column:\n%s", buf.String())
	}
}

// TestTxnBench runs `runnel bench txn` briefly against one Runnel node: both kinds of stream
// cycles and both bulk inserts complete and report sane numbers.
func TestTxnBench(t *testing.T) {
	addr := startRunnel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := bench.Txn(ctx, bench.TxnOptions{Bootstrap: []string{addr}, Label: "runnel", Cycles: 30, Bulk: 500, BulkRounds: 1,
		TopicConfigs: map[string]string{"write.caching": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Txn.Count != 30 || res.Plain.Count != 30 || res.Txn.Median <= 0 || res.Plain.Median <= 0 || res.RatioMedian <= 0 {
		t.Errorf("stream results %+v / %+v, ratio %v; want 30 cycles of each with positive latencies", res.Txn, res.Plain, res.RatioMedian)
	}
	if res.BulkTxn <= 0 || res.BulkPlain <= 0 {
		t.Errorf("bulk results %v / %v records/s; want both positive", res.BulkTxn, res.BulkPlain)
	}
}

// TestShareBench runs `runnel bench share` briefly against one Runnel node: each run reads
// every record of the topic once and reports its rate and latencies.
func TestShareBench(t *testing.T) {
	addr := startRunnel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := bench.Share(ctx, bench.ShareOptions{Bootstrap: []string{addr}, Label: "runnel", Records: 300,
		MaxRecords: []int{10, 100}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 4 {
		t.Fatalf("%d runs, want 4 (two poll sizes, two modes): %+v", len(res.Runs), res.Runs)
	}
	for _, r := range res.Runs {
		if r.Records != 300 || r.PerSecond <= 0 || r.Cycle.Count == 0 || (r.Mode == "sync") != (r.Ack.Count > 0) {
			t.Errorf("run %+v: want 300 records, a positive rate, cycles, and acknowledgement times for sync only", r)
		}
	}
}
