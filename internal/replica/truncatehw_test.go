package replica

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestTruncationLowersTheFollowersHighWatermark: a follower that learned high watermark 10
// from one leader truncates to 5 for the next (an unclean election, or a power loss with write
// caching, lost the committed records 5-9), then takes that leader's records 5-7, not yet
// committed. Its high watermark must drop to the cut, as Kafka's truncation lowers it. Before,
// it kept 10, so reads from the follower (KIP-392) served 5-7, which the new leader could still
// lose.
func TestTruncationLowersTheFollowersHighWatermark(t *testing.T) {
	l, dir := diskLog(t)
	var mu sync.Mutex
	var follows []*Follow
	m := NewManager(Config{NodeID: 2, TickInterval: -1, Now: time.Now, Logger: slog.New(slog.DiscardHandler),
		Send: func(_ int32, kind transport.Kind, body []byte) {
			if kind == KindFollow {
				f, err := ParseFollow(body)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				follows = append(follows, f)
				mu.Unlock()
			}
		}})
	t.Cleanup(m.Close)
	ref := controller.PartitionRef{Partition: 0}
	r, err := m.Add(ref, "t", l, vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	lastFollow := func() *Follow {
		mu.Lock()
		defer mu.Unlock()
		if len(follows) == 0 {
			t.Fatal("the follower sent no Follow")
		}
		return follows[len(follows)-1]
	}
	batches := func(epoch int32, base int64, n int) []byte {
		var out []byte
		for i := range n {
			recs := batch.AppendRecord(nil, 0, 0, nil, []byte("v"), 0, nil)
			b := batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1,
				BaseTimestamp: 1, MaxTimestamp: 1}, recs)
			batch.SetBaseOffset(b, base+int64(i))
			batch.SetLeaderEpoch(b, epoch)
			out = append(out, b...)
		}
		return out
	}
	follow := func(epoch, leader int32, truncateTo int64, common int32) {
		m.Assign(ref, Assignment{Role: RoleFollower, Epoch: epoch, Leader: leader, Sets: [][]int32{{1, 2, 3}}, ISR: []int32{1, 2, 3}, MinISR: 1})
		f := lastFollow()
		if f.Epoch != epoch {
			t.Fatalf("the follower's last Follow is of epoch %d; want %d", f.Epoch, epoch)
		}
		m.Handle(leader, KindFollowReply, AppendFollowReply(nil, &FollowReply{Ref: ref, Epoch: epoch, Seq: f.Seq, Status: StatusOK,
			TruncateTo: truncateTo, CommonEpoch: common, EpochStart: truncateTo}))
	}
	appendFrom := func(leader, epoch int32, prevEnd, hw int64, data []byte) {
		m.Handle(leader, KindAppend, AppendAppends(nil, []Append{{Ref: ref, Epoch: epoch, PrevEnd: prevEnd, HW: hw, EpochStart: 0, Batches: data}}))
	}

	follow(1, 1, 0, 0)
	appendFrom(1, 1, 0, 10, batches(1, 0, 10))
	if hw, end := r.HighWatermark(), l.EndOffset(); hw != 10 || end != 10 {
		t.Fatalf("after epoch 1's records: high watermark %d, log end %d; want 10, 10", hw, end)
	}
	follow(2, 3, 5, 1) // the new leader has epoch 1 up to 5 only
	if end := l.EndOffset(); end != 5 {
		t.Fatalf("log end %d after the truncation; want 5", end)
	}
	appendFrom(3, 2, 5, 5, batches(2, 5, 3))
	if end := l.EndOffset(); end != 8 {
		t.Fatalf("log end %d after epoch 2's records; want 8", end)
	}
	if hw := r.HighWatermark(); hw > 5 {
		t.Errorf("follower's high watermark %d after truncating to 5 and taking 3 uncommitted records; want at most 5", hw)
	}
}
