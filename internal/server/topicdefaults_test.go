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
