package controller

import (
	"testing"
	"time"
)

// TestVoteOfARemovedAndReaddedTargetIsAskedAgain: a reassignment's target replica votes in an
// election (its log then holds every batch), the move is cancelled (the node deletes its copy)
// and asked again (the node hosts the partition again, with an empty log), all within the same
// leaderless epoch. Its vote from before is dropped and it is asked again: counted, it elected
// the node (the preferred replica among "equal" logs) with an empty log, whose followers then
// truncated every committed batch.
func TestVoteOfARemovedAndReaddedTargetIsAskedAgain(t *testing.T) {
	im := cluster3(t) // p0: replicas 1 2 3, led by 1
	Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 4, KafkaHost: "h", KafkaPort: 9004, ClusterAddr: "a", Level: Level}})
	im.Level = Level
	p0 := PartitionRef{TopicID{1}, 0}
	apply := func(c *Command) {
		t.Helper()
		if r := Apply(im, im.Index+1, c); r.Err != nil {
			t.Fatalf("%s: %v", c.Op, r.Err)
		}
	}
	apply(&Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: p0, Target: []int32{4, 2, 3}}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	// Node 1 (the leader) is fenced: an election in epoch 1 among 2, 3 (replicas) and 4 (target).
	apply(&Command{Op: OpFence, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
	now := t0
	a.SetImage(im.Clone(), now)
	_, p, _ := im.Partition(p0.Topic, p0.Partition)
	epoch := p.LeaderEpoch
	// 4 (caught up) and 2 vote; 3 is slow: no majority of the replicas yet.
	a.Votes(4, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: epoch, OK: true, LastEpoch: 0, LogEnd: 100}}, Incarnation: im.Nodes[4].Incarnation}, now)
	if eff := a.Votes(2, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: epoch, OK: true, LastEpoch: 0, LogEnd: 100}}, Incarnation: im.Nodes[2].Incarnation}, now); hasOp(eff, OpElect) {
		t.Fatal("elected without a majority of the replicas")
	}
	// The operator cancels the move (node 4 deletes its copy), then asks for it again (node 4
	// opens a new, empty log for the partition).
	now = now.Add(100 * time.Millisecond)
	apply(&Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: p0}})
	a.SetImage(im.Clone(), now)
	now = now.Add(100 * time.Millisecond)
	apply(&Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: p0, Target: []int32{4, 2, 3}}})
	eff := a.SetImage(im.Clone(), now)
	_, p, _ = im.Partition(p0.Topic, p0.Partition)
	if p.LeaderEpoch != epoch || p.Leader != -1 {
		t.Fatalf("epoch %d leader %d; the test wants the same leaderless epoch %d", p.LeaderEpoch, p.Leader, epoch)
	}
	asked4 := eff.Votes[4] != nil
	// Node 3 votes: 2 and 3 are a majority of the replicas.
	now = now.Add(600 * time.Millisecond)
	eff = a.Votes(3, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: epoch, OK: true, LastEpoch: 0, LogEnd: 100}}, Incarnation: im.Nodes[3].Incarnation}, now)
	asked4 = asked4 || eff.Votes[4] != nil
	if c := proposed(eff, OpElect); c != nil && c.Elect.Items[0].Leader == 4 {
		commit(im, eff)
		_, p, _ = im.Partition(p0.Topic, p0.Partition)
		t.Fatalf("elected node 4 on the vote it gave before its copy was deleted (re-asked: %v): item %+v; applied: leader %d epoch %d",
			asked4, c.Elect.Items[0], p.Leader, p.LeaderEpoch)
	}
}
