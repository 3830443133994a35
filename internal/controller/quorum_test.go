package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestQuorumDescribesTheGroup: the leader describes three voters and a learner with their log
// ends and contact times; a follower refuses; a voter cut off keeps its log end and its last
// contact while the others move on.
func TestQuorumDescribesTheGroup(t *testing.T) {
	fsys := vfs.NewMem()
	n, cs := startQuorum(t, fsys)
	learner := startNode(t, n, fsys, 7, []int32{1, 2, 3})
	t.Cleanup(learner.Stop)
	_, idx := propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 7, ClusterAddr: "l"}})
	waitFor(t, "the learner caught up", func() bool { return learner.Image().Index >= idx })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range cs {
		if !c.IsLeader() {
			if _, err := c.Quorum(ctx); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("a follower's Quorum: %v; want ErrNotLeader", err)
			}
		}
	}
	var q Quorum
	waitFor(t, "every member caught up", func() bool {
		var err error
		if q, err = leaderOf(n).Quorum(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range append(q.Voters, q.Observers...) {
			if r.LogEnd < q.HighWatermark || r.LastFetch < 0 || r.LastCaughtUp < 0 {
				return false
			}
		}
		return len(q.Voters) == 3 && len(q.Observers) == 1
	})
	if q.Leader != leaderOf(n).NodeID() || q.Epoch < 1 || q.HighWatermark < int64(idx) || q.Observers[0].Node != 7 {
		t.Fatalf("quorum %+v; want the leader, a term, a high watermark at or past %d, observer 7", q, idx)
	}
	for i, r := range q.Voters {
		if r.Node != int32(i+1) {
			t.Fatalf("voters %+v; want 1, 2, 3", q.Voters)
		}
	}

	// Cut a follower off: its log end stays, its contact ages.
	var cut int32
	for id, c := range cs {
		if !c.IsLeader() {
			cut = id
			break
		}
	}
	n.mu.Lock()
	n.down[cut] = true
	n.mu.Unlock()
	cutAt := time.Now().UnixMilli()
	for range 5 {
		propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 8, ClusterAddr: "m"}})
	}
	time.Sleep(100 * time.Millisecond)
	q, err := leaderOf(n).Quorum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range q.Voters {
		switch {
		case r.Node == cut && (r.LogEnd >= q.HighWatermark || r.LastFetch > cutAt || r.LastCaughtUp > cutAt):
			t.Fatalf("the cut-off voter %+v (high watermark %d, cut at %d); want it behind and not heard from since", r, q.HighWatermark, cutAt)
		case r.Node != cut && r.LogEnd < q.HighWatermark:
			t.Fatalf("voter %+v behind the high watermark %d", r, q.HighWatermark)
		}
	}
}
