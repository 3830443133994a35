package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
)

// Codes of the voter-change RPCs' refusals, turned back into the controller's errors.
const (
	codeDuplicateVoter = "duplicate-voter"
	codeVoterNotFound  = "voter-not-found"
	codeInvalidVoter   = "invalid-voter-change"
	codeVoterWait      = "voter-wait" // not caught up yet, or another change pending: ask again
)

var voterCodes = []struct {
	code string
	err  error
}{
	{codeDuplicateVoter, controller.ErrDuplicateVoter},
	{codeVoterNotFound, controller.ErrVoterNotFound},
	{codeInvalidVoter, controller.ErrInvalidVoterChange},
	{codeVoterWait, controller.ErrNotCaughtUp},
	{codeVoterWait, controller.ErrChangePending},
}

type voterRequest struct {
	Node int32 `json:"node"`
	Add  bool  `json:"add"`
}

// voterAttempt bounds one voter-change RPC on the active controller: a node still catching up is
// asked again by the caller (within one RPC's deadline), until the caller's context ends.
const voterAttempt = 800 * time.Millisecond

func (n *Node) registerVoterHandlers() {
	n.rpc.handle("change-voter", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		var req voterRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		if n.activeDriver() == nil {
			return nil, n.notController()
		}
		actx, cancel := context.WithTimeout(ctx, voterAttempt)
		defer cancel()
		var err error
		if req.Add {
			err = n.ctrl.AddVoter(actx, req.Node)
		} else {
			err = n.ctrl.RemoveVoter(actx, req.Node)
		}
		if err == nil {
			return struct{}{}, nil
		}
		if errors.Is(err, controller.ErrNotLeader) {
			return nil, n.notController()
		}
		for _, c := range voterCodes {
			if errors.Is(err, c.err) {
				return nil, &rpcError{c.code, err.Error()}
			}
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, &rpcError{codeVoterWait, err.Error()}
		}
		return nil, err
	})
}

// AddVoter makes a registered serve node a voter of the controller quorum (and, following it,
// of the sequencer group), asking the active controller until it is done or ctx ends: the node
// must have caught up with the controller's log, and one membership change is made at a time.
// docs/cluster.md §3.7.
func (n *Node) AddVoter(ctx context.Context, node int32) error {
	return n.changeVoter(ctx, voterRequest{Node: node, Add: true})
}

// RemoveVoter removes a node from the controller quorum's voters (see AddVoter).
func (n *Node) RemoveVoter(ctx context.Context, node int32) error {
	return n.changeVoter(ctx, voterRequest{Node: node})
}

func (n *Node) changeVoter(ctx context.Context, req voterRequest) error {
	if v := n.ctrl.Voters(); len(v) > 0 && slices.Contains(v, req.Node) == req.Add {
		if req.Add {
			return controller.ErrDuplicateVoter
		}
		return controller.ErrVoterNotFound
	}
	for {
		err := n.callController(ctx, "change-voter", req, &struct{}{})
		var re *rpcError
		if err == nil || errors.As(err, &re) && (req.Add && re.Code == codeDuplicateVoter || !req.Add && re.Code == codeVoterNotFound) {
			// Done; a refusal as already done (checked above) is an earlier attempt's doing: an
			// answer lost or late (callController asks again) after the change was made.
			return n.awaitSequencerVoters(ctx, req)
		}
		if re == nil {
			return err
		}
		for _, c := range voterCodes {
			if re.Code == c.code && re.Code != codeVoterWait {
				return fmt.Errorf("%w (%s)", c.err, re.Msg)
			}
		}
		if re.Code != codeVoterWait {
			return err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w: %s", context.DeadlineExceeded, re.Msg)
			}
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitSequencerVoters waits until this node has applied the voter change in the controller's
// log and in the sequencer group's, whose leader follows the controller's voters one change at
// a time: only then is the change done for both groups. (Were an operator to lose another voter
// in between, the sequencer group could be left with voters the change was to remove and one
// it was to add, and no live majority.)
func (n *Node) awaitSequencerVoters(ctx context.Context, req voterRequest) error {
	for {
		v := n.ctrl.Voters()
		if slices.Contains(v, req.Node) == req.Add && (n.seq == nil || slices.Equal(n.seq.Voters(), v)) {
			return nil
		}
		select {
		case <-ctx.Done():
			var seq []int32
			if n.seq != nil {
				seq = n.seq.Voters()
			}
			return fmt.Errorf("the voter change of node %d is made; this node's controller voters %v and sequencer voters %v do not show it yet: %w", req.Node, v, seq, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Voters are the controller quorum's voters: those of the applied configuration, or, on a node
// that has not received it yet, --controller-voters.
func (n *Node) Voters() []int32 {
	if v := n.ctrl.Voters(); len(v) > 0 {
		return v
	}
	return slices.Sorted(mapsKeys(n.cfg.Voters))
}

// askVoters are the nodes a node without a known controller leader asks: the voters as
// configured and as --controller-voters has them.
func (n *Node) askVoters() []int32 {
	v := n.ctrl.Voters()
	for id := range n.cfg.Voters {
		if !slices.Contains(v, id) {
			v = append(v, id)
		}
	}
	slices.Sort(v)
	return v
}
