package service

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/speclog/order"
	"github.com/runnel-dev/runnel/internal/speclog/sequencer"
	"github.com/runnel-dev/runnel/internal/speclog/shard"
	"github.com/runnel-dev/runnel/internal/topics"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// caughtUpTo is where a subscription's catch-up from a shard leader's log ends (the runner's
// events from its Head on deliver the rest): the partition's high watermark, or the shard's
// committed slots if more, but only up to the leader's epoch start. A runner does not deliver
// its committed slots again (order.ResumeShard), and a partition's new leader learns the high
// watermark only once its first commit in its epoch is acknowledged, so for a moment after a
// leader change the committed slots can lie above it; those committed before its epoch are in
// its log (durable on a quorum, which it is one of). Committed slots above its epoch start are
// not necessarily its own: a leader deposed without knowing it yet (cut off from the controller
// but not from the sequencer) padded them with no-ops in its log while the new leader committed
// records there, and a catch-up past its high watermark confirmed records it never sent.
// epochStart is -1 when this node does not lead the shard.
func caughtUpTo(hw, epochStart int64, st *order.State, sh int32) int64 {
	return max(hw, min(st.Slots[sh], epochStart))
}

// catchUpBounds is a shard replica's high watermark and, if it leads, its epoch start (else
// -1), for caughtUpTo.
func catchUpBounds(p *topics.Partition) (hw, epochStart int64) {
	hw = p.Replica.HighWatermark()
	if start, ok := p.Replica.EpochStart(); ok {
		return hw, start
	}
	return hw, -1
}

// SubscribeShard streams a shard this node leads to another node's subscription: the records
// durable now from req.From on (with their positions), then the runner's events.
func (s *Server) SubscribeShard(req *pb.SubscribeShardRequest, stream pb.SpecLog_SubscribeShardServer) error {
	ctx := stream.Context()
	if err := s.allow(ctx, kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, security.ClusterResource); err != nil {
		return err
	}
	t, key, g, err := s.topicOf(req.GetTopic())
	if err != nil {
		return err
	}
	sh := req.GetShard()
	if sh < 0 || int(sh) >= len(t.Partitions) {
		return status.Errorf(codes.InvalidArgument, "no shard %d in %s", sh, t.Name)
	}
	r := s.cfg.Node.Shards().Runner(t.ID, sh)
	if r == nil {
		return status.Errorf(codes.Unavailable, "shard %d of %s is not led here", sh, t.Name)
	}
	next, _, _ := r.Head() // the live events from here; what was durable before is read below
	p := t.Partitions[sh]
	hw, epochStart := catchUpBounds(p)
	lr := &logReader{p: p}
	var view uint64
	var from, end int64
	g.Read(key, func(tp *sequencer.Topic) {
		view, end = tp.State.View, caughtUpTo(hw, epochStart, tp.State, sh)
		from = tp.State.FirstSlot(sh, req.GetFrom())
	})
	// The slots [from, end) with their positions, a chunk at a time: all of them, since the
	// live events begin at end (a catch-up cut at 1M slots left the subscription waiting for
	// the rest for good).
	chunk := func() (slots []int64, positions []uint64) {
		g.Read(key, func(tp *sequencer.Topic) {
			for ; from < end && len(slots) < 1<<16; from++ {
				if pos, ok := tp.State.Position(sh, from); ok {
					slots, positions = append(slots, from), append(positions, pos)
				}
			}
		})
		return slots, positions
	}
	out := &pb.SubscribeShardResponse{}
	size := 0
	flush := func() error {
		if len(out.Events) == 0 {
			return nil
		}
		err := stream.Send(out)
		out, size = &pb.SubscribeShardResponse{}, 0
		return err
	}
	add := func(e shardEvent) error {
		out.Events = append(out.Events, toWire(e))
		for _, rec := range e.recs {
			if rec != nil {
				size += recordBytes(rec)
			}
		}
		if size >= maxMessage {
			return flush()
		}
		return nil
	}
	for from < end {
		slots, positions := chunk()
		for i, slot := range slots {
			rec, err := lr.get(slot)
			if err != nil {
				return status.Errorf(codes.Unavailable, "reading shard %d at %d: %v", sh, slot, err)
			}
			if err := add(shardEvent{shard: sh, ev: shard.Event{Kind: shard.Deliver, Slot: slot, N: 1, Position: positions[i], View: view},
				recs: []*pb.Record{rec}}); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	events := make(chan shardEvent, 1024)
	go s.follow(ctx, t, sh, r, next, events)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-events:
			if e.err != nil {
				return status.Errorf(codes.Unavailable, "shard %d: %v", sh, e.err)
			}
			if err := add(e); err != nil {
				return err
			}
		drain:
			for range 256 {
				select {
				case e := <-events:
					if e.err != nil {
						flush()
						return status.Errorf(codes.Unavailable, "shard %d: %v", sh, e.err)
					}
					if err := add(e); err != nil {
						return err
					}
				default:
					break drain
				}
			}
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

func toWire(e shardEvent) *pb.ShardEvent {
	w := &pb.ShardEvent{Kind: uint32(e.ev.Kind), Slot: e.ev.Slot, N: e.ev.N, Position: e.ev.Position, View: e.ev.View, UpTo: e.ev.UpTo, After: e.ev.After}
	for _, r := range e.recs {
		w.NoOp = append(w.NoOp, r == nil)
		if r == nil {
			r = &pb.Record{}
		}
		w.Records = append(w.Records, r)
	}
	return w
}

func fromWire(sh int32, w *pb.ShardEvent) (shardEvent, error) {
	e := shardEvent{shard: sh, ev: shard.Event{Kind: shard.EventKind(w.GetKind()), Slot: w.GetSlot(), N: w.GetN(), Position: w.GetPosition(),
		View: w.GetView(), UpTo: w.GetUpTo(), After: w.GetAfter()}}
	if e.ev.Kind == shard.Deliver {
		if int64(len(w.GetRecords())) != e.ev.N || len(w.GetNoOp()) != len(w.GetRecords()) || e.ev.N <= 0 {
			return e, status.Errorf(codes.Internal, "a delivery of %d slots with %d records", e.ev.N, len(w.GetRecords()))
		}
		for i, r := range w.GetRecords() {
			if w.GetNoOp()[i] {
				r = nil
			}
			e.recs = append(e.recs, r)
		}
	}
	return e, nil
}

// remote streams a shard led by another node into out (the same events a local runner gives).
// leaderCheck is how often a stream from a shard's leader checks that it still leads.
const leaderCheck = 100 * time.Millisecond

func (s *Server) remote(ctx context.Context, t *topics.Topic, sh int32, from uint64, out chan<- shardEvent) {
	emit := func(e shardEvent) bool {
		select {
		case out <- e:
			return true
		case <-ctx.Done():
			return false
		}
	}
	leader := s.cfg.Node.PartitionLeader(t.Name, sh)
	addr := s.cfg.Addr(leader)
	if addr == "" {
		emit(shardEvent{shard: sh, err: status.Errorf(codes.Unavailable, "shard %d has no leader with a SpecLog address (node %d)", sh, leader)})
		return
	}
	cc, err := s.peer(addr)
	if err != nil {
		emit(shardEvent{shard: sh, err: err})
		return
	}
	// The stream ends once the shard is led elsewhere: a leader that froze or was cut off
	// holds its stream open without sending, and a replica's takeover is no view change, so
	// nothing else would make the subscriber move to the new leader.
	sctx, moved := context.WithCancelCause(ctx)
	defer moved(nil)
	go func() {
		tick := time.NewTicker(leaderCheck)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
				if now := s.cfg.Node.PartitionLeader(t.Name, sh); now != leader {
					moved(status.Errorf(codes.Unavailable, "shard %d is now led by node %d, not %d; subscribe again from the last confirmed position", sh, now, leader))
					return
				}
			}
		}
	}()
	st, err := pb.NewSpecLogClient(cc).SubscribeShard(sctx, &pb.SubscribeShardRequest{Topic: t.Name, Shard: sh, From: from})
	if err != nil {
		s.noteRefusal(addr, leader, err)
		emit(shardEvent{shard: sh, err: err})
		return
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			s.noteRefusal(addr, leader, err)
			if ctx.Err() == nil {
				if cause := context.Cause(sctx); sctx.Err() != nil && cause != nil {
					err = cause
				}
				emit(shardEvent{shard: sh, err: err})
			}
			return
		}
		for _, w := range resp.GetEvents() {
			e, err := fromWire(sh, w)
			if err != nil {
				e = shardEvent{shard: sh, err: err}
			}
			if !emit(e) || e.err != nil {
				return
			}
		}
	}
}

func (s *Server) peer(addr string) (*grpc.ClientConn, error) {
	if cc, ok := s.peers.Load(addr); ok {
		return cc.(*grpc.ClientConn), nil
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8 << 20))}, s.cfg.PeerDial...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.peers.LoadOrStore(addr, cc); loaded {
		cc.Close()
		return prev.(*grpc.ClientConn), nil
	}
	return cc, nil
}

// noteRefusal logs, as an error, a peer refusing this node's shard stream for want of
// authentication or authorization: a misconfiguration that subscribers of the shard see only as
// a stream that keeps breaking (they subscribe again), so the node says what to fix.
func (s *Server) noteRefusal(addr string, node int32, err error) {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
	default:
		return
	}
	if _, ok := s.refusals.Allow(addr, time.Now()); !ok {
		return
	}
	s.cfg.Logger.Error("speclog: another node refused this node's shard stream: give this node's principal CLUSTER_ACTION on the cluster, or make it a super user (docs/security.md, The SpecLog API)",
		"node", node, "addr", addr, "err", err)
}
