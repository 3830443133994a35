package replica

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
)

// TestFollowerCatchesUpFromMidBatchLogStart: DeleteRecords may move the leader's log start into
// the middle of a batch (Kafka allows any offset up to the high watermark). A follower that must
// restart its log at the leader's log start (a new replica, or one far behind) never caught up:
// the leader sends the batch containing the start, whose base offset is below the follower's
// log end, the follower answered mismatch, joined again, and the same repeated forever. It now
// restarts its empty log at the batch's base offset, as Kafka's follower does
// (UnexpectedAppendOffsetException), and takes the leader's log start from the next append.
func TestFollowerCatchesUpFromMidBatchLogStart(t *testing.T) {
	s := newSim(t, 1, true)
	defer s.close()
	s.settle()
	lead := s.nodes[s.leader]
	base := lead.log.EndOffset()
	for i := range 3 { // [base, base+10), [base+10, base+20), [base+20, base+30)
		var recs []byte
		for j := range 10 {
			recs = batch.AppendRecord(recs, 0, int32(j), nil, []byte(fmt.Sprintf("b%d-%d", i, j)), 0, nil)
		}
		b := batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 10,
			LastOffsetDelta: 9, BaseTimestamp: 1, MaxTimestamp: 1}, recs)
		if _, _, err := lead.m.Get(s.ref).Append(b); err != nil {
			t.Fatal(err)
		}
	}
	s.settle()
	start, end := base+15, base+30 // DeleteRecords up to inside the batch [base+10, base+20)
	if err := lead.log.AdvanceStartOffset(start); err != nil {
		t.Fatal(err)
	}
	var f *simNode // a follower whose disk is replaced: it restarts its log at the leader's start
	for _, n := range s.ordered() {
		if n.id != s.leader && slices.Contains(s.hosts(), n.id) {
			f = n
			break
		}
	}
	s.wipe(f)
	s.settle() // fails (the replicas do not converge) while the follower cannot take the batch
	if got := f.log.EndOffset(); got != end {
		t.Fatalf("follower log end %d, want %d: the follower never catches up (leader log start %d, follower log start %d)",
			got, end, lead.log.StartOffset(), f.log.StartOffset())
	}
	for deadline := time.Now().Add(5 * time.Second); f.log.StartOffset() != start && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // the follower moves its log start on its own goroutine
	}
	if got := f.log.StartOffset(); got != start {
		t.Errorf("follower log start %d; want the leader's, %d", got, start)
	}
}
