// Package service is the SpecLog gRPC service of a node (docs/speclog.md §6): appends to the
// shards this node leads, subscriptions merging the shards' speculative deliveries into the
// global order (order.Merger), reads of confirmed records, trims and descriptions.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/logevery"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/speclog/order"
	"github.com/runnel-dev/runnel/internal/speclog/sequencer"
	"github.com/runnel-dev/runnel/internal/speclog/shard"
	"github.com/runnel-dev/runnel/internal/topics"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// Node is what the service needs of the cluster node it runs on.
type Node interface {
	NodeID() int32
	Sequencer() *sequencer.Group // nil on an agent
	Shards() *shard.Manager
	// PartitionLeader is the node leading a topic's partition (-1: none).
	PartitionLeader(topic string, partition int32) int32
}

// Config configures the service.
type Config struct {
	Node     Node
	Registry *topics.Registry
	Logger   *slog.Logger
	// Addr is a node's SpecLog address ("" unknown), for Describe and redirections.
	Addr func(node int32) string
	// Auth authorizes calls (its interceptors authenticate them); nil allows every call.
	Auth *Auth
	// PeerDial are the options of connections to other nodes' SpecLog services (default:
	// plaintext).
	PeerDial []grpc.DialOption
	// ProducerIDs hands out idempotent appenders' producer ids (the Kafka listener's
	// allocator); nil: InitProducer is not served.
	ProducerIDs interface{ Next() (int64, error) }
	// OnAppend, if set, is told each answered append's time to durable and then to sequenced.
	OnAppend func(durable, sequenced time.Duration)
}

// Server implements speclogpb.SpecLogServer.
type Server struct {
	pb.UnimplementedSpecLogServer
	cfg   Config
	peers sync.Map // address → *grpc.ClientConn: other nodes' SpecLog services
	// refusals: a peer's refusal of this node's shard stream is logged at most every 10 s per
	// address (subscribers retry while it lasts)
	refusals logevery.Keyed[string]
}

// New returns the service.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Addr == nil {
		cfg.Addr = func(int32) string { return "" }
	}
	return &Server{cfg: cfg, refusals: logevery.Keyed[string]{Every: 10 * time.Second}}
}

// topicOf finds a total-order topic and the sequencer group that orders it.
func (s *Server) topicOf(name string) (*topics.Topic, string, *sequencer.Group, error) {
	t, ok := s.cfg.Registry.Get(name)
	if !ok {
		return nil, "", nil, status.Errorf(codes.NotFound, "no topic %q", name)
	}
	if !shard.Total(t.Configs) {
		return nil, "", nil, status.Errorf(codes.InvalidArgument, "topic %q is not a total-order topic (runnel.ordering=total)", name)
	}
	g := s.cfg.Node.Sequencer()
	if g == nil {
		return nil, "", nil, status.Errorf(codes.Unavailable, "node %d is an agent: it holds no sequencer state", s.cfg.Node.NodeID())
	}
	key := shard.TopicKey(t.ID)
	if !g.Read(key, func(*sequencer.Topic) {}) {
		return nil, "", nil, status.Errorf(codes.Unavailable, "topic %q is not sequenced yet", name)
	}
	return t, key, g, nil
}

// notLeader is the error of a request for a shard led elsewhere.
func (s *Server) notLeader(t *topics.Topic, sh int32) error {
	l := s.cfg.Node.PartitionLeader(t.Name, sh)
	return status.Errorf(codes.FailedPrecondition, "shard %d of %s is led by node %d (%s)", sh, t.Name, l, s.cfg.Addr(l))
}

// Append appends records to a shard and answers with their committed positions.
func (s *Server) Append(ctx context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	received := time.Now()
	if err := s.allowTopic(ctx, kmsg.ACLOperationWrite, req.GetTopic()); err != nil {
		return nil, err
	}
	t, key, g, err := s.topicOf(req.GetTopic())
	if err != nil {
		return nil, err
	}
	sh := req.GetShard()
	if sh < 0 || int(sh) >= len(t.Partitions) {
		return nil, status.Errorf(codes.InvalidArgument, "no shard %d in %s (%d shards)", sh, t.Name, len(t.Partitions))
	}
	if len(req.GetRecords()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "an append needs records")
	}
	p := t.Partitions[sh]
	if p.Replica == nil {
		return nil, s.notLeader(t, sh)
	}
	b := encodeBatch(req.GetRecords(), time.Now().UnixMilli(), req.ProducerId, req.GetProducerEpoch(), req.GetBaseSequence())
	maxBytes, _ := t.Effective("max.message.bytes")
	if limit, _ := strconv.Atoi(maxBytes); len(b) > limit {
		return nil, status.Errorf(codes.InvalidArgument, "%d bytes of records exceed max.message.bytes %d", len(b), limit)
	}
	res, epoch, err := p.Replica.Append(b)
	if err != nil {
		if errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.UnknownProducerID) {
			// Nothing stored: the producer's sequence is off (an earlier append of it was lost
			// or is unknown here); it must start again with a new producer id.
			return nil, status.Errorf(codes.Aborted, "appending to shard %d: %v", sh, err)
		}
		if errors.Is(err, shard.ErrStopped) || p.Replica.HighWatermark() < 0 {
			return nil, s.notLeader(t, sh)
		}
		if _, _, leading := p.Replica.Leading(); !leading {
			return nil, s.notLeader(t, sh)
		}
		return nil, status.Errorf(codes.Unavailable, "appending to shard %d: %v", sh, err)
	}
	p.NotifyAppend()
	if !p.Log.WriteCaching() {
		p.Log.SyncSoon()
	}
	end := res.Last + 1
	if err := p.Replica.WaitCommitted(ctx, epoch, end); err != nil {
		return nil, waitErr(err, "replicating")
	}
	durable := time.Now()
	r, err := s.cfg.Node.Shards().WaitRunner(ctx, t.ID, sh)
	if err == nil {
		err = r.WaitAcked(ctx, end)
	}
	if err != nil {
		return nil, waitErr(err, "sequencing")
	}
	if s.cfg.OnAppend != nil {
		s.cfg.OnAppend(durable.Sub(received), time.Since(durable))
	}
	out := &pb.AppendResponse{Offset: res.First}
	g.Read(key, func(tp *sequencer.Topic) {
		for slot := res.First; slot < end; slot++ {
			pos, ok := tp.State.Position(sh, slot)
			if !ok {
				err = status.Errorf(codes.Internal, "shard %d slot %d acknowledged without a position", sh, slot)
				return
			}
			out.Positions = append(out.Positions, pos)
		}
	})
	return out, err
}

// appendStreamInFlight bounds the appends one AppendStream has in flight: past it the stream's
// next request is not read until one is answered (HTTP/2 flow control holds the client back).
const appendStreamInFlight = 1024

// AppendStream serves Append over one stream: each request is appended as Append does, in its
// own goroutine, and answered by its id once committed, or with the status Append would have
// answered. The stream ends when the client closes its side and every append is answered.
func (s *Server) AppendStream(st pb.SpecLog_AppendStreamServer) error {
	ctx := st.Context()
	var (
		wg      sync.WaitGroup
		sendMu  sync.Mutex
		sendErr error
	)
	defer wg.Wait()
	sem := make(chan struct{}, appendStreamInFlight)
	for {
		req, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out := &pb.AppendStreamResponse{Id: req.GetId()}
			resp, err := s.Append(ctx, req.GetAppend())
			if err != nil {
				refusal := status.Convert(err)
				out.Code, out.Message = int32(refusal.Code()), refusal.Message()
			} else {
				out.Append = resp
			}
			sendMu.Lock()
			defer sendMu.Unlock()
			if sendErr == nil {
				sendErr = st.Send(out) // the stream is gone: ctx ends the others
			}
		}()
	}
}

func waitErr(err error, what string) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", what, err)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: %v", what, err)
	}
	return status.Errorf(codes.Unavailable, "%s: %v (the append may have been stored; retry)", what, err)
}

// InitProducer gives an idempotent appender a new producer id at epoch 0, as Kafka's
// InitProducerId does for an idempotent producer (who may: IDEMPOTENT_WRITE on the cluster, or
// WRITE on some topic).
func (s *Server) InitProducer(ctx context.Context, _ *pb.InitProducerRequest) (*pb.InitProducerResponse, error) {
	if s.allow(ctx, kmsg.ACLOperationIdempotentWrite, kmsg.ACLResourceTypeCluster, security.ClusterResource) != nil && !s.allowAnyTopic(ctx, kmsg.ACLOperationWrite) {
		return nil, status.Error(codes.PermissionDenied, "an idempotent appender needs IDEMPOTENT_WRITE on the cluster or WRITE on a topic")
	}
	if s.cfg.ProducerIDs == nil {
		return nil, status.Error(codes.Unimplemented, "this node hands out no producer ids")
	}
	id, err := s.cfg.ProducerIDs.Next()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "allocating a producer id: %v", err)
	}
	return &pb.InitProducerResponse{ProducerId: id, ProducerEpoch: 0}, nil
}

// encodeBatch encodes records as one uncompressed record batch, of an idempotent producer when
// pid is set.
func encodeBatch(recs []*pb.Record, nowMs int64, pid *int64, epoch, seq int32) []byte {
	var body []byte
	base := nowMs
	if ts := recs[0].GetTimestampMs(); ts > 0 {
		base = ts
	}
	maxTs := base
	for i, r := range recs {
		ts := r.GetTimestampMs()
		if ts <= 0 {
			ts = nowMs
		}
		maxTs = max(maxTs, ts)
		var hs []byte
		for _, h := range r.GetHeaders() {
			hs = batch.AppendHeader(hs, h.GetKey(), h.GetValue())
		}
		body = batch.AppendRecord(body, ts-base, int32(i), r.GetKey(), r.GetValue(), int32(len(r.GetHeaders())), hs)
	}
	h := batch.Header{LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: base, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(len(recs))}
	if pid != nil {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = *pid, int16(epoch), seq
	}
	return batch.AppendBatch(nil, h, body)
}

// Describe describes a topic's shards and positions, with the heads of the shards this node
// leads; with shard_heads, also the other shards' heads, their leaders asked in parallel for at
// most a second (a shard whose leader does not answer has none). With local_shards it answers
// only the shards this node leads.
func (s *Server) Describe(ctx context.Context, req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	if req.GetLocalShards() {
		if err := s.allow(ctx, kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, security.ClusterResource); err != nil {
			return nil, err
		}
	} else if err := s.allowTopic(ctx, kmsg.ACLOperationDescribe, req.GetTopic()); err != nil {
		return nil, err
	}
	t, key, g, err := s.topicOf(req.GetTopic())
	if err != nil {
		return nil, err
	}
	out := &pb.DescribeResponse{Topic: t.Name, SequencerLeader: g.Leader()}
	for _, n := range g.Members() {
		if a := s.cfg.Addr(n); a != "" {
			out.NodeAddrs = append(out.NodeAddrs, a)
		}
	}
	g.Read(key, func(tp *sequencer.Topic) {
		st := tp.State
		cur := st.Current()
		out.Confirmed, out.View, out.Trimmed, out.Window = st.Committed(), st.View, tp.Trimmed, cur.Window
		out.WindowCuts, out.IntervalUs = uint32(tp.Config.W), uint64(tp.Config.TOrd/time.Microsecond)
		for i := range int32(len(t.Partitions)) {
			info := &pb.ShardInfo{Shard: i, Leader: s.cfg.Node.PartitionLeader(t.Name, i), Failed: st.Out[i]}
			info.LeaderAddr = s.cfg.Addr(info.Leader)
			if j := cur.Index(i); j >= 0 {
				info.Quota = uint64(cur.Quotas[j])
			}
			out.Shards = append(out.Shards, info)
		}
	})
	s.shardHeads(ctx, t, out, req.GetLocalShards(), req.GetShardHeads())
	return out, nil
}

// shardHeads fills in each shard's head: from this node's runner, else (if ask) from its
// leader's Describe with local_shards. With local, the shards led elsewhere are left out.
func (s *Server) shardHeads(ctx context.Context, t *topics.Topic, out *pb.DescribeResponse, local, ask bool) {
	remote := map[string][]*pb.ShardInfo{} // leader address → its shards
	kept := out.Shards[:0]
	for _, info := range out.Shards {
		if r := s.cfg.Node.Shards().Runner(t.ID, info.Shard); r != nil {
			delivered, _, view, durable := r.Delivered()
			info.Delivered, info.DeliveredView, info.DurableSlots = &delivered, view, durable
			info.LogStart = proto.Int64(t.Partitions[info.Shard].Log.StartOffset())
		} else if local {
			continue
		} else if ask && info.LeaderAddr != "" {
			remote[info.LeaderAddr] = append(remote[info.LeaderAddr], info)
		}
		kept = append(kept, info)
	}
	out.Shards = kept
	if len(remote) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for addr, infos := range remote {
		wg.Go(func() {
			cc, err := s.peer(addr)
			if err != nil {
				return
			}
			d, err := pb.NewSpecLogClient(cc).Describe(ctx, &pb.DescribeRequest{Topic: t.Name, LocalShards: true})
			if err != nil {
				s.cfg.Logger.Debug("speclog: a shard leader's head", "addr", addr, "err", err)
				return
			}
			for _, h := range d.GetShards() {
				for _, info := range infos {
					if info.Shard == h.GetShard() && h.Delivered != nil {
						info.Delivered, info.DeliveredView, info.DurableSlots = h.Delivered, h.GetDeliveredView(), h.GetDurableSlots()
						info.LogStart = h.LogStart
					}
				}
			}
		})
	}
	wg.Wait()
}

// trimWait bounds how long a Trim waits for the sequencer to commit the trim point and then
// for the shards' leaders to follow it.
const trimWait = 10 * time.Second

// Trim trims every position below up_to: the sequencer's leader commits the trim point (it
// forgets the layout below it, and reads and subscriptions below it are refused from then on),
// then every shard's leader moves its partition's log start to its first slot at or after it
// (shard.Manager). Any node serves it; it answers once every shard's leader has its log start
// there, and is DEADLINE_EXCEEDED if one has not within trimWait (the trim stands and the shard
// follows it once led; a Trim again waits for it).
func (s *Server) Trim(ctx context.Context, req *pb.TrimRequest) (*pb.TrimResponse, error) {
	if err := s.allowTopic(ctx, kmsg.ACLOperationDelete, req.GetTopic()); err != nil {
		return nil, err
	}
	t, key, g, err := s.topicOf(req.GetTopic())
	if err != nil {
		return nil, err
	}
	upTo := req.GetUpTo()
	var confirmed, trimmed uint64
	g.Read(key, func(tp *sequencer.Topic) { confirmed, trimmed = tp.State.Committed(), tp.Trimmed })
	if upTo > confirmed {
		return nil, status.Errorf(codes.OutOfRange, "trim up to %d: positions are confirmed up to %d", upTo, confirmed)
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, trimWait)
	defer cancel()
	// The trim point: asked of the sequencer's leader until this node's member has applied it
	// (the ask may be lost, or the leader move).
	ask := time.NewTicker(200 * time.Millisecond)
	defer ask.Stop()
	for asked := false; trimmed < upTo; {
		ch := g.Changed()
		if !asked {
			if err := g.Trim(key, upTo); err != nil && !errors.Is(err, sequencer.ErrNotLeader) {
				return nil, status.Errorf(codes.Unavailable, "trim: %v", err)
			}
			asked = true
		}
		select {
		case <-ch:
		case <-ask.C:
			asked = false
		case <-ctx.Done():
			if caller.Err() != nil {
				return nil, status.FromContextError(caller.Err()).Err()
			}
			return nil, status.Errorf(codes.DeadlineExceeded, "trim up to %d: not committed by the sequencer (led by node %d) in %v", upTo, g.Leader(), trimWait)
		}
		g.Read(key, func(tp *sequencer.Topic) { trimmed = tp.Trimmed })
	}
	// Every shard's leader follows it.
	for {
		pending := s.untrimmed(ctx, t, key, g)
		if len(pending) == 0 {
			return &pb.TrimResponse{Trimmed: trimmed}, nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			if caller.Err() != nil {
				return nil, status.FromContextError(caller.Err()).Err()
			}
			return nil, status.Errorf(codes.DeadlineExceeded, "positions below %d are trimmed, but the leaders of shards %v have not moved their log start there in %v (they will once the shards are led: Trim again to wait)", trimmed, pending, trimWait)
		}
	}
}

// untrimmed lists the shards whose leader's log start is not yet at the trim point's (by this
// node's runners, and the other leaders' Describe).
func (s *Server) untrimmed(ctx context.Context, t *topics.Topic, key string, g *sequencer.Group) []int32 {
	out := &pb.DescribeResponse{}
	want := map[int32]int64{}
	for i := range int32(len(t.Partitions)) {
		_, want[i] = g.TrimPoint(key, i)
		l := s.cfg.Node.PartitionLeader(t.Name, i)
		out.Shards = append(out.Shards, &pb.ShardInfo{Shard: i, Leader: l, LeaderAddr: s.cfg.Addr(l)})
	}
	s.shardHeads(ctx, t, out, false, true)
	var pending []int32
	for _, info := range out.Shards {
		if info.LogStart == nil || info.GetLogStart() < want[info.GetShard()] {
			pending = append(pending, info.GetShard())
		}
	}
	return pending
}

// owner is a position's owner by the sequencer state on this node.
func owner(g *sequencer.Group, key string) func(pos uint64) (int32, bool, bool) {
	return func(pos uint64) (sh int32, noOp, ok bool) {
		g.Read(key, func(tp *sequencer.Topic) {
			if pos < tp.Trimmed {
				return
			}
			sh, _, noOp, ok = tp.State.Owner(pos)
		})
		return sh, noOp, ok
	}
}

// Read returns confirmed records from a position.
func (s *Server) Read(ctx context.Context, req *pb.ReadRequest) (*pb.ReadResponse, error) {
	if err := s.allowTopic(ctx, kmsg.ACLOperationRead, req.GetTopic()); err != nil {
		return nil, err
	}
	t, key, g, err := s.topicOf(req.GetTopic())
	if err != nil {
		return nil, err
	}
	n := int(req.GetMaxRecords())
	if n <= 0 || n > 10000 {
		n = 1000
	}
	var st *order.State
	var trimmed uint64
	g.Read(key, func(tp *sequencer.Topic) { st, trimmed = tp.State.Clone(), tp.Trimmed })
	from, confirmed := req.GetFrom(), st.Committed()
	if from < trimmed {
		return nil, status.Errorf(codes.OutOfRange, "position %d is trimmed (the log starts at %d)", from, trimmed)
	}
	// The positions to read (at most n, some of which may turn out to be a shard's own no-op
	// slots), readChunk at a time: each shard's slots among them, from this node's log or the
	// shard's leader, until the answer holds maxReadBytes (so big records are not all read
	// before the cut).
	type owned struct {
		pos  uint64
		sh   int32
		slot int64
	}
	out := &pb.ReadResponse{Confirmed: confirmed}
	pos, counted, size := from, 0, 0
	for laidOut := true; laidOut && pos < confirmed && counted < n; {
		var wants []owned
		span := map[int32][2]int64{} // each shard's slots [lo, hi)
		for ; pos < confirmed && counted < n && len(wants) < readChunk; pos++ {
			sh, slot, noOp, ok := st.Owner(pos)
			if !ok {
				laidOut = false
				break
			}
			if noOp {
				continue
			}
			wants, counted = append(wants, owned{pos, sh, slot}), counted+1
			if r, ok := span[sh]; !ok {
				span[sh] = [2]int64{slot, slot + 1}
			} else {
				span[sh] = [2]int64{min(r[0], slot), max(r[1], slot+1)}
			}
		}
		slots := map[int32]map[int64]*pb.Record{}
		for sh, r := range span {
			if slots[sh], err = s.shardSlots(ctx, t, sh, r[0], r[1]); err != nil {
				return nil, err
			}
		}
		for _, w := range wants {
			rec := slots[w.sh][w.slot]
			if rec == nil {
				continue
			}
			if size += recordBytes(rec); size > maxReadBytes && len(out.Records) > 0 {
				// The rest from w.pos on, at the next call: a bigger answer passes the client's
				// 4 MiB receive limit (1,000 records of 4 KB did).
				out.Next = w.pos
				return out, nil
			}
			out.Records = append(out.Records, &pb.Delivery{Position: w.pos, View: st.View, Shard: w.sh, Offset: w.slot, Record: rec})
		}
	}
	out.Next = pos
	return out, nil
}

// readChunk is how many positions a Read reads the records of at a time.
const readChunk = 256

// maxReadBytes bounds a Read answer's records (gRPC clients receive 4 MiB by default).
const maxReadBytes = 3 << 20

// shardSlots reads slots [lo, hi) of shard sh (a nil record: a no-op slot): from this node's
// replica when its log holds them all, else from the shard's leader (ReadShard).
func (s *Server) shardSlots(ctx context.Context, t *topics.Topic, sh int32, lo, hi int64) (map[int64]*pb.Record, error) {
	out := make(map[int64]*pb.Record, hi-lo)
	// From this node's log only what its replica knows to be committed (a deposed leader's
	// log may hold a suffix the new leader replaced).
	var local error
	if p := t.Partitions[sh]; p.Log != nil && p.Replica != nil && p.Replica.HighWatermark() >= hi {
		r := &logReader{p: p}
		for slot := lo; slot < hi && local == nil; slot++ {
			rec, err := r.get(slot)
			if err != nil {
				local = fmt.Errorf("reading shard %d at %d: %w", sh, slot, err)
			}
			out[slot] = rec
		}
		if local == nil {
			return out, nil
		}
		// A follower's retention runs on its own segments and may have deleted what the
		// leader keeps: the leader is asked.
		clear(out)
	}
	leader := s.cfg.Node.PartitionLeader(t.Name, sh)
	addr := s.cfg.Addr(leader)
	if leader == s.cfg.Node.NodeID() || addr == "" {
		if local != nil {
			return nil, status.Error(codes.Unavailable, local.Error())
		}
		return nil, status.Errorf(codes.Unavailable, "shard %d: slots up to %d are not readable here and its leader (node %d) cannot be asked", sh, hi, leader)
	}
	cc, err := s.peer(addr)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "shard %d: %v", sh, err)
	}
	for from := lo; from < hi; {
		resp, err := pb.NewSpecLogClient(cc).ReadShard(ctx, &pb.ReadShardRequest{Topic: t.Name, Shard: sh, FromSlot: from, ToSlot: hi})
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "shard %d: reading from its leader (node %d): %v", sh, leader, err)
		}
		if resp.GetFromSlot() != from || len(resp.GetNoOp()) == 0 || len(resp.GetRecords()) != len(resp.GetNoOp()) {
			return nil, status.Errorf(codes.Internal, "shard %d: node %d answered slots from %d (%d records) for %d", sh, leader, resp.GetFromSlot(), len(resp.GetNoOp()), from)
		}
		for i, noOp := range resp.GetNoOp() {
			if !noOp {
				out[from+int64(i)] = resp.GetRecords()[i]
			}
		}
		from += int64(len(resp.GetNoOp()))
	}
	return out, nil
}

// ReadShard reads slots of a shard this node hosts, for another node's Read.
func (s *Server) ReadShard(ctx context.Context, req *pb.ReadShardRequest) (*pb.ReadShardResponse, error) {
	if err := s.allow(ctx, kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, security.ClusterResource); err != nil {
		return nil, err
	}
	t, key, g, err := s.topicOf(req.GetTopic())
	if err != nil {
		return nil, err
	}
	sh, from := req.GetShard(), req.GetFromSlot()
	if sh < 0 || int(sh) >= len(t.Partitions) {
		return nil, status.Errorf(codes.InvalidArgument, "no shard %d in %s", sh, t.Name)
	}
	p := t.Partitions[sh]
	if p.Log == nil || p.Replica == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "shard %d is not hosted on this node", sh)
	}
	// Only slots this replica has as committed: below its high watermark, or, while it leads,
	// below the shard's committed slots up to its epoch start (a new leader's high watermark
	// trails them a moment; caughtUpTo says why not above). A replica that lost the leadership
	// may hold an uncommitted suffix that the new leader has other records at.
	hw, epochStart := catchUpBounds(p)
	limit := hw
	if _, ready, leading := p.Replica.Leading(); leading && ready {
		g.Read(key, func(tp *sequencer.Topic) { limit = caughtUpTo(hw, epochStart, tp.State, sh) })
	}
	to := min(req.GetToSlot(), p.Log.EndOffset(), limit)
	if from >= to {
		return nil, status.Errorf(codes.Unavailable, "shard %d: slot %d is not committed here (the log ends at %d, committed below %d)", sh, from, p.Log.EndOffset(), limit)
	}
	out := &pb.ReadShardResponse{FromSlot: from}
	r, size := &logReader{p: p}, 0
	for slot := from; slot < to && size < maxMessage*4; slot++ {
		rec, err := r.get(slot)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "reading shard %d at %d: %v", sh, slot, err)
		}
		out.NoOp = append(out.NoOp, rec == nil)
		if rec == nil {
			rec = &pb.Record{}
		}
		out.Records = append(out.Records, rec)
		size += recordBytes(rec)
	}
	return out, nil
}

// logReader reads a partition's records by offset, a chunk at a time.
type logReader struct {
	p    *topics.Partition
	recs map[int64]*pb.Record // the last chunk's records by offset
	lo   int64                // the chunk's offsets
	hi   int64
}

// get is the record at offset (nil: a no-op slot), reading a new chunk when needed.
func (r *logReader) get(offset int64) (*pb.Record, error) {
	if r.p == nil || r.p.Log == nil {
		return nil, fmt.Errorf("the partition is not hosted on this node")
	}
	if offset < r.lo || offset >= r.hi {
		if err := r.load(offset); err != nil {
			return nil, err
		}
	}
	return r.recs[offset], nil
}

func (r *logReader) load(from int64) error {
	data, err := r.p.Log.Read(nil, from, 1<<20)
	if err != nil {
		return err
	}
	r.recs, r.lo, r.hi = map[int64]*pb.Record{}, from, from
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil {
			return err
		}
		b := data[:h.Size()]
		data = data[h.Size():]
		r.hi = h.NextOffset()
		if h.IsControl() {
			continue // no-op entries: their slots have no record
		}
		err = batch.EachRecord(&h, b, func(rec *batch.Record) {
			off := h.BaseOffset + int64(rec.OffsetDelta)
			if off < from {
				return
			}
			pr := &pb.Record{Key: clone(rec.Key), Value: clone(rec.Value), TimestampMs: h.BaseTimestamp + rec.TimestampDelta}
			batch.EachHeader(rec.Headers, rec.HeaderCount, func(k string, v []byte) {
				pr.Headers = append(pr.Headers, &pb.Header{Key: k, Value: clone(v)})
			})
			r.recs[off] = pr
		})
		if err != nil {
			return err
		}
	}
	if r.hi <= from {
		return fmt.Errorf("offset %d is past the log end", from)
	}
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
