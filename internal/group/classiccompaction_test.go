package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// replayCompacted loads into a new coordinator what a compacted __consumer_offsets keeps of
// records: each key's newest record (tombstones included), in log order.
func replayCompacted(t *testing.T, records []Record, now time.Time) *Coordinator {
	t.Helper()
	last := map[string]int{}
	for i, r := range records {
		last[string(r.Key)] = i
	}
	c := New(DefaultConfig())
	c.Topics = func() map[string]TopicMeta { return testTopics }
	for i, r := range records {
		if last[string(r.Key)] != i {
			continue
		}
		if err := c.Load(now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestClassicRecordGoneAfterUpgrade: a classic group (members a, b, an offset committed) is
// upgraded online to a consumer group; its members all go, and a classic JoinGroup then turns
// the empty consumer group back into an (empty) classic one. As Kafka's conversion
// (convertToConsumerGroup), the upgrade tombstones the classic GroupMetadata record: without
// it, a compacted log kept the classic record of a and b, followed only by the consumer
// record's tombstone, and a reload brought a and b back as a Stable classic group. The
// tombstone must not take the group's offsets with it, on a full replay or a compacted one.
func TestClassicRecordGoneAfterUpgrade(t *testing.T) {
	h := newConsumerHarness(t)
	a, _, gen := classicGroupOnT(h) // classic a and b: their GroupMetadata record is in the log
	if code := h.commit(a, gen, "t", 0, 42); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	rc := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	if rc.ErrorCode != 0 {
		t.Fatalf("upgrade: %v", kerr.ErrorForCode(rc.ErrorCode))
	}
	// a and b stop heartbeating: their classic sessions (10 s) expire; c stays, then leaves.
	for range 3 {
		h.advance(4 * time.Second)
		rc = h.hb("c", rc.MemberEpoch, nil, nil, "")
	}
	if r := h.hb("c", rc.MemberEpoch, nil, nil, ""); r.ErrorCode != 0 {
		t.Fatalf("c's heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := h.hb("c", -1, nil, nil, ""); r.ErrorCode != 0 {
		t.Fatalf("c's leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	g, _ := h.c.Group("g")
	if g.Type() != TypeConsumer || g.memberCount() != 0 {
		t.Fatalf("setup: type %s with %d members; want an empty consumer group", g.Type(), g.memberCount())
	}
	// A classic consumer asks to join: the empty consumer group becomes a classic group.
	if r := h.joined(h.join("", "")); r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("classic join: %v; want MEMBER_ID_REQUIRED", kerr.ErrorForCode(r.ErrorCode))
	}
	g, _ = h.c.Group("g")
	if g.Type() != TypeClassic || len(g.Members()) != 0 || g.State != Empty {
		t.Fatalf("live: type %s, %d members, %v; want an empty classic group", g.Type(), len(g.Members()), g.State)
	}
	full := New(DefaultConfig())
	for _, r := range h.records {
		if err := full.Load(h.now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	c2 := replayCompacted(t, h.records, h.now)
	for name, c := range map[string]*Coordinator{"the whole log": full, "the compacted log": c2} {
		g2, _ := c.Group("g")
		if g2 == nil {
			t.Fatalf("reloaded from %s: no group; want an empty group with its offset", name)
		}
		var ids []string
		for _, m := range g2.Members() {
			ids = append(ids, m.ID)
		}
		if len(ids) != 0 || g2.State != Empty {
			t.Fatalf("reloaded from %s: members %v, state %v; want the live empty group", name, ids, g2.State)
		}
		if o, ok := g2.offsets[TopicPartition{"t", 0}]; !ok || o.Offset != 42 {
			t.Fatalf("reloaded from %s: offset of t/0 %+v (%v); want 42", name, o, ok)
		}
	}
}
