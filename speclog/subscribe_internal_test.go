package speclog

import (
	"fmt"
	"testing"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// TestResubscribeAcrossViewChange: the stream breaks after records were delivered past the
// confirmed position; while it is broken the view changes and those positions become no-ops
// (a whole shard failed), so the new stream, from the confirmed position, never repeats a
// record below where the old one stopped. The subscription must still fail what it had
// delivered past the confirmed position before going on; and a stream re-opened without a view
// change repeats what was delivered, which is dropped.
func TestResubscribeAcrossViewChange(t *testing.T) {
	rec := func(pos, view uint64, v string) *pb.Event {
		return &pb.Event{Kind: &pb.Event_Record{Record: &pb.Delivery{Position: pos, View: view, Record: &pb.Record{Value: []byte(v)}}}}
	}
	confirm := func(upTo, view uint64) *pb.Event {
		return &pb.Event{Kind: &pb.Event_Confirm{Confirm: &pb.Confirm{UpTo: upTo, View: view}}}
	}
	run := func(s *Subscription, evs ...*pb.Event) string {
		var out []string
		s.buf = append(s.buf, evs...)
		for len(s.buf) > 0 {
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
		return fmt.Sprint(out)
	}
	s := &Subscription{}
	if got := run(s, rec(0, 0, "a"), rec(1, 0, "b"), confirm(1, 0), rec(3, 0, "spec")); got != "[0:a 1:b confirm<1 3:spec]" {
		t.Fatalf("first stream: %s", got)
	}
	s.fresh = true // re-opened from position 1 after the view changed: 1 and 3 are void, no-ops now
	if got := run(s, confirm(1, 1), rec(6, 1, "c"), confirm(7, 1)); got != "[fail@1 6:c confirm<7]" {
		t.Fatalf("after the view change: %s", got)
	}
	s.fresh = true // re-opened from 7 with no view change: repeats are dropped
	if got := run(s, confirm(7, 1), rec(8, 1, "d")); got != "[8:d]" {
		t.Fatalf("same view: %s", got)
	}
}
