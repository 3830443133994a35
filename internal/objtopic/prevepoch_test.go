package objtopic

import (
	"encoding/json"
	"testing"
)

// TestLazyRetryAfterEpochBump: a lazy batch journaled twice (its first file's answer was lost,
// the producer retried it through another process: both copies acknowledged) is stored once,
// also when the producer's next epoch was committed between the two copies' commits (Ripcord:
// the first copy's file waits for the slow path). With KeepPrevEpoch (command level 5) the
// previous epoch's ranges recognize it, on a partition reloaded from its snapshot too; below
// it, the second copy is stored again, as every version before did.
func TestLazyRetryAfterEpochBump(t *testing.T) {
	for _, keep := range []bool{false, true} {
		p := NewPartition()
		p.EpochStartFollows, p.KeepPrevEpoch = true, keep
		b0 := BatchMeta{Records: 3, ProducerID: 7, Epoch: 0, FirstSeq: 0, MaxTimestamp: 1}
		// The retry's copy (file B) commits first.
		if r := p.CommitLazy("B", IndexEntry{}, []BatchMeta{b0}); r[0].Err != nil || r[0].Duplicate {
			t.Fatalf("first copy: %+v", r)
		}
		// The producer bumped its epoch (KIP-360) and produced on.
		if r := p.Commit("C", IndexEntry{}, []BatchMeta{{Records: 1, ProducerID: 7, Epoch: 1, FirstSeq: 0, MaxTimestamp: 2}}); r[0].Err != nil {
			t.Fatalf("next epoch: %+v", r)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q := new(Partition)
		if err := json.Unmarshal(b, q); err != nil {
			t.Fatal(err)
		}
		q.EpochStartFollows, q.KeepPrevEpoch = true, keep
		// The first copy (file A, committed later by the slow path), live and after a reload.
		for name, x := range map[string]*Partition{"live": p, "reloaded": q} {
			r := x.CommitLazy("A", IndexEntry{}, []BatchMeta{b0})
			switch {
			case keep && (!r[0].Duplicate || r[0].Err != nil || x.Next != 4):
				t.Errorf("%s: the second copy of an acknowledged batch: %+v, next %d; want a duplicate, next 4", name, r[0], x.Next)
			case !keep && (r[0].Duplicate || x.Next != 7):
				t.Errorf("%s, below level 5: %+v, next %d; want it stored again (next 7), as older versions do", name, r[0], x.Next)
			}
		}
	}
}
