package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// readTopic reads a topic from the start at an isolation level until it has want values (and
// a little longer, to catch extra ones) or wait passes; it returns them sorted.
func readTopic(t *testing.T, ctx context.Context, addr, topic string, level kgo.IsolationLevel, want int, wait time.Duration) []string {
	t.Helper()
	got := testclients.ReadValues(t, ctx, []string{addr}, topic, level, want, wait)
	slices.Sort(got)
	return got
}

// TestObjectTopicTransactions: franz-go's transactional producer writes to an object topic and
// a local topic in the same transactions, committing some and aborting others: read_committed
// consumers of both read exactly the committed records, read_uncommitted ones read all. While
// a transaction is open, the object partition's last stable offset (ListOffsets
// read_committed, DescribeProducers) stays at its first record and read_committed consumers
// wait; after a restart everything reads the same. A lazily sequenced topic refuses
// transactional batches.
func TestObjectTopicTransactions(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	const objTopic, localTopic = "otx", "ltx"
	createObjectTopic(t, b.addr, objTopic, 3, nil)
	b.createTopic(localTopic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.TransactionalID("otid"), kgo.TransactionTimeout(20*time.Second),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wantObj, wantLocal, allObj []string
	for i := range 9 {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var obj, local []string
		for j := range 6 {
			v := fmt.Sprintf("t%d-%d", i, j)
			obj = append(obj, v)
			if err := p.ProduceSync(ctx, &kgo.Record{Topic: objTopic, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce to the object topic in transaction %d: %v", i, err)
			}
		}
		for j := range 2 {
			v := fmt.Sprintf("l%d-%d", i, j)
			local = append(local, v)
			if err := p.ProduceSync(ctx, &kgo.Record{Topic: localTopic, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce to the local topic in transaction %d: %v", i, err)
			}
		}
		commit := i%3 != 1
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("EndTransaction(%d, commit=%v): %v", i, commit, err)
		}
		allObj = append(allObj, obj...)
		if commit {
			wantObj, wantLocal = append(wantObj, obj...), append(wantLocal, local...)
		}
	}
	slices.Sort(wantObj)
	slices.Sort(wantLocal)
	slices.Sort(allObj)
	check := func(when string) {
		t.Helper()
		if got := readTopic(t, ctx, b.addr, objTopic, kgo.ReadCommitted(), len(wantObj), 15*time.Second); !slices.Equal(got, wantObj) {
			t.Errorf("%s: read_committed on the object topic read %d records %v; want the %d committed %v", when, len(got), got, len(wantObj), wantObj)
		}
		if got := readTopic(t, ctx, b.addr, localTopic, kgo.ReadCommitted(), len(wantLocal), 15*time.Second); !slices.Equal(got, wantLocal) {
			t.Errorf("%s: read_committed on the local topic read %v; want %v", when, got, wantLocal)
		}
		if got := readTopic(t, ctx, b.addr, objTopic, kgo.ReadUncommitted(), len(allObj), 15*time.Second); !slices.Equal(got, allObj) {
			t.Errorf("%s: read_uncommitted on the object topic read %d records; want all %d", when, len(got), len(allObj))
		}
	}
	check("after the transactions")

	// An open transaction holds the last stable offset at its first record.
	adm := kadm.NewClient(p)
	ends, err := adm.ListEndOffsets(ctx, objTopic)
	if err != nil {
		t.Fatal(err)
	}
	end0, _ := ends.Lookup(objTopic, 0)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: objTopic, Partition: 0, Value: []byte("pending")}, &kgo.Record{Topic: objTopic, Value: []byte("pending-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	committedEnds, err := adm.ListCommittedOffsets(ctx, objTopic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := committedEnds.Lookup(objTopic, 0); o.Err != nil || o.Offset != end0.Offset {
		t.Errorf("read_committed end of partition 0 with a transaction open from %d: %d, %v", end0.Offset, o.Offset, o.Err)
	}
	producers, err := adm.DescribeProducers(ctx, kadm.TopicsSet{objTopic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var open []int64
	producers.EachProducer(func(dp kadm.DescribedProducer) {
		if dp.CurrentTxnStartOffset >= 0 {
			open = append(open, dp.CurrentTxnStartOffset)
		}
	})
	if !slices.Equal(open, []int64{end0.Offset}) {
		t.Errorf("DescribeProducers: open transactions from %v; want from %d", open, end0.Offset)
	}
	if got := readTopic(t, ctx, b.addr, objTopic, kgo.ReadCommitted(), len(wantObj)+1, 2*time.Second); len(got) != len(wantObj) {
		t.Errorf("read_committed during an open transaction read %d records; want the %d committed", len(got), len(wantObj))
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	wantObj = append(wantObj, "pending", "pending-2")
	allObj = append(allObj, "pending", "pending-2")
	slices.Sort(wantObj)
	slices.Sort(allObj)
	check("after the last commit")
	p.Close()

	b = b.restart()
	check("after a restart")

	// A lazily sequenced topic: its batches are acknowledged before any check, so no
	// transaction can include them.
	createObjectTopic(t, b.addr, "lazy-tx", 1, map[string]*string{"runnel.sequencing": kadm.StringPtr("lazy")})
	q, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.TransactionalID("lazy-tid"), kgo.DefaultProduceTopic("lazy-tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := q.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("a transactional produce to a lazy topic: %v; want INVALID_TXN_STATE", err)
	}
}

// TestObjectTransactionCoordinatorFailover: a transaction writes to an object topic on a
// three-node cluster; the node coordinating its transactional id stops before the commit. The
// new coordinator knows the id only as ongoing, without its partitions (they were in the old
// one's memory), so the commit discovers them: the object partitions' open transactions are
// read from the controller's image. Every record is then committed, and no transaction is left
// open for the partitions' own check (after 10 s) to abort.
func TestObjectTransactionCoordinatorFailover(t *testing.T) {
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.objectStore = "file://" + t.TempDir()
		c.batchTimeout = 20 * time.Millisecond
	})
	c.waitNodes(3)
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 4, -1, map[string]*string{"runnel.storage": kadm.StringPtr("object")}, "ofo"); err != nil {
		t.Fatal(err)
	}
	c.waitTopicEverywhere(ctx, cl, "ofo")
	p, err := kgo.NewClient(kgo.SeedBrokers(c.brokers()...), kgo.TransactionalID("fo-tid"), kgo.TransactionTimeout(60*time.Second),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.DefaultProduceTopic("ofo"), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 12 {
		v := fmt.Sprintf("fo-%02d", i)
		want = append(want, v)
		if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	coord := adm.FindTxnCoordinators(ctx, "fo-tid")["fo-tid"]
	if coord.Err != nil {
		t.Fatal(coord.Err)
	}
	victim := coord.NodeID
	t.Logf("stopping node %d, the coordinator of fo-tid", victim)
	c.stop(victim)
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the commit after the coordinator's failover: %v", err)
	}
	got := readTopic(t, ctx, c.brokers()[0], "ofo", kgo.ReadCommitted(), len(want), 15*time.Second)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed after the failover: %v; want %v", got, want)
	}
	// Every marker is written: nothing is left open that the check could abort later.
	ends, err := adm.ListEndOffsets(ctx, "ofo")
	if err != nil {
		t.Fatal(err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, "ofo")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if s, _ := stable.Lookup("ofo", o.Partition); s.Offset != o.Offset {
			t.Errorf("partition %d: last stable offset %d, end %d; want no open transaction", o.Partition, s.Offset, o.Offset)
		}
	})
}

// TestTransactionFreshPartitionsOnACluster: on three nodes, a transaction adds every partition
// of a topic created a moment before (each led by another node) and writes to one of them only,
// then commits. The prepares of the partitions it wrote nothing to compare their leader epochs
// with the ones they had when the transaction added them, instead of asking their leaderships
// to predate the transaction by the two-node clock margin, which aborted the commit. A next
// transaction adds them again, and the leader of one it wrote nothing to restarts after its
// machine crashed (its epoch moves): that commit is refused, since the restarted leader could
// have lost records.
func TestTransactionFreshPartitionsOnACluster(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(c.brokers()...), kgo.TransactionalID("fresh-cluster"), kgo.DefaultProduceTopic("fresh3"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pid, epoch, err := p.ProducerID(ctx) // the coordinator is loaded before the topic exists
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "fresh3"); err != nil {
		t.Fatal(err)
	}
	c.waitTopicEverywhere(ctx, cl, "fresh3")
	coord := adm.FindTxnCoordinators(ctx, "fresh-cluster")["fresh-cluster"]
	md, err := adm.Metadata(ctx, "fresh3")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := 0
	for _, pd := range md.Topics["fresh3"].Partitions {
		if pd.Leader != coord.NodeID {
			elsewhere++
		}
	}
	if elsewhere == 0 {
		t.Fatalf("every partition of fresh3 is led by the coordinator's node %d", coord.NodeID)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := testclients.AddPartitionsToTxn(ctx, cl, "fresh-cluster", pid, epoch, "fresh3", 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("committing (%d of 3 partitions led away from the coordinator): %v", elsewhere, err)
	}

	victim, part := int32(-1), int32(-1)
	for _, pd := range md.Topics["fresh3"].Partitions {
		if pd.Partition != 0 && pd.Leader != coord.NodeID && pd.Leader != md.Topics["fresh3"].Partitions[0].Leader {
			victim, part = pd.Leader, pd.Partition
		}
	}
	if victim < 0 {
		t.Skip("no partition led apart from the coordinator and partition 0")
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("w")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The producer id and epoch of the open transaction, as the record "w" just written carries
	// them (what the coordinator holds now, whatever the client's transaction version).
	producers, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"fresh3": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var pid2 int64
	var epoch2 int16
	producers.EachProducer(func(dp kadm.DescribedProducer) {
		if dp.CurrentTxnStartOffset >= 0 {
			pid2, epoch2 = dp.ProducerID, int16(dp.ProducerEpoch)
		}
	})
	if err := testclients.AddPartitionsToTxn(ctx, cl, "fresh-cluster", pid2, epoch2, "fresh3", 1, 2); err != nil {
		t.Fatalf("adding again: %v", err)
	}
	before := md.Topics["fresh3"].Partitions[part].LeaderEpoch
	c.stop(victim)
	c.forgetBoot(victim) // as after its machine's crash: it may have lost writes
	c.start(victim)
	eventually(t, fmt.Sprintf("fresh3[%d] served again by node %d", part, victim), 30*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "fresh3")
		if err != nil || md.Topics["fresh3"].Partitions[part].Leader != victim {
			return false
		}
		ends, err := adm.ListEndOffsets(ctx, "fresh3") // answered by the leader itself
		o, _ := ends.Lookup("fresh3", part)
		return err == nil && o.Err == nil
	})
	md2, _ := adm.Metadata(ctx, "fresh3")
	t.Logf("leader epoch of fresh3[%d]: %d before the restart, %d after", part, before, md2.Topics["fresh3"].Partitions[part].LeaderEpoch)
	if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatalf("a commit after fresh3[%d]'s leader restarted on a new boot (it was added empty): taken", part)
	}
}

// TestHangingTransactionsAreAborted: a transaction is left open on a local and an object
// partition, and its coordinator's state is lost with the transaction state log (the node is
// stopped and that log's partitions are removed from its data dir, as when that disk is
// replaced). No coordinator will ever write its markers, so each partition finds the
// transaction open past the check interval, asks the coordinators, and, since every
// coordinator partition is loaded and none knows the producer, writes the ABORT itself (the
// local partition's leader; for the object partition, the active controller's node). The last
// stable offsets move: read_committed consumers read the records produced after it, and never
// the transaction's own.
func TestHangingTransactionsAreAborted(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, "127.0.0.1:0")
	const objTopic, localTopic = "hang-o", "hang-l"
	createObjectTopic(t, b.addr, objTopic, 1, nil)
	b.createTopic(localTopic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.TransactionalID("hang-tid"), kgo.TransactionTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{objTopic, localTopic} {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("in-txn")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	b.stop()
	p.Close()
	parts, err := filepath.Glob(filepath.Join(dir, "topics", "__transaction_state", "[0-9]*"))
	if err != nil || len(parts) == 0 {
		t.Fatalf("the transaction state log's partitions in %s: %v (%d)", dir, err, len(parts))
	}
	for _, d := range parts {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	b = startBroker(t, dir, b.addr)

	plain, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, topic := range []string{objTopic, localTopic} {
		if err := plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s after the restart: %v", topic, err)
		}
		if got := readTopic(t, ctx, b.addr, topic, kgo.ReadUncommitted(), 2, time.Second); !slices.Equal(got, []string{"after", "in-txn"}) {
			t.Fatalf("%s read_uncommitted: %v; want the open transaction's record and the later one", topic, got)
		}
	}
	// The check runs every 5 s for transactions open longer than 10 s.
	deadline := time.Now().Add(45 * time.Second)
	for _, topic := range []string{objTopic, localTopic} {
		for {
			got := readTopic(t, ctx, b.addr, topic, kgo.ReadCommitted(), 1, 500*time.Millisecond)
			if slices.Equal(got, []string{"after"}) {
				break
			}
			if len(got) != 0 || time.Now().After(deadline) {
				t.Fatalf("%s read_committed: %v; want [after] once the hanging transaction is aborted", topic, got)
			}
			time.Sleep(time.Second)
		}
	}
}
