package replica

import (
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
)

// TestAckDoesNotWaitForTheLeadersLock: a leader's append holds its lock through the write, which
// on a slow disk lasts an fsync. The followers' acknowledgements that come meanwhile do not wait
// for it: they are queued, and the frame handler, which carries the follower's frames of every
// partition in order, goes on. Once the lock is free they are taken, in order, and the high
// watermark moves.
func TestAckDoesNotWaitForTheLeadersLock(t *testing.T) {
	s := newSim(t, 3, false)
	defer s.close()
	s.settle()
	lead := s.nodes[s.leader]
	r := lead.m.Get(s.ref)
	recs := batch.AppendRecord(nil, 0, 0, nil, []byte("x"), 0, nil)
	b := batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1,
		BaseTimestamp: 1, MaxTimestamp: 1}, recs)
	if _, _, err := r.Append(b); err != nil {
		t.Fatal(err)
	}
	lead.log.SyncSoon()
	for lead.log.DurableOffset() < lead.log.EndOffset() {
		time.Sleep(time.Millisecond)
	}
	end := lead.log.EndOffset()

	r.mu.Lock() // a slow append of the leader's
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		for range 50 { // the append reaches the followers, their acknowledgements the leader
			s.deliverAll()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	select {
	case <-delivered:
	case <-time.After(10 * time.Second):
		r.mu.Unlock()
		t.Fatal("an acknowledgement waited for the leader's lock")
	}
	r.ackMu.Lock()
	queued := len(r.acks)
	r.ackMu.Unlock()
	r.mu.Unlock()
	if queued == 0 {
		t.Fatal("no acknowledgement queued while the leader's lock was held")
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.HighWatermark() < end {
		if time.Now().After(deadline) {
			t.Fatalf("high watermark %d; want %d once the queued acknowledgements are taken", r.HighWatermark(), end)
		}
		s.deliverAll()
		time.Sleep(time.Millisecond)
	}
}

// TestTickerPassesOverABusyReplica: the ticker's round does not wait for a replica whose lock a
// slow write holds (it would hold every other replica's resends and ISR reports behind it); the
// next round ticks it.
func TestTickerPassesOverABusyReplica(t *testing.T) {
	s := newSim(t, 4, false)
	defer s.close()
	s.settle()
	lead := s.nodes[s.leader]
	r := lead.m.Get(s.ref)
	r.mu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead.m.tick(s.now.Add(time.Second), true)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		r.mu.Unlock()
		t.Fatal("the ticker's round waited for a busy replica")
	}
	r.mu.Unlock()
}
