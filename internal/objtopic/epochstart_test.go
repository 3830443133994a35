package objtopic

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestEpochStartAfterItsSuccessor: a producer the partition does not know (new to it, or its
// state expired) has its first batch (sequence 0-9) fail at one process (a switch into Ripcord
// mode, or a metadata leader moving) while its next one (10-19) is committed first, eagerly or
// lazily: Kafka's rule takes that one at any sequence. The retry of 0-9, never stored, is
// stored (after its successor) rather than answered OUT_OF_ORDER_SEQUENCE_NUMBER, on which the
// client would bump its epoch and send its unanswered batches again; a second retry of it is a
// duplicate; the producer's stream goes on. Below the command level that allows it (the flag
// off), the old answer stays.
func TestEpochStartAfterItsSuccessor(t *testing.T) {
	for _, lazyFirst := range []bool{true, false} {
		for _, on := range []bool{true, false} {
			p := NewPartition()
			p.EpochStartFollows = on
			b := func(seq, n int32) []BatchMeta {
				return []BatchMeta{{Records: n, ProducerID: 11, Epoch: 0, FirstSeq: seq}}
			}
			commitFirst := p.Commit
			if lazyFirst {
				commitFirst = p.CommitLazy
			}
			if r := commitFirst("later", IndexEntry{}, b(10, 10)); r[0].Err != nil || r[0].Duplicate {
				t.Fatalf("lazy %v: 10-19 first: %+v", lazyFirst, r)
			}
			r := p.Commit("retry", IndexEntry{}, b(0, 10))
			if !on {
				if !errors.Is(r[0].Err, kerr.OutOfOrderSequenceNumber) {
					t.Fatalf("lazy %v, below the level: 0-9 after 10-19: %+v; want OUT_OF_ORDER_SEQUENCE_NUMBER as before", lazyFirst, r)
				}
				continue
			}
			if r[0].Err != nil || r[0].Duplicate || r[0].Base != 10 {
				t.Fatalf("lazy %v: the first batch 0-9 after 10-19: %+v; want it stored at offset 10", lazyFirst, r)
			}
			if r := p.Commit("retry-again", IndexEntry{}, b(0, 10)); r[0].Err != nil || !r[0].Duplicate {
				t.Fatalf("lazy %v: 0-9 retried again: %+v; want a duplicate", lazyFirst, r)
			}
			if r := p.Commit("next", IndexEntry{}, b(20, 10)); r[0].Err != nil || r[0].Duplicate || r[0].Base != 20 {
				t.Fatalf("lazy %v: 20-29 after: %+v; want it stored at offset 20", lazyFirst, r)
			}
		}
	}
}

// TestEpochStartAfterDroppedRanges: once more ranges of an epoch were committed than the
// partition keeps (the lowest dropped), a batch starting the epoch may be one of those dropped:
// it is not taken as in sequence.
func TestEpochStartAfterDroppedRanges(t *testing.T) {
	p := NewPartition()
	p.EpochStartFollows = true
	for i := range int32(maxLazyRanges + 2) { // 10, 12, 14, ...: a range each
		if r := p.CommitLazy("gap", IndexEntry{}, []BatchMeta{{Records: 1, ProducerID: 12, Epoch: 0, FirstSeq: 10 + 2*i}}); r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
	}
	r := p.Commit("retry", IndexEntry{}, []BatchMeta{{Records: 5, ProducerID: 12, Epoch: 0, FirstSeq: 0}})
	if r[0].Err == nil || r[0].Duplicate {
		t.Fatalf("0-4 after ranges were dropped: %+v; want it refused", r)
	}
}
