package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A static member's rolling upgrade (or downgrade) between the classic and the consumer
// protocol: the new process joins with the instance id of the old one, which sends no leave.
// Kafka's getOrMaybeSubscribeStaticConsumerGroupMember checks that the instance id was released
// (epoch -2) only when both members use the consumer protocol; otherwise the old member is
// replaced. Runnel used to answer UNRELEASED_INSTANCE_ID in all three cases below.

// joinMDStatic is joinMD for a static member (group.instance.id).
func (h *harness) joinMDStatic(memberID, instance string, topics []string) RequestID {
	h.next++
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 1, topics
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID, req.ProtocolType = 9, "g", memberID, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 30000
	req.InstanceID = &instance
	meta := md.AppendTo(nil)
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}, {Name: "cooperative-sticky", Metadata: meta}}
	h.apply(h.c.JoinGroup(h.now, h.next, req, "client", "/127.0.0.1"))
	return h.next
}

// staticClassicGroup makes a classic group whose only member is static (instance "i1") and owns
// t 0-5; it returns the member id.
func staticClassicGroup(h *harness) string {
	h.t.Helper()
	j := h.joinMDStatic("", "i1", []string{"t"})
	h.advance(3 * time.Second)
	r := h.joined(j)
	if r.ErrorCode != 0 {
		h.t.Fatalf("static classic join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if code, _ := h.syncAssignment(r.MemberID, r.Generation, map[string][]byte{
		r.MemberID: classicAssignment(map[string][]int32{"t": {0, 1, 2, 3, 4, 5}})}); code != 0 {
		h.t.Fatalf("static classic sync: %v", kerr.ErrorForCode(code))
	}
	return r.MemberID
}

// TestConsumerMemberReplacesClassicStaticMemberOnUpgrade: the classic group is upgraded and its
// static member replaced, the new member taking its partitions without a group epoch bump.
func TestConsumerMemberReplacesClassicStaticMemberOnUpgrade(t *testing.T) {
	h := newConsumerHarness(t)
	old := staticClassicGroup(h)
	r := h.hbStatic("new1", "i1", 0, []string{"t"}, map[string][]int32{})
	if r.ErrorCode != 0 {
		t.Fatalf("consumer-protocol member with the classic static member's instance id: %v; want it to replace the classic member", kerr.ErrorForCode(r.ErrorCode))
	}
	g, _ := h.c.Group("g")
	if g.Type() != TypeConsumer || g.consumer.members[old] != nil || g.consumer.members["new1"] == nil || g.consumer.members["new1"].classic != nil {
		t.Fatalf("after the replacement: type %s, members %v; want a consumer group of new1 (consumer protocol) alone", g.Type(), g.consumer.members)
	}
	if got := assigned(r)["t"]; len(got) != 6 || g.consumer.epoch != 1 {
		t.Errorf("new1's assignment %v, group epoch %d; want t 0-5 and the classic generation (1)", got, g.consumer.epoch)
	}
}

// TestConsumerMemberReplacesClassicStaticMemberInConsumerGroup: the same once the group is a
// consumer group already (a dynamic member upgraded it first).
func TestConsumerMemberReplacesClassicStaticMemberInConsumerGroup(t *testing.T) {
	h := newConsumerHarness(t)
	old := staticClassicGroup(h)
	if r := h.hb("other", 0, []string{"t"}, map[string][]int32{}, ""); r.ErrorCode != 0 {
		t.Fatalf("setup: upgrade by a dynamic member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if g, _ := h.c.Group("g"); g.consumer == nil || g.consumer.members[old] == nil || g.consumer.members[old].classic == nil {
		t.Fatalf("setup: the classic static member is not in the consumer group")
	}
	r := h.hbStatic("new1", "i1", 0, []string{"t"}, map[string][]int32{})
	wantCode(t, "consumer-protocol member taking over a classic static member's instance id", r.ErrorCode, nil)
	if cs := h.c.groups["g"].consumer; cs.members[old] != nil || cs.members["new1"] == nil || cs.members["new1"].classic != nil || cs.staticMember("i1") != cs.members["new1"] {
		t.Errorf("after the replacement: members %v; want new1 (consumer protocol) holding i1, %s gone", cs.members, old)
	}
}

// TestClassicMemberReplacesConsumerStaticMember: the rolling downgrade. The classic member
// replaces the consumer-protocol one, and as that was the group's last consumer-protocol member
// the group becomes classic again (Kafka's validateOnlineDowngradeWithReplacedMember).
func TestClassicMemberReplacesConsumerStaticMember(t *testing.T) {
	h := newConsumerHarness(t)
	if r := h.hbStatic("c1", "i1", 0, []string{"t"}, map[string][]int32{}); r.ErrorCode != 0 {
		t.Fatalf("setup: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	j := h.joined(h.joinMDStatic("", "i1", []string{"t"}))
	if j.ErrorCode != 0 {
		t.Fatalf("classic static member taking over instance i1 from consumer-protocol member c1: %v; want it to replace c1", kerr.ErrorForCode(j.ErrorCode))
	}
	g, _ := h.c.Group("g")
	if g.Type() != TypeClassic || g.static["i1"] != j.MemberID || g.members["c1"] != nil {
		t.Errorf("after the replacement: type %s, i1 held by %q; want a classic group again with i1 held by %s", g.Type(), g.static["i1"], j.MemberID)
	}
}
