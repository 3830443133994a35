package raftlog

import (
	"context"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// Transferee is the voter a leader that is stopping hands its leadership to: the recently
// active voter other than self whose log is the furthest along (raft sends it MsgTimeoutNow as
// soon as it has the leader's whole log), the lowest id among equals; 0 if there is none. Call
// it on the leader's loop.
func Transferee(rn *raft.RawNode, self uint64) uint64 {
	var best, match uint64
	rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if id == self || typ != raft.ProgressTypePeer || pr.IsLearner || !pr.RecentActive {
			return
		}
		if best == 0 || pr.Match > match || pr.Match == match && id < best {
			best, match = id, pr.Match
		}
	})
	return best
}

// Resign asks a Raft member to hand its leadership on (ask passes the request to its loop)
// until leading reports false, asking again every retry (raft drops a transfer that has not
// finished within an election timeout; one asked while no voter looked recently active, as
// just after CheckQuorum's periodic reset, started none), for as long as ctx lasts.
func Resign(ctx context.Context, leading func() bool, ask func(context.Context) error, retry time.Duration) error {
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	var asked time.Time
	for leading() {
		if time.Since(asked) >= retry {
			if err := ask(ctx); err != nil {
				return err
			}
			asked = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
		}
	}
	return nil
}

// Asker is Resign's ask for a Raft loop that takes requests on ch until stop is closed (then
// stopped is the answer).
func Asker(ch chan<- struct{}, stop <-chan struct{}, stopped error) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case ch <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return stopped
		}
	}
}

// HandOff asks raft, on the leader's loop, to transfer the leadership to Transferee (nothing
// if no voter qualifies).
func HandOff(rn *raft.RawNode, self uint64) {
	if to := Transferee(rn, self); to != 0 {
		rn.TransferLeader(to)
	}
}
