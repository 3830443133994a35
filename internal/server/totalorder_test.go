package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/bench"
	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/speclog"
)

// TestTotalOrderBeyondTheQuorum: on a cluster larger than its controller quorum (nodes 1-3
// vote, node 4 does not), a total-order topic's shards go on any node, as a plain topic's
// partitions do: node 4 follows the sequencer group as a Raft learner. Shards placed there by
// the broker, by hand, or moved there take records through Kafka (acknowledged once sequenced,
// read back in order) and through the SpecLog API on node 4, whose subscriber sees the whole
// log confirmed.
func TestTotalOrderBeyondTheQuorum(t *testing.T) {
	c := startClusterWith(t, 4, func(c *testCluster) {
		c.tune = func(_ int32, cfg *server.Config) { cfg.SpecLogAddr = "127.0.0.1:0" }
	})
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c.waitNodes(4)
	total := map[string]*string{"runnel.ordering": kadm.StringPtr("total")}
	partitions := func(topic string, n int) []kadm.PartitionDetail {
		t.Helper()
		var td kadm.TopicDetails
		eventually(t, topic+" in the metadata", 10*time.Second, func() bool {
			var err error
			td, err = adm.ListTopics(ctx, topic)
			return err == nil && td[topic].Err == nil && len(td[topic].Partitions) == n
		})
		return td[topic].Partitions.Sorted()
	}
	if r, err := adm.CreateTopic(ctx, 8, 2, total, "ordered"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	onFour := 0
	for _, p := range partitions("ordered", 8) {
		if slices.Contains(p.Replicas, 4) {
			onFour++
		}
	}
	if onFour == 0 {
		t.Fatal("no shard of 8 (replication factor 2 over 4 nodes) has a replica on node 4")
	}
	if _, err := adm.CreatePartitions(ctx, 4, "ordered"); err != nil {
		t.Fatal(err)
	}
	partitions("ordered", 12)
	if r, err := adm.CreateTopic(ctx, 1, 4, total, "wide"); err != nil || r.Err != nil {
		t.Fatalf("a total-order topic over all four nodes: %v %v", err, r.Err)
	}
	// By hand: one shard on node 4 alone, one on a voter.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "by-hand", -1, -1
	for i, replicas := range [][]int32{{4}, {1}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "runnel.ordering", kmsg.StringPtr("total")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("a total-order shard placed on node 4 by hand: %v", err)
	}
	// And a shard moved there.
	moves := kadm.AlterPartitionAssignmentsReq{}
	moves.Assign("ordered", 0, []int32{4, 1})
	res, err := adm.AlterPartitionAssignments(ctx, moves)
	if err != nil || res["ordered"][0].Err != nil {
		t.Fatalf("moving a shard to node 4: %v %v", err, res["ordered"][0].Err)
	}
	eventually(t, "shard 0 of ordered led by node 4", 20*time.Second, func() bool {
		p := partitions("ordered", 12)[0]
		return p.Leader == 4 && slices.Equal(p.Replicas, []int32{4, 1})
	})

	// Every shard takes records through Kafka, acknowledged once sequenced, and reads them back.
	for topic, n := range map[string]int32{"ordered": 12, "wide": 1, "by-hand": 2} {
		for p := range n {
			for i := range 3 {
				r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-%d-%d", topic, p, i))}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatalf("produce to %s shard %d: %v", topic, p, err)
				}
			}
		}
	}
	ends, err := adm.ListEndOffsets(ctx, "by-hand")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset < 3 {
			t.Errorf("by-hand shard %d: end offset %d, %v", o.Partition, o.Offset, o.Err)
		}
	})

	// The SpecLog API on the non-voter: appends to the shard it leads alone, and a subscriber
	// there sees the global order confirmed.
	sl, err := speclog.Dial(ctx, c.servers[4].SpecLogAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	log := sl.Topic("by-hand")
	var last uint64
	for i := range 20 {
		pos, err := log.Append(ctx, int32(i%2), speclog.Record{Value: []byte(fmt.Sprintf("a%d", i))})
		if err != nil {
			t.Fatalf("append %d through node 4: %v", i, err)
		}
		last = max(last, pos)
	}
	sub := log.Subscribe(ctx, 0, speclog.SubscribeOptions{})
	values := map[string]bool{}
	for confirmed := uint64(0); confirmed <= last; {
		ev, err := sub.Next()
		if err != nil {
			t.Fatalf("subscribing through node 4: %v", err)
		}
		switch ev.Kind {
		case speclog.EventRecord:
			values[string(ev.Record.Value)] = true
		case speclog.EventConfirm:
			confirmed = ev.UpTo
		case speclog.EventFail:
			t.Fatalf("fail notice with no failure: %+v", ev)
		}
	}
	for i := range 20 {
		if !values[fmt.Sprintf("a%d", i)] {
			t.Fatalf("the subscriber on node 4 did not see append a%d", i)
		}
	}
}

// TestBenchSpecLogOnACluster: `runnel bench speclog` against a cluster whose shards are led by
// different nodes sends each shard's appends and subscription to its leader (an append that
// reaches another node is refused), with the asked replication factor.
func TestBenchSpecLogOnACluster(t *testing.T) {
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.tune = func(_ int32, cfg *server.Config) { cfg.SpecLogAddr = "127.0.0.1:0" }
	})
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := bench.SpecLog(ctx, bench.SpecLogOptions{Brokers: []string{c.addrs[1]}, Shards: 3, Appenders: 2, Rate: 100,
		ReplicationFactor: 2, Duration: 2 * time.Second, Warmup: 500 * time.Millisecond, Rounds: 1, Compute: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replication != 2 {
		t.Errorf("result says replication factor %d", res.Replication)
	}
	for name, m := range map[string]bench.SpecLogMode{"speculative": res.Speculative, "baseline": res.Baseline} {
		if m.Records == 0 || m.AppendErrors != 0 || m.Fails != 0 {
			t.Errorf("%s mode: %+v", name, m)
		}
	}
	// The benchmark's topics are gone; one made the same way shows the shards' leaders spread.
	_, adm := c.client()
	if r, err := adm.CreateTopic(ctx, 3, 2, map[string]*string{"runnel.ordering": kadm.StringPtr("total")}, "spread"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	leaders := map[int32]bool{}
	eventually(t, "spread's leaders", 10*time.Second, func() bool {
		td, err := adm.ListTopics(ctx, "spread")
		if err != nil || len(td["spread"].Partitions) != 3 {
			return false
		}
		for _, p := range td["spread"].Partitions {
			leaders[p.Leader] = true
		}
		return true
	})
	if len(leaders) < 2 {
		t.Fatalf("every shard led by one node (%v): the test would not show routing", leaders)
	}
}
