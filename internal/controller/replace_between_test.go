package controller

import (
	"errors"
	"fmt"
	"testing"

	"github.com/runnel-dev/runnel/internal/objtopic"
)

// TestReplaceChecksTheExtentsBetween: a merge planned over extents A, M, B while a compaction
// pass rewrote M is refused from command level 6 (replace-extents checks the extents between
// its first and last by their digest). Below level 6 every node applies it, as older versions
// do (they ignore the digest), and the records compaction removed from M come back.
func TestReplaceChecksTheExtentsBetween(t *testing.T) {
	for _, level := range []int{LevelReplaceBetween - 1, LevelReplaceBetween} {
		t.Run(fmt.Sprintf("level %d", level), func(t *testing.T) {
			im := withObjectTopic(t)
			im.Level = level
			run := objtopic.BatchMeta{Records: 10, Batches: 1, ProducerID: -1, MaxTimestamp: 5}
			for seq := uint64(1); seq <= 3; seq++ {
				if r := Apply(im, 10+seq, commitCmd("w1", seq, seq, section(0, run))); r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			planned := im.Topics["o"].Object(0).Clone().Extents
			if len(planned) != 3 {
				t.Fatalf("%d extents; want 3", len(planned))
			}
			// A compaction pass rewrites the middle extent (it kept some of its records).
			m := planned[1]
			compacted := &objtopic.Extent{File: "merged/compacted", Length: 50, Base: m.Base, Last: m.Last, Absolute: true, Clean: true}
			if r := Apply(im, 20, &Command{Op: OpReplaceExtents, ReplaceExtents: &ReplaceExtents{PartitionRef: PartitionRef{Topic: objTopic},
				First: m, Last: m, Between: objtopic.BetweenDigest(planned[1:2]), Merged: compacted}}); r.Err != nil {
				t.Fatalf("the compaction's replacement: %v", r.Err)
			}
			// The merge planned before it.
			merged := &objtopic.Extent{File: "merged/run", Length: 300, Base: planned[0].Base, Last: planned[2].Last, Absolute: true}
			r := Apply(im, 21, &Command{Op: OpReplaceExtents, ReplaceExtents: &ReplaceExtents{PartitionRef: PartitionRef{Topic: objTopic},
				First: planned[0], Last: planned[2], Between: objtopic.BetweenDigest(planned), Merged: merged}})
			exts := im.Topics["o"].Object(0).Extents
			if level >= LevelReplaceBetween {
				if !errors.Is(r.Err, objtopic.ErrMergeStale) || len(exts) != 3 || exts[1].File != "merged/compacted" {
					t.Fatalf("the stale merge: %v, extents %+v; want ErrMergeStale and the compacted extent kept", r.Err, exts)
				}
				return
			}
			if r.Err != nil || len(exts) != 1 || exts[0].File != "merged/run" {
				t.Fatalf("below level %d: %v, extents %+v; want the merge applied, as older versions do", LevelReplaceBetween, r.Err, exts)
			}
		})
	}
}
