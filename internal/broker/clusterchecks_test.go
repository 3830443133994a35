package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
)

// An ElectLeaders with null topics asks for every partition, and Kafka answers only the
// partitions it acted on or failed on (ReplicationControlManager.electLeaders: "When electing
// leaders for all partitions, we do not return partitions which already have the desired
// leader"), each topic still with its entry: kafka-leader-election --all-topic-partitions
// prints nothing on a balanced cluster. Runnel answered every partition ELECTION_NOT_NEEDED.
func TestElectLeadersAllPartitionsOmitsNotNeeded(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "balanced", 3, nil) // one node: every partition is led by its preferred replica
	nc := ctDial(t, addr)
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.Topics, req.TimeoutMillis = 2, 0, nil, 2000
	resp := ctExchange(t, nc, req, 1).(*kmsg.ElectLeadersResponse)
	seen := false
	for _, rt := range resp.Topics {
		seen = seen || rt.Topic == "balanced"
		for _, p := range rt.Partitions {
			t.Errorf("all-partitions election answered %s-%d %v; Kafka leaves out partitions that need no election", rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if !seen {
		t.Errorf("topics answered %+v; want an (empty) entry for topic balanced", resp.Topics)
	}
	// Named partitions are answered, ELECTION_NOT_NEEDED included.
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "balanced", []int32{0}
	req.Topics = []kmsg.ElectLeadersRequestTopic{rt}
	resp = ctExchange(t, nc, req, 2).(*kmsg.ElectLeadersResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.ElectionNotNeeded.Code {
		t.Errorf("election of balanced-0 answered %+v; want ELECTION_NOT_NEEDED", resp.Topics)
	}
	// An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION, worded as Kafka's
	// electLeader words it (kafka-leader-election prints it; Runnel sent the code's text).
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "balanced", Partitions: []int32{9}}, {Topic: "nosuch", Partitions: []int32{0}}}
	resp = ctExchange(t, nc, req, 3).(*kmsg.ElectLeadersResponse)
	for i, want := range []string{"No such partition as balanced-9", "No such topic as nosuch"} {
		p := resp.Topics[i].Partitions[0]
		if p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.ErrorMessage == nil || *p.ErrorMessage != want {
			t.Errorf("election of %s-%d: %v %v; want UNKNOWN_TOPIC_OR_PARTITION %q", resp.Topics[i].Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode), p.ErrorMessage, want)
		}
	}
}

// Kafka refuses a CreatePartitions (and CreateTopics) whose manual assignment names only fenced
// brokers (ReplicationControlManager: INVALID_REPLICA_ASSIGNMENT "All brokers specified in the
// manual partition assignment for partition N are fenced or in controlled shutdown."). Runnel
// added a partition without a leader.
func TestManualAssignmentOnFencedNodesRefused(t *testing.T) {
	b, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "t", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.cl.Propose(ctx, &controller.Command{Op: controller.OpRegister, Register: &controller.Register{Node: 2,
		KafkaHost: "127.0.0.1", KafkaPort: 1, ClusterAddr: "127.0.0.1:1", Level: controller.Level}}); err != nil {
		t.Fatal(err)
	}
	n2 := b.cl.Image().Nodes[2]
	if _, err := b.cl.Propose(ctx, &controller.Command{Op: controller.OpFence, Fence: &controller.Fence{Node: 2, Incarnation: n2.Incarnation}}); err != nil {
		t.Fatal(err)
	}
	nc := ctDial(t, addr)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.TimeoutMillis = 3, 5000
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "t", 2
	a := kmsg.NewCreatePartitionsRequestTopicAssignment()
	a.Replicas = []int32{2}
	ct.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{a}
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{ct}
	r := ctExchange(t, nc, cp, 1).(*kmsg.CreatePartitionsResponse)
	if len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("CreatePartitions onto fenced node 2 only answered %+v; want INVALID_REPLICA_ASSIGNMENT", r.Topics)
	}
	tc := kmsg.NewPtrCreateTopicsRequest()
	tc.Version, tc.TimeoutMillis = 7, 5000
	nt := kmsg.NewCreateTopicsRequestTopic()
	nt.Topic, nt.NumPartitions, nt.ReplicationFactor = "u", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{2}
	nt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{ra}
	tc.Topics = []kmsg.CreateTopicsRequestTopic{nt}
	cr := ctExchange(t, nc, tc, 2).(*kmsg.CreateTopicsResponse)
	if len(cr.Topics) != 1 || cr.Topics[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("CreateTopics onto fenced node 2 only answered %+v; want INVALID_REPLICA_ASSIGNMENT", cr.Topics)
	}
}

// A reassignment to where a partition is (or is moving) already changes nothing, as in Kafka:
// kafka-reassign-partitions --execute run twice. Runnel proposed it all the same, which moved
// the partition epoch and, during a move, restarted the target's catch-up bookkeeping.
func TestReassignToTheSameReplicasChangesNothing(t *testing.T) {
	b, addr, reg := ctBroker(t, nil)
	tp := ctCreate(t, reg, "same", 1, nil)
	before := b.imagePartition(tp.ID, 0).PartitionEpoch
	nc := ctDial(t, addr)
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "same"
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, []int32{1}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := ctExchange(t, nc, req, 1).(*kmsg.AlterPartitionAssignmentsResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reassign to [1]: %+v", resp)
	}
	if after := b.imagePartition(tp.ID, 0).PartitionEpoch; after != before {
		t.Errorf("a reassignment to the replicas the partition has moved its partition epoch from %d to %d; want no change", before, after)
	}
}

// ListPartitionReassignments, Metadata and DescribeTopicPartitions name a moving partition's
// replicas as Kafka does (its PartitionReassignmentReplicas): the target, in its order, then
// the replicas leaving; adding and removing ascending. Runnel gave the old replicas, then those
// being added (Metadata until 2026-12: [1 3 2]).
func TestListPartitionReassignmentsReplicaOrder(t *testing.T) {
	b, addr, reg := ctBroker(t, nil)
	tp := ctCreate(t, reg, "moving", 1, nil) // replicas [1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range []int32{2, 3} {
		if _, err := b.cl.Propose(ctx, &controller.Command{Op: controller.OpRegister, Register: &controller.Register{Node: n,
			KafkaHost: "127.0.0.1", KafkaPort: 1, ClusterAddr: "127.0.0.1:1", Level: controller.Level}}); err != nil {
			t.Fatal(err)
		}
	}
	// Nodes 2 and 3 never catch up: the move stays in progress.
	if res, err := b.cl.Propose(ctx, &controller.Command{Op: controller.OpReassign, Reassign: &controller.Reassign{
		PartitionRef: controller.PartitionRef{Topic: tp.ID, Partition: 0}, Target: []int32{3, 2}}}); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	nc := ctDial(t, addr)
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 5000
	resp := ctExchange(t, nc, req, 1).(*kmsg.ListPartitionReassignmentsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("moves listed: %+v", resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if !slices.Equal(p.Replicas, []int32{3, 2, 1}) || !slices.Equal(p.AddingReplicas, []int32{2, 3}) || !slices.Equal(p.RemovingReplicas, []int32{1}) {
		t.Errorf("move [1] -> [3 2]: replicas %v adding %v removing %v; want [3 2 1], [2 3], [1]", p.Replicas, p.AddingReplicas, p.RemovingReplicas)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("moving")
	mreq.Topics = append(mreq.Topics, mt)
	mresp := ctExchange(t, nc, mreq, 2).(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != 1 {
		t.Fatalf("metadata: %+v", mresp.Topics)
	}
	if got := mresp.Topics[0].Partitions[0].Replicas; !slices.Equal(got, []int32{3, 2, 1}) {
		t.Errorf("Metadata during the move [1] -> [3 2]: replicas %v; want [3 2 1]", got)
	}
	dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	dt.Topic = "moving"
	dreq.Topics = append(dreq.Topics, dt)
	dreq.ResponsePartitionLimit = 10
	dresp := ctExchange(t, nc, dreq, 3).(*kmsg.DescribeTopicPartitionsResponse)
	if len(dresp.Topics) != 1 || len(dresp.Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeTopicPartitions: %+v", dresp.Topics)
	}
	if got := dresp.Topics[0].Partitions[0].Replicas; !slices.Equal(got, []int32{3, 2, 1}) {
		t.Errorf("DescribeTopicPartitions during the move [1] -> [3 2]: replicas %v; want [3 2 1]", got)
	}
}

// TestReassignWithoutReplicationFactorChange: AlterPartitionReassignments v1 with
// AllowReplicationFactorChange false (KIP-860, kafka-reassign-partitions
// --disallow-replication-factor-change) refuses a target of another replica count
// (INVALID_REPLICATION_FACTOR) and takes one of the same count; the response says which was
// asked. During a move the count is the target's, as in Kafka. v1 was not served, so the
// tool's option failed with UNSUPPORTED_VERSION.
func TestReassignWithoutReplicationFactorChange(t *testing.T) {
	b, addr, reg := ctBroker(t, nil)
	registerNodes(t, b, map[int32]string{2: ""}, false)
	ctCreate(t, reg, "rf", 1, nil)
	nc := ctDial(t, addr)
	reassign := func(corr int32, allow bool, replicas ...int32) *kmsg.AlterPartitionAssignmentsResponse {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.Version, req.TimeoutMillis, req.AllowReplicationFactorChange = 1, 5000, allow
		req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "rf",
			Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: replicas}}}}
		return ctExchange(t, nc, req, corr).(*kmsg.AlterPartitionAssignmentsResponse)
	}
	r := reassign(1, false, 1, 2)
	if r.AllowReplicationFactorChange || r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("RF 1 to 2, not allowed: %+v; want INVALID_REPLICATION_FACTOR", r)
	}
	if r = reassign(2, false, 2); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("RF 1 to another single replica, not allowed to change: %v", errName(r.Topics[0].Partitions[0].ErrorCode))
	}
	if r = reassign(3, true, 1, 2); !r.AllowReplicationFactorChange || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("RF 1 to 2, allowed: %+v", r)
	}
	// A move to [1 2] runs: the replication factor is the target's, 2 (Kafka's
	// validatePartitionReplicationFactorUnchanged counts the replicas after the move).
	if r = reassign(4, false, 2, 1); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("during the move to [1 2], [2 1] not allowed to change the replication factor: %v", errName(r.Topics[0].Partitions[0].ErrorCode))
	}
	if r = reassign(5, false, 2); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("during the move to [2 1], [2] not allowed to change the replication factor: %v; want INVALID_REPLICATION_FACTOR", errName(r.Topics[0].Partitions[0].ErrorCode))
	}
}
