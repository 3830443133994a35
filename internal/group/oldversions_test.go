package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit v2-v4 carry retention_time_ms. Kafka (OffsetMetadataManager.commitOffset:
// expireTimestampMs(request.retentionTimeMs(), currentTimeMs)) stores an explicit expire
// timestamp when it is not -1, and OffsetExpirationConditionImpl.isOffsetExpired then expires
// the offset at that timestamp ("older versions with explicit expire_timestamp field => old
// expiration semantics is used"), whatever offsets.retention.minutes says.
func TestOffsetCommitV2RetentionTimeHonoured(t *testing.T) {
	h := newHarness(t)
	commit := func(retention int64) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 2, "standalone", "", -1
		req.RetentionTimeMillis = retention
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42}}}}
		resp, out := h.c.OffsetCommit(h.now, req)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit: error %d", code)
		}
		h.apply(out)
	}

	// A one-hour retention: gone two hours later (Kafka), though offsets.retention.minutes is 7 days.
	commit(int64(time.Hour / time.Millisecond))
	h.now = h.now.Add(2 * time.Hour)
	h.apply(h.c.ExpireOffsets(h.now))
	if g, ok := h.c.Group("standalone"); ok {
		if _, ok := g.offsets[TopicPartition{"t", 0}]; ok {
			t.Errorf("OffsetCommit v2 with retention_time_ms=1h: offset still stored 2h later; Kafka expires it at commit time + retention")
		}
	}

	// A 30-day retention: still there 8 days later (Kafka), past the 7-day default.
	commit(int64(30 * 24 * time.Hour / time.Millisecond))
	h.now = h.now.Add(8 * 24 * time.Hour)
	h.apply(h.c.ExpireOffsets(h.now))
	g, ok := h.c.Group("standalone")
	if !ok {
		t.Fatalf("OffsetCommit v2 with retention_time_ms=30d: group deleted 8 days later; Kafka keeps the offset until commit time + 30d")
	}
	if _, ok := g.offsets[TopicPartition{"t", 0}]; !ok {
		t.Errorf("OffsetCommit v2 with retention_time_ms=30d: offset expired 8 days later; Kafka keeps it until commit time + 30d")
	}
	// The expiry is in the record (OffsetCommitValue v1): a coordinator that reloads the log
	// keeps it.
	want := g.offsets[TopicPartition{"t", 0}].ExpireTime
	c := replayFull(t, h.records, h)
	if g2, ok := c.Group("standalone"); !ok || g2.offsets[TopicPartition{"t", 0}].ExpireTime != want || want == 0 {
		t.Errorf("after reloading the log: expire time %+v; want %d", g2, want)
	}
}

// Kafka accepts the empty group id in OffsetCommit and OffsetFetch (GroupCoordinatorService:
// "For backwards compatibility, we support offset commits for the empty groupId", only a null
// id is INVALID_GROUP_ID; getOrMaybeCreateClassicGroup creates the simple group ""). Old
// clients that manage offsets themselves (no group management) commit under "".
func TestOffsetCommitFetchEmptyGroupID(t *testing.T) {
	h := newHarness(t)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 2, "", "", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	resp, out := h.c.OffsetCommit(h.now, req)
	h.apply(out)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Errorf("OffsetCommit v2 for group \"\": error %d; Kafka accepts the empty group id (only null is INVALID_GROUP_ID)", code)
	}
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version, f.Group = 2, ""
	f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	fr := h.c.OffsetFetch(f)
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].Offset != 5 {
		t.Errorf("OffsetFetch v2 for group \"\": %+v; want offset 5", fr)
	}
}

// OffsetFetch v0-v1 have no top-level error code: Kafka puts a group-level error in every
// partition asked for (OffsetFetchRequest.getErrorResponse / OffsetFetchResponse.groupError for
// version < 2). Runnel set the (unencoded) top-level code and answered no partitions at all, so
// a v1 client saw an empty, error-free answer.
func TestOffsetFetchV1GroupErrorIsPerPartition(t *testing.T) {
	h := newHarness(t)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 1, ""
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	resp := h.c.OffsetFetch(req)
	n := 0
	for _, rt := range resp.Topics {
		n += len(rt.Partitions)
	}
	if n != 2 {
		t.Errorf("OffsetFetch v1 (group-level error %d, not encoded below v2): %d partitions answered; want the 2 asked for, as Kafka answers every partition (with the error, or offset -1)", resp.ErrorCode, n)
	}
}

// A share group's id has no offsets, at v1 too: Kafka's OffsetMetadataManager.fetchOffsets
// takes ShareGroup.validateOffsetFetch's GroupIdNotFoundException as an unknown group (-1 for
// every partition asked, no error), as Kafka 4.1.1 answers.
func TestOffsetFetchV1ShareGroupHasNoOffsets(t *testing.T) {
	h := newConsumerHarness(t)
	if r := h.shb("m1", 0, []string{"t"}); r.ErrorCode != 0 {
		t.Fatalf("share heartbeat: %d", r.ErrorCode)
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 1, "s"
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	resp := h.c.OffsetFetch(req)
	var got []string
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			got = append(got, fmt.Sprintf("%d/%d", p.Offset, p.ErrorCode))
		}
	}
	if len(got) != 1 || got[0] != "-1/0" || resp.ErrorCode != 0 {
		t.Errorf("OffsetFetch v1 of share group \"s\": partitions (offset/error) %v, top-level %d; want [-1/0] and no error", got, resp.ErrorCode)
	}
}
