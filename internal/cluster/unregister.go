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
		d := n.activeDriver()
		if d == nil {
			return nil, n.notController()
		}
		cmd, err := d.unregisterCommand(req)
		if err != nil {
			code, msg := encodeApplyError(err)
			return proposeResponse{Code: code, Msg: msg}, nil
		}
		res, index, err := n.ctrl.Propose(ctx, cmd)
		if err != nil {
			return nil, n.proposeError(err)
		}
		code, msg := encodeApplyError(res.Err)
		return proposeResponse{Index: index, Code: code, Msg: msg}, nil
	})
}

// unregisterCommand makes the command that forgets a node, refusing a controller voter (which
// the image does not know): it is removed from the voters first.
func (d *activeDriver) unregisterCommand(req unregisterRequest) (*controller.Command, error) {
	if slices.Contains(d.n.ctrl.Voters(), req.Node) {
		return nil, fmt.Errorf("%w: node %d; remove it first (runnel controller remove-voter %d)", controller.ErrNodeIsVoter, req.Node, req.Node)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.a.UnregisterNode(req.Node, req.Req)
}

// awaitNotMember waits until node is no longer a learner of the controller's and the
// sequencer's Raft groups as this node has them: the active controller removes the learner of
// a node no longer registered, and a process taking the id meanwhile would be taken for it.
func (n *Node) awaitNotMember(ctx context.Context, node int32) error {
	for n.raftLearner(node) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: node %d unregistered, but still a learner of the controller's or the sequencer's Raft group: %w", node, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// UnregisterNode forgets a node taken out of service (Kafka's UnregisterBroker): it must be
// stopped (fenced), hold no partition replica and not be a controller voter; then it no
// longer counts anywhere (the command level among them), its Raft learner is removed, and its
// id may be used again, by a new node with an empty data dir too. Retried, as the registered
// nodes changed while it was asked, until ctx ends. docs/cluster.md §3.8.
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
			return n.awaitNotMember(ctx, node)
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
