package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Member and commit checks compared with Apache Kafka 4.1.1's answers to the same requests.

// commitV9 sends an OffsetCommit v9 of offset 1 for topic's partition 0 and returns its code.
func (h *harness) commitV9(group, member string, generation int32, instance *string, topic string) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation, req.InstanceID = 9, group, member, generation, instance
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	resp, out := h.c.OffsetCommit(h.now, req)
	h.apply(out)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestInstanceIDOfNoStaticMember: a dynamic member that names a group.instance.id in Heartbeat
// or OffsetCommit gets UNKNOWN_MEMBER_ID, as Kafka's ClassicGroup.validateMember (it looks the
// instance id up first, and no static member has it). The instance id used to be ignored, the
// heartbeat taken and the commit stored.
func TestInstanceIDOfNoStaticMember(t *testing.T) {
	h := newHarness(t)
	leader, _ := stableGroup(h)
	other := "inst-x"
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = 4, "g", leader, 1, &other
	wantCode(t, "Heartbeat(dynamic member, instance id inst-x)", h.c.Heartbeat(h.now, hb).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "OffsetCommit(dynamic member, instance id inst-x)", h.commitV9("g", leader, 1, &other, "t"), kerr.UnknownMemberID)
	wantCode(t, "Heartbeat(dynamic member)", h.heartbeat(leader, 1), nil)
	wantCode(t, "OffsetCommit(dynamic member)", h.commitV9("g", leader, 1, nil, "t"), nil)
}

// TestFailedStandaloneCommitCreatesNoGroup: a commit with generation -1 (an admin client, a
// consumer outside group management) to a group that does not exist creates it only if a
// partition it names exists: Kafka's broker answers the others UNKNOWN_TOPIC_OR_PARTITION
// without the coordinator, so a commit that fails for every partition leaves no group to list.
// One used to be created, Empty, for OffsetCommit; TxnOffsetCommit, which Kafka lets create
// the group as OffsetCommit does, created none.
func TestFailedStandaloneCommitCreatesNoGroup(t *testing.T) {
	h := newHarness(t)
	h.c.PartitionExists = func(topic string, p int32) bool { return topic == "t" && p == 0 }
	wantCode(t, "OffsetCommit(unknown topic)", h.commitV9("phantom", "", -1, nil, "nosuch"), kerr.UnknownTopicOrPartition)
	toc := func(group, topic string) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = 3, group, 7, 0, -1
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
		resp, _, _ := h.c.TxnOffsetCommit(h.now, req)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "TxnOffsetCommit(unknown topic)", toc("txn-phantom", "nosuch"), kerr.UnknownTopicOrPartition)
	for _, id := range []string{"phantom", "txn-phantom"} {
		if g, ok := h.c.Group(id); ok {
			t.Errorf("group %s exists (state %s) after its only commit failed; Kafka creates none", id, g.State)
		}
	}
	wantCode(t, "OffsetCommit(t/0)", h.commitV9("simple", "", -1, nil, "t"), nil)
	wantCode(t, "TxnOffsetCommit(t/0)", toc("txn-simple", "t"), nil)
	for _, id := range []string{"simple", "txn-simple"} {
		if _, ok := h.c.Group(id); !ok {
			t.Errorf("no group %s after a commit to it; want an Empty one, as Kafka's simple group", id)
		}
	}
}

// TestTxnOffsetCommitUnknownMember: a TxnOffsetCommit naming a member and a generation, to a
// group without members that a transactional commit without a generation created, is
// UNKNOWN_MEMBER_ID: Kafka's validateTransactionalOffsetCommit creates the group on that first
// commit, and ClassicGroup.validateOffsetCommit checks the member before the generation. The
// group was not created, and the second commit got ILLEGAL_GENERATION (the answer for a group
// that does not exist).
func TestTxnOffsetCommitUnknownMember(t *testing.T) {
	h := newHarness(t)
	txnCommit(t, h.c, h.now, 7, 0, 5)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.Group, req.ProducerID, req.ProducerEpoch, req.MemberID, req.Generation = 3, "g", 7, 0, "ghost", 3
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 6, LeaderEpoch: -1}}}}
	resp, _, _ := h.c.TxnOffsetCommit(h.now, req)
	wantCode(t, "TxnOffsetCommit v3(member ghost, generation 3, group without members)", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnknownMemberID)
}

// TestConsumerCommitWithJoinEpoch: a consumer-protocol member that joined (epoch 0) and was
// given its partitions at epoch 1 commits with epoch 0: STALE_MEMBER_EPOCH. Kafka 4.1 takes the
// member's current epoch only (ConsumerGroup.validateOffsetCommit); Kafka 4.3 (KIP-1251) takes
// an older epoch only for partitions assigned at it or before, and at epoch 0 the member held
// none. Runnel takes the previous epoch for partitions still assigned, and used to take epoch 0
// so, since it is the previous one.
func TestConsumerCommitWithJoinEpoch(t *testing.T) {
	h := newConsumerHarness(t)
	r := h.hb("m", 0, []string{"t"}, map[string][]int32{}, "")
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || len(assigned(r)["t"]) != 6 {
		t.Fatalf("join = %v, epoch %d, assigned %v; want NONE, epoch 1, all of t", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, assigned(r))
	}
	wantCode(t, "OffsetCommit v9(epoch 0, member at epoch 1)", h.commitV9("g", "m", 0, nil, "t"), kerr.StaleMemberEpoch)
	wantCode(t, "OffsetCommit v9(epoch 1)", h.commitV9("g", "m", 1, nil, "t"), nil)
}
