package server_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/server"
)

// TestTopicDefaults: Kafka's num.partitions, default.replication.factor and
// auto.create.topics.enable (runnel serve --num-partitions, --default-replication-factor,
// --auto-create-topics). A topic created without a partition count gets num.partitions, one
// without a replication factor gets default.replication.factor (refused when the one node
// cannot hold 2 replicas, as Kafka refuses it) while the internal offsets topic still gets its
// own; DescribeConfigs shows both. With auto-creation off, a client asking for an unknown topic
// is told it does not exist and nothing is created; with deletion off (delete.topic.enable)
// DeleteTopics answers TOPIC_DELETION_DISABLED and deletes nothing.
func TestTopicDefaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) {
		c.NumPartitions, c.DefaultReplicationFactor = 3, 2
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, -1, 1, nil, "three"); err != nil || r.Err != nil || r.NumPartitions != 3 {
		t.Fatalf("a topic without a partition count: %+v %v; want 3 partitions", r, err)
	}
	if r, err := adm.CreateTopic(ctx, 1, -1, nil, "rf2"); err == nil && !errors.Is(r.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("a topic without a replication factor on one node with default.replication.factor=2: %v; want INVALID_REPLICATION_FACTOR", r.Err)
	}
	if err := adm.CommitAllOffsets(ctx, "g", kadm.Offsets{"three": {0: {Topic: "three", Partition: 0, At: 1, LeaderEpoch: -1}}}); err != nil {
		t.Fatalf("committing offsets (the offsets topic keeps its own replication factor): %v", err)
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := adm.DescribeBrokerConfigs(ctx, md.Brokers[0].NodeID)
	if err != nil || len(rc) != 1 {
		t.Fatalf("describing the node's configs: %v %v", rc, err)
	}
	found := map[string]string{}
	for _, c := range rc[0].Configs {
		if c.Key == "num.partitions" || c.Key == "default.replication.factor" {
			found[c.Key] = c.MaybeValue()
		}
	}
	if found["num.partitions"] != "3" || found["default.replication.factor"] != "2" {
		t.Fatalf("described broker configs %v; want num.partitions 3, default.replication.factor 2", found)
	}

	off := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) { c.NoAutoCreateTopics, c.NoTopicDeletion = true, true })
	ocl, err := kgo.NewClient(kgo.SeedBrokers(off.addr), kgo.AllowAutoTopicCreation(), kgo.RecordDeliveryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer ocl.Close()
	if err := ocl.ProduceSync(ctx, &kgo.Record{Topic: "nope", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("producing to an unknown topic with auto-creation off: %v; want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	oadm := kadm.NewClient(ocl)
	if td, err := oadm.ListTopics(ctx); err != nil || td.Has("nope") {
		t.Fatalf("topics after asking for an unknown one with auto-creation off: %v %v; want no nope", td.Names(), err)
	}
	// With deletion off, DeleteTopics is refused per topic and deletes nothing.
	if r, err := oadm.CreateTopic(ctx, 1, 1, nil, "kept"); err != nil || r.Err != nil {
		t.Fatalf("creating a topic: %v %v", err, r.Err)
	}
	if r, err := oadm.DeleteTopics(ctx, "kept"); err != nil || !errors.Is(r["kept"].Err, kerr.TopicDeletionDisabled) {
		t.Fatalf("deleting with delete.topic.enable=false: %v %v; want TOPIC_DELETION_DISABLED", err, r["kept"].Err)
	}
	if td, err := oadm.ListTopics(ctx, "kept"); err != nil || !td.Has("kept") {
		t.Fatalf("the topic after a refused deletion: %v %v; want it kept", td.Names(), err)
	}
}

// TestInternalTopicReplicationFactor: offsets.topic.replication.factor and
// transaction.state.log.replication.factor (runnel serve --offsets-topic-replication-factor,
// --transaction-state-log-replication-factor) set the internal topics' replication factor: 2
// on three nodes (where the automatic choice is 3), and 3 on one node, where FindCoordinator
// answers COORDINATOR_NOT_AVAILABLE (the topic cannot be created yet), as Kafka's does.
func TestInternalTopicReplicationFactor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.tune = func(_ int32, cfg *server.Config) { cfg.OffsetsReplicationFactor, cfg.TxnStateReplicationFactor = 2, 2 }
	})
	c.waitNodes(3)
	cl, adm := c.client()
	for typ, key := range map[int8]string{0: "g", 1: "rf-txn"} { // creates the two topics
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorType, fc.CoordinatorKey = typ, key
		eventually(t, fmt.Sprint("a coordinator of type ", typ), 30*time.Second, func() bool {
			resp, err := fc.RequestWith(ctx, cl)
			return err == nil && resp.ErrorCode == 0
		})
	}
	eventually(t, "both internal topics", 30*time.Second, func() bool {
		td, err := adm.ListTopicsWithInternal(ctx, "__consumer_offsets", "__transaction_state")
		if err != nil || len(td) != 2 {
			return false
		}
		for _, d := range td {
			if d.Err != nil || len(d.Partitions) == 0 {
				return false
			}
			for _, p := range d.Partitions {
				if len(p.Replicas) != 2 {
					t.Fatalf("%s[%d] has replicas %v; want 2 (the internal topics' replication factor)", d.Topic, p.Partition, p.Replicas)
				}
			}
		}
		return true
	})

	one := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) { c.OffsetsReplicationFactor = 3 })
	ocl, err := kgo.NewClient(kgo.SeedBrokers(one.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer ocl.Close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = "g"
	resp, err := req.RequestWith(ctx, ocl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("FindCoordinator on one node with offsets.topic.replication.factor=3: %v; want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(resp.ErrorCode))
	}
	oadm := kadm.NewClient(ocl)
	md, err := oadm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := oadm.DescribeBrokerConfigs(ctx, md.Brokers[0].NodeID)
	if err != nil || len(rc) != 1 {
		t.Fatalf("describing the node's configs: %v %v", rc, err)
	}
	described := ""
	for _, cfg := range rc[0].Configs {
		if cfg.Key == "offsets.topic.replication.factor" {
			described = cfg.MaybeValue()
		}
	}
	if described != "3" {
		t.Fatalf("offsets.topic.replication.factor described as %q; want 3", described)
	}
}

// TestInternalTopicPartitions: offsets.topic.num.partitions and
// transaction.state.log.num.partitions (runnel serve --offsets-topic-num-partitions,
// --transaction-state-log-num-partitions) set the internal topics' partition counts at
// creation; after a restart told other counts, groups and transactional ids are still mapped
// over the topics' own counts (a group's committed offsets and a transactional id's epoch are
// found where they are), and CreatePartitions on either topic is refused.
func TestInternalTopicPartitions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	b := startBrokerConfig(t, dir, "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) { c.OffsetsPartitions, c.TxnStatePartitions = 3, 2 })
	b.createTopic("ip", 1)
	commitAndTransact := func(addr string) (at int64, epoch int16) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("ip-txn"), kgo.DefaultProduceTopic("ip"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		offs, err := adm.FetchOffsets(ctx, "ip-group")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup("ip", 0)
		if _, err := adm.CommitOffsets(ctx, "ip-group", kadm.Offsets{"ip": {0: {At: o.At + 7}}}); err != nil {
			t.Fatal(err)
		}
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		_, epoch, err = cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return o.At + 7, epoch
	}
	at, epoch := commitAndTransact(b.addr)
	counts := func(addr string) map[string]int {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		td, err := kadm.NewClient(cl).ListTopicsWithInternal(ctx, "__consumer_offsets", "__transaction_state")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, d := range td {
			out[d.Topic] = len(d.Partitions)
		}
		return out
	}
	if got := counts(b.addr); got["__consumer_offsets"] != 3 || got["__transaction_state"] != 2 {
		t.Fatalf("internal topics' partitions %v; want 3 and 2", got)
	}
	b.stop()

	b = startBrokerConfig(t, dir, b.addr, broker.Hooks{}, func(c *server.Config) { c.OffsetsPartitions, c.TxnStatePartitions = 50, 50 })
	at2, epoch2 := commitAndTransact(b.addr)
	if at2 != at+7 {
		t.Errorf("after a restart with 50 partitions configured, the group's offset was %d; want the committed %d (found at its partition of 3)", at2-7, at)
	}
	if epoch2 <= epoch {
		t.Errorf("after the restart the transactional id got epoch %d after %d: its state was not found", epoch2, epoch)
	}
	if got := counts(b.addr); got["__consumer_offsets"] != 3 || got["__transaction_state"] != 2 {
		t.Fatalf("internal topics' partitions after the restart %v; want still 3 and 2", got)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []string{"__consumer_offsets", "__transaction_state"} {
		resp, err := kadm.NewClient(cl).CreatePartitions(ctx, 5, topic)
		if err == nil {
			err = resp[topic].Err
		}
		if !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("CreatePartitions on %s: %v; want INVALID_REQUEST", topic, err)
		}
	}
}
