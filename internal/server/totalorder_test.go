package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTotalOrderPlacement: on a cluster larger than its controller quorum (nodes 1-3 vote, node
// 4 does not), a total-order topic's shards go on the voters only, where the sequencer group
// runs: created, added or reassigned, whether placed by the broker or by hand; a placement
// outside is refused with Kafka's code and a message that says why, and changes nothing. Its
// records are produced and acknowledged through Kafka.
func TestTotalOrderPlacement(t *testing.T) {
	c := startCluster(t, 4)
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.waitNodes(4)
	total := map[string]*string{"runnel.ordering": kadm.StringPtr("total")}
	// onVoters checks, once the client's metadata has the topic's partitions, that every
	// replica is a voter.
	onVoters := func(topic string, partitions int) {
		t.Helper()
		var td kadm.TopicDetails
		eventually(t, topic+" in the metadata", 10*time.Second, func() bool {
			var err error
			td, err = adm.ListTopics(ctx, topic)
			return err == nil && td[topic].Err == nil && len(td[topic].Partitions) == partitions
		})
		for _, p := range td[topic].Partitions {
			if slices.Contains(p.Replicas, 4) || len(p.Replicas) == 0 {
				t.Fatalf("%s partition %d has replicas %v; want voters (1-3) only", topic, p.Partition, p.Replicas)
			}
		}
	}
	if r, err := adm.CreateTopic(ctx, 8, 2, total, "ordered"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	onVoters("ordered", 8)
	if _, err := adm.CreatePartitions(ctx, 4, "ordered"); err != nil {
		t.Fatal(err)
	}
	onVoters("ordered", 12)

	// A plain topic may use node 4; a total-order one may not.
	if r, err := adm.CreateTopic(ctx, 1, 4, nil, "plain"); err != nil || r.Err != nil {
		t.Fatalf("a plain topic over four nodes: %v %v", err, r.Err)
	}
	wide, err := adm.CreateTopics(ctx, 1, 4, total, "too-wide")
	if err != nil {
		t.Fatal(err)
	}
	if r := wide["too-wide"]; r.Err != kerr.InvalidReplicationFactor || !strings.Contains(r.ErrMessage, "controller voters") {
		t.Fatalf("a total-order topic with replication factor 4: %v %q; want INVALID_REPLICATION_FACTOR naming the voters", r.Err, r.ErrMessage)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "by-hand", -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Replicas = []int32{4, 1}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "runnel.ordering", kmsg.StringPtr("total")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0]; got.ErrorCode != kerr.InvalidReplicaAssignment.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "not a controller voter") {
		t.Fatalf("a total-order shard placed on node 4 by hand: %v %v", kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage)
	}
	if td, _ := adm.ListTopics(ctx, "by-hand"); td.Has("by-hand") {
		t.Fatal("the refused topic exists")
	}
	// Moving a shard to node 4 is refused too.
	moves := kadm.AlterPartitionAssignmentsReq{}
	moves.Assign("ordered", 0, []int32{4, 1})
	res, err := adm.AlterPartitionAssignments(ctx, moves)
	if err != nil {
		t.Fatal(err)
	}
	if r := res["ordered"][0]; r.Err != kerr.InvalidReplicaAssignment || !strings.Contains(r.ErrMessage, "not a controller voter") {
		t.Fatalf("moving a shard to node 4: %v %s", r.Err, r.ErrMessage)
	}
	onVoters("ordered", 12)

	// The shards take records through Kafka, acknowledged once sequenced.
	for p := range int32(12) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ordered", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to shard %d: %v", p, err)
		}
	}
}
