package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEmptyConsumerToClassicExpiresAsReplayed: a consumer group's member commits an offset
// and, three days later, leaves; a classic consumer's JoinGroup then turns the empty consumer
// group into a classic one (the consumer record's tombstone; no GroupMetadata record, as no
// rebalance completed). As in Kafka, which deletes the consumer group and creates a new classic
// group, the group has no protocol type until a member joins, so its offsets expire retention
// after their commit (day 7) — live, and after reloading the log in full or compacted (which
// keeps only the offset record and the consumer record's tombstone): a failover between days 7
// and 10 does not change whether the committed offset is there.
func TestEmptyConsumerToClassicExpiresAsReplayed(t *testing.T) {
	h := newConsumerHarness(t)
	r := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	if r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "g", "c", r.MemberEpoch
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42}}}}
	resp, out := h.c.OffsetCommit(h.now, req)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	h.apply(out)
	h.now = h.now.Add(3 * 24 * time.Hour) // (no Tick: c's session is not the point)
	if r := h.hb("c", -1, nil, nil, ""); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := h.joined(h.join("", "")); r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("classic join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	g, _ := h.c.Group("g")
	if g.Type() != TypeClassic {
		t.Fatalf("setup: type %s", g.Type())
	}
	replays := map[string]*Coordinator{"full": replayFull(t, h.records, h), "compacted": replayCompacted(t, h.records, h.now)}
	for name, c := range replays {
		g2, _ := c.Group("g")
		if g2 == nil {
			t.Fatalf("%s replay: no group", name)
		}
		if g2.ProtocolType != g.ProtocolType || g.ProtocolType != "" {
			t.Errorf("live: protocol type %q; %s replay: %q; want none (a new classic group)", g.ProtocolType, name, g2.ProtocolType)
		}
	}

	day8 := h.now.Add(5 * 24 * time.Hour) // 8 days after the commit, 5 after the group emptied
	h.c.ExpireOffsets(day8)
	_, liveKept := h.c.groups["g"].offsets[TopicPartition{"t", 0}]
	if liveKept {
		t.Errorf("on day 8: the live coordinator keeps t-0's offset, committed 8 days ago")
	}
	for name, c := range replays {
		c.ExpireOffsets(day8)
		var replayKept bool
		if g2 := c.groups["g"]; g2 != nil {
			_, replayKept = g2.offsets[TopicPartition{"t", 0}]
		}
		if liveKept != replayKept {
			t.Errorf("on day 8: live coordinator keeps t-0's offset: %v; after reloading the log (%s): %v", liveKept, name, replayKept)
		}
	}
}
