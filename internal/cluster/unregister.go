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

type unregisterRequest struct {
	Node int32               `json:"node"`
	Req  *controller.Request `json:"req"`
}

func (n *Node) registerUnregisterHandler() {
	n.rpc.handle("unregister-node", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		var req unregisterRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return n.proposeMade(ctx, func(a *controller.Active) (*controller.Command, error) {
			if slices.Contains(n.ctrl.Voters(), req.Node) || n.seq != nil && slices.Contains(n.seq.Voters(), req.Node) {
				return nil, fmt.Errorf("%w: node %d is a voter of the controller quorum or of the sequencer group, which follows a removal; remove it first (runnel controller remove-voter %d) and wait for it",
					controller.ErrNodeIsVoter, req.Node, req.Node)
			}
			return a.UnregisterNode(req.Node, req.Req)
		})
	})
}

// learnersRemovedWithin bounds how long an unregistration's answer waits for the node's
// learners to be removed (it is done by then: a node that takes the id before is refused).
const learnersRemovedWithin = 10 * time.Second

// awaitNotMember waits, up to learnersRemovedWithin, until node is no longer a member of the
// controller's and the sequencer's Raft groups as this node has them: the groups' leaders
// remove the learner of a node no longer registered, and until then a process taking the id
// is refused (knownNode).
func (n *Node) awaitNotMember(ctx context.Context, node int32) {
	ctx, cancel := context.WithTimeout(ctx, learnersRemovedWithin)
	defer cancel()
	for n.groupMember(node) {
		select {
		case <-ctx.Done():
			n.logger.Warn("cluster: node unregistered, still a member of a Raft group", "node", node)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// UnregisterNode forgets a node taken out of service (Kafka's UnregisterBroker): it must be
// fenced (its session expired), hold no partition replica and be a voter of neither Raft
// group; then it no longer counts anywhere (the command level among them), its Raft learners
// are removed (waited for, on a serve node, up to learnersRemovedWithin), and its id may be
// used again, by a new node with an empty data dir too. Retried, as the registered nodes
// changed while it was asked, until ctx ends. docs/cluster.md §3.8.
func (n *Node) UnregisterNode(ctx context.Context, node int32) error {
	req := unregisterRequest{Node: node, Req: &controller.Request{Run: n.run, Seq: n.reqSeq.Add(1)}}
	for {
		var resp proposeResponse
		if err := n.callController(ctx, "unregister-node", req, &resp); err != nil {
			return err
		}
		err := decodeApplyError(resp.Code, resp.Msg)
		if err == nil {
			if err := n.waitReconciled(ctx, resp.Index); err != nil {
				return err
			}
			n.awaitNotMember(ctx, node)
			return nil
		}
		if !errors.Is(err, controller.ErrNodesChanged) {
			return err
		}
		req.Req = &controller.Request{Run: n.run, Seq: n.reqSeq.Add(1)} // a new command, so a new request
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
