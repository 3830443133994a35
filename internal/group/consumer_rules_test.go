package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rules of Kafka's KIP-848 coordinator (GroupCoordinatorService / GroupMetadataManager,
// CurrentAssignmentBuilder, the server-side RangeAssignor) that Runnel's used to differ from.

// TestJoinValidation: Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid refuses a join
// (epoch 0) without a rebalance timeout (-1) or whose owned partitions are null or not empty,
// and an empty rack id at any epoch: INVALID_REQUEST. Runnel used to take them all.
func TestJoinValidation(t *testing.T) {
	join := func(member string) *kmsg.ConsumerGroupHeartbeatRequest {
		req := rawHB(member, 0)
		req.SubscribedTopicNames, req.Topics, req.RebalanceTimeoutMillis = []string{"t"}, ownedTopics(nil), 30000
		return req
	}
	for _, tc := range []struct {
		what   string
		change func(*kmsg.ConsumerGroupHeartbeatRequest)
	}{
		{"null owned partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = nil }},
		{"owning t-0", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = ownedTopics(map[string][]int32{"t": {0}}) }},
		{"no rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }},
		{"an empty rack id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = kmsg.StringPtr("") }},
	} {
		h := newConsumerHarness(t)
		req := join("m1")
		tc.change(req)
		wantCode(t, "join with "+tc.what, h.send(req).ErrorCode, kerr.InvalidRequest)
		if _, ok := h.c.Group("g"); ok || len(h.records) != 0 {
			t.Errorf("join with %s: the refused join created the group or wrote %d records", tc.what, len(h.records))
		}
		wantCode(t, "a valid join", h.send(join("m1")).ErrorCode, nil)
	}
	h := newConsumerHarness(t)
	h.send(join("m1"))
	req := rawHB("m1", 1)
	req.RackID = kmsg.StringPtr("")
	wantCode(t, "heartbeat with an empty rack id", h.send(req).ErrorCode, kerr.InvalidRequest)
}

// TestPreviousEpochNeedsOwnedSubset: Kafka's throwIfConsumerGroupMemberEpochIsInvalid takes a
// heartbeat at the member's previous epoch (its response with the new one may have been lost)
// only if its owned partitions are given and are a subset of its assignment; Runnel used to
// take any.
func TestPreviousEpochNeedsOwnedSubset(t *testing.T) {
	h := newConsumerHarness(t)
	h.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
	h.hb("m2", 0, []string{"t"}, map[string][]int32{}, "")
	r1 := h.hb("m1", 1, nil, map[string][]int32{"t": {0, 1, 2, 3, 4, 5}}, "")
	kept := assigned(r1)["t"]
	r1 = h.hb("m1", 1, nil, map[string][]int32{"t": kept}, "")
	if r1.MemberEpoch != 2 || len(kept) != 3 {
		t.Fatalf("setup: m1 epoch %d keeps %v; want epoch 2 with 3 partitions", r1.MemberEpoch, kept)
	}
	other := slices.IndexFunc([]int32{0, 1, 2, 3, 4, 5}, func(p int32) bool { return !slices.Contains(kept, p) })
	for _, tc := range []struct {
		what  string
		owned map[string][]int32
		want  *kerr.Error
	}{
		{"owned partitions not sent", nil, kerr.FencedMemberEpoch},
		{"owning a partition it lost", map[string][]int32{"t": append(slices.Clone(kept), int32(other))}, kerr.FencedMemberEpoch},
		{"owning an unknown topic", map[string][]int32{"nope": {0}}, kerr.FencedMemberEpoch},
		{"owning part of its assignment", map[string][]int32{"t": kept[:1]}, nil},
	} {
		if r := h.hb("m1", 1, nil, tc.owned, ""); r.ErrorCode != errorCode(tc.want) || tc.want == nil && r.MemberEpoch != 2 {
			t.Errorf("previous epoch, %s: %v epoch %d; want %v", tc.what, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, tc.want)
		}
	}
}

func errorCode(err *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	return err.Code
}

// TestAssignorChangeKeepsGroupEpoch: Kafka's hasMemberSubscriptionChanged moves the group epoch
// for a change of subscribed topic names or regex only; naming another server assignor used to
// move it too.
func TestAssignorChangeKeepsGroupEpoch(t *testing.T) {
	h := newConsumerHarness(t)
	r := h.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
	r = h.hb("m1", 1, nil, map[string][]int32{"t": assigned(r)["t"]}, "range")
	if ge := h.c.groups["g"].consumer.epoch; r.ErrorCode != 0 || r.MemberEpoch != 1 || ge != 1 {
		t.Fatalf("after naming the range assignor: %v member epoch %d group epoch %d; want 1 and 1",
			kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, ge)
	}
	if got := groupAssignor(h.c.groups["g"].consumer); got != "range" {
		t.Errorf("the group's assignor = %s; want range, used from the next group epoch", got)
	}
}

// TestJoinWithoutSubscriptionKeepsGroupEpoch: Kafka moves the group epoch for a join only when
// the group is new or the subscription changes (a new member's is empty): a member joining an
// existing group with no subscription used to move it, and so every other member's epoch.
func TestJoinWithoutSubscriptionKeepsGroupEpoch(t *testing.T) {
	h := newConsumerHarness(t)
	r1 := h.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
	h.hb("m1", 1, nil, map[string][]int32{"t": assigned(r1)["t"]}, "")
	r2 := h.hb("m2", 0, []string{}, map[string][]int32{}, "")
	if ge := h.c.groups["g"].consumer.epoch; r2.ErrorCode != 0 || r2.MemberEpoch != 1 || ge != 1 {
		t.Errorf("a member joining with no subscription: %v member epoch %d group epoch %d; want 1 and 1",
			kerr.ErrorForCode(r2.ErrorCode), r2.MemberEpoch, ge)
	}
	h2 := newConsumerHarness(t)
	if r := h2.hb("m1", 0, []string{}, map[string][]int32{}, ""); r.MemberEpoch != 1 || h2.c.groups["g"].consumer.epoch != 1 {
		t.Errorf("the first member of a new group, with no subscription: member epoch %d group epoch %d; want 1 and 1",
			r.MemberEpoch, h2.c.groups["g"].consumer.epoch)
	}
}

// TestRangeAssignorIsSticky: Kafka's server-side RangeAssignor keeps each member's previous
// target up to its quota (lowest partitions first) and hands out only the rest in ranges.
// Runnel's used to recompute plain ranges: b (t 0-2) and c (t 3-5), then a joins, gave a {0,1},
// b {2,3}, c {4,5} (four moves) where Kafka's gives b {0,1}, c {3,4}, a {2,5} (two).
func TestRangeAssignorIsSticky(t *testing.T) {
	h := newConsumerHarness(t)
	h.hb("b", 0, []string{"t"}, map[string][]int32{}, "range")
	h.hb("c", 0, []string{"t"}, map[string][]int32{}, "range")
	g := h.c.groups["g"].consumer
	if !slices.Equal(g.target["b"]["t"], []int32{0, 1, 2}) || !slices.Equal(g.target["c"]["t"], []int32{3, 4, 5}) {
		t.Fatalf("setup: b %v c %v", g.target["b"], g.target["c"])
	}
	h.hb("a", 0, []string{"t"}, map[string][]int32{}, "range")
	ta, tb, tc := g.target["a"]["t"], g.target["b"]["t"], g.target["c"]["t"]
	if !slices.Equal(ta, []int32{2, 5}) || !slices.Equal(tb, []int32{0, 1}) || !slices.Equal(tc, []int32{3, 4}) {
		t.Errorf("range targets after a joined: a %v b %v c %v; want a [2 5] b [0 1] c [3 4]", ta, tb, tc)
	}
	h.hb("a", -1, nil, nil, "") // a leaves: b and c keep theirs and share a's
	h.hb("b", g.members["b"].epoch, nil, nil, "")
	tb, tc = g.target["b"]["t"], g.target["c"]["t"]
	if !slices.Equal(tb, []int32{0, 1, 2}) || !slices.Equal(tc, []int32{3, 4, 5}) {
		t.Errorf("range targets after a left: b %v c %v; want b [0 1 2] c [3 4 5]", tb, tc)
	}
}

// TestAssignRangeTable: the range assignor's targets, from previous ones, over t's 7
// partitions and members a, b, c (quota 2, one partition over).
func TestAssignRangeTable(t *testing.T) {
	topics := map[string]TopicMeta{"t": {ID: [16]byte{1}, Partitions: 7}}
	var members []*consumerMember
	for _, id := range []string{"a", "b", "c"} {
		members = append(members, &consumerMember{id: id, topics: []string{"t"}})
	}
	for _, tc := range []struct {
		prev map[string]assignment
		want map[string][]int32
	}{
		{nil, map[string][]int32{"a": {0, 1, 2}, "b": {3, 4}, "c": {5, 6}}},
		// b keeps the one partition over its quota; c, above it too, keeps its quota.
		{map[string]assignment{"b": {"t": {0, 1, 2, 3}}, "c": {"t": {4, 5, 6}}},
			map[string][]int32{"a": {3, 6}, "b": {0, 1, 2}, "c": {4, 5}}},
		// a keeps its one partition and takes one more; a partition t no longer has is dropped.
		{map[string]assignment{"a": {"t": {6, 9}}, "b": {"t": {0, 1, 2, 3, 4, 5}}},
			map[string][]int32{"a": {3, 6}, "b": {0, 1, 2}, "c": {4, 5}}},
	} {
		got := assignRange(members, topics, tc.prev)
		for id, want := range tc.want {
			if !slices.Equal(got[id]["t"], want) {
				t.Errorf("assignRange(prev %v)[%s] = %v; want %v", tc.prev, id, got[id]["t"], want)
			}
		}
	}
}

// TestAlreadyReleasedPartitionsNeedNoRevocation: Kafka's computeNextAssignment asks for a
// revocation only if the heartbeat shows the member still owning partitions to revoke
// (ownsRevokedPartitions); one that already released them moves to the new epoch at once.
// Runnel used to hold it at its epoch for a revocation round.
func TestAlreadyReleasedPartitionsNeedNoRevocation(t *testing.T) {
	h := newConsumerHarness(t)
	r1 := h.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
	h.hb("m1", 1, nil, map[string][]int32{"t": assigned(r1)["t"]}, "")
	h.hb("m2", 0, []string{"t"}, map[string][]int32{}, "")
	keep := h.c.groups["g"].consumer.target["m1"]["t"]
	if len(keep) != 3 {
		t.Fatalf("setup: m1's target %v", keep)
	}
	r1 = h.hb("m1", 1, nil, map[string][]int32{"t": keep}, "") // it holds none of the others
	if r1.MemberEpoch != 2 || !slices.Equal(assigned(r1)["t"], keep) || h.c.groups["g"].consumer.members["m1"].revoking.size() != 0 {
		t.Errorf("m1 owning only its target %v: epoch %d assignment %v; want epoch 2 with %v, nothing to revoke", keep, r1.MemberEpoch, assigned(r1), keep)
	}
	// Not saying what it owns still means a revocation round (Kafka: null owns them all).
	h2 := newConsumerHarness(t)
	r1 = h2.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
	h2.hb("m1", 1, nil, map[string][]int32{"t": assigned(r1)["t"]}, "")
	h2.hb("m2", 0, []string{"t"}, map[string][]int32{}, "")
	if r1 = h2.hb("m1", 1, nil, nil, ""); r1.MemberEpoch != 1 || h2.c.groups["g"].consumer.members["m1"].revoking.size() != 3 {
		t.Errorf("m1 not saying what it owns: epoch %d, revoking %v; want epoch 1 revoking 3", r1.MemberEpoch, h2.c.groups["g"].consumer.members["m1"].revoking)
	}
}

// TestDeletedTopicNeverSentWithZeroID: a topic deleted while a member revoked part of its
// assignment used to stay in the member's assignment, sent in heartbeats and described with the
// zero topic id. It is now revoked with the rest (Kafka's CurrentAssignmentBuilder strips what
// the member no longer subscribes to) and, as Kafka's describe, left out of descriptions.
func TestDeletedTopicNeverSentWithZeroID(t *testing.T) {
	h := newConsumerHarness(t)
	topics := map[string]TopicMeta{"t": testTopics["t"], "u": testTopics["u"]}
	h.c.Topics = func() map[string]TopicMeta { return topics }
	r1 := h.hb("m1", 0, []string{"t", "u"}, map[string][]int32{}, "")
	all := assigned(r1)
	h.hb("m1", 1, nil, all, "")
	h.hb("m2", 0, []string{"t"}, map[string][]int32{}, "")
	r1 = h.hb("m1", 1, nil, all, "") // told to revoke part of t; still owns it
	if h.c.groups["g"].consumer.members["m1"].revoking.size() == 0 {
		t.Fatalf("setup: m1 revokes nothing (assignment %v)", assigned(r1))
	}
	delete(topics, "u")
	noZeroID := func(when string) {
		t.Helper()
		d := h.c.ConsumerGroupDescribe(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}})
		for _, m := range d.Groups[0].Members {
			for _, tp := range append(m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions...) {
				if tp.TopicID == [16]byte{} {
					t.Errorf("describe %s: member %s names topic %s by the zero id", when, m.MemberID, tp.Topic)
				}
			}
		}
	}
	noZeroID("once u was deleted")
	r1 = h.hb("m1", 1, []string{"t", "u"}, all, "") // a full heartbeat, still owning the revoked ones
	if r1.Assignment == nil {
		t.Fatalf("a full heartbeat got no assignment")
	}
	for _, at := range r1.Assignment.Topics {
		if at.TopicID == [16]byte{} {
			t.Errorf("heartbeat assignment names a topic by the zero id: %+v", r1.Assignment.Topics)
		}
	}
	if m := h.c.groups["g"].consumer.members["m1"]; len(m.assigned["u"]) != 0 || len(m.revoking["u"]) == 0 {
		t.Errorf("m1 after u was deleted: assigned %v revoking %v; want u revoked", m.assigned, m.revoking)
	}
	noZeroID("after m1's heartbeat")
}
