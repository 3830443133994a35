package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClassicMemberRejoinsAfterAnotherLeaves: in a consumer group mixing protocols, a classic
// member that heartbeats with an epoch below the group epoch is told REBALANCE_IN_PROGRESS, as
// Kafka's classicGroupHeartbeatToConsumerGroup does ("the group epoch is bumped so the member
// need to rejoin"), so its rejoin computes the new target. Runnel compared the member's epoch
// with the assignment epoch, which a leave does not move: after one classic member left, the
// other kept its half and the rest stayed unassigned until a consumer-protocol member
// heartbeated (up to its session timeout if that one had stalled).
func TestClassicMemberRejoinsAfterAnotherLeaves(t *testing.T) {
	h := newConsumerHarness(t)
	h.hb("c", 0, []string{"u"}, map[string][]int32{}, "")
	gens := map[string]int32{}
	var ids []string
	for range 2 {
		first := h.joined(h.joinMD("", []string{"t"}, nil))
		ids = append(ids, first.MemberID)
	}
	owned := map[string][]int32{}
	settle := func() {
		t.Helper()
		for round := 0; round < 10; round++ {
			quiet := true
			for _, id := range ids {
				if gen, ok := gens[id]; ok && h.heartbeat(id, gen) == 0 {
					continue
				}
				quiet = false
				j := h.joined(h.joinMD(id, []string{"t"}, map[string][]int32{"t": owned[id]}))
				if j.ErrorCode != 0 {
					t.Fatalf("rejoin of %s: %v", id, kerr.ErrorForCode(j.ErrorCode))
				}
				code, got := h.syncAssignment(id, j.Generation, nil)
				if code != 0 {
					t.Fatalf("sync of %s: %v", id, kerr.ErrorForCode(code))
				}
				gens[id], owned[id] = j.Generation, got["t"]
			}
			if quiet {
				return
			}
		}
		t.Fatalf("the classic members did not settle: %v", owned)
	}
	settle()
	if len(owned[ids[0]]) != 3 || len(owned[ids[1]]) != 3 {
		t.Fatalf("settled: %v; want 3 partitions each", owned)
	}

	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 3, "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[1]}}
	resp, out := h.c.LeaveGroup(h.now, req)
	h.apply(out)
	wantCode(t, "LeaveGroup", resp.Members[0].ErrorCode, nil)
	a := ids[0]
	wantCode(t, "the remaining classic member's heartbeat", h.heartbeat(a, gens[a]), kerr.RebalanceInProgress)
	ids = ids[:1]
	delete(gens, a)
	settle()
	if got := owned[a]; !slices.Equal(got, []int32{0, 1, 2, 3, 4, 5}) {
		t.Errorf("after the other left: %v; want every partition of t", got)
	}
}
