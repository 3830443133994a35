package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	raft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Errors of a change of the controller's voters (KIP-853's AddRaftVoter and RemoveRaftVoter).
var (
	ErrDuplicateVoter = errors.New("controller: the node is already a voter")
	ErrVoterNotFound  = errors.New("controller: the node is not a voter")
	// ErrNotCaughtUp: the node to add does not follow the log yet, or its log is behind the
	// leader's commit index. AddVoter waits for it until its context ends.
	ErrNotCaughtUp = errors.New("controller: the node's log has not caught up with the controller's")
	// ErrChangePending: another membership change is not applied yet (Raft takes one at a time).
	// AddVoter and RemoveVoter wait for it until their context ends.
	ErrChangePending = errors.New("controller: another membership change is in progress")
	// ErrInvalidVoterChange: a change that cannot be made (an unknown node, an agent, the last
	// voter, or a change that would leave the voters without a live majority).
	ErrInvalidVoterChange = errors.New("controller: invalid voter change")
)

// voterChange is an AddVoter or RemoveVoter request handed to the loop.
type voterChange struct {
	add  bool
	node int32
	ans  chan error // the loop's answer: nil once the change is proposed (then done), else why not
	done chan error // buffered: nil once the change is applied, else why it was not
}

// pendingVoter is the voter change proposed and not yet applied.
type pendingVoter struct {
	index uint64 // the log index its entry was proposed at
	ctx   []byte
	done  chan error
}

// voterRetry is how often AddVoter and RemoveVoter ask again while the node catches up or
// another change is applied.
const voterRetry = 100 * time.Millisecond

// AddVoter makes node, a learner of the controller's Raft group (every registered serve node
// is one), a voter. It waits until the node's log has caught up with the leader's commit index
// and no other membership change is pending, then proposes the change and returns once it is
// applied here. Only the active controller can (ErrNotLeader elsewhere). If ctx ends first,
// the error says what was waited for; a change already proposed may still be applied.
func (c *Controller) AddVoter(ctx context.Context, node int32) error {
	return c.changeVoter(ctx, voterChange{add: true, node: node})
}

// RemoveVoter removes node from the controller's voters; it stays a learner while it is
// registered. It refuses to remove the last voter or to leave voters of which fewer than a
// majority are live (the leader heard from them within an election timeout). Removing the leader itself makes
// it step down once the change is applied.
func (c *Controller) RemoveVoter(ctx context.Context, node int32) error {
	return c.changeVoter(ctx, voterChange{node: node})
}

func (c *Controller) changeVoter(ctx context.Context, vc voterChange) error {
	for {
		req := vc
		req.ans, req.done = make(chan error, 1), make(chan error, 1)
		select {
		case c.voterc <- req:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.stop:
			return ErrStopped
		}
		var err error
		select {
		case err = <-req.ans:
		case <-c.stop:
			return ErrStopped
		}
		if err == nil {
			select {
			case err = <-req.done:
			case <-ctx.Done():
				return fmt.Errorf("%w (the change is proposed and may still be applied)", ctx.Err())
			case <-c.stop:
				return ErrStopped
			}
		}
		if !errors.Is(err, ErrNotCaughtUp) && !errors.Is(err, ErrChangePending) {
			return err
		}
		t := time.NewTimer(voterRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-c.stop:
			t.Stop()
			return ErrStopped
		}
	}
}

// proposeVoterChange validates vc and proposes it, on the loop goroutine.
func (c *Controller) proposeVoterChange(vc voterChange) error {
	if !c.IsLeader() {
		return ErrNotLeader
	}
	if c.pendingConf || c.pendingVoter != nil {
		return ErrChangePending
	}
	if time.Since(c.leaderSince) < c.electionTimeout() {
		// A new leader has not heard from every live peer yet, nor applied its first entry (raft
		// takes no membership change before).
		return fmt.Errorf("%w: the controller took over %v ago", ErrChangePending, time.Since(c.leaderSince).Round(time.Millisecond))
	}
	id := raftID(vc.node)
	voters := c.confState.GetVoters()
	isVoter := slices.Contains(voters, id)
	st := c.rn.Status()
	var next []uint64
	if vc.add {
		nd := c.work.Nodes[vc.node]
		switch {
		case isVoter:
			return ErrDuplicateVoter
		case nd == nil:
			return fmt.Errorf("%w: node %d is not registered with the cluster", ErrInvalidVoterChange, vc.node)
		case nd.Agent:
			return fmt.Errorf("%w: node %d is an agent (agents keep no data)", ErrInvalidVoterChange, vc.node)
		case !slices.Contains(c.confState.GetLearners(), id):
			return fmt.Errorf("%w: node %d does not follow the controller's log yet", ErrNotCaughtUp, vc.node)
		}
		pr, ok := st.Progress[id]
		if !ok || !c.heardWithin(id, c.electionTimeout()) || pr.State != tracker.StateReplicate || pr.Match < st.HardState.GetCommit() {
			return fmt.Errorf("%w: node %d holds the log up to %d, the commit index is %d", ErrNotCaughtUp, vc.node, pr.Match, st.HardState.GetCommit())
		}
		next = append(slices.Clone(voters), id)
	} else {
		if !isVoter {
			return ErrVoterNotFound
		}
		if len(voters) == 1 {
			return fmt.Errorf("%w: node %d is the only voter", ErrInvalidVoterChange, vc.node)
		}
		next = slices.DeleteFunc(slices.Clone(voters), func(v uint64) bool { return v == id })
	}
	live := 0
	for _, v := range next {
		if v == st.ID || c.heardWithin(v, c.electionTimeout()) {
			live++
		}
	}
	if live <= len(next)/2 {
		return fmt.Errorf("%w: only %d of the %d voters it would leave are live, a quorum needs %d", ErrInvalidVoterChange, live, len(next), len(next)/2+1)
	}
	c.voterSeq++
	ctx := binary.BigEndian.AppendUint64([]byte("voter"), c.voterSeq)
	typ := pb.ConfChangeType_ConfChangeRemoveNode
	if vc.add {
		typ = pb.ConfChangeType_ConfChangeAddNode
	}
	cc := &pb.ConfChange{Type: typ.Enum(), NodeId: new(id), Context: ctx}
	// Every Ready is saved before the loop takes the next request, so the stored log ends where
	// raft's does, and the change is appended right after it.
	last, err := c.store.LastIndex()
	if err != nil {
		return err
	}
	if err := c.rn.ProposeConfChange(cc); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			return ErrNotLeader
		}
		return err
	}
	// raft appended it at its last index (or, if it had a change of its own pending, an empty
	// entry in its place: applying that index tells which).
	c.pendingVoter = &pendingVoter{index: last + 1, ctx: ctx, done: vc.done}
	c.pendingConf, c.pendingSince = true, time.Now()
	c.logger.Info("controller: voter change proposed", "add", vc.add, "node", vc.node, "voters", describe(next))
	return nil
}

func (c *Controller) electionTimeout() time.Duration {
	return time.Duration(c.cfg.ElectionTicks) * c.cfg.TickInterval
}

// heardWithin reports whether the leader received a message from a peer within d.
func (c *Controller) heardWithin(id uint64, d time.Duration) bool {
	t, ok := c.contact[id]
	return ok && time.Since(t) <= d
}

// voterApplied answers the pending voter change once the entry at its index is applied: the
// change itself (cc non-nil with its context), or whatever raft put there instead.
func (c *Controller) voterApplied(index uint64, cc *pb.ConfChange) {
	pv := c.pendingVoter
	if pv == nil || index < pv.index {
		return
	}
	c.pendingVoter = nil
	if cc != nil && index == pv.index && string(cc.GetContext()) == string(pv.ctx) {
		pv.done <- nil
		return
	}
	c.pendingConf = false       // the change it stood for is not coming
	pv.done <- ErrChangePending // raft dropped it: the caller proposes again
}

// failPendingVoter answers the pending voter change when this node stops leading: it may or
// may not be applied.
func (c *Controller) failPendingVoter() {
	if pv := c.pendingVoter; pv != nil {
		c.pendingVoter = nil
		pv.done <- ErrNotLeader
	}
}

// setVoters publishes the voters of the applied configuration (the loop owns confState).
func (c *Controller) setVoters() {
	v := describeVoters(c.confState)
	slices.Sort(v)
	c.voters.Store(&v)
	m := slices.Concat(v, describe(c.confState.GetLearners()), describe(c.confState.GetLearnersNext()))
	c.members.Store(&m)
}

// Members are the applied configuration's voters and learners: every node that receives the
// log.
func (c *Controller) Members() []int32 { return slices.Clone(*c.members.Load()) }

func describe(ids []uint64) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		out = append(out, nodeID(id))
	}
	slices.Sort(out)
	return out
}
