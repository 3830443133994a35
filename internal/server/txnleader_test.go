package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// startTxnCluster starts three nodes, a topic of three partitions replicated three times and a
// franz-go transactional producer of id txnID writing to it (its producer id initialized); it
// returns the cluster, the producer, the node coordinating txnID and the topic's metadata.
func startTxnCluster(t *testing.T, ctx context.Context, topic, txnID string) (*testCluster, *kgo.Client, int32, kadm.Metadata) {
	t.Helper()
	c := startCluster(t, 3)
	c.waitNodes(3)
	cl, adm := c.client()
	if r, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	c.waitTopicEverywhere(ctx, cl, topic)
	p, err := kgo.NewClient(kgo.SeedBrokers(c.brokers()...), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, _, err := p.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	coord := adm.FindTxnCoordinators(ctx, txnID)[txnID]
	if coord.Err != nil {
		t.Fatal(coord.Err)
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return c, p, coord.NodeID, md
}

// TestTransactionAcrossALeaderChange: on three nodes, a transaction writes to a partition
// replicated three times whose leader then stops (its coordinator is elsewhere and stays). The
// new leader was elected from replicas none of which restarted since the transaction added the
// partition, so its log holds whatever a quorum acknowledged: the commit goes through, and
// read_committed consumers see the records (before, any leader change since the transaction's
// first record there aborted it, and Kafka Streams' stream threads died of the answer). A
// next transaction whose partition's leader restarts, on the same machine boot, commits too:
// the restarted process holds every write of the one before (the boot mark). A third one whose
// leader restarts after its machine crashed (here: its boot mark removed, as after a new boot;
// it may have lost unsynced records) is aborted; the producer (franz-go) is told so, aborts and
// goes on with the same client.
func TestTransactionAcrossALeaderChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, p, coord, md := startTxnCluster(t, ctx, "moving", "across")
	part, victim := int32(-1), int32(-1)
	for _, pd := range md.Topics["moving"].Partitions {
		if pd.Leader != coord {
			part, victim = pd.Partition, pd.Leader
		}
	}
	if part < 0 {
		t.Skipf("every partition of moving is led by the coordinator's node %d", coord)
	}
	newLeader := func(old int32) int32 {
		var now int32
		eventually(t, fmt.Sprintf("moving[%d] led by another node than %d", part, old), 30*time.Second, func() bool {
			now = leaderOf(t, c.brokers(), "moving", part)
			return now >= 0 && now != old
		})
		return now
	}
	_, adm := c.client()
	epochOf := func() (leader, epoch int32) {
		md, err := adm.Metadata(ctx, "moving")
		if err != nil {
			return -1, -1
		}
		pd := md.Topics["moving"].Partitions[part]
		return pd.Leader, pd.LeaderEpoch
	}
	// restarted stops and starts node id (forgetting its boot if crash), and waits until
	// moving[part] has a leader again in a later epoch (the restarted node's registration
	// drops what it led).
	restart := func(id int32, crash bool) {
		_, before := epochOf()
		lossBefore := c.servers[coord].Node().Image().Nodes[id].LossIndex
		c.stop(id)
		if crash {
			c.forgetBoot(id)
		}
		c.start(id)
		eventually(t, fmt.Sprintf("moving[%d] led again after node %d restarted", part, id), 30*time.Second, func() bool {
			leader, epoch := epochOf()
			return leader >= 0 && epoch > before
		})
		if crash {
			// The leadership may have moved at the stop already: the commit must wait for
			// the registration that says writes may be lost, on every node, or it may be
			// decided before it (and rightly commit: the record is on a quorum).
			eventually(t, fmt.Sprintf("node %d registered with a new loss index everywhere", id), 30*time.Second, func() bool {
				for _, s := range c.servers {
					if n := s.Node().Image().Nodes[id]; n == nil || n.LossIndex == lossBefore {
						return false
					}
				}
				return true
			})
		}
	}

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("across-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.stop(victim)
	next := newLeader(victim)
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("committing after moving[%d]'s leader %d stopped (node %d leads it now): %v", part, victim, next, err)
	}
	got := testclients.ReadValues(t, ctx, c.brokers(), "moving", kgo.ReadCommitted(), 1, 10*time.Second)
	if len(got) != 1 || got[0] != "across-1" {
		t.Fatalf("read_committed after the commit: %q; want [across-1]", got)
	}

	// The stopped node comes back: a new registration of a replica, before the next
	// transaction begins.
	c.start(victim)
	c.waitNodes(3)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("across-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The leader restarts (stops, and is back before the commit): its replica is a new
	// registration, and the partition a new leader epoch; it kept its writes.
	restart(next, false)
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("committing after moving[%d]'s leader %d restarted on the same boot: %v", part, next, err)
	}

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("across-3")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The leader's machine crashes and comes back: a registration that may have lost writes.
	next, _ = epochOf()
	restart(next, true)
	err := p.EndTransaction(ctx, kgo.TryCommit)
	// franz-go runs transaction version 2 once it has seen the cluster's finalized features, 1
	// before: TRANSACTION_ABORTABLE, or INVALID_PRODUCER_EPOCH (KIP-588).
	if !errors.Is(err, kerr.TransactionAbortable) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("a commit after moving[%d]'s leader %d restarted: %v; want TRANSACTION_ABORTABLE or INVALID_PRODUCER_EPOCH", part, next, err)
	}
	// The producer aborts and goes on (it re-initializes with the aborted transaction's epoch):
	// its next transaction commits, and the aborted one's record is never read.
	if err := p.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("aborting after TRANSACTION_ABORTABLE: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("across-4")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the transaction after the aborted one: %v", err)
	}
	got = testclients.ReadValues(t, ctx, c.brokers(), "moving", kgo.ReadCommitted(), 3, 10*time.Second)
	if !slices.Equal(got, []string{"across-1", "across-2", "across-4"}) {
		t.Fatalf("read_committed at the end: %q; want [across-1 across-2 across-4]", got)
	}
}

// TestTransactionAcrossACoordinatorLoss: the node that coordinates a transaction and leads the
// partition it wrote to stops. The coordinator that takes over has no note of where the
// transaction added the partition; the partition's new leader vouches for it still, since no
// replica registered anew after the leader epoch the transaction began in (the image records
// when each epoch began), and the commit goes through.
func TestTransactionAcrossACoordinatorLoss(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, p, coord, md := startTxnCluster(t, ctx, "lost", "lost-coord")
	part := int32(-1)
	for _, pd := range md.Topics["lost"].Partitions {
		if pd.Leader == coord {
			part = pd.Partition
		}
	}
	if part < 0 {
		t.Skipf("no partition of lost is led by the coordinator's node %d", coord)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("lost-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.stop(coord)
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("committing after node %d (coordinator, leader of lost[%d]) stopped: %v", coord, part, err)
	}
	got := testclients.ReadValues(t, ctx, c.brokers(), "lost", kgo.ReadCommitted(), 1, 10*time.Second)
	if len(got) != 1 || got[0] != "lost-1" {
		t.Fatalf("read_committed after the commit: %q; want [lost-1]", got)
	}
}

// TestLostTransactionsCommitThroughARestart: the node coordinating several open transactions
// stops and comes back. Their coordinator moves away and, once the node is back, back to it
// with the leaderships it is the preferred replica of (the controller's balancing moves them in
// one round). The transactions' partition sets were in the first coordinator's memory only, so
// each commit first discovers them (docs/transactions.md §3.4), while the partitions' leaders
// move. Every commit must go through: before, a discovery that met a partition between leaders,
// or a node not yet leading what the image said it led, turned the commit into an abort (and a
// Kafka Connect task fails for good on that: TestKafkaConnectOnACluster).
func TestLostTransactionsCommitThroughARestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, first, coord, _ := startTxnCluster(t, ctx, "lostrestart", "lostrestart-0")
	_, adm := c.client()
	// Transactional ids coordinated by the same node as the first.
	ids := []string{"lostrestart-0"}
	for i := 1; len(ids) < 8 && i < 400; i++ {
		id := fmt.Sprintf("lostrestart-%d", i)
		if r := adm.FindTxnCoordinators(ctx, id)[id]; r.Err == nil && r.NodeID == coord {
			ids = append(ids, id)
		}
	}
	producers := []*kgo.Client{first}
	for _, id := range ids[1:] {
		p, err := kgo.NewClient(kgo.SeedBrokers(c.brokers()...), kgo.TransactionalID(id), kgo.DefaultProduceTopic("lostrestart"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		producers = append(producers, p)
	}
	var want []string
	for i, p := range producers {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for part := int32(0); part < 3; part++ {
			v := fmt.Sprintf("%s/%d", ids[i], part)
			if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("%s: %v", ids[i], err)
			}
			want = append(want, v)
		}
	}
	c.stop(coord)
	eventually(t, "the transactions' coordinator moved away from the stopped node", 30*time.Second, func() bool {
		r := adm.FindTxnCoordinators(ctx, ids[0])[ids[0]]
		return r.Err == nil && r.NodeID != coord
	})
	c.start(coord)
	c.waitNodes(3)
	// One commit every 750 ms over the next six seconds, through the balancing round that
	// brings the coordinator and the leaderships back to the restarted node.
	for i, p := range producers {
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Errorf("commit of %s, %d ms after node %d came back: %v", ids[i], i*750, coord, err)
		}
		time.Sleep(750 * time.Millisecond)
	}
	got := testclients.ReadValues(t, ctx, c.brokers(), "lostrestart", kgo.ReadCommitted(), len(want), 10*time.Second)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("read_committed: %d records %q; want %d %q", len(got), got, len(want), want)
	}
	if r := adm.FindTxnCoordinators(ctx, ids[0])[ids[0]]; r.Err != nil || r.NodeID != coord {
		t.Logf("the coordinator is node %d (err %v), not yet back on node %d", r.NodeID, r.Err, coord)
	}
}
