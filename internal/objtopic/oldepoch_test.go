package objtopic

import "testing"

// An idempotent producer's lazy batch (epoch 0, sequences 3-5) is journaled twice (its first
// answer lost, the retry's answer lost too: both copies are in files of processes that died,
// which the slow path commits after the controller's return). The producer gave the batch up,
// bumped its epoch (KIP-360) and produced on through a live process, whose commit comes first.
// The two late copies are the same batch (producer id, epoch, sequences): from command level 7
// (TrackPrevEpoch) the second is a duplicate. Before, the first late copy of the previous
// epoch was kept untracked, and the second was stored again.
func TestOldEpochCopiesAfterBump(t *testing.T) {
	for _, track := range []bool{false, true} {
		p := NewPartition()
		p.EpochStartFollows, p.KeepPrevEpoch, p.MarkerEpochAhead, p.TrackPrevEpoch = true, true, true, track
		b := func(epoch int16, seq, n int32) BatchMeta {
			return BatchMeta{Records: n, ProducerID: 7, Epoch: epoch, FirstSeq: seq, MaxTimestamp: 1}
		}
		if r := p.Commit("e0", IndexEntry{}, []BatchMeta{b(0, 0, 3)}); r[0].Err != nil {
			t.Fatalf("epoch 0, 0-2: %+v", r)
		}
		if r := p.Commit("e1", IndexEntry{}, []BatchMeta{b(1, 0, 1)}); r[0].Err != nil {
			t.Fatalf("epoch 1, 0: %+v", r)
		}
		r1 := p.CommitLazy("slowA", IndexEntry{}, []BatchMeta{b(0, 3, 3)})
		if r1[0].Err != nil || r1[0].Duplicate {
			t.Fatalf("the first late copy (acknowledged, never stored): %+v; want it stored", r1)
		}
		r2 := p.CommitLazy("slowB", IndexEntry{}, []BatchMeta{b(0, 3, 3)})
		if track && (!r2[0].Duplicate || p.Next != 7) {
			t.Errorf("the second copy of the same batch (producer 7, epoch 0, sequences 3-5): %+v, next %d; want a duplicate, next 7 (3+1+3)", r2[0], p.Next)
		}
		if !track && (r2[0].Duplicate || p.Next != 10) {
			t.Errorf("below level 7: the second copy %+v, next %d; want it stored again (next 10), as older versions apply it", r2[0], p.Next)
		}
		// The epoch's earlier batches are still recognized, and the current epoch goes on.
		if r := p.CommitLazy("slowC", IndexEntry{}, []BatchMeta{b(0, 0, 3)}); !r[0].Duplicate {
			t.Errorf("track %v: a late copy of epoch 0's first batch: %+v; want a duplicate", track, r[0])
		}
		if r := p.Commit("e1b", IndexEntry{}, []BatchMeta{b(1, 1, 1)}); r[0].Err != nil || r[0].Duplicate {
			t.Errorf("track %v: epoch 1, 1: %+v; want stored", track, r[0])
		}
	}
}
