package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRegexResolutionSurvivesReload: Kafka persists each regex's resolution (the
// ConsumerGroupRegularExpression records, filtered by the subscribing member's DESCRIBE
// rights), so a coordinator that takes the group over resolves nothing anew. Runnel used to keep
// the filter in memory only: after a reload, another member's heartbeat resolved m1's regex to
// every matching topic, bumped the group epoch and assigned m1 a topic it may not describe.
func TestRegexResolutionSurvivesReload(t *testing.T) {
	h := newHarness(t)
	topics := map[string]TopicMeta{"orders": {ID: [16]byte{1}, Partitions: 2}, "orders_secret": {ID: [16]byte{2}, Partitions: 2}}
	h.c.Topics = func() map[string]TopicMeta { return topics }
	onlyOrders := func(topic string) bool { return topic == "orders" }
	hb := func(c *Coordinator, member string, epoch int32, regex *string, names []string, filter TopicFilter) {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = 1, "g", member, epoch, 30000
		req.SubscribedTopicRegex, req.SubscribedTopicNames = regex, names
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, out := c.ConsumerGroupHeartbeatAs(h.now, req, "c", "/h", filter)
		if c == h.c {
			h.apply(out)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s: %v", member, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	re := "orders.*"
	hb(h.c, "m1", 0, &re, []string{}, onlyOrders) // resolves to orders alone
	hb(h.c, "m2", 0, nil, []string{"orders"}, nil)
	before := h.c.groups["g"].consumer.epoch

	c2 := New(DefaultConfig())
	c2.Topics = h.c.Topics
	for _, r := range h.records {
		if err := c2.Load(h.now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	// m2 heartbeats first on the new coordinator (m1's principal has not been seen there yet).
	hb(c2, "m2", before, nil, nil, nil)
	cs := c2.groups["g"].consumer
	if cs.epoch != before || len(cs.target["m1"]["orders_secret"]) != 0 {
		t.Errorf("after a reload, m2's heartbeat: group epoch %d (was %d), m1's target %v; want the epoch unchanged and no orders_secret for m1",
			cs.epoch, before, cs.target["m1"])
	}
	// m1's own heartbeat brings its principal's filter back: nothing changes either.
	hb(c2, "m1", cs.members["m1"].epoch, nil, nil, onlyOrders)
	if cs.epoch != before {
		t.Errorf("after m1's heartbeat on the new coordinator: group epoch %d; want %d", cs.epoch, before)
	}
}

// TestConsumerRecordVersions: a group without a regex is written as value version 1 (what a
// Runnel that predates regex resolutions reads); one with a regex as version 2; and a version 1
// record of a regex member, written before resolutions were kept, still loads, its regex
// matching every topic until the member heartbeats.
func TestConsumerRecordVersions(t *testing.T) {
	h := newConsumerHarness(t)
	h.hb("m1", 0, []string{"t"}, map[string][]int32{}, "")
	last := h.records[len(h.records)-1]
	if v := int16(last.Value[0])<<8 | int16(last.Value[1]); v != 1 {
		t.Errorf("a group without a regex: value version %d; want 1", v)
	}
	req := rawHB("m2", 0)
	req.SubscribedTopicRegex, req.Topics, req.RebalanceTimeoutMillis = kmsg.StringPtr("u"), ownedTopics(nil), 30000
	h.send(req)
	last = h.records[len(h.records)-1]
	if v := int16(last.Value[0])<<8 | int16(last.Value[1]); v != 2 {
		t.Errorf("a group with a regex: value version %d; want 2", v)
	}

	// Version 1, one member m1 subscribed to regex "u", nothing assigned, no targets.
	b := kbin.AppendInt16(nil, 1)
	b = kbin.AppendInt32(b, 1) // epoch
	b = kbin.AppendInt32(b, 1) // assignment epoch
	b = kbin.AppendString(b, "")
	b = kbin.AppendInt64(b, h.now.UnixMilli())
	b = kbin.AppendInt32(b, 1) // members
	for _, s := range []string{"m1", "", "client", "/h", ""} {
		b = kbin.AppendString(b, s)
	}
	b = kbin.AppendInt32(b, 1)     // epoch
	b = kbin.AppendInt32(b, 0)     // previous epoch
	b = kbin.AppendInt32(b, 30000) // rebalance timeout
	b = kbin.AppendInt32(b, 0)     // topics
	b = kbin.AppendString(b, "u")  // regex
	b = kbin.AppendString(b, "")   // assignor
	b = kbin.AppendInt32(b, 0)     // assigned
	b = kbin.AppendInt32(b, 0)     // revoking
	b = kbin.AppendInt8(b, 0)      // not classic
	b = kbin.AppendInt32(b, 0)     // targets
	c2 := New(DefaultConfig())
	c2.Topics = func() map[string]TopicMeta { return testTopics }
	if err := c2.Load(h.now, consumerKey("g"), b); err != nil {
		t.Fatalf("loading a version 1 record: %v", err)
	}
	m := c2.groups["g"].consumer.members["m1"]
	if m == nil || m.regex == nil || m.canDescribe != nil || !m.subscribes("u") {
		t.Errorf("member loaded from a version 1 record: %+v; want m1 subscribed to u by its regex", m)
	}
}
