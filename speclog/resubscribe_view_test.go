package speclog

import (
	"fmt"
	"testing"

	"github.com/runnel-dev/runnel/internal/speclog/order"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// wire turns a server merger's events into the wire events the service sends (as
// service.Subscribe's send does, speculation on).
func wire(evs []order.Event) []*pb.Event {
	var out []*pb.Event
	for _, e := range evs {
		switch e.Kind {
		case order.EventRecord:
			out = append(out, &pb.Event{Kind: &pb.Event_Record{Record: &pb.Delivery{Position: e.Position, View: e.View,
				Speculative: e.Speculative, Shard: e.Shard, Record: &pb.Record{Value: []byte(e.Record.(string))}}}})
		case order.EventConfirm:
			out = append(out, &pb.Event{Kind: &pb.Event_Confirm{Confirm: &pb.Confirm{UpTo: e.UpTo, View: e.View}}})
		case order.EventFail:
			out = append(out, &pb.Event{Kind: &pb.Event_Fail{Fail: &pb.Fail{After: e.After, View: e.View}}})
		}
	}
	return out
}

// TestResubscribeThenViewChangeFailsAVoidRecord: a subscriber's stream breaks after it got
// records speculatively at 6..11 (3 shards, quota 1, so position 3k+i is shard i's) but only
// the confirmation of 6. It subscribes again from 6, in the same view: the new stream repeats
// 6..8, confirms 9, and waits at 9 for shard 0, whose leader is frozen. Shard 0 is failed after
// cut 2 (view 1, after 9): position 9 is now a no-op, so the record "a9" the subscriber holds
// there is void. The new stream had given nothing at or after 9, so it sends no fail notice:
// the subscriber must fail from where the new stream is (9) when the new view shows (its
// records at 10 and 11), not only from the first of them, so that the confirmation of 12 never
// makes "a9" final. What the caller holds below a confirmation is the confirmed log.
func TestResubscribeThenViewChangeFailsAVoidRecord(t *testing.T) {
	cfg := order.DefaultConfig()
	st, err := order.NewState(cfg, &order.Table{Window: 0, Start: 0, Shards: []int32{0, 1, 2}, Quotas: []int64{1, 1, 1}, SlotBase: []int64{0, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(e order.Entry) {
		t.Helper()
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	owner := func(pos uint64) (int32, bool, bool) {
		sh, _, noOp, ok := st.Owner(pos)
		return sh, noOp, ok
	}
	val := func(pos uint64) string { return fmt.Sprintf("%c%d", 'a'+pos%3, pos) }

	s := &Subscription{}
	held := map[uint64]string{} // what the caller holds: records minus the failed ones
	var confirmed uint64
	var trace []string
	feed := func(evs []*pb.Event) {
		s.buf = append(s.buf, evs...)
		for len(s.buf) > 0 && !s.stale {
			e := s.buf[0]
			s.buf = s.buf[1:]
			ev, ok := s.take(e)
			if !ok {
				continue
			}
			switch ev.Kind {
			case EventRecord:
				held[ev.Position] = string(ev.Record.Value)
				trace = append(trace, fmt.Sprintf("%d:%s/v%d", ev.Position, ev.Record.Value, ev.View))
			case EventFail:
				for p := range held {
					if p >= ev.After {
						delete(held, p)
					}
				}
				trace = append(trace, fmt.Sprintf("fail@%d", ev.After))
			case EventConfirm:
				confirmed = ev.UpTo
				trace = append(trace, fmt.Sprintf("confirm<%d", ev.UpTo))
			}
		}
	}

	// The first stream, from 0: cuts 0 and 1 committed (prefix 6) while it delivered.
	apply(order.Entry{Cut: &order.CutID{Window: 0, Cut: 0}})
	apply(order.Entry{Cut: &order.CutID{Window: 0, Cut: 1}})
	m1 := order.NewMerger(0, owner, nil)
	m1.Views(st.ViewAfter)
	var evs []order.Event
	for p := uint64(0); p < 6; p++ {
		evs = append(evs, m1.Deliver(p, int32(p%3), val(p), 0)...)
	}
	evs = append(evs, m1.Confirm(6, 0)...)
	for p := uint64(6); p < 12; p++ {
		evs = append(evs, m1.Deliver(p, int32(p%3), val(p), 0)...)
	}
	feed(wire(evs))
	// Cut 2 commits (prefix 9); the stream breaks before its confirmation reaches the client.
	apply(order.Entry{Cut: &order.CutID{Window: 0, Cut: 2}})

	// The new stream, from the client's confirmed position.
	s.fresh = true
	m2 := order.NewMerger(s.confirmed, owner, nil)
	m2.Views(st.ViewAfter)
	evs = nil
	for p := uint64(6); p < 9; p++ { // catch-up from the logs
		evs = append(evs, m2.Deliver(p, int32(p%3), val(p), 0)...)
	}
	evs = append(evs, m2.Confirm(st.Committed(), 0)...)
	evs = append(evs, m2.Deliver(10, 1, val(10), 0)...) // live, waiting for shard 0 at 9
	evs = append(evs, m2.Deliver(11, 2, val(11), 0)...)
	feed(wire(evs))

	// Shard 0 (frozen) is failed after cut 2: view 1 from 9, position 9 a no-op.
	apply(order.Entry{Fail: &order.FailEntry{Shard: 0, After: order.CutID{Window: 0, Cut: 2}}})
	if after, _ := st.ViewAfter(1); after != 9 {
		t.Fatalf("setup: view 1 after %d", after)
	}
	if _, noOp, _ := owner(9); !noOp {
		t.Fatalf("setup: position 9 not a no-op in view 1")
	}
	// Shards 1 and 2 announce it and deliver again in view 1; cut 3 commits.
	evs = m2.Fail(9, 1)
	evs = append(evs, m2.Deliver(10, 1, val(10), 1)...)
	evs = append(evs, m2.Deliver(11, 2, val(11), 1)...)
	apply(order.Entry{Cut: &order.CutID{Window: 0, Cut: 3}})
	evs = append(evs, m2.Confirm(st.Committed(), 1)...)
	feed(wire(evs))

	if confirmed != 12 {
		t.Fatalf("setup: confirmed %d; trace %v", confirmed, trace)
	}
	// Every position below the confirmation the caller holds must be the confirmed log's.
	for p := uint64(0); p < confirmed; p++ {
		sh, noOp, _ := owner(p)
		want := ""
		if !noOp {
			want = val(p)
			_ = sh
		}
		if held[p] != want {
			t.Errorf("position %d: the caller holds %q as confirmed, the confirmed log has %q", p, held[p], want)
		}
	}
	if t.Failed() {
		t.Logf("events: %v", trace)
	}
}

// TestFilteredResubscribeThenViewChange: the same with a subscription to shard 0 only, the
// shard that fails: after the re-subscription no record of the new view reaches the subscriber
// (shard 0 is out), only confirmations. The first confirmation of the new view must come after
// a fail of the record "a9" the subscriber holds at 9, a no-op in the confirmed log.
func TestFilteredResubscribeThenViewChange(t *testing.T) {
	st, err := order.NewState(order.DefaultConfig(), &order.Table{Window: 0, Start: 0, Shards: []int32{0, 1, 2}, Quotas: []int64{1, 1, 1}, SlotBase: []int64{0, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(e order.Entry) {
		t.Helper()
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	owner := func(pos uint64) (int32, bool, bool) {
		sh, _, noOp, ok := st.Owner(pos)
		return sh, noOp, ok
	}
	wanted := func(sh int32) bool { return sh == 0 }
	val := func(pos uint64) string { return fmt.Sprintf("%c%d", 'a'+pos%3, pos) }
	s := &Subscription{opts: SubscribeOptions{Shards: []int32{0}}}
	var trace []string
	held := map[uint64]string{}
	feed := func(evs []order.Event) {
		s.buf = append(s.buf, wire(evs)...)
		for len(s.buf) > 0 && !s.stale {
			e := s.buf[0]
			s.buf = s.buf[1:]
			if ev, ok := s.take(e); ok {
				switch ev.Kind {
				case EventRecord:
					held[ev.Position] = string(ev.Record.Value)
					trace = append(trace, fmt.Sprintf("%d:%s/v%d", ev.Position, ev.Record.Value, ev.View))
				case EventFail:
					for p := range held {
						if p >= ev.After {
							delete(held, p)
						}
					}
					trace = append(trace, fmt.Sprintf("fail@%d", ev.After))
				case EventConfirm:
					trace = append(trace, fmt.Sprintf("confirm<%d", ev.UpTo))
				}
			}
		}
	}
	apply(order.Entry{Cut: &order.CutID{Window: 0, Cut: 0}})
	apply(order.Entry{Cut: &order.CutID{Window: 0, Cut: 1}})
	m1 := order.NewMerger(0, owner, wanted)
	m1.Views(st.ViewAfter)
	var evs []order.Event
	for p := uint64(0); p < 6; p++ {
		evs = append(evs, m1.Deliver(p, int32(p%3), val(p), 0)...)
	}
	evs = append(evs, m1.Confirm(6, 0)...)
	for p := uint64(6); p < 12; p++ {
		evs = append(evs, m1.Deliver(p, int32(p%3), val(p), 0)...)
	}
	feed(evs)
	apply(order.Entry{Cut: &order.CutID{Window: 0, Cut: 2}}) // prefix 9; the stream breaks

	s.fresh = true
	m2 := order.NewMerger(s.confirmed, owner, wanted)
	m2.Views(st.ViewAfter)
	evs = nil
	for p := uint64(6); p < 9; p++ {
		evs = append(evs, m2.Deliver(p, int32(p%3), val(p), 0)...)
	}
	evs = append(evs, m2.Confirm(st.Committed(), 0)...)
	feed(evs)
	apply(order.Entry{Fail: &order.FailEntry{Shard: 0, After: order.CutID{Window: 0, Cut: 2}}})
	evs = m2.Fail(9, 1) // shards 1 and 2 announce it
	evs = append(evs, m2.Deliver(10, 1, val(10), 1)...)
	evs = append(evs, m2.Deliver(11, 2, val(11), 1)...)
	apply(order.Entry{Cut: &order.CutID{Window: 0, Cut: 3}})
	evs = append(evs, m2.Confirm(st.Committed(), 1)...)
	feed(evs)

	if s.confirmed != 12 {
		t.Fatalf("setup: confirmed %d; %v", s.confirmed, trace)
	}
	if _, noOp, _ := owner(9); noOp && held[9] != "" {
		t.Fatalf("position 9 is a no-op in the confirmed log, but the caller holds %q there as confirmed; events: %v", held[9], trace)
	}
}

// TestViewChangeWithoutNoticeFailsNothingOnOneStream: on a stream that was never re-opened,
// what it gave is what was delivered, and it announces a view change that voids any of it (a
// fail notice). A confirmation of a newer view with no notice before it therefore fails
// nothing; after a re-subscription, what only the older stream delivered past the new stream's
// position is failed before such a confirmation is.
func TestViewChangeWithoutNoticeFailsNothingOnOneStream(t *testing.T) {
	s := &Subscription{}
	if got := run(s, spec(0, 0, "a"), spec(1, 0, "b"), confirm(1, 0), confirm(2, 1), spec(2, 1, "c")); got != "[0:a 1:b confirm<1 confirm<2 2:c]" {
		t.Fatalf("one stream: %s", got)
	}
	if got := run(s, spec(3, 1, "d"), spec(4, 1, "e")); got != "[3:d 4:e]" {
		t.Fatalf("one stream: %s", got)
	}
	s.fresh = true // re-opened from 2: it repeats 2 and 3, then a view change voids 4
	if got := run(s, spec(2, 1, "c"), spec(3, 1, "d"), confirm(4, 1), confirm(6, 2)); got != "[confirm<4 fail@4 confirm<6]" {
		t.Fatalf("re-subscribed: %s", got)
	}
}

// TestResubscribeThenViewChangeAfterTheLastRecord: a subscription to shards 0 and 2 (of 3)
// holds "a9" at 9 and nothing past it when its stream breaks; the new stream repeats 6 and 8
// and confirms 9, then shard 0 is failed after 9 (view 1: 9 is a no-op) and the first record of
// the new view is at 11, past every position delivered. "a9" must still be failed before that
// record and the confirmation of 12.
func TestResubscribeThenViewChangeAfterTheLastRecord(t *testing.T) {
	s := &Subscription{}
	if got := run(s, spec(0, 0, "a0"), spec(2, 0, "c2"), spec(3, 0, "a3"), spec(5, 0, "c5"), confirm(6, 0), spec(6, 0, "a6"), spec(8, 0, "c8"), spec(9, 0, "a9")); got != "[0:a0 2:c2 3:a3 5:c5 confirm<6 6:a6 8:c8 9:a9]" {
		t.Fatalf("first stream: %s", got)
	}
	s.fresh = true // re-opened from 6
	if got := run(s, spec(6, 0, "a6"), spec(8, 0, "c8"), confirm(9, 0), spec(11, 1, "c11"), confirm(12, 1)); got != "[confirm<9 fail@9 11:c11 confirm<12]" {
		t.Fatalf("re-subscribed: %s", got)
	}
}
