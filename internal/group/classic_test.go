package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness drives a Coordinator with a fake clock and collects replies and records.
type harness struct {
	t       *testing.T
	c       *Coordinator
	now     time.Time
	next    RequestID
	replies map[RequestID]kmsg.Response
	records []Record
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, c: New(DefaultConfig()), now: time.UnixMilli(1_700_000_000_000), replies: map[RequestID]kmsg.Response{}}
}

func (h *harness) apply(out Output) {
	h.records = append(h.records, out.Records...)
	for _, r := range out.Replies {
		if _, dup := h.replies[r.ID]; dup {
			h.t.Fatalf("request %d answered twice", r.ID)
		}
		h.replies[r.ID] = r.Resp
	}
}

func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.apply(h.c.Tick(h.now))
}

// join sends a JoinGroup (v9) and returns its request id.
func (h *harness) join(memberID, instance string, protocols ...string) RequestID {
	h.next++
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID, req.ProtocolType = 9, "g", memberID, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 30000
	if instance != "" {
		req.InstanceID = &instance
	}
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte("md-" + p)})
	}
	h.apply(h.c.JoinGroup(h.now, h.next, req, "client", "/127.0.0.1"))
	return h.next
}

// joined returns the JoinGroup answer of request id, failing if there is none yet.
func (h *harness) joined(id RequestID) *kmsg.JoinGroupResponse {
	h.t.Helper()
	r, ok := h.replies[id]
	if !ok {
		h.t.Fatalf("JoinGroup %d not answered", id)
	}
	return r.(*kmsg.JoinGroupResponse)
}

func (h *harness) pending(id RequestID) bool { _, ok := h.replies[id]; return !ok }

// newMember joins a dynamic member the KIP-394 way (MEMBER_ID_REQUIRED, then again with the id)
// and returns its member id and the pending join.
func (h *harness) newMember() (string, RequestID) {
	h.t.Helper()
	first := h.joined(h.join("", ""))
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		h.t.Fatalf("first JoinGroup = %s, member %q; want MEMBER_ID_REQUIRED with an id", kerr.ErrorForCode(first.ErrorCode), first.MemberID)
	}
	return first.MemberID, h.join(first.MemberID, "")
}

func (h *harness) sync(memberID string, gen int32, assignments map[string]string) RequestID {
	h.next++
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 5, "g", memberID, gen
	for m, a := range assignments {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	h.apply(h.c.SyncGroup(h.now, h.next, req))
	return h.next
}

func (h *harness) heartbeat(memberID string, gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 4, "g", memberID, gen
	return h.c.Heartbeat(h.now, req).ErrorCode
}

func (h *harness) state() State {
	g, ok := h.c.Group("g")
	if !ok {
		return Dead
	}
	return g.State
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	wantCode := int16(0)
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Errorf("%s = %v; want %v", what, kerr.ErrorForCode(got), want)
	}
}

// stableGroup brings two dynamic members through the first rebalance and returns their ids.
func stableGroup(h *harness) (leader, follower string) {
	h.t.Helper()
	a, ja := h.newMember()
	b, jb := h.newMember()
	if !h.pending(ja) || !h.pending(jb) {
		h.t.Fatal("the first rebalance completed before group.initial.rebalance.delay.ms")
	}
	h.advance(3 * time.Second) // the initial delay
	ra, rb := h.joined(ja), h.joined(jb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != 1 || ra.LeaderID != a || *ra.Protocol != "range" {
		h.t.Fatalf("joins = %v/%v, generation %d, leader %s; want generation 1 led by %s", kerr.ErrorForCode(ra.ErrorCode), kerr.ErrorForCode(rb.ErrorCode), ra.Generation, ra.LeaderID, a)
	}
	if len(ra.Members) != 2 || len(rb.Members) != 0 {
		h.t.Fatalf("the leader got %d members, the follower %d; want 2 and 0", len(ra.Members), len(rb.Members))
	}
	sb := h.sync(b, 1, nil) // the follower's sync waits for the leader's
	if !h.pending(sb) {
		h.t.Fatal("the follower's SyncGroup was answered before the leader's")
	}
	sa := h.sync(a, 1, map[string]string{a: "A", b: "B"})
	if got := string(h.replies[sa].(*kmsg.SyncGroupResponse).MemberAssignment); got != "A" {
		h.t.Fatalf("leader assignment %q; want A", got)
	}
	if got := string(h.replies[sb].(*kmsg.SyncGroupResponse).MemberAssignment); got != "B" {
		h.t.Fatalf("follower assignment %q; want B", got)
	}
	if h.state() != Stable {
		h.t.Fatalf("state %v after the leader's sync; want Stable", h.state())
	}
	return a, b
}

func TestFirstRebalance(t *testing.T) {
	h := newHarness(t)
	a, b := stableGroup(h)
	wantCode(t, "Heartbeat(leader)", h.heartbeat(a, 1), nil)
	wantCode(t, "Heartbeat(stale generation)", h.heartbeat(b, 0), kerr.IllegalGeneration)
	wantCode(t, "Heartbeat(unknown member)", h.heartbeat("nobody", 1), kerr.UnknownMemberID)
	if len(h.records) == 0 {
		t.Errorf("no group metadata record written")
	}
}

func TestJoinRebalancesAndWaitsForAll(t *testing.T) {
	h := newHarness(t)
	a, b := stableGroup(h)
	c, jc := h.newMember()
	if h.state() != PreparingRebalance || !h.pending(jc) {
		t.Fatalf("state %v after a third member joined; want PreparingRebalance with its join waiting", h.state())
	}
	wantCode(t, "Heartbeat during the rebalance", h.heartbeat(a, 1), kerr.RebalanceInProgress)
	ja := h.join(a, "")
	if !h.pending(ja) {
		t.Fatal("the rebalance completed before every member rejoined")
	}
	jb := h.join(b, "")
	for _, id := range []RequestID{ja, jb, jc} { // no initial delay: the group was not Empty
		if r := h.joined(id); r.ErrorCode != 0 || r.Generation != 2 {
			t.Errorf("join %d = %v generation %d; want generation 2", id, kerr.ErrorForCode(r.ErrorCode), r.Generation)
		}
	}
	_ = c
}

func TestRebalanceTimeoutRemovesLaggards(t *testing.T) {
	h := newHarness(t)
	a, b := stableGroup(h)
	ja := h.join(a, "", "range", "roundrobin") // new protocols: a rebalance
	for range 9 {                              // b keeps heartbeating but never rejoins
		h.advance(3 * time.Second)
		wantCode(t, "Heartbeat(b) during the rebalance", h.heartbeat(b, 1), kerr.RebalanceInProgress)
	}
	h.advance(2 * time.Second)
	if !h.pending(ja) {
		t.Fatal("the join completed before the rebalance timeout while b had not rejoined")
	}
	h.advance(time.Second) // the 30 s rebalance timeout
	r := h.joined(ja)
	if r.ErrorCode != 0 || r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("join after the timeout = %v generation %d with %d members; want generation 2 with a alone", kerr.ErrorForCode(r.ErrorCode), r.Generation, len(r.Members))
	}
	wantCode(t, "Heartbeat(removed b)", h.heartbeat(b, 2), kerr.UnknownMemberID)
}

func TestSessionTimeout(t *testing.T) {
	h := newHarness(t)
	a, b := stableGroup(h)
	for range 4 { // a heartbeats every 3 s; b is silent
		h.advance(3 * time.Second)
		h.heartbeat(a, 1)
	}
	if h.state() != PreparingRebalance {
		t.Fatalf("state %v 12 s after b's last heartbeat (session 10 s); want PreparingRebalance", h.state())
	}
	wantCode(t, "Heartbeat(expired b)", h.heartbeat(b, 1), kerr.UnknownMemberID)
	ja := h.join(a, "")
	if r := h.joined(ja); r.Generation != 2 || len(r.Members) != 1 {
		t.Errorf("rejoin = generation %d with %d members; want 2 with 1", r.Generation, len(r.Members))
	}
}

func TestSyncTimeout(t *testing.T) {
	h := newHarness(t)
	a, _ := h.newMember()
	b, jb := h.newMember()
	h.advance(3 * time.Second)
	if h.joined(jb).Generation != 1 {
		t.Fatal("no generation 1")
	}
	sb := h.sync(b, 1, nil) // the follower syncs; the leader (a) never does
	h.advance(30 * time.Second)
	g, _ := h.c.Group("g")
	if _, ok := g.members[a]; ok || len(g.members) != 1 {
		t.Errorf("members after the sync timeout: %v; want only b, which synced", g.order)
	}
	if r, ok := h.replies[sb]; !ok || r.(*kmsg.SyncGroupResponse).ErrorCode != kerr.RebalanceInProgress.Code {
		t.Errorf("b's pending SyncGroup = %v; want REBALANCE_IN_PROGRESS", r)
	}
}

func TestLeaveGroupBatch(t *testing.T) {
	h := newHarness(t)
	a, b := stableGroup(h)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 5, "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: b}, {MemberID: "ghost"}}
	resp, out := h.c.LeaveGroup(h.now, req)
	h.apply(out)
	wantCode(t, "LeaveGroup top level", resp.ErrorCode, nil)
	wantCode(t, "LeaveGroup(b)", resp.Members[0].ErrorCode, nil)
	wantCode(t, "LeaveGroup(ghost)", resp.Members[1].ErrorCode, kerr.UnknownMemberID)
	if h.state() != PreparingRebalance {
		t.Errorf("state %v after a member left; want PreparingRebalance", h.state())
	}
	if r := h.joined(h.join(a, "")); r.Generation != 2 || len(r.Members) != 1 {
		t.Errorf("after the leave: generation %d with %d members; want 2 with 1", r.Generation, len(r.Members))
	}
}

func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	h := newHarness(t)
	j1 := h.join("", "inst-1") // static members get their id at once
	j2 := h.join("", "inst-2")
	h.advance(3 * time.Second)
	m1, m2 := h.joined(j1), h.joined(j2)
	if m1.ErrorCode != 0 || m2.ErrorCode != 0 {
		t.Fatalf("static joins = %v, %v", kerr.ErrorForCode(m1.ErrorCode), kerr.ErrorForCode(m2.ErrorCode))
	}
	h.sync(m1.MemberID, 1, map[string]string{m1.MemberID: "A", m2.MemberID: "B"})
	h.sync(m2.MemberID, 1, nil)
	// The follower restarts: it joins with its instance id and no member id.
	r := h.joined(h.join("", "inst-2"))
	if r.ErrorCode != 0 || r.Generation != 1 || r.MemberID == m2.MemberID || h.state() != Stable {
		t.Fatalf("static rejoin = %v generation %d member %s, state %v; want the same generation, a new id, still Stable",
			kerr.ErrorForCode(r.ErrorCode), r.Generation, r.MemberID, h.state())
	}
	sr := h.sync(r.MemberID, 1, nil)
	if got := string(h.replies[sr].(*kmsg.SyncGroupResponse).MemberAssignment); got != "B" {
		t.Errorf("the restarted static member's assignment = %q; want its old one, B", got)
	}
	inst := "inst-2"
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.Generation, req.InstanceID = 4, "g", m2.MemberID, 1, &inst
	wantCode(t, "Heartbeat(old member id of inst-2)", h.c.Heartbeat(h.now, req).ErrorCode, kerr.FencedInstanceID)
}

func TestOffsetsCommitFetchAndReload(t *testing.T) {
	h := newHarness(t)
	a, _ := stableGroup(h)
	commit := func(member string, gen int32, offset int64, metadata string) *kmsg.OffsetCommitResponse {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 8, "g", member, gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = 3, offset, &metadata
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, out := h.c.OffsetCommit(h.now, req)
		h.apply(out)
		return resp
	}
	wantCode(t, "OffsetCommit(member)", commit(a, 1, 42, "m").Topics[0].Partitions[0].ErrorCode, nil)
	wantCode(t, "OffsetCommit(stale generation)", commit(a, 0, 43, "").Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)
	wantCode(t, "OffsetCommit(generation -1 into a live group)", commit("", -1, 44, "").Topics[0].Partitions[0].ErrorCode, kerr.UnknownMemberID)
	big := string(make([]byte, 5000))
	wantCode(t, "OffsetCommit(huge metadata)", commit(a, 1, 45, big).Topics[0].Partitions[0].ErrorCode, kerr.OffsetMetadataTooLarge)

	fetch := func(c *Coordinator) (int64, string) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{3, 4}}}}}
		ps := c.OffsetFetch(req).Groups[0].Topics[0].Partitions
		if ps[1].Offset != -1 {
			t.Errorf("uncommitted partition offset = %d; want -1", ps[1].Offset)
		}
		return ps[0].Offset, *ps[0].Metadata
	}
	if off, md := fetch(h.c); off != 42 || md != "m" {
		t.Errorf("OffsetFetch = %d %q; want 42 \"m\"", off, md)
	}
	// A new coordinator replaying the records has the offsets and the group.
	c2 := New(DefaultConfig())
	for _, r := range h.records {
		if err := c2.Load(h.now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if off, md := fetch(c2); off != 42 || md != "m" {
		t.Errorf("after reload OffsetFetch = %d %q; want 42 \"m\"", off, md)
	}
	if g, ok := c2.Group("g"); !ok || g.State != Stable || g.Generation != 1 || len(g.members) != 2 {
		t.Errorf("after reload the group is %+v; want Stable generation 1 with 2 members", g)
	}
}

func TestStandaloneOffsetsExpire(t *testing.T) {
	h := newHarness(t)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "g", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}}}
	resp, out := h.c.OffsetCommit(h.now, req)
	h.apply(out)
	wantCode(t, "standalone OffsetCommit", resp.Topics[0].Partitions[0].ErrorCode, nil)
	h.now = h.now.Add(7*24*time.Hour - time.Second)
	h.apply(h.c.ExpireOffsets(h.now))
	if _, ok := h.c.Group("g"); !ok {
		t.Fatal("offsets expired before offsets.retention.minutes")
	}
	h.now = h.now.Add(time.Second)
	h.apply(h.c.ExpireOffsets(h.now))
	if _, ok := h.c.Group("g"); ok {
		t.Error("the group and its offsets are still there after offsets.retention.minutes")
	}
	if last := h.records[len(h.records)-1]; last.Value != nil {
		t.Error("expiry wrote no tombstone")
	}
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t)
	stableGroup(h)
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g", "none"}
	resp, _ := h.c.DeleteGroups(req)
	wantCode(t, "DeleteGroups(live group)", resp.Groups[0].ErrorCode, kerr.NonEmptyGroup)
	wantCode(t, "DeleteGroups(unknown)", resp.Groups[1].ErrorCode, kerr.GroupIDNotFound)
}

// TestAnswersDoNotShareGroupState: a connection encodes its answer after the coordinator has
// moved on, so an answer must not point into the group: here the group empties (its protocol
// becomes "") after the answers of its first generation were made.
func TestAnswersDoNotShareGroupState(t *testing.T) {
	h := newHarness(t)
	a, b := stableGroup(h)
	var answers []*string
	for _, r := range h.replies {
		switch r := r.(type) {
		case *kmsg.JoinGroupResponse:
			if r.ErrorCode == 0 {
				answers = append(answers, r.Protocol, r.ProtocolType)
			}
		case *kmsg.SyncGroupResponse:
			answers = append(answers, r.Protocol, r.ProtocolType)
		}
	}
	if len(answers) != 8 {
		t.Fatalf("%d protocol names in the answers; want 8 (2 joins and 2 syncs)", len(answers))
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 5, "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}, {MemberID: b}}
	_, out := h.c.LeaveGroup(h.now, req)
	h.apply(out)
	if g, _ := h.c.Group("g"); g.State != Empty || g.Protocol != "" {
		t.Fatalf("after both left: state %v, protocol %q; want Empty with none", g.State, g.Protocol)
	}
	for i, s := range answers {
		if want := []string{"range", "consumer"}[i%2]; s == nil {
			t.Errorf("answer name %d missing; want %q", i, want)
		} else if *s != want {
			t.Errorf("answer name %d = %q; want %q", i, *s, want)
		}
	}
}

// TestStaticLeaderRestartsWithoutRebalance: a static leader that restarts (joins with its
// instance id and no member id) does not rebalance a stable group, as in Kafka since KIP-814: a
// JoinGroup v9+ is told it leads, with every member's metadata and SkipAssignment; an older
// one is named as follower and takes its assignment from SyncGroup. Its metadata may differ
// (a cooperative consumer's lists the partitions it owns, none after a restart): only a change
// of the group's selected protocol rebalances. Before, a restarted static leader, or a static
// member whose metadata changed, always rebalanced the group.
func TestStaticLeaderRestartsWithoutRebalance(t *testing.T) {
	h := newHarness(t)
	joinAs := func(version int16, instance, metadata string, protocols ...string) *kmsg.JoinGroupResponse {
		h.next++
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.ProtocolType = version, "g", "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.InstanceID = 10000, 30000, &instance
		for _, p := range protocols {
			req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte(metadata)})
		}
		h.apply(h.c.JoinGroup(h.now, h.next, req, "client", "/127.0.0.1"))
		r, ok := h.replies[h.next]
		if !ok {
			return nil
		}
		return r.(*kmsg.JoinGroupResponse)
	}
	joinAs(9, "inst-1", "owned A", "cooperative-sticky", "range")
	joinAs(9, "inst-2", "owned B", "cooperative-sticky", "range")
	h.advance(3 * time.Second)
	g, _ := h.c.Group("g")
	leader, follower := g.Leader, g.static["inst-2"]
	if leader != g.static["inst-1"] {
		t.Fatalf("leader %s; want inst-1's member %s", leader, g.static["inst-1"])
	}
	h.sync(leader, 1, map[string]string{leader: "A", follower: "B"})
	h.sync(follower, 1, nil)

	// The leader restarts, its metadata now owning nothing, with JoinGroup v9.
	r := joinAs(9, "inst-1", "owned nothing", "cooperative-sticky", "range")
	if r == nil || r.ErrorCode != 0 || h.state() != Stable || r.Generation != 1 {
		t.Fatalf("the restarted leader's join (v9): %+v, state %v; want an answer at generation 1, still Stable", r, h.state())
	}
	if r.LeaderID != r.MemberID || !r.SkipAssignment || len(r.Members) != 2 || r.MemberID == leader {
		t.Errorf("v9 answer: leader %s, member %s (was %s), skip %v, %d members; want it named leader under its new id, SkipAssignment, 2 members",
			r.LeaderID, r.MemberID, leader, r.SkipAssignment, len(r.Members))
	}
	sr := h.sync(r.MemberID, 1, nil) // a leader that skipped the assignment sends none
	if got := string(h.replies[sr].(*kmsg.SyncGroupResponse).MemberAssignment); got != "A" {
		t.Errorf("the restarted leader's assignment %q; want its old one, A", got)
	}
	wantCode(t, "Heartbeat(follower) after the leader's restart", h.heartbeat(follower, 1), nil)

	// Again with JoinGroup v8: it is named follower (the leader id is its previous member id).
	prev := r.MemberID
	r = joinAs(8, "inst-1", "owned nothing", "cooperative-sticky", "range")
	if r == nil || r.ErrorCode != 0 || h.state() != Stable || r.Generation != 1 {
		t.Fatalf("the restarted leader's join (v8): %+v, state %v; want an answer at generation 1, still Stable", r, h.state())
	}
	if r.LeaderID != prev || r.MemberID == prev || len(r.Members) != 0 || r.SkipAssignment {
		t.Errorf("v8 answer: leader %s, member %s, %d members; want the leader named %s (its old id), no members", r.LeaderID, r.MemberID, len(r.Members), prev)
	}
	sr = h.sync(r.MemberID, 1, nil)
	if got := string(h.replies[sr].(*kmsg.SyncGroupResponse).MemberAssignment); got != "A" {
		t.Errorf("assignment after the v8 restart %q; want A", got)
	}

	// A restart that changes the selected protocol (the follower now supports only range)
	// rebalances.
	r = joinAs(9, "inst-2", "owned nothing", "range")
	if h.state() != PreparingRebalance || r != nil {
		t.Errorf("a member restarted supporting only range: state %v, answered %v; want a rebalance, the join waiting", h.state(), r != nil)
	}
}

// TestOffsetCommitToAnUnknownGroup: a commit with a generation to a group that does not exist
// is GROUP_ID_NOT_FOUND from OffsetCommit v9 and ILLEGAL_GENERATION before, as Kafka's
// validateOffsetCommit (it was ILLEGAL_GENERATION at every version, so a consumer of the new
// protocol whose group was deleted took it for a rejoin).
func TestOffsetCommitToAnUnknownGroup(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		version int16
		want    *kerr.Error
	}{{8, kerr.IllegalGeneration}, {9, kerr.GroupIDNotFound}, {10, kerr.GroupIDNotFound}} {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation, req.MemberID = tc.version, "gone", 1, "x"
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}}}
		resp, out := h.c.OffsetCommit(h.now, req)
		h.apply(out)
		wantCode(t, fmt.Sprintf("OffsetCommit v%d to an unknown group", tc.version), resp.Topics[0].Partitions[0].ErrorCode, tc.want)
	}
}
