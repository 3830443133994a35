package server_test

// Differences from a 3-node Apache Kafka 4.1.1 cluster found by a differential test of cluster
// behaviour (the same raw requests to both clusters), each named with the Kafka source that
// decides the answer.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopicWith creates topic through cl with explicit assignments (or, with none, count
// partitions of rf replicas) and configs, and returns the topic's result.
func createTopicWith(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, count int32, rf int16,
	assign [][]int32, configs map[string]string) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = count
	rt.ReplicationFactor = rf
	for i, rs := range assign {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition = int32(i)
		a.Replicas = rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	return resp.Topics[0]
}

// TestCreateTopicsPlacesOnAStoppedNode: with one node of three stopped (fenced, still
// registered), Kafka creates a topic of replication factor 3 and adds partitions to one:
// KRaft's StripedReplicaPlacer (metadata/.../placement/StripedReplicaPlacer.java) places
// replicas on the usable brokers, fenced ones included ("We only start using the fenced node
// list when the unfenced node list is totally exhausted"; only the leader must be unfenced),
// and ClusterControlManager.usableBrokers leaves out only brokers in controlled shutdown.
// Kafka 4.1.1 answered both requests with NONE (replicas [x y 3], ISR without 3, offline 3);
// Runnel answered INVALID_REPLICATION_FACTOR to both, so `kafka-topics --create
// --replication-factor 3` failed during any node's restart on a three-node cluster.
func TestCreateTopicsPlacesOnAStoppedNode(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := c.client()
	if r := createTopicWith(ctx, t, cl, "before", 1, 3, nil, nil); r.ErrorCode != 0 {
		t.Fatalf("create with three nodes: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.waitTopicEverywhere(ctx, cl, "before")

	c.stop(3)
	c.waitNodes(2) // node 3 is fenced: Metadata lists the two others

	r := createTopicWith(ctx, t, cl, "rf3", 3, 3, nil, nil)
	if r.ErrorCode != 0 {
		t.Errorf("CreateTopics replication factor 3 with node 3 stopped: %v; Kafka places the third replica on the fenced node (NONE)",
			kerr.ErrorForCode(r.ErrorCode))
	} else {
		md, err := adm.Metadata(ctx, "rf3")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range md.Topics["rf3"].Partitions {
			if len(p.Replicas) != 3 || p.Leader == 3 {
				t.Errorf("partition %d: replicas %v leader %d; want three replicas, led by a live node", p.Partition, p.Replicas, p.Leader)
			}
		}
	}

	cp, err := adm.CreatePartitions(ctx, 2, "before")
	if err != nil {
		t.Fatal(err)
	}
	if e := cp["before"].Err; e != nil {
		t.Errorf("CreatePartitions of a replication factor 3 topic with node 3 stopped: %v; Kafka: NONE", e)
	}
}

// TestNotEnoughReplicasCarriesLogStartOffset: Kafka answers a Produce refused with
// NOT_ENOUGH_REPLICAS with the partition's log start offset. ReplicaManager.appendToLocalLog
// (core/.../ReplicaManager.scala) handles NotEnoughReplicasException in its `case t:
// Throwable` branch: `val logStartOffset = processFailedRecord(topicPartition, t)` and
// `LogAppendInfo.unknownLogAppendInfoWithLogStartOffset(logStartOffset)`; only
// UnknownTopicOrPartition, NotLeaderOrFollower, RecordTooLarge, RecordBatchTooLarge,
// CorruptRecord and KafkaStorage errors answer -1. Kafka 4.1.1 answered LogStartOffset 0,
// Runnel answered -1.
func TestNotEnoughReplicasCarriesLogStartOffset(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, _ := c.client()
	if r := createTopicWith(ctx, t, cl, "minisr3", -1, -1, [][]int32{{1, 2, 3}},
		map[string]string{"min.insync.replicas": "3"}); r.ErrorCode != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.waitTopicEverywhere(ctx, cl, "minisr3")
	c.stop(3)
	produce := func() kmsg.ProduceResponseTopicPartition {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 11
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "minisr3"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = 0
		rp.Records = threeRecordBatch()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	var p kmsg.ProduceResponseTopicPartition
	eventually(t, "NOT_ENOUGH_REPLICAS from the leader", 20*time.Second, func() bool {
		p = produce()
		return p.ErrorCode == kerr.NotEnoughReplicas.Code
	})
	if p.LogStartOffset != 0 {
		t.Errorf("NOT_ENOUGH_REPLICAS answer: LogStartOffset %d; Kafka answers the partition's log start offset (0)", p.LogStartOffset)
	}
}

// TestDescribeQuorumUnknownLogEndOffset: DescribeQuorum answers -1 as the log end offset
// of a voter whose end offset the leader does not know (one down since before it took over).
// Kafka's LeaderState.describeQuorum / getReplicaState (raft/.../LeaderState.java):
// `.setLogEndOffset(replicaState.endOffset().map(LogOffsetMetadata::offset).orElse(-1L))`.
// Kafka 4.1.1, after its quorum leader was killed, described that voter as LogEndOffset -1,
// LastFetchTimestamp -1, LastCaughtUpTimestamp -1; Runnel answered the timestamps -1 but the
// log end offset 0 (Raft's match index "nothing known"), which kafka-metadata-quorum
// describe --replication printed as a voter at offset 0.
func TestDescribeQuorumUnknownLogEndOffset(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, _ := c.client()
	describe := func(node int32) (kmsg.DescribeQuorumResponseTopicPartition, bool) {
		req := kmsg.NewPtrDescribeQuorumRequest()
		req.Version = 2
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		req.Topics = append(req.Topics, rt)
		r, err := cl.Broker(int(node)).Request(ctx, req)
		if err != nil {
			return kmsg.DescribeQuorumResponseTopicPartition{}, false
		}
		resp := r.(*kmsg.DescribeQuorumResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
			resp.Topics[0].Partitions[0].ErrorCode != 0 {
			return kmsg.DescribeQuorumResponseTopicPartition{}, false
		}
		return resp.Topics[0].Partitions[0], true
	}
	var p kmsg.DescribeQuorumResponseTopicPartition
	eventually(t, "a quorum leader", 20*time.Second, func() bool {
		var ok bool
		p, ok = describe(1)
		return ok && p.LeaderID > 0
	})
	// The leader's process stays, but nothing reaches it or comes from it (as Kafka's killed
	// quorum leader): the other two elect a leader that never hears from it.
	old := p.LeaderID
	var others []int32
	for id := int32(1); id <= 3; id++ {
		if id != old {
			others = append(others, id)
		}
	}
	c.servers[old].Node().Transport().Isolate(others...)
	for _, id := range others {
		c.servers[id].Node().Transport().Isolate(old)
	}
	eventually(t, "a new quorum leader", 20*time.Second, func() bool {
		var ok bool
		p, ok = describe(others[0])
		return ok && p.LeaderID > 0 && p.LeaderID != old
	})
	found := false
	for _, v := range p.CurrentVoters {
		if v.ReplicaID != old {
			continue
		}
		found = true
		if v.LogEndOffset != -1 {
			t.Errorf("voter %d, cut off since before leader %d took over: LogEndOffset %d (last fetch %d, caught up %d); Kafka: -1",
				old, p.LeaderID, v.LogEndOffset, v.LastFetchTimestamp, v.LastCaughtUpTimestamp)
		}
	}
	if !found {
		t.Fatalf("voter %d missing from %+v", old, p.CurrentVoters)
	}
}
