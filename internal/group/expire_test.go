package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitAt commits offset 5 of partition 0 of each topic as member at generation (or member
// epoch).
func commitAt(t *testing.T, h *harness, member string, generation int32, topics ...string) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "g", member, generation
	for _, topic := range topics {
		req.Topics = append(req.Topics, kmsg.OffsetCommitRequestTopic{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}})
	}
	resp, out := h.c.OffsetCommit(h.now, req)
	h.apply(out)
	for _, rt := range resp.Topics {
		wantCode(t, "OffsetCommit "+rt.Topic, rt.Partitions[0].ErrorCode, nil)
	}
}

// committedTopics lists the topics the group holds offsets of.
func committedTopics(h *harness) map[string]bool {
	out := map[string]bool{}
	if g, ok := h.c.Group("g"); ok {
		for tp := range g.offsets {
			out[tp.Topic] = true
		}
	}
	return out
}

// TestUnsubscribedTopicOffsetsExpire: KIP-496. In a live group, the offsets of a topic no member
// subscribes to any more expire offsets.retention.minutes after their commit; the subscribed
// topics' stay. A classic group whose members' metadata cannot be read keeps every offset.
func TestUnsubscribedTopicOffsetsExpire(t *testing.T) {
	const retention = 7 * 24 * time.Hour
	expireAfter := func(h *harness, d time.Duration) {
		h.now = h.now.Add(d) // no Tick: the members' sessions are not the point here
		h.apply(h.c.ExpireOffsets(h.now))
	}

	t.Run("classic", func(t *testing.T) {
		h := newHarness(t)
		md := kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}
		joinWith := func(member string) *kmsg.JoinGroupResponse {
			h.next++
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version, req.Group, req.MemberID, req.ProtocolType = 9, "g", member, "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 30000
			req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md.AppendTo(nil)}}
			id := h.next
			h.apply(h.c.JoinGroup(h.now, id, req, "client", "/127.0.0.1"))
			if h.pending(id) {
				h.advance(3 * time.Second) // the initial rebalance delay
			}
			return h.joined(id)
		}
		member := joinWith("").MemberID
		if r := joinWith(member); r.ErrorCode != 0 || r.Generation != 1 {
			t.Fatalf("join: %v generation %d", kerr.ErrorForCode(r.ErrorCode), r.Generation)
		}
		h.sync(member, 1, map[string]string{member: "A"})
		if h.state() != Stable {
			t.Fatalf("state %v; want Stable", h.state())
		}
		commitAt(t, h, member, 1, "t", "old")
		expireAfter(h, retention-time.Second)
		if got := committedTopics(h); !got["t"] || !got["old"] {
			t.Fatalf("before the retention: offsets of %v; want t and old", got)
		}
		expireAfter(h, time.Second)
		if got := committedTopics(h); !got["t"] || got["old"] || h.state() != Stable {
			t.Fatalf("after the retention: offsets of %v, state %v; want only t's, Stable", got, h.state())
		}
	})

	t.Run("classic, metadata not readable", func(t *testing.T) {
		h := newHarness(t)
		a, _ := stableGroup(h) // members' metadata "md-range": not the consumer protocol's
		commitAt(t, h, a, 1, "old")
		expireAfter(h, retention+time.Hour)
		if got := committedTopics(h); !got["old"] {
			t.Fatalf("offsets of %v; want old's kept: the members' subscriptions are unknown", got)
		}
	})

	t.Run("consumer", func(t *testing.T) {
		h := newConsumerHarness(t)
		r := h.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
		commitAt(t, h, "m1", r.MemberEpoch, "t", "u")
		expireAfter(h, retention-time.Second)
		if got := committedTopics(h); !got["t"] || !got["u"] {
			t.Fatalf("before the retention: offsets of %v; want t and u", got)
		}
		expireAfter(h, time.Second)
		if got := committedTopics(h); !got["t"] || got["u"] {
			t.Fatalf("after the retention: offsets of %v; want only t's", got)
		}
	})
}
