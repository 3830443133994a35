package replica

import (
	"slices"
	"testing"
)

// TestISRKeptWhileFollowersJoin: after a clean election that kept the ISR (the controller's
// level 12, as Kafka keeps the ISR over an election), the new leader does not report its
// followers out of sync while they join its epoch; one that has not joined by the end of the
// join grace is reported out. Before, the first report shrank the ISR to the leader alone.
func TestISRKeptWhileFollowersJoin(t *testing.T) {
	s := newSim(t, 3, false)
	defer s.close()
	s.settle()
	for range 10 {
		s.deliverAll()
		s.tick()
	}
	all := []int32{1, 2, 3}
	if !slices.Equal(s.isr, all) {
		t.Fatalf("settled ISR %v; want %v", s.isr, all)
	}
	old := s.leader
	var others []int32
	for _, id := range all {
		if id != s.leader {
			others = append(others, id)
		}
	}
	next, lost := others[0], others[1]
	s.mu.Lock()
	s.nodes[lost].isolated = true // never joins the new epoch, though the controller thinks it live
	s.mu.Unlock()
	s.electHint(next)
	if s.leader != next {
		t.Fatalf("elected %d; want %d", s.leader, next)
	}
	s.isr = slices.Clone(all) // the election kept the ISR
	for _, n := range s.ordered() {
		s.assign(n)
	}
	for range 5 { // an ISR check, within the grace, before any follower joined
		s.tick()
	}
	if !slices.Equal(s.isr, all) {
		t.Fatalf("ISR %v before the followers joined; want %v kept", s.isr, all)
	}
	for range 5 { // the old leader joins as a follower; the grace has not passed
		s.deliverAll()
		s.tick()
	}
	if !slices.Equal(s.isr, all) {
		t.Fatalf("ISR %v with one follower joined, within the grace; want %v", s.isr, all)
	}
	for range 20 { // past the grace
		s.deliverAll()
		s.tick()
	}
	want := []int32{min(old, next), max(old, next)}
	if !slices.Equal(s.isr, want) {
		t.Fatalf("ISR %v after the grace; want %v: node %d never joined", s.isr, want, lost)
	}
}
