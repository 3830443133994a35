package controller

import (
	"testing"
	"time"
)

// An agent's unregistration (op unregister, after its expiry) forgets the request answers of
// the agent's run from command level 7, as unregister-node does a serve node's (docs/cluster.md
// §3.8). Before, they stayed in the image and every snapshot for ever: agents take a new id
// and run at every start, each run leaving up to 256 answers. Below level 7 every node keeps
// them, as older versions do.
func TestAgentUnregisterForgetsRequests(t *testing.T) {
	for _, level := range []int{LevelAgentRequests - 1, LevelAgentRequests} {
		im := cluster3(t)
		im.Level = level
		Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 500, ClusterAddr: "x", Agent: true, Run: "500-r", Level: Level}})
		inc := im.Nodes[500].Incarnation
		if r := Apply(im, im.Index+1, &Command{Op: OpSetGroupConfigs, Req: &Request{Run: "500-r", Seq: 1},
			SetGroupConfigs: &SetGroupConfigs{Group: "g", Configs: map[string]string{"k": "v"}}}); r.Err != nil {
			t.Fatal(r.Err)
		}
		if im.Requests["500-r"] == nil {
			t.Fatal("the agent's request was not recorded")
		}
		Apply(im, im.Index+1, &Command{Op: OpFence, Fence: &Fence{Node: 500, Incarnation: inc}})
		Apply(im, im.Index+1, &Command{Op: OpUnregister, Fence: &Fence{Node: 500, Incarnation: inc}})
		if _, ok := im.Nodes[500]; ok {
			t.Fatal("agent not unregistered")
		}
		kept := im.Requests["500-r"] != nil
		if want := level < LevelAgentRequests; kept != want {
			t.Errorf("level %d: after the agent's unregistration its run's request answers kept = %v, want %v", level, kept, want)
		}
	}
}

// A node in controlled shutdown takes no leadership (as Kafka's ClusterControlManager.isActive,
// false for a broker in controlled shutdown: ElectLeaders PREFERRED to it answers
// PREFERRED_LEADER_NOT_AVAILABLE). Transfer started one to it: the leader stopped appending,
// its leadership was taken away, and the election passed over the stopping node, an epoch
// without a leader for nothing.
func TestNoTransferToAStoppingNode(t *testing.T) {
	im := cluster3(t) // p0 led by 1 (replicas 1 2 3)
	p0 := PartitionRef{TopicID{1}, 0}
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	for _, n := range []int32{1, 2, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, t0)
	}
	if _, ok, _ := a.ShuttingDown(3, im.Nodes[3].Incarnation, t0); !ok {
		t.Fatal("ShuttingDown(3) not taken")
	}
	if ok, eff := a.Transfer(p0, 3, t0); ok || len(eff.Transfers) > 0 {
		t.Errorf("Transfer of p0 to node 3, which is shutting down: started=%v, requests %+v; want refused", ok, eff.Transfers)
	}
	if ok, eff := a.Transfer(p0, 2, t0); !ok || len(eff.Transfers[1]) != 1 {
		t.Errorf("Transfer of p0 to node 2: started=%v, requests %+v; want one request to leader 1", ok, eff.Transfers)
	}
}

// Object partitions have no replicas ("elections, reassignment and EachPartition skip" them,
// docs/object-topics.md). From command level 7 a reassignment of one is refused; before, it was
// recorded and never finished (EachPartition skips it): ListPartitionReassignments listed it
// for ever, and its target node could never be unregistered.
func TestReassignObjectPartitionRefused(t *testing.T) {
	im := withObjectTopic(t)
	im.Level = Level
	Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 4, ClusterAddr: "a", Level: Level}})
	res := Apply(im, im.Index+1, &Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: PartitionRef{objTopic, 0}, Target: []int32{4}}})
	_, p, _ := im.Partition(objTopic, 0)
	if res.Err == nil || p.Target != nil {
		t.Errorf("reassign of an object partition: err %v, target now %v; want refused", res.Err, p.Target)
	}
	Apply(im, im.Index+1, &Command{Op: OpFence, Fence: &Fence{Node: 4, Incarnation: im.Nodes[4].Incarnation}})
	a := NewActive(testActiveConfig(), im.Clone(), time.Unix(1000, 0))
	if _, err := a.UnregisterNode(4, nil); err != nil {
		t.Errorf("unregister node 4, which holds no replica: %v", err)
	}
}

// One transfer runs per partition and epoch. A second one to another target reported started,
// so an ElectLeaders waited (until its timeout) for a leader the running transfer never makes.
func TestTransferToAnotherTargetWhileOneRuns(t *testing.T) {
	im := cluster3(t) // p0 led by 1 (replicas 1 2 3)
	p0 := PartitionRef{TopicID{1}, 0}
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	for _, n := range []int32{1, 2, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, t0)
	}
	if ok, eff := a.Transfer(p0, 2, t0); !ok || len(eff.Transfers[1]) != 1 {
		t.Fatalf("Transfer of p0 to node 2: started=%v, requests %+v", ok, eff.Transfers)
	}
	if ok, eff := a.Transfer(p0, 3, t0); ok || len(eff.Transfers) > 0 {
		t.Errorf("Transfer of p0 to node 3 while one to node 2 runs: started=%v, requests %+v; want not started", ok, eff.Transfers)
	}
	if ok, eff := a.Transfer(p0, 2, t0); !ok || len(eff.Transfers) > 0 {
		t.Errorf("Transfer of p0 to node 2 again: started=%v, requests %+v; want started (the running one), no new request", ok, eff.Transfers)
	}
}

// The active controller forgets what the image no longer has: the sessions of unregistered
// nodes, the finish times of moves that ended, and the hint of a transfer whose begin-election
// was lost (it would otherwise tip a later, unrelated election towards the old target).
func TestActiveForgetsWhatTheImageNoLongerHas(t *testing.T) {
	im := cluster3(t)
	p0 := PartitionRef{TopicID{1}, 0}
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	for _, n := range []int32{1, 2, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, t0)
	}
	if ok, _ := a.Transfer(p0, 2, t0); !ok {
		t.Fatal("transfer not started")
	}
	a.TransferReady(EpochRef{p0, 0}, true, t0) // its begin-election proposal is lost
	if a.hints[p0] != 2 {
		t.Fatalf("hint %v; want 2", a.hints)
	}
	a.Tick(t0.Add(a.cfg.TransferTimeout + time.Second)) // the transfer times out
	if _, ok := a.hints[p0]; ok {
		t.Errorf("the hint of a transfer that timed out before its election began is kept")
	}
	a.finishing[p0] = t0 // as reassign sets it; p0 has no move
	img := im.Clone()
	delete(img.Nodes, 3) // as if unregistered
	a.SetImage(img, t0)
	if _, ok := a.sessions[3]; ok {
		t.Errorf("the session of node 3, no longer in the image, is kept")
	}
	if _, ok := a.finishing[p0]; ok {
		t.Errorf("the finish time of a partition without a move is kept")
	}
}
