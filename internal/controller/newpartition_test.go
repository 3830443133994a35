package controller

import "testing"

// TestNewPartitionLedByALiveStoppingReplica: from LevelControlledShutdown newPartition leaves a
// stopping replica out of the ISR. It fell back to every replica only when all of them were
// stopping: with replicas [1 2], 1 stopping (live) and 2 fenced, the ISR was [2], which holds no
// live node, and the new partition got no leader at all, though 1 is live and leads it below
// the level. Now the fallback is taken when no replica outside controlled shutdown is live.
// (Kafka refuses such a manual creation: INVALID_REPLICATION_FACTOR.)
func TestNewPartitionLedByALiveStoppingReplica(t *testing.T) {
	im := cluster3(t)
	im.Level = LevelControlledShutdown
	Apply(im, im.Index+1, &Command{Op: OpControlledShutdown, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
	Apply(im, im.Index+1, &Command{Op: OpFence, Fence: &Fence{Node: 2, Incarnation: im.Nodes[2].Incarnation}})
	if !im.Nodes[1].ShuttingDown || !im.Nodes[2].Fenced {
		t.Fatalf("setup: node 1 %+v, node 2 %+v", im.Nodes[1], im.Nodes[2])
	}
	r := Apply(im, im.Index+1, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "u", ID: TopicID{2}, Assignments: [][]int32{{1, 2}}}})
	if r.Err != nil {
		t.Logf("create refused: %v (acceptable, as Kafka)", r.Err)
		return
	}
	_, p, _ := im.Partition(TopicID{2}, 0)
	if p.Leader < 0 {
		t.Errorf("new partition on [1 2] (1 stopping but live, 2 fenced): leader %d, ISR %v; created without a leader", p.Leader, p.ISR)
	}
}
