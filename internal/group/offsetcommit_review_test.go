package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An OffsetCommit with generation -1 comes from an admin client or a consumer outside group
// management, and Kafka takes it while the group has no member whatever member id it names
// (ClassicGroup, ConsumerGroup and StreamsGroup.validateOffsetCommit). Runnel took it only with
// an empty member id: a client naming its old member id after leaving got UNKNOWN_MEMBER_ID.
func TestGenerationMinusOneCommitToAnEmptyGroup(t *testing.T) {
	commit := func(h *harness, group, member string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 9, group, member, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}}}
		resp, out := h.c.OffsetCommit(h.now, req)
		h.apply(out)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// A consumer (KIP-848) group whose only member left.
	h := newConsumerHarness(t)
	r := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	if r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if code := commit(h, "g", "c"); code != kerr.UnknownMemberID.Code && code != kerr.StaleMemberEpoch.Code {
		t.Errorf("generation -1 commit to a group with a member: %v; want it refused", kerr.ErrorForCode(code))
	}
	if r := h.hb("c", -1, nil, nil, ""); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if code := commit(h, "g", "c"); code != 0 {
		t.Errorf("generation -1 commit naming member c to the empty consumer group: %v; want it taken, as Kafka", kerr.ErrorForCode(code))
	}
	// A group that does not exist yet: created, as Kafka's simple group.
	if code := commit(h, "fresh", "someone"); code != 0 {
		t.Errorf("generation -1 commit naming a member to a new group: %v; want it taken", kerr.ErrorForCode(code))
	}
}
