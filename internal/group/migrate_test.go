package group

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinMD sends a classic JoinGroup whose protocols (range, then cooperative-sticky) carry a real
// consumer protocol subscription of topics with owned partitions (nil: none, as an eager
// member that revoked everything).
func (h *harness) joinMD(memberID string, topics []string, owned map[string][]int32) RequestID {
	h.next++
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 1, topics
	for _, t := range slices.Sorted(maps.Keys(owned)) {
		md.OwnedPartitions = append(md.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: t, Partitions: owned[t]})
	}
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID, req.ProtocolType = 9, "g", memberID, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 30000
	meta := md.AppendTo(nil)
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}, {Name: "cooperative-sticky", Metadata: meta}}
	h.apply(h.c.JoinGroup(h.now, h.next, req, "client", "/127.0.0.1"))
	return h.next
}

// syncAssignment sends a SyncGroup and decodes the consumer protocol assignment it gets.
func (h *harness) syncAssignment(memberID string, gen int32, assignments map[string][]byte) (int16, map[string][]int32) {
	h.t.Helper()
	h.next++
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 5, "g", memberID, gen
	for m, a := range assignments {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: a})
	}
	h.apply(h.c.SyncGroup(h.now, h.next, req))
	r, ok := h.replies[h.next]
	if !ok {
		return -1, nil // waits for the leader
	}
	resp := r.(*kmsg.SyncGroupResponse)
	out := map[string][]int32{}
	if resp.ErrorCode == 0 && len(resp.MemberAssignment) > 0 {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(resp.MemberAssignment); err != nil {
			h.t.Fatalf("assignment of %s: %v", memberID, err)
		}
		for _, t := range a.Topics {
			out[t.Topic] = t.Partitions
		}
	}
	return resp.ErrorCode, out
}

func classicAssignment(parts map[string][]int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	for _, t := range slices.Sorted(maps.Keys(parts)) {
		a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: t, Partitions: parts[t]})
	}
	return a.AppendTo(nil)
}

// classicGroupOnT brings members a and b of a classic consumer-protocol group through a
// rebalance in which a takes t 0-2 and b t 3-5; it returns their ids and the generation.
func classicGroupOnT(h *harness) (a, b string, gen int32) {
	h.t.Helper()
	for _, id := range []*string{&a, &b} {
		first := h.joined(h.joinMD("", []string{"t"}, nil))
		*id = first.MemberID
	}
	ja, jb := h.joinMD(a, []string{"t"}, nil), h.joinMD(b, []string{"t"}, nil)
	h.advance(3 * time.Second)
	ra, rb := h.joined(ja), h.joined(jb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.LeaderID != a {
		h.t.Fatalf("classic joins: %v %v, leader %s", kerr.ErrorForCode(ra.ErrorCode), kerr.ErrorForCode(rb.ErrorCode), ra.LeaderID)
	}
	h.syncAssignment(b, ra.Generation, nil)
	h.syncAssignment(a, ra.Generation, map[string][]byte{
		a: classicAssignment(map[string][]int32{"t": {0, 1, 2}}), b: classicAssignment(map[string][]int32{"t": {3, 4, 5}})})
	return a, b, ra.Generation
}

// checkExclusive fails if a partition is owned (assigned or being revoked) by two members.
func checkExclusive(t *testing.T, g *Group) {
	t.Helper()
	if g.consumer == nil {
		return
	}
	owner := map[TopicPartition]string{}
	for _, m := range g.consumer.members {
		for _, a := range []assignment{m.assigned, m.revoking} {
			for tp, ps := range a {
				for _, p := range ps {
					k := TopicPartition{tp, p}
					if o, ok := owner[k]; ok && o != m.id {
						t.Fatalf("partition %v owned by %s and %s", k, o, m.id)
					}
					owner[k] = m.id
				}
			}
		}
	}
}

// TestOnlineUpgradeAndDowngrade: a consumer-protocol member joins a live classic group; the
// group becomes a consumer group in which the classic members carry on with their partitions,
// are asked to rejoin, give up what the new target moves (an eager member by rejoining with
// nothing, a cooperative one by rejoining without what its sync took away), and the new member
// gets its share once released; no partition is ever owned twice. When the consumer-protocol
// member leaves, the group is classic again and rebalances. The state survives a reload.
func TestOnlineUpgradeAndDowngrade(t *testing.T) {
	h := newConsumerHarness(t)
	a, b, gen := classicGroupOnT(h)
	g, _ := h.c.Group("g")

	// Upgrade.
	rc := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	if rc.ErrorCode != 0 || g.Type() != TypeConsumer {
		t.Fatalf("heartbeat to the live classic group: %v, type %s", kerr.ErrorForCode(rc.ErrorCode), g.Type())
	}
	checkExclusive(t, g)
	if got := assigned(rc)["t"]; len(got) != 0 {
		t.Fatalf("c got %v while a and b still own every partition", got)
	}
	if !slices.Equal(g.consumer.members[a].assigned["t"], []int32{0, 1, 2}) || g.consumer.members[b].classic == nil {
		t.Fatalf("a's partitions after the upgrade: %v", g.consumer.members[a].assigned)
	}
	// The classic members are told to rejoin.
	wantCode(t, "a's heartbeat after the upgrade", h.heartbeat(a, gen), kerr.RebalanceInProgress)
	wantCode(t, "a heartbeat of an old generation", h.heartbeat(a, gen-1), kerr.IllegalGeneration)

	// a is eager: it rejoins owning nothing and gets its target at once.
	ja := h.joined(h.joinMD(a, []string{"t"}, nil))
	if ja.ErrorCode != 0 || ja.LeaderID == a || ja.Generation != g.consumer.assignmentEpoch || *ja.Protocol != "range" {
		t.Fatalf("a's rejoin: %v generation %d (group %d) leader %q protocol %v", kerr.ErrorForCode(ja.ErrorCode), ja.Generation, g.consumer.assignmentEpoch, ja.LeaderID, *ja.Protocol)
	}
	checkExclusive(t, g)
	code, pa := h.syncAssignment(a, ja.Generation, nil)
	if code != 0 || len(pa["t"]) != 2 {
		t.Fatalf("a's sync: %v %v; want 2 partitions", kerr.ErrorForCode(code), pa)
	}
	wantCode(t, "a's heartbeat once reconciled", h.heartbeat(a, ja.Generation), nil)

	// b is cooperative: it rejoins still owning t 3-5, so it keeps 2 and must give one up.
	jb := h.joined(h.joinMD(b, []string{"t"}, map[string][]int32{"t": {3, 4, 5}}))
	code, pb := h.syncAssignment(b, jb.Generation, nil)
	if code != 0 || len(pb["t"]) != 2 {
		t.Fatalf("b's sync: %v %v; want 2 of its 3 partitions", kerr.ErrorForCode(code), pb)
	}
	checkExclusive(t, g)
	wantCode(t, "b's heartbeat while revoking", h.heartbeat(b, jb.Generation), kerr.RebalanceInProgress)
	jb = h.joined(h.joinMD(b, []string{"t"}, pb))
	code, pb2 := h.syncAssignment(b, jb.Generation, nil)
	if code != 0 || !slices.Equal(pb2["t"], pb["t"]) {
		t.Fatalf("b's second sync: %v %v", kerr.ErrorForCode(code), pb2)
	}
	wantCode(t, "b's heartbeat once reconciled", h.heartbeat(b, jb.Generation), nil)

	// c now gets the two released partitions.
	rc = h.hb("c", rc.MemberEpoch, nil, map[string][]int32{}, "")
	if got := assigned(rc)["t"]; len(got) != 2 || rc.MemberEpoch != g.consumer.assignmentEpoch {
		t.Fatalf("c: epoch %d assignment %v; want 2 partitions", rc.MemberEpoch, got)
	}
	checkExclusive(t, g)
	all := append(append(slices.Clone(pa["t"]), pb2["t"]...), assigned(rc)["t"]...)
	slices.Sort(all)
	if !slices.Equal(all, []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("partitions after the upgrade: %v", all)
	}

	// A classic member may commit with its member epoch; the group survives a reload.
	wantCode(t, "a's commit", h.commit(a, ja.Generation, "t", 0, 10), nil)
	h2 := newConsumerHarness(t)
	for _, r := range h.records {
		if err := h2.c.Load(h2.now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	g2, _ := h2.c.Group("g")
	if g2.consumer == nil || g2.consumer.members[b].classic == nil || len(g2.consumer.members[b].classic.protocols) != 2 ||
		g2.consumer.members[b].classic.sessionTimeout != 10*time.Second || g2.consumer.members[c(rc)] == nil {
		t.Fatalf("reloaded group: %+v", g2.consumer)
	}

	// Downgrade: c leaves, a and b are a classic group again, rebalancing.
	h.hb("c", rc.MemberEpoch, nil, nil, "")
	leave := h.hb(*rc.MemberID, -1, nil, nil, "")
	wantCode(t, "c's leave", leave.ErrorCode, nil)
	if g.Type() != TypeClassic || g.State != PreparingRebalance {
		t.Fatalf("after the last consumer-protocol member left: type %s state %v", g.Type(), g.State)
	}
	wantCode(t, "a's heartbeat after the downgrade", h.heartbeat(a, ja.Generation), kerr.RebalanceInProgress)
	j1, j2 := h.joinMD(a, []string{"t"}, nil), h.joinMD(b, []string{"t"}, nil)
	r1, r2 := h.joined(j1), h.joined(j2)
	if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r1.Generation != r2.Generation || len(r1.Members)+len(r2.Members) != 2 {
		t.Fatalf("classic rejoin after the downgrade: %v %v", r1, r2)
	}
	// The reload sees the classic group.
	h3 := newConsumerHarness(t)
	for _, r := range h.records {
		if err := h3.c.Load(h3.now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if g3, _ := h3.c.Group("g"); g3.Type() != TypeClassic || len(g3.Members()) != 2 {
		t.Fatalf("reloaded after the downgrade: type %s, %d members", g3.Type(), len(g3.Members()))
	}
}

// c returns a heartbeat answer's member id.
func c(r *kmsg.ConsumerGroupHeartbeatResponse) string { return *r.MemberID }

// TestClassicMemberJoinsConsumerGroup: a new classic member may join a consumer group (KIP-394
// member id first); one whose protocols share nothing with the classic members is refused; a
// classic member leaving is removed; and LeaveGroup of a consumer-protocol member is refused.
func TestClassicMemberJoinsConsumerGroup(t *testing.T) {
	h := newConsumerHarness(t)
	rc := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	first := h.joined(h.joinMD("", []string{"t"}, nil))
	wantCode(t, "a new classic member's first join", first.ErrorCode, kerr.MemberIDRequired)
	j := h.joined(h.joinMD(first.MemberID, []string{"t"}, nil))
	g, _ := h.c.Group("g")
	if j.ErrorCode != 0 || g.Type() != TypeConsumer || len(g.consumer.members) != 2 {
		t.Fatalf("classic join to a consumer group: %v, %d members", kerr.ErrorForCode(j.ErrorCode), len(g.consumer.members))
	}
	// It holds nothing yet: c owns every partition until it revokes.
	code, got := h.syncAssignment(first.MemberID, j.Generation, nil)
	if code != 0 || len(got["t"]) != 0 {
		t.Fatalf("sync: %v %v", kerr.ErrorForCode(code), got)
	}
	// Its partitions are c's until c revokes them: it waits (a rejoin could take nothing).
	wantCode(t, "heartbeat while c holds its partitions", h.heartbeat(first.MemberID, j.Generation), nil)
	rc = h.hb("c", rc.MemberEpoch, nil, map[string][]int32{"t": {0, 1, 2, 3, 4, 5}}, "")
	rc = h.hb("c", rc.MemberEpoch, nil, map[string][]int32{"t": assigned(rc)["t"]}, "")
	wantCode(t, "heartbeat with partitions free to take", h.heartbeat(first.MemberID, j.Generation), kerr.RebalanceInProgress)
	j = h.joined(h.joinMD(first.MemberID, []string{"t"}, nil))
	if _, got = h.syncAssignment(first.MemberID, j.Generation, nil); len(got["t"]) != 3 {
		t.Fatalf("after c released: %v", got)
	}
	checkExclusive(t, g)

	// Protocols in common with the classic members are required.
	h.next++
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.ProtocolType, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 9, "g", "consumer", 10000, 30000
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{"t"}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin", Metadata: md.AppendTo(nil)}}
	req.MemberID = "x"
	h.apply(h.c.JoinGroup(h.now, h.next, req, "client", "/127.0.0.1"))
	wantCode(t, "a join sharing no protocol", h.joined(h.next).ErrorCode, kerr.InconsistentGroupProtocol)

	// LeaveGroup removes a consumer-protocol member too, as Kafka 4.1.1 does
	// (Admin.removeMembersFromConsumerGroup); an unknown member id is UNKNOWN_MEMBER_ID.
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Version, lreq.Group = 3, "g"
	lreq.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "c"}, {MemberID: first.MemberID}, {MemberID: "nobody"}}
	resp, out := h.c.LeaveGroup(h.now, lreq)
	h.apply(out)
	wantCode(t, "LeaveGroup of a consumer-protocol member", resp.Members[0].ErrorCode, nil)
	wantCode(t, "LeaveGroup of the classic member", resp.Members[1].ErrorCode, nil)
	wantCode(t, "LeaveGroup of an unknown member", resp.Members[2].ErrorCode, kerr.UnknownMemberID)
	if n := len(g.consumer.members); n != 0 {
		t.Fatalf("members after the leave: %d; want none", n)
	}
}

// TestMigrationPolicy: with the policy disabled a live classic group is not upgraded
// (GROUP_ID_NOT_FOUND, as Kafka), and classic members left alone in a consumer group keep it a
// consumer group; an unreadable subscription refuses the upgrade too.
func TestMigrationPolicy(t *testing.T) {
	h := newConsumerHarness(t)
	h.c.cfg.MigrationPolicy = MigrationDisabled
	classicGroupOnT(h)
	wantCode(t, "upgrade with the policy disabled", h.hb("c", 0, []string{"t"}, map[string][]int32{}, "").ErrorCode, kerr.GroupIDNotFound)
	h.c.cfg.MigrationPolicy = MigrationUpgrade
	rc := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	wantCode(t, "upgrade with the policy upgrade", rc.ErrorCode, nil)
	h.hb("c", -1, nil, nil, "")
	if g, _ := h.c.Group("g"); g.Type() != TypeConsumer {
		t.Fatalf("downgraded with the policy upgrade: %s", g.Type())
	}

	h2 := newConsumerHarness(t)
	stableGroup(h2) // metadata that is not the consumer protocol's
	wantCode(t, "upgrade of unreadable subscriptions", h2.hb("c", 0, []string{"t"}, map[string][]int32{}, "").ErrorCode, kerr.GroupIDNotFound)
}

// commit commits offset for t's partition p as member (OffsetCommit v8, as an older classic
// client sends it) and returns the partition's error code.
func (h *harness) commit(member string, gen int32, topic string, p int32, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 8, "g", member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = p, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, out := h.c.OffsetCommit(h.now, req)
	h.apply(out)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestClassicMemberMustRejoin: a classic member of a consumer group told to join again that
// keeps heartbeating without joining is removed after its rebalance timeout, as Kafka does;
// one that joins in time is not.
func TestClassicMemberMustRejoin(t *testing.T) {
	h := newConsumerHarness(t)
	a, b, gen := classicGroupOnT(h)
	h.hb("c", 0, []string{"t"}, map[string][]int32{}, "") // the upgrade
	g, _ := h.c.Group("g")
	wantCode(t, "a told to rejoin", h.heartbeat(a, gen), kerr.RebalanceInProgress)
	wantCode(t, "b told to rejoin", h.heartbeat(b, gen), kerr.RebalanceInProgress)
	jb := h.joined(h.joinMD(b, []string{"t"}, nil)) // b joins in time
	for range 7 {                                   // 35 s of heartbeats, past the 30 s rebalance timeout
		h.advance(5 * time.Second)
		h.heartbeat(a, gen)
		h.heartbeat(b, jb.Generation)
		h.hb("c", g.consumer.members["c"].epoch, nil, nil, "")
	}
	if _, ok := g.consumer.members[a]; ok {
		t.Fatal("a never rejoined and is still a member after its rebalance timeout")
	}
	if _, ok := g.consumer.members[b]; !ok {
		t.Fatal("b rejoined in time and was removed")
	}
}
