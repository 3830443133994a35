package speclog

import (
	"fmt"
	"testing"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

func spec(pos, view uint64, v string) *pb.Event {
	return &pb.Event{Kind: &pb.Event_Record{Record: &pb.Delivery{Position: pos, View: view, Speculative: true, Record: &pb.Record{Value: []byte(v)}}}}
}

func final(pos, view uint64, v string) *pb.Event { // delivered as confirmed
	return &pb.Event{Kind: &pb.Event_Record{Record: &pb.Delivery{Position: pos, View: view, Record: &pb.Record{Value: []byte(v)}}}}
}

func confirm(upTo, view uint64) *pb.Event {
	return &pb.Event{Kind: &pb.Event_Confirm{Confirm: &pb.Confirm{UpTo: upTo, View: view}}}
}

// run feeds wire events to a subscription's take and lists what the caller gets; "stale" when
// the subscription decides to subscribe again elsewhere.
func run(s *Subscription, evs ...*pb.Event) string {
	var out []string
	s.buf = append(s.buf, evs...)
	for len(s.buf) > 0 && !s.stale {
		e := s.buf[0]
		s.buf = s.buf[1:]
		if ev, ok := s.take(e); ok {
			switch ev.Kind {
			case EventRecord:
				out = append(out, fmt.Sprintf("%d:%s", ev.Position, ev.Record.Value))
			case EventConfirm:
				out = append(out, fmt.Sprintf("confirm<%d", ev.UpTo))
			case EventFail:
				out = append(out, fmt.Sprintf("fail@%d", ev.After))
			}
		}
	}
	if s.stale {
		out = append(out, "stale")
		s.stale, s.buf = false, nil
	}
	return fmt.Sprint(out)
}

// TestResubscribeAcrossViewChange: the stream breaks after records were delivered past the
// confirmed position; while it is broken the view changes and those positions become no-ops
// (a whole shard failed), so the new stream, from the confirmed position, never repeats a
// record below where the old one stopped. The subscription must still fail what it had
// delivered past the confirmed position before going on; and a stream re-opened without a view
// change repeats what was delivered, which is dropped.
func TestResubscribeAcrossViewChange(t *testing.T) {
	s := &Subscription{}
	if got := run(s, spec(0, 0, "a"), spec(1, 0, "b"), confirm(1, 0), spec(3, 0, "spec")); got != "[0:a 1:b confirm<1 3:spec]" {
		t.Fatalf("first stream: %s", got)
	}
	s.fresh = true // re-opened from position 1 after the view changed: 1 and 3 are void, no-ops now
	if got := run(s, confirm(1, 1), spec(6, 1, "c"), confirm(7, 1)); got != "[fail@1 6:c confirm<7]" {
		t.Fatalf("after the view change: %s", got)
	}
	s.fresh = true // re-opened from 7 with no view change: repeats are dropped
	if got := run(s, confirm(7, 1), spec(8, 1, "d")); got != "[8:d]" {
		t.Fatalf("same view: %s", got)
	}
}

// TestResubscribeKeepsFinalRecords: records delivered as confirmed (a catch-up from the log)
// whose confirmation had not come when the stream broke are final: a view change while
// re-subscribing fails only what was delivered speculatively after them, and the new stream's
// repeats of them, in the new view, are dropped.
func TestResubscribeKeepsFinalRecords(t *testing.T) {
	s := &Subscription{}
	if got := run(s, final(0, 0, "a"), final(1, 0, "b"), spec(2, 0, "c")); got != "[0:a 1:b 2:c]" {
		t.Fatalf("first stream: %s", got)
	}
	s.fresh = true // re-opened from 0 (no confirm came) after the view changed
	if got := run(s, final(0, 1, "a"), final(1, 1, "b"), spec(4, 1, "e")); got != "[fail@2 4:e]" {
		t.Fatalf("after the view change: %s", got)
	}
	// A fail notice naming a position below the final ones fails only from there.
	s = &Subscription{}
	run(s, final(0, 0, "a"), spec(1, 0, "b"))
	if got := run(s, &pb.Event{Kind: &pb.Event_Fail{Fail: &pb.Fail{After: 0, View: 1}}}); got != "[fail@1]" {
		t.Fatalf("fail after 0 with position 0 final: %s", got)
	}
}

// TestStaleStreamIsLeft: a re-subscription that reaches a node whose sequencer state trails
// (it speculates in a view older than one delivered) is left, and the view never goes back.
func TestStaleStreamIsLeft(t *testing.T) {
	s := &Subscription{}
	run(s, spec(0, 0, "a"), confirm(1, 0))
	run(s, &pb.Event{Kind: &pb.Event_Fail{Fail: &pb.Fail{After: 1, View: 1}}}, spec(2, 1, "b"))
	s.fresh = true
	if got := run(s, spec(1, 0, "old"), spec(2, 0, "old")); got != "[stale]" {
		t.Fatalf("a stream in view 0 after view 1: %s", got)
	}
	if s.view != 1 {
		t.Fatalf("view went back to %d", s.view)
	}
	s.fresh = true // subscribed again where the view is known
	if got := run(s, spec(2, 1, "b"), spec(3, 1, "c")); got != "[3:c]" {
		t.Fatalf("the next stream: %s", got)
	}
}

// TestTrailingNodeKeepsTheView: a record delivered speculatively in view 2 whose confirmation
// had not come, then a re-subscription reaching a node still in view 1 that has the position
// confirmed (so sends it as confirmed, in view 1): it is the same record, skipped without a
// fail notice, the view stays 2, and that node's speculation in view 1 makes the subscription
// leave it.
func TestTrailingNodeKeepsTheView(t *testing.T) {
	s := &Subscription{}
	if got := run(s, final(0, 2, "a"), spec(1, 2, "b")); got != "[0:a 1:b]" {
		t.Fatalf("first stream: %s", got)
	}
	s.fresh = true
	if got := run(s, final(0, 1, "a"), final(1, 1, "b"), spec(2, 1, "x")); got != "[stale]" {
		t.Fatalf("a node in view 1: %s (view %d); want [stale], the view kept at 2", got, s.view)
	}
	if s.view != 2 || s.final != 2 {
		t.Fatalf("view %d, final %d; want 2 and 2", s.view, s.final)
	}
}
