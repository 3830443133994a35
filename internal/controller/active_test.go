package controller

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func testActiveConfig() ActiveConfig {
	cfg := DefaultActiveConfig()
	cfg.BalanceInterval = 0
	return cfg
}

// commit applies the proposed commands to im, as the log would.
func commit(im *Image, eff Effects) {
	for _, c := range eff.Propose {
		Apply(im, im.Index+1, c)
	}
}

func TestSessionExpiryFencesAndElects(t *testing.T) {
	im := cluster3(t)
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	now := t0.Add(time.Second)
	for _, n := range []int32{1, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, now)
	}
	if eff := a.Tick(now); len(eff.Propose) != 0 {
		t.Fatalf("fenced before the session expired: %+v", eff.Propose[0])
	}
	now = t0.Add(1600 * time.Millisecond)
	for _, n := range []int32{1, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, now)
	}
	eff := a.Tick(now)
	if len(eff.Propose) != 1 || eff.Propose[0].Op != OpFence || eff.Propose[0].Fence.Node != 2 {
		t.Fatalf("after node 2's session expired: %+v; want one fence of node 2", eff.Propose)
	}
	if again := a.Tick(now.Add(10 * time.Millisecond)); len(again.Propose) != 0 {
		t.Fatalf("the fence was proposed twice")
	}
	commit(im, eff)
	eff = a.SetImage(im.Clone(), now)
	// Partition 1 (led by 2) needs an election: votes asked from 3 and 1 (2 is fenced).
	if len(eff.Votes) != 2 || eff.Votes[2] != nil {
		t.Fatalf("vote requests to %v; want nodes 1 and 3", keys(eff.Votes))
	}
	ref := PartitionRef{TopicID{1}, 1}
	a.Votes(3, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LastEpoch: 0, LogEnd: 100}}}, now)
	eff = a.Votes(1, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LastEpoch: 0, LogEnd: 90}}}, now)
	if len(eff.Propose) != 1 || eff.Propose[0].Op != OpElect {
		t.Fatalf("with votes from 1 and 3 (every live replica): %+v; want an elect", eff.Propose)
	}
	it := eff.Propose[0].Elect.Items[0]
	if it.Leader != 3 || it.Epoch != 1 {
		t.Fatalf("elected %d in epoch %d; want 3 (the longest log) in 1", it.Leader, it.Epoch)
	}
	commit(im, eff)
	if _, p, _ := im.Partition(ref.Topic, 1); p.Leader != 3 {
		t.Fatalf("leader after the elect applied: %d", p.Leader)
	}
}

// TestStalledControllerFencesNoOne: an active controller whose own ticks stopped for longer
// than half a session (its process paused or starved of CPU) has not read the heartbeats sent
// meanwhile: it fences no node at its first tick after the stall, and counts every live node's
// session from then on, fencing a node that stays silent a session later. Ticks that come as
// they should fence a silent node once its session has passed.
func TestStalledControllerFencesNoOne(t *testing.T) {
	im := cluster3(t)
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	tick := func(now time.Time, beating ...int32) Effects {
		for _, n := range beating {
			a.Heartbeat(n, im.Nodes[n].Incarnation, now)
		}
		return a.Tick(now)
	}
	now := t0
	for ; now.Before(t0.Add(500 * time.Millisecond)); now = now.Add(50 * time.Millisecond) {
		tick(now, 1, 2, 3)
	}
	now = now.Add(3 * time.Second) // the stall: no tick, no heartbeat read
	if eff := tick(now); len(eff.Propose) != 0 {
		t.Fatalf("fenced at the first tick after its own stall: %+v", eff.Propose)
	}
	stalled := now
	for ; now.Before(stalled.Add(1400 * time.Millisecond)); now = now.Add(50 * time.Millisecond) {
		if eff := tick(now, 1, 3); len(eff.Propose) != 0 {
			t.Fatalf("fenced %v after the stall, within a session: %+v", now.Sub(stalled), eff.Propose)
		}
	}
	var eff Effects
	for ; len(eff.Propose) == 0 && now.Before(stalled.Add(2*time.Second)); now = now.Add(50 * time.Millisecond) {
		eff = tick(now, 1, 3)
	}
	if len(eff.Propose) != 1 || eff.Propose[0].Op != OpFence || eff.Propose[0].Fence.Node != 2 {
		t.Fatalf("node 2 silent for a session after the stall: %+v; want its fence", eff.Propose)
	}
	if d := now.Sub(stalled); d < 1500*time.Millisecond {
		t.Fatalf("node 2 fenced %v after the stall; want a whole session (1.5 s)", d)
	}

	// Ticks late all the time (every 1 s, each a stall): a silent node is still fenced, within
	// about two sessions, not forgiven at every tick.
	b := NewActive(testActiveConfig(), im.Clone(), now)
	start := now
	for eff = (Effects{}); len(eff.Propose) == 0 && now.Before(start.Add(10*time.Second)); {
		now = now.Add(time.Second)
		for _, n := range []int32{1, 3} {
			b.Heartbeat(n, im.Nodes[n].Incarnation, now)
		}
		eff = b.Tick(now)
	}
	if len(eff.Propose) != 1 || eff.Propose[0].Fence.Node != 2 || now.Sub(start) > 4*time.Second {
		t.Fatalf("with every tick late, node 2 silent: %+v after %v; want its fence within 4 s", eff.Propose, now.Sub(start))
	}
}

func keys(m map[int32]*VoteRequest) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRefusedPeerIsFencedAtOnce(t *testing.T) {
	im := cluster3(t)
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	eff := a.PeerDown(1, t0)
	if len(eff.Propose) != 1 || eff.Propose[0].Op != OpFence || eff.Propose[0].Fence.Node != 1 {
		t.Fatalf("PeerDown(1) = %+v; want a fence of 1", eff.Propose)
	}
}

func TestElectionNeedsAMajorityAndWaitsForThePreferred(t *testing.T) {
	im := cluster3(t)
	ref := PartitionRef{TopicID{1}, 0} // replicas 1,2,3; preferred 1
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{ref, 0}}}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	a.SetImage(im.Clone(), t0)
	if eff := a.Votes(2, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LogEnd: 50}}}, t0); len(eff.Propose) != 0 {
		t.Fatal("elected with one vote of three")
	}
	if eff := a.Votes(3, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LogEnd: 50}}}, t0); len(eff.Propose) != 0 {
		t.Fatal("elected before the grace period with node 1 still to vote")
	}
	eff := a.Votes(1, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LogEnd: 50}}}, t0.Add(time.Millisecond))
	if len(eff.Propose) != 1 || eff.Propose[0].Elect.Items[0].Leader != 1 {
		t.Fatalf("with equal logs: %+v; want the preferred replica 1", eff.Propose)
	}
}

func TestElectionAfterGraceWithoutTheSlowVoter(t *testing.T) {
	im := cluster3(t)
	ref := PartitionRef{TopicID{1}, 0}
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{ref, 0}}}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	a.SetImage(im.Clone(), t0)
	a.Votes(2, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LastEpoch: 0, LogEnd: 10}}}, t0)
	a.Votes(3, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LastEpoch: 0, LogEnd: 12}}}, t0)
	elect := proposed(a.Tick(t0.Add(150*time.Millisecond)), OpElect)
	if elect == nil || elect.Elect.Items[0].Leader != 3 {
		t.Fatalf("after the grace period: %+v; want 3 elected", elect)
	}
}

// TestElectionDuringAMoveToDownNodes: a move's target set is not needed to elect (every
// commit still needs a quorum of the replicas): with the target nodes down, the replicas elect.
func TestElectionDuringAMoveToDownNodes(t *testing.T) {
	im := cluster3(t)
	for n := int32(4); n <= 6; n++ {
		Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: n, ClusterAddr: "a"}})
	}
	ref := PartitionRef{TopicID{1}, 0} // replicas 1,2,3
	Apply(im, im.Index+1, &Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: ref, Target: []int32{4, 5, 6}}})
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{ref, 0}}}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	a.SetImage(im.Clone(), t0)
	for _, n := range []int32{1, 2, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, t0)
	}
	a.Votes(2, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LogEnd: 10}}}, t0)
	if eff := a.Votes(3, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LogEnd: 12}}}, t0); hasOp(eff, OpElect) {
		t.Fatal("elected before the grace period with the target replicas still to vote")
	}
	elect := proposed(a.Tick(t0.Add(150*time.Millisecond)), OpElect)
	if elect == nil || elect.Elect.Items[0].Leader != 3 {
		t.Fatalf("with 2 and 3 of the replicas voting and the target set silent: %+v; want 3 elected", elect)
	}
}

func TestStaleAndNotOKVotesDoNotCount(t *testing.T) {
	im := cluster3(t)
	ref := PartitionRef{TopicID{1}, 0}
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{ref, 0}}}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	a.SetImage(im.Clone(), t0)
	a.Votes(2, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 0, OK: true, LogEnd: 99}}}, t0) // old epoch
	a.Votes(3, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: false, Reason: "log failed"}}}, t0)
	if eff := a.Tick(t0.Add(time.Second)); hasOp(eff, OpElect) {
		t.Fatal("elected without a majority of OK votes in the epoch")
	}
}

func hasOp(eff Effects, op string) bool { return proposed(eff, op) != nil }

// proposed returns the last command of op the effects propose (nil if none).
func proposed(eff Effects, op string) *Command {
	var last *Command
	for _, c := range eff.Propose {
		if c.Op == op {
			last = c
		}
	}
	return last
}

func TestVotesAreAskedAgain(t *testing.T) {
	im := cluster3(t)
	ref := PartitionRef{TopicID{1}, 0}
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{ref, 0}}}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	if eff := a.SetImage(im.Clone(), t0); len(eff.Votes) != 3 {
		t.Fatalf("asked %d nodes; want 3", len(eff.Votes))
	}
	if eff := a.Tick(t0.Add(100 * time.Millisecond)); len(eff.Votes) != 0 {
		t.Fatal("asked again before the retry interval")
	}
	eff := a.Tick(t0.Add(600 * time.Millisecond))
	if len(eff.Votes) != 3 || eff.Votes[1].MetaIndex != im.Index {
		t.Fatalf("retry: %v; want all three asked again at meta index %d", eff.Votes, im.Index)
	}
}

func TestTransferThenElectTarget(t *testing.T) {
	im := cluster3(t)
	ref := PartitionRef{TopicID{1}, 0} // led by 1
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	ok, eff := a.Transfer(ref, 3, t0)
	if !ok || len(eff.Transfers[1]) != 1 || eff.Transfers[1][0].Target != 3 {
		t.Fatalf("Transfer = %v, %+v; want a request to leader 1", ok, eff.Transfers)
	}
	eff = a.TransferReady(EpochRef{ref, 0}, true, t0)
	if !hasOp(eff, OpBeginElection) {
		t.Fatalf("ready transfer: %+v; want begin-election", eff.Propose)
	}
	commit(im, eff)
	a.SetImage(im.Clone(), t0)
	for _, n := range []int32{1, 2, 3} {
		eff = a.Votes(n, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: 1, OK: true, LogEnd: 7}}}, t0)
	}
	if !hasOp(eff, OpElect) || eff.Propose[0].Elect.Items[0].Leader != 3 {
		t.Fatalf("transfer election: %+v; want 3 (the target) among equal logs", eff.Propose)
	}
}

func TestBalanceMovesLeadershipBackToPreferred(t *testing.T) {
	im := cluster3(t)
	ref := PartitionRef{TopicID{1}, 0} // preferred 1
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{ref, 0}}}})
	Apply(im, im.Index+1, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: ref, Epoch: 1, Leader: 2}}}})
	cfg := testActiveConfig()
	cfg.BalanceInterval = time.Second
	a := NewActive(cfg, im.Clone(), t0)
	if eff := a.Tick(t0.Add(2 * time.Second)); len(eff.Transfers) != 0 {
		t.Fatal("balanced to node 1 while it is not in the ISR")
	}
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: 1, ISR: []int32{2, 1, 3}}}}})
	a.SetImage(im.Clone(), t0.Add(2*time.Second))
	for _, n := range []int32{1, 2, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, t0.Add(3*time.Second))
	}
	eff := a.Tick(t0.Add(3 * time.Second))
	if len(eff.Transfers[2]) != 1 || eff.Transfers[2][0].Target != 1 {
		t.Fatalf("balance: %+v; want leader 2 asked to transfer to 1", eff.Transfers)
	}
}

func TestChooseLeader(t *testing.T) {
	all := func(int32) bool { return true }
	for _, tc := range []struct {
		votes     map[int32]Vote
		hint, pre int32
		want      int32
		hosts     []int32 // nil: 1, 2, 3
	}{
		{map[int32]Vote{1: {LastEpoch: 3, LogEnd: 10}, 2: {LastEpoch: 4, LogEnd: 5}}, -1, 1, 2, nil},
		{map[int32]Vote{1: {LastEpoch: 4, LogEnd: 10}, 2: {LastEpoch: 4, LogEnd: 11}}, -1, 1, 2, nil},
		{map[int32]Vote{1: {LastEpoch: 4, LogEnd: 11}, 2: {LastEpoch: 4, LogEnd: 11}, 3: {LastEpoch: 4, LogEnd: 11}}, -1, 2, 2, nil},
		{map[int32]Vote{1: {LastEpoch: 4, LogEnd: 11}, 2: {LastEpoch: 4, LogEnd: 11}, 3: {LastEpoch: 4, LogEnd: 11}}, 3, 2, 3, nil},
		{map[int32]Vote{1: {LastEpoch: 4, LogEnd: 11}, 3: {LastEpoch: 4, LogEnd: 11}}, -1, 2, 1, nil},
		// Equals: the first in the replica list, as Kafka (replicas 3, 2, 1 with 3 down: 2).
		{map[int32]Vote{1: {LastEpoch: 4, LogEnd: 11}, 2: {LastEpoch: 4, LogEnd: 11}}, -1, 3, 2, []int32{3, 2, 1}},
	} {
		hosts := []int32{1, 2, 3}
		if tc.hosts != nil {
			hosts = tc.hosts
		}
		got := ChooseLeader(hosts, tc.votes, tc.hint, tc.pre, func(n int32) bool { _, ok := tc.votes[n]; return ok && all(n) })
		if got != tc.want {
			t.Errorf("ChooseLeader(%v, hint %d, preferred %d) = %d; want %d", tc.votes, tc.hint, tc.pre, got, tc.want)
		}
	}
}

func TestReassignmentFinishesOnceTargetsAreInSync(t *testing.T) {
	im := cluster3(t)
	Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 4, ClusterAddr: "a"}})
	ref := PartitionRef{TopicID{1}, 0} // replicas 1,2,3, led by 1
	Apply(im, im.Index+1, &Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: ref, Target: []int32{4, 2, 3}}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	if eff := a.Tick(t0); len(eff.Propose) != 0 || len(eff.Transfers) != 0 {
		t.Fatalf("acted before node 4 is in sync: %+v", eff)
	}
	// In the ISR, but the leader has not reported the target set synced.
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: 0, ISR: []int32{1, 2, 3, 4}}}}})
	a.SetImage(im.Clone(), t0)
	if eff := a.Tick(t0); len(eff.Propose) != 0 || len(eff.Transfers) != 0 {
		t.Fatalf("acted before the target set is synced: %+v", eff)
	}
	// A report for another target does not count.
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: 0, ISR: []int32{1, 2, 3, 4}, Target: []int32{4, 3, 2}}}}})
	a.SetImage(im.Clone(), t0)
	if eff := a.Tick(t0); len(eff.Propose) != 0 || len(eff.Transfers) != 0 {
		t.Fatalf("acted on a report synced for another target: %+v", eff)
	}
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: 0, ISR: []int32{1, 2, 3, 4}, Target: []int32{4, 2, 3}}}}})
	a.SetImage(im.Clone(), t0)
	eff := a.Tick(t0)
	if len(eff.Transfers[1]) != 1 || eff.Transfers[1][0].Target != 4 {
		t.Fatalf("with the leader outside the target: %+v; want a transfer to 4", eff)
	}
	// Once 4 leads, the reassignment finishes.
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{ref, 0}}}})
	Apply(im, im.Index+1, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: ref, Epoch: 1, Leader: 4}}}})
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: 1, ISR: []int32{1, 2, 3, 4}}}}})
	a.SetImage(im.Clone(), t0.Add(time.Second))
	if eff := a.Tick(t0.Add(time.Second)); hasOp(eff, OpFinishReassign) {
		t.Fatal("finished on the previous epoch's synced report")
	}
	Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: 1, ISR: []int32{1, 2, 3, 4}, Target: []int32{4, 2, 3}}}}})
	a.SetImage(im.Clone(), t0.Add(time.Second))
	eff = a.Tick(t0.Add(time.Second))
	if !hasOp(eff, OpFinishReassign) {
		t.Fatalf("target in sync and leading: %+v; want finish-reassign", eff.Propose)
	}
	commit(im, eff)
	if _, p, _ := im.Partition(ref.Topic, 0); p.Target != nil || p.Leader != 4 {
		t.Fatalf("after finishing: %+v", p)
	}
}

// TestAgentExpiry: a fenced agent is unregistered once not heard from for AgentExpiry (and only
// then); a fenced storage node never is.
func TestAgentExpiry(t *testing.T) {
	im := cluster3(t)
	Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 500, ClusterAddr: "x", Agent: true}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	now := t0
	for now.Before(t0.Add(2 * time.Second)) { // nodes 1-3 keep their sessions, the agent is silent
		now = now.Add(100 * time.Millisecond)
		for _, n := range []int32{1, 2, 3} {
			a.Heartbeat(n, im.Nodes[n].Incarnation, now)
		}
		commit(im, a.Tick(now))
		a.SetImage(im.Clone(), now)
	}
	if !im.Nodes[500].Fenced {
		t.Fatal("the silent agent is not fenced")
	}
	now = t0.Add(29 * time.Second)
	for _, n := range []int32{1, 2, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, now)
	}
	if eff := a.Tick(now); len(eff.Propose) != 0 {
		t.Fatalf("before the expiry: %+v", eff.Propose)
	}
	now = t0.Add(31 * time.Second)
	for _, n := range []int32{1, 2, 3} {
		a.Heartbeat(n, im.Nodes[n].Incarnation, now)
	}
	commit(im, a.Tick(now))
	if _, ok := im.Nodes[500]; ok {
		t.Fatal("the expired agent is still registered")
	}
	if len(im.Nodes) != 3 {
		t.Fatalf("%d nodes left; want the three storage nodes", len(im.Nodes))
	}
}

// TestUncleanElection: a partition that lost a majority of its replicas stays leaderless until
// an unclean election is asked for; then its most up-to-date live replica leads and the live
// replicas that voted become the replica set. Asked for while a majority is live, it does
// nothing; an unclean elect nobody asked for is not applied.
func TestUncleanElection(t *testing.T) {
	im := cluster3(t)
	ref := PartitionRef{TopicID{1}, 0} // replicas 1,2,3, led by 1
	if res := Apply(im, im.Index+1, &Command{Op: OpUncleanElection, UncleanElection: &BeginElection{Items: []EpochRef{{ref, 0}}}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, p, _ := im.Partition(ref.Topic, 0); p.Unclean || p.Leader != 1 {
		t.Fatalf("unclean election asked for with every replica live: unclean %v, leader %d; want no change", p.Unclean, p.Leader)
	}
	for _, n := range []int32{1, 2} {
		Apply(im, im.Index+1, &Command{Op: OpFence, Fence: &Fence{Node: n, Incarnation: im.Nodes[n].Incarnation}})
	}
	_, p, _ := im.Partition(ref.Topic, 0)
	epoch := p.LeaderEpoch
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	a.Heartbeat(3, im.Nodes[3].Incarnation, t0)
	a.Tick(t0) // asks for votes
	a.Votes(3, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: epoch, OK: true, LastEpoch: 0, LogEnd: 7}}}, t0)
	a.Heartbeat(3, im.Nodes[3].Incarnation, t0.Add(time.Second))
	if eff := a.Tick(t0.Add(time.Second)); hasOp(eff, OpElect) {
		t.Fatalf("elected with one replica of three and no unclean election asked for: %+v", proposed(eff, OpElect))
	}
	// An unclean elect nobody asked for.
	Apply(im, im.Index+1, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: ref, Epoch: epoch, Leader: 3, Replicas: []int32{3}}}}})
	if _, p, _ := im.Partition(ref.Topic, 0); p.Leader != -1 {
		t.Fatalf("an unclean elect nobody asked for made %d leader", p.Leader)
	}

	Apply(im, im.Index+1, &Command{Op: OpUncleanElection, UncleanElection: &BeginElection{Items: []EpochRef{{ref, epoch}}}})
	a.SetImage(im.Clone(), t0.Add(time.Second))
	a.Heartbeat(3, im.Nodes[3].Incarnation, t0.Add(2*time.Second))
	elect := proposed(a.Tick(t0.Add(2*time.Second)), OpElect)
	if elect == nil {
		t.Fatal("no election after the unclean election was asked for")
	}
	var it ElectItem
	for _, i := range elect.Elect.Items {
		if i.PartitionRef == ref {
			it = i
		}
	}
	if it.Leader != 3 || !slices.Equal(it.Replicas, []int32{3}) {
		t.Fatalf("unclean election: %+v; want 3 leading replicas [3]", it)
	}
	Apply(im, im.Index+1, elect)
	if _, p, _ := im.Partition(ref.Topic, 0); p.Leader != 3 || !slices.Equal(p.Replicas, []int32{3}) || p.Unclean ||
		!slices.Equal(p.Target, []int32{1, 2, 3}) {
		t.Fatalf("after the unclean election: %+v; want 3 leading replicas [3], moving back to [1 2 3]", p)
	}
	// Partition 1 (replicas 2,3,1) was not asked for: it stays leaderless.
	if _, p, _ := im.Partition(ref.Topic, 1); p.Leader != -1 {
		t.Fatalf("partition 1 got leader %d without an unclean election", p.Leader)
	}
}

// TestAutomaticUncleanElection: with unclean.leader.election.enable (the topic's, else the
// cluster-wide default) the active controller itself commits the unclean election of a
// partition that lost a majority of its replicas and still has a live one, then elects it as an
// operator's would; without it, or with a majority live, or with no live replica, or on a
// total-order topic, it does not.
func TestAutomaticUncleanElection(t *testing.T) {
	ref := PartitionRef{TopicID{1}, 0} // replicas 1,2,3, led by 1
	setTopic := func(im *Image, configs map[string]string) {
		if res := Apply(im, im.Index+1, &Command{Op: OpSetTopicConfigs, SetTopicConfigs: &SetTopicConfigs{ID: TopicID{1}, Configs: configs}}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	setCluster := func(im *Image, configs map[string]string) {
		if res := Apply(im, im.Index+1, &Command{Op: OpSetNodeConfigs, SetNodeConfigs: &SetNodeConfigs{Node: -1, Configs: configs}}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	fence := func(im *Image, nodes ...int32) {
		for _, n := range nodes {
			Apply(im, im.Index+1, &Command{Op: OpFence, Fence: &Fence{Node: n, Incarnation: im.Nodes[n].Incarnation}})
		}
	}
	// asks returns the partitions an active controller on im asks unclean elections for at its
	// first tick.
	asks := func(im *Image) []EpochRef {
		a := NewActive(testActiveConfig(), im.Clone(), t0)
		if c := proposed(a.Tick(t0), OpUncleanElection); c != nil {
			return c.UncleanElection.Items
		}
		return nil
	}

	for _, tc := range []struct {
		name    string
		topic   map[string]string
		cluster map[string]string
		fenced  []int32
		want    bool
	}{
		{"not enabled", nil, nil, []int32{1, 2}, false},
		{"topic config", map[string]string{UncleanConfig: "true"}, nil, []int32{1, 2}, true},
		{"cluster-wide default", nil, map[string]string{UncleanConfig: "true"}, []int32{1, 2}, true},
		{"topic false over cluster true", map[string]string{UncleanConfig: "false"}, map[string]string{UncleanConfig: "true"}, []int32{1, 2}, false},
		{"a majority live", map[string]string{UncleanConfig: "true"}, nil, []int32{1}, false},
		{"no replica live", map[string]string{UncleanConfig: "true"}, nil, []int32{1, 2, 3}, false},
		{"total-order topic", nil, map[string]string{UncleanConfig: "true"}, []int32{1, 2}, false},
	} {
		im := cluster3(t)
		topic := tc.topic
		if tc.name == "total-order topic" {
			topic = map[string]string{"runnel.ordering": "total"}
		}
		if topic != nil {
			setTopic(im, topic)
		}
		if tc.cluster != nil {
			setCluster(im, tc.cluster)
		}
		fence(im, tc.fenced...)
		got := asks(im)
		if !tc.want {
			if got != nil {
				t.Errorf("%s: unclean elections asked for %+v; want none", tc.name, got)
			}
			continue
		}
		// Both partitions (replicas 1,2,3 and 2,3,1) lost 1 and 2.
		_, p, _ := im.Partition(ref.Topic, 0)
		if len(got) != 2 || got[0] != (EpochRef{PartitionRef: ref, Epoch: p.LeaderEpoch}) {
			t.Errorf("%s: unclean elections asked for %+v; want both partitions, partition 0 in epoch %d", tc.name, got, p.LeaderEpoch)
		}
	}

	// The whole way: asked for once per VoteRetry while not applied, then elected like an
	// operator's, and nothing more asked once elected.
	im := cluster3(t)
	setTopic(im, map[string]string{UncleanConfig: "true"})
	fence(im, 1, 2)
	cfg := testActiveConfig()
	a := NewActive(cfg, im.Clone(), t0)
	a.Heartbeat(3, im.Nodes[3].Incarnation, t0)
	c := proposed(a.Tick(t0), OpUncleanElection)
	if c == nil {
		t.Fatal("no unclean election asked for")
	}
	if hasOp(a.Tick(t0.Add(cfg.VoteRetry/2)), OpUncleanElection) {
		t.Fatal("the unclean election asked for again before VoteRetry")
	}
	if !hasOp(a.Tick(t0.Add(cfg.VoteRetry)), OpUncleanElection) {
		t.Fatal("an unclean election proposed but not applied is not asked for again after VoteRetry")
	}
	Apply(im, im.Index+1, c)
	if _, p, _ := im.Partition(ref.Topic, 0); !p.Unclean || p.Leader != -1 {
		t.Fatalf("after the automatic unclean election: unclean %v, leader %d; want unclean, no leader", p.Unclean, p.Leader)
	}
	now := t0.Add(cfg.VoteRetry + time.Millisecond)
	a.SetImage(im.Clone(), now)
	a.Heartbeat(3, im.Nodes[3].Incarnation, now)
	if hasOp(a.Tick(now), OpUncleanElection) {
		t.Fatal("unclean election asked for a partition already marked unclean")
	}
	_, p, _ := im.Partition(ref.Topic, 0)
	_, p1, _ := im.Partition(ref.Topic, 1)
	elect := proposed(a.Votes(3, &VoteReply{Votes: []Vote{{PartitionRef: ref, Epoch: p.LeaderEpoch, OK: true, LogEnd: 7},
		{PartitionRef: PartitionRef{TopicID{1}, 1}, Epoch: p1.LeaderEpoch, OK: true, LogEnd: 3}}}, now), OpElect)
	if elect == nil || len(elect.Elect.Items) != 2 {
		t.Fatalf("elections after the automatic unclean election: %+v; want both partitions", elect)
	}
	Apply(im, im.Index+1, elect)
	for i := range int32(2) {
		if _, p, _ := im.Partition(ref.Topic, i); p.Leader != 3 || !slices.Equal(p.Replicas, []int32{3}) || p.Unclean || len(p.Target) != 3 {
			t.Fatalf("partition %d after the automatic unclean election: %+v; want 3 leading replicas [3], moving back to three", i, p)
		}
	}
	a.SetImage(im.Clone(), now.Add(time.Second))
	a.Heartbeat(3, im.Nodes[3].Incarnation, now.Add(time.Second))
	if hasOp(a.Tick(now.Add(time.Second)), OpUncleanElection) {
		t.Fatal("unclean election asked for a partition whose live replicas are its majority again")
	}
}

// TestBalanceRespectsImbalancePercentage: leaderships go back to their preferred node only once
// more than leader.imbalance.per.broker.percentage of that node's partitions are led elsewhere
// (Kafka's rule), and then all of them; with 0, any one does.
func TestBalanceRespectsImbalancePercentage(t *testing.T) {
	im := cluster3(t)
	assign := make([][]int32, 19)
	for i := range assign {
		assign[i] = []int32{1, 2, 3}
	}
	if r := Apply(im, im.Index+1, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "many", ID: TopicID{2}, Assignments: assign}}); r.Err != nil {
		t.Fatal(r.Err)
	} // node 1 is now the preferred replica of 20 partitions: t-0 and many-0..18
	moveTo2 := func(i int32) {
		ref := PartitionRef{TopicID{2}, i}
		Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{ref, 0}}}})
		Apply(im, im.Index+1, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: ref, Epoch: 1, Leader: 2}}}})
		Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: 1, ISR: []int32{2, 1, 3}}}}})
	}
	transfers := func(percent int) int {
		cfg := testActiveConfig()
		cfg.BalanceInterval, cfg.ImbalancePercent = time.Second, percent
		a := NewActive(cfg, im.Clone(), t0)
		for _, n := range []int32{1, 2, 3} {
			a.Heartbeat(n, im.Nodes[n].Incarnation, t0.Add(2*time.Second))
		}
		return len(a.Tick(t0.Add(2 * time.Second)).Transfers[2])
	}
	moveTo2(0)
	moveTo2(1)
	if n := transfers(10); n != 0 {
		t.Fatalf("2 of 20 (10%%) led elsewhere: %d transfers; want none", n)
	}
	if n := transfers(0); n != 2 {
		t.Fatalf("with 0%%: %d transfers; want 2", n)
	}
	moveTo2(2)
	if n := transfers(10); n != 3 {
		t.Fatalf("3 of 20 (15%%) led elsewhere: %d transfers; want all 3", n)
	}
}
