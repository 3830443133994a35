package objtopic

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestDroppedAgreesWithOlderSnapshots: lazyProducer.Dropped is state that versions before
// command level 4 never wrote into their snapshots, and EpochStartFollows (level 4) decides by
// it. Commits applied below level 4 do not set it, so a node that replayed them with this
// version and one that loaded an older version's snapshot taken after them agree; at level 4
// the same commit-file of the producer's sequence-0 batch is then stored, or refused, alike
// (it was refused on one and stored on the other: two images of the same log).
func TestDroppedAgreesWithOlderSnapshots(t *testing.T) {
	p := NewPartition() // below level 4, as applied before the upgrade
	lazy := func(seq int32) {
		t.Helper()
		if r := p.CommitLazy("f", IndexEntry{}, []BatchMeta{{Records: 1, ProducerID: 12, Epoch: 0, FirstSeq: seq}}); r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
	}
	for i := range int32(maxLazyRanges + 2) { // 10, 12, 14, ...: a range each; the lowest two are dropped
		lazy(10 + 2*i)
	}
	lazy(15) // fills a gap: 14-16 is one range, 63 ranges left
	if lp := p.lazy[12]; lp.Dropped || len(lp.Seqs) >= maxLazyRanges {
		t.Fatalf("below level 4: dropped %v, %d ranges; want no flag (older versions have none)", lp.Dropped, len(lp.Seqs))
	}

	// The same state as an older version's snapshot holds it: lazyProducer without "d".
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	old := bytes.ReplaceAll(b, []byte(`,"d":true`), nil)
	q := new(Partition)
	if err := json.Unmarshal(old, q); err != nil {
		t.Fatal(err)
	}
	if q.Next != p.Next {
		t.Fatalf("setup: next %d and %d", p.Next, q.Next)
	}

	// At level 4 both apply the same commit: the producer's first batch, 0-4.
	first := []BatchMeta{{Records: 5, ProducerID: 12, Epoch: 0, FirstSeq: 0}}
	p.EpochStartFollows, q.EpochStartFollows = true, true
	rp := p.Commit("retry", IndexEntry{}, first)
	rq := q.Commit("retry", IndexEntry{}, first)
	if p.Next != q.Next || (rp[0].Err == nil) != (rq[0].Err == nil) {
		t.Fatalf("the same commit on the same state: replayed node: %+v, next %d; node from an older snapshot: %+v, next %d",
			rp[0], p.Next, rq[0], q.Next)
	}
}
