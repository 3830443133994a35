package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/share"
)

// shb sends a ShareGroupHeartbeat to group "s"; topics nil keeps the subscription.
func (h *harness) shb(member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = 1, "s", member, epoch, topics
	resp, out := h.c.ShareGroupHeartbeat(h.now, req, "client", "/127.0.0.1")
	h.apply(out)
	return resp
}

// shareAssigned decodes a share heartbeat's assignment (nil: none sent).
func shareAssigned(resp *kmsg.ShareGroupHeartbeatResponse) map[string][]int32 {
	if resp.Assignment == nil {
		return nil
	}
	out := map[string][]int32{}
	for _, tp := range resp.Assignment.TopicPartitions {
		for name, m := range testTopics {
			if m.ID == tp.TopicID {
				out[name] = tp.Partitions
			}
		}
	}
	return out
}

// TestShareGroupMembership: members join and get every partition at once (no revocation step:
// a partition may be shared), the assignment is sent only when it changed, a leave and an expired
// session move the others' assignments, and epochs are checked as Kafka does.
func TestShareGroupMembership(t *testing.T) {
	h := newConsumerHarness(t)
	r1 := h.shb("m1", 0, []string{"t"})
	if r1.ErrorCode != 0 || r1.MemberEpoch != 1 || len(shareAssigned(r1)["t"]) != 6 || r1.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("first member: error %d epoch %d assignment %v interval %d; want epoch 1, all 6 partitions, 5000 ms",
			r1.ErrorCode, r1.MemberEpoch, shareAssigned(r1), r1.HeartbeatIntervalMillis)
	}
	if r := h.shb("m1", 1, nil); r.ErrorCode != 0 || r.Assignment != nil {
		t.Fatalf("an unchanged heartbeat: error %d assignment %v; want none sent", r.ErrorCode, shareAssigned(r))
	}
	r2 := h.shb("m2", 0, []string{"t"})
	if r2.MemberEpoch != 2 || len(shareAssigned(r2)["t"]) != 3 {
		t.Fatalf("second member: epoch %d assignment %v; want epoch 2 and 3 partitions at once", r2.MemberEpoch, shareAssigned(r2))
	}
	r1 = h.shb("m1", 1, nil)
	a1, a2 := shareAssigned(r1)["t"], shareAssigned(r2)["t"]
	if r1.MemberEpoch != 2 || len(a1) != 3 || slices.ContainsFunc(a1, func(p int32) bool { return slices.Contains(a2, p) }) {
		t.Fatalf("m1 after m2 joined: epoch %d partitions %v (m2 %v); want epoch 2 and the other 3", r1.MemberEpoch, a1, a2)
	}
	if !slices.Equal(a1, []int32{0, 1, 2}) {
		t.Fatalf("m1 kept %v; want its first three partitions (sticky)", a1)
	}
	// A lost answer: the previous epoch is still accepted; an older or newer one fences.
	if r := h.shb("m1", 1, nil); r.ErrorCode != 0 {
		t.Fatalf("heartbeat at the previous epoch: error %d; want accepted", r.ErrorCode)
	}
	// Kafka's messages say which way the epoch is off.
	if r := h.shb("m1", 5, nil); r.ErrorCode != kerr.FencedMemberEpoch.Code || r.ErrorMessage == nil ||
		!strings.HasPrefix(*r.ErrorMessage, "The share group member has a greater member epoch (5) than the one known by the group coordinator (2).") {
		t.Fatalf("heartbeat at epoch 5: error %d %v; want FENCED_MEMBER_EPOCH, a greater epoch", r.ErrorCode, r.ErrorMessage)
	}
	if r := h.shb("nobody", 2, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("an unknown member: error %d; want UNKNOWN_MEMBER_ID", r.ErrorCode)
	}
	// m2 leaves: m1 gets everything back.
	if r := h.shb("m2", -1, nil); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: error %d epoch %d; want 0, -1", r.ErrorCode, r.MemberEpoch)
	}
	if r := h.shb("m1", 2, nil); r.MemberEpoch != 3 || len(shareAssigned(r)["t"]) != 6 {
		t.Fatalf("after the leave: epoch %d assignment %v; want epoch 3 with all 6", r.MemberEpoch, shareAssigned(r))
	}
	// m1's session expires.
	h.advance(44 * time.Second)
	if g, _ := h.c.Group("s"); g.State != Stable {
		t.Fatalf("state %v before the session timeout; want Stable", g.State)
	}
	h.advance(2 * time.Second)
	if g, _ := h.c.Group("s"); g.State != Empty || g.memberCount() != 0 {
		t.Fatalf("state %v with %d members after the session timeout; want Empty, none", g.State, g.memberCount())
	}
}

// TestShareGroupMoreMembersThanPartitions: with more members than partitions each partition is
// shared by ⌈M/P⌉ members (7 members, 3 partitions: 3 each), so every member gets one or two
// (Kafka's simple assignor hands out ⌈M/P⌉·P assignments).
func TestShareGroupMoreMembersThanPartitions(t *testing.T) {
	h := newConsumerHarness(t)
	epochs := map[int]int32{}
	for i := range 7 {
		epochs[i] = h.shb(fmt.Sprint("m", i), 0, []string{"u"}).MemberEpoch // 3 partitions
	}
	holders := map[int32]int{}
	for i := range 7 {
		r := h.shb(fmt.Sprint("m", i), epochs[i], []string{"u"}) // a full request: the assignment is sent
		ps := shareAssigned(r)["u"]
		if r.ErrorCode != 0 || len(ps) < 1 || len(ps) > 2 {
			t.Fatalf("member %d: error %d partitions %v; want one or two", i, r.ErrorCode, ps)
		}
		for _, p := range ps {
			holders[p]++
		}
	}
	for p := range int32(3) {
		if holders[p] != 3 {
			t.Fatalf("partition %d held by %d members (%v); want 3 (⌈7/3⌉)", p, holders[p], holders)
		}
	}
}

// TestShareAssignorBalance: over random group shapes, every subscribed partition is assigned,
// to at most ⌈M/P⌉ members, and member sizes differ by at most one (same subscriptions).
func TestShareAssignorBalance(t *testing.T) {
	for members := 1; members <= 12; members++ {
		for parts := int32(1); parts <= 9; parts++ {
			topics := map[string]TopicMeta{"a": {ID: [16]byte{1}, Partitions: parts}, "b": {ID: [16]byte{2}, Partitions: parts/2 + 1}}
			ss := &shareState{members: map[string]*shareMember{}, target: map[string]assignment{}}
			for i := range members {
				ss.members[fmt.Sprintf("m%02d", i)] = &shareMember{id: fmt.Sprintf("m%02d", i), topics: []string{"a", "b"}}
			}
			target := assignShare(ss, topics)
			P := int(parts + parts/2 + 1)
			sharing := (members + P - 1) / P
			count := map[TopicPartition]int{}
			lo, hi := 1<<30, 0
			for _, a := range target {
				lo, hi = min(lo, a.size()), max(hi, a.size())
				for t, ps := range a {
					for _, p := range ps {
						count[TopicPartition{t, p}]++
					}
				}
			}
			if len(count) != P || hi-lo > 1 {
				t.Fatalf("%d members, %d partitions: %d partitions assigned, sizes %d..%d; want all, differing by at most 1", members, P, len(count), lo, hi)
			}
			for tp, n := range count {
				if n > sharing {
					t.Fatalf("%d members, %d partitions: %v held by %d; want at most %d", members, P, tp, n, sharing)
				}
			}
			// Sticky: computing again from this target changes nothing.
			ss.target = target
			if again := assignShare(ss, topics); fmt.Sprint(again) != fmt.Sprint(target) {
				t.Fatalf("%d members, %d partitions: a second assignment moved partitions:\n%v\n%v", members, P, target, again)
			}
		}
	}
}

// TestShareGroupTypes: a share group id is no classic or consumer group and the reverse, as in
// Kafka; admin APIs see it as a share group.
func TestShareGroupTypes(t *testing.T) {
	h := newConsumerHarness(t)
	h.shb("m1", 0, []string{"t"})
	creq := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	creq.Version, creq.Group, creq.MemberID, creq.SubscribedTopicNames = 1, "s", "c1", []string{"t"}
	creq.Topics, creq.RebalanceTimeoutMillis = []kmsg.ConsumerGroupHeartbeatRequestTopic{}, 30000
	if r, _ := h.c.ConsumerGroupHeartbeat(h.now, creq, "client", "/127.0.0.1"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupHeartbeat to a share group: error %d; want GROUP_ID_NOT_FOUND", r.ErrorCode)
	}
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Version, jreq.Group, jreq.ProtocolType, jreq.SessionTimeoutMillis = 9, "s", "consumer", 10000
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	h.next++
	h.apply(h.c.JoinGroup(h.now, h.next, jreq, "client", "/127.0.0.1"))
	if r := h.replies[h.next].(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("JoinGroup to a share group: error %d; want INCONSISTENT_GROUP_PROTOCOL", r.ErrorCode)
	}
	oreq := kmsg.NewPtrOffsetCommitRequest()
	oreq.Version, oreq.Group, oreq.Generation = 9, "s", -1
	oreq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	if r, _ := h.c.OffsetCommit(h.now, oreq); r.Topics[0].Partitions[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("OffsetCommit to a share group: error %d; want GROUP_ID_NOT_FOUND", r.Topics[0].Partitions[0].ErrorCode)
	}
	// A consumer group's id is not a share group's.
	h.hb("c1", 0, []string{"t"}, map[string][]int32{}, "") // group "g"
	sreq := kmsg.NewPtrShareGroupHeartbeatRequest()
	sreq.Version, sreq.GroupID, sreq.MemberID, sreq.SubscribedTopicNames = 1, "g", "m9", []string{"t"}
	if r, _ := h.c.ShareGroupHeartbeat(h.now, sreq, "client", "/127.0.0.1"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ShareGroupHeartbeat to a consumer group: error %d; want GROUP_ID_NOT_FOUND", r.ErrorCode)
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version, lreq.TypesFilter = 5, []string{"share"}
	if r := h.c.ListGroups(lreq); len(r.Groups) != 1 || r.Groups[0].Group != "s" || r.Groups[0].GroupState != "Stable" || r.Groups[0].ProtocolType != "share" {
		t.Fatalf("ListGroups(type share) = %+v; want s, Stable, protocol type share", r.Groups)
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version, dreq.Groups = 6, []string{"s"}
	if r := h.c.DescribeGroups(dreq); r.Groups[0].State != "Dead" || r.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeGroups of a share group: state %s error %d; want Dead, GROUP_ID_NOT_FOUND", r.Groups[0].State, r.Groups[0].ErrorCode)
	}
	sd := kmsg.NewPtrShareGroupDescribeRequest()
	sd.GroupIDs = []string{"s", "g", "none"}
	r := h.c.ShareGroupDescribe(sd)
	if g := r.Groups[0]; g.ErrorCode != 0 || g.GroupState != "Stable" || g.Assignor != "simple" || len(g.Members) != 1 ||
		len(g.Members[0].Assignment.TopicPartitions) != 1 || g.Members[0].Assignment.TopicPartitions[0].Topic != "t" {
		t.Fatalf("ShareGroupDescribe(s) = %+v", g)
	}
	if r.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code || r.Groups[2].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ShareGroupDescribe of a consumer group and a missing one: %d, %d; want GROUP_ID_NOT_FOUND", r.Groups[1].ErrorCode, r.Groups[2].ErrorCode)
	}
	// Delete: refused with a member, done once empty.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"s"}
	if r, _ := h.c.DeleteGroups(del); r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("deleting a share group with a member: %d; want NON_EMPTY_GROUP", r.Groups[0].ErrorCode)
	}
	h.shb("m1", -1, nil)
	if r, _ := h.c.DeleteGroups(del); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("deleting an empty share group: %d", r.Groups[0].ErrorCode)
	}
	if _, ok := h.c.Group("s"); ok {
		t.Fatal("the deleted share group is still there")
	}
}

// TestShareGroupValidation: Kafka's checks of a ShareGroupHeartbeat.
func TestShareGroupValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		member string
		epoch  int32
		topics []string
		want   *kerr.Error
	}{
		{"no member id", "", 0, []string{"t"}, kerr.InvalidRequest},
		{"join without topics", "m", 0, nil, kerr.InvalidRequest},
		{"epoch below -1", "m", -2, nil, kerr.InvalidRequest},
		{"unknown group", "m", 3, nil, kerr.GroupIDNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newConsumerHarness(t)
			if r := h.shb(tc.member, tc.epoch, tc.topics); r.ErrorCode != tc.want.Code {
				t.Fatalf("error %d; want %s", r.ErrorCode, tc.want.Message)
			}
		})
	}
	h := newConsumerHarness(t)
	h.c.cfg.MaxShareGroupSize = 2
	h.shb("a", 0, []string{"t"})
	h.shb("b", 0, []string{"t"})
	if r := h.shb("c", 0, []string{"t"}); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("a third member of a group of at most 2: error %d; want GROUP_MAX_SIZE_REACHED", r.ErrorCode)
	}
}

// TestShareGroupReload: a coordinator that replays __consumer_offsets has the share group with
// its members, epochs and assignments; the members keep heartbeating at their epochs.
func TestShareGroupReload(t *testing.T) {
	h := newConsumerHarness(t)
	h.shb("m1", 0, []string{"t", "u"})
	h.shb("m2", 0, []string{"t"})
	r1 := h.shb("m1", 1, nil)
	c2 := New(DefaultConfig())
	c2.Topics = h.c.Topics
	for _, rec := range h.records {
		if err := c2.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	h.c = c2
	// What was last sent is not kept: the assignment is sent again, unchanged.
	r := h.shb("m1", r1.MemberEpoch, nil)
	if r.ErrorCode != 0 || r.MemberEpoch != r1.MemberEpoch || fmt.Sprint(shareAssigned(r)) != fmt.Sprint(shareAssigned(r1)) {
		t.Fatalf("after reload: error %d epoch %d assignment %v; want epoch %d, %v", r.ErrorCode, r.MemberEpoch, shareAssigned(r), r1.MemberEpoch, shareAssigned(r1))
	}
	if r := h.shb("m2", 2, nil); r.ErrorCode != 0 {
		t.Fatalf("m2 after reload: error %d", r.ErrorCode)
	}
	// The group's tombstone removes it on replay.
	h.shb("m1", -1, nil)
	h.shb("m2", -1, nil)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"s"}
	r2, out := h.c.DeleteGroups(del)
	if r2.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %d", r2.Groups[0].ErrorCode)
	}
	h.apply(out)
	c3 := New(DefaultConfig())
	for _, rec := range h.records {
		if err := c3.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c3.Group("s"); ok {
		t.Fatal("the deleted share group came back on replay")
	}
}

// TestShareStateOwnerEpochPastInt32: an object partition's owner epoch (a log index) past
// int32 is stored in the record's version 1 and fences as well after a replay; an epoch that
// fits is stored in version 0, as before.
func TestShareStateOwnerEpochPastInt32(t *testing.T) {
	h := newConsumerHarness(t)
	h.shb("m1", 0, []string{"t"})
	sp := SharePartition{Topic: testTopics["t"].ID, Partition: 1}
	const big = int64(1) << 40
	st, rerr, out := h.c.ReadShareState("s", sp, big)
	h.apply(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	snap := (&share.Snapshot{Start: 3}).AppendTo(nil)
	e, out := h.c.WriteShareState("s", sp, st.StateEpoch, big, snap)
	h.apply(out)
	if e != nil {
		t.Fatalf("write at %d: %v", big, e)
	}
	if v := out.Records[0].Value; len(v) < 2 || v[0] != 0 || v[1] != 1 {
		t.Fatalf("record value %x; want version 1", v)
	}
	c2 := New(DefaultConfig())
	for _, rec := range h.records {
		if err := c2.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	if _, e, _ := c2.ReadShareState("s", sp, big-1); e != kerr.FencedLeaderEpoch {
		t.Fatalf("after replay, a read at %d: %v; want FENCED_LEADER_EPOCH", big-1, e)
	}
	if got, e, _ := c2.ReadShareState("s", sp, big); e != nil || string(got.Snapshot) != string(snap) {
		t.Fatalf("after replay, a read at %d: %+v %v; want the snapshot", big, got, e)
	}
	if r := sharePartRecord("s", sp, &storedShare{leaderEpoch: 7, snapshot: snap}); r.Value[0] != 0 || r.Value[1] != 0 {
		t.Fatalf("a record at epoch 7: %x; want version 0", r.Value)
	}
}

// TestShareStateStore: a share-partition's leader reads its state (none at first), writes
// snapshots; an older leader is fenced once a newer one read; a write at another state epoch is
// fenced; the state survives a replay and goes with the group.
func TestShareStateStore(t *testing.T) {
	h := newConsumerHarness(t)
	h.shb("m1", 0, []string{"t"})
	sp := SharePartition{Topic: testTopics["t"].ID, Partition: 2}
	st, rerr, out := h.c.ReadShareState("s", sp, 3)
	h.apply(out)
	if rerr != nil || st.Snapshot != nil || st.PrevLeaderEpoch != -1 {
		t.Fatalf("first read: %+v, %v; want no snapshot, read at no epoch before", st, rerr)
	}
	snap := (&share.Snapshot{Start: 10, Batches: []share.Batch{{First: 10, Last: 14, State: share.Acknowledged, Count: 1}}}).AppendTo(nil)
	if e, out := h.c.WriteShareState("s", sp, st.StateEpoch, 3, snap); e != nil {
		t.Fatalf("write: %v", e)
	} else {
		h.apply(out)
	}
	if e, _ := h.c.WriteShareState("s", sp, st.StateEpoch+1, 3, snap); e != kerr.FencedStateEpoch {
		t.Fatalf("a write at another state epoch: %v; want FENCED_STATE_EPOCH", e)
	}
	if e, _ := h.c.WriteShareState("s", sp, st.StateEpoch, 3, []byte{1}); e != kerr.InvalidRequest {
		t.Fatalf("a write of a bad snapshot: %v; want INVALID_REQUEST", e)
	}
	if st4, e, out := h.c.ReadShareState("s", sp, 4); e != nil || st4.PrevLeaderEpoch != 3 { // a new leader
		t.Fatalf("a new leader's read: %+v, %v; want the state last written at epoch 3", st4, e)
	} else {
		h.apply(out)
	}
	if st4, e, _ := h.c.ReadShareState("s", sp, 4); e != nil || st4.PrevLeaderEpoch != 4 {
		t.Fatalf("the new leader's read again: %+v, %v; want the state last read at epoch 4", st4, e)
	}
	if e, _ := h.c.WriteShareState("s", sp, st.StateEpoch, 3, snap); e != kerr.FencedLeaderEpoch {
		t.Fatalf("the old leader's write: %v; want FENCED_LEADER_EPOCH", e)
	}
	if _, e, _ := h.c.ReadShareState("s", sp, 3); e != kerr.FencedLeaderEpoch {
		t.Fatalf("the old leader's read: %v; want FENCED_LEADER_EPOCH", e)
	}
	if _, e, _ := h.c.ReadShareState("g", sp, 3); e != kerr.GroupIDNotFound {
		t.Fatalf("a read for a group that is not a share group: %v; want GROUP_ID_NOT_FOUND", e)
	}
	// Replayed: the snapshot and the fence are there.
	c2 := New(DefaultConfig())
	for _, rec := range h.records {
		if err := c2.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	got, e, _ := c2.ReadShareState("s", sp, 4)
	if e != nil || string(got.Snapshot) != string(snap) || got.StateEpoch != st.StateEpoch || got.PrevLeaderEpoch != 4 {
		t.Fatalf("after replay: %+v, %v; want the snapshot at state epoch %d", got, e, st.StateEpoch)
	}
	if _, e, _ := c2.ReadShareState("s", sp, 3); e != kerr.FencedLeaderEpoch {
		t.Fatalf("after replay, the old leader's read: %v; want FENCED_LEADER_EPOCH", e)
	}
	// Deleting the group removes its share-partitions' records too.
	h.shb("m1", -1, nil)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"s"}
	r, out := h.c.DeleteGroups(del)
	if r.Groups[0].ErrorCode != 0 {
		t.Fatal(r.Groups[0].ErrorCode)
	}
	h.apply(out)
	h.shb("m1", 0, []string{"t"}) // a group of the same name, anew
	c3 := New(DefaultConfig())
	for _, rec := range h.records {
		if err := c3.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	if got, e, _ := c3.ReadShareState("s", sp, 5); e != nil || got.Snapshot != nil || got.StateEpoch == st.StateEpoch {
		t.Fatalf("the new group's state: %+v, %v; want none, at another state epoch than %d", got, e, st.StateEpoch)
	}
}

// TestShareGroupOffsets: DescribeShareGroupOffsets answers the stored start offsets (and a lag
// when the end is known); AlterShareGroupOffsets and DeleteShareGroupOffsets work on an empty
// share group only, move its state epoch (fencing leaders' older state), and replay.
func TestShareGroupOffsets(t *testing.T) {
	h := newConsumerHarness(t)
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "s"
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 1, StartOffset: 40}, {Partition: 9, StartOffset: 1}}},
		{Topic: "nope", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 1}}}}
	r, out := h.c.AlterShareGroupOffsets(h.now, alter)
	h.apply(out)
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code ||
		r.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("alter (creating the group): %+v", r)
	}
	describe := func(c *Coordinator, topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "s", Topics: topics}}
		resp := c.DescribeShareGroupOffsets(req, func(topic [16]byte, p int32) (int64, bool) { return 100, p == 1 })
		if resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("describe: %+v", resp.Groups[0])
		}
		return resp.Groups[0].Topics
	}
	got := describe(h.c, nil)
	if len(got) != 1 || got[0].Topic != "t" || len(got[0].Partitions) != 1 || got[0].Partitions[0].StartOffset != 40 || got[0].Partitions[0].Lag != 60 {
		t.Fatalf("describe all: %+v; want t/1 at 40, lag 60", got)
	}
	got = describe(h.c, []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1}}, {Topic: "nope", Partitions: []int32{0}}})
	if got[0].Partitions[0].StartOffset != -1 || got[0].Partitions[1].StartOffset != 40 || got[1].Partitions[0].StartOffset != -1 {
		t.Fatalf("describe t/0, t/1, nope/0: %+v; want -1, 40, -1", got)
	}
	g, _ := h.c.Group("s")
	epoch := g.share.stateEpoch
	// A leader that read before the change is fenced.
	sp := SharePartition{Topic: testTopics["t"].ID, Partition: 1}
	st, _, o := h.c.ReadShareState("s", sp, 1)
	h.apply(o)
	if st.StateEpoch != epoch {
		t.Fatalf("state epoch %d; want %d", st.StateEpoch, epoch)
	}
	// A member joins: the offsets cannot change now.
	h.shb("m1", 0, []string{"t"})
	if r, _ := h.c.AlterShareGroupOffsets(h.now, alter); r.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with a member: error %d; want NON_EMPTY_GROUP", r.ErrorCode)
	}
	h.shb("m1", -1, nil)
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID, del.Topics = "s", []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "t"}, {Topic: "u"}}
	dr, out := h.c.DeleteShareGroupOffsets(h.now, del)
	h.apply(out)
	if dr.ErrorCode != 0 || dr.Topics[0].ErrorCode != 0 || dr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete: %+v", dr)
	}
	snap := (&share.Snapshot{Start: 41}).AppendTo(nil)
	if e, _ := h.c.WriteShareState("s", sp, st.StateEpoch, 1, snap); e != kerr.FencedStateEpoch {
		t.Fatalf("a write read before the deletion: %v; want FENCED_STATE_EPOCH", e)
	}
	// Replayed, the group has no state left for t.
	c2 := New(DefaultConfig())
	c2.Topics = h.c.Topics
	for _, rec := range h.records {
		if err := c2.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	if got := describe(c2, nil); len(got) != 0 {
		t.Fatalf("after delete and replay: %+v; want no state", got)
	}
	if r, _ := h.c.DeleteShareGroupOffsets(h.now, &kmsg.DeleteShareGroupOffsetsRequest{GroupID: "nosuch"}); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete of a group that does not exist: %d; want GROUP_ID_NOT_FOUND", r.ErrorCode)
	}
}

// TestShareStateAfterCompaction: a compacted __consumer_offsets keeps only each key's newest
// record, so a share-partition's state may come before its group's record on replay; it is kept
// all the same.
func TestShareStateAfterCompaction(t *testing.T) {
	h := newConsumerHarness(t)
	h.shb("m1", 0, []string{"t"})
	sp := SharePartition{Topic: testTopics["t"].ID, Partition: 0}
	st, e, out := h.c.ReadShareState("s", sp, 1)
	h.apply(out)
	if e != nil {
		t.Fatal(e)
	}
	snap := (&share.Snapshot{Start: 7}).AppendTo(nil)
	if e, out := h.c.WriteShareState("s", sp, st.StateEpoch, 1, snap); e != nil {
		t.Fatal(e)
	} else {
		h.apply(out)
	}
	h.shb("m2", 0, []string{"t"}) // the group's record is rewritten after the partition's
	last := map[string]int{}
	for i, rec := range h.records {
		last[string(rec.Key)] = i
	}
	c2 := New(DefaultConfig())
	for i, rec := range h.records {
		if last[string(rec.Key)] != i {
			continue // compacted away
		}
		if err := c2.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	got, e, _ := c2.ReadShareState("s", sp, 1)
	if e != nil || string(got.Snapshot) != string(snap) {
		t.Fatalf("after a compacted replay: %+v, %v; want the snapshot starting at 7", got, e)
	}
}

// TestShareAssignorFromAnyPrevious: whatever the previous assignment (random, including ones
// that break the bounds: too many holders, too many partitions, members gone), the assignor
// gives every partition exactly ⌈M/P⌉ distinct members and every member lo or lo+1 partitions,
// and a second run from its own result changes nothing. (Quotas fixed by member order before
// the kept assignments once left a partition short when the only member with room held it
// already: TestShareMembersJoiningOutOfOrder.)
func TestShareAssignorFromAnyPrevious(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	for run := range 3000 {
		M, P := 1+rnd.IntN(9), 1+rnd.IntN(7)
		topics := map[string]TopicMeta{"a": {ID: [16]byte{1}, Partitions: int32(P)}}
		ss := &shareState{members: map[string]*shareMember{}, target: map[string]assignment{}}
		for i := range M + rnd.IntN(3) { // some previous holders are gone
			id := fmt.Sprintf("m%02d", i)
			if i < M {
				ss.members[id] = &shareMember{id: id, topics: []string{"a"}}
			}
			a := assignment{}
			for p := range int32(P) {
				if rnd.IntN(3) == 0 {
					a.add("a", p)
				}
			}
			ss.target[id] = a
		}
		target := assignShare(ss, topics)
		sharing := (M + P - 1) / P
		lo := sharing * P / M
		holders := map[int32]int{}
		for id, a := range target {
			if n := a.size(); n < lo || n > lo+1 {
				t.Fatalf("run %d (%d members, %d partitions, previous %v): %s holds %d; want %d or %d", run, M, P, ss.target, id, n, lo, lo+1)
			}
			for _, p := range a["a"] {
				holders[p]++
			}
		}
		for p := range int32(P) {
			if holders[p] != sharing {
				t.Fatalf("run %d (%d members, %d partitions, previous %v): partition %d held by %d; want %d (%v)", run, M, P, ss.target, p, holders[p], sharing, target)
			}
		}
		ss.target = target
		if again := assignShare(ss, topics); fmt.Sprint(again) != fmt.Sprint(target) {
			t.Fatalf("run %d: a second assignment moved partitions:\n%v\n%v", run, target, again)
		}
	}
}

// TestShareMembersJoiningOutOfOrder: five members join a share group on u (3 partitions) one
// after the other, not in id order; every partition ends with ⌈5/3⌉ = 2 members.
func TestShareMembersJoiningOutOfOrder(t *testing.T) {
	h := newConsumerHarness(t)
	order := []string{"m11", "m03", "m01", "m04", "m00"}
	epochs := map[string]int32{}
	for _, id := range order {
		r := h.shb(id, 0, []string{"u"})
		if r.ErrorCode != 0 {
			t.Fatalf("%s joins: error %d", id, r.ErrorCode)
		}
		epochs[id] = r.MemberEpoch
	}
	holders := map[int32][]string{}
	for _, id := range order {
		r := h.shb(id, epochs[id], []string{"u"}) // a full request: the assignment is sent
		for _, p := range shareAssigned(r)["u"] {
			holders[p] = append(holders[p], id)
		}
	}
	for p := range int32(3) {
		if len(holders[p]) != 2 {
			t.Fatalf("partition %d held by %v (all: %v); want 2 members each", p, holders[p], holders)
		}
	}
}

// TestShareHeartbeatMemberID: any member id but the empty one is taken, as Kafka's
// throwIfShareGroupHeartbeatRequestIsInvalid takes it (a 40-character one was refused as longer
// than a UUID), and the empty one is refused with Kafka's message, before the group id's.
func TestShareHeartbeatMemberID(t *testing.T) {
	h := newConsumerHarness(t)
	long := strings.Repeat("m", 40)
	if r := h.shb(long, 0, []string{"t"}); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("a 40-character member id: error %d, epoch %d; want it joined", r.ErrorCode, r.MemberEpoch)
	}
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.SubscribedTopicNames = 1, []string{"t"} // no member id, no group id
	r, _ := h.c.ShareGroupHeartbeat(h.now, req, "client", "/127.0.0.1")
	if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || *r.ErrorMessage != "MemberId can't be empty." {
		t.Fatalf("no member id: error %d %v; want INVALID_REQUEST \"MemberId can't be empty.\"", r.ErrorCode, r.ErrorMessage)
	}
}

// TestShareGroupOffsetsListSubscribedPartitions: DescribeShareGroupOffsets of every topic lists
// each partition of the topics the members subscribe to, those never fetched at start offset -1,
// as Kafka lists the partitions it initialized for the subscription. Only the partitions with
// state were listed, so kafka-share-groups --describe --offsets left the others out.
func TestShareGroupOffsetsListSubscribedPartitions(t *testing.T) {
	h := newConsumerHarness(t)
	h.shb("m1", 0, []string{"u"})
	sp := SharePartition{Topic: testTopics["u"].ID, Partition: 1}
	st, _, o := h.c.ReadShareState("s", sp, 1)
	h.apply(o)
	if e, o := h.c.WriteShareState("s", sp, st.StateEpoch, 1, (&share.Snapshot{Start: 7}).AppendTo(nil)); e != nil {
		t.Fatalf("write state: %v", e)
	} else {
		h.apply(o)
	}
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "s"}}
	resp := h.c.DescribeShareGroupOffsets(req, func([16]byte, int32) (int64, bool) { return 0, false })
	got := resp.Groups[0].Topics
	if len(got) != 1 || got[0].Topic != "u" || len(got[0].Partitions) != 3 {
		t.Fatalf("describe all: %+v; want u's three partitions", got)
	}
	for i, p := range got[0].Partitions {
		want := int64(-1)
		if i == 1 {
			want = 7
		}
		if p.Partition != int32(i) || p.StartOffset != want {
			t.Fatalf("partition %d: %+v; want start offset %d", i, p, want)
		}
	}
}

// TestShareGroupOffsetsChecks: AlterShareGroupOffsets and DeleteShareGroupOffsets refuse the
// empty group id (INVALID_GROUP_ID, as Kafka: the alter made a share group named ""), answer a
// topic named twice once, and word their errors as Kafka's (the message alone, not the error's
// name and description before it).
func TestShareGroupOffsetsChecks(t *testing.T) {
	h := newConsumerHarness(t)
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 1}}}}
	if r, _ := h.c.AlterShareGroupOffsets(h.now, alter); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("alter of the empty group id: %v; want INVALID_GROUP_ID", kerr.ErrorForCode(r.ErrorCode))
	}
	if _, ok := h.c.Group(""); ok {
		t.Fatal("the alter made a group named \"\"")
	}
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "t"}}
	if r, _ := h.c.DeleteShareGroupOffsets(h.now, del); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("delete of the empty group id: %v; want INVALID_GROUP_ID", kerr.ErrorForCode(r.ErrorCode))
	}
	del.GroupID = "nosuch"
	if r, _ := h.c.DeleteShareGroupOffsets(h.now, del); r.ErrorCode != kerr.GroupIDNotFound.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Group nosuch not found." {
		t.Fatalf("delete of an unknown group: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	alter.GroupID = "s"
	r, out := h.c.AlterShareGroupOffsets(h.now, alter)
	h.apply(out)
	if r.ErrorCode != 0 {
		t.Fatalf("alter: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	h.shb("m1", 0, []string{"t"})
	del.GroupID = "s"
	if r, _ := h.c.DeleteShareGroupOffsets(h.now, del); r.ErrorCode != kerr.NonEmptyGroup.Code || r.ErrorMessage == nil || *r.ErrorMessage != "The group is not empty." {
		t.Fatalf("delete with a member: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	h.shb("m1", -1, nil)
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "t"}, {Topic: "t"}, {Topic: "u"}}
	dr, out := h.c.DeleteShareGroupOffsets(h.now, del)
	h.apply(out)
	if dr.ErrorCode != 0 || len(dr.Topics) != 2 || dr.Topics[0].ErrorCode != 0 || dr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code ||
		*dr.Topics[1].ErrorMessage != "This server does not host this topic-partition." {
		t.Fatalf("delete of t twice and u: %+v", dr)
	}
}

// TestShareGroupDescribeAfterTopicDeleted: a topic deleted since the member's last heartbeat is
// left out of its described assignment, as Kafka leaves out an id it has no name for; a group
// that does not exist is GROUP_ID_NOT_FOUND with no state, as Kafka's error answer.
func TestShareGroupDescribeAfterTopicDeleted(t *testing.T) {
	h := newConsumerHarness(t)
	if r := h.shb("m1", 0, []string{"t", "u"}); r.ErrorCode != 0 || len(shareAssigned(r)) != 2 {
		t.Fatalf("join: error %d assignment %v", r.ErrorCode, shareAssigned(r))
	}
	h.c.Topics = func() map[string]TopicMeta { return map[string]TopicMeta{"u": testTopics["u"]} }
	d := h.c.ShareGroupDescribe(&kmsg.ShareGroupDescribeRequest{GroupIDs: []string{"s", "none"}})
	if len(d.Groups) != 2 || len(d.Groups[0].Members) != 1 {
		t.Fatalf("described: %+v", d.Groups)
	}
	tps := d.Groups[0].Members[0].Assignment.TopicPartitions
	if len(tps) != 1 || tps[0].Topic != "u" || tps[0].TopicID != testTopics["u"].ID || len(tps[0].Partitions) != 3 {
		t.Errorf("assignment after t was deleted: %+v; want u's 3 partitions only", tps)
	}
	if g := d.Groups[1]; g.ErrorCode != kerr.GroupIDNotFound.Code || g.GroupState != "" {
		t.Errorf("a group that does not exist: error %d state %q; want GROUP_ID_NOT_FOUND and no state", g.ErrorCode, g.GroupState)
	}
}

// TestShareStateEpochPerPartition: resetting one topic's share state (AlterShareGroupOffsets,
// DeleteShareGroupOffsets) fences the writes of leaders that read that topic's partitions
// before, not those of the group's other partitions, as Kafka keeps a state epoch per
// share-partition. With one epoch per group, a reset of topic t made the next acknowledgement
// on topic u fail (NOT_LEADER_OR_FOLLOWER to the client) and u's records were delivered again.
// A loaded coordinator fences every older writer once (the epochs are not in the records).
func TestShareStateEpochPerPartition(t *testing.T) {
	h := newConsumerHarness(t)
	h.shb("m1", 0, []string{"t", "u"})
	spT, spU := SharePartition{Topic: testTopics["t"].ID, Partition: 0}, SharePartition{Topic: testTopics["u"].ID, Partition: 0}
	read := func(sp SharePartition) ShareState {
		st, e, out := h.c.ReadShareState("s", sp, 1)
		if e != nil {
			t.Fatalf("read %v: %v", sp, e)
		}
		h.apply(out)
		return st
	}
	stT, stU := read(spT), read(spU)
	h.shb("m1", -1, nil)
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "s"
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 5}}}}
	if r, out := h.c.AlterShareGroupOffsets(h.now, alter); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("alter: %+v", r)
	} else {
		h.apply(out)
	}
	snap := (&share.Snapshot{Start: 3}).AppendTo(nil)
	if e, out := h.c.WriteShareState("s", spU, stU.StateEpoch, 1, snap); e != nil {
		t.Fatalf("a write of u, read before t was reset: %v; want it taken", e)
	} else {
		h.apply(out)
	}
	if e, _ := h.c.WriteShareState("s", spT, stT.StateEpoch, 1, snap); e != kerr.FencedStateEpoch {
		t.Fatalf("a write of t, read before its reset: %v; want FENCED_STATE_EPOCH", e)
	}
	if again := read(spT); again.StateEpoch == stT.StateEpoch {
		t.Fatalf("t read again at state epoch %d, the one before its reset", again.StateEpoch)
	} else if e, out := h.c.WriteShareState("s", spT, again.StateEpoch, 1, snap); e != nil {
		t.Fatalf("a write of t read again: %v", e)
	} else {
		h.apply(out)
	}
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID, del.Topics = "s", []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "t"}}
	if r, out := h.c.DeleteShareGroupOffsets(h.now, del); r.ErrorCode != 0 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %+v", r)
	} else {
		h.apply(out)
	}
	if e, _ := h.c.WriteShareState("s", spU, stU.StateEpoch, 1, snap); e != nil {
		t.Fatalf("a write of u after t's state was deleted: %v; want it taken", e)
	}
	// Loaded elsewhere: every partition at the group's epoch; u's old writer is fenced once.
	c2 := New(DefaultConfig())
	c2.Topics = h.c.Topics
	for _, rec := range h.records {
		if err := c2.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	if e, _ := c2.WriteShareState("s", spU, stU.StateEpoch, 1, snap); e != kerr.FencedStateEpoch {
		t.Fatalf("after a load, u's writer of before: %v; want FENCED_STATE_EPOCH", e)
	}
	if st, e, _ := c2.ReadShareState("s", spU, 2); e != nil || string(st.Snapshot) != string(snap) {
		t.Fatalf("after a load, u read: %+v %v", st, e)
	} else if e, _ := c2.WriteShareState("s", spU, st.StateEpoch, 2, snap); e != nil {
		t.Fatalf("after a load, u written at the epoch read: %v", e)
	}
}
