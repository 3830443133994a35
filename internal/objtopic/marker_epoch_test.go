package objtopic

import (
	"errors"
	"testing"

	"github.com/runnel-dev/runnel/internal/txn"
)

// TestAheadAfterAMarkersEpoch: with MarkerEpochAhead (command level 5), after a transaction
// version 2 marker bumped the producer's
// epoch, the new epoch's sequence 1 committed before its sequence 0 (the two batches' files
// came from different processes) is ahead of its predecessor, as a new epoch's batch not at 0
// is when the epoch came from a batch: refused with the retriable ErrSequenceAhead, not
// OUT_OF_ORDER_SEQUENCE_NUMBER (which makes the producer bump its epoch, fatal for a
// transactional one).
func TestAheadAfterAMarkersEpoch(t *testing.T) {
	p := NewPartition()
	p.EpochStartFollows, p.MarkerEpochAhead = true, true
	e := IndexEntry{Length: 100}
	if r := p.Commit("f0", e, []BatchMeta{{Records: 1, ProducerID: 7, Transactional: true}}); r[0].Err != nil {
		t.Fatal(r)
	}
	if _, err := p.AppendMarker(txn.Marker{ProducerID: 7, Epoch: 1, Commit: true, CoordinatorEpoch: 0}, 10); err != nil {
		t.Fatal(err)
	}
	// The next transaction, epoch 1: its sequence 1 comes first.
	r := p.Commit("f2", e, []BatchMeta{{Records: 1, ProducerID: 7, Epoch: 1, FirstSeq: 1, Transactional: true}})
	if !errors.Is(r[0].Err, ErrSequenceAhead) {
		t.Errorf("epoch 1 sequence 1 before sequence 0, the epoch from a marker: %v; want ErrSequenceAhead", r[0].Err)
	}
	// The same with the epoch from a batch (for comparison): retriable.
	q := NewPartition()
	q.Commit("f0", e, []BatchMeta{{Records: 1, ProducerID: 8}})
	r = q.Commit("f1", e, []BatchMeta{{Records: 1, ProducerID: 8, Epoch: 1, FirstSeq: 1}})
	if !errors.Is(r[0].Err, ErrSequenceAhead) {
		t.Errorf("epoch 1 sequence 1 before sequence 0, the epoch from a batch: %v; want ErrSequenceAhead", r[0].Err)
	}
}
