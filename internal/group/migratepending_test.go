package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A brand-new group: a classic consumer's first JoinGroup (v4+, no member id) is answered
// MEMBER_ID_REQUIRED, which leaves only a pending member id; the group is still Empty (Kafka's
// ClassicGroup is in EMPTY, and ConsumerGroupHeartbeat replaces an empty classic group). A
// KIP-848 consumer joining within that session timeout got GROUP_ID_NOT_FOUND here, which the
// Java AsyncKafkaConsumer treats as fatal (HeartbeatRequestManager's default branch).
func TestConsumerJoinReplacesPendingOnlyClassicGroup(t *testing.T) {
	h := newConsumerHarness(t)
	first := h.joined(h.join("", ""))
	wantCode(t, "first JoinGroup", first.ErrorCode, kerr.MemberIDRequired)
	resp := h.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
	wantCode(t, "ConsumerGroupHeartbeat(join) of an Empty classic group with a pending member id", resp.ErrorCode, nil)
	if g := h.c.groups["g"]; len(g.pending) != 0 || g.State == PreparingRebalance || g.State == CompletingRebalance {
		t.Errorf("after the replacement: pending ids %v, state %v; want none of the classic group left", g.pending, g.State)
	}
}
