package controller

import (
	"testing"
	"time"
)

// A node that says it is shutting down has its leaderships moved to in-sync replicas, none
// moves back to it while it stops (balancing, elections among equal logs), and the move is
// asked again after a refusal. An election never passes over a stopping replica whose log is
// longer: that would lose what it committed.
func TestControlledShutdownMovesLeaderships(t *testing.T) {
	im := cluster3(t) // p0 led by 1 (replicas 1 2 3), p1 led by 2 (2 3 1)
	p0 := PartitionRef{TopicID{1}, 0}
	cfg := testActiveConfig()
	cfg.BalanceInterval = time.Second
	a := NewActive(cfg, im.Clone(), t0)
	if _, ok, _ := a.ShuttingDown(1, im.Nodes[1].Incarnation+1, t0); ok {
		t.Fatal("an incarnation the image does not have was taken")
	}
	movable, ok, eff := a.ShuttingDown(1, im.Nodes[1].Incarnation, t0)
	if !ok || movable != 1 || len(eff.Transfers) != 1 || len(eff.Transfers[1]) != 1 || eff.Transfers[1][0].PartitionRef != p0 || eff.Transfers[1][0].Target != 2 {
		t.Fatalf("node 1 stopping: %d movable, %v, %+v; want 1, and leader 1 asked to move p0 to 2 (the first in-sync replica)", movable, ok, eff.Transfers)
	}
	if _, _, again := a.ShuttingDown(1, im.Nodes[1].Incarnation, t0); len(again.Transfers) != 0 {
		t.Fatalf("asked again while the transfer runs: %+v", again.Transfers)
	}

	// The leader could not get ready in time (2 did not catch up): the next tick asks again,
	// for the other in-sync replica; refused by both, it tries 2 again.
	a.TransferReady(EpochRef{p0, 0}, false, t0)
	if eff := a.Tick(t0.Add(10 * time.Millisecond)); len(eff.Transfers[1]) != 1 || eff.Transfers[1][0].Target != 3 {
		t.Fatalf("after a refused transfer to 2: %+v; want one to 3", eff.Transfers)
	}
	a.TransferReady(EpochRef{p0, 0}, false, t0)
	if eff := a.Tick(t0.Add(20 * time.Millisecond)); len(eff.Transfers[1]) != 1 || eff.Transfers[1][0].Target != 2 {
		t.Fatalf("after a refused transfer to 3: %+v; want one to 2", eff.Transfers)
	}
	eff = a.TransferReady(EpochRef{p0, 0}, true, t0)
	commit(im, eff)
	a.SetImage(im.Clone(), t0)
	for _, n := range []int32{1, 2, 3} {
		eff = a.Votes(n, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: 1, OK: true, LogEnd: 7}}}, t0)
	}
	if it := proposed(eff, OpElect); it == nil || it.Elect.Items[0].Leader != 2 {
		t.Fatalf("transfer election: %+v; want 2", eff.Propose)
	}
	commit(im, eff)
	a.SetImage(im.Clone(), t0)
	if movable, _, _ := a.ShuttingDown(1, im.Nodes[1].Incarnation, t0); movable != 0 {
		t.Fatalf("after the move: %d movable; want 0", movable)
	}

	// Balancing leaves p0 with 2 (once the transfer is forgotten): its preferred replica is
	// in sync, but stopping.
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: p0, Epoch: 1, ISR: []int32{2, 1, 3}}}}})
	a.SetImage(im.Clone(), t0)
	for _, n := range []int32{1, 2, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, t0.Add(3*time.Second))
	}
	if eff := a.Tick(t0.Add(3 * time.Second)); len(eff.Transfers) != 0 {
		t.Fatalf("balancing moved a leadership to the stopping node: %+v", eff.Transfers)
	}

	// An election of p0 among equal logs does not pick its preferred replica, 1, that stops...
	elect := func(logEnd1 int64) int32 {
		t.Helper()
		_, p, _ := im.Partition(p0.Topic, p0.Partition)
		epoch := p.LeaderEpoch
		b := NewActive(cfg, im.Clone(), t0)
		b.ShuttingDown(1, im.Nodes[1].Incarnation, t0)
		x := im.Clone()
		Apply(x, x.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{p0, epoch}}}})
		b.SetImage(x, t0)
		var eff Effects
		for _, n := range []int32{1, 2, 3} {
			end := int64(7)
			if n == 1 {
				end = logEnd1
			}
			eff = b.Votes(n, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: epoch + 1, OK: true, LastEpoch: epoch, LogEnd: end}}}, t0)
		}
		c := proposed(eff, OpElect)
		if c == nil {
			t.Fatalf("no election: %+v", eff.Propose)
		}
		return c.Elect.Items[0].Leader
	}
	if l := elect(7); l != 2 {
		t.Fatalf("among equal logs elected %d; want 2 (1 is stopping)", l)
	}
	// ... but one whose log is longer is elected all the same.
	if l := elect(9); l != 1 {
		t.Fatalf("with node 1's log the longest elected %d; want 1", l)
	}

	// Node 1 returns as a new incarnation: it is no longer stopping, and gets p0 back.
	Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 1, KafkaHost: "h", KafkaPort: 9001, ClusterAddr: "a"}})
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: p0, Epoch: 1, ISR: []int32{2, 3, 1}}}}})
	if _, p, _ := im.Partition(p0.Topic, p0.Partition); p.Leader != 2 || len(p.ISR) != 3 {
		t.Fatalf("p0 after node 1's new registration: %+v", p)
	}
	a.SetImage(im.Clone(), t0.Add(4*time.Second))
	for _, n := range []int32{1, 2, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, t0.Add(5*time.Second))
	}
	if eff := a.Tick(t0.Add(5 * time.Second)); len(eff.Transfers[2]) == 0 || eff.Transfers[2][0].Target != 1 {
		t.Fatalf("after node 1 restarted: %+v; want p0 balanced back to it", eff.Transfers)
	}
}

// ShutdownTarget: the preferred replica if it can take over, else the first one in sync; none
// when no other live replica is in sync.
func TestShutdownTarget(t *testing.T) {
	im := cluster3(t)
	_, p, _ := im.Partition(TopicID{1}, 1) // led by 2, preferred 2, replicas 2 3 1
	if got := im.ShutdownTarget(p, nil); got != 3 {
		t.Fatalf("target %d; want 3", got)
	}
	if got := im.ShutdownTarget(p, func(n int32) bool { return n == 3 }); got != 1 {
		t.Fatalf("avoiding 3: target %d; want 1", got)
	}
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: PartitionRef{TopicID{1}, 1}, Epoch: 0, ISR: []int32{2}}}}})
	_, p, _ = im.Partition(TopicID{1}, 1)
	if got := im.ShutdownTarget(p, nil); got != -1 {
		t.Fatalf("with the leader alone in sync: target %d; want none", got)
	}
}

// Two nodes stopping at once: a partition whose only other in-sync replica is stopping too
// stays, and does not count as movable (each may stop without waiting for the other).
func TestControlledShutdownOfTwoNodes(t *testing.T) {
	im := cluster3(t) // p0 led by 1, p1 led by 2
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: PartitionRef{TopicID{1}, 0}, Epoch: 0, ISR: []int32{1, 2}}}}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	a.ShuttingDown(2, im.Nodes[2].Incarnation, t0)
	movable, _, eff := a.ShuttingDown(1, im.Nodes[1].Incarnation, t0)
	if movable != 0 || len(eff.Transfers[1]) != 0 {
		t.Fatalf("node 1 stopping, p0 in sync on 1 and 2 only, 2 stopping: %d movable, transfers %+v; want none", movable, eff.Transfers)
	}
}

// A replica not heard from for half a session is not counted on: the whole cluster stopping at
// once leaves a controller that can no longer fence its peers, and a stopping node must not
// wait for them.
func TestControlledShutdownSkipsSilentReplicas(t *testing.T) {
	im := cluster3(t) // p0 led by 1, replicas 1 2 3
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	now := t0.Add(time.Second) // past half the session timeout (1.5 s)
	a.Heartbeat(3, im.Nodes[3].Incarnation, now)
	movable, _, eff := a.ShuttingDown(1, im.Nodes[1].Incarnation, now)
	if movable != 1 || len(eff.Transfers[1]) != 1 || eff.Transfers[1][0].Target != 3 {
		t.Fatalf("node 2 silent: %d movable, transfers %+v; want p0 moved to 3", movable, eff.Transfers)
	}
	now = now.Add(time.Second)
	if movable, _, _ := a.ShuttingDown(1, im.Nodes[1].Incarnation, now); movable != 0 {
		t.Fatalf("nodes 2 and 3 silent: %d movable; want 0", movable)
	}
}
