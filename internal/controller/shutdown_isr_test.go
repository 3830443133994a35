package controller

import (
	"slices"
	"testing"
	"time"
)

// TestControlledShutdownLeavesISRs: from LevelControlledShutdown a node in controlled shutdown
// is recorded in the image (Kafka's InControlledShutdown) and leaves the ISR of every
// partition it follows, as Kafka's handleBrokerInControlledShutdown takes it out of every ISR;
// the partitions it leads keep it until their leadership has moved, and the new leader's ISR
// never takes it back (Kafka's AlterPartition refuses an ineligible replica). No new replica is
// placed on it, a new partition's first leader is another replica, and a new active
// controller knows it is stopping from the image. Its next registration ends it. Below the
// level nothing is proposed, and the op, if it came, changes nothing (older versions ignore
// it).
func TestControlledShutdownLeavesISRs(t *testing.T) {
	for _, level := range []int{LevelControlledShutdown - 1, LevelControlledShutdown} {
		im := cluster3(t) // p0: replicas 1 2 3, led by 1; p1: 2 3 1, led by 2
		im.Level = level
		p0, p1 := PartitionRef{TopicID{1}, 0}, PartitionRef{TopicID{1}, 1}
		part := func(ref PartitionRef) *Partition { _, p, _ := im.Partition(ref.Topic, ref.Partition); return p }
		a := NewActive(testActiveConfig(), im.Clone(), t0)
		for _, n := range []int32{1, 2, 3} {
			a.Heartbeat(n, im.Nodes[n].Incarnation, t0)
		}
		_, _, eff := a.ShuttingDown(1, im.Nodes[1].Incarnation, t0)
		c := proposed(eff, OpControlledShutdown)
		if level < LevelControlledShutdown {
			if c != nil {
				t.Fatalf("level %d: controlled-shutdown proposed: %+v", level, c)
			}
			Apply(im, im.Index+1, &Command{Op: OpControlledShutdown, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
			if im.Nodes[1].ShuttingDown || !slices.Contains(part(p1).ISR, 1) {
				t.Fatalf("level %d: controlled-shutdown applied: node %+v, p1 ISR %v", level, im.Nodes[1], part(p1).ISR)
			}
			continue
		}
		if c == nil || c.Fence.Node != 1 || c.Fence.Incarnation != im.Nodes[1].Incarnation {
			t.Fatalf("level %d: node 1 stopping: proposed %+v; want its controlled-shutdown", level, eff.Propose)
		}
		if _, _, again := a.ShuttingDown(1, im.Nodes[1].Incarnation, t0.Add(100*time.Millisecond)); proposed(again, OpControlledShutdown) != nil {
			t.Fatal("controlled-shutdown proposed again before the retry interval")
		}
		before := part(p1).PartitionEpoch
		commit(im, eff)
		if !im.Nodes[1].ShuttingDown {
			t.Fatal("node 1 not marked as shutting down")
		}
		if p := part(p1); !slices.Equal(p.ISR, []int32{2, 3}) || p.PartitionEpoch != before+1 {
			t.Fatalf("p1, followed by 1: ISR %v, partition epoch %d; want [2 3], %d", p.ISR, p.PartitionEpoch, before+1)
		}
		if p := part(p0); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1, 2, 3}) {
			t.Fatalf("p0, led by 1: leader %d, ISR %v; want 1 and [1 2 3] until its leadership moves", p.Leader, p.ISR)
		}
		a.SetImage(im.Clone(), t0)
		if _, _, again := a.ShuttingDown(1, im.Nodes[1].Incarnation, t0.Add(time.Second)); proposed(again, OpControlledShutdown) != nil {
			t.Fatal("controlled-shutdown proposed again once applied")
		}

		// p1's leader still finds 1 caught up: its report does not take it back.
		pe := part(p1).PartitionEpoch
		Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: p1, Epoch: 0, ISR: []int32{1, 2, 3}, PartitionEpoch: &pe}}}})
		if p := part(p1); !slices.Equal(p.ISR, []int32{2, 3}) {
			t.Fatalf("p1 after its leader reported [1 2 3]: ISR %v; want [2 3]", p.ISR)
		}

		// p0's leadership moves to 2; its new leader's ISR does not take 1 back either.
		Apply(im, im.Index+1, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{p0, 0}}}})
		Apply(im, im.Index+1, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: p0, Epoch: 1, Leader: 2}}}})
		pe = part(p0).PartitionEpoch
		Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: p0, Epoch: 1, ISR: []int32{1, 2, 3}, PartitionEpoch: &pe}}}})
		if p := part(p0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 3}) {
			t.Fatalf("p0 after the move and its new leader's report: leader %d, ISR %v; want 2, [2 3]", p.Leader, p.ISR)
		}

		// Placement leaves it out; a partition assigned to it first by hand is led by the next.
		if got := im.PlacementNodes(); !slices.Equal(got, []int32{2, 3}) {
			t.Fatalf("placement nodes %v; want [2 3]", got)
		}
		if r := Apply(im, im.Index+1, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "u", ID: TopicID{2}, Assignments: [][]int32{{1, 3, 2}}}}); r.Err != nil {
			t.Fatal(r.Err)
		}
		if _, p, _ := im.Partition(TopicID{2}, 0); p.Leader != 3 || !slices.Equal(p.ISR, []int32{3, 2}) {
			t.Fatalf("new partition on [1 3 2]: leader %d, ISR %v; want 3, [3 2]", p.Leader, p.ISR)
		}

		// A new active controller knows from the image: no leadership moves to node 1.
		b := NewActive(testActiveConfig(), im.Clone(), t0)
		for _, n := range []int32{1, 2, 3} {
			b.Heartbeat(n, im.Nodes[n].Incarnation, t0)
		}
		if ok, _ := b.Transfer(p1, 1, t0); ok {
			t.Fatal("a new active controller moved a leadership to the stopping node")
		}

		// Node 1 restarts: a new incarnation, no longer stopping.
		Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 1, KafkaHost: "h", KafkaPort: 9001, ClusterAddr: "a", Level: level}})
		pe = part(p1).PartitionEpoch
		Apply(im, im.Index+1, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: p1, Epoch: 0, ISR: []int32{1, 2, 3}, PartitionEpoch: &pe}}}})
		if im.Nodes[1].ShuttingDown || !slices.Equal(part(p1).ISR, []int32{1, 2, 3}) || !slices.Equal(im.PlacementNodes(), []int32{1, 2, 3}) {
			t.Fatalf("after node 1 registered again: %+v, p1 ISR %v, placement %v", im.Nodes[1], part(p1).ISR, im.PlacementNodes())
		}
	}
}

// TestControlledShutdownMovesObjectOwners: from LevelShutdownMovesOwners a node in controlled
// shutdown takes no object partition's Metadata leadership or share ownership (ObjectNodes
// leaves it out while another live node is not stopping) and the live nodes' index moves with
// it, fencing the share-state writes of the owner it was. Below the level neither changes:
// nodes of older versions apply the op without moving the index.
func TestControlledShutdownMovesObjectOwners(t *testing.T) {
	for _, level := range []int{LevelShutdownMovesOwners - 1, LevelShutdownMovesOwners} {
		im := cluster3(t)
		im.Level = level
		index := im.Index
		stop := func(node int32) {
			t.Helper()
			before := im.LiveIndex
			index++
			Apply(im, index, &Command{Op: OpControlledShutdown, Fence: &Fence{Node: node, Incarnation: im.Nodes[node].Incarnation}})
			if !im.Nodes[node].ShuttingDown {
				t.Fatalf("level %d: node %d not stopping", level, node)
			}
			if want := map[bool]uint64{false: before, true: index}[level >= LevelShutdownMovesOwners]; im.LiveIndex != want {
				t.Fatalf("level %d: live index %d after node %d's controlled shutdown at %d; want %d", level, im.LiveIndex, node, index, want)
			}
		}
		check := func(want []int32) {
			t.Helper()
			if got := im.ObjectNodes(); !slices.Equal(got, want) {
				t.Fatalf("level %d: object nodes %v; want %v", level, got, want)
			}
		}
		check([]int32{1, 2, 3})
		stop(1)
		if level < LevelShutdownMovesOwners {
			check([]int32{1, 2, 3})
			continue
		}
		check([]int32{2, 3})
		stop(2)
		check([]int32{3})
		stop(3)
		check([]int32{1, 2, 3}) // every live node stopping: they still serve, one of them leads
		index++
		Apply(im, index, &Command{Op: OpFence, Fence: &Fence{Node: 3, Incarnation: im.Nodes[3].Incarnation}})
		check([]int32{1, 2})
		index++
		Apply(im, index, &Command{Op: OpRegister, Register: &Register{Node: 1, ClusterAddr: "a", Run: "r1", Level: Level}})
		check([]int32{1}) // a new process of node 1, not stopping
		if c := im.Clone(); !slices.Equal(c.ObjectNodes(), []int32{1}) {
			t.Fatalf("a clone's object nodes %v; want [1]", c.ObjectNodes())
		}
	}
}

// TestFinalizingShutdownMovesOwnersMovesTheEpoch: raising the level to LevelShutdownMovesOwners
// while a node is already in controlled shutdown takes its object partitions' share ownership
// away (ObjectNodes): the live nodes' index, the owners' epoch, moves at the same entry. With no
// node stopping it does not move.
func TestFinalizingShutdownMovesOwnersMovesTheEpoch(t *testing.T) {
	for _, stopping := range []bool{false, true} {
		im := cluster3(t)
		im.Level = LevelShutdownMovesOwners - 1
		index := im.Index + 1
		if stopping {
			Apply(im, index, &Command{Op: OpControlledShutdown, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
			index++
		}
		before := im.LiveIndex
		nodes := map[int32]uint64{}
		for id, n := range im.Nodes {
			nodes[id] = n.Incarnation
		}
		Apply(im, index, &Command{Op: OpFinalizeLevel, FinalizeLevel: &FinalizeLevel{Level: LevelShutdownMovesOwners, Nodes: nodes}})
		if im.Level != LevelShutdownMovesOwners {
			t.Fatalf("level %d; want %d", im.Level, LevelShutdownMovesOwners)
		}
		want := before
		if stopping {
			want = index
		}
		if im.LiveIndex != want {
			t.Fatalf("node stopping %v: live index %d after the finalize at %d; want %d", stopping, im.LiveIndex, index, want)
		}
	}
}
