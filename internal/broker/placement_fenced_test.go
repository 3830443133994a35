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

// registerNodes registers nodes (id -> rack) that never heartbeat, and fences them if fenced.
// Unfenced, they count as live until their session times out (seconds): enough for a test of
// placement.
func registerNodes(t *testing.T, b *Broker, racks map[int32]string, fenced bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for id, rack := range racks {
		if _, err := b.cl.Propose(ctx, &controller.Command{Op: controller.OpRegister, Register: &controller.Register{Node: id,
			KafkaHost: "127.0.0.1", KafkaPort: 1, ClusterAddr: "127.0.0.1:1", Rack: rack, Level: controller.Level}}); err != nil {
			t.Fatal(err)
		}
		if !fenced {
			continue
		}
		n := b.cl.Image().Nodes[id]
		if _, err := b.cl.Propose(ctx, &controller.Command{Op: controller.OpFence, Fence: &controller.Fence{Node: id, Incarnation: n.Incarnation}}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		img, all := b.cl.Image(), true
		for id := range racks {
			if n := img.Nodes[id]; n == nil || n.Fenced != fenced {
				all = false
			}
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nodes not registered as asked")
		}
	}
}

// TestPlacementOnFencedNodes: replicas go on fenced nodes once the live ones run out (Kafka's
// StripedReplicaPlacer), never as a partition's first replica, and only while the live nodes
// make a majority of its replicas: a partition commits on a majority here, where Kafka's ISR may
// shrink to the leader, so a majority on fenced nodes could commit nothing. A fenced replica is
// taken from a rack the partition lacks first, and the automatic replication factor counts the
// registered nodes, fenced ones included.
func TestPlacementOnFencedNodes(t *testing.T) {
	b, _, _ := ctBroker(t, nil)
	registerNodes(t, b, map[int32]string{3: "a", 4: "c"}, true)
	if _, aerr := b.assignReplicas(0, 1, 3); aerr == nil || aerr.code != kerr.InvalidReplicationFactor {
		t.Fatalf("RF 3 with one live node of three: %v; want INVALID_REPLICATION_FACTOR (no live majority)", aerr)
	}
	if rf := b.autoReplicationFactor(); rf != 3 {
		t.Errorf("three storage nodes registered (two fenced): automatic replication factor %d; want 3", rf)
	}
	registerNodes(t, b, map[int32]string{2: "a"}, false)
	img := b.cl.Image()
	out, aerr := b.assignReplicas(0, 4, 3)
	if aerr != nil {
		t.Fatal(aerr.msg)
	}
	for i, rs := range out {
		if len(rs) != 3 || !img.Live(rs[0]) || !img.Live(rs[1]) {
			t.Errorf("partition %d: replicas %v; want the two live nodes first", i, rs)
			continue
		}
		// Node 1 has no rack (a rack of its own), node 2 is in rack a: the fenced replica is
		// node 4 (rack c), not node 3 (rack a again).
		if rs[2] != 4 {
			t.Errorf("partition %d: replicas %v; want the fenced node of a rack it lacks (4) last", i, rs)
		}
	}
}

// TestNewPartitionISRLeavesFencedReplicasOut: a partition created with a replica on a fenced
// node starts with the live replicas alone in its ISR, as Kafka's active replicas (command level
// 10); it used to list the fenced node both in its ISR and offline until the leader's first
// report.
func TestNewPartitionISRLeavesFencedReplicasOut(t *testing.T) {
	b, addr, _ := ctBroker(t, nil)
	for deadline := time.Now().Add(15 * time.Second); b.cl.Image().Level < controller.LevelNewPartitionLiveISR; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("level %d", b.cl.Image().Level)
		}
	}
	registerNodes(t, b, map[int32]string{3: ""}, true)
	registerNodes(t, b, map[int32]string{2: ""}, false)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = "isrlive"
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Replicas = []int32{1, 2, 3}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	req.Topics = append(req.Topics, rt)
	if resp := ctRoundTrip(t, addr, req).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	p := b.cl.Image().Topics["isrlive"].Partitions[0]
	if slices.Contains(p.ISR, 3) || !slices.Contains(p.ISR, 1) {
		t.Errorf("new partition on [1 2 3] with node 3 fenced: ISR %v; want the live replicas only", p.ISR)
	}
}

// TestManualAssignmentOnStoppingNodeOnly: a manual assignment naming only a node in controlled
// shutdown is INVALID_REPLICA_ASSIGNMENT, as Kafka's createTopic and createPartitions refuse one
// without an active replica (clusterControl::isActive: unfenced and not in controlled shutdown).
// Runnel checked only that a replica was not fenced.
func TestManualAssignmentOnStoppingNodeOnly(t *testing.T) {
	b, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "stopman", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for deadline := time.Now().Add(15 * time.Second); b.cl.Image().Level < controller.LevelControlledShutdown; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Skipf("level %d below controlled shutdown", b.cl.Image().Level)
		}
	}
	n1 := b.cl.Image().Nodes[1]
	if _, err := b.cl.Propose(ctx, &controller.Command{Op: controller.OpControlledShutdown, Fence: &controller.Fence{Node: 1, Incarnation: n1.Incarnation}}); err != nil {
		t.Fatal(err)
	}
	if !b.cl.Image().Nodes[1].ShuttingDown {
		t.Fatal("node 1 not marked")
	}
	nc := ctDial(t, addr)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.TimeoutMillis = 3, 5000
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "stopman", 2
	a := kmsg.NewCreatePartitionsRequestTopicAssignment()
	a.Replicas = []int32{1}
	ct.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{a}
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{ct}
	r := ctExchange(t, nc, cp, 1).(*kmsg.CreatePartitionsResponse)
	if r.Topics[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("CreatePartitions onto node 1 (in controlled shutdown) only: %v; Kafka: INVALID_REPLICA_ASSIGNMENT", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
}

// TestDescribeClusterIncludesFencedBrokers: DescribeCluster v2 (KIP-1073) lists the fenced
// registered nodes too, marked fenced, when asked (Admin.describeCluster with
// includeFencedBrokers); otherwise, and before v2, only the live ones. v2 was not served, so
// such a call failed with UNSUPPORTED_VERSION.
func TestDescribeClusterIncludesFencedBrokers(t *testing.T) {
	b, addr, _ := ctBroker(t, nil)
	registerNodes(t, b, map[int32]string{3: "r"}, true)
	for _, tc := range []struct {
		version int16
		fenced  bool
		want    []int32
	}{{2, true, []int32{1, 3}}, {2, false, []int32{1}}, {1, false, []int32{1}}} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType, req.IncludeFencedBrokers = tc.version, 1, tc.fenced
		resp := rawRequest(t, addr, req).(*kmsg.DescribeClusterResponse)
		var got []int32
		for _, br := range resp.Brokers {
			got = append(got, br.NodeID)
			if br.IsFenced != (br.NodeID == 3) {
				t.Errorf("v%d: node %d fenced %v", tc.version, br.NodeID, br.IsFenced)
			}
		}
		if resp.ErrorCode != 0 || !slices.Equal(got, tc.want) {
			t.Errorf("DescribeCluster v%d include fenced %v: %v %v; want brokers %v", tc.version, tc.fenced, errName(resp.ErrorCode), got, tc.want)
		}
	}
}
