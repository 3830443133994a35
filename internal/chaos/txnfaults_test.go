package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transaction fault scenarios of issue 16 against a node running as its own process, with
// transactional producers that are processes too (this test binary, re-executed as
// TestTxnProducerProcess), so that they can be stopped with SIGSTOP and killed with kill -9.

// TestTxnProducerProcess is the producer process of the scenarios, not a test: with
// RUNNEL_TXN_PRODUCER="bootstrap,topic,transactional id,timeout ms,records" it begins a
// transaction, produces the records ("<id>-<i>"), prints READY, and waits for a line on stdin:
// "commit" produces one more record ("<id>-late") and commits, printing the outcome.
func TestTxnProducerProcess(t *testing.T) {
	spec := os.Getenv("RUNNEL_TXN_PRODUCER")
	if spec == "" {
		t.Skip("the producer process of the transaction scenarios")
	}
	f := strings.Split(spec, ",")
	timeout, _ := strconv.Atoi(f[3])
	n, _ := strconv.Atoi(f[4])
	cl, err := kgo.NewClient(kgo.SeedBrokers(f[0]), kgo.TransactionalID(f[2]),
		kgo.TransactionTimeout(time.Duration(timeout)*time.Millisecond), kgo.DefaultProduceTopic(f[1]),
		kgo.RecordRetries(3), kgo.RequestRetries(3))
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		fmt.Println("ERROR", err)
		return
	}
	for i := range n {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", f[2], i))).FirstErr(); err != nil {
			fmt.Println("ERROR", err)
			return
		}
	}
	fmt.Println("READY")
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) != "commit" {
		return
	}
	pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
	perr := cl.ProduceSync(pctx, kgo.StringRecord(f[2]+"-late")).FirstErr()
	pcancel()
	cerr := cl.EndTransaction(ctx, kgo.TryCommit)
	fmt.Printf("PRODUCE %v COMMIT %v\n", perr, cerr)
}

// producerProcess starts TestTxnProducerProcess and waits for its READY.
type producerProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startProducer(t *testing.T, bootstrap, topic, txnID string, timeoutMs, n int) *producerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTxnProducerProcess$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("RUNNEL_TXN_PRODUCER=%s,%s,%s,%d,%d", bootstrap, topic, txnID, timeoutMs, n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &producerProcess{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line := p.line(t); line != "READY" {
		t.Fatalf("producer process %s: %q; want READY", txnID, line)
	}
	return p
}

// line reads the process's next line of output (skipping the test framework's).
func (p *producerProcess) line(t *testing.T) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		for {
			s, err := p.out.ReadString('\n')
			s = strings.TrimSpace(s)
			if err != nil || s == "READY" || strings.HasPrefix(s, "PRODUCE") || strings.HasPrefix(s, "ERROR") {
				got <- s
				return
			}
		}
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(60 * time.Second):
		t.Fatal("the producer process said nothing for 60 s")
	}
	return ""
}

// committedValues reads topic's partition 0 from the start with read_committed, until a poll
// of a second brings nothing more.
func committedValues(t *testing.T, ctx context.Context, bootstrap []string, topic string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		n := 0
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)); n++ })
		cancel()
		if n == 0 {
			break
		}
	}
	return out
}

// stableOffset is partition 0's last stable offset (ListOffsets, read_committed, latest).
func stableOffset(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) int64 {
	return latestOffset(t, ctx, cl, topic, 1)
}

// endOffset is partition 0's high watermark (ListOffsets, read_uncommitted, latest).
func endOffset(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) int64 {
	return latestOffset(t, ctx, cl, topic, 0)
}

func latestOffset(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("ListOffsets %s: %v", topic, err)
	}
	return p.Offset
}

// TestTransactionFaults: the zombie producer (SIGSTOP), the producer killed mid-transaction,
// the late EndTxn of transaction version 2, and the broker killed between a commit's prepare
// and its markers.
func TestTransactionFaults(t *testing.T) {
	bin := runnelBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, bin, filepath.Join(t.TempDir(), "cluster"), 1, "--log-level", "warn")
	if err != nil {
		t.Fatal(err)
	}
	defer c.StopAll()
	defer func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(c.dir, "node-1.log")); err == nil {
				t.Logf("node-1.log:\n%s", tail(b, 3000))
			}
		}
	}()
	brokers := c.Brokers()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"zombie", "killed", "late", "crash", "killed-object", "crash-object"} {
		var configs map[string]*string
		if strings.HasSuffix(topic, "-object") { // the node's embedded object store
			configs = map[string]*string{"runnel.storage": kadm.StringPtr("object")}
		}
		if _, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil {
			t.Fatal(err)
		}
	}
	txnClient := func(id, topic string, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		p, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	commitValues := func(p *kgo.Client, values ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("zombie", func(t *testing.T) {
		// Producer A is stopped mid-transaction; B starts with the same transactional id, which
		// fences A, and commits; A resumes and tries to write and commit: none of A's records
		// is ever committed.
		a := startProducer(t, brokers[0], "zombie", "zombie", 60_000, 5)
		a.cmd.Process.Signal(syscall.SIGSTOP)
		commitValues(txnClient("zombie", "zombie"), "B-0", "B-1", "B-2")
		a.cmd.Process.Signal(syscall.SIGCONT)
		fmt.Fprintln(a.stdin, "commit")
		res := a.line(t)
		t.Logf("the zombie after SIGCONT: %s", res)
		if !strings.HasPrefix(res, "PRODUCE") || strings.HasSuffix(res, "COMMIT <nil>") {
			t.Errorf("the zombie: %q; want its commit refused", res)
		}
		if got := committedValues(t, ctx, brokers, "zombie"); strings.Join(got, " ") != "B-0 B-1 B-2" {
			t.Errorf("committed records %v; want B's only", got)
		}
	})

	killedProducer := func(t *testing.T, topic string) {
		// A producer killed with kill -9 mid-transaction holds the last stable offset back until
		// its transaction times out (3 s); then the coordinator aborts it and the LSO moves.
		p := startProducer(t, brokers[0], topic, topic, 3000, 5)
		p.cmd.Process.Kill()
		p.cmd.Wait()
		// Its records (offsets 0-4) are acknowledged but not yet durable on their own: the high
		// watermark covers them at the transaction's end (docs/transactions.md §3.2).
		if lso := stableOffset(t, ctx, cl, topic); lso != 0 {
			t.Fatalf("right after the kill: LSO %d; want 0 (the transaction is open)", lso)
		}
		start := time.Now()
		for stableOffset(t, ctx, cl, topic) < 6 {
			if time.Since(start) > 30*time.Second {
				t.Fatal("the LSO did not move past the transaction within 30 s of the kill")
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("LSO moved %v after the kill (transaction timeout 3 s)", time.Since(start).Round(10*time.Millisecond))
		if lso, end := stableOffset(t, ctx, cl, topic), endOffset(t, ctx, cl, topic); lso != end || end != 6 {
			t.Errorf("after the abort: LSO %d, end %d; want both 6 (five records and the ABORT marker)", lso, end)
		}
		commitValues(txnClient(topic, topic), "after")
		if got := committedValues(t, ctx, brokers, topic); strings.Join(got, " ") != "after" {
			t.Errorf("committed records %v; want only the next producer's", got)
		}
	}
	t.Run("killed-producer", func(t *testing.T) { killedProducer(t, "killed") })
	t.Run("killed-producer-object", func(t *testing.T) { killedProducer(t, "killed-object") })

	t.Run("late-endtxn", func(t *testing.T) {
		// Under transaction version 2 each EndTxn bumps the epoch: an EndTxn of the first
		// transaction's epoch arriving while the second is open is fenced and commits nothing.
		p := txnClient("late", "late")
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, kgo.StringRecord("t1")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pid, e1, err := p.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, kgo.StringRecord("t2")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if _, e2, _ := p.ProducerID(ctx); e2 <= e1 {
			t.Fatalf("epoch %d after the commit of epoch %d: transaction version 2 not in use", e2, e1)
		}
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 5
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "late", pid, e1, true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.ProducerFenced) {
			t.Errorf("late EndTxn of epoch %d = %v; want PRODUCER_FENCED", e1, err)
		}
		if got := committedValues(t, ctx, brokers, "late"); strings.Join(got, " ") != "t1" {
			t.Errorf("committed records after the late EndTxn %v; want t1 only (t2 still open)", got)
		}
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		if got := committedValues(t, ctx, brokers, "late"); strings.Join(got, " ") != "t1 t2" {
			t.Errorf("committed records %v; want t1 t2", got)
		}
	})

	crashBeforeMarkers := func(t *testing.T, topic string) {
		// The node dies (SIGKILL) once a commit's PrepareCommit is durable and before any marker
		// is written; after the restart the coordinator finishes the commit.
		if err := c.Fault(1, map[string]any{"crash_before_markers": true}); err != nil {
			t.Fatal(err)
		}
		p := txnClient(topic, topic, kgo.RequestRetries(2))
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"c0", "c1", "c2"} {
			if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		ectx, ecancel := context.WithTimeout(ctx, 5*time.Second)
		err := p.EndTransaction(ectx, kgo.TryCommit)
		ecancel()
		if !c.WaitExit(1, 10*time.Second) {
			t.Fatalf("the node did not crash at the marker round (EndTxn: %v)", err)
		}
		t.Logf("EndTxn as the node crashed: %v", err)
		if err := c.Start(1); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, 1, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			lso, end := stableOffset(t, ctx, cl, topic), endOffset(t, ctx, cl, topic)
			if lso == end && end > 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the restart: LSO %d, end %d; want the commit's marker written", lso, end)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got := committedValues(t, ctx, brokers, topic); strings.Join(got, " ") != "c0 c1 c2" {
			t.Errorf("committed records after the restart %v; want c0 c1 c2 (the prepared commit completed)", got)
		}
	}
	t.Run("crash-between-prepare-and-markers", func(t *testing.T) { crashBeforeMarkers(t, "crash") })
	t.Run("crash-between-prepare-and-markers-object", func(t *testing.T) { crashBeforeMarkers(t, "crash-object") })
}
