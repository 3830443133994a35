package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
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
		return n.proposeMade(ctx, func(a *controller.Active) (*controller.Command, error) {
			cmd, err := a.FinalizeTo(req.Level)
			if req.ValidateOnly {
				return nil, err
			}
			return cmd, err
		})
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
