package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestDropLeavesInFlightAcksToTheWrite: a share-partition dropped (its leadership moved) while a
// share-state write is in flight answers at once only the acknowledgements that write does not
// hold; those it holds wait for its outcome, since it may still be stored and the records
// settled for good (a new leader loads it). They were answered NOT_LEADER_OR_FOLLOWER, and a
// client told its acknowledgement failed never saw the records again.
func TestDropLeavesInFlightAcksToTheWrite(t *testing.T) {
	s := &shares{parts: map[shareKey]*sharePart{}}
	k := shareKey{group: "g"}
	sp := &sharePart{key: k, wake: make(chan struct{}), persisting: true, persistUpTo: 5}
	held, later := ackWaiter{op: 5, ch: make(chan error, 1)}, ackWaiter{op: 6, ch: make(chan error, 1)}
	sp.waiters = []ackWaiter{held, later}
	s.parts[k] = sp
	s.dropLocked(sp, kerr.NotLeaderForPartition)
	if _, ok := s.parts[k]; ok {
		t.Fatal("the share-partition is still kept")
	}
	select {
	case err := <-later.ch:
		if !errors.Is(err, kerr.NotLeaderForPartition) {
			t.Fatalf("the acknowledgement past the write: %v; want NOT_LEADER_OR_FOLLOWER", err)
		}
	default:
		t.Fatal("the acknowledgement past the write is not answered")
	}
	select {
	case err := <-held.ch:
		t.Fatalf("the acknowledgement the write holds was answered %v before the write ended", err)
	default:
	}
	if len(sp.waiters) != 1 || sp.waiters[0].op != 5 {
		t.Fatalf("waiters left for the write: %+v; want op 5", sp.waiters)
	}
	// With no write in flight, every one is answered.
	sp.persisting = false
	s.dropLocked(sp, kerr.NotLeaderForPartition)
	if err := <-held.ch; !errors.Is(err, kerr.NotLeaderForPartition) || len(sp.waiters) != 0 {
		t.Fatalf("with no write in flight: %v, %d left", err, len(sp.waiters))
	}
}
