package replica

import (
	"slices"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
)

// TestMoveWaitsForAKeptTargetToJoin: a move [1 2 3] -> [2 3 4] whose target 4 caught up under
// leader L (so the image's ISR holds it), then was cut off from replication while its
// controller session stayed live; batches committed without it (2 and 3 are a quorum of the
// target). The controller moved the leadership to a target replica, and the election kept the
// ISR (level 12: L, 2, 3, 4). The new leader counted 4 in its reports while it joined the epoch,
// although a replica a move adds is in sync only once it has caught up: its target quorum (itself
// and 3) synced, it reported ISR [.. 4] with the target synced, and the controller finished the
// move, dropping the old replica that held every batch while 4 held none of the last ones. A
// replica a move adds is no longer counted while it joins.
func TestMoveWaitsForAKeptTargetToJoin(t *testing.T) {
	s := newSim(t, 1, true)
	defer s.close()
	s.settle()
	lead := s.leader
	old := slices.Clone(s.sets[0])
	if !slices.Contains(old, lead) || slices.Contains(old, 4) {
		t.Fatalf("setup: leader %d, replicas %v", lead, old)
	}
	target := slices.DeleteFunc(slices.Clone(old), func(n int32) bool { return n == lead })
	target = append(target, 4)
	tick := func() {
		s.now = s.now.Add(50 * time.Millisecond)
		for _, n := range s.ordered() {
			if n.up {
				n.m.Tick(s.now)
			}
		}
	}
	s.setSets([][]int32{old, target})
	for i := 0; !slices.Contains(s.isr, 4); i++ {
		if i > 400 {
			t.Fatalf("4 never reported in sync: ISR %v", s.isr)
		}
		s.deliverAll()
		tick()
		time.Sleep(100 * time.Microsecond)
	}
	s.mu.Lock()
	s.nodes[4].isolated = true // its replication is cut; the controller still sees it live
	s.mu.Unlock()
	r := s.nodes[lead].m.Get(s.ref)
	var end int64
	for i := range 3 {
		recs := batch.AppendRecord(nil, 0, 0, nil, []byte{byte('a' + i)}, 0, nil)
		b := batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1, BaseTimestamp: 1, MaxTimestamp: 1}, recs)
		res, _, err := r.Append(b)
		if err != nil {
			t.Fatal(err)
		}
		end = res.Last + 1
	}
	for i := 0; r.HighWatermark() < end; i++ {
		if i > 200 {
			t.Fatalf("not committed: hw %d, end %d", r.HighWatermark(), end)
		}
		s.deliverAll()
		time.Sleep(100 * time.Microsecond)
	}
	if !slices.Contains(s.isr, 4) {
		t.Fatalf("setup: 4 reported out already: %v", s.isr)
	}
	// The controller's transfer to a target replica: BeginElection, then elect, which from
	// level 12 keeps the ISR's live members (the old leader too).
	kept := slices.Clone(s.isr)
	s.electHint(target[0])
	if !slices.Contains(target, s.leader) {
		t.Fatalf("elected %d, not a target replica", s.leader)
	}
	s.isr = kept
	for _, n := range s.ordered() {
		s.assign(n)
	}
	for range 15 { // within JoinGrace (1 s)
		s.deliverAll()
		tick()
		time.Sleep(100 * time.Microsecond)
		if s.synced && !slices.ContainsFunc(target, func(n int32) bool { return !slices.Contains(s.isr, n) }) {
			if got := s.nodes[4].log.EndOffset(); got < end {
				t.Fatalf("leader %d reported ISR %v with the target %v synced: the controller finishes the move (dropping %d, which holds every batch) while target replica 4 never joined the epoch and ends at %d < committed %d",
					s.leader, s.isr, target, lead, got, end)
			}
		}
	}
}
