package controller

import (
	"slices"
	"testing"
	"time"
)

// TestReassignReorderAppliesAtOnce: from LevelReorderAtOnce a reassignment to the same replicas
// in another order takes effect at once, as Kafka's changePartitionReassignment completes one
// that "merely rearranges existing replicas": the new order, the leader kept, the ISR kept, no
// move; the first replica is then the preferred leader, which balancing moves the leadership
// to. With a move in progress it ends the move. Below the level it ran as a move (Target set),
// which finished only once the leader reported the same replicas in sync.
func TestReassignReorderAppliesAtOnce(t *testing.T) {
	for _, level := range []int{LevelReorderAtOnce - 1, LevelReorderAtOnce} {
		im := cluster3(t) // p0: replicas 1 2 3, led by 1; p1: 2 3 1, led by 2
		Apply(im, im.Index+1, &Command{Op: OpRegister, Register: &Register{Node: 4, KafkaHost: "h", KafkaPort: 9004, ClusterAddr: "a"}})
		im.Level = level
		p0, p1 := PartitionRef{TopicID{1}, 0}, PartitionRef{TopicID{1}, 1}
		part := func(ref PartitionRef) *Partition { _, p, _ := im.Partition(ref.Topic, ref.Partition); return p }
		apply := func(c *Command) {
			t.Helper()
			if r := Apply(im, im.Index+1, c); r.Err != nil {
				t.Fatalf("level %d: %s: %v", level, c.Op, r.Err)
			}
		}

		apply(&Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: p0, Target: []int32{3, 1, 2}}})
		p := part(p0)
		if level < LevelReorderAtOnce {
			if !slices.Equal(p.Target, []int32{3, 1, 2}) || !slices.Equal(p.Replicas, []int32{1, 2, 3}) {
				t.Errorf("level %d: reorder of [1 2 3] to [3 1 2]: replicas %v, target %v; the old rule runs it as a move", level, p.Replicas, p.Target)
			}
			continue
		}
		if !slices.Equal(p.Replicas, []int32{3, 1, 2}) || p.Target != nil || p.Leader != 1 || p.LeaderEpoch != 0 || !slices.Equal(p.ISR, []int32{1, 2, 3}) {
			t.Fatalf("level %d: reorder of [1 2 3] to [3 1 2]: %+v; want replicas [3 1 2], no target, leader 1 in epoch 0, ISR [1 2 3]", level, p)
		}
		if got := p.Preferred(); got != 3 {
			t.Errorf("level %d: preferred leader %d after the reorder; want 3", level, got)
		}

		// Balancing moves p0's leadership to its new first replica; nothing is left to finish.
		cfg := testActiveConfig()
		cfg.BalanceInterval = time.Second
		a := NewActive(cfg, im.Clone(), t0)
		now := t0.Add(2 * time.Second)
		for _, n := range []int32{1, 2, 3, 4} {
			a.Heartbeat(n, im.Nodes[n].Incarnation, now)
		}
		eff := a.Tick(now)
		if proposed(eff, OpFinishReassign) != nil {
			t.Errorf("level %d: a finish-reassign proposed after a reorder: %+v", level, eff.Propose)
		}
		if tr := eff.Transfers[1]; len(tr) != 1 || tr[0].PartitionRef != p0 || tr[0].Target != 3 {
			t.Errorf("level %d: balancing after the reorder: %+v; want p0 moved from 1 to 3", level, eff.Transfers)
		}

		// A move in progress (p1 to 4 3 1), then a reorder of the replicas it had: the move
		// ends at once, 4 out of the ISR.
		apply(&Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: p1, Target: []int32{4, 3, 1}}})
		apply(&Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: p1, Epoch: 0, ISR: []int32{1, 2, 3, 4}}}}})
		apply(&Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: p1, Target: []int32{1, 3, 2}}})
		if p = part(p1); !slices.Equal(p.Replicas, []int32{1, 3, 2}) || p.Target != nil || p.Leader != 2 || slices.Contains(p.ISR, 4) {
			t.Errorf("level %d: reorder during a move: %+v; want replicas [1 3 2], no target, leader 2, 4 out of the ISR", level, p)
		}
	}
}
