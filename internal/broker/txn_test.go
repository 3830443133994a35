package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// TestTransactionsFranzGo: franz-go's transactional producer against one broker: committed
// transactions are read by read_committed consumers, aborted ones are not, and a second
// producer with the same transactional id fences the first.
func TestTransactionsFranzGo(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 3, 1, nil, "tx"); err != nil {
		t.Fatal(err)
	}
	producer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tid"), kgo.DefaultProduceTopic("tx"),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.TransactionTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	p := producer()
	defer p.Close()
	var want []string
	for i := range 6 {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var batch []string
		for j := range 5 {
			v := fmt.Sprintf("t%d-%d", i, j)
			batch = append(batch, v)
			if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce in transaction %d: %v", i, err)
			}
		}
		commit := i%3 != 1
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("EndTransaction(%d, commit=%v) = %v", i, commit, err)
		}
		if commit {
			want = append(want, batch...)
		}
	}
	got := consumeAll(t, ctx, addr, "tx", kgo.ReadCommitted(), len(want))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("read_committed got %d records %v; want the %d committed %v", len(got), got, len(want), want)
	}
	if all := consumeAll(t, ctx, addr, "tx", kgo.ReadUncommitted(), 30); len(all) != 30 {
		t.Errorf("read_uncommitted got %d records; want all 30", len(all))
	}

	// A second producer with the same id fences the first.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// kafka-transactions' view: describe and list.
	adm := kadm.NewClient(admCl)
	described, err := adm.DescribeTransactions(ctx, "tid")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := described["tid"]; !ok || d.Err != nil || d.State != "Ongoing" || len(d.Topics["tx"]) != 1 || d.TimeoutMillis != 10000 {
		t.Errorf("DescribeTransactions(tid) = %+v; want Ongoing on one partition of tx, timeout 10s", d)
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["tid"]; !ok || len(listed) != 1 {
		t.Errorf("ListTransactions(Ongoing) = %v; want tid", listed)
	}
	q := producer()
	defer q.Close()
	if err := q.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := q.ProduceSync(ctx, &kgo.Record{Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatalf("the new producer's produce: %v", err)
	}
	if err := q.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the new producer's commit: %v", err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Errorf("the fenced producer's commit succeeded")
	}
	got = consumeAll(t, ctx, addr, "tx", kgo.ReadCommitted(), len(want)+1)
	if slices.Contains(got, "zombie") || !slices.Contains(got, "new") {
		t.Errorf("after fencing, read_committed = %v; want \"new\" and no \"zombie\"", got)
	}
}

// consumeAll reads a topic from the start at an isolation level until it has want records and a
// little longer (to catch extra ones), or times out.
func consumeAll(t *testing.T, ctx context.Context, addr, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	return testclients.ReadValues(t, ctx, []string{addr}, topic, level, want, 10*time.Second)
}

// TestTransactionsConsumeTransformProduce: franz-go's GroupTransactSession reads a topic in a
// group and writes each record, transformed, to another topic, committing the group's offsets
// in the same transactions, aborting every third one. In the end the output holds every input
// exactly once (read_committed) and the group's committed offsets are the input's ends.
func TestTransactionsConsumeTransformProduce(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for _, topic := range []string{"in", "out"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	const n = 200
	for i := range n {
		if err := admCl.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("etl"), kgo.ConsumerGroup("etl-group"),
		kgo.ConsumeTopics("in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("out"), kgo.TransactionTimeout(10*time.Second), kgo.RequireStableFetchOffsets())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	round := 0
	for {
		ends, err := adm.ListEndOffsets(ctx, "in")
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.FetchOffsets(ctx, "etl-group")
		if err != nil {
			t.Fatal(err)
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := committed.Lookup("in", o.Partition); o.Offset > 0 && (!ok || c.At != o.Offset) {
				done = false
			}
		})
		if done {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the group did not reach the input's end")
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollRecords(pctx, 15)
		pcancel()
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: []byte("x" + string(r.Value))}, func(_ *kgo.Record, err error) {
				if err != nil && !errors.Is(err, kgo.ErrAborting) {
					t.Errorf("produce: %v", err)
				}
			})
		})
		round++
		commit := round%3 != 0
		if _, err := sess.End(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("End(commit=%v) = %v", commit, err)
		}
	}
	got := consumeAll(t, ctx, addr, "out", kgo.ReadCommitted(), n)
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for i := range n {
		if c := seen["x"+fmt.Sprint(i)]; c != 1 {
			t.Errorf("input %d is in the output %d times; want once", i, c)
		}
	}
	if len(got) != n {
		t.Errorf("output holds %d committed records; want %d", len(got), n)
	}
	t.Logf("%d transactions, every third aborted", round)
}

// TestTransactionConfigsAreDynamic: transaction.max.timeout.ms is a dynamic broker config, as in
// Kafka: lowered at run time, a producer asking for a longer timeout is refused.
func TestTransactionConfigsAreDynamic(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	initTimeout := func(ms int32) error {
		req := kmsg.NewPtrInitProducerIDRequest()
		id := "dyn"
		req.TransactionalID, req.TransactionTimeoutMillis = &id, ms
		req.ProducerID, req.ProducerEpoch = -1, -1
		for {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			err = kerr.ErrorForCode(resp.ErrorCode)
			if !errors.Is(err, kerr.CoordinatorLoadInProgress) && !errors.Is(err, kerr.CoordinatorNotAvailable) && !errors.Is(err, kerr.NotCoordinator) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := initTimeout(60_000); err != nil {
		t.Fatalf("InitProducerId with a 60 s timeout under the default maximum = %v", err)
	}
	v := "30000"
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "transaction.max.timeout.ms", Value: &v}})
	if err == nil {
		err = resps[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := initTimeout(60_000)
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("InitProducerId with a 60 s timeout after the maximum became 30 s = %v; want INVALID_TRANSACTION_TIMEOUT", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := initTimeout(20_000); err != nil {
		t.Errorf("InitProducerId with a 20 s timeout = %v", err)
	}
	bad := "0"
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "transactional.id.expiration.ms", Value: &bad}}); err == nil && resps[0].Err == nil {
		t.Errorf("transactional.id.expiration.ms=0 accepted; want a validation error")
	}
}

// TestTransactionAddsAnEmptyFreshPartition: a transaction adds a partition of a topic created a
// moment before and writes nothing there (kafka-python adds partitions as records are assigned
// to them), then commits: the partition's prepare vouches for it on the coordinator's own node
// (the same clock) instead of asking its leadership to predate the transaction by the
// two-node clock margin, which refused the commit.
func TestTransactionAddsAnEmptyFreshPartition(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("fresh-tid"), kgo.DefaultProduceTopic("fresh"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pid, epoch, err := p.ProducerID(ctx) // the coordinator is loaded before the topic exists
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 2, 1, nil, "fresh"); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := testclients.AddPartitionsToTxn(ctx, admCl, "fresh-tid", pid, epoch, "fresh", 1); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("committing a transaction with an empty partition of a fresh topic: %v", err)
	}
}

// TestTransactionalProduceNeedsAcksAll: a transactional batch with acks=1 is refused with
// INVALID_REQUIRED_ACKS: a transaction's commit vouches for its records on the ground that a
// quorum held each one acknowledged (docs/transactions.md §3.3).
func TestTransactionalProduceNeedsAcksAll(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// franz-go rewrites a raw Produce request's acks to the client's.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "acks1"); err != nil {
		t.Fatal(err)
	}
	id := "acks1-tid"
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "acks1"
	rp := kmsg.NewProduceRequestTopicPartition()
	rec := kmsg.Record{Value: []byte("v")}
	raw := (&kmsg.RecordBatch{Magic: 2, Attributes: 0x10, ProducerID: 1, NumRecords: 1, Records: rec.AppendTo(nil)}).AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("a transactional produce with acks=1: error %d (%s, v%d); want INVALID_REQUIRED_ACKS", code, *resp.Topics[0].Partitions[0].ErrorMessage, req.Version)
	}
}
