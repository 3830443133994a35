package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// Kafka Connect 4.3.1 in distributed mode over Runnel: workers form a group (the classic
// protocol, type "connect"), keep their configs, offsets and statuses in compacted topics, and
// an exactly-once source task (KIP-618) writes its records and its source offsets in
// transactions, after fencing its predecessors' producers.

// connectWorker is a Kafka Connect worker process with its REST address.
type connectWorker struct {
	*javaProcess
	rest string // host:port
}

// startConnectWorker starts a distributed worker of group "connect-runnel" against bootstrap.
func startConnectWorker(t *testing.T, bootstrap string) *connectWorker {
	t.Helper()
	return startConnectWorkerAt(t, bootstrap, freeAddr(t))
}

// startConnectWorkerAt is startConnectWorker with the REST API on rest.
func startConnectWorkerAt(t *testing.T, bootstrap, rest string) *connectWorker {
	t.Helper()
	props := filepath.Join(t.TempDir(), "worker.properties")
	cfg := strings.Join([]string{
		"bootstrap.servers=" + bootstrap,
		"group.id=connect-runnel",
		"key.converter=org.apache.kafka.connect.storage.StringConverter",
		"value.converter=org.apache.kafka.connect.storage.StringConverter",
		"offset.storage.topic=connect-offsets",
		"config.storage.topic=connect-configs",
		"status.storage.topic=connect-status",
		"offset.storage.replication.factor=-1",
		"config.storage.replication.factor=-1",
		"status.storage.replication.factor=-1",
		"exactly.once.source.support=enabled",
		"listeners=http://" + rest,
		"plugin.discovery=only_scan",
		// A lost worker's tasks go to the others after its session (6 s), not 5 minutes.
		"scheduled.rebalance.max.delay.ms=1000",
		"session.timeout.ms=6000",
		"heartbeat.interval.ms=1000",
	}, "\n") + "\n"
	if err := os.WriteFile(props, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	java := testclients.Java43Connect(t)
	w := &connectWorker{rest: rest}
	w.javaProcess = startJavaProcess(t, func(string) []string { return append(slices.Clone(java), props) })
	eventually(t, "Kafka Connect's REST API on "+rest, 60*time.Second, func() bool {
		resp, err := http.Get("http://" + rest + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return w
}

// connectREST sends a request to a worker's REST API and decodes its JSON answer into out.
func connectREST(t *testing.T, rest, method, path string, body, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, "http://"+rest+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// connectTaskWorker returns the REST address of the worker running a connector's task 0 in
// state RUNNING ("" if none does).
func connectTaskWorker(t *testing.T, rest, connector string) string {
	t.Helper()
	var st struct {
		Tasks []struct {
			ID       int    `json:"id"`
			State    string `json:"state"`
			WorkerID string `json:"worker_id"`
			Trace    string `json:"trace"`
		} `json:"tasks"`
	}
	if connectREST(t, rest, http.MethodGet, "/connectors/"+connector+"/status", nil, &st) != http.StatusOK {
		return ""
	}
	for _, task := range st.Tasks {
		if task.State == "FAILED" {
			t.Fatalf("%s task %d failed: %s", connector, task.ID, task.Trace)
		}
		if task.ID == 0 && task.State == "RUNNING" {
			return task.WorkerID
		}
	}
	return ""
}

// sourceLines is how many lines the FileStreamSource connector of the tests reads.
const sourceLines = 200_000

// createLinesSource writes a file of sourceLines lines "line-N" and creates, through worker w,
// connector "lines-source" reading it into topic "lines" exactly once (exactly.once.support
// required), in a transaction per second of polls: one is open most of the time, for a kill.
func createLinesSource(t *testing.T, w *connectWorker, extra map[string]string) {
	t.Helper()
	var text strings.Builder
	for i := range sourceLines {
		fmt.Fprintf(&text, "line-%d\n", i)
	}
	file := filepath.Join(t.TempDir(), "source.txt")
	if err := os.WriteFile(file, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	config := map[string]string{
		"connector.class":                  "org.apache.kafka.connect.file.FileStreamSourceConnector",
		"file":                             file,
		"topic":                            "lines",
		"tasks.max":                        "1",
		"batch.size":                       "100",
		"exactly.once.support":             "required",
		"transaction.boundary":             "interval",
		"transaction.boundary.interval.ms": "1000",
	}
	maps.Copy(config, extra)
	eventually(t, "the connector created", 60*time.Second, func() bool {
		code := connectREST(t, w.rest, http.MethodPut, "/connectors/lines-source/config", config, nil)
		return code == http.StatusCreated || code == http.StatusOK
	})
}

// checkLines fails unless topic "lines" holds, read_committed, every line of the source once
// and in order; w names the worker running the task in the failure.
func checkLines(t *testing.T, ctx context.Context, seeds []string, w *connectWorker) {
	t.Helper()
	got := testclients.ReadValues(t, ctx, seeds, "lines", kgo.ReadCommitted(), sourceLines, 150*time.Second)
	var problems []string
	for i, v := range got {
		if want := fmt.Sprintf("line-%d", i); v != want && len(problems) < 10 {
			problems = append(problems, fmt.Sprintf("record %d is %q, want %q", i, v, want))
		}
	}
	if len(got) != sourceLines || len(problems) > 0 {
		t.Fatalf("read_committed holds %d lines, want %d exactly once in order (task on %q):\n%s",
			len(got), sourceLines, connectTaskWorker(t, w.rest, "lines-source"), strings.Join(problems, "\n"))
	}
}

// TestKafkaConnectExactlyOnceSource: two Kafka Connect workers run a FileStreamSource
// connector with exactly.once.support=required (a transaction per second of polls) over a file
// of 200,000 lines; the worker running the task is killed (SIGKILL) while one of its
// transactions holds records in the log, and comes back. The task is run again (by either
// worker): it fences the dead task's producer, which aborts that transaction, and resumes from
// the source offset committed with the records. The topic then holds every line exactly once,
// in order, as read_committed consumers see it. (The file is written whole beforehand: the
// FileStreamSource task does not reliably see lines appended after it reached the end.)
func TestKafkaConnectExactlyOnceSource(t *testing.T) {
	testclients.Java43Connect(t)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("lines", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := b.client()
	adm := kadm.NewClient(cl)
	workers := []*connectWorker{startConnectWorker(t, b.addr), startConnectWorker(t, b.addr)}
	createLinesSource(t, workers[0], nil)
	var victim *connectWorker
	eventually(t, "a worker running the source task", 90*time.Second, func() bool {
		for _, c := range workers {
			if id := connectTaskWorker(t, c.rest, "lines-source"); id != "" {
				for _, c := range workers {
					if c.rest == id {
						victim = c
					}
				}
				return victim != nil
			}
		}
		return false
	})
	// Killed while a transaction holds records (the first one, of thousands of lines, or a
	// later one).
	eventually(t, "a transaction open in lines", 60*time.Second, func() bool { return openTransaction(t, ctx, adm, "lines") })
	victim.kill()
	time.Sleep(time.Second) // a transaction still open now is the dead task's, to abort
	if !openTransaction(t, ctx, adm, "lines") {
		t.Fatal("the kill found no transaction open")
	}
	// The killed worker comes back (a new process on the same REST address, the same worker).
	for i, c := range workers {
		if c == victim {
			workers[i] = startConnectWorkerAt(t, b.addr, c.rest)
		}
	}
	checkLines(t, ctx, []string{b.addr}, workers[0])
	all := testclients.ReadValues(t, ctx, []string{b.addr}, "lines", kgo.ReadUncommitted(), sourceLines+1, 5*time.Second)
	if len(all) <= sourceLines {
		t.Errorf("read_uncommitted finds %d records, read_committed %d: the aborted transaction's are missing", len(all), sourceLines)
	}
}

// TestKafkaConnectOnACluster: the same exactly-once source on three nodes (its topics and
// Connect's replicated three times), while the node coordinating the task's transactional id
// stops and, later, comes back, and then every node restarts in turn (a rolling restart) while
// a transaction of the task is open: every line once, in order, and the task never fails. A
// restarted node's registration keeps its writes (the boot mark, docs/cluster.md §4.9); before,
// a transaction across the restart of its partition's leader was aborted, and Connect fails
// the task for good on a commit that is refused.
func TestKafkaConnectOnACluster(t *testing.T) {
	testclients.Java43Connect(t)
	c := startCluster(t, 3)
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, adm := c.client()
	if r, err := adm.CreateTopic(ctx, 1, 3, nil, "lines"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	c.waitTopicEverywhere(ctx, cl, "lines")
	seeds := c.brokers()
	bootstrap := strings.Join(seeds, ",")
	workers := []*connectWorker{startConnectWorker(t, bootstrap), startConnectWorker(t, bootstrap)}
	// The task's producer sends small batches one at a time, each waiting for a quorum fsync,
	// so its transactions outlast the coordinator's stop and the rolling restart (without the
	// overrides the file is written before the restarts begin).
	createLinesSource(t, workers[0], map[string]string{"producer.override.batch.size": "1024",
		"producer.override.max.in.flight.requests.per.connection": "1"})
	eventually(t, "a transaction open in lines", 90*time.Second, func() bool { return openTransaction(t, ctx, adm, "lines") })
	coord := adm.FindTxnCoordinators(ctx, "connect-runnel-lines-source-0")["connect-runnel-lines-source-0"]
	if coord.Err != nil {
		t.Fatalf("finding the task's transaction coordinator: %v", coord.Err)
	}
	c.stop(coord.NodeID)
	time.Sleep(3 * time.Second)
	c.start(coord.NodeID)
	c.waitNodes(3)
	restarted := 0
	for id := int32(1); id <= 3; id++ {
		if !openTransaction(t, ctx, adm, "lines") {
			eventually(t, "a transaction open in lines, or every line written", 60*time.Second, func() bool {
				return openTransaction(t, ctx, adm, "lines") || linesWritten(ctx, adm)
			})
			if linesWritten(ctx, adm) {
				break
			}
		}
		c.stop(id)
		c.start(id)
		c.waitNodes(3)
		restarted++
		connectTaskWorker(t, workers[0].rest, "lines-source") // fails the test if the task failed
	}
	t.Logf("nodes restarted with a transaction open: %d of 3", restarted)
	if restarted == 0 {
		t.Error("every line was written before the rolling restart began: it tested nothing")
	}
	checkLines(t, ctx, seeds, workers[0])
}

// linesWritten reports whether topic "lines" holds every line of the source (and perhaps
// aborted records and markers): its end offset is past sourceLines.
func linesWritten(ctx context.Context, adm *kadm.Client) bool {
	ends, err := adm.ListEndOffsets(ctx, "lines")
	if err != nil {
		return false
	}
	o, _ := ends.Lookup("lines", 0)
	return o.Err == nil && o.Offset > sourceLines
}
