package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

type finalizeRequest struct {
	Level        int  `json:"level"`
	ValidateOnly bool `json:"validate_only,omitempty"`
}

func (n *Node) registerFinalizeHandler() {
	n.rpc.handle("finalize-level", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		var req finalizeRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		d := n.activeDriver()
		if d == nil {
			return nil, n.notController()
		}
		d.mu.Lock()
		d.a.SetMembers(n.ctrl.Members())
		cmd, err := d.a.FinalizeTo(req.Level)
		d.mu.Unlock()
		if err != nil {
			code, msg := encodeApplyError(err)
			return proposeResponse{Code: code, Msg: msg}, nil
		}
		if cmd == nil || req.ValidateOnly {
			return proposeResponse{}, nil
		}
		res, index, err := n.ctrl.Propose(ctx, cmd)
		if err != nil {
			return nil, n.proposeError(err)
		}
		code, msg := encodeApplyError(res.Err)
		return proposeResponse{Index: index, Code: code, Msg: msg}, nil
	})
}

// FinalizeLevel raises the cluster's command level to level, as an operator asks
// (UpdateFeatures of runnel.command.level; with runnel.command.level.auto=false the active
// controller does not by itself): refused (controller.ErrLevelChange) below the cluster's
// level, above the active controller's version, or while a node is not known to apply it;
// asked again while the registered nodes change under it, until ctx ends. validateOnly only
// checks. docs/cluster.md §3.2.
func (n *Node) FinalizeLevel(ctx context.Context, level int, validateOnly bool) error {
	for {
		var resp proposeResponse
		if err := n.callController(ctx, "finalize-level", finalizeRequest{Level: level, ValidateOnly: validateOnly}, &resp); err != nil {
			return err
		}
		if err := decodeApplyError(resp.Code, resp.Msg); err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		if resp.Index == 0 { // there already: wait until this node's image is
			for n.ctrl.Image().Level < level {
				select {
				case <-ctx.Done():
					return fmt.Errorf("cluster: the command level is %d, but not yet here: %w", level, ctx.Err())
				case <-time.After(20 * time.Millisecond):
				}
			}
			return nil
		}
		if err := n.waitReconciled(ctx, resp.Index); err != nil {
			return err
		}
		if n.ctrl.Image().Level >= level {
			return nil
		}
		select { // a node registered since: the entry did nothing; ask again
		case <-ctx.Done():
			return fmt.Errorf("cluster: raising the command level to %d: the registered nodes kept changing: %w", level, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
