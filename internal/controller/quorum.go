package controller

import (
	"context"
	"slices"
	"time"

	raft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Quorum is the controller's Raft group as its leader sees it, in Kafka's terms (DescribeQuorum,
// KIP-595 and KIP-853): Raft's log index is Kafka's offset, so a replica's log end offset is the
// index of the last entry the leader knows it holds (Raft's match index; -1 when it knows of
// none), and the high watermark is the commit index (entries below an offset of N are the N
// first ones).
type Quorum struct {
	Leader        int32
	Epoch         int64 // the Raft term
	HighWatermark int64
	Voters        []QuorumReplica
	Observers     []QuorumReplica // learners: the nodes that follow the metadata without voting
}

// QuorumReplica is one member of the group.
type QuorumReplica struct {
	Node   int32
	LogEnd int64
	// LastFetch: unix ms of the last message the leader received from it, and LastCaughtUp of
	// the last time its log reached the leader's end (for the leader itself: now); -1 when not
	// known since this leader took over.
	LastFetch    int64
	LastCaughtUp int64
}

type quorumAnswer struct {
	q   Quorum
	err error
}

// Quorum describes the Raft group; only the leader can (ErrNotLeader elsewhere).
func (c *Controller) Quorum(ctx context.Context) (Quorum, error) {
	ch := make(chan quorumAnswer, 1)
	select {
	case c.quorumc <- ch:
	case <-c.stop:
		return Quorum{}, ErrStopped
	case <-ctx.Done():
		return Quorum{}, ctx.Err()
	}
	select {
	case a := <-ch:
		return a.q, a.err
	case <-c.stop:
		return Quorum{}, ErrStopped
	case <-ctx.Done():
		return Quorum{}, ctx.Err()
	}
}

// heardFrom records, on the loop, that a peer's message arrived.
func (c *Controller) heardFrom(m *pb.Message) {
	if c.IsLeader() {
		c.contact[m.GetFrom()] = time.Now()
	}
}

// trackCaughtUp records, on the leader's ticks, which followers' logs are at its end.
func (c *Controller) trackCaughtUp() {
	if !c.IsLeader() {
		if len(c.contact) > 0 || len(c.caughtUp) > 0 {
			clear(c.contact) // a later term starts afresh
			clear(c.caughtUp)
		}
		return
	}
	self := raftID(c.cfg.NodeID)
	var last uint64
	c.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == self {
			last = pr.Match
		}
	})
	now := time.Now()
	c.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id != self && pr.Match >= last {
			c.caughtUp[id] = now
		}
	})
}

// quorum answers Quorum, on the loop.
func (c *Controller) quorum() quorumAnswer {
	if !c.IsLeader() {
		return quorumAnswer{err: ErrNotLeader}
	}
	st := c.rn.Status()
	self := raftID(c.cfg.NodeID)
	nowMs := time.Now().UnixMilli()
	ms := func(t time.Time, ok bool) int64 {
		if !ok {
			return -1
		}
		return t.UnixMilli()
	}
	replica := func(id uint64) QuorumReplica {
		r := QuorumReplica{Node: nodeID(id), LogEnd: int64(st.Progress[id].Match)}
		if r.LogEnd == 0 && id != self { // nothing heard from it since this leader took over
			r.LogEnd = -1 // as Kafka's LeaderState: an unknown end offset is -1
		}
		if id == self {
			r.LastFetch, r.LastCaughtUp = nowMs, nowMs
			return r
		}
		t, ok := c.contact[id]
		r.LastFetch = ms(t, ok)
		t, ok = c.caughtUp[id]
		r.LastCaughtUp = ms(t, ok)
		return r
	}
	q := Quorum{Leader: c.cfg.NodeID, Epoch: int64(st.HardState.GetTerm()), HighWatermark: int64(st.HardState.GetCommit())}
	for _, id := range slices.Sorted(slices.Values(c.confState.GetVoters())) {
		q.Voters = append(q.Voters, replica(id))
	}
	for _, id := range slices.Sorted(slices.Values(c.confState.GetLearners())) {
		q.Observers = append(q.Observers, replica(id))
	}
	return quorumAnswer{q: q}
}
