package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestFailedHeartbeatLeavesClassicGroup: a consumer-protocol member joins a live classic group
// (a, b) naming an assignor the broker does not have. The heartbeat is checked before anything
// changes (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid; and a request Kafka fails
// writes none of its records, the conversion's included): it fails with UNSUPPORTED_ASSIGNOR,
// the group stays the classic group it was, Stable, and nothing is written. The same member
// naming a known assignor then upgrades it.
func TestFailedHeartbeatLeavesClassicGroup(t *testing.T) {
	h := newConsumerHarness(t)
	classicGroupOnT(h)
	before := len(h.records)
	r := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "no-such-assignor")
	wantCode(t, "join with an unknown assignor", r.ErrorCode, kerr.UnsupportedAssignor)
	g, _ := h.c.Group("g")
	if g.Type() != TypeClassic {
		classic := 0
		for _, m := range g.consumer.members {
			if m.classic != nil {
				classic++
			}
		}
		t.Fatalf("after a failed ConsumerGroupHeartbeat: type %s with %d members (%d classic), %d records written; want the classic group unchanged",
			g.Type(), len(g.consumer.members), classic, len(h.records)-before)
	}
	if g.State != Stable || len(g.members) != 2 || len(h.records) != before {
		t.Fatalf("after a failed ConsumerGroupHeartbeat: state %v, %d members, %d records written; want Stable, 2, none", g.State, len(g.members), len(h.records)-before)
	}
	r = h.hb("c", 0, []string{"t"}, map[string][]int32{}, "uniform")
	wantCode(t, "join with a known assignor", r.ErrorCode, nil)
	if g, _ := h.c.Group("g"); g.Type() != TypeConsumer {
		t.Fatalf("after a good join: type %s, want the group upgraded", g.Type())
	}
}

// TestFailedStaticRejoinKeepsMember: a static consumer-protocol member s1 of a group upgraded
// from classic (a, b) leaves for a while (epoch -2, keeping its partitions) and comes back
// under a new member id naming an assignor the broker does not have. The heartbeat fails
// (UNSUPPORTED_ASSIGNOR) before anything changes, as Kafka's does: s1 keeps its place and its
// partitions, and the group stays a consumer group until s1's session ends (whose removal then
// makes it classic again). Replacing s1 and then dropping the replacement left a consumer group
// of classic members only, which no heartbeat would make rebalance.
func TestFailedStaticRejoinKeepsMember(t *testing.T) {
	h := newConsumerHarness(t)
	_, _, sParts := upgradedByStaticMember(h)
	wantCode(t, "s1's temporary leave", h.hbStatic("s1", "inst1", -2, nil, nil).ErrorCode, nil)
	r := h.hbAs("s1-new", "inst1", 0, []string{"t"}, map[string][]int32{}, "no-such-assignor")
	wantCode(t, "s1's rejoin with an unknown assignor", r.ErrorCode, kerr.UnsupportedAssignor)
	g, _ := h.c.Group("g")
	if g.Type() != TypeConsumer {
		t.Fatalf("after the failed rejoin: type %s, want the consumer group unchanged", g.Type())
	}
	s := g.consumer.staticMember("inst1")
	if s == nil || s.id != "s1" || s.epoch != -2 || len(s.assigned["t"]) != len(sParts) {
		t.Fatalf("after the failed rejoin: instance inst1 is held by %+v; want s1, at epoch -2, with t %v", s, sParts)
	}
}
