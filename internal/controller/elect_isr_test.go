package controller

import (
	"slices"
	"testing"
)

// TestElectKeepsISR: from level 12 a clean election keeps the ISR's live members (Kafka's
// PartitionChangeBuilder keeps the ISR over an election), leaving out fenced nodes and nodes in
// controlled shutdown; an unclean election's ISR is its leader alone; below level 12 every
// election's ISR is its leader alone.
func TestElectKeepsISR(t *testing.T) {
	ref := PartitionRef{Topic: TopicID{1}, Partition: 0} // replicas 1, 2, 3; led by 1
	for _, c := range []struct {
		what  string
		level int
		setup func(im *Image, apply func(*Command) Result)
		elect ElectItem // Epoch filled in
		want  []int32
	}{
		{"the leader fenced", LevelElectKeepsISR,
			func(im *Image, apply func(*Command) Result) {
				apply(&Command{Op: OpFence, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
			},
			ElectItem{Leader: 3}, []int32{2, 3}},
		{"the leader fenced, below level 12", LevelElectKeepsISR - 1,
			func(im *Image, apply func(*Command) Result) {
				apply(&Command{Op: OpFence, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
			},
			ElectItem{Leader: 3}, []int32{3}},
		{"a live leader's election (a transfer) keeps the old leader", LevelElectKeepsISR,
			func(im *Image, apply func(*Command) Result) {
				apply(&Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{PartitionRef: ref, Epoch: 0}}}})
			},
			ElectItem{Leader: 2}, []int32{1, 2, 3}},
		{"a follower fenced meanwhile", LevelElectKeepsISR,
			func(im *Image, apply func(*Command) Result) {
				apply(&Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{PartitionRef: ref, Epoch: 0}}}})
				im.Nodes[3].Fenced = true // after the election began, as a fence that found no ISR to leave
			},
			ElectItem{Leader: 2}, []int32{1, 2}},
		{"a follower in controlled shutdown", LevelElectKeepsISR,
			func(im *Image, apply func(*Command) Result) {
				apply(&Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{PartitionRef: ref, Epoch: 0}}}})
				im.Nodes[1].ShuttingDown = true
			},
			ElectItem{Leader: 2}, []int32{2, 3}},
		{"an unclean election", LevelElectKeepsISR,
			func(im *Image, apply func(*Command) Result) {
				apply(&Command{Op: OpFence, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
				apply(&Command{Op: OpFence, Fence: &Fence{Node: 2, Incarnation: im.Nodes[2].Incarnation}})
				_, p, _ := im.Partition(ref.Topic, ref.Partition)
				p.ISR = []int32{2, 3} // as if node 2 had been left in it
				apply(&Command{Op: OpUncleanElection, UncleanElection: &BeginElection{Items: []EpochRef{{PartitionRef: ref, Epoch: p.LeaderEpoch}}}})
				im.Nodes[2].Fenced = false // back before the election, too late to vote
			},
			ElectItem{Leader: 3, Replicas: []int32{3}}, []int32{3}},
	} {
		t.Run(c.what, func(t *testing.T) {
			im := cluster3(t)
			im.Level = c.level
			idx := im.Index + 100
			apply := func(cmd *Command) Result { idx++; return Apply(im, idx, cmd) }
			if _, p, _ := im.Partition(ref.Topic, ref.Partition); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1, 2, 3}) {
				t.Fatalf("before: leader %d, ISR %v; want 1, [1 2 3]", p.Leader, p.ISR)
			}
			c.setup(im, apply)
			_, p, _ := im.Partition(ref.Topic, ref.Partition)
			if p.Leader != -1 {
				t.Fatalf("no election pending: leader %d", p.Leader)
			}
			it := c.elect
			it.PartitionRef, it.Epoch = ref, p.LeaderEpoch
			apply(&Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{it}}})
			_, p, _ = im.Partition(ref.Topic, ref.Partition)
			if p.Leader != it.Leader || !slices.Equal(p.ISR, c.want) {
				t.Fatalf("after the election: leader %d, ISR %v; want %d, %v", p.Leader, p.ISR, it.Leader, c.want)
			}
		})
	}
}

// TestSetISRDropsFenced: from level 13 a leader's report naming a fenced follower leaves it
// out, as Kafka's AlterPartition refuses fenced replicas; the fence took it out of the ISR, and
// a paused follower's leader (which still counts it in sync on an idle partition) must not put
// it back. Below level 13 the report is taken as it is. Once unfenced it may join again.
func TestSetISRDropsFenced(t *testing.T) {
	ref := PartitionRef{Topic: TopicID{1}, Partition: 0} // replicas 1, 2, 3; led by 1
	for _, c := range []struct {
		level int
		want  []int32
	}{{LevelISRNotFenced, []int32{1, 2}}, {LevelISRNotFenced - 1, []int32{1, 2, 3}}} {
		im := cluster3(t)
		im.Level = c.level
		idx := im.Index + 100
		apply := func(cmd *Command) Result { idx++; return Apply(im, idx, cmd) }
		apply(&Command{Op: OpFence, Fence: &Fence{Node: 3, Incarnation: im.Nodes[3].Incarnation}})
		_, p, _ := im.Partition(ref.Topic, ref.Partition)
		if !slices.Equal(p.ISR, []int32{1, 2}) {
			t.Fatalf("level %d: after the fence ISR %v, want [1 2]", c.level, p.ISR)
		}
		pe := p.PartitionEpoch
		apply(&Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: p.LeaderEpoch, ISR: []int32{1, 2, 3}, PartitionEpoch: &pe}}}})
		if _, p, _ = im.Partition(ref.Topic, ref.Partition); !slices.Equal(p.ISR, c.want) {
			t.Fatalf("level %d: the leader reported node 3 fenced in sync: ISR %v, want %v", c.level, p.ISR, c.want)
		}
		apply(&Command{Op: OpUnfence, Fence: &Fence{Node: 3, Incarnation: im.Nodes[3].Incarnation}})
		pe = p.PartitionEpoch
		apply(&Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: p.LeaderEpoch, ISR: []int32{1, 2, 3}, PartitionEpoch: &pe}}}})
		if _, p, _ = im.Partition(ref.Topic, ref.Partition); !slices.Equal(p.ISR, []int32{1, 2, 3}) {
			t.Fatalf("level %d: unfenced and reported in sync: ISR %v, want [1 2 3]", c.level, p.ISR)
		}
	}
}
