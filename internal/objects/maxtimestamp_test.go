package objects

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// tsBatch is one batch of records with the given timestamps.
func tsBatch(base int64, ts ...int64) []byte {
	var body []byte
	maxTs := base
	for i, t := range ts {
		body = batch.AppendRecord(body, t-base, int32(i), []byte("k"), []byte(fmt.Sprint(t)), 0, nil)
		maxTs = max(maxTs, t)
	}
	return batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(len(ts) - 1), BaseTimestamp: base, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(len(ts))}, body)
}

// TestMaxTimestampPastTheLogStart: ListOffsets MAX_TIMESTAMP answers the record with the
// largest timestamp at or after the log start, also when the extent with the largest
// MaxTimestamp owes it to a record below the log start (the first extent straddles it): here
// offset 2 (timestamp 50), not offset 1 (timestamp 10, the largest only of the extent whose
// offset 0, now trimmed, had 100).
func TestMaxTimestampPastTheLogStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := testDir(t)
	p := twoFilePartition(t, ctx, dir)
	if _, err := p.Trim(1); err != nil { // offset 0 (timestamp 100) is gone
		t.Fatal(err)
	}
	c := NewCache(dir, 1<<20, nil)
	off, ts, err := c.MaxTimestamp(ctx, p)
	if off != 2 || ts != 50 || err != nil {
		t.Errorf("MaxTimestamp = %d, %d, %v; want 2, 50 (offset 1 has 10)", off, ts, err)
	}
}

// twoFilePartition stores two files in dir, journal/r/0 (offsets 0-1, timestamps 100 and 10)
// and journal/r/1 (offset 2, timestamp 50), and returns a partition that committed them.
func twoFilePartition(t *testing.T, ctx context.Context, dir *objstore.Dir) *objtopic.Partition {
	t.Helper()
	p := objtopic.NewPartition()
	for i, b := range [][]byte{tsBatch(10, 100, 10), tsBatch(50, 50)} {
		key := fmt.Sprintf("journal/r/%d", i)
		body, index, err := objtopic.Build(1, 1, 0, []objtopic.Section{{TopicID: topic, Batches: [][]byte{b}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := dir.Put(ctx, key, body); err != nil {
			t.Fatal(err)
		}
		h, _ := batch.ParseHeader(b)
		p.Commit(key, index[0], []objtopic.BatchMeta{{Records: h.LastOffsetDelta + 1, ProducerID: -1, MaxTimestamp: h.MaxTimestamp}})
	}
	return p
}

// TestRunKeyGivesAge: the write time a writer's file key carries (RunKey) is the age
// objtopic.Extent.AgeMs gives extents of records without timestamps (retention, compaction lags).
func TestRunKeyGivesAge(t *testing.T) {
	at := time.UnixMilli(1_765_000_000_123)
	e := objtopic.Extent{File: RunKey("3-abcdef", at), MaxTimestamp: -1}
	if got := e.AgeMs(); got != at.UnixMilli() {
		t.Errorf("AgeMs of %s = %d; want %d", e.File, got, at.UnixMilli())
	}
}
