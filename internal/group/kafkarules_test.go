package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka 4.x group rules an independent review found Runnel broke; each test failed before its fix.

// 1. KIP-848 regex subscriptions: Kafka resolves with Pattern.matcher(topic).matches() (a
// full match); regex "t" must not match topic "tt"/"xt".
func TestRegexSubscriptionMatchesWholeNames(t *testing.T) {
	h := newHarness(t)
	topics := map[string]TopicMeta{"orders": {ID: [16]byte{1}, Partitions: 1}, "orders_dlq": {ID: [16]byte{2}, Partitions: 1}, "old-orders": {ID: [16]byte{3}, Partitions: 1}}
	h.c.Topics = func() map[string]TopicMeta { return topics }
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	re := "orders"
	req.Version, req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = 1, "g", "m1", 0, 30000
	req.SubscribedTopicRegex = &re
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, _ := h.c.ConsumerGroupHeartbeat(h.now, req, "c", "/h")
	if resp.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	n := 0
	for _, at := range resp.Assignment.Topics {
		n += len(at.Partitions)
	}
	if n != 1 {
		t.Errorf("regex %q got %d partitions over %d topics; want only topic orders (a whole-name match, as Kafka), 1 partition", re, n, len(resp.Assignment.Topics))
	}
}

func staticOf(h *harness, id string) string {
	g, _ := h.c.Group("g")
	return g.members[id].InstanceID
}

// 2. A static member away at a rebalance's timeout (KIP-345), its session (10 min) longer than
// the rebalance timeout (30 s), the usual static set-up: Kafka removes only dynamic laggards.
func TestStaticMemberOutlivesARebalanceTimeout(t *testing.T) {
	h := newHarness(t)
	joinS := func(memberID, inst string) RequestID {
		h.next++
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID, req.ProtocolType = 9, "g", memberID, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 600000, 30000 // 10 min session
		req.InstanceID = &inst
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("md")}}
		h.apply(h.c.JoinGroup(h.now, h.next, req, "client", "/127.0.0.1"))
		return h.next
	}
	ja, jb := joinS("", "a"), joinS("", "b")
	h.advance(3 * time.Second)
	ra, rb := h.joined(ja), h.joined(jb)
	leader, other := ra.LeaderID, rb.MemberID
	if other == leader {
		other = ra.MemberID
	}
	h.sync(other, ra.Generation, nil)
	h.sync(leader, ra.Generation, map[string]string{ra.MemberID: "A", rb.MemberID: "B"})
	// A new member joins: a rebalance. The follower rejoins; the leader is down for a restart.
	_, jc := h.newMember()
	jo := joinS(other, staticOf(h, other))
	h.advance(31 * time.Second) // the rebalance timeout passes
	g, _ := h.c.Group("g")
	if _, ok := g.members[leader]; !ok {
		t.Fatalf("static member %s (session 10 min) removed at the 30 s rebalance timeout; want it kept until its session ends (only dynamic laggards are removed)", leader)
	}
	// The member that joined leads the new generation, so the assignment does not wait for
	// the one away (Kafka's maybeElectNewJoinedLeader).
	ro, rc := h.joined(jo), h.joined(jc)
	if ro.ErrorCode != 0 || rc.ErrorCode != 0 || ro.LeaderID == leader || ro.LeaderID != rc.LeaderID {
		t.Fatalf("the joined members' answers: %v / %v, leader %s; want a leader of theirs, not %s (away)", kerr.ErrorForCode(ro.ErrorCode), kerr.ErrorForCode(rc.ErrorCode), ro.LeaderID, leader)
	}
	if n := len(ro.Members) + len(rc.Members); n != 3 {
		t.Fatalf("the leader was given %d members; want 3 (the static member away included)", n)
	}
}

// 3. A pending (MEMBER_ID_REQUIRED) member that never comes back must not rebalance a Stable
// group (Kafka: removePendingMemberAndUpdateClassicGroup only completes a PreparingRebalance).
func TestPendingMemberExpiryKeepsGroupStable(t *testing.T) {
	h := newHarness(t)
	a, b := stableGroup(h)
	first := h.joined(h.join("", "")) // MEMBER_ID_REQUIRED, then the client goes away
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatal(first.ErrorCode)
	}
	for i := 0; i < 3; i++ {
		h.advance(4 * time.Second)
		h.heartbeat(a, 1)
		h.heartbeat(b, 1)
	}
	if h.state() != Stable {
		t.Errorf("state %v after a pending member id expired; want Stable", h.state())
	}
}

// 3b. Same for a LeaveGroup of a pending member.
func TestPendingMemberLeaveKeepsGroupStable(t *testing.T) {
	h := newHarness(t)
	stableGroup(h)
	first := h.joined(h.join("", ""))
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 5, "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: first.MemberID}}
	_, out := h.c.LeaveGroup(h.now, req)
	h.apply(out)
	if h.state() != Stable {
		t.Errorf("state %v after a pending member left; want Stable", h.state())
	}
}

// 4. group.max.size counts the members given an id and yet to rejoin: past it a new member
// gets GROUP_MAX_SIZE_REACHED at once, not an id to join with.
func TestMaxGroupSizeCountsPendingMembers(t *testing.T) {
	h := newHarness(t)
	h.c.cfg.MaxGroupSize = 3
	stableGroup(h)
	first := h.joined(h.join("", ""))
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("the third member's first join: %v; want MEMBER_ID_REQUIRED", kerr.ErrorForCode(first.ErrorCode))
	}
	if r := h.joined(h.join("", "")); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("a fourth member's first join: %v; want GROUP_MAX_SIZE_REACHED", kerr.ErrorForCode(r.ErrorCode))
	}
	h.join(first.MemberID, "")
	if g, _ := h.c.Group("g"); len(g.members) != 3 {
		t.Fatalf("%d members after the third rejoined; want 3", len(g.members))
	}
}

// 5. OffsetDelete on a non-empty classic group of another protocol type: NON_EMPTY_GROUP.
func TestOffsetDeleteOnALiveNonConsumerGroup(t *testing.T) {
	h := newHarness(t)
	// A "connect" group.
	joinC := func(memberID string) RequestID {
		h.next++
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID, req.ProtocolType = 9, "g", memberID, "connect"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 30000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "sessioned", Metadata: []byte("md")}}
		h.apply(h.c.JoinGroup(h.now, h.next, req, "client", "/127.0.0.1"))
		return h.next
	}
	first := h.joined(joinC(""))
	j := joinC(first.MemberID)
	h.advance(3 * time.Second)
	r := h.joined(j)
	h.sync(r.MemberID, r.Generation, map[string]string{r.MemberID: "x"})
	if h.state() != Stable {
		t.Fatal(h.state())
	}
	h.c.groups["g"].offsets[TopicPartition{"t", 0}] = Offset{Offset: 5}
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	resp, _ := h.c.OffsetDelete(req)
	if resp.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Errorf("OffsetDelete on a Stable connect group: top-level %v; want NON_EMPTY_GROUP; offset left: %v", kerr.ErrorForCode(resp.ErrorCode), len(h.c.groups["g"].offsets))
	}
}

// 6. A classic member of a consumer group committing with a stale generation gets
// ILLEGAL_GENERATION in Kafka (ConsumerGroup.validateMemberEpoch, useClassicProtocol).
func TestClassicMemberCommitWithOldGeneration(t *testing.T) {
	h := newConsumerHarness(t)
	a, _, gen := classicGroupOnT(h)
	h.hb("c", 0, []string{"t"}, map[string][]int32{}, "") // upgrade
	code := h.commit(a, gen-1, "t", 0, 10)
	wantCode(t, "classic member commit with a stale generation", code, kerr.IllegalGeneration)
}

// 7. TxnOffsetCommit of a consumer-protocol member with a stale epoch: Kafka maps
// STALE_MEMBER_EPOCH to ILLEGAL_GENERATION (validateTransactionalOffsetCommit).
func TestTxnCommitWithOldMemberEpoch(t *testing.T) {
	h := newConsumerHarness(t)
	r := h.hb("m", 0, []string{"t"}, map[string][]int32{}, "")
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 3, "g", "m", r.MemberEpoch+5
	req.ProducerID, req.ProducerEpoch = 1, 0
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	resp, _, _ := h.c.TxnOffsetCommit(h.now, req)
	wantCode(t, "TxnOffsetCommit with a stale member epoch", resp.Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)
}

// 8. A classic member of a consumer group (online migration) waiting for partitions another
// member still holds is not told REBALANCE_IN_PROGRESS on every heartbeat: an eager member
// would give up everything at each rejoin, and nothing new could be assigned (Kafka: only once
// what it waits for is free, !group.waitingOnUnreleasedPartition(member)).
func TestClassicMemberWaitsForUnreleasedPartitions(t *testing.T) {
	h := newConsumerHarness(t)
	a, b, _ := classicGroupOnT(h)                         // a: t0-2, b: t3-5
	h.hb("c", 0, []string{"t"}, map[string][]int32{}, "") // upgrade; c's target takes from a and b
	g, _ := h.c.Group("g")
	// c is slow: it never heartbeats again (session 45 s). a and b rejoin (eager: own nothing).
	for _, id := range []string{a, b} {
		j := h.joined(h.joinMD(id, []string{"t"}, nil))
		h.syncAssignment(id, j.Generation, nil)
	}
	// c heartbeats once to take its target, then the group changes: c leaves its target to others
	rc := h.hb("c", g.consumer.members["c"].epoch, nil, map[string][]int32{}, "")
	// d joins and leaves at once: targets go back to a/b/c... instead, c changes subscription to u
	// so its partitions of t move to a and b while c still holds them.
	rc = h.hb("c", rc.MemberEpoch, []string{"u"}, map[string][]int32{"t": g.consumer.members["c"].assigned["t"]}, "")
	// a and b rejoin (eager), getting what is free; what c still holds stays pending.
	gens := map[string]int32{}
	for _, id := range []string{a, b} {
		j := h.joined(h.joinMD(id, []string{"t"}, nil))
		h.syncAssignment(id, j.Generation, nil)
		gens[id] = j.Generation
	}
	rejoins := 0
	for i := 0; i < 3; i++ {
		for _, id := range []string{a, b} {
			m := g.consumer.members[id]
			if m.assigned.equal(g.consumer.target[id]) {
				continue
			}
			code := h.heartbeat(id, gens[id])
			if code == kerr.RebalanceInProgress.Code {
				rejoins++
				j := h.joined(h.joinMD(id, []string{"t"}, nil))
				h.syncAssignment(id, j.Generation, nil)
				gens[id] = j.Generation
			}
		}
	}
	if rejoins > 0 {
		t.Errorf("classic members told to rejoin %d times while the partitions they wait for were still held by c", rejoins)
	}
	// Once c gives them up, the next heartbeat asks for a rejoin, to take them.
	h.hb("c", rc.MemberEpoch, []string{"u"}, map[string][]int32{}, "")
	asked := 0
	for _, id := range []string{a, b} {
		if m := g.consumer.members[id]; !m.assigned.equal(g.consumer.target[id]) && h.heartbeat(id, gens[id]) == kerr.RebalanceInProgress.Code {
			asked++
		}
	}
	if asked == 0 {
		t.Errorf("no classic member was asked to rejoin once c released the partitions they wait for")
	}
}

// TestServerAssignorVotes: members that name no server assignor do not vote (Kafka counts only
// the names given), so one member asking for range among two that ask for nothing gets range,
// and ConsumerGroupDescribe names the assignor in use.
func TestServerAssignorVotes(t *testing.T) {
	h := newConsumerHarness(t)
	h.hb("a", 0, []string{"t"}, map[string][]int32{}, "range")
	rb := h.hb("b", 0, []string{"t"}, map[string][]int32{}, "")
	rc := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	g, _ := h.c.Group("g")
	if a := groupAssignor(g.consumer); a != "range" {
		t.Fatalf("the group's assignor: %s; want range (the only one named)", a)
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g"}
	if d := h.c.ConsumerGroupDescribe(req); d.Groups[0].AssignorName != "range" {
		t.Fatalf("ConsumerGroupDescribe names %q; want range", d.Groups[0].AssignorName)
	}
	h.hb("b", rb.MemberEpoch, nil, nil, "uniform")
	h.hb("c", rc.MemberEpoch, nil, nil, "uniform")
	if a := groupAssignor(g.consumer); a != "uniform" {
		t.Fatalf("two votes for uniform against one for range: %s", a)
	}
}

// TestAdminRemovesAStaticConsumerMember: LeaveGroup naming a static member removes it,
// consumer-protocol members included (Kafka's administrative removal,
// Admin.removeMembersFromConsumerGroup), by its instance id alone or with its member id, as
// Kafka 4.1.1 does (a member id used to be refused for a consumer-protocol member, Kafka 4.0's
// rule); another member's id with the instance id is FENCED_INSTANCE_ID.
func TestAdminRemovesAStaticConsumerMember(t *testing.T) {
	h := newConsumerHarness(t)
	r := h.hbStatic("s1", "inst1", 0, []string{"t"}, map[string][]int32{})
	h.hb("d", 0, []string{"t"}, map[string][]int32{}, "")
	leave := func(m kmsg.LeaveGroupRequestMember) int16 {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group, req.Members = 5, "g", []kmsg.LeaveGroupRequestMember{m}
		resp, out := h.c.LeaveGroup(h.now, req)
		h.apply(out)
		return resp.Members[0].ErrorCode
	}
	inst := "inst1"
	wantCode(t, "LeaveGroup of a consumer-protocol static member with another's member id", leave(kmsg.LeaveGroupRequestMember{MemberID: "d", InstanceID: &inst}), kerr.FencedInstanceID)
	wantCode(t, "LeaveGroup of a consumer-protocol static member with its member id", leave(kmsg.LeaveGroupRequestMember{MemberID: *r.MemberID, InstanceID: &inst}), nil)
	g, _ := h.c.Group("g")
	if _, ok := g.consumer.members[*r.MemberID]; ok || len(g.consumer.members) != 1 {
		t.Fatalf("members %d after the removal; want only d", len(g.consumer.members))
	}
	h.hbStatic("s2", "inst2", 0, []string{"t"}, map[string][]int32{})
	inst2 := "inst2"
	wantCode(t, "LeaveGroup of a consumer-protocol static member by instance id", leave(kmsg.LeaveGroupRequestMember{InstanceID: &inst2}), nil)
	if len(g.consumer.members) != 1 {
		t.Fatalf("members %d after the second removal; want only d", len(g.consumer.members))
	}
}

// DescribeGroups describes classic groups only: a consumer (KIP-848) group is Dead there, with
// GROUP_ID_NOT_FOUND from v6 (Kafka's admin client falls back between ConsumerGroupDescribe and
// DescribeGroups on it); an unknown group the same, with Kafka's message.
func TestDescribeGroupsOfAConsumerGroup(t *testing.T) {
	h := newConsumerHarness(t)
	if r := h.hbAs("m1", "", 0, []string{"t"}, map[string][]int32{}, ""); r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	for _, v := range []int16{5, 6} {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = v, []string{"g", "nobody"}
		resp := h.c.DescribeGroups(req)
		for i, g := range resp.Groups {
			want := int16(0)
			if v >= 6 {
				want = kerr.GroupIDNotFound.Code
			}
			if g.State != "Dead" || g.ErrorCode != want || len(g.Members) != 0 || g.ProtocolType != "" {
				t.Errorf("DescribeGroups v%d of %s: state %s, error %v, %d members, protocol type %q; want Dead, %v, none",
					v, req.Groups[i], g.State, kerr.ErrorForCode(g.ErrorCode), len(g.Members), g.ProtocolType, kerr.ErrorForCode(want))
			}
			if v >= 6 && (g.ErrorMessage == nil || *g.ErrorMessage == "") {
				t.Errorf("DescribeGroups v%d of %s: no error message", v, req.Groups[i])
			}
		}
	}
}

// A regex subscription resolves to the matching topics the member's principal may describe,
// as Kafka's (filterTopicDescribeAuthorizedTopics); explicit topic names are not filtered. Its
// latest heartbeat's filter holds: an ACL granted later takes effect at the next heartbeat.
func TestRegexSubscriptionNeedsDescribe(t *testing.T) {
	h := newHarness(t)
	topics := map[string]TopicMeta{"orders": {ID: [16]byte{1}, Partitions: 2}, "orders_secret": {ID: [16]byte{2}, Partitions: 2}, "audit": {ID: [16]byte{3}, Partitions: 1}}
	h.c.Topics = func() map[string]TopicMeta { return topics }
	allowed := map[string]bool{"orders": true}
	asked := 0
	filter := func(topic string) bool { asked++; return allowed[topic] }
	heartbeat := func(member string, epoch int32, regex *string, names []string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = 1, "g", member, epoch, 30000
		req.SubscribedTopicRegex, req.SubscribedTopicNames = regex, names
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, out := h.c.ConsumerGroupHeartbeatAs(h.now, req, "c", "/h", filter)
		h.apply(out)
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s: %v", member, kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp
	}
	topicsOf := func(resp *kmsg.ConsumerGroupHeartbeatResponse) map[[16]byte]int {
		out := map[[16]byte]int{}
		if resp.Assignment != nil {
			for _, at := range resp.Assignment.Topics {
				out[at.TopicID] += len(at.Partitions)
			}
		}
		return out
	}
	re := "orders.*"
	r := heartbeat("m1", 0, &re, []string{})
	if got := topicsOf(r); got[[16]byte{1}] != 2 || got[[16]byte{2}] != 0 {
		t.Errorf("regex %q with DESCRIBE on orders only: assigned %v; want orders' 2 partitions, none of orders_secret", re, got)
	}
	if asked == 0 {
		t.Error("the filter was never asked")
	}
	// Explicit names are not filtered.
	r2 := heartbeat("m2", 0, nil, []string{"audit"})
	if got := topicsOf(r2); got[[16]byte{3}] != 1 {
		t.Errorf("explicit subscription to audit (no DESCRIBE): assigned %v; want its partition", got)
	}
	// DESCRIBE on orders_secret granted: m1's next heartbeat resolves it too.
	allowed["orders_secret"] = true
	r = heartbeat("m1", r.MemberEpoch, nil, nil)
	for i := 0; i < 3 && topicsOf(r)[[16]byte{2}] == 0; i++ {
		r = heartbeat("m1", r.MemberEpoch, nil, nil)
	}
	if got := topicsOf(r); got[[16]byte{2}] != 2 {
		t.Errorf("after DESCRIBE on orders_secret was granted: assigned %v; want its 2 partitions too", got)
	}
}
