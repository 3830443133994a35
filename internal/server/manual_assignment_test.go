package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's ReplicationControlManager.validateManualPartitionAssignment refuses a manual
// assignment whose partitions have different replica counts (INVALID_REPLICA_ASSIGNMENT "...
// is not consistent with previous partitions, which have N replica(s)"), in CreateTopics (against
// the first partition given) and in CreatePartitions (against the topic's replication factor).
// Runnel accepted both (found by review, 2026-12-06).
func TestManualAssignmentInconsistentReplicationFactor(t *testing.T) {
	c := startCluster(t, 2)
	c.waitNodes(2)
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis, req.ValidateOnly = 30000, true
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "mixed-rf", -1, -1
	for i, replicas := range [][]int32{{1, 2}, {1}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.Topics[0]; st.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("CreateTopics with replicas [1 2] and [1]: error %d, %d partitions rf %d; Kafka: INVALID_REPLICA_ASSIGNMENT",
			st.ErrorCode, st.NumPartitions, st.ReplicationFactor)
	}

	if resps, err := adm.CreateTopics(ctx, 1, 1, nil, "rf-one"); err != nil || resps.Error() != nil {
		t.Fatalf("creating rf-one: %v %v", err, resps.Error())
	}
	c.waitTopicEverywhere(ctx, cl, "rf-one")
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis, cp.ValidateOnly = 30000, true
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "rf-one", 2
	ct.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1, 2}}}
	cp.Topics = append(cp.Topics, ct)
	cpResp, err := cp.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if st := cpResp.Topics[0]; st.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("CreatePartitions of an rf-1 topic with replicas [1 2]: error %d; Kafka: INVALID_REPLICA_ASSIGNMENT", st.ErrorCode)
	}
}
