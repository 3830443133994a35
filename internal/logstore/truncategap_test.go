package logstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// gapLog builds a log whose first sealed segment [0,2) lost its last batch (offset 1) to
// compaction, followed by the sealed segment [2,3) and the active one at 3. With dropIndexes,
// that segment's index files are removed before reopening, as after a crash while a compaction
// swap was placed (finishSwap passes ns == nil: "recovery rebuilds them"), so recovery rebuilds
// the segment by scanning and its next offset becomes 1: a gap [1,2) between two segments.
func gapLog(t *testing.T, e *env, dropIndexes bool) *Log {
	t.Helper()
	cfg := compactConfig()
	l := e.open(cfg)
	big := func(k string) rec { return kv(k, string(make([]byte, 1200))) } // segments too big to be cleaned as one group
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("a", "1")), makeBatch(t, batch.CodecNone, big("b")))
	rollActive(t, l)
	appendAll(t, l, makeBatch(t, batch.CodecNone, big("b")))
	rollActive(t, l)
	st, err := NewCompactor(0).Compact(context.Background(), l)
	if err != nil || st.RecordsRemoved != 1 {
		t.Fatalf("Compact = %+v, %v; want one record removed", st, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if dropIndexes {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			if err := e.fs.Remove(segmentName(e.dir, 0, suffix)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return e.open(cfg)
}

// TestTruncateIntoGapBetweenSegments: Truncate documents that for an offset inside a gap
// compaction left, the log ends "at the end of the last batch below it". When the gap lay
// between two segments (a segment rebuilt by a scan ends at its last batch, below the next
// segment's base), Truncate emptied the next segment but left the log end at that segment's
// base, above the requested offset. A follower told to truncate there then could not take the
// leader's batch at that offset (ErrNotAtEnd) and looped on mismatches.
func TestTruncateIntoGapBetweenSegments(t *testing.T) {
	for _, drop := range []bool{false, true} {
		name := "indexes kept"
		if drop {
			name = "segment rebuilt by recovery"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, vfs.NewMem(), "/data/p0")
			l := gapLog(t, e, drop)
			defer l.Close()
			end, err := l.Truncate(1)
			if err != nil {
				t.Fatalf("Truncate(1) = %v", err)
			}
			if end > 1 || l.EndOffset() > 1 {
				t.Errorf("Truncate(1) returned %d, log end %d; want at most 1 (nothing at or after 1 may remain, and the end may not pass the cut)", end, l.EndOffset())
			}
			if l.firstDirty > l.EndOffset() { // records appended from the end must count as uncleaned
				t.Errorf("after Truncate(1): compaction point %d above the log end %d", l.firstDirty, l.EndOffset())
			}
			// What the follower does next: take the leader's batch at offset 1.
			b := makeBatch(t, batch.CodecNone, kv("z", "leader"))
			batch.SetBaseOffset(b, 1)
			batch.SetLeaderEpoch(b, 2)
			if _, _, err := l.AppendReplica(b); err != nil {
				t.Errorf("AppendReplica(batch at 1) after Truncate(1) = %v", err)
				if errors.Is(err, ErrNotAtEnd) {
					t.Logf("the follower can never take the leader's batch at 1")
				}
			}
		})
	}
}

// TestTruncatedCompactedSegmentKeepsFreshTombstones: Truncate into a sealed segment that
// compaction already cleaned makes it the active segment again, and kept its cleanedAt stamp
// (cutAt reset every other field). Records appended after the cut land in that segment; at the
// next pass the segment counted as cleaned long ago, so a tombstone written a moment before was
// dropped at once instead of being kept for delete.retention.ms: a consumer that had read the
// key's old value never saw the delete.
func TestTruncatedCompactedSegmentKeepsFreshTombstones(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data/p0")
	cfg := compactConfig() // delete.retention.ms = 1 h
	l := e.open(cfg)
	defer l.Close()
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("k", "v1")), makeBatch(t, batch.CodecNone, kv("x", "1")))
	rollActive(t, l)
	if _, err := NewCompactor(0).Compact(context.Background(), l); err != nil { // first clean: stamps cleanedAt
		t.Fatal(err)
	}
	e.clock.advance(2 * time.Hour)
	// A follower truncates a suffix its new leader does not have: offset 1 is in the sealed,
	// cleaned segment.
	if end, err := l.Truncate(1); err != nil || end != 1 {
		t.Fatalf("Truncate(1) = %d, %v", end, err)
	}
	tomb := makeBatch(t, batch.CodecNone, kv("k", "")) // a tombstone for k, written now
	appendAll(t, l, tomb)
	rollActive(t, l)
	if _, err := NewCompactor(0).Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	kvs := keyValues(t, l)
	if kvs[1] != "k=<nil>" {
		t.Errorf("records after the first pass over the new tombstone: %v; want the tombstone for k at 1 kept for delete.retention.ms (1 h)", kvs)
	}
}
