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

	"github.com/runnel-dev/runnel/internal/controller"
)

// waitLevel waits until every node's image is at this version's command level.
func (c *testCluster) waitLevel(d time.Duration) {
	c.t.Helper()
	eventually(c.t, "the cluster at this version's command level", d, func() bool {
		for _, s := range c.servers {
			if s.Node().Image().Level != controller.Level {
				return false
			}
		}
		return true
	})
}

// TestReassignReorderAppliesAtOnce: a reassignment that only reorders a partition's replicas
// (kafka-reassign-partitions with the same brokers in another order) is done when its answer
// comes, as in Kafka: Metadata lists the new order, no move is listed, and the leadership
// goes to the new first replica. Before command level 8 it ran as a move.
func TestReassignReorderAppliesAtOnce(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.waitNodes(3)
	c.waitLevel(20 * time.Second)
	cl, adm := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, "reorder"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reorder", Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	md, err := adm.Metadata(ctx, "reorder")
	if err != nil {
		t.Fatal(err)
	}
	p := md.Topics["reorder"].Partitions[0]
	target := []int32{p.Replicas[2], p.Replicas[0], p.Replicas[1]}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("reorder", 0, target)
	if ar, err := adm.AlterPartitionAssignments(ctx, req); err != nil || ar.Error() != nil {
		t.Fatalf("reorder to %v: %v %v", target, err, ar.Error())
	}
	// Done when answered: no move is listed (ListPartitionReassignments passes a barrier).
	lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"reorder": {0: {}}})
	if err != nil || len(lr.Sorted()) != 0 {
		t.Fatalf("after a reorder of %v to %v: moves %+v, %v; want none", p.Replicas, target, lr.Sorted(), err)
	}
	id := controller.TopicID(md.Topics["reorder"].ID)
	for n, s := range c.servers {
		eventually(t, fmt.Sprintf("node %d to apply the reorder", n), 5*time.Second, func() bool {
			_, ip, ok := s.Node().Image().Partition(id, 0)
			return ok && ip.Target == nil && slices.Equal(ip.Replicas, target)
		})
	}
	eventually(t, "Metadata to list the new order, led by its first replica", 20*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "reorder")
		if err != nil {
			return false
		}
		p := md.Topics["reorder"].Partitions[0]
		return slices.Equal(p.Replicas, target) && p.Leader == target[0]
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reorder", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the reorder: %v", err)
	}
}

// TestControlledShutdownLeavesISRs: a node in controlled shutdown (still serving) leaves the ISR
// of every partition, once the leaderships it had have moved, and stays out while the leaders
// still find it caught up; CreateTopics places no replica on it (three replicas on three nodes
// are refused, as Kafka's placer refuses them with a broker in controlled shutdown); acks=all
// writes go on with the others. Every node's Metadata names another node the leader of the
// object partitions it led (any node takes any object partition): clients that find its port
// closed once it stops are sent elsewhere, not back to it until it is fenced.
func TestControlledShutdownLeavesISRs(t *testing.T) {
	objects := t.TempDir()
	c := startClusterWith(t, 3, func(c *testCluster) { c.objectStore = "file://" + objects })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.waitNodes(3)
	c.waitLevel(20 * time.Second)
	cl, adm := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	const stopping = 3
	createObjectTopic(t, c.addrs[1], "stopping-obj", 32, nil)
	c.waitTopicEverywhere(ctx, cl, "stopping-obj")
	// objectLeaders counts the object partitions each node's own Metadata names node leader of.
	objectLeaders := func(node int32) map[int32]int {
		t.Helper()
		out := map[int32]int{}
		for id := int32(1); id <= 3; id++ {
			md, err := nodeMetadata(ctx, cl, id, "stopping-obj")
			if err != nil || md.Topics[0].ErrorCode != 0 || len(md.Brokers) != 3 {
				t.Fatalf("node %d's Metadata: %v %+v", id, err, md)
			}
			for _, p := range md.Topics[0].Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("node %d's Metadata of stopping-obj/%d: %s", id, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
				if p.Leader == node {
					out[id]++
				}
			}
		}
		return out
	}
	if led := objectLeaders(stopping); led[1] == 0 || led[1] != led[2] || led[2] != led[3] {
		t.Fatalf("object partitions the nodes name node %d leader of, by node: %v; want the same, above 0", stopping, led)
	}
	if resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "stopping"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	produce := func(what string) {
		t.Helper()
		for i := range 3 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "stopping", Partition: int32(i), Value: []byte(what)}).FirstErr(); err != nil {
				t.Fatalf("produce %s to partition %d: %v", what, i, err)
			}
		}
	}
	produce("before")
	eventually(t, "every replica in sync", 20*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "stopping")
		if err != nil {
			return false
		}
		for _, p := range md.Topics["stopping"].Partitions {
			if len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})

	sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
	c.servers[stopping].Node().ControlledShutdown(sctx)
	scancel()
	outOfISRs := func() bool {
		md, err := adm.Metadata(ctx, "stopping")
		if err != nil {
			return false
		}
		for _, p := range md.Topics["stopping"].Partitions {
			if p.Leader == stopping || slices.Contains(p.ISR, stopping) || len(p.ISR) != 2 {
				return false
			}
		}
		return true
	}
	eventually(t, fmt.Sprintf("node %d out of every ISR", stopping), 10*time.Second, outOfISRs)
	if img := c.servers[1].Node().Image(); !img.Nodes[stopping].ShuttingDown {
		t.Fatalf("node %d not in controlled shutdown in the image: %+v", stopping, img.Nodes[stopping])
	}
	eventually(t, fmt.Sprintf("node %d no object partition's leader", stopping), 10*time.Second, func() bool {
		return len(objectLeaders(stopping)) == 0
	})
	time.Sleep(1500 * time.Millisecond) // the leaders report their ISRs every 500 ms: none takes it back
	if !outOfISRs() {
		md, _ := adm.Metadata(ctx, "stopping")
		t.Fatalf("node %d back in an ISR while stopping: %+v", stopping, md.Topics["stopping"].Partitions)
	}
	produce("during") // acks=all with min.insync.replicas=2: the two others

	resp, err := adm.CreateTopic(ctx, 6, 2, nil, "placed")
	if err != nil || resp.Err != nil {
		t.Fatalf("create with 2 replicas: %v %v", err, resp.Err)
	}
	md, err := adm.Metadata(ctx, "placed")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics["placed"].Partitions {
		if slices.Contains(p.Replicas, stopping) {
			t.Errorf("partition %d placed on %v, with node %d in controlled shutdown", p.Partition, p.Replicas, stopping)
		}
	}
	resp, err = adm.CreateTopic(ctx, 1, 3, nil, "unplaceable")
	if err == nil && !errors.Is(resp.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("create with 3 replicas on 2 usable nodes: %v; want INVALID_REPLICATION_FACTOR", resp.Err)
	}
}
