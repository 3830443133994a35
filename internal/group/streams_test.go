package group

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsHarness drives a coordinator with Kafka Streams-shaped heartbeats. Its topics map can
// change between calls (internal topics created, partitions added).
type streamsHarness struct {
	*harness
	topics map[string]TopicMeta
	create []InternalTopic // the last heartbeat's topics to create
}

func newStreamsHarness(t *testing.T) *streamsHarness {
	h := &streamsHarness{harness: newHarness(t), topics: map[string]TopicMeta{
		"in": {ID: [16]byte{1}, Partitions: 4}, "other": {ID: [16]byte{2}, Partitions: 2}}}
	h.c.cfg.StreamsInitialRebalanceDelay = 0 // TestStreamsGroupInitialDelay sets it
	h.c.cfg.StreamsAssignmentInterval = 0    // TestStreamsGroupAssignmentInterval sets it
	h.c.Topics = func() map[string]TopicMeta {
		out := make(map[string]TopicMeta, len(h.topics))
		for k, v := range h.topics {
			out[k] = v
		}
		return out
	}
	return h
}

// wordCount is a two-subtopology topology like Kafka Streams' word count: subtopology 0 reads
// "in" and writes the repartition topic; subtopology 1 reads it and keeps a store.
func wordCount() *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	s0 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s0.SubtopologyID, s0.SourceTopics, s0.RepartitionSinkTopics = "0", []string{"in"}, []string{"app-regroup-repartition"}
	s1 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s1.SubtopologyID = "1"
	s1.RepartitionSourceTopics = []kmsg.TopicInfo{{Topic: "app-regroup-repartition", Configs: []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "delete"}}}}
	s1.StateChangelogTopics = []kmsg.TopicInfo{{Topic: "app-totals-changelog", Configs: []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "compact"}}}}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s0, s1}
	return &t
}

// createInternal creates what the last heartbeat asked for.
func (h *streamsHarness) createInternal() {
	for i, it := range h.create {
		h.topics[it.Name] = TopicMeta{ID: [16]byte{9, byte(i), byte(len(h.topics))}, Partitions: it.Partitions}
	}
	h.create = nil
}

// shb sends a StreamsGroupHeartbeat. owned nil reports nothing (unchanged); on a join the
// topology is sent.
func (h *streamsHarness) shb(member, process string, epoch int32, owned *streamsOwned) *kmsg.StreamsGroupHeartbeatResponse {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.EndpointInformationEpoch = "app", member, epoch, -1
	if epoch == 0 {
		req.Topology, req.RebalanceTimeoutMillis, req.ProcessID = wordCount(), 300000, &process
		owned = &streamsOwned{}
	}
	if owned != nil {
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = taskIDs(owned.active), taskIDs(owned.standby), []kmsg.TaskIDs{}
	}
	resp, out, create := h.c.StreamsGroupHeartbeat(h.now, req, "client", "/127.0.0.1")
	h.apply(out)
	h.create = create
	return resp
}

type streamsOwned struct{ active, standby streamsTasks }

func tasksOf(ids []kmsg.TaskIDs) streamsTasks {
	out := streamsTasks{}
	for _, t := range ids {
		for _, p := range t.Partitions {
			out.add(t.SubtopologyID, p)
		}
	}
	return out
}

func statusCodes(resp *kmsg.StreamsGroupHeartbeatResponse) []int8 {
	var out []int8
	for _, s := range resp.Status {
		out = append(out, s.StatusCode)
	}
	return out
}

// TestStreamsTopologyConfiguration: the task counts and internal topics a topology needs, and
// the statuses while it is not ready, worded as Kafka's (Kafka Streams logs them).
func TestStreamsTopologyConfiguration(t *testing.T) {
	topo, err := newStreamsTopology(wordCount())
	if err != nil {
		t.Fatal(err)
	}
	topics := map[string]TopicMeta{"in": {Partitions: 4}}
	ct := configure(topo, topics)
	if ct.ready() || len(ct.create) != 2 || ct.status[0].code != streamsMissingInternal ||
		ct.status[0].detail != "Internal topics are missing: app-regroup-repartition, app-totals-changelog" {
		t.Fatalf("internal topics missing: ready %v, create %v, status %v", ct.ready(), ct.create, ct.status)
	}
	for _, it := range ct.create {
		if it.Partitions != 4 {
			t.Errorf("%s: %d partitions, want 4 (the repartition topic takes its writer's source's count, the changelog one per task)", it.Name, it.Partitions)
		}
	}
	topics["app-regroup-repartition"] = TopicMeta{Partitions: 4}
	topics["app-totals-changelog"] = TopicMeta{Partitions: 4}
	if ct = configure(topo, topics); !ct.ready() || ct.tasks["0"] != 4 || ct.tasks["1"] != 4 {
		t.Fatalf("all topics there: ready %v status %v tasks %v", ct.ready(), ct.status, ct.tasks)
	}
	topics["app-totals-changelog"] = TopicMeta{Partitions: 3}
	if ct = configure(topo, topics); ct.ready() || ct.status[0].code != streamsIncorrectPartitions ||
		ct.status[0].detail != "Existing topic app-totals-changelog has different number of partitions: expected 4, found 3" {
		t.Fatalf("a changelog of the wrong size: status %v", ct.status)
	}
	delete(topics, "in")
	if ct = configure(topo, topics); ct.ready() || ct.status[0].code != streamsMissingSources || !strings.Contains(ct.status[0].detail, "in") {
		t.Fatalf("source missing: status %v", ct.status)
	}
	if got := summarizeTopics([]string{"a", "b", "c", "d", "e"}); got != "a, b, c and 2 additional topics" {
		t.Fatalf("five topics summarized as %q", got)
	}
	// A fixed repartition count wins; copartitioned sources must agree.
	req := wordCount()
	req.Subtopologies[1].RepartitionSourceTopics[0].NumPartitions = 7
	req.Subtopologies[0].SourceTopics = []string{"in", "other"}
	req.Subtopologies[0].CopartitionGroups = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup{{SourceTopics: []int16{0, 1}}}
	topo, err = newStreamsTopology(req)
	if err != nil {
		t.Fatal(err)
	}
	ct = configure(topo, map[string]TopicMeta{"in": {Partitions: 4}, "other": {Partitions: 2}})
	if ct.ready() || ct.status[0].code != streamsIncorrectPartitions ||
		ct.status[0].detail != "Following topics do not have the same number of partitions: [{in=4, other=2}]" {
		t.Fatalf("copartitioned 4 and 2: status %v", ct.status)
	}
	ct = configure(topo, map[string]TopicMeta{"in": {Partitions: 4}, "other": {Partitions: 4}})
	if ct.tasks["1"] != 7 || ct.tasks["0"] != 4 {
		t.Fatalf("fixed repartition count: tasks %v, want 0:4 1:7", ct.tasks)
	}
	// Invalid topologies.
	bad := wordCount()
	bad.Subtopologies[1].StateChangelogTopics[0].NumPartitions = 3
	if _, err := newStreamsTopology(bad); err == nil || !strings.Contains(err.Error(), "undefined partition count") {
		t.Errorf("a changelog with a partition count: %v", err)
	}
	bad = wordCount()
	bad.Subtopologies[0].RepartitionSinkTopics = []string{"nowhere"}
	if _, err := newStreamsTopology(bad); err != nil { // as Kafka 4.3: no such check
		t.Errorf("a repartition sink no subtopology reads was refused: %v", err)
	}
}

func TestStreamsGroupJoinCreatesTopicsAndAssigns(t *testing.T) {
	h := newStreamsHarness(t)
	r := h.shb("m1", "p1", 0, nil)
	if r.ErrorCode != 0 || !slices.Equal(statusCodes(r), []int8{streamsMissingInternal}) || len(h.create) != 2 || tasksOf(r.ActiveTasks).size() != 0 {
		t.Fatalf("join before the internal topics exist: error %d status %v create %v tasks %v", r.ErrorCode, r.Status, h.create, r.ActiveTasks)
	}
	if g, _ := h.c.Group("app"); g.streamsStateName() != "NotReady" {
		t.Fatalf("state %s, want NotReady", g.streamsStateName())
	}
	h.createInternal()
	r = h.shb("m1", "", r.MemberEpoch, &streamsOwned{streamsTasks{}, streamsTasks{}})
	if len(r.Status) != 0 || tasksOf(r.ActiveTasks).size() != 8 {
		t.Fatalf("after the topics came: status %v tasks %v, want all 8 tasks", r.Status, r.ActiveTasks)
	}
	g, _ := h.c.Group("app")
	if g.streamsStateName() != "Stable" {
		t.Fatalf("state %s, want Stable", g.streamsStateName())
	}
	if r2 := h.shb("m1", "", r.MemberEpoch, nil); r2.ActiveTasks != nil {
		t.Fatalf("an unchanged assignment was sent again: %v", r2.ActiveTasks)
	}
}

// TestStreamsGroupJoinWithoutProcessID: as Kafka, a join need not name a process; the member
// is described with "" and gets tasks like any other.
func TestStreamsGroupJoinWithoutProcessID(t *testing.T) {
	h := newStreamsHarness(t)
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.EndpointInformationEpoch = "app", "m1", -1
	req.Topology, req.RebalanceTimeoutMillis = wordCount(), 300000
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	r, out, create := h.c.StreamsGroupHeartbeat(h.now, req, "client", "/127.0.0.1")
	h.apply(out)
	h.create = create
	if r.ErrorCode != 0 {
		t.Fatalf("join without a process id: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	h.createInternal()
	if r = h.shb("m1", "", r.MemberEpoch, &streamsOwned{streamsTasks{}, streamsTasks{}}); tasksOf(r.ActiveTasks).size() != 8 {
		t.Fatalf("tasks %v, want all 8", r.ActiveTasks)
	}
	d := h.c.StreamsGroupDescribe(&kmsg.StreamsGroupDescribeRequest{Groups: []string{"app"}})
	if len(d.Groups) != 1 || len(d.Groups[0].Members) != 1 || d.Groups[0].Members[0].ProcessID != "" {
		t.Fatalf("described: %+v", d.Groups)
	}
}

// TestStreamsGroupRevokesBeforeGranting: a second instance joins; the first gives up half its
// tasks, and only after it reported them gone does the second get them.
func TestStreamsGroupRevokesBeforeGranting(t *testing.T) {
	h := newStreamsHarness(t)
	r1 := h.shb("m1", "p1", 0, nil)
	h.createInternal()
	r1 = h.shb("m1", "", r1.MemberEpoch, &streamsOwned{streamsTasks{}, streamsTasks{}})
	all := tasksOf(r1.ActiveTasks)
	r2 := h.shb("m2", "p2", 0, nil)
	if tasksOf(r2.ActiveTasks).size() != 0 {
		t.Fatalf("m2 got %v while m1 owns everything", r2.ActiveTasks)
	}
	e1 := r1.MemberEpoch
	r1 = h.shb("m1", "", e1, &streamsOwned{all, streamsTasks{}})
	kept := tasksOf(r1.ActiveTasks)
	if r1.MemberEpoch != e1 || kept.size() != 4 {
		t.Fatalf("m1 told to revoke: epoch %d (want %d, unchanged) keeps %v", r1.MemberEpoch, e1, kept)
	}
	if g, _ := h.c.Group("app"); g.streamsStateName() != "Reconciling" {
		t.Fatalf("state %s, want Reconciling", g.streamsStateName())
	}
	r2 = h.shb("m2", "", r2.MemberEpoch, nil)
	if tasksOf(r2.ActiveTasks).size() != 0 {
		t.Fatalf("m2 got %v before m1 revoked", r2.ActiveTasks)
	}
	r1 = h.shb("m1", "", r1.MemberEpoch, &streamsOwned{kept, streamsTasks{}})
	if r1.MemberEpoch <= e1 {
		t.Fatalf("m1's epoch %d did not move after revoking", r1.MemberEpoch)
	}
	r2 = h.shb("m2", "", r2.MemberEpoch, nil)
	got := tasksOf(r2.ActiveTasks)
	if got.size() != 4 || got.intersect(kept).size() != 0 {
		t.Fatalf("m2 got %v, m1 kept %v", got, kept)
	}
	if g, _ := h.c.Group("app"); g.streamsStateName() != "Stable" {
		t.Fatalf("state %s, want Stable", g.streamsStateName())
	}
	// An older instance's commit of the previous epoch for a task it gave up is stale.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.MemberID, commit.Generation = 9, "app", "m1", r1.MemberEpoch
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: kept["0"][0], Offset: 5}}}}
	if resp, out := h.c.OffsetCommit(h.now, commit); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("a commit at the member's epoch: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	} else {
		h.apply(out)
	}
	commit.Generation = r1.MemberEpoch + 1
	if resp, _ := h.c.OffsetCommit(h.now, commit); resp.Topics[0].Partitions[0].ErrorCode != kerr.StaleMemberEpoch.Code {
		t.Fatalf("a commit of a future epoch: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	// m2 leaves: m1 gets everything back.
	if r := h.shb("m2", "", r2.MemberEpoch-0, nil); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	leave := h.shb("m2", "", -1, nil)
	if leave.ErrorCode != 0 || leave.MemberEpoch != -1 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(leave.ErrorCode))
	}
	r1 = h.shb("m1", "", r1.MemberEpoch, nil)
	if tasksOf(r1.ActiveTasks).size() != 8 {
		t.Fatalf("after m2 left, m1 has %v", r1.ActiveTasks)
	}
}

func TestStreamsGroupStandbys(t *testing.T) {
	h := newStreamsHarness(t)
	h.c.cfg.StreamsStandbyReplicas = 1
	for _, it := range []InternalTopic{{Name: "app-regroup-repartition", Partitions: 4}, {Name: "app-totals-changelog", Partitions: 4}} {
		h.topics[it.Name] = TopicMeta{ID: [16]byte{7, byte(len(h.topics))}, Partitions: it.Partitions}
	}
	// Two processes of two threads each.
	ids := []struct{ m, p string }{{"a1", "A"}, {"a2", "A"}, {"b1", "B"}, {"b2", "B"}}
	epochs, owned := map[string]int32{}, map[string]*streamsOwned{}
	for _, x := range ids {
		r := h.shb(x.m, x.p, 0, nil)
		epochs[x.m], owned[x.m] = r.MemberEpoch, &streamsOwned{tasksOf(r.ActiveTasks), tasksOf(r.StandbyTasks)}
	}
	for round := 0; round < 6; round++ {
		for _, x := range ids {
			r := h.shb(x.m, "", epochs[x.m], owned[x.m])
			if r.ErrorCode != 0 {
				t.Fatalf("%s: %v %s", x.m, kerr.ErrorForCode(r.ErrorCode), *r.ErrorMessage)
			}
			epochs[x.m] = r.MemberEpoch
			if r.ActiveTasks != nil {
				owned[x.m] = &streamsOwned{tasksOf(r.ActiveTasks), tasksOf(r.StandbyTasks)}
			}
		}
	}
	g, _ := h.c.Group("app")
	if g.streamsStateName() != "Stable" {
		t.Fatalf("state %s after six rounds", g.streamsStateName())
	}
	process := map[string]string{"a1": "A", "a2": "A", "b1": "B", "b2": "B"}
	for p := int32(0); p < 4; p++ {
		var active, standby []string
		for m, o := range owned {
			if o.active.has("1", p) {
				active = append(active, process[m])
			}
			if o.standby.has("1", p) {
				standby = append(standby, process[m])
			}
			if o.standby.has("0", p) {
				t.Errorf("stateless task 0_%d has a standby on %s", p, m)
			}
		}
		if len(active) != 1 || len(standby) != 1 || active[0] == standby[0] {
			t.Errorf("task 1_%d: active on %v, standby on %v; want one each, on different processes", p, active, standby)
		}
	}
	for m, o := range owned {
		if o.active.size() != 2 {
			t.Errorf("%s has %d active tasks, want 2 (8 tasks over 4 members)", m, o.active.size())
		}
	}
}

// TestStreamsGroupPersists: a coordinator replaying the records carries the group on.
func TestStreamsGroupPersists(t *testing.T) {
	h := newStreamsHarness(t)
	r1 := h.shb("m1", "p1", 0, nil)
	h.createInternal()
	r1 = h.shb("m1", "", r1.MemberEpoch, &streamsOwned{streamsTasks{}, streamsTasks{}})
	h.shb("m2", "p2", 0, nil)
	h.shb("m1", "", r1.MemberEpoch, &streamsOwned{tasksOf(r1.ActiveTasks), streamsTasks{}})
	c2 := New(DefaultConfig())
	c2.Topics = h.c.Topics
	for _, rec := range h.records {
		if err := c2.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	d1 := h.c.StreamsGroupDescribe(&kmsg.StreamsGroupDescribeRequest{Groups: []string{"app"}})
	d2 := c2.StreamsGroupDescribe(&kmsg.StreamsGroupDescribeRequest{Groups: []string{"app"}})
	if a, b := fmt.Sprintf("%+v", d1.Groups[0].Members), fmt.Sprintf("%+v", d2.Groups[0].Members); a != b {
		t.Fatalf("members after a reload:\n%s\nwant\n%s", b, a)
	}
	if d1.Groups[0].Epoch != d2.Groups[0].Epoch || d2.Groups[0].Topology == nil || len(d2.Groups[0].Topology.Subtopologies) != 2 {
		t.Fatalf("reloaded: epoch %d topology %+v", d2.Groups[0].Epoch, d2.Groups[0].Topology)
	}
	// The group is deleted once empty: its record goes.
	h.shb("m1", "", -1, nil)
	h.shb("m2", "", -1, nil)
	resp, out := h.c.DeleteGroups(&kmsg.DeleteGroupsRequest{Groups: []string{"app"}})
	if resp.Groups[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(resp.Groups[0].ErrorCode))
	}
	h.apply(out)
	c3 := New(DefaultConfig())
	for _, rec := range h.records {
		if err := c3.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c3.Group("app"); ok {
		t.Fatal("a deleted streams group came back on replay")
	}
}

func TestStreamsGroupTypeConflicts(t *testing.T) {
	h := newStreamsHarness(t)
	h.shb("m1", "p1", 0, nil)
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Group, cg.MemberID, cg.RebalanceTimeoutMillis, cg.SubscribedTopicNames = "app", "c1", 1000, []string{"in"}
	cg.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp, _ := h.c.ConsumerGroupHeartbeat(h.now, cg, "c", "/h"); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("a consumer member in a streams group: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	list := h.c.ListGroups(&kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"streams"}})
	if len(list.Groups) != 1 || list.Groups[0].GroupType != "streams" || list.Groups[0].GroupState != "NotReady" {
		t.Errorf("ListGroups: %+v", list.Groups)
	}
	list = h.c.ListGroups(&kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"not_ready"}})
	if len(list.Groups) != 1 {
		t.Errorf("ListGroups by state not_ready: %+v", list.Groups)
	}
	// A different topology of the same epoch while members run: refused, as Kafka.
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.RebalanceTimeoutMillis, req.Topology = "app", "m2", 1000, wordCount()
	p := "p2"
	req.ProcessID = &p
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	req.Topology.Subtopologies[0].SourceTopics = []string{"other"}
	if resp, _, _ := h.c.StreamsGroupHeartbeat(h.now, req, "c", "/h"); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("a topology update: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	req.ActiveTasks = nil
	if resp, _, _ := h.c.StreamsGroupHeartbeat(h.now, req, "c", "/h"); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("one task list null, the others not: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestStreamsGroupSessionExpiry: a member that stops heartbeating is removed after the
// session timeout and its tasks go to the others.
func TestStreamsGroupSessionExpiry(t *testing.T) {
	h := newStreamsHarness(t)
	r1 := h.shb("m1", "p1", 0, nil)
	h.createInternal()
	r1 = h.shb("m1", "", r1.MemberEpoch, &streamsOwned{streamsTasks{}, streamsTasks{}})
	r2 := h.shb("m2", "p2", 0, nil)
	h.now = h.now.Add(44 * time.Second)
	h.shb("m2", "", r2.MemberEpoch, nil)
	h.apply(h.c.Tick(h.now))
	h.now = h.now.Add(2 * time.Second)
	h.apply(h.c.Tick(h.now))
	g, _ := h.c.Group("app")
	if _, ok := g.streams.members["m1"]; ok {
		t.Fatal("m1 outlived its session")
	}
	r2 = h.shb("m2", "", r2.MemberEpoch, &streamsOwned{streamsTasks{}, streamsTasks{}})
	if tasksOf(r2.ActiveTasks).size() != 8 {
		t.Fatalf("m2 has %v after m1 expired", r2.ActiveTasks)
	}
	if r := h.shb("m1", "", r1.MemberEpoch, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("the expired member's heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestStreamsGroupSimulation runs random schedules of members that join, heartbeat, lose
// answers, stall past their session and leave, against a coordinator that is also replayed
// from its records now and then; the coordinator must never let two live members own one
// active task (what each member's client believes it owns), and once the schedule calms down
// every task must be owned exactly once.
func TestStreamsGroupSimulation(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		runStreamsSimulation(t, seed)
	}
}

type simMember struct {
	id, process string
	epoch       int32
	owned       streamsOwned
	full        bool // the last answer was lost: report everything next time
	joined      bool
}

func runStreamsSimulation(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	h := newStreamsHarness(t)
	h.c.cfg.StreamsStandbyReplicas = int(seed % 3)
	if seed%2 == 0 {
		h.c.cfg.StreamsInitialRebalanceDelay = 3 * time.Second
	}
	if seed%3 == 0 {
		h.c.cfg.StreamsAssignmentInterval = time.Second
	}
	var ms []*simMember
	for i := range 2 + rng.IntN(5) {
		ms = append(ms, &simMember{id: fmt.Sprintf("m%d", i), process: fmt.Sprintf("p%d", i%3)})
	}
	step := func(m *simMember, lose bool) {
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.EndpointInformationEpoch = "app", m.id, m.epoch, -1
		if !m.joined {
			req.MemberEpoch, req.Topology, req.RebalanceTimeoutMillis, req.ProcessID = 0, wordCount(), 300000, &m.process
			m.owned = streamsOwned{streamsTasks{}, streamsTasks{}}
		}
		if !m.joined || m.full || rng.IntN(3) == 0 {
			req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = taskIDs(m.owned.active), taskIDs(m.owned.standby), []kmsg.TaskIDs{}
		}
		resp, out, create := h.c.StreamsGroupHeartbeat(h.now, req, "c", "/h")
		h.apply(out)
		if len(create) > 0 {
			h.create = create
			if rng.IntN(2) == 0 {
				h.createInternal()
			}
		}
		if lose {
			m.full = true
			return
		}
		m.full = false
		switch resp.ErrorCode {
		case 0:
		case kerr.UnknownMemberID.Code, kerr.FencedMemberEpoch.Code:
			m.joined, m.epoch, m.owned = false, 0, streamsOwned{streamsTasks{}, streamsTasks{}}
			return
		default:
			t.Fatalf("seed %d: %s: %v %v", seed, m.id, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
		}
		if resp.MemberEpoch == -1 {
			m.joined, m.epoch, m.owned = false, 0, streamsOwned{streamsTasks{}, streamsTasks{}}
			return
		}
		m.joined, m.epoch = true, resp.MemberEpoch
		if resp.ActiveTasks != nil {
			m.owned = streamsOwned{tasksOf(resp.ActiveTasks), tasksOf(resp.StandbyTasks)}
		}
	}
	check := func(when string) {
		g, ok := h.c.Group("app")
		if !ok || g.streams == nil {
			return
		}
		owner := map[streamsTask]string{}
		for _, m := range ms {
			if !m.joined || g.streams.members[m.id] == nil {
				continue // fenced or gone: the coordinator no longer counts on it
			}
			for s, ps := range m.owned.active {
				for _, p := range ps {
					if o, dup := owner[streamsTask{s, p}]; dup {
						t.Fatalf("seed %d %s: task %s_%d owned by %s and %s", seed, when, s, p, o, m.id)
					}
					owner[streamsTask{s, p}] = m.id
				}
			}
		}
	}
	for i := 0; i < 400; i++ {
		m := ms[rng.IntN(len(ms))]
		switch r := rng.IntN(100); {
		case r < 3 && m.joined: // leave
			m.epoch = -1
			step(m, false)
			m.joined, m.epoch, m.owned = false, 0, streamsOwned{streamsTasks{}, streamsTasks{}}
		case r < 5: // time passes: some sessions may expire
			h.now = h.now.Add(time.Duration(rng.IntN(50)) * time.Second)
			h.apply(h.c.Tick(h.now))
		case r < 7: // the coordinator moves: a new one replays the records (compacted)
			last := map[string]int{}
			for i, rec := range h.records {
				last[string(rec.Key)] = i
			}
			kept := h.records[:0]
			for i, rec := range h.records {
				if last[string(rec.Key)] == i {
					kept = append(kept, rec)
				}
			}
			h.records = kept
			c2 := New(h.c.cfg)
			c2.Topics = h.c.Topics
			for _, rec := range h.records {
				if err := c2.Load(h.now, rec.Key, rec.Value); err != nil {
					t.Fatalf("seed %d: replay: %v", seed, err)
				}
			}
			h.c = c2
		default:
			step(m, rng.IntN(10) == 0)
		}
		check(fmt.Sprintf("step %d", i))
	}
	// Calm: everyone joins and heartbeats with its full state until stable.
	h.createInternal()
	h.now = h.now.Add(4 * time.Second) // past any initial delay
	h.apply(h.c.Tick(h.now))
	for round := 0; round < 20; round++ {
		h.now = h.now.Add(time.Second) // a group emptied and joined again waits its delay
		h.apply(h.c.Tick(h.now))
		for _, m := range ms {
			m.full = true
			step(m, false)
			check(fmt.Sprintf("calm round %d", round))
		}
	}
	g, _ := h.c.Group("app")
	if s := g.streamsStateName(); s != "Stable" {
		t.Fatalf("seed %d: %s after calm rounds", seed, s)
	}
	seen := streamsTasks{}
	for _, m := range ms {
		for s, ps := range m.owned.active {
			for _, p := range ps {
				seen.add(s, p)
			}
		}
	}
	if seen.size() != 8 {
		t.Fatalf("seed %d: after calm rounds the members own %v, want all 8 tasks", seed, seen)
	}
}

// TestStreamsGroupEndpointsAndShutdown: members with an application.server endpoint learn which
// partitions each endpoint serves when their endpoint epoch is behind; a member asking for the
// application's shutdown makes every member's answer carry SHUTDOWN_APPLICATION until the
// group empties.
func TestStreamsGroupEndpointsAndShutdown(t *testing.T) {
	h := newStreamsHarness(t)
	for _, it := range []string{"app-regroup-repartition", "app-totals-changelog"} {
		h.topics[it] = TopicMeta{ID: [16]byte{8, byte(len(h.topics))}, Partitions: 4}
	}
	join := func(member, process string, port uint16) *kmsg.StreamsGroupHeartbeatResponse {
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID, req.EndpointInformationEpoch = "app", member, -1
		req.Topology, req.RebalanceTimeoutMillis, req.ProcessID = wordCount(), 300000, &process
		req.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "h", Port: port}
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		resp, out, _ := h.c.StreamsGroupHeartbeat(h.now, req, "c", "/h")
		h.apply(out)
		return resp
	}
	r1 := join("m1", "p1", 1)
	if len(r1.PartitionsByUserEndpoint) != 1 || r1.PartitionsByUserEndpoint[0].UserEndpoint.Port != 1 {
		t.Fatalf("m1's endpoints: %+v", r1.PartitionsByUserEndpoint)
	}
	byTopic := map[string][]int32{}
	for _, ap := range r1.PartitionsByUserEndpoint[0].ActivePartitions {
		byTopic[ap.Topic] = ap.Partitions
	}
	if !slices.Equal(byTopic["in"], []int32{0, 1, 2, 3}) || !slices.Equal(byTopic["app-regroup-repartition"], []int32{0, 1, 2, 3}) || len(byTopic) != 2 {
		t.Fatalf("m1's endpoint serves %v; want in and the repartition topic, all partitions", byTopic)
	}
	epoch := r1.EndpointInformationEpoch
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.EndpointInformationEpoch = "app", "m1", r1.MemberEpoch, epoch
	if resp, _, _ := h.c.StreamsGroupHeartbeat(h.now, req, "c", "/h"); resp.PartitionsByUserEndpoint != nil {
		t.Fatalf("an up-to-date member got the endpoints again: %+v", resp.PartitionsByUserEndpoint)
	}
	r2 := join("m2", "p2", 2)
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = r1.ActiveTasks, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	resp, out, _ := h.c.StreamsGroupHeartbeat(h.now, req, "c", "/h") // m1 gives up half
	h.apply(out)
	if resp.EndpointInformationEpoch <= epoch || len(resp.PartitionsByUserEndpoint) != 2 {
		t.Fatalf("after m1 gave tasks up: endpoint epoch %d (was %d), endpoints %+v", resp.EndpointInformationEpoch, epoch, resp.PartitionsByUserEndpoint)
	}
	// m2 asks for the application's shutdown: m1 hears of it.
	sd := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	sd.Group, sd.MemberID, sd.MemberEpoch, sd.ShutdownApplication = "app", "m2", r2.MemberEpoch, true
	if resp, _, _ := h.c.StreamsGroupHeartbeat(h.now, sd, "c", "/h"); !slices.Contains(statusCodes(resp), streamsShutdownApplication) {
		t.Fatalf("the requester's answer: %+v", resp.Status)
	}
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = nil, nil, nil
	req.MemberEpoch = resp.MemberEpoch
	if resp, _, _ := h.c.StreamsGroupHeartbeat(h.now, req, "c", "/h"); !slices.Contains(statusCodes(resp), streamsShutdownApplication) ||
		!strings.Contains(resp.Status[len(resp.Status)-1].StatusDetail, "m2") {
		t.Fatalf("m1 was not told to shut down: %+v", resp.Status)
	}
	h.shb("m1", "", -1, nil)
	h.shb("m2", "", -1, nil)
	if r := h.shb("m3", "p3", 0, nil); slices.Contains(statusCodes(r), streamsShutdownApplication) {
		t.Fatalf("a new member of the emptied group is told to shut down: %+v", r.Status)
	}
}

// TestStreamsAssignorBalanceAndStickiness: shares are recomputed as members fill (4 tasks over
// 3 members: 2, 1, 1, keeping what each had), a member's tasks spread over the subtopologies,
// and a new process gets standbys and actives of its own.
func TestStreamsAssignorBalanceAndStickiness(t *testing.T) {
	mk := func(id, process string) *streamsMember { return &streamsMember{ID: id, ProcessID: process} }
	m1, m2, m3 := mk("m1", "p1"), mk("m2", "p2"), mk("m3", "p3")
	prev := assignStreams([]*streamsMember{m1, m2}, map[string]int32{"0": 4}, nil, 0, nil)
	got := assignStreams([]*streamsMember{m1, m2, m3}, map[string]int32{"0": 4}, nil, 0, prev)
	sizes := []int{got["m1"].Active.size(), got["m2"].Active.size(), got["m3"].Active.size()}
	if slices.Max(sizes) != 2 || slices.Min(sizes) != 1 {
		t.Fatalf("4 tasks over 3 members: %v", sizes)
	}
	for _, m := range []string{"m1", "m2"} {
		if got[m].Active.minus(prev[m].Active).size() != 0 {
			t.Errorf("%s had %v, now %v: a task moved between two members that stayed", m, prev[m].Active, got[m].Active)
		}
	}
	// Word count: a fresh assignment and a second instance joining both give each member half
	// of each subtopology, not one subtopology.
	tasks := map[string]int32{"0": 4, "1": 4}
	fresh := assignStreams([]*streamsMember{m1, m2}, tasks, map[string]bool{"1": true}, 0, nil)
	for _, m := range []string{"m1", "m2"} {
		if len(fresh[m].Active["0"]) != 2 || len(fresh[m].Active["1"]) != 2 {
			t.Errorf("fresh, %s: %v; want two tasks of each subtopology", m, fresh[m].Active)
		}
	}
	prev = assignStreams([]*streamsMember{m1}, tasks, map[string]bool{"1": true}, 0, nil)
	got = assignStreams([]*streamsMember{m1, m2}, tasks, map[string]bool{"1": true}, 0, prev)
	for _, m := range []string{"m1", "m2"} {
		if len(got[m].Active["0"]) != 2 || len(got[m].Active["1"]) != 2 {
			t.Errorf("%s: %v; want two tasks of each subtopology", m, got[m].Active)
		}
	}
	// One standby, processes 2 → 3: the new process gets work of both kinds.
	prev = assignStreams([]*streamsMember{m1, m2}, map[string]int32{"1": 4}, map[string]bool{"1": true}, 1, nil)
	got = assignStreams([]*streamsMember{m1, m2, m3}, map[string]int32{"1": 4}, map[string]bool{"1": true}, 1, prev)
	if got["m3"].Active.size() == 0 || got["m3"].Standby.size() == 0 {
		t.Errorf("the new process: %+v; want actives and standbys", got["m3"])
	}
	for p := int32(0); p < 4; p++ {
		var active, standby string
		for _, m := range []*streamsMember{m1, m2, m3} {
			if got[m.ID].Active.has("1", p) {
				active += m.ProcessID
			}
			if got[m.ID].Standby.has("1", p) {
				standby += m.ProcessID
			}
		}
		if len(active) != 2 || len(standby) != 2 || active == standby {
			t.Errorf("task 1_%d: active on %q, standby on %q", p, active, standby)
		}
	}
	total := 0
	for _, m := range []string{"m1", "m2", "m3"} {
		if n := got[m].Active.size() + got[m].Standby.size(); n < 2 || n > 3 {
			t.Errorf("%s holds %d tasks; want 2 or 3 of the 8", m, n)
		}
		total += got[m].Active.size()
	}
	if total != 4 {
		t.Errorf("%d active tasks assigned, want 4", total)
	}
}

// TestStreamsGroupInitialDelay: a group a member joins empty waits the initial rebalance delay
// (ASSIGNMENT_DELAYED, epoch 1, no task) so the instances starting with it join first; when it
// ends (a tick) the tasks are assigned over every member at once.
func TestStreamsGroupInitialDelay(t *testing.T) {
	h := newStreamsHarness(t)
	h.c.cfg.StreamsInitialRebalanceDelay = 3 * time.Second
	for _, it := range []string{"app-regroup-repartition", "app-totals-changelog"} {
		h.topics[it] = TopicMeta{ID: [16]byte{8, byte(len(h.topics))}, Partitions: 4}
	}
	r1 := h.shb("m1", "p1", 0, nil)
	if r1.MemberEpoch != 1 || tasksOf(r1.ActiveTasks).size() != 0 || !slices.Equal(statusCodes(r1), []int8{streamsAssignmentDelayed}) {
		t.Fatalf("the first member: epoch %d tasks %v status %v; want epoch 1, nothing, ASSIGNMENT_DELAYED", r1.MemberEpoch, r1.ActiveTasks, r1.Status)
	}
	h.now = h.now.Add(time.Second)
	r2 := h.shb("m2", "p2", 0, nil)
	if tasksOf(r2.ActiveTasks).size() != 0 || !slices.Contains(statusCodes(r2), streamsAssignmentDelayed) {
		t.Fatalf("the second member within the delay: tasks %v status %v", r2.ActiveTasks, r2.Status)
	}
	h.now = h.now.Add(2 * time.Second)
	h.apply(h.c.Tick(h.now))
	r1 = h.shb("m1", "", r1.MemberEpoch, nil)
	r2 = h.shb("m2", "", r2.MemberEpoch, nil)
	if a, b := tasksOf(r1.ActiveTasks), tasksOf(r2.ActiveTasks); a.size() != 4 || b.size() != 4 || len(r1.Status) != 0 {
		t.Fatalf("after the delay: m1 %v m2 %v status %v; want 4 tasks each, no revocation", a, b, r1.Status)
	}
	if r1.MemberEpoch != r2.MemberEpoch || r1.MemberEpoch <= 1 {
		t.Fatalf("epochs %d and %d after the delay", r1.MemberEpoch, r2.MemberEpoch)
	}
}

// TestStreamsGroupSourceChangelogAndOlderCommits: a table read from a source topic that is also
// its changelog (reuse.ktable.source.topics) is accepted and the source is not created nor
// sized; a commit of an older member epoch counts for the tasks held since then, on this
// coordinator and on one that replayed the records.
func TestStreamsGroupSourceChangelogAndOlderCommits(t *testing.T) {
	topo := wordCount()
	topo.Subtopologies[0].StateChangelogTopics = []kmsg.TopicInfo{{Topic: "in"}}
	st, err := newStreamsTopology(topo)
	if err != nil {
		t.Fatalf("a source topic as its table's changelog: %v", err)
	}
	ct := configure(st, map[string]TopicMeta{"in": {Partitions: 4}})
	for _, it := range ct.create {
		if it.Name == "in" {
			t.Fatalf("the source changelog is to be created: %+v", ct.create)
		}
	}
	if len(ct.changelogs["0"]) != 1 {
		t.Fatalf("subtopology 0 is not stateful: %v", ct.changelogs)
	}

	h := newStreamsHarness(t)
	r1 := h.shb("m1", "p1", 0, nil)
	h.createInternal()
	r1 = h.shb("m1", "", r1.MemberEpoch, &streamsOwned{streamsTasks{}, streamsTasks{}})
	first := r1.MemberEpoch
	// Two more members join and leave: m1's epoch moves twice while it keeps its tasks.
	for _, m := range []string{"m2", "m3"} {
		h.shb(m, "p"+m, 0, nil)
		h.shb(m, "", -1, nil)
	}
	r1 = h.shb("m1", "", r1.MemberEpoch, &streamsOwned{tasksOf(r1.ActiveTasks), streamsTasks{}})
	r1 = h.shb("m1", "", r1.MemberEpoch, &streamsOwned{tasksOf(r1.ActiveTasks), streamsTasks{}})
	if r1.MemberEpoch < first+2 {
		t.Fatalf("m1's epoch went from %d to %d; want two moves", first, r1.MemberEpoch)
	}
	commit := func(c *Coordinator, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 9, "app", "m1", epoch
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 5}}}}
		resp, _ := c.OffsetCommit(h.now, req)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(h.c, first); code != 0 {
		t.Fatalf("a commit at the epoch m1 got its tasks at: %v", kerr.ErrorForCode(code))
	}
	if code := commit(h.c, first-1); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("a commit from before m1 had its tasks: %v", kerr.ErrorForCode(code))
	}
	c2 := New(h.c.cfg)
	c2.Topics = h.c.Topics
	for _, rec := range h.records {
		if err := c2.Load(h.now, rec.Key, rec.Value); err != nil {
			t.Fatal(err)
		}
	}
	if code := commit(c2, first); code != 0 {
		t.Fatalf("the same commit after a reload: %v", kerr.ErrorForCode(code))
	}
	if g, _ := c2.Group("app"); g.streamsStateName() != "Stable" {
		t.Fatalf("reloaded, the group is %s; want Stable", g.streamsStateName())
	}
}

// TestStreamsAssignorProperties: over random groups (members on processes of one to three
// threads), task counts, standby counts and previous targets, every task is active on exactly
// one member, a standby is never on a process holding the task in another copy, only stateful
// tasks stand by, and without a previous target members of one-thread processes differ by at
// most one active task.
func TestStreamsAssignorProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for round := 0; round < 500; round++ {
		var members []*streamsMember
		procs := 1 + rng.IntN(4)
		for p := 0; p < procs; p++ {
			threads := 1 + rng.IntN(3)
			if round%2 == 0 {
				threads = 1
			}
			for th := 0; th < threads; th++ {
				members = append(members, &streamsMember{ID: fmt.Sprintf("m%d-%d", p, th), ProcessID: fmt.Sprintf("p%d", p)})
			}
		}
		slices.SortFunc(members, func(a, b *streamsMember) int { return strings.Compare(a.ID, b.ID) })
		tasks := map[string]int32{"0": int32(rng.IntN(9)), "1": int32(1 + rng.IntN(6))}
		stateful := map[string]bool{"1": true}
		standbys := rng.IntN(3)
		var prev map[string]streamsTarget
		if round%4 >= 2 { // a previous target over a random subset of these members
			prev = assignStreams(members[:1+rng.IntN(len(members))], tasks, stateful, standbys, nil)
		}
		got := assignStreams(members, tasks, stateful, standbys, prev)
		count := map[string]int{}
		for s, n := range tasks {
			for p := int32(0); p < n; p++ {
				var active []*streamsMember
				standbyProcs := map[string]int{}
				for _, m := range members {
					if got[m.ID].Active.has(s, p) {
						active = append(active, m)
					}
					if got[m.ID].Standby.has(s, p) {
						standbyProcs[m.ProcessID]++
					}
				}
				if len(active) != 1 {
					t.Fatalf("round %d: task %s_%d active on %d members", round, s, p, len(active))
				}
				count[active[0].ID]++
				for proc, k := range standbyProcs {
					if k > 1 || proc == active[0].ProcessID {
						t.Fatalf("round %d: task %s_%d: active on %s, standbys %v", round, s, p, active[0].ProcessID, standbyProcs)
					}
				}
				if !stateful[s] && len(standbyProcs) > 0 {
					t.Fatalf("round %d: stateless task %s_%d has standbys", round, s, p)
				}
				if want := min(standbys, procs-1); stateful[s] && len(standbyProcs) != want {
					t.Fatalf("round %d: task %s_%d has %d standbys, want %d", round, s, p, len(standbyProcs), want)
				}
			}
		}
		if prev == nil && round%2 == 0 {
			lo, hi := math.MaxInt, 0
			for _, m := range members {
				lo, hi = min(lo, count[m.ID]), max(hi, count[m.ID])
			}
			if hi-lo > 1 {
				t.Fatalf("round %d: active tasks per member from %d to %d: %v", round, lo, hi, count)
			}
		}
	}
}

// TestStreamsGroupRejoins: a member fenced and rejoining with epoch 0 starts over in place (the
// group does not empty: no new delay, the shutdown request stays) and takes its tasks back at
// the group's epoch, which does not move, as in Kafka: it moved, and every member went through
// a new epoch for the same tasks; members joining a group that emptied take epochs above any a
// former member held, so a former incarnation's commit is stale.
func TestStreamsGroupRejoins(t *testing.T) {
	h := newStreamsHarness(t)
	for _, it := range []string{"app-regroup-repartition", "app-totals-changelog"} {
		h.topics[it] = TopicMeta{ID: [16]byte{8, byte(len(h.topics))}, Partitions: 4}
	}
	r1 := h.shb("m1", "p1", 0, nil)
	h.c.cfg.StreamsInitialRebalanceDelay = 3 * time.Second
	old := r1.MemberEpoch
	r1 = h.shb("m1", "p1", 0, nil) // fenced somewhere, back with epoch 0
	if tasksOf(r1.ActiveTasks).size() != 8 || slices.Contains(statusCodes(r1), streamsAssignmentDelayed) || r1.MemberEpoch != old {
		t.Fatalf("a sole member rejoining: epoch %d (was %d) tasks %v status %v; want all tasks at once, the same epoch", r1.MemberEpoch, old, r1.ActiveTasks, r1.Status)
	}
	g, _ := h.c.Group("app")
	if g.streams.epoch != old {
		t.Fatalf("group epoch %d after the rejoin; want %d", g.streams.epoch, old)
	}
	zombie := r1.MemberEpoch
	h.shb("m1", "", -1, nil) // the group empties; m1 and m2 come back within the delay
	r1 = h.shb("m1", "p1", 0, nil)
	r2 := h.shb("m2", "p2", 0, nil)
	if r1.MemberEpoch <= zombie || r2.MemberEpoch <= zombie {
		t.Fatalf("epochs after the group emptied: %d and %d; want above %d", r1.MemberEpoch, r2.MemberEpoch, zombie)
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "app", "m1", zombie
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	if resp, _ := h.c.OffsetCommit(h.now, req); resp.Topics[0].Partitions[0].ErrorCode != kerr.StaleMemberEpoch.Code {
		t.Fatalf("the former incarnation's commit: %v; want STALE_MEMBER_EPOCH", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
}

// TestStreamsGroupAssignmentInterval: with an assignment interval, a group epoch that moves
// within it of the last target keeps the previous target (ASSIGNMENT_DELAYED) until a tick
// past the interval computes the new one.
func TestStreamsGroupAssignmentInterval(t *testing.T) {
	h := newStreamsHarness(t)
	h.c.cfg.StreamsAssignmentInterval = time.Second
	for _, it := range []string{"app-regroup-repartition", "app-totals-changelog"} {
		h.topics[it] = TopicMeta{ID: [16]byte{8, byte(len(h.topics))}, Partitions: 4}
	}
	r1 := h.shb("m1", "p1", 0, nil)
	if tasksOf(r1.ActiveTasks).size() != 8 {
		t.Fatalf("the first target is computed at once: %v", r1.ActiveTasks)
	}
	h.now = h.now.Add(300 * time.Millisecond)
	r2 := h.shb("m2", "p2", 0, nil)
	if tasksOf(r2.ActiveTasks).size() != 0 || !slices.Contains(statusCodes(r2), streamsAssignmentDelayed) ||
		!strings.Contains(r2.Status[len(r2.Status)-1].StatusDetail, "assignment interval") {
		t.Fatalf("a join within the interval: tasks %v status %+v", r2.ActiveTasks, r2.Status)
	}
	if r := h.shb("m1", "", r1.MemberEpoch, &streamsOwned{tasksOf(r1.ActiveTasks), streamsTasks{}}); tasksOf(r.ActiveTasks).size() != 8 {
		t.Fatalf("m1 lost tasks before the new target: %v", r.ActiveTasks)
	}
	h.now = h.now.Add(800 * time.Millisecond)
	h.apply(h.c.Tick(h.now))
	r1 = h.shb("m1", "", r1.MemberEpoch, &streamsOwned{tasksOf(r1.ActiveTasks), streamsTasks{}})
	if kept := tasksOf(r1.ActiveTasks); kept.size() != 4 {
		t.Fatalf("after the interval m1 keeps %v; want 4 of 8", kept)
	}
}

// TestStreamsGroupTimersAndRecords runs random schedules (joins, leaves, lost owned lists,
// short and long ticks that expire sessions, internal topics appearing, coordinator reloads)
// under random initial delays and assignment intervals, and checks after every call that the
// group's state is what its last record says (nothing a heartbeat or a tick changes goes
// unrecorded), that a member's epoch never goes back and no success answer carries epoch 0,
// that ASSIGNMENT_DELAYED is reported exactly while a target is held back, and at the end that
// ticks alone bring the held-back target.
func TestStreamsGroupTimersAndRecords(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		runStreamsTimers(t, seed)
	}
}

func runStreamsTimers(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	h := newStreamsHarness(t)
	if seed%2 == 0 {
		for _, it := range []string{"app-regroup-repartition", "app-totals-changelog"} {
			h.topics[it] = TopicMeta{ID: [16]byte{8, byte(len(h.topics))}, Partitions: 4}
		}
	}
	h.c.cfg.StreamsStandbyReplicas = int(seed % 3)
	h.c.cfg.StreamsInitialRebalanceDelay = []time.Duration{0, 500 * time.Millisecond, 3 * time.Second}[seed%3]
	h.c.cfg.StreamsAssignmentInterval = []time.Duration{time.Second, 0, 2 * time.Second, 300 * time.Millisecond}[seed%4]
	last := map[string][]byte{}
	checkRecords := func(when string) {
		for _, r := range h.records {
			last[string(r.Key)] = r.Value
		}
		h.records = nil
		cur := h.c.streamsStateValue("app")
		if rec := last[string(streamsKey("app"))]; !bytes.Equal(rec, cur) {
			t.Fatalf("seed %d %s: state differs from its last record:\nrec %s\ncur %s", seed, when, rec, cur)
		}
	}
	type mem struct {
		id, process string
		epoch       int32
		joined      bool
		owned       streamsOwned
	}
	var ms []*mem
	for i := range 2 + rng.IntN(4) {
		ms = append(ms, &mem{id: fmt.Sprintf("m%d", i), process: fmt.Sprintf("p%d", i%3)})
	}
	for i := 0; i < 300; i++ {
		m := ms[rng.IntN(len(ms))]
		switch r := rng.IntN(100); {
		case r < 20:
			h.now = h.now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			h.apply(h.c.Tick(h.now))
			checkRecords("tick")
			continue
		case r < 22:
			h.now = h.now.Add(time.Duration(40+rng.IntN(30)) * time.Second)
			h.apply(h.c.Tick(h.now))
			checkRecords("long tick")
			for _, m := range ms {
				if g, ok := h.c.Group("app"); ok && g.streams.members[m.id] == nil {
					m.joined = false
				}
			}
			continue
		case r < 24:
			h.createInternal()
			continue
		case r < 26: // reload
			c2 := New(h.c.cfg)
			c2.Topics = h.c.Topics
			if v := last[string(streamsKey("app"))]; v != nil {
				if err := c2.Load(h.now, streamsKey("app"), v); err != nil {
					t.Fatal(err)
				}
			}
			h.c = c2
			continue
		}
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.EndpointInformationEpoch = "app", m.id, m.epoch, -1
		leaving := false
		if !m.joined {
			req.MemberEpoch, req.Topology, req.RebalanceTimeoutMillis, req.ProcessID = 0, wordCount(), 300000, &m.process
			m.owned = streamsOwned{streamsTasks{}, streamsTasks{}}
		} else if rng.IntN(30) == 0 {
			req.MemberEpoch, leaving = -1, true
		}
		if !leaving && (!m.joined || rng.IntN(2) == 0) {
			req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = taskIDs(m.owned.active), taskIDs(m.owned.standby), []kmsg.TaskIDs{}
		}
		resp, out, create := h.c.StreamsGroupHeartbeat(h.now, req, "c", "/h")
		h.apply(out)
		checkRecords("heartbeat")
		if len(create) > 0 {
			h.create = create
		}
		if leaving {
			m.joined, m.epoch = false, 0
			continue
		}
		switch resp.ErrorCode {
		case 0:
		case kerr.UnknownMemberID.Code, kerr.FencedMemberEpoch.Code:
			m.joined, m.epoch = false, 0
			continue
		default:
			t.Fatalf("seed %d: %v %v", seed, kerr.ErrorForCode(resp.ErrorCode), *resp.ErrorMessage)
		}
		if resp.MemberEpoch <= 0 {
			t.Fatalf("seed %d: success answer with epoch %d", seed, resp.MemberEpoch)
		}
		if m.joined && resp.MemberEpoch < m.epoch {
			t.Fatalf("seed %d: %s epoch went back %d -> %d", seed, m.id, m.epoch, resp.MemberEpoch)
		}
		g, _ := h.c.Group("app")
		delayed := slices.Contains(statusCodes(resp), streamsAssignmentDelayed)
		if ahead := g.streams.epoch > g.streams.assignmentEpoch; delayed != ahead {
			t.Fatalf("seed %d: ASSIGNMENT_DELAYED %v but group epoch %d assignment epoch %d", seed, delayed, g.streams.epoch, g.streams.assignmentEpoch)
		}
		m.joined, m.epoch = true, resp.MemberEpoch
		if resp.ActiveTasks != nil {
			m.owned = streamsOwned{tasksOf(resp.ActiveTasks), tasksOf(resp.StandbyTasks)}
		}
	}
	// No heartbeat: ticks alone must bring the target (within delay + interval).
	g, ok := h.c.Group("app")
	if !ok || len(g.streams.members) == 0 {
		return
	}
	for range 40 {
		h.now = h.now.Add(100 * time.Millisecond)
		h.apply(h.c.Tick(h.now))
		checkRecords("quiet tick")
	}
	if g, _ := h.c.Group("app"); g.streams.epoch != g.streams.assignmentEpoch {
		t.Fatalf("seed %d: stuck: group epoch %d assignment epoch %d after 4 s of ticks", seed, g.streams.epoch, g.streams.assignmentEpoch)
	}
}
