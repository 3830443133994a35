package replica

import (
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
)

// Kafka's UnifiedLog.maybeIncrementLogStartOffset (the path of DeleteRecords and retention)
// calls leaderEpochCache.truncateFromStartAsyncFlush(logStartOffset): entries wholly below the
// new log start go, the one covering it starts at it. OffsetForLeaderEpoch
// (LeaderEpochFileCache.endOffsetFor) for an epoch older than every remaining entry then
// answers (that epoch, the log start). Epochs 1 [0,10), 2 [10,20), 3 [20,25); the log start
// moves to 15: Kafka answers epoch 1 -> (1, 15), epoch 0 -> (0, 15), epoch 2 -> (2, 20). Runnel
// answered (1, 10) and (0, 0), below the log start.
func TestEndOffsetForFollowsTheLogStart(t *testing.T) {
	m, r, l, ref := soloReplica(t)
	records := func(n int) []byte {
		var body []byte
		for i := 0; i < n; i++ {
			body = batch.AppendRecord(body, 0, int32(i), []byte("k"), []byte("v"), 0, nil)
		}
		ts := time.Now().UnixMilli()
		return batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: ts, MaxTimestamp: ts,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(n)}, body)
	}
	for _, e := range []struct {
		epoch int32
		n     int
	}{{1, 10}, {2, 10}, {3, 5}} {
		m.Assign(ref, Assignment{Role: RoleLeader, Epoch: e.epoch, Leader: 1, Sets: [][]int32{{1}}, ISR: []int32{1}, MinISR: 1})
		if _, _, err := r.Append(records(e.n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.AdvanceStartOffset(15); err != nil { // what DeleteRecords does (deleterecords.go)
		t.Fatal(err)
	}
	for _, tc := range []struct {
		asked, epoch int32
		end          int64
	}{{1, 1, 15}, {0, 0, 15}, {2, 2, 20}, {3, 3, 25}} {
		if epoch, end := r.EndOffsetFor(tc.asked); epoch != tc.epoch || end != tc.end {
			t.Errorf("log start 15: OffsetForLeaderEpoch(%d) = (%d, %d); Kafka (epoch cache truncated from the start) answers (%d, %d)",
				tc.asked, epoch, end, tc.epoch, tc.end)
		}
	}
}
