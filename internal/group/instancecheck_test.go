package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKnownMemberWithAnotherInstanceID: a member id the group knows, sent with an instance id,
// is checked as Kafka's validateExistingMember (classic groups) and validateConsumerGroupMember
// (classic members of a consumer group) check it: an instance id no static member holds is
// UNKNOWN_MEMBER_ID, another member's is FENCED_INSTANCE_ID, and without an instance id a
// static member is found by its member id. Runnel answered FENCED_INSTANCE_ID to the first and
// the last (fatal to a Java consumer), and let a classic member of a consumer group join with
// an instance id nobody held, then fenced its SyncGroup and every Heartbeat.
func TestKnownMemberWithAnotherInstanceID(t *testing.T) {
	t.Run("classic group", func(t *testing.T) {
		h := newHarness(t)
		dyn, follower := stableGroup(h)
		gen := h.joined(h.join(follower, "")).Generation // a follower's rejoin: nothing changed
		r := h.joined(h.join(dyn, "new-instance"))
		wantCode(t, "JoinGroup(dynamic member, unheld instance id)", r.ErrorCode, kerr.UnknownMemberID)
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version, req.Group, req.MemberID, req.Generation, req.InstanceID = 5, "g", dyn, gen, kmsg.StringPtr("new-instance")
		h.next++
		h.apply(h.c.SyncGroup(h.now, h.next, req))
		wantCode(t, "SyncGroup(dynamic member, unheld instance id)", h.replies[h.next].(*kmsg.SyncGroupResponse).ErrorCode, kerr.UnknownMemberID)

		// A static member joining again with its member id and no instance id is accepted.
		h2 := newHarness(t)
		first := h2.join("", "static-1")
		h2.advance(3 * time.Second)
		st := h2.joined(first)
		if st.ErrorCode != 0 {
			t.Fatalf("static join = %v", kerr.ErrorForCode(st.ErrorCode))
		}
		again := h2.join(st.MemberID, "")
		if h2.pending(again) {
			h2.advance(time.Second)
		}
		wantCode(t, "JoinGroup(static member's id, no instance id)", h2.joined(again).ErrorCode, nil)
	})

	t.Run("classic member of a consumer group", func(t *testing.T) {
		h := newConsumerHarness(t)
		h.hb("cm", 0, []string{"t"}, map[string][]int32{}, "")
		first := h.joined(h.joinMD("", []string{"t"}, nil)) // a classic member joins the consumer group
		id := first.MemberID
		r := h.joined(h.joinMD(id, []string{"t"}, nil))
		if g, _ := h.c.Group("g"); r.ErrorCode != 0 || g.Type() != TypeConsumer {
			t.Fatalf("classic join = %v", kerr.ErrorForCode(r.ErrorCode))
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = 4, "g", id, r.Generation, kmsg.StringPtr("nobody")
		wantCode(t, "Heartbeat(classic member, unheld instance id)", h.c.Heartbeat(h.now, hb).ErrorCode, kerr.UnknownMemberID)
		h.next++
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID, req.ProtocolType, req.InstanceID = 9, "g", id, "consumer", kmsg.StringPtr("nobody")
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 30000
		md := kmsg.NewConsumerMemberMetadata()
		md.Version, md.Topics = 1, []string{"t"}
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md.AppendTo(nil)}}
		h.apply(h.c.JoinGroup(h.now, h.next, req, "client", "/127.0.0.1"))
		wantCode(t, "JoinGroup(classic member, unheld instance id)", h.joined(h.next).ErrorCode, kerr.UnknownMemberID)
	})
}

// TestDeleteGroupWithOnlyAPendingMember: an Empty classic group whose only member was answered
// MEMBER_ID_REQUIRED and never joined again is deleted, as Kafka's
// ClassicGroup.validateDeleteGroup decides by the state alone (a consumer that died between
// its two JoinGroups, then kafka-consumer-groups --delete); Runnel answered NON_EMPTY_GROUP.
func TestDeleteGroupWithOnlyAPendingMember(t *testing.T) {
	h := newHarness(t)
	if r := h.joined(h.join("", "")); r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join = %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if h.state() != Empty {
		t.Fatalf("state %v; want Empty", h.state())
	}
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g"}
	resp, out := h.c.DeleteGroups(req)
	h.apply(out)
	wantCode(t, "DeleteGroups of an Empty group with a pending member", resp.Groups[0].ErrorCode, nil)
}
