package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// TestJavaTransactionsKill: the Java client 4.1.1's consume-transform-produce loop
// (sendOffsetsToTransaction, 10 % of the transactions aborted on purpose) against a three-node
// cluster of real processes; while it runs, the node coordinating its transactional id is
// killed with kill -9 and restarted. A read_committed consumer then finds every input record
// exactly once: nothing committed is lost, nothing aborted is read, nothing is committed twice,
// no input below the group's committed offsets is missing from the output (offsets committed
// without their transaction's output), and the loop processed the whole input after the kill.
//
// The output topic is a local one, then an object-storage one (the cluster shares a file://
// store): the kill then leaves the new coordinator to discover the transaction's object
// partitions from the controller's image (docs/object-topics.md §10).
//
// It starves other tests of CPU (a JVM and three servers) enough to fence their nodes, so it runs
// on its own: RUNNEL_JAVA_TXN_KILL=1 go test ./internal/chaos -run TestJavaTransactionsKill
// (.ci/run has a step for it).
func TestJavaTransactionsKill(t *testing.T) {
	if os.Getenv("RUNNEL_JAVA_TXN_KILL") == "" {
		t.Skip("runs alone: RUNNEL_JAVA_TXN_KILL=1 go test ./internal/chaos -run TestJavaTransactionsKill")
	}
	t.Run("local-output", func(t *testing.T) { javaTransactionsKill(t, false) })
	t.Run("object-output", func(t *testing.T) { javaTransactionsKill(t, true) })
}

func javaTransactionsKill(t *testing.T, objectOut bool) {
	remaining := func(ctx context.Context, adm *kadm.Client, n int64) int64 {
		var sum int64
		if offs, err := adm.FetchOffsets(ctx, "etl-group"); err == nil {
			offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		}
		return n - sum
	}
	java := testclients.Java(t)
	bin := runnelBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startObjectCluster(t, ctx, bin, nil)
	defer func() {
		if t.Failed() {
			for _, n := range []string{"node-1.log", "node-2.log", "node-3.log"} {
				if b, err := os.ReadFile(filepath.Join(c.dir, n)); err == nil {
					t.Logf("%s:\n%s", n, tail(b, 3000))
				}
			}
		}
	}()
	bootstrap := strings.Join(c.Brokers(), ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"in", "out"} {
		configs := map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
		if topic == "out" && objectOut {
			configs = map[string]*string{"runnel.storage": kadm.StringPtr("object")}
		}
		if _, err := adm.CreateTopic(ctx, 3, 3, configs, topic); err != nil {
			t.Fatal(err)
		}
	}
	const n = 12000
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 3), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, java[0], append(java[1:], "txn-etl", bootstrap, "in", "out", "etl-group", "etl-txn",
		fmt.Sprint(n), "10", "200")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Once a tenth of the input is committed, kill -9 the transaction coordinator's node, then
	// bring it back.
	var victim int32 = -1
	for victim < 0 && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		left := remaining(ctx, adm, n)
		if left > n*9/10 {
			continue
		}
		if left < n/2 {
			t.Fatalf("half the input was committed before the kill could be aimed: %d left", left)
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{"etl-txn"}
		if resp, err := req.RequestWith(ctx, cl); err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			victim = resp.Coordinators[0].NodeID
		}
	}
	leftAtKill := remaining(ctx, adm, n)
	t.Logf("kill -9 node %d (the transaction coordinator) with %d input records to go", victim, leftAtKill)
	c.Kill(victim)
	time.Sleep(3 * time.Second)
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx, victim, 60*time.Second); err != nil {
		t.Fatal(err)
	}

	if err := <-done; err != nil {
		t.Fatalf("Java txn-etl: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), tail(stderr.Bytes(), 3000))
	}
	t.Logf("Java: %s", strings.TrimSpace(stdout.String()))
	if t.Failed() || !strings.Contains(stdout.String(), fmt.Sprintf("committed %d ", n)) {
		t.Logf("Java stderr:\n%s", tail(stderr.Bytes(), 3000))
	}

	// Every input exactly once in the committed output.
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	seen := map[string]int{}
	total := 0
	for deadline := time.Now().Add(60 * time.Second); total < n && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		rd.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
		pcancel()
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second) // anything extra would show now
	rd.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	pcancel()
	// Input v<i> is record i/3 of partition i%3. An input below the group's committed offset
	// that is not in the output broke atomicity (offsets committed without their output); one
	// at or past it was only not processed yet.
	groupAt := map[int32]int64{}
	if offs, err := adm.FetchOffsets(ctx, "etl-group"); err == nil {
		offs.Each(func(o kadm.OffsetResponse) { groupAt[o.Partition] = o.At })
	}
	var missing, dup, lost int
	firstMissing := map[int32]int64{}
	for i := range n {
		switch c := seen[fmt.Sprintf("v%d", i)]; {
		case c == 0:
			missing++
			p, off := int32(i%3), int64(i/3)
			if off < groupAt[p] {
				lost++
			}
			if f, ok := firstMissing[p]; !ok || off < f {
				firstMissing[p] = off
			}
		case c > 1:
			dup++
		}
	}
	if missing > 0 {
		t.Logf("missing inputs: first missing offset by partition %v; the group's committed offsets %v", firstMissing, groupAt)
	}
	if lost > 0 {
		t.Errorf("%d inputs below the group's committed offsets are not in the committed output: offsets committed without their output", lost)
	}
	// Safety, always: no input twice (an aborted or zombie write read, or a commit applied
	// twice), and nothing the client saw committed is missing.
	var committed int
	fmt.Sscanf(stdout.String(), "committed %d", &committed)
	if dup > 0 || total < committed {
		t.Fatalf("read_committed output: %d records, %d duplicated; the client committed %d: want each once and none lost", total, dup, committed)
	}
	// Progress after the kill, always.
	if committed <= n-int(leftAtKill) {
		t.Fatalf("nothing committed after the kill: %d committed, %d were done before it", committed, n-int(leftAtKill))
	}
	// Completion: the loop processed every input after the coordinator's node came back.
	if missing > 0 {
		t.Fatalf("%d of %d inputs not processed before the client gave up (it idles out 60 s after its last records)", missing, n)
	}
}
