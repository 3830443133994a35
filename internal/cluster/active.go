package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
)

// activeDriver runs the active controller's logic (controller.Active, which does no I/O) on the
// Raft leader: it feeds it images, heartbeats, votes and ticks, and carries out its effects —
// proposals, vote requests, transfer requests — each on its own goroutine.
type activeDriver struct {
	n    *Node
	mu   sync.Mutex
	a    *controller.Active
	last uint64 // index of the last image given to a
	// applied wakes run with a newer image: the active controller's image does not wait for
	// this node's reconcile (which may open and recover many logs).
	applied chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// imageApplied tells the driver the controller applied entries (called on the Raft loop: it
// does not block).
func (d *activeDriver) imageApplied() {
	select {
	case d.applied <- struct{}{}:
	default:
	}
}

func (n *Node) activeDriver() *activeDriver {
	n.activeMu.Lock()
	defer n.activeMu.Unlock()
	return n.active
}

// onLeader starts the active controller when this node becomes the Raft leader and stops it
// when it stops being one.
func (n *Node) onLeader(leader int32) {
	n.activeMu.Lock()
	defer n.activeMu.Unlock()
	if leader == n.cfg.NodeID && n.ctx.Err() == nil {
		if n.active == nil {
			img := n.ctrl.Image()
			d := &activeDriver{n: n, a: controller.NewActive(n.cfg.Active, img, time.Now()), last: img.Index,
				applied: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
			n.active = d
			go d.run()
			for _, dead := range n.deadPeers() {
				go d.peerDown(dead)
			}
			n.logger.Info("cluster: this node is the active controller", "node", n.cfg.NodeID)
		}
		return
	}
	if n.active != nil {
		close(n.active.stop)
		n.active = nil
	}
}

func (d *activeDriver) run() {
	defer close(d.done)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-d.applied:
			d.setImage(d.n.ctrl.Image())
		case now := <-t.C:
			d.mu.Lock()
			d.a.SetMembers(d.n.ctrl.Members())
			eff := d.a.Tick(now)
			d.mu.Unlock()
			d.execute(eff)
		}
	}
}

func (d *activeDriver) stopped() bool {
	select {
	case <-d.stop:
		return true
	default:
		return false
	}
}

func (d *activeDriver) setImage(img *controller.Image) {
	d.mu.Lock()
	if img.Index <= d.last {
		d.mu.Unlock()
		return
	}
	d.last = img.Index
	eff := d.a.SetImage(img, time.Now())
	d.mu.Unlock()
	d.execute(eff)
}

func (d *activeDriver) peerDown(node int32) {
	d.mu.Lock()
	eff := d.a.PeerDown(node, time.Now())
	d.mu.Unlock()
	d.execute(eff)
}

func (d *activeDriver) heartbeat(req heartbeatRequest) heartbeatResponse {
	d.mu.Lock()
	now := time.Now()
	ok, eff := d.a.Heartbeat(req.Node, req.Incarnation, now)
	resp := heartbeatResponse{OK: ok}
	var moves controller.Effects
	if ok { // not a late heartbeat of an earlier incarnation
		d.a.ReportLevel(req.Node, req.Incarnation, req.Level)
		if req.ShuttingDown {
			resp.Movable, resp.Stopping, moves = d.a.ShuttingDown(req.Node, req.Incarnation, now)
		}
	}
	d.mu.Unlock()
	d.execute(eff)
	d.execute(moves)
	return resp
}

// execute carries out effects, each on its own goroutine.
func (d *activeDriver) execute(eff controller.Effects) {
	if eff.Empty() || d.stopped() {
		return
	}
	n := d.n
	for _, cmd := range eff.Propose {
		logProposal(n, cmd)
		go func() {
			ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
			defer cancel()
			if _, _, err := n.ctrl.Propose(ctx, cmd); err != nil {
				n.logger.Debug("cluster: proposing", "op", cmd.Op, "err", err)
			}
		}()
	}
	for node, req := range eff.Votes {
		go func() {
			var reply controller.VoteReply
			ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
			err := n.rpc.call(ctx, node, "vote", req, &reply)
			cancel()
			if err != nil || d.stopped() {
				return // asked again after the retry interval
			}
			d.mu.Lock()
			e := d.a.Votes(node, &reply, time.Now())
			d.mu.Unlock()
			d.execute(e)
		}()
	}
	for node, reqs := range eff.Transfers {
		for _, req := range reqs {
			go func() {
				var reply controller.TransferReply
				ctx, cancel := context.WithTimeout(n.ctx, 3*time.Second)
				err := n.rpc.call(ctx, node, "transfer", req, &reply)
				cancel()
				if d.stopped() {
					return
				}
				d.mu.Lock()
				e := d.a.TransferReady(req.EpochRef, err == nil && reply.Ready, time.Now())
				d.mu.Unlock()
				d.execute(e)
			}()
		}
	}
}

// transfer starts leadership transfers (ElectLeaders, shutdown).
func (d *activeDriver) transfer(items []TransferItem) []bool {
	out := make([]bool, len(items))
	var all controller.Effects
	d.mu.Lock()
	for i, it := range items {
		ok, eff := d.a.Transfer(it.PartitionRef, it.Target, time.Now())
		out[i] = ok
		for node, rs := range eff.Transfers {
			if all.Transfers == nil {
				all.Transfers = map[int32][]controller.TransferRequest{}
			}
			all.Transfers[node] = append(all.Transfers[node], rs...)
		}
	}
	d.mu.Unlock()
	d.execute(all)
	return out
}

type TransferItem struct {
	controller.PartitionRef
	Target int32 `json:"target"`
}

type transferRequest struct {
	Items []TransferItem `json:"items"`
}

type transferResponse struct {
	Started []bool `json:"started"`
}

// knownNode reports whether img holds a registration of node that kept data (not an agent's):
// a process with that id on an empty data dir lost it. A member of the controller's or the
// sequencer's Raft group counts too (a node unregistered whose learner is not removed yet, a
// voter removed from the controller whose removal the sequencer group has not followed yet):
// the group's leader takes it for the member that had the log. (A controller voter is one by
// configuration, registered or not: a new cluster's voters start on empty data dirs.)
func (n *Node) knownNode(img *controller.Image, node int32) bool {
	if nd := img.Nodes[node]; nd != nil {
		return !nd.Agent
	}
	return n.groupMember(node) && !slices.Contains(n.ctrl.Voters(), node)
}

// groupMember reports whether node is a member (voter or learner) of this node's view of the
// controller's or the sequencer's Raft group.
func (n *Node) groupMember(node int32) bool {
	return slices.Contains(n.ctrl.Members(), node) || n.seq != nil && slices.Contains(n.seq.Members(), node)
}

// notController is the error an RPC of the active controller gets on another node.
func (n *Node) notController() error {
	return &rpcError{codeNotController, strconv.Itoa(int(n.ctrl.Leader()))}
}

func (n *Node) registerHandlers() {
	n.registerVoterHandlers()
	n.registerUnregisterHandler()
	n.registerFinalizeHandler()
	n.rpc.handle("register", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		var req registerRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		if n.activeDriver() == nil {
			return nil, n.notController()
		}
		img := n.ctrl.Image()
		if img.ClusterID == "" {
			return nil, errors.New("cluster: the cluster is not bootstrapped yet") // the node asks again
		}
		nd := img.Nodes[req.Node]
		// A registration by this run (retried after its answer was lost; a run id is random, so
		// another process cannot have it) or by an earlier one on the same data dir is its own.
		own := nd != nil && ownRegistration(nd.Run, append(slices.Clone(req.JoiningRuns), req.Run))
		if req.EmptyDataDir && nd != nil && !nd.Agent && !own {
			return nil, &rpcError{codeLostData, lostDataDetail(req.Node, n.cfg.NodeID, img.ClusterID)}
		}
		if v := n.ctrl.Voters(); req.EmptyDataDir && req.Voter && len(v) > 0 && !slices.Contains(v, req.Node) {
			return nil, &rpcError{codeNotVoter, notVoterDetail(req.Node, n.cfg.NodeID, img.ClusterID, v)}
		}
		if req.EmptyDataDir && nd == nil && n.knownNode(img, req.Node) {
			return nil, &rpcError{codeLostData, stillMemberDetail(req.Node, n.cfg.NodeID)}
		}
		if err := controller.CheckLevel(img, &req.Register); err != nil { // the apply refuses it too, should the level rise meanwhile
			return nil, &rpcError{codeLevel, err.Error()}
		}
		res, index, err := n.ctrl.Propose(ctx, &controller.Command{Op: controller.OpRegister, Register: &req.Register})
		if err != nil {
			return nil, n.proposeError(err)
		}
		if errors.Is(res.Err, controller.ErrLevel) {
			return nil, &rpcError{codeLevel, res.Err.Error()}
		}
		if res.Err != nil {
			return nil, res.Err
		}
		return registerResponse{Incarnation: uint64(res.Value), Index: index}, nil
	})
	n.rpc.handle("node-known", func(_ context.Context, _ int32, payload []byte) (any, error) {
		var req nodeKnownRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		img := n.ctrl.Image()
		nd := img.Nodes[req.Node]
		known := n.knownNode(img, req.Node) && !(nd != nil && ownRegistration(nd.Run, req.Runs))
		return nodeKnownResponse{Known: known, Unregistered: known && img.Nodes[req.Node] == nil, ClusterID: img.ClusterID, Voters: n.ctrl.Voters()}, nil
	})
	n.rpc.handle("heartbeat", func(_ context.Context, _ int32, payload []byte) (any, error) {
		var req heartbeatRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		d := n.activeDriver()
		if d == nil {
			return nil, n.notController()
		}
		return d.heartbeat(req), nil
	})
	n.rpc.handle("propose", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		cmd, err := controller.DecodeCommand(payload)
		if err != nil {
			return nil, err
		}
		if n.activeDriver() == nil {
			return nil, n.notController()
		}
		res, index, err := n.ctrl.Propose(ctx, cmd)
		if err != nil {
			return nil, n.proposeError(err)
		}
		code, msg := encodeApplyError(res.Err)
		return proposeResponse{Index: index, Value: res.Value, Code: code, Msg: msg, Commit: res.Commit, AlreadyCommitted: res.AlreadyCommitted}, nil
	})
	n.rpc.handle("describe-quorum", func(ctx context.Context, _ int32, _ []byte) (any, error) {
		q, err := n.ctrl.Quorum(ctx)
		if errors.Is(err, controller.ErrNotLeader) {
			return nil, n.notController()
		}
		return q, err
	})
	n.rpc.handle("transfer-leaders", func(_ context.Context, _ int32, payload []byte) (any, error) {
		var req transferRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		d := n.activeDriver()
		if d == nil {
			return nil, n.notController()
		}
		return transferResponse{Started: d.transfer(req.Items)}, nil
	})
	n.rpc.handle("vote", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		var req controller.VoteRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := n.waitReconciled(wctx, req.MetaIndex); err != nil {
			return nil, err
		}
		return controller.VoteReply{Votes: n.rm.Vote(req.Items), Incarnation: n.incarnation.Load(), MetaIndex: req.MetaIndex}, nil
	})
	n.rpc.handle("transfer", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		var req controller.TransferRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		tctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		return controller.TransferReply{Ready: n.rm.PrepareTransfer(tctx, req)}, nil
	})
}

// proposeMade answers an RPC of the active controller that makes a command from its state and
// proposes it: make runs under the driver's lock, with the controller's Raft members set (the
// driver's tick may not have run since this node began to lead). A refusal, or the command's
// result, is the answer; no command is an answer with nothing done.
func (n *Node) proposeMade(ctx context.Context, make func(a *controller.Active) (*controller.Command, error)) (any, error) {
	d := n.activeDriver()
	if d == nil {
		return nil, n.notController()
	}
	// The command is made from an image with everything committed before the request: what a
	// node answered from its image (a node fenced, a level raised) holds here too. The active
	// controller's own image follows the member's a moment later, and a new active controller
	// may not have applied all its predecessor committed.
	if err := n.ctrl.Barrier(ctx); err != nil {
		return nil, n.proposeError(err)
	}
	d.setImage(n.ctrl.Image())
	d.mu.Lock()
	d.a.SetMembers(n.ctrl.Members())
	cmd, err := make(d.a)
	d.mu.Unlock()
	if err != nil {
		code, msg := encodeApplyError(err)
		return proposeResponse{Code: code, Msg: msg}, nil
	}
	if cmd == nil {
		return proposeResponse{}, nil
	}
	res, index, err := n.ctrl.Propose(ctx, cmd)
	if err != nil {
		return nil, n.proposeError(err)
	}
	code, msg := encodeApplyError(res.Err)
	return proposeResponse{Index: index, Code: code, Msg: msg}, nil
}

// proposeError turns a failed proposal into the RPC answer: not-controller if leadership moved.
func (n *Node) proposeError(err error) error {
	if err == controller.ErrNotLeader {
		return n.notController()
	}
	return err
}

// TransferLeaders asks the active controller to move the leadership of partitions to targets.
// It returns, per item, whether a transfer started.
func (n *Node) TransferLeaders(ctx context.Context, items []TransferItem) ([]bool, error) {
	var resp transferResponse
	if err := n.callController(ctx, "transfer-leaders", transferRequest{Items: items}, &resp); err != nil {
		return nil, err
	}
	return resp.Started, nil
}

// logProposal logs the active controller's decisions that change leadership.
func logProposal(n *Node, cmd *controller.Command) {
	switch cmd.Op {
	case controller.OpFence, controller.OpUnfence:
		n.logger.Info("cluster: "+cmd.Op, "node", cmd.Fence.Node, "incarnation", cmd.Fence.Incarnation)
	case controller.OpElect:
		for _, it := range cmd.Elect.Items {
			n.logger.Info("cluster: electing", "partition", it.PartitionRef.String(), "epoch", it.Epoch, "leader", it.Leader)
		}
	case controller.OpBeginElection:
		for _, it := range cmd.BeginElection.Items {
			n.logger.Info("cluster: starting an election", "partition", it.PartitionRef.String(), "epoch", it.Epoch)
		}
	}
}
