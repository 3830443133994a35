package group

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var testTopics = map[string]TopicMeta{"t": {ID: [16]byte{1}, Partitions: 6}, "u": {ID: [16]byte{2}, Partitions: 3}}

func newConsumerHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.c.Topics = func() map[string]TopicMeta { return testTopics }
	return h
}

// hb sends a ConsumerGroupHeartbeat. owned nil sends no owned partitions; topics nil keeps the
// subscription.
func (h *harness) hb(member string, epoch int32, topics []string, owned map[string][]int32, assignor string) *kmsg.ConsumerGroupHeartbeatResponse {
	return h.hbAs(member, "", epoch, topics, owned, assignor)
}

// hbStatic sends a ConsumerGroupHeartbeat of a static member (group.instance.id).
func (h *harness) hbStatic(member, instance string, epoch int32, topics []string, owned map[string][]int32) *kmsg.ConsumerGroupHeartbeatResponse {
	return h.hbAs(member, instance, epoch, topics, owned, "")
}

// hbAs sends a ConsumerGroupHeartbeat, with an instance id unless it is empty.
func (h *harness) hbAs(member, instance string, epoch int32, topics []string, owned map[string][]int32, assignor string) *kmsg.ConsumerGroupHeartbeatResponse {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = 1, "g", member, epoch, 30000
	req.SubscribedTopicNames = topics
	if instance != "" {
		req.InstanceID = &instance
	}
	if assignor != "" {
		req.ServerAssignor = &assignor
	}
	if owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for t, ps := range owned {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: testTopics[t].ID, Partitions: ps})
		}
	}
	resp, out := h.c.ConsumerGroupHeartbeat(h.now, req, "client", "/127.0.0.1")
	h.apply(out)
	return resp
}

// assigned decodes a heartbeat's assignment into topic → partitions (nil: none sent).
func assigned(resp *kmsg.ConsumerGroupHeartbeatResponse) map[string][]int32 {
	if resp.Assignment == nil {
		return nil
	}
	out := map[string][]int32{}
	for _, at := range resp.Assignment.Topics {
		for name, m := range testTopics {
			if m.ID == at.TopicID {
				out[name] = at.Partitions
			}
		}
	}
	return out
}

func TestConsumerProtocolIncrementalRebalance(t *testing.T) {
	h := newConsumerHarness(t)
	r1 := h.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
	if r1.ErrorCode != 0 || r1.MemberEpoch != 1 || len(assigned(r1)["t"]) != 6 {
		t.Fatalf("first member: error %d epoch %d assignment %v; want epoch 1 with all 6 partitions", r1.ErrorCode, r1.MemberEpoch, assigned(r1))
	}
	r2 := h.hb("m2", 0, []string{"t"}, map[string][]int32{}, "")
	if r2.MemberEpoch != 2 || len(assigned(r2)["t"]) != 0 {
		t.Fatalf("second member: epoch %d assignment %v; want epoch 2 and nothing yet (m1 still owns everything)", r2.MemberEpoch, assigned(r2))
	}
	// m1 learns it must give up 3 partitions: its epoch stays until it has.
	r1 = h.hb("m1", 1, nil, map[string][]int32{"t": {0, 1, 2, 3, 4, 5}}, "")
	kept := assigned(r1)["t"]
	if r1.MemberEpoch != 1 || len(kept) != 3 {
		t.Fatalf("m1 during revocation: epoch %d keeps %v; want epoch 1 keeping 3", r1.MemberEpoch, kept)
	}
	if got := h.hb("m2", 2, nil, map[string][]int32{}, ""); len(assigned(got)["t"]) != 0 {
		t.Fatalf("m2 got %v before m1 revoked", assigned(got))
	}
	r1 = h.hb("m1", 1, nil, map[string][]int32{"t": kept}, "") // revoked
	if r1.MemberEpoch != 2 {
		t.Fatalf("m1 after revoking: epoch %d; want 2", r1.MemberEpoch)
	}
	r2 = h.hb("m2", 2, nil, map[string][]int32{}, "")
	if got := assigned(r2)["t"]; len(got) != 3 {
		t.Fatalf("m2 after m1 revoked: %v; want the other 3", got)
	}
	wantCode(t, "heartbeat from the future", h.hb("m2", 9, nil, nil, "").ErrorCode, kerr.FencedMemberEpoch)
	wantCode(t, "unknown member", h.hb("m3", 1, nil, nil, "").ErrorCode, kerr.UnknownMemberID)

	// A commit needs the member's epoch.
	commit := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 9, "g", member, epoch
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: kept[0], Offset: 5}}}}
		resp, _ := h.c.OffsetCommit(h.now, req)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "commit at the member epoch", commit("m1", 2), nil)
	wantCode(t, "commit at an old epoch", commit("m1", 0), kerr.StaleMemberEpoch)

	// A coordinator that replays the records (a broker restart) carries the group on: m2 keeps
	// its id, epoch and partitions, and a plain heartbeat works.
	c2 := New(DefaultConfig())
	c2.Topics = h.c.Topics
	for _, r := range h.records {
		if err := c2.Load(h.now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", "m2", 2
	if r, _ := c2.ConsumerGroupHeartbeat(h.now, req, "client", "/127.0.0.1"); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("heartbeat after reload = error %d epoch %d; want epoch 2, no error", r.ErrorCode, r.MemberEpoch)
	}
	if g, _ := c2.Group("g"); g.Type() != TypeConsumer || len(g.consumer.members["m2"].assigned["t"]) != 3 {
		t.Fatalf("after reload: type %s, m2 owns %v; want consumer, 3 partitions", g.Type(), g.consumer.members["m2"].assigned)
	}

	// m1 leaves; m2 takes everything.
	if r := h.hb("m1", -1, nil, nil, ""); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave = error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	r2 = h.hb("m2", 2, nil, map[string][]int32{"t": assigned(r2)["t"]}, "")
	if got := assigned(r2)["t"]; len(got) != 6 || r2.MemberEpoch != 3 {
		t.Fatalf("m2 alone: epoch %d assignment %v; want epoch 3 with all 6", r2.MemberEpoch, got)
	}
	// Its session expires without heartbeats.
	h.advance(46 * time.Second)
	if g, _ := h.c.Group("g"); len(g.consumer.members) != 0 || g.State != Empty {
		t.Errorf("after the session timeout: %d members, state %v; want none, Empty", len(g.consumer.members), g.State)
	}
}

func TestRangeAssignor(t *testing.T) {
	h := newConsumerHarness(t)
	h.hb("a", 0, []string{"t", "u"}, map[string][]int32{}, "range")
	h.hb("b", 0, []string{"t", "u"}, map[string][]int32{}, "range")
	g, _ := h.c.Group("g")
	ta, tb := g.consumer.target["a"], g.consumer.target["b"]
	if len(ta["t"]) != 3 || len(tb["t"]) != 3 || len(ta["u"]) != 2 || len(tb["u"]) != 1 || ta["t"][0] != 0 || tb["u"][0] != 2 {
		t.Errorf("range targets a=%v b=%v; want t split 0-2/3-5 and u 0-1/2", ta, tb)
	}
	wantCode(t, "unknown assignor", h.hb("c", 0, []string{"t"}, map[string][]int32{}, "magic").ErrorCode, kerr.UnsupportedAssignor)
}

// TestGroupTypeRules: an empty group takes either protocol; a live group of the other protocol
// whose members' metadata is not the consumer protocol's cannot migrate (migrate_test.go has
// the migrations).
func TestGroupTypeRules(t *testing.T) {
	h := newConsumerHarness(t)
	stableGroup(h) // a classic group with members, of unreadable subscriptions
	wantCode(t, "ConsumerGroupHeartbeat to a live classic group", h.hb("m", 0, []string{"t"}, map[string][]int32{}, "").ErrorCode, kerr.GroupIDNotFound)

	h2 := newConsumerHarness(t)
	h2.hb("m", 0, []string{"t"}, map[string][]int32{}, "")
	r := h2.joined(h2.join("", ""))
	wantCode(t, "JoinGroup of an unreadable subscription to a live consumer group", r.ErrorCode, kerr.InconsistentGroupProtocol)
	h2.hb("m", -1, nil, nil, "")
	r = h2.joined(h2.join("", ""))
	wantCode(t, "JoinGroup to an empty consumer group (it becomes classic)", r.ErrorCode, kerr.MemberIDRequired)
}

// TestStaticMemberLeavesForAWhile: KIP-848 static membership. A static member that leaves with
// epoch -2 keeps its partitions for its session timeout; the instance coming back under a new
// member id gets them at once, with no group epoch bump and nothing moving for the others; the
// old member id is fenced; an instance id in use cannot be taken; a -2 member whose session
// expires is removed like any other.
func TestStaticMemberLeavesForAWhile(t *testing.T) {
	h := newConsumerHarness(t)
	groupEpoch := func() int32 { return h.c.groups["g"].consumer.epoch }
	code := func(r *kmsg.ConsumerGroupHeartbeatResponse) error { return kerr.ErrorForCode(r.ErrorCode) }

	// Two static members settle on 3 partitions each at group epoch 2.
	r1 := h.hbStatic("m1", "i1", 0, []string{"t"}, map[string][]int32{})
	h.hbStatic("m2", "i2", 0, []string{"t"}, map[string][]int32{})
	r1 = h.hbStatic("m1", "i1", 1, nil, map[string][]int32{"t": assigned(r1)["t"]})
	kept1 := assigned(r1)["t"]
	r1 = h.hbStatic("m1", "i1", 1, nil, map[string][]int32{"t": kept1})
	r2 := h.hbStatic("m2", "i2", 2, nil, map[string][]int32{})
	kept2 := assigned(r2)["t"]
	if r1.MemberEpoch != 2 || r2.MemberEpoch != 2 || len(kept1) != 3 || len(kept2) != 3 {
		t.Fatalf("setup: m1 epoch %d %v, m2 epoch %d %v; want 3 partitions each at epoch 2", r1.MemberEpoch, kept1, r2.MemberEpoch, kept2)
	}

	if r := h.hbStatic("m1", "", -2, nil, nil); code(r) != kerr.InvalidRequest {
		t.Fatalf("-2 without an instance id: %v, want INVALID_REQUEST", code(r))
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = 1, "g", "m1", 2, kmsg.StringPtr("")
	if r, _ := h.c.ConsumerGroupHeartbeat(h.now, req, "client", "/127.0.0.1"); code(r) != kerr.InvalidRequest {
		t.Fatalf("an empty instance id: %v, want INVALID_REQUEST", code(r))
	}
	if r := h.hbStatic("m1", "i1", -2, nil, nil); code(r) != nil || r.MemberEpoch != -2 {
		t.Fatalf("static leave: %v epoch %d, want epoch -2", code(r), r.MemberEpoch)
	}
	if groupEpoch() != 2 {
		t.Fatalf("a static member leaving for a while moved the group epoch to %d", groupEpoch())
	}
	if r := h.hbStatic("m2", "i2", 2, nil, map[string][]int32{"t": kept2}); code(r) != nil || r.MemberEpoch != 2 || (r.Assignment != nil && len(assigned(r)["t"]) != 3) {
		t.Fatalf("m2 after m1 left for a while: %v epoch %d %v; want its 3 partitions at epoch 2", code(r), r.MemberEpoch, assigned(r))
	}

	// Another process may not take an instance id still in use.
	if r := h.hbStatic("m3", "i2", 0, []string{"t"}, map[string][]int32{}); code(r) != kerr.UnreleasedInstanceID {
		t.Fatalf("joining with i2 while m2 holds it: %v, want UNRELEASED_INSTANCE_ID", code(r))
	}

	// The instance comes back under a new member id: m1's partitions at once, same group epoch.
	h.advance(5 * time.Second)
	r := h.hbStatic("m1b", "i1", 0, []string{"t"}, map[string][]int32{})
	if code(r) != nil || r.MemberEpoch != 2 || !slices.Equal(assigned(r)["t"], kept1) {
		t.Fatalf("the instance back: %v epoch %d %v; want m1's %v at epoch 2", code(r), r.MemberEpoch, assigned(r), kept1)
	}
	if groupEpoch() != 2 {
		t.Fatalf("the static member's return moved the group epoch to %d", groupEpoch())
	}
	if r := h.hbStatic("m1", "i1", 2, nil, map[string][]int32{"t": kept1}); code(r) != kerr.FencedInstanceID {
		t.Fatalf("the replaced member id heartbeating: %v, want FENCED_INSTANCE_ID", code(r))
	}

	// m2 leaves for a while and does not come back: removed at its session timeout, and m1b
	// takes everything.
	if r := h.hbStatic("m2", "i2", -2, nil, nil); code(r) != nil {
		t.Fatal(code(r))
	}
	owned := kept1
	for range 12 {
		h.advance(5 * time.Second)
		r = h.hbStatic("m1b", "i1", r.MemberEpoch, nil, map[string][]int32{"t": owned})
		if code(r) != nil {
			t.Fatalf("m1b: %v", code(r))
		}
		if r.Assignment != nil {
			owned = assigned(r)["t"]
		}
	}
	if _, ok := h.c.groups["g"].consumer.members["m2"]; ok || len(owned) != 6 || groupEpoch() != 3 {
		t.Fatalf("after m2's session: m2 still a member %v, m1b owns %v, group epoch %d; want m2 gone, all 6, epoch 3", ok, owned, groupEpoch())
	}

	// -1 with the instance id leaves for good.
	if r := h.hbStatic("m1b", "i1", -1, nil, nil); code(r) != nil || len(h.c.groups["g"].consumer.members) != 0 {
		t.Fatalf("static member leaving for good: %v, %d members left", code(r), len(h.c.groups["g"].consumer.members))
	}
}

// TestReconcilingWhileAMemberWaitsForPartitions: a member at the assignment epoch that is still
// waiting for partitions another member has not released yet (Kafka's UNRELEASED_PARTITIONS)
// keeps the group Reconciling, as Kafka's ConsumerGroup state (any member not STABLE); it was
// described as Stable while those partitions had no consumer.
func TestReconcilingWhileAMemberWaitsForPartitions(t *testing.T) {
	h := newConsumerHarness(t)
	state := func() string {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"g"}
		return h.c.ConsumerGroupDescribe(req).Groups[0].State
	}
	// latest is the assignment last sent (a heartbeat sends none when it did not change).
	latest := func(cur map[string][]int32, r *kmsg.ConsumerGroupHeartbeatResponse) map[string][]int32 {
		if a := assigned(r); a != nil {
			return a
		}
		return cur
	}
	ra := h.hb("a", 0, []string{"t"}, map[string][]int32{}, "")
	a := latest(map[string][]int32{}, ra)
	ra = h.hb("a", ra.MemberEpoch, nil, a, "")
	if got := state(); got != "Stable" {
		t.Fatalf("one member owning its assignment: %s; want Stable", got)
	}
	rb := h.hb("b", 0, []string{"t"}, map[string][]int32{}, "")
	b := latest(map[string][]int32{}, rb)
	if len(b["t"]) != 0 {
		t.Fatalf("b got partitions a still holds: %v", b)
	}
	ra = h.hb("a", ra.MemberEpoch, nil, a, "") // told to revoke
	a = latest(a, ra)
	h.hb("a", ra.MemberEpoch, nil, a, "") // released
	if got := state(); got != "Reconciling" {
		t.Fatalf("b at the assignment epoch still waiting for a's released partitions: %s; want Reconciling", got)
	}
	rb = h.hb("b", rb.MemberEpoch, nil, b, "")
	if b = latest(b, rb); len(b["t"]) == 0 {
		t.Fatal("b was not given the released partitions")
	}
	h.hb("b", rb.MemberEpoch, nil, b, "")
	if got := state(); got != "Stable" {
		t.Fatalf("both members at their targets: %s; want Stable", got)
	}
}

// TestV0StaticLeaveWithoutMemberID: a v0 heartbeat of a static member leaving for a while (epoch
// -2) may leave its member id empty, as Kafka's validation allows below v1: an unknown instance
// is then UNKNOWN_MEMBER_ID (it was refused as INVALID_REQUEST).
func TestV0StaticLeaveWithoutMemberID(t *testing.T) {
	h := newConsumerHarness(t)
	h.hb("a", 0, []string{"t"}, map[string][]int32{}, "")
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	inst := "i1"
	req.Version, req.Group, req.MemberEpoch, req.InstanceID, req.RebalanceTimeoutMillis = 0, "g", -2, &inst, -1
	resp, out := h.c.ConsumerGroupHeartbeat(h.now, req, "client", "/127.0.0.1")
	h.apply(out)
	wantCode(t, "a v0 static leave without a member id, of an unknown instance", resp.ErrorCode, kerr.UnknownMemberID)
}

// TestAssignmentOnlyOnFullRequestOrChange: a heartbeat gets the member's assignment back when it
// is a full request (epoch 0, or the rebalance timeout, the subscription and the owned partitions
// all set, as a member sends after an error) or when the assignment changed, as in Kafka's
// consumerGroupHeartbeat. A heartbeat naming only its owned partitions got it back every time.
func TestAssignmentOnlyOnFullRequestOrChange(t *testing.T) {
	h := newConsumerHarness(t)
	r := h.hb("a", 0, []string{"t"}, map[string][]int32{}, "")
	a := assigned(r)
	if len(a["t"]) == 0 {
		t.Fatalf("a joining got no assignment: %v", a)
	}
	if r = h.hb("a", r.MemberEpoch, nil, a, ""); r.Assignment != nil {
		t.Fatalf("a heartbeat naming only the owned partitions got the unchanged assignment: %v", assigned(r))
	}
	if r = h.hb("a", r.MemberEpoch, nil, nil, ""); r.Assignment != nil {
		t.Fatalf("an empty heartbeat got the unchanged assignment: %v", assigned(r))
	}
	if r = h.hb("a", r.MemberEpoch, []string{"t"}, a, ""); assigned(r) == nil {
		t.Fatal("a full heartbeat got no assignment")
	}
	// Without the rebalance timeout (-1: unchanged) it is not a full request.
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = 1, "g", "a", r.MemberEpoch, -1
	req.SubscribedTopicNames = []string{"t"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: testTopics["t"].ID, Partitions: a["t"]}}
	resp, out := h.c.ConsumerGroupHeartbeat(h.now, req, "client", "/127.0.0.1")
	h.apply(out)
	if resp.ErrorCode != 0 || resp.Assignment != nil {
		t.Fatalf("a heartbeat with the subscription and owned partitions but no rebalance timeout: %v, assignment %v; want none", kerr.ErrorForCode(resp.ErrorCode), assigned(resp))
	}
}

// TestConsumerGroupDescribeMissingGroups: ConsumerGroupDescribe of a group that does not exist
// and of a group of another type are both GROUP_ID_NOT_FOUND, worded apart as Kafka's
// consumerGroup lookup words them (kafka-consumer-groups prints the message). Both said the
// group was not a consumer group.
func TestConsumerGroupDescribeMissingGroups(t *testing.T) {
	h := newConsumerHarness(t)
	stableGroup(h) // "g", a classic group
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"nosuch", "g"}
	resp := h.c.ConsumerGroupDescribe(req)
	for i, want := range []string{"Group nosuch not found.", "Group g is not a consumer group."} {
		g := resp.Groups[i]
		if g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil || *g.ErrorMessage != want {
			t.Errorf("describe %s: %v %v; want GROUP_ID_NOT_FOUND %q", g.Group, kerr.ErrorForCode(g.ErrorCode), g.ErrorMessage, want)
		}
	}
}
