package service

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/runnel-dev/runnel/internal/speclog/order"
	"github.com/runnel-dev/runnel/internal/speclog/sequencer"
	"github.com/runnel-dev/runnel/internal/speclog/shard"
	"github.com/runnel-dev/runnel/internal/topics"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// maxMessage bounds a subscription message's records (bytes).
const maxMessage = 1 << 20

// catchUpChunk bounds the records a catch-up reads before sending them (bytes): a batch of
// positions is laid out 4096 at a time, and 4096 records of up to max.message.bytes each were
// held at once by one subscription.
const catchUpChunk = 4 << 20

// catchUpHold bounds what the merger may hold while the catch-up reads on (bytes): records it
// cannot emit before a shard led elsewhere delivers.
const catchUpHold = 16 << 20

// recordBytes is what a record takes in a message: its encoded size, headers included (they
// were not counted, and records with big headers made messages past a client's 4 MiB receive
// limit, which broke the subscription at every attempt).
func recordBytes(r *pb.Record) int { return proto.Size(r) + 16 }

// shardEvent is a shard's event with its records read (one per delivered slot; nil for the
// shard's own no-op slots).
type shardEvent struct {
	shard int32
	ev    shard.Event
	recs  []*pb.Record
	err   error
}

// record is what the merger carries for a delivered record.
type record struct {
	shard  int32
	offset int64
	rec    *pb.Record
}

// Subscribe streams the topic in global order from req.From (docs/speclog.md §6).
func (s *Server) Subscribe(req *pb.SubscribeRequest, stream pb.SpecLog_SubscribeServer) error {
	ctx := stream.Context()
	if err := s.allowTopic(ctx, kmsg.ACLOperationRead, req.GetTopic()); err != nil {
		return err
	}
	t, key, g, err := s.topicOf(req.GetTopic())
	if err != nil {
		return err
	}
	wanted := map[int32]bool{}
	all := len(req.GetShards()) == 0 // every shard, those added later too
	for _, sh := range req.GetShards() {
		if sh < 0 || int(sh) >= len(t.Partitions) {
			return status.Errorf(codes.InvalidArgument, "no shard %d in %s", sh, t.Name)
		}
		wanted[sh] = true
	}
	if len(wanted) == 0 {
		for i := range int32(len(t.Partitions)) {
			wanted[i] = true
		}
	}
	var trimmed uint64
	g.Read(key, func(tp *sequencer.Topic) { trimmed = tp.Trimmed })
	if req.GetFrom() < trimmed {
		return status.Errorf(codes.OutOfRange, "position %d is trimmed (the log starts at %d)", req.GetFrom(), trimmed)
	}
	// The shards led here are read from their runners, the others from their leaders
	// (SubscribeShard, node to node).
	mgr := s.cfg.Node.Shards()
	runners := map[int32]*shard.Runner{}
	var remotes []int32
	for sh := range wanted {
		if l := s.cfg.Node.PartitionLeader(t.Name, sh); l != s.cfg.Node.NodeID() && mgr.Runner(t.ID, sh) == nil {
			remotes = append(remotes, sh)
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := mgr.WaitRunner(wctx, t.ID, sh)
		cancel()
		if err != nil {
			return status.Errorf(codes.Unavailable, "shard %d of %s is not running here yet", sh, t.Name)
		}
		runners[sh] = r
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan shardEvent, 1024)
	// The runners' events from now on; what came before is read from the logs below.
	for sh, r := range runners {
		next, _, _ := r.Head()
		go s.follow(ctx, t, sh, r, next, events)
	}
	for _, sh := range remotes { // the leader catches up from its own log first
		go s.remote(ctx, t, sh, req.GetFrom(), events)
	}
	// Without a filter every shard is wanted, one added to the topic after the subscription
	// began too: the merger waits at its first position instead of skipping it (and confirming
	// past it), and the stream ends below once the topic has it, so that the client subscribes
	// again, following it, from a confirmed position before it.
	m := order.NewMerger(req.GetFrom(), owner(g, key), func(sh int32) bool { return all || wanted[sh] })
	m.Views(func(v uint64) (after uint64, ok bool) {
		g.Read(key, func(tp *sequencer.Topic) { after, ok = tp.State.ViewAfter(v) })
		return after, ok
	})
	m.SetSize(func(rec any) int { return recordBytes(rec.(record).rec) })
	confirmedOnly := req.GetConfirmedOnly()
	var held []order.Event // confirmed_only: records waiting for their confirmation
	send := func(evs []order.Event) error {
		if len(evs) == 0 {
			return nil
		}
		out := &pb.SubscribeResponse{}
		var sizes []int // of out.Events' records (0: not a record), counted by the merger
		for _, e := range evs {
			switch e.Kind {
			case order.EventRecord:
				if confirmedOnly {
					held = append(held, e)
					continue
				}
				out.Events, sizes = append(out.Events, recordEvent(e, e.Speculative)), append(sizes, e.Size)
			case order.EventConfirm:
				if confirmedOnly {
					n := 0
					for _, h := range held {
						if h.Position >= e.UpTo {
							break
						}
						out.Events, sizes = append(out.Events, recordEvent(h, false)), append(sizes, h.Size)
						n++
					}
					held = slices.Delete(held, 0, n)
				}
				out.Events, sizes = append(out.Events, &pb.Event{Kind: &pb.Event_Confirm{Confirm: &pb.Confirm{UpTo: e.UpTo, View: e.View}}}), append(sizes, 0)
			case order.EventFail:
				if confirmedOnly {
					held = slices.DeleteFunc(held, func(h order.Event) bool { return h.Position >= e.After })
					continue
				}
				out.Events, sizes = append(out.Events, &pb.Event{Kind: &pb.Event_Fail{Fail: &pb.Fail{After: e.After, View: e.View}}}), append(sizes, 0)
			}
		}
		// Messages of at most about maxMessage bytes (gRPC clients refuse more than 4 MiB).
		for len(out.Events) > 0 {
			n, size := 0, 0
			for n < len(out.Events) && (n == 0 || size < maxMessage) {
				size += sizes[n]
				n++
			}
			if err := stream.Send(&pb.SubscribeResponse{Events: out.Events[:n]}); err != nil {
				return err
			}
			out.Events, sizes = out.Events[n:], sizes[n:]
		}
		return nil
	}
	// Catch up from the logs: the confirmed positions from req.From on.
	local := map[int32]bool{}
	for sh := range runners {
		local[sh] = true
	}
	// While catching up, the merger may wait for a shard led elsewhere: its stream's events are
	// taken then, so that what the catch-up read can go out (else the whole local backlog
	// was held), and the catch-up pauses while the merger holds more than catchUpHold.
	pump := func(wait bool) error {
		var evs []order.Event
		for {
			var e shardEvent
			if wait {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case e = <-events:
				}
				wait = false
			} else {
				select {
				case e = <-events:
				default:
					return send(evs)
				}
			}
			if e.err != nil {
				if err := send(evs); err != nil {
					return err
				}
				return streamEnded(e)
			}
			evs = s.take(m, e, evs)
		}
	}
	hold := func() error {
		for m.Held() > catchUpHold {
			if sh, ok := m.Waiting(); !ok || local[sh] {
				return nil // the catch-up itself gives what the merger waits for
			}
			if err := pump(true); err != nil {
				return err
			}
		}
		return pump(false)
	}
	if err := s.catchUp(ctx, t, g, key, m, local, send, hold); err != nil {
		if ctx.Err() != nil {
			return nil // the subscriber left
		}
		return err
	}
	changed := g.Changed()
	checks := time.NewTicker(100 * time.Millisecond) // shards added, a trim under the subscriber
	defer checks.Stop()
	var failed *shardEvent // a shard's stream ended: reported after what came before it is sent
	for failed == nil {
		var evs []order.Event
		select {
		case <-ctx.Done():
			return nil
		case <-checks.C:
			if cur, ok := s.cfg.Registry.Get(t.Name); all && ok && cur.ID == t.ID && len(cur.Partitions) > len(wanted) {
				return status.Errorf(codes.Unavailable, "%s has %d shards now (%d when subscribed): subscribe again from the last confirmed position", t.Name, len(cur.Partitions), len(wanted))
			}
			var trimmed uint64
			g.Read(key, func(tp *sequencer.Topic) { trimmed = tp.Trimmed })
			if next := m.Next(); next < trimmed { // trimmed under the subscriber: its positions are gone
				return status.Errorf(codes.OutOfRange, "position %d was trimmed while the subscription read it (the log starts at %d)", next, trimmed)
			}
		case <-changed: // new tables may let the merger place what it holds
			changed = g.Changed()
			evs = m.Confirm(0, 0)
		case e := <-events:
			if e.err != nil {
				failed = &e
				break
			}
			evs = s.take(m, e, nil)
		drain:
			for range 256 {
				select {
				case e := <-events:
					if e.err != nil {
						failed = &e
						break drain
					}
					evs = s.take(m, e, evs)
				default:
					break drain
				}
			}
		}
		if err := send(evs); err != nil {
			return err
		}
	}
	return streamEnded(*failed)
}

// streamEnded is a subscription's answer when a shard's stream ended.
func streamEnded(failed shardEvent) error {
	if errors.Is(failed.err, shard.ErrBehind) {
		return status.Errorf(codes.ResourceExhausted, "shard %d: the subscriber fell behind; subscribe again from its last confirmed position", failed.shard)
	}
	return status.Errorf(codes.Unavailable, "shard %d: %v; subscribe again from the last confirmed position", failed.shard, failed.err)
}

// take feeds a shard event to the merger.
func (s *Server) take(m *order.Merger, e shardEvent, evs []order.Event) []order.Event {
	switch e.ev.Kind {
	case shard.Deliver:
		for k := range e.ev.N {
			var rec any
			if r := e.recs[k]; r != nil {
				rec = record{e.shard, e.ev.Slot + k, r}
			}
			evs = append(evs, m.Deliver(e.ev.Position+uint64(k), e.shard, rec, e.ev.View)...)
		}
	case shard.Confirm:
		evs = append(evs, m.Confirm(e.ev.UpTo, e.ev.View)...)
	case shard.Fail:
		evs = append(evs, m.Fail(e.ev.After, e.ev.View)...)
	}
	return evs
}

func recordEvent(e order.Event, speculative bool) *pb.Event {
	r := e.Record.(record)
	return &pb.Event{Kind: &pb.Event_Record{Record: &pb.Delivery{Position: e.Position, View: e.View, Speculative: speculative,
		Shard: r.shard, Offset: r.offset, Record: r.rec}}}
}

// follow reads a runner's events from index next, with their records, into out.
func (s *Server) follow(ctx context.Context, t *topics.Topic, sh int32, r *shard.Runner, next uint64, out chan<- shardEvent) {
	lr := &logReader{p: t.Partitions[sh]}
	emit := func(e shardEvent) bool {
		select {
		case out <- e:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		evs, n, ch, err := r.Events(next)
		if err != nil {
			emit(shardEvent{shard: sh, err: err})
			return
		}
		next = n
		for _, ev := range evs {
			e := shardEvent{shard: sh, ev: ev}
			if ev.Kind == shard.Deliver {
				e.recs = make([]*pb.Record, ev.N)
				for k := range ev.N {
					if e.recs[k], err = lr.get(ev.Slot + k); err != nil {
						emit(shardEvent{shard: sh, err: err})
						return
					}
				}
			}
			if !emit(e) {
				return
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// catchUp delivers, read from the logs of the shards led here (wanted), every position from the
// merger's start whose record was durable when the live events were taken up (the confirmed ones, and those
// delivered speculatively before), or is committed (caughtUpTo): a shard's records from the
// first one not durable then on come with its live events (which repeat some; the merger drops
// repeats).
func (s *Server) catchUp(ctx context.Context, t *topics.Topic, g *sequencer.Group, key string, m *order.Merger,
	wanted map[int32]bool, send func([]order.Event) error, hold func() error) error {
	readers := map[int32]*logReader{}
	hw, epochStart := map[int32]int64{}, map[int32]int64{}
	remaining := map[int32]bool{} // shards with durable records still to read
	for sh := range wanted {
		if p := t.Partitions[sh]; p.Replica != nil {
			hw[sh], epochStart[sh] = catchUpBounds(p)
		}
		remaining[sh] = true
	}
	type owned struct {
		pos   uint64
		shard int32
		slot  int64
	}
	cursor := m.Next()
	for ctx.Err() == nil && len(remaining) > 0 {
		var batch []owned
		var confirmed, view uint64
		end := false
		g.Read(key, func(tp *sequencer.Topic) {
			st := tp.State
			confirmed, view = st.Committed(), st.View
			for sh := range remaining {
				if h, ok := hw[sh]; ok {
					hw[sh] = caughtUpTo(h, epochStart[sh], st, sh)
				}
			}
			for scanned := 0; len(batch) < 4096 && scanned < 1<<16 && len(remaining) > 0; scanned++ {
				sh, slot, noOp, ok := st.Owner(cursor)
				if !ok {
					end = true // not laid out yet: the live events deliver it
					return
				}
				cursor++
				switch {
				case noOp || !wanted[sh]:
				case slot >= hw[sh]:
					delete(remaining, sh) // its later records come with its live events
				default:
					batch = append(batch, owned{cursor - 1, sh, slot})
				}
			}
		})
		var evs []order.Event
		size := 0
		for _, o := range batch {
			r := readers[o.shard]
			if r == nil {
				r = &logReader{p: t.Partitions[o.shard]}
				readers[o.shard] = r
			}
			rec, err := r.get(o.slot)
			if err != nil {
				return status.Errorf(codes.Unavailable, "reading shard %d at %d: %v", o.shard, o.slot, err)
			}
			var v any
			if rec != nil {
				v = record{o.shard, o.slot, rec}
				size += recordBytes(rec)
			}
			evs = append(evs, m.Deliver(o.pos, o.shard, v, view)...)
			if size >= catchUpChunk { // sent as they are read
				if err := send(evs); err != nil {
					return err
				}
				if err := hold(); err != nil {
					return err
				}
				evs, size = nil, 0
			}
		}
		evs = append(evs, m.Confirm(confirmed, view)...)
		if err := send(evs); err != nil {
			return err
		}
		if err := hold(); err != nil {
			return err
		}
		if end {
			return nil
		}
	}
	return nil
}
