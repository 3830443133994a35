package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAdminRemovalOfLastConsumerMemberDowngrades: a classic group (a, b) is upgraded by a
// static consumer-protocol member s1, which takes its share of t once a and b (eager) release
// it. An admin then removes s1 by its instance id (LeaveGroup with no member id,
// Admin.removeMembersFromConsumerGroup). Only classic members are left, so the group becomes a
// classic group again and rebalances, as after s1's leave by heartbeat or its session expiry
// (Kafka's classicGroupLeaveToConsumerGroup fences through consumerGroupFenceMembers, which
// converts the group: validateOnlineDowngradeWithFencedMembers). a's heartbeat is answered
// REBALANCE_IN_PROGRESS, so a and b rejoin and s1's partitions are assigned again; a reload of
// the log sees the classic group too.
func TestAdminRemovalOfLastConsumerMemberDowngrades(t *testing.T) {
	h := newConsumerHarness(t)
	a, b, sParts := upgradedByStaticMember(h)
	g, _ := h.c.Group("g")
	genA, genB := g.consumer.members[a].epoch, g.consumer.members[b].epoch

	inst := "inst1"
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group, req.Members = 5, "g", []kmsg.LeaveGroupRequestMember{{InstanceID: &inst}}
	resp, out := h.c.LeaveGroup(h.now, req)
	h.apply(out)
	if code := resp.Members[0].ErrorCode; code != 0 {
		t.Fatalf("admin removal: %v", kerr.ErrorForCode(code))
	}
	g, _ = h.c.Group("g")
	if g.Type() != TypeClassic {
		ca, cb := h.heartbeat(a, genA), h.heartbeat(b, genB)
		held := map[int32]bool{}
		for _, m := range g.consumer.members {
			for _, p := range m.assigned["t"] {
				held[p] = true
			}
		}
		t.Fatalf("after the last consumer-protocol member was removed: type %s with %d members (all classic); a's and b's heartbeats: %v, %v; t partitions held: %v (s1 had %v); want a classic group again, rebalancing",
			g.Type(), len(g.consumer.members), kerr.ErrorForCode(ca), kerr.ErrorForCode(cb), held, sParts)
	}
	if g.State != PreparingRebalance {
		t.Fatalf("after the downgrade: state %v, want PreparingRebalance", g.State)
	}
	wantCode(t, "a's heartbeat after the downgrade", h.heartbeat(a, genA), kerr.RebalanceInProgress)
	h2 := newConsumerHarness(t)
	for _, r := range h.records {
		if err := h2.c.Load(h2.now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if g2, _ := h2.c.Group("g"); g2.Type() != TypeClassic || len(g2.Members()) != 2 {
		t.Fatalf("reloaded after the downgrade: type %s, %d members", g2.Type(), len(g2.Members()))
	}
}

// TestAdminRemovalBatchDowngradesOnce: an admin removes, in one LeaveGroup, the last
// consumer-protocol member s1 and classic member a. The batch is applied, then the group
// converted, as Kafka's consumerGroupFenceMembers does: a classic group of b alone, which is
// what its record holds for a reload.
func TestAdminRemovalBatchDowngradesOnce(t *testing.T) {
	h := newConsumerHarness(t)
	a, b, _ := upgradedByStaticMember(h)
	inst := "inst1"
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 5, "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: &inst}, {MemberID: a}}
	resp, out := h.c.LeaveGroup(h.now, req)
	h.apply(out)
	for i, m := range resp.Members {
		wantCode(t, fmt.Sprintf("removal %d", i), m.ErrorCode, nil)
	}
	g, _ := h.c.Group("g")
	if g.Type() != TypeClassic || len(g.members) != 1 || g.members[b] == nil {
		t.Fatalf("after the batch removal: type %s, %d classic members; want a classic group of b", g.Type(), len(g.members))
	}
	h2 := newConsumerHarness(t)
	h2.c = replayFull(t, h.records, h)
	if g2, _ := h2.c.Group("g"); g2.Type() != TypeClassic || len(g2.members) != 1 || g2.members[b] == nil {
		t.Fatalf("reloaded after the batch removal: type %s, %d members; want a classic group of b", g2.Type(), len(g2.members))
	}
}

// upgradedByStaticMember makes a classic group (a, b) that static consumer-protocol member s1
// (instance inst1) upgrades; s1 takes sParts of t once a and b (eager) release them.
func upgradedByStaticMember(h *harness) (a, b string, sParts []int32) {
	h.t.Helper()
	a, b, _ = classicGroupOnT(h)
	r := h.hbStatic("s1", "inst1", 0, []string{"t"}, map[string][]int32{})
	if r.ErrorCode != 0 {
		h.t.Fatalf("upgrade: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	ja := h.joined(h.joinMD(a, []string{"t"}, nil))
	h.syncAssignment(a, ja.Generation, nil)
	jb := h.joined(h.joinMD(b, []string{"t"}, nil))
	h.syncAssignment(b, jb.Generation, nil)
	r = h.hbStatic("s1", "inst1", r.MemberEpoch, nil, map[string][]int32{})
	if sParts = assigned(r)["t"]; len(sParts) == 0 {
		h.t.Fatalf("setup: s1 got nothing (%v)", kerr.ErrorForCode(r.ErrorCode))
	}
	return a, b, sParts
}
