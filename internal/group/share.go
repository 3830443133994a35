package group

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/share"
)

// Share groups (KIP-932, docs/share-groups.md §2): members heartbeat (ShareGroupHeartbeat) with
// the topics they subscribe to; the coordinator assigns the subscribed partitions with Kafka's
// `simple` share assignor whenever the group epoch moves, and a member takes its target at its
// next heartbeat, with no revocation step: records are protected by the share-partitions'
// acquisition locks, not by partition ownership. A member that does not heartbeat within the
// share session timeout is removed. A group id belongs to one type: a share group is never a
// classic or consumer group, nor the reverse (GROUP_ID_NOT_FOUND, as Kafka).

// TypeShare is the type of a share group (ListGroups, ConsumerGroupDescribe's "not a consumer
// group").
const TypeShare = "share"

// ShareAssignor is the share groups' one server-side assignor, as Kafka's.
const ShareAssignor = "simple"

type shareMember struct {
	id, rackID, clientID, clientHost string
	epoch, prevEpoch                 int32
	topics                           []string   // sorted
	assigned                         assignment // the member's target as of its epoch
	deadline                         time.Time
	sent                             string // epoch and assignment last sent
}

type shareState struct {
	epoch, assignmentEpoch int32
	// stateEpoch moves when some of the group's share-partition state is reset
	// (AlterShareGroupOffsets, DeleteShareGroupOffsets); the partitions reset take it as their
	// own (storedShare.stateEpoch), fencing state written before, and the others keep theirs.
	stateEpoch int32
	members    map[string]*shareMember
	target     map[string]assignment
	metaSig    string // the subscribed topics' metadata the target was computed for
	// parts is the share-partitions' stored state (records of their own, below).
	parts map[SharePartition]*storedShare
}

func newShareState() *shareState {
	return &shareState{members: map[string]*shareMember{}, target: map[string]assignment{}, parts: map[SharePartition]*storedShare{}}
}

func (ss *shareState) sortedMembers() []*shareMember {
	out := make([]*shareMember, 0, len(ss.members))
	for _, m := range ss.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *shareMember) int { return strings.Compare(a.id, b.id) })
	return out
}

// ShareGroupHeartbeat handles a ShareGroupHeartbeat request. The response goes out once
// Output.Records are durable.
func (c *Coordinator) ShareGroupHeartbeat(now time.Time, req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string) (*kmsg.ShareGroupHeartbeatResponse, Output) {
	before := c.shareStateValue(req.GroupID)
	var out Output
	resp := c.shareHeartbeat(now, req, clientID, clientHost)
	c.recordShareChange(req.GroupID, before, &out)
	return resp, out
}

func (c *Coordinator) shareHeartbeat(now time.Time, req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(err *kerr.Error, format string, args ...any) *kmsg.ShareGroupHeartbeatResponse {
		msg := fmt.Sprintf(format, args...)
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp
	}
	id := req.MemberID
	switch { // Kafka's throwIfShareGroupHeartbeatRequestIsInvalid, in its order: any member id but ""
	case id == "":
		return fail(kerr.InvalidRequest, "MemberId can't be empty.")
	case req.GroupID == "":
		return fail(kerr.InvalidRequest, "GroupId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return fail(kerr.InvalidRequest, "RackId can't be empty.")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest, "MemberEpoch is invalid.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest, "SubscribedTopicNames must be set in first request.")
	}
	g := c.groups[req.GroupID]
	switch {
	case g == nil && req.MemberEpoch != 0:
		return fail(kerr.GroupIDNotFound, "Share group %s not found.", req.GroupID)
	case g == nil:
		g = newGroup(req.GroupID, now)
		g.share = newShareState()
		g.share.stateEpoch = randomEpoch() // a group created again never takes its predecessor's state
		g.ProtocolType = TypeShare
		c.groups[req.GroupID] = g
	case g.share == nil:
		return fail(kerr.GroupIDNotFound, "Group %s is not a share group.", req.GroupID)
	}
	ss := g.share
	m := ss.members[id]
	switch req.MemberEpoch {
	case -1:
		if m == nil {
			return fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", id, req.GroupID)
		}
		c.removeShareMember(now, g, m)
		resp.MemberID, resp.MemberEpoch = &id, -1
		return resp
	case 0:
		if m == nil {
			if c.cfg.MaxShareGroupSize > 0 && len(ss.members) >= c.cfg.MaxShareGroupSize {
				return fail(kerr.GroupMaxSizeReached, "The share group has reached its maximum capacity of %d members.", c.cfg.MaxShareGroupSize)
			}
			m = &shareMember{id: id, assigned: assignment{}}
			ss.members[id] = m
			if g.State == Empty {
				g.transition(Stable, now)
			}
		}
		m.sent = "" // a (re)joining member gets its assignment whatever it was told before
	default:
		if m == nil {
			return fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", id, req.GroupID)
		}
		if req.MemberEpoch > m.epoch {
			return fail(kerr.FencedMemberEpoch, "The share group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch)
		}
		if req.MemberEpoch < m.epoch && req.MemberEpoch != m.prevEpoch {
			return fail(kerr.FencedMemberEpoch, "The share group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch)
		}
	}
	bump := false
	if req.SubscribedTopicNames != nil {
		topics := slices.Clone(req.SubscribedTopicNames)
		sort.Strings(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics, bump = topics, true
		}
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	m.clientID, m.clientHost = clientID, clientHost
	set := c.cfg.groupSettings(req.GroupID)
	m.deadline = now.Add(set.ShareSessionTimeout)
	topics := c.topics()
	c.advanceShare(ss, topics, bump)
	if m.epoch != ss.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, ss.assignmentEpoch
		m.assigned = ss.target[m.id].clone()
	}
	resp.MemberID, resp.MemberEpoch = &id, m.epoch
	resp.HeartbeatIntervalMillis = int32(set.ShareHeartbeatInterval.Milliseconds())
	full := req.MemberEpoch == 0 || req.SubscribedTopicNames != nil
	if sent := fmt.Sprint(m.epoch, m.assigned.signature()); sent != m.sent || full {
		m.sent = sent
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, t := range sortedTopics(m.assigned) {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = topics[t].ID, slices.Clone(m.assigned[t])
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return resp
}

// removeShareMember removes a member that left or whose session expired; the group epoch moves.
func (c *Coordinator) removeShareMember(now time.Time, g *Group, m *shareMember) {
	ss := g.share
	delete(ss.members, m.id)
	delete(ss.target, m.id)
	ss.epoch++
	if len(ss.members) == 0 {
		g.transition(Empty, now)
	}
}

// advanceShare moves the group epoch if bump is set or the subscribed topics' metadata changed,
// and computes the target assignment for a new epoch.
func (c *Coordinator) advanceShare(ss *shareState, topics map[string]TopicMeta, bump bool) {
	sig := shareMetadataSignature(ss, topics)
	if bump || sig != ss.metaSig {
		ss.epoch++
		ss.metaSig = sig
	}
	if ss.epoch > ss.assignmentEpoch {
		ss.target = assignShare(ss, topics)
		ss.assignmentEpoch = ss.epoch
	}
}

func shareMetadataSignature(ss *shareState, topics map[string]TopicMeta) string {
	var names []string
	for t := range topics {
		for _, m := range ss.members {
			if slices.Contains(m.topics, t) {
				names = append(names, t)
				break
			}
		}
	}
	sort.Strings(names)
	var sb bytes.Buffer
	for _, t := range names {
		fmt.Fprintf(&sb, "%s/%x/%d;", t, topics[t].ID, topics[t].Partitions)
	}
	return sb.String()
}

// tickShare removes the members whose session expired; it reports whether any was.
func (c *Coordinator) tickShare(now time.Time, g *Group) bool {
	removed := false
	for _, m := range g.share.sortedMembers() {
		if !now.Before(m.deadline) {
			c.removeShareMember(now, g, m)
			removed = true
		}
	}
	if removed {
		c.advanceShare(g.share, c.topics(), false)
	}
	return removed
}

// ShareGroupDescribe handles a ShareGroupDescribe request.
func (c *Coordinator) ShareGroupDescribe(req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	topics := c.topics()
	names := map[[16]byte]string{}
	for name, t := range topics {
		names[t.ID] = name
	}
	for _, id := range req.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID = id
		g := c.groups[id]
		if g == nil || g.share == nil {
			msg := fmt.Sprintf("Group %s not found.", id)
			if g != nil {
				msg = fmt.Sprintf("Group %s is not a share group.", id)
			}
			rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg // no state, as Kafka
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		ss := g.share
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = g.State.String(), ss.epoch, ss.assignmentEpoch, ShareAssignor
		for _, m := range ss.sortedMembers() {
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.id, m.epoch, m.clientID, m.clientHost
			rm.RackID = optional(m.rackID)
			rm.SubscribedTopicNames = slices.Clone(m.topics)
			for _, t := range sortedTopics(m.assigned) {
				if _, ok := topics[t]; !ok {
					// Deleted since the member's last heartbeat: left out, as Kafka's
					// topicPartitionsFromMap leaves out an id it has no name for.
					continue
				}
				tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				tp.TopicID, tp.Topic, tp.Partitions = topics[t].ID, t, slices.Clone(m.assigned[t])
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, tp)
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// assignShare is Kafka's `simple` share assignor (4.2): with M members and P partitions of the
// subscribed topics, each partition goes to ⌈M/P⌉ members (one when M ≤ P), members hold
// numbers of partitions that differ by at most one, and previous assignments are kept where
// they fit. When subscriptions differ, each topic is assigned on its own among its subscribers.
func assignShare(ss *shareState, topics map[string]TopicMeta) map[string]assignment {
	members := ss.sortedMembers()
	out := make(map[string]assignment, len(members))
	for _, m := range members {
		out[m.id] = assignment{}
	}
	homogeneous := true
	for _, m := range members[min(1, len(members)):] {
		if !slices.Equal(m.topics, members[0].topics) {
			homogeneous = false
		}
	}
	if homogeneous && len(members) > 0 {
		assignSharePartitions(members, members[0].topics, topics, ss.target, out)
		return out
	}
	all := map[string]bool{}
	for _, m := range members {
		for _, t := range m.topics {
			all[t] = true
		}
	}
	for _, t := range slices.Sorted(maps.Keys(all)) {
		var subs []*shareMember
		for _, m := range members {
			if slices.Contains(m.topics, t) {
				subs = append(subs, m)
			}
		}
		assignSharePartitions(subs, []string{t}, topics, ss.target, out)
	}
	return out
}

// assignSharePartitions assigns the partitions of names among members (sorted by id), keeping
// what prev gave them where it fits, into out: each partition to ⌈M/P⌉ distinct members, and
// every member lo or lo+1 partitions (exactly `extra` members at lo+1), so the assignments add
// up. Which members take the extra ones is not fixed in advance: those that keep more of
// their previous partitions do. When a partition is short and every member with room holds it
// already, one that has room takes another partition over from a member without room, which
// takes the short one instead (such a pair always exists: the member without room holds more
// partitions, so one the other does not).
func assignSharePartitions(members []*shareMember, names []string, topics map[string]TopicMeta, prev map[string]assignment, out map[string]assignment) {
	var parts []TopicPartition
	for _, t := range names {
		if meta, ok := topics[t]; ok {
			for p := range meta.Partitions {
				parts = append(parts, TopicPartition{t, p})
			}
		}
	}
	M, P := len(members), len(parts)
	if M == 0 || P == 0 {
		return
	}
	sharing := ceilDiv(M, P) // members per partition
	total := sharing * P     // assignments to hand out
	lo, extra := total/M, total%M
	holders := make(map[TopicPartition][]int, P) // member indexes per partition
	count := make([]int, M)
	atHi := 0 // members holding lo+1
	holds := func(i int, tp TopicPartition) bool { return slices.Contains(holders[tp], i) }
	room := func(i int) bool { return count[i] < lo || count[i] == lo && atHi < extra }
	give := func(i int, tp TopicPartition) {
		if count[i] == lo {
			atHi++
		}
		count[i]++
		holders[tp] = append(holders[tp], i)
	}
	take := func(i int, tp TopicPartition) {
		count[i]--
		if count[i] == lo {
			atHi--
		}
		holders[tp] = slices.DeleteFunc(holders[tp], func(h int) bool { return h == i })
	}
	// Keep previous assignments within the bounds.
	for i, m := range members {
		a := prev[m.id]
		for _, tp := range parts {
			if a.has(tp.Topic, tp.Partition) && room(i) && len(holders[tp]) < sharing {
				give(i, tp)
			}
		}
	}
	// Fill each partition up to the sharing bound: from the members with room that do not hold
	// it (the fewest partitions first, in turn), else by a swap.
	next := 0
	for _, tp := range parts {
		for len(holders[tp]) < sharing {
			pick := -1
			for k := range M {
				i := (next + k) % M
				if room(i) && !holds(i, tp) && (pick < 0 || count[i] < count[pick]) {
					pick = i
				}
			}
			if pick >= 0 {
				give(pick, tp)
				next = (pick + 1) % M
				continue
			}
			if !shareSwap(M, parts, tp, count, room, holds, give, take) {
				return // cannot happen: the bounds add up (a guard against looping)
			}
		}
	}
	for _, tp := range parts {
		for _, i := range holders[tp] {
			out[members[i].id].add(tp.Topic, tp.Partition)
		}
	}
}

// shareSwap fills one place of partition tp, which every member with room holds already: a
// member j with room takes a partition q over from a member k that does not hold tp and holds
// more partitions than j (so one j does not hold), and k takes tp. False if there is no such
// pair.
func shareSwap(M int, parts []TopicPartition, tp TopicPartition, count []int, room func(int) bool,
	holds func(int, TopicPartition) bool, give, take func(int, TopicPartition)) bool {
	for j := range M {
		if !room(j) {
			continue
		}
		for k := range M {
			if holds(k, tp) || count[k] <= count[j] {
				continue
			}
			for _, q := range parts {
				if q != tp && holds(k, q) && !holds(j, q) {
					take(k, q)
					give(j, q)
					give(k, tp)
					return true
				}
			}
		}
	}
	return false
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// randomEpoch is a new share group's first state epoch.
func randomEpoch() int32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return int32(binary.BigEndian.Uint32(b[:]) >> 1)
}

// A share group's state is one record in __consumer_offsets (docs/share-groups.md §2), with a
// key version of Runnel's own that Kafka's tools skip:
//
//	key:   version int16 = 1001 | group string
//	value: version int16 = 0 | group epoch int32 | assignment epoch int32 | state epoch int32 |
//	       metadata signature string | state since (unix ms) int64 | members int32, each:
//	         id, rack, client id, client host string | epoch, previous epoch int32 |
//	         topics (int32 count, strings) | assigned assignment
//	       | targets int32, each: member id string, assignment
//
// A nil value is a tombstone (the group was deleted).
const shareKeyVersion = 1001

func shareKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, shareKeyVersion)
	return kbin.AppendString(b, group)
}

// shareStateValue is the encoded state of a share group, or nil if there is none.
func (c *Coordinator) shareStateValue(group string) []byte {
	g := c.groups[group]
	if g == nil || g.share == nil {
		return nil
	}
	return g.share.appendTo(nil, g.StateSince)
}

// recordShareChange appends the group's share state record to out if it differs from before.
func (c *Coordinator) recordShareChange(group string, before []byte, out *Output) {
	if after := c.shareStateValue(group); !bytes.Equal(before, after) {
		out.Records = append(out.Records, Record{Group: group, Key: shareKey(group), Value: after})
	}
}

func (ss *shareState) appendTo(b []byte, since time.Time) []byte {
	b = kbin.AppendInt16(b, 0)
	b = kbin.AppendInt32(b, ss.epoch)
	b = kbin.AppendInt32(b, ss.assignmentEpoch)
	b = kbin.AppendInt32(b, ss.stateEpoch)
	b = kbin.AppendString(b, ss.metaSig)
	b = kbin.AppendInt64(b, since.UnixMilli())
	members := ss.sortedMembers()
	b = kbin.AppendInt32(b, int32(len(members)))
	for _, m := range members {
		for _, s := range []string{m.id, m.rackID, m.clientID, m.clientHost} {
			b = kbin.AppendString(b, s)
		}
		b = kbin.AppendInt32(b, m.epoch)
		b = kbin.AppendInt32(b, m.prevEpoch)
		b = kbin.AppendInt32(b, int32(len(m.topics)))
		for _, t := range m.topics {
			b = kbin.AppendString(b, t)
		}
		b = appendAssignment(b, m.assigned)
	}
	ids := make([]string, 0, len(ss.target))
	for id := range ss.target {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	b = kbin.AppendInt32(b, int32(len(ids)))
	for _, id := range ids {
		b = kbin.AppendString(b, id)
		b = appendAssignment(b, ss.target[id])
	}
	return b
}

// loadShare replays a share group state record; members' sessions restart at now.
func (c *Coordinator) loadShare(now time.Time, key, value []byte) error {
	r := kbin.Reader{Src: key[2:]}
	group := r.String()
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: share group key: %v", ErrBadRecord, err)
	}
	if value == nil {
		delete(c.groups, group)
		return nil
	}
	r = kbin.Reader{Src: value}
	if version := r.Int16(); version != 0 {
		return fmt.Errorf("%w: share group value version %d", ErrBadRecord, version)
	}
	ss := newShareState()
	if g := c.groups[group]; g != nil && g.share != nil {
		ss.parts = g.share.parts // the group's record is rewritten; its partitions' records stand
	}
	for sp, st := range c.orphanParts[group] { // replayed before it (a compacted log)
		ss.parts[sp] = st
	}
	delete(c.orphanParts, group)
	ss.epoch, ss.assignmentEpoch, ss.stateEpoch, ss.metaSig = r.Int32(), r.Int32(), r.Int32(), r.String()
	for _, st := range ss.parts { // their own epochs are not recorded: the group's, conservatively
		st.stateEpoch = ss.stateEpoch
	}
	since := time.UnixMilli(r.Int64())
	for n := r.Int32(); n > 0 && r.Ok(); n-- {
		m := &shareMember{id: r.String(), rackID: r.String(), clientID: r.String(), clientHost: r.String()}
		m.epoch, m.prevEpoch = r.Int32(), r.Int32()
		for k := r.Int32(); k > 0 && r.Ok(); k-- {
			m.topics = append(m.topics, r.String())
		}
		m.assigned = readAssignment(&r)
		m.deadline = now.Add(c.cfg.groupSettings(group).ShareSessionTimeout)
		ss.members[m.id] = m
	}
	for n := r.Int32(); n > 0 && r.Ok(); n-- {
		id := r.String()
		ss.target[id] = readAssignment(&r)
	}
	if err := r.Complete(); err != nil || len(r.Src) != 0 {
		return fmt.Errorf("%w: share group %s value: %v (%d bytes left)", ErrBadRecord, group, err, len(r.Src))
	}
	g := c.loadGroup(group, now)
	g.share, g.consumer, g.ProtocolType = ss, nil, TypeShare
	g.members, g.order, g.static, g.pending = map[string]*Member{}, nil, map[string]string{}, map[string]time.Time{}
	g.State, g.StateSince = Empty, since
	if len(ss.members) > 0 {
		g.State = Stable
	}
	return nil
}

// Share-partition state (docs/share-groups.md §5): the group coordinator keeps, for each
// partition a share group consumes, the snapshot its leader last persisted, one record each:
//
//	key:   version int16 = 1002 | group string | topic id [16]byte | partition int32
//	value: version int16 = 0 | leader epoch int32 | snapshot (share.Snapshot.AppendTo)
//
// A tombstone removes it (the group deleted). A leader that reads the state at a leader epoch
// fences writes from older leaders; a write from a leader of another state epoch (the group's
// offsets were reset since it read) is fenced too, and that leader reads again.
const sharePartKeyVersion = 1002

// SharePartition names a share-partition of a group.
type SharePartition struct {
	Topic     [16]byte
	Partition int32
}

type storedShare struct {
	// leaderEpoch fences older leaders' writes: a local partition's leader epoch, or the log
	// index of the metadata image an object partition's share owner was chosen in (int64).
	leaderEpoch int64
	snapshot    []byte // share.Snapshot encoding; nil: never written (read only)
	// stateEpoch is the state epoch its leader must have read it at to write it: the group's
	// when it was created or last reset, as Kafka's ShareCoordinatorShard keeps one per
	// share-partition, so resetting one topic's state does not fence the writes of another.
	// Not in the record: a loaded coordinator gives every partition the group's (a writer that
	// read before the load may be fenced once more, and reads again).
	stateEpoch int32
}

func sharePartKey(group string, sp SharePartition) []byte {
	b := binary.BigEndian.AppendUint16(nil, sharePartKeyVersion)
	b = kbin.AppendString(b, group)
	b = append(b, sp.Topic[:]...)
	return kbin.AppendInt32(b, sp.Partition)
}

func sharePartRecord(group string, sp SharePartition, st *storedShare) Record {
	r := Record{Group: group, Key: sharePartKey(group, sp)}
	if st != nil {
		var v []byte
		if st.leaderEpoch == int64(int32(st.leaderEpoch)) { // version 0, as ever
			v = kbin.AppendInt16(nil, 0)
			v = kbin.AppendInt32(v, int32(st.leaderEpoch))
		} else { // version 1: an object partition's owner epoch past int32
			v = kbin.AppendInt16(nil, 1)
			v = kbin.AppendInt64(v, st.leaderEpoch)
		}
		r.Value = append(v, st.snapshot...)
	}
	return r
}

// ShareState is what a share-partition's leader reads of its state.
type ShareState struct {
	StateEpoch int32
	Snapshot   []byte // nil: none stored yet (share.auto.offset.reset decides the start)
	// PrevLeaderEpoch is the newest leader epoch the state was read or written at before this
	// read (-1: never): a leader that kept its state from an older epoch knows from it whether
	// another leader came between.
	PrevLeaderEpoch int64
}

// ReadShareState answers a share-partition's leader at leaderEpoch with its stored state, and
// from then on fences writes of older leaders (recorded, so a restarted coordinator fences them
// too). A group that is not a share group: GROUP_ID_NOT_FOUND; an older leader: FENCED_LEADER_EPOCH.
func (c *Coordinator) ReadShareState(group string, sp SharePartition, leaderEpoch int64) (ShareState, *kerr.Error, Output) {
	var out Output
	g := c.groups[group]
	if g == nil || g.share == nil {
		return ShareState{}, kerr.GroupIDNotFound, out
	}
	st := g.share.parts[sp]
	prev := int64(-1)
	if st != nil {
		prev = st.leaderEpoch
	}
	switch {
	case st == nil:
		st = &storedShare{leaderEpoch: leaderEpoch, stateEpoch: g.share.stateEpoch}
		g.share.parts[sp] = st
		out.Records = append(out.Records, sharePartRecord(group, sp, st))
	case leaderEpoch < st.leaderEpoch:
		return ShareState{}, kerr.FencedLeaderEpoch, out
	case leaderEpoch > st.leaderEpoch:
		st.leaderEpoch = leaderEpoch
		out.Records = append(out.Records, sharePartRecord(group, sp, st))
	}
	return ShareState{StateEpoch: st.stateEpoch, Snapshot: bytes.Clone(st.snapshot), PrevLeaderEpoch: prev}, nil, out
}

// WriteShareState stores a share-partition's snapshot written by its leader at leaderEpoch, who
// read the state at stateEpoch. The caller owns snapshot, which must decode.
func (c *Coordinator) WriteShareState(group string, sp SharePartition, stateEpoch int32, leaderEpoch int64, snapshot []byte) (*kerr.Error, Output) {
	var out Output
	g := c.groups[group]
	if g == nil || g.share == nil {
		return kerr.GroupIDNotFound, out
	}
	if _, err := share.DecodeSnapshot(snapshot); err != nil {
		return kerr.InvalidRequest, out
	}
	st := g.share.parts[sp]
	switch {
	case st == nil && stateEpoch != g.share.stateEpoch, st != nil && stateEpoch != st.stateEpoch:
		return kerr.FencedStateEpoch, out
	case st == nil || leaderEpoch < st.leaderEpoch: // never read at this epoch
		return kerr.FencedLeaderEpoch, out
	}
	st.leaderEpoch, st.snapshot = leaderEpoch, bytes.Clone(snapshot)
	out.Records = append(out.Records, sharePartRecord(group, sp, st))
	return nil, out
}

// loadSharePart replays a share-partition state record.
func (c *Coordinator) loadSharePart(now time.Time, key, value []byte) error {
	r := kbin.Reader{Src: key[2:]}
	group := r.String()
	var sp SharePartition
	copy(sp.Topic[:], r.Span(16))
	sp.Partition = r.Int32()
	if err := r.Complete(); err != nil || len(r.Src) != 0 {
		return fmt.Errorf("%w: share-partition key: %v", ErrBadRecord, err)
	}
	g := c.groups[group]
	if value == nil {
		if g != nil && g.share != nil {
			delete(g.share.parts, sp)
		}
		delete(c.orphanParts[group], sp)
		return nil
	}
	r = kbin.Reader{Src: value}
	var epoch int64
	switch version := r.Int16(); version {
	case 0:
		epoch = int64(r.Int32())
	case 1:
		epoch = r.Int64()
	default:
		return fmt.Errorf("%w: share-partition value version %d", ErrBadRecord, version)
	}
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: share-partition value: %v", ErrBadRecord, err)
	}
	st := &storedShare{leaderEpoch: epoch}
	if len(r.Src) > 0 {
		if _, err := share.DecodeSnapshot(r.Src); err != nil {
			return fmt.Errorf("%w: %v", ErrBadRecord, err)
		}
		st.snapshot = bytes.Clone(r.Src)
	}
	if g == nil || g.share == nil {
		// Compaction keeps the group's newest record, which may follow this one: keep it
		// until the group's record comes (loadShare adopts it).
		if c.orphanParts == nil {
			c.orphanParts = map[string]map[SharePartition]*storedShare{}
		}
		if c.orphanParts[group] == nil {
			c.orphanParts[group] = map[SharePartition]*storedShare{}
		}
		c.orphanParts[group][sp] = st
		return nil
	}
	st.stateEpoch = g.share.stateEpoch
	g.share.parts[sp] = st
	return nil
}

func (ss *shareState) sortedParts() []SharePartition {
	out := slices.Collect(maps.Keys(ss.parts))
	slices.SortFunc(out, func(a, b SharePartition) int {
		if c := bytes.Compare(a.Topic[:], b.Topic[:]); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// DescribeShareGroupOffsets answers each group's share-partition start offsets (SPSO) from the
// stored snapshots: the requested topics' partitions, or (no topics) every partition the group
// has state for. A partition without state, or an unknown topic, has start offset -1, as in
// Kafka. end, if it knows a partition's high watermark, gives the lag (v1): the records from the
// start to it not yet done with; else the lag is -1.
func (c *Coordinator) DescribeShareGroupOffsets(req *kmsg.DescribeShareGroupOffsetsRequest, end func(topic [16]byte, partition int32) (int64, bool)) *kmsg.DescribeShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	topics := c.topics()
	names := map[[16]byte]string{}
	for name, t := range topics {
		names[t.ID] = name
	}
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		grp := c.groups[rg.GroupID]
		if grp != nil && grp.share == nil {
			msg := fmt.Sprintf("Group %s is not a share group.", rg.GroupID)
			g.ErrorCode, g.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
			resp.Groups = append(resp.Groups, g)
			continue
		}
		want := rg.Topics
		if want == nil && grp != nil {
			// Every partition with state, and every partition of a topic a member subscribes
			// to (start offset -1 until first fetched), by topic: Kafka lists the partitions
			// it initialized, which are the subscribed topics' partitions.
			listed := map[string]map[int32]bool{}
			add := func(name string, p int32) {
				if listed[name] == nil {
					listed[name] = map[int32]bool{}
				}
				listed[name][p] = true
			}
			for _, sp := range grp.share.sortedParts() {
				if name, ok := names[sp.Topic]; ok {
					add(name, sp.Partition)
				}
			}
			subscribed := map[string]bool{}
			for _, m := range grp.share.members {
				for _, name := range m.topics {
					subscribed[name] = true
				}
			}
			for name := range subscribed {
				for p := range topics[name].Partitions { // none for a topic that does not exist
					add(name, p)
				}
			}
			byTopic := map[string][]int32{}
			for name, ps := range listed {
				byTopic[name] = slices.Sorted(maps.Keys(ps))
			}
			for _, name := range slices.Sorted(maps.Keys(byTopic)) {
				want = append(want, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: byTopic[name]})
			}
		}
		for _, rt := range want {
			t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			t.Topic = rt.Topic
			meta, known := topics[rt.Topic]
			if known {
				t.TopicID = meta.ID
			}
			for _, p := range rt.Partitions {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, 0, -1
				if known && grp != nil {
					if st := grp.share.parts[SharePartition{meta.ID, p}]; st != nil && st.snapshot != nil {
						snap, _ := share.DecodeSnapshot(st.snapshot)
						rp.StartOffset, rp.LeaderEpoch = snap.Start, int32(min(st.leaderEpoch, math.MaxInt32))
						if hw, ok := end(meta.ID, p); ok {
							rp.Lag = max(hw-snap.Start-doneAfterStart(&snap, hw), 0)
						}
					}
				}
				t.Partitions = append(t.Partitions, rp)
			}
			g.Topics = append(g.Topics, t)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// doneAfterStart counts the acknowledged and archived offsets of a snapshot below end.
func doneAfterStart(s *share.Snapshot, end int64) int64 {
	var n int64
	for _, b := range s.Batches {
		if b.State != share.Available && b.First < end {
			n += min(b.Last, end-1) - b.First + 1
		}
	}
	return n
}

// AlterShareGroupOffsets sets the start offsets of an empty share group's partitions (creating
// the group if there is none, as Kafka does): each gets a snapshot starting there, and the
// group's state epoch moves, so that leaders holding older state load it again.
func (c *Coordinator) AlterShareGroupOffsets(now time.Time, req *kmsg.AlterShareGroupOffsetsRequest) (*kmsg.AlterShareGroupOffsetsResponse, Output) {
	var out Output
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	before := c.shareStateValue(req.GroupID)
	g, err := c.emptyShareGroup(now, req.GroupID, true)
	if err != nil {
		msg := errMessage(err)
		resp.ErrorCode, resp.ErrorMessage = errCode(err), &msg
		return resp, out
	}
	topics := c.topics()
	var parts []Record
	var reset []*storedShare
	for _, rt := range req.Topics {
		t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		meta, known := topics[rt.Topic]
		t.TopicID = meta.ID
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !known || rp.Partition < 0 || rp.Partition >= meta.Partitions:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.StartOffset < 0:
				p.ErrorCode = kerr.InvalidRequest.Code
			default:
				sp := SharePartition{meta.ID, rp.Partition}
				st := g.share.parts[sp]
				if st == nil {
					st = &storedShare{}
					g.share.parts[sp] = st
				}
				st.snapshot = (&share.Snapshot{Start: rp.StartOffset}).AppendTo(nil)
				reset = append(reset, st)
				parts = append(parts, sharePartRecord(g.ID, sp, st))
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(parts) > 0 {
		g.share.stateEpoch++
		for _, st := range reset {
			st.stateEpoch = g.share.stateEpoch
		}
	}
	c.recordShareChange(req.GroupID, before, &out) // first: a replay needs the group before its partitions
	out.Records = append(out.Records, parts...)
	return resp, out
}

// DeleteShareGroupOffsets forgets an empty share group's state for whole topics; its state epoch
// moves. A topic the group has no state for: UNKNOWN_TOPIC_OR_PARTITION.
func (c *Coordinator) DeleteShareGroupOffsets(now time.Time, req *kmsg.DeleteShareGroupOffsetsRequest) (*kmsg.DeleteShareGroupOffsetsResponse, Output) {
	var out Output
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	before := c.shareStateValue(req.GroupID)
	g, err := c.emptyShareGroup(now, req.GroupID, false)
	if err != nil {
		msg := errMessage(err)
		resp.ErrorCode, resp.ErrorMessage = errCode(err), &msg
		return resp, out
	}
	topics := c.topics()
	deleted := false
	seen := map[string]bool{}
	for _, rt := range req.Topics {
		if seen[rt.Topic] { // a topic named twice is answered once, as Kafka
			continue
		}
		seen[rt.Topic] = true
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		meta, known := topics[rt.Topic]
		t.TopicID = meta.ID
		found := false
		for _, sp := range g.share.sortedParts() {
			if known && sp.Topic == meta.ID {
				delete(g.share.parts, sp)
				out.Records = append(out.Records, sharePartRecord(g.ID, sp, nil))
				found, deleted = true, true
			}
		}
		if !found {
			msg := kerr.UnknownTopicOrPartition.Description
			t.ErrorCode, t.ErrorMessage = kerr.UnknownTopicOrPartition.Code, &msg
		}
		resp.Topics = append(resp.Topics, t)
	}
	if deleted {
		g.share.stateEpoch++
	}
	c.recordShareChange(req.GroupID, before, &out)
	return resp, out
}

// emptyShareGroup is the share group an offsets change applies to: it must be a share group
// without members; create makes a missing one.
func (c *Coordinator) emptyShareGroup(now time.Time, id string, create bool) (*Group, error) {
	g := c.groups[id]
	switch {
	case id == "": // as Kafka's GroupCoordinatorService: no group may be named so
		return nil, fmt.Errorf("%w: %s", kerr.InvalidGroupID, kerr.InvalidGroupID.Description)
	case g == nil && create:
		g = newGroup(id, now)
		g.share = newShareState()
		g.share.stateEpoch = randomEpoch()
		g.ProtocolType = TypeShare
		c.groups[id] = g
	case g == nil:
		return nil, fmt.Errorf("%w: Group %s not found.", kerr.GroupIDNotFound, id)
	case g.share == nil:
		return nil, fmt.Errorf("%w: Group %s is not a share group.", kerr.GroupIDNotFound, id)
	case len(g.share.members) > 0:
		return nil, fmt.Errorf("%w: %s", kerr.NonEmptyGroup, kerr.NonEmptyGroup.Description)
	}
	return g, nil
}

// errMessage is the message of an error made as fmt.Errorf("%w: message", a kerr error): the
// message alone, without the code's name and description the kerr error's text adds.
func errMessage(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return strings.TrimPrefix(err.Error(), ke.Error()+": ")
	}
	return err.Error()
}

func errCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
