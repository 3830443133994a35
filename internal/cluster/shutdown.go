package cluster

import (
	"context"
	"time"
)

// heartbeatRequest is this node's heartbeat to the active controller.
func (n *Node) heartbeatRequest() heartbeatRequest {
	return heartbeatRequest{Node: n.cfg.NodeID, Incarnation: n.incarnation.Load(), Level: n.level(), ShuttingDown: n.shuttingDown.Load()}
}

// ControlledShutdown prepares this node to stop, as Kafka's controlled shutdown does, while it
// still serves: its heartbeats say it is shutting down, so the active controller moves the
// partitions it leads to other in-sync replicas (leadership transfers: a target takes over
// with the whole log, and clients are told NOT_LEADER_OR_FOLLOWER and go there) and moves no
// leadership to it. Once the controller says no partition it leads can move (another replica
// must be live, in sync and not stopping too), it hands its leadership of the sequencer's and
// the controller's Raft groups to another voter, so that their successors take over at once
// instead of after an election timeout. It returns when that is done or ctx ends; what is left
// then moves once the node is gone, as after a crash. A node that has not joined leads nothing.
func (n *Node) ControlledShutdown(ctx context.Context) {
	select {
	case <-n.ready:
	default:
		return
	}
	start := time.Now()
	n.shuttingDown.Store(true)
	// The Raft hand-offs keep a budget of their own: a node with many partitions to move must
	// not spend it all there (its successor would wait out an election timeout).
	mctx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		mctx, cancel = context.WithDeadline(ctx, deadline.Add(-resignBudget))
		defer cancel()
	}
	left := n.moveLeaderships(mctx)
	resigned := false
	if n.seq != nil {
		resigned = n.seq.IsLeader()
		if err := n.seq.Resign(ctx); err != nil {
			n.logger.Warn("cluster: shutting down: the sequencer's leadership did not move", "err", err)
		}
	}
	if n.ctrl.IsLeader() {
		resigned = true
		if err := n.ctrl.Resign(ctx); err != nil {
			n.logger.Warn("cluster: shutting down: the controller's leadership did not move", "err", err)
		}
	}
	if resigned {
		// The new active controller learns at once that this node is stopping, not at its
		// next heartbeat: no leadership moves back to it meanwhile.
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		n.callController(hctx, "heartbeat", n.heartbeatRequest(), &heartbeatResponse{})
		cancel()
	}
	n.logger.Info("cluster: ready to stop", "took", time.Since(start).Round(time.Millisecond), "leaderships_left", left)
}

// resignBudget is the part of a controlled shutdown's time kept for the Raft hand-offs.
const resignBudget = 3 * time.Second

// stallTimeout: a controlled shutdown stops waiting once this long has passed without a
// leadership moving (a transfer is given up after 2 s and asked again; a controller without a
// quorum moves nothing).
const stallTimeout = 5 * time.Second

// moveLeaderships heartbeats, saying this node is shutting down, until the active controller
// answers that nothing it leads can move, or nothing has moved for stallTimeout, and returns
// how many partitions it still led at the last answer (-1: no controller answered, or one
// whose version moves nothing).
func (n *Node) moveLeaderships(ctx context.Context) int {
	left := -1
	moved := time.Now()
	for {
		var resp heartbeatResponse
		hctx, cancel := context.WithTimeout(ctx, 2*n.cfg.HeartbeatInterval)
		err := n.callController(hctx, "heartbeat", n.heartbeatRequest(), &resp)
		cancel()
		switch {
		case err == nil && resp.OK && !resp.Stopping:
			return -1 // an older version's controller: nothing moves before the node is gone
		case err == nil && resp.OK:
			if left < 0 || resp.Movable < left {
				moved = time.Now()
			}
			if left = resp.Movable; left == 0 {
				return 0
			}
		case err == nil: // an incarnation the controller no longer has: it leads nothing
			return 0
		}
		if time.Since(moved) > stallTimeout {
			return left
		}
		select {
		case <-ctx.Done():
			return left
		case <-time.After(50 * time.Millisecond):
		}
	}
}
