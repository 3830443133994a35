package speclog

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// EventKind says what an Event is.
type EventKind int

const (
	// EventRecord is a record at Position; Speculative until a Confirm covers it.
	EventRecord EventKind = iota + 1
	// EventConfirm: every position below UpTo is final.
	EventConfirm
	// EventFail: every record delivered at or after After is void (roll back what was computed
	// from them); the correct records follow, from After on.
	EventFail
)

// Event is what a subscriber receives, in order.
type Event struct {
	Kind        EventKind
	Position    uint64
	View        uint64
	Speculative bool
	Shard       int32
	Offset      int64 // in the shard's partition
	Record      Record
	UpTo        uint64 // EventConfirm
	After       uint64 // EventFail
}

// SubscribeOptions select what a subscription delivers.
type SubscribeOptions struct {
	// Shards to read (nil: all); positions of other shards are skipped.
	Shards []int32
	// ConfirmedOnly delivers records only once confirmed: no speculation and no Fail events
	// (the behaviour of a shared log without speculation, for comparison).
	ConfirmedOnly bool
}

// Subscription is a stream of events from a position on. It re-subscribes by itself when its
// stream breaks (a node restarting, a shard's leader moving): from the last confirmed position,
// skipping what it had delivered already in the same view, and announcing a Fail if the view
// changed meanwhile, so the events a caller sees stay one ordered stream.
type Subscription struct {
	l       *Log
	ctx     context.Context
	opts    SubscribeOptions
	silence time.Duration // the client's silence limit when subscribed
	quiet   *time.Timer   // the current stream's silence timer (ends it), re-armed per receive

	stream    pb.SpecLog_SubscribeClient
	cancel    context.CancelFunc // the stream's
	via       int                // the node it subscribes through: an index in the client's endpoints
	learned   bool               // the other nodes' addresses have been asked for
	buf       []*pb.Event
	next      uint64 // the position after the last record delivered (or skipped)
	confirmed uint64 // the last confirmation delivered
	final     uint64 // positions below are final: confirmed, or delivered as confirmed (not speculative)
	view      uint64
	// at is the position after the last record the current stream gave (delivered, or dropped
	// as delivered already), or where it started. A stream fails what it gave, so past it the
	// records delivered are the older streams' alone: a view change voids them without any
	// notice from this stream.
	at    uint64
	fresh bool // a re-opened stream whose first event has not come yet
	stale bool // the stream speculates in a view older than one delivered: open another
	err   error
}

// Subscribe subscribes from position from. Events come from Next; cancel ctx to stop.
func (l *Log) Subscribe(ctx context.Context, from uint64, opts SubscribeOptions) *Subscription {
	return &Subscription{l: l, ctx: ctx, opts: opts, silence: l.c.silence, next: from, confirmed: from, at: from}
}

// Next returns the next event, blocking until there is one. It fails only when the context
// ends or the server refuses the subscription (a trimmed position, an unknown topic).
func (s *Subscription) Next() (Event, error) {
	for {
		if s.err != nil {
			return Event{}, s.err
		}
		for len(s.buf) > 0 && !s.stale {
			e := s.buf[0]
			s.buf = s.buf[1:]
			if ev, ok := s.take(e); ok {
				return ev, nil
			}
		}
		if s.stale { // its node's sequencer state trails what was delivered: subscribe again, elsewhere
			s.stale, s.buf = false, nil
			s.close()
			s.via++
			select {
			case <-time.After(100 * time.Millisecond):
			case <-s.ctx.Done():
			}
			continue
		}
		if s.stream == nil {
			if err := s.open(); err != nil {
				if !s.retry(err) {
					s.err = err
					if s.ctx.Err() != nil {
						s.err = s.ctx.Err()
					}
				}
				continue
			}
		}
		resp, err := s.recv()
		if err != nil {
			s.close()
			// A node that ends each stream at once (a shard's leader it cannot reach) is
			// paused on, and left when it says it cannot serve, as one that cannot be opened.
			if !s.retry(err) {
				s.err = fmt.Errorf("speclog: subscription: %w", err)
				if s.ctx.Err() != nil {
					s.err = s.ctx.Err()
				}
			}
			continue
		}
		s.buf = resp.GetEvents()
	}
}

// retry reports whether the stream is to be opened again after err, once a pause has passed
// (false: the context ended meanwhile); when the node did not serve it, through the next node
// the client knows of.
func (s *Subscription) retry(err error) bool {
	if !retriable(err) || s.ctx.Err() != nil {
		return false
	}
	if unreachable(err) {
		s.via++
	}
	select {
	case <-time.After(100 * time.Millisecond):
		return true
	case <-s.ctx.Done():
		return false
	}
}

// recv receives the stream's next events. A stream that gives none for the silence limit is
// ended and fails as a node that does not answer, so that it is opened again elsewhere.
func (s *Subscription) recv() (*pb.SubscribeResponse, error) {
	if s.silence <= 0 {
		return s.stream.Recv()
	}
	s.quiet.Reset(s.silence)
	resp, err := s.stream.Recv()
	if !s.quiet.Stop() { // it fired: the stream is ended (even if events came meanwhile)
		s.close()
		if err != nil {
			err = status.Errorf(codes.Unavailable, "speclog: no event from the subscription's node for %v", s.silence)
		}
	}
	return resp, err
}

func retriable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.FailedPrecondition, codes.Aborted, codes.Internal:
		return true
	}
	return false
}

// open (re)opens the stream from the confirmed position, through the dialed node or, once that
// one did not answer, the next node the client knows of (any node serves a subscription).
func (s *Subscription) open() error {
	if !s.learned { // learn the other nodes, to fall back on
		ctx, cancel := context.WithTimeout(s.ctx, time.Second)
		_, err := s.l.Describe(ctx)
		cancel()
		s.learned = err == nil
	}
	eps := s.l.c.endpoints()
	api, err := s.l.c.api(eps[s.via%len(eps)])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	st, err := api.Subscribe(ctx, &pb.SubscribeRequest{Topic: s.l.name, From: s.confirmed, Shards: s.opts.Shards, ConfirmedOnly: s.opts.ConfirmedOnly})
	if err != nil {
		cancel()
		return err
	}
	s.stream, s.cancel, s.fresh = st, cancel, true
	if s.silence > 0 {
		s.quiet = time.AfterFunc(s.silence, cancel) // one timer a stream, not one a receive
		s.quiet.Stop()
	}
	return nil
}

// close ends the current stream.
func (s *Subscription) close() {
	if s.cancel != nil {
		s.cancel()
	}
	if s.quiet != nil {
		s.quiet.Stop()
	}
	s.stream, s.cancel, s.quiet = nil, nil, nil
}

// take turns a wire event into the caller's, dropping what a re-subscription repeats.
func (s *Subscription) take(e *pb.Event) (Event, bool) {
	floor := max(s.confirmed, s.final) // nothing below is ever failed
	if d := e.GetRecord(); d != nil && d.GetSpeculative() && d.GetView() < s.view && d.GetPosition() >= floor {
		// A speculation in a view older than one already delivered: the stream's node has not
		// learned the view change yet (a re-subscription reached a node whose sequencer state
		// trails). Taking it would take the view back; subscribe again once it has caught up.
		s.stale = true
		return Event{}, false
	}
	if s.fresh {
		// A re-opened stream starts at the confirmed position and gives everything from there
		// again, in the view of its first event. If the view changed while the stream was
		// broken, what was delivered past the final positions may be void, and the new stream
		// need not repeat a record below where the old one stopped (its positions may now be
		// no-ops): fail it all, and take the new stream's from there.
		s.fresh = false
		s.at = s.confirmed // where it starts
		if v := eventView(e); v > s.view && s.next > floor {
			s.next, s.view = floor, v
			s.buf = append([]*pb.Event{e}, s.buf...)
			return Event{Kind: EventFail, After: floor, View: v}, true
		}
	}
	if _, notice := e.GetKind().(*pb.Event_Fail); !notice {
		if v := eventView(e); v > s.view && s.next > max(floor, s.at) {
			// A view change this stream gave no notice of: it had given nothing the change
			// voids. Records the older streams delivered past where this one is may be void
			// (no-ops now), and this stream gives nothing more below where it is: fail them
			// before the new view's first event, a record or a confirmation that would make
			// them final (when none of the new view's records is of the shards read).
			return s.voided(e, s.at, v)
		}
	}
	switch k := e.GetKind().(type) {
	case *pb.Event_Record:
		d := k.Record
		if d.GetPosition() < s.next {
			if !d.GetSpeculative() {
				s.final = max(s.final, d.GetPosition()+1)
			}
			if d.GetView() <= s.view || d.GetPosition() < floor {
				// Delivered before the stream broke: the same record in the same view, a final
				// one, or one a node that trails has confirmed in an older view (a confirmed
				// position is the same in every view; speculative ones are stale, above).
				s.at = max(s.at, d.GetPosition()+1)
				return Event{}, false
			}
			// The view changed while re-subscribing: what was delivered from here on is void.
			return s.voided(e, d.GetPosition(), d.GetView())
		}
		s.next, s.view, s.at = d.GetPosition()+1, max(s.view, d.GetView()), d.GetPosition()+1
		if !d.GetSpeculative() {
			s.final = max(s.final, s.next)
		}
		return recordEvent(d), true
	case *pb.Event_Confirm:
		if k.Confirm.GetUpTo() <= s.confirmed {
			return Event{}, false
		}
		s.confirmed = k.Confirm.GetUpTo()
		return Event{Kind: EventConfirm, UpTo: k.Confirm.GetUpTo(), View: k.Confirm.GetView()}, true
	case *pb.Event_Fail:
		f := k.Fail
		s.view = max(s.view, f.GetView())
		after := max(f.GetAfter(), floor)
		if after >= s.next {
			return Event{}, false // nothing delivered at or after it
		}
		s.next, s.at = after, min(s.at, after)
		return Event{Kind: EventFail, After: after, View: f.GetView()}, true
	}
	return Event{}, false
}

// voided fails what was delivered from after on (never below the final positions), for a view
// change to view that e, then taken again, shows.
func (s *Subscription) voided(e *pb.Event, after, view uint64) (Event, bool) {
	after = max(after, s.confirmed, s.final)
	s.next, s.view = after, view
	s.buf = append([]*pb.Event{e}, s.buf...)
	return Event{Kind: EventFail, After: after, View: view}, true
}

// eventView is the view a wire event carries.
func eventView(e *pb.Event) uint64 {
	switch k := e.GetKind().(type) {
	case *pb.Event_Record:
		return k.Record.GetView()
	case *pb.Event_Confirm:
		return k.Confirm.GetView()
	case *pb.Event_Fail:
		return k.Fail.GetView()
	}
	return 0
}

func recordEvent(d *pb.Delivery) Event {
	return Event{Kind: EventRecord, Position: d.GetPosition(), View: d.GetView(), Speculative: d.GetSpeculative(),
		Shard: d.GetShard(), Offset: d.GetOffset(), Record: fromPB(d.GetRecord())}
}
