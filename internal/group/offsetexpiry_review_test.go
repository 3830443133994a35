package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka expires the offsets of an empty streams group offsets.retention.minutes after each
// offset's commit (StreamsGroup.offsetExpirationCondition: OffsetExpirationConditionImpl(o ->
// o.commitTimestampMs)), not after the group emptied (KIP-211's rule, for classic groups only).
// An operator resets the offsets of an application stopped six days ago; a day and a half
// later the reset offsets must still be there. Runnel deleted them, and the group with them.
func TestEmptyStreamsGroupOffsetsExpireByCommitTime(t *testing.T) {
	h := newStreamsHarness(t)
	for _, it := range []string{"app-regroup-repartition", "app-totals-changelog"} {
		h.topics[it] = TopicMeta{ID: [16]byte{8, byte(len(h.topics))}, Partitions: 4}
	}
	r := h.shb("m1", "p1", 0, nil)
	if r.ErrorCode != 0 {
		t.Fatalf("join: %d", r.ErrorCode)
	}
	h.shb("m1", "", -1, nil) // the application stops: the group is Empty from now on
	g, _ := h.c.Group("app")
	if g.State != Empty {
		t.Fatalf("state %v, want Empty", g.State)
	}
	h.now = h.now.Add(6 * 24 * time.Hour)
	// The operator resets the offsets (an admin commit: no member, generation -1).
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "app", "", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 42}}}}
	resp, out := h.c.OffsetCommit(h.now, req)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("admin commit: %d", code)
	}
	h.apply(out)
	h.now = h.now.Add(36 * time.Hour) // 7.5 days after the group emptied, 1.5 days after the commit
	h.apply(h.c.ExpireOffsets(h.now))
	g, ok := h.c.Group("app")
	if !ok {
		t.Fatalf("the group (with an offset committed 36h ago) was deleted by offset expiry")
	}
	if _, ok := g.offsets[TopicPartition{"in", 1}]; !ok {
		t.Fatalf("offset in-1 committed 36h ago expired (retention %v): expiry counted from when the group emptied, not from the commit", h.c.cfg.OffsetsRetention)
	}
}

// The same for a consumer (KIP-848) group: Kafka's ConsumerGroup.offsetExpirationCondition
// counts from each offset's commit, also while the group is empty.
func TestEmptyConsumerGroupOffsetsExpireByCommitTime(t *testing.T) {
	h := newConsumerHarness(t)
	r := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	if r.ErrorCode != 0 {
		t.Fatalf("join: %d", r.ErrorCode)
	}
	if r := h.hb("c", -1, nil, nil, ""); r.ErrorCode != 0 { // the consumer leaves: Empty
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	h.now = h.now.Add(6 * 24 * time.Hour)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "g", "", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42}}}}
	resp, out := h.c.OffsetCommit(h.now, req)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("admin commit: %d", code)
	}
	h.apply(out)
	h.now = h.now.Add(36 * time.Hour)
	h.apply(h.c.ExpireOffsets(h.now))
	g, ok := h.c.Group("g")
	if !ok {
		t.Fatalf("the group (with an offset committed 36h ago) was deleted by offset expiry")
	}
	if _, ok := g.offsets[TopicPartition{"t", 0}]; !ok {
		t.Fatalf("offset t-0 committed 36h ago expired: expiry counted from when the group emptied, not from the commit")
	}
	h.now = h.now.Add(6 * 24 * time.Hour) // 7.5 days after the commit: gone
	h.apply(h.c.ExpireOffsets(h.now))
	if g, ok := h.c.Group("g"); ok {
		if _, ok := g.offsets[TopicPartition{"t", 0}]; ok {
			t.Errorf("offset t-0 committed 7.5 days ago is still there")
		}
	}
}
