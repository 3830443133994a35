package controller

import (
	"slices"
	"testing"
	"time"
)

// shutdownSim carries out an Active's effects at once, as a perfect cluster would: every
// transfer is ready, every proposal commits, every replica votes with the same log.
type shutdownSim struct {
	t  *testing.T
	im *Image
	a  *Active
}

func (s *shutdownSim) run(eff Effects, now time.Time) {
	for len(eff.Propose) > 0 || len(eff.Votes) > 0 || len(eff.Transfers) > 0 {
		var next Effects
		add := func(e Effects) {
			next.Propose = append(next.Propose, e.Propose...)
			next.addTransfers(e)
			for n, r := range e.Votes {
				for _, it := range r.Items {
					next.vote(n, r.MetaIndex, it)
				}
			}
		}
		for _, rs := range eff.Transfers {
			for _, r := range rs {
				add(s.a.TransferReady(r.EpochRef, true, now))
			}
		}
		if len(eff.Propose) > 0 {
			for _, c := range eff.Propose {
				Apply(s.im, s.im.Index+1, c)
			}
			add(s.a.SetImage(s.im.Clone(), now))
		}
		for n, r := range eff.Votes {
			var reply VoteReply
			for _, it := range r.Items {
				reply.Votes = append(reply.Votes, Vote{PartitionRef: it.PartitionRef, Epoch: it.Epoch, OK: true, LogEnd: 7})
			}
			add(s.a.Votes(n, &reply, now))
		}
		eff = next
	}
}

// A node leading 1,000 partitions (operating.md's rolling-restart figure) shuts down: the
// active controller moved at most MaxTransfers (64) of them per TransferTimeout (2 s), because
// a transfer that finished kept its slot in a.transfers until it timed out, so within the 15 s
// ControlledShutdownTimeout only about 480 moved even when every transfer and election was
// instant. A transfer's slot is now freed once its election begins.
func TestControlledShutdownOfManyPartitions(t *testing.T) {
	im := NewImage()
	Apply(im, im.Index+1, &Command{Op: OpBootstrap, Bootstrap: &Bootstrap{ClusterID: "c1"}})
	for n := int32(1); n <= 3; n++ {
		Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: n, KafkaHost: "h", KafkaPort: 9000 + n, ClusterAddr: "a"}})
	}
	const parts = 1000
	as := make([][]int32, parts)
	for i := range as {
		as[i] = []int32{1, 2, 3}
	}
	if res := Apply(im, im.Index+1, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "t", ID: TopicID{1}, Assignments: as}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	cfg := testActiveConfig()
	s := &shutdownSim{t: t, im: im}
	s.a = NewActive(cfg, im.Clone(), t0)
	now := t0
	movable, _, eff := s.a.ShuttingDown(1, im.Nodes[1].Incarnation, now)
	if movable != parts {
		t.Fatalf("movable %d; want %d", movable, parts)
	}
	s.run(eff, now)
	for now.Sub(t0) < 15*time.Second { // ControlledShutdownTimeout
		now = now.Add(50 * time.Millisecond)
		for n := int32(1); n <= 3; n++ {
			s.a.Heartbeat(n, im.Nodes[n].Incarnation, now)
		}
		movable, _, eff = s.a.ShuttingDown(1, im.Nodes[1].Incarnation, now)
		s.run(eff, now)
		if movable == 0 {
			break
		}
		s.run(s.a.Tick(now), now)
	}
	if movable != 0 {
		t.Errorf("after 15 s of instant transfers node 1 still leads %d of %d movable partitions (MaxTransfers=%d, TransferTimeout=%v: finished transfers hold their slot)",
			movable, parts, cfg.MaxTransfers, cfg.TransferTimeout)
	}
}

// A transfer's election not decided yet counts as still to move: told 0 then, a stopping active
// controller handed its leadership on, and a successor that did not know the node was stopping
// elected it again among equal logs (its preferred replica).
func TestControlledShutdownWaitsForTransferElections(t *testing.T) {
	im := cluster3(t) // p0 led by 1 (replicas 1 2 3, preferred 1)
	p0 := PartitionRef{TopicID{1}, 0}
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	a.ShuttingDown(1, im.Nodes[1].Incarnation, t0)
	commit(im, a.TransferReady(EpochRef{p0, 0}, true, t0)) // begin-election applied: p0 has no leader
	a.SetImage(im.Clone(), t0)
	if movable, _, _ := a.ShuttingDown(1, im.Nodes[1].Incarnation, t0); movable != 1 {
		t.Fatalf("p0's transfer election undecided: %d movable; want 1", movable)
	}
	var eff Effects
	for _, n := range []int32{1, 2, 3} {
		eff = a.Votes(n, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: 1, OK: true, LogEnd: 7}}}, t0)
	}
	commit(im, eff)
	a.SetImage(im.Clone(), t0)
	if movable, _, _ := a.ShuttingDown(1, im.Nodes[1].Incarnation, t0); movable != 0 {
		t.Fatalf("p0 elected on 2: %d movable; want 0", movable)
	}
}

// An election that no transfer began (its leader failed) counts as still to move for every
// stopping replica it may need a vote from: told 0, a node stopped while the election waited,
// and with another gone too the partition stayed leaderless until the quorum came back, where
// Kafka keeps a leader on the last node (a one-node ISR).
func TestControlledShutdownWaitsForRunningElections(t *testing.T) {
	im := cluster3(t) // p0: replicas 1 2 3, led by 1; node 3 leads nothing
	p0 := PartitionRef{TopicID{1}, 0}
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{p0, 0}}}})
	a.SetImage(im.Clone(), t0)
	if movable, _, _ := a.ShuttingDown(3, im.Nodes[3].Incarnation, t0); movable != 1 {
		t.Fatalf("p0's election undecided: node 3 (leading nothing) stopping has %d movable; want 1", movable)
	}
	var eff Effects
	for _, n := range []int32{1, 2, 3} {
		eff = a.Votes(n, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: 1, OK: true, LogEnd: 7}}}, t0)
	}
	commit(im, eff)
	a.SetImage(im.Clone(), t0)
	if _, p, _ := im.Partition(p0.Topic, p0.Partition); p.Leader < 0 || p.Leader == 3 {
		t.Fatalf("p0 elected %d; want a leader that is not stopping", p.Leader)
	}
	if movable, _, _ := a.ShuttingDown(3, im.Nodes[3].Incarnation, t0); movable != 0 {
		t.Fatalf("p0 elected: %d movable; want 0", movable)
	}
}

// A node's vote of an earlier incarnation does not count: it described a log the node may have
// lost since (a machine crash loses what was appended but not synced), and a node that voted
// (LogEnd 100), crashed, came back with less and re-registered was elected with its old vote
// as the preferred replica among "equal" logs, losing committed records.
func TestVoteOfAnEarlierIncarnationIsForgotten(t *testing.T) {
	im := cluster3(t) // p0: replicas 1 2 3, led by 1, preferred 1
	p0 := PartitionRef{TopicID{1}, 0}
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{p0, 0}}}})
	a.SetImage(im.Clone(), t0)
	a.Votes(1, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: 1, OK: true, LogEnd: 100}}}, t0)
	// Node 1 restarts and registers again (a new incarnation); its partitions lose nothing
	// else in the image.
	Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 1, KafkaHost: "h", KafkaPort: 9001, ClusterAddr: "a"}})
	eff := a.SetImage(im.Clone(), t0.Add(10*time.Millisecond))
	if r := eff.Votes[1]; r == nil {
		t.Errorf("node 1 re-registered: vote requests %v; want it asked again", eff.Votes)
	}
	_, p, _ := im.Partition(p0.Topic, p0.Partition)
	last := a.Votes(2, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: p.LeaderEpoch, OK: true, LogEnd: 100}}}, t0.Add(time.Second))
	if c := proposed(last, OpElect); c != nil && c.Elect.Items[0].Leader == 1 {
		t.Fatalf("elected node 1 on the vote of its earlier incarnation: %+v", c.Elect.Items[0])
	}
}

// A reassignment to a new target drops a leader that is no longer among the hosts, and keeps
// only hosts in the ISR (command level 3): the leader stayed, though its node deleted its copy,
// and the partition was offline until that node was fenced. Below level 3 the old rule stands,
// as every node applies the same.
func TestReassignAwayFromTheLeader(t *testing.T) {
	for _, level := range []int{LevelReassignHosts - 1, LevelReassignHosts} {
		im := cluster3(t)
		for n := int32(4); n <= 6; n++ {
			Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: n, KafkaHost: "h", KafkaPort: 9000 + n, ClusterAddr: "a"}})
		}
		im.Level = level
		p0 := PartitionRef{TopicID{1}, 0}
		apply := func(c *Command) {
			t.Helper()
			if r := Apply(im, im.Index+1, c); r.Err != nil {
				t.Fatalf("%s: %v", c.Op, r.Err)
			}
		}
		apply(&Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: p0, Target: []int32{4, 5, 6}}})
		apply(&Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{p0, 0}}}})
		apply(&Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: p0, Epoch: 1, Leader: 4}}}})
		apply(&Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: p0, Epoch: 1, ISR: []int32{4, 1, 2, 3, 5, 6}}}}})
		apply(&Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: p0, Target: []int32{1, 2, 3}}}) // back: Target = Replicas
		_, p, _ := im.Partition(p0.Topic, p0.Partition)
		hosts := p.Hosts()
		inHosts := p.Leader < 0 || slices.Contains(hosts, p.Leader)
		isrOK := !slices.ContainsFunc(p.ISR, func(n int32) bool { return !slices.Contains(hosts, n) })
		if level >= LevelReassignHosts && (!inHosts || !isrOK) {
			t.Errorf("level %d: leader %d, ISR %v, hosts %v; want the leader among the hosts (or none) and the ISR within them", level, p.Leader, p.ISR, hosts)
		}
		if level < LevelReassignHosts && p.Leader != 4 {
			t.Errorf("level %d: leader %d; the old rule keeps 4", level, p.Leader)
		}
	}
}

// A vote sent by an earlier incarnation but read only after the node registered again does
// not count for the new one: the reply names the incarnation that voted.
func TestLateVoteOfAnEarlierIncarnation(t *testing.T) {
	im := cluster3(t) // p0: replicas 1 2 3, led by 1, preferred 1
	p0 := PartitionRef{TopicID{1}, 0}
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{p0, 0}}}})
	a.SetImage(im.Clone(), t0)
	old := im.Nodes[1].Incarnation
	Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 1, KafkaHost: "h", KafkaPort: 9001, ClusterAddr: "a"}})
	a.SetImage(im.Clone(), t0.Add(10*time.Millisecond))
	if im.Nodes[1].Incarnation == old {
		t.Fatal("registering again kept the incarnation")
	}
	_, p, _ := im.Partition(p0.Topic, p0.Partition)
	at := t0.Add(time.Second)
	a.Votes(1, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: p.LeaderEpoch, OK: true, LogEnd: 100}}, Incarnation: old}, at)
	last := a.Votes(2, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: p.LeaderEpoch, OK: true, LogEnd: 100}}, Incarnation: im.Nodes[2].Incarnation}, at)
	if c := proposed(last, OpElect); c != nil && c.Elect.Items[0].Leader == 1 {
		t.Fatalf("elected node 1 on a vote of its earlier incarnation: %+v", c.Elect.Items[0])
	}
	// The new incarnation's vote counts.
	last = a.Votes(1, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: p.LeaderEpoch, OK: true, LogEnd: 100}}, Incarnation: im.Nodes[1].Incarnation}, at.Add(time.Second))
	if c := proposed(last, OpElect); c == nil || c.Elect.Items[0].Leader != 1 {
		t.Fatalf("the new incarnation's vote: proposed %+v; want node 1 (preferred, as up to date) elected", c)
	}
}

// An election without a majority of live replicas cannot be decided: a stopping node does not
// wait for it (a whole cluster stopping at once would wait out the stall timeout on each node).
func TestControlledShutdownSkipsUndecidableElections(t *testing.T) {
	im := cluster3(t) // p0: replicas 1 2 3, led by 1; node 3 leads nothing
	p0 := PartitionRef{TopicID{1}, 0}
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{p0, 0}}}})
	Apply(im, im.Index+1, &Command{Op: OpFence, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
	Apply(im, im.Index+1, &Command{Op: OpFence, Fence: &Fence{Node: 2, Incarnation: im.Nodes[2].Incarnation}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	a.SetImage(im.Clone(), t0)
	if movable, _, _ := a.ShuttingDown(3, im.Nodes[3].Incarnation, t0); movable != 0 {
		t.Fatalf("p0's election with nodes 1 and 2 fenced: node 3 stopping has %d movable; want 0", movable)
	}
}

// Nor for one a live replica refused (its log failed): with node 1 fenced and node 2's vote
// not OK, two OK votes of three can no longer come.
func TestControlledShutdownSkipsElectionsARefusalDecided(t *testing.T) {
	im := cluster3(t) // p0: replicas 1 2 3, led by 1; node 3 leads nothing
	p0 := PartitionRef{TopicID{1}, 0}
	Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{p0, 0}}}})
	Apply(im, im.Index+1, &Command{Op: OpFence, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	a.SetImage(im.Clone(), t0)
	if movable, _, _ := a.ShuttingDown(3, im.Nodes[3].Incarnation, t0); movable != 1 {
		t.Fatalf("p0's election, node 2 yet to vote: node 3 stopping has %d movable; want 1", movable)
	}
	a.Votes(2, &VoteReply{Votes: []Vote{{PartitionRef: p0, Epoch: 1, OK: false}}}, t0)
	if movable, _, _ := a.ShuttingDown(3, im.Nodes[3].Incarnation, t0); movable != 0 {
		t.Fatalf("p0's election, node 2 refused: node 3 stopping has %d movable; want 0", movable)
	}
}
