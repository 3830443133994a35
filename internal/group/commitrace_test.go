package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStandaloneCommitTopicAppearsMidCommit: OffsetCommit (generation -1) to a group that does
// not exist asks PartitionExists twice for the same partition: once in simpleGroupFor (whether
// to create the group) and again in partitionCommit. The broker's PartitionExists reads the live
// topic registry, which the reconciler updates concurrently, so a topic created between the two
// reads made simpleGroupFor create no group and partitionCommit accept the partition;
// OffsetCommit then wrote the offset into a nil group and the node crashed. The group is now
// created with the first partition taken.
func TestStandaloneCommitTopicAppearsMidCommit(t *testing.T) {
	h := newHarness(t)
	calls := 0
	h.c.PartitionExists = func(topic string, p int32) bool {
		calls++
		return calls > 1 // the topic is created between the first and the second look-up
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 9, "fresh", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "new", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("OffsetCommit(gen -1, group absent, topic created mid-call) panicked: %v", r)
		}
	}()
	resp, out := h.c.OffsetCommit(h.now, req)
	h.apply(out)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit answered %d; want 0 (the partition exists by then)", code)
	}
	if g := h.c.groups["fresh"]; g == nil || g.offsets[TopicPartition{"new", 0}].Offset != 1 {
		t.Errorf("group fresh after the commit: %v; want it holding offset 1 of new/0", g)
	}
}
