package group

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit handles an OffsetCommit request. The response goes out once Output.Records are
// durable (the caller sends it then; it is not among the Output's replies).
func (c *Coordinator) OffsetCommit(now time.Time, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, Output) {
	var out Output
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := c.checkCommit(now, req, false)
	g := c.groups[req.Group]
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			if code == 0 {
				var o Offset
				if sp.ErrorCode, o = c.partitionCommit(now, rt.Topic, rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata); sp.ErrorCode == 0 {
					if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
						o.ExpireTime = now.UnixMilli() + req.RetentionTimeMillis // as Kafka's expireTimestampMs
					}
					if g == nil {
						// A standalone commit's group is created when a partition it names exists
						// (simpleGroupFor); one created since that look-up exists now.
						g = newGroup(req.Group, now)
						c.groups[req.Group] = g
					}
					tp := TopicPartition{rt.Topic, rp.Partition}
					o.record = c.nextRecord()
					g.offsets[tp] = o
					out.Records = append(out.Records, offsetRecord(g.ID, tp, &o))
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, out
}

// partitionCommit checks one partition of a commit (plain or transactional) and returns the
// offset to store, or the partition's error code.
func (c *Coordinator) partitionCommit(now time.Time, topic string, partition int32, offset int64, leaderEpoch int32, metadata *string) (int16, Offset) {
	switch {
	case c.PartitionExists != nil && !c.PartitionExists(topic, partition):
		return kerr.UnknownTopicOrPartition.Code, Offset{}
	case metadata != nil && len(*metadata) > c.cfg.MaxMetadataBytes:
		return kerr.OffsetMetadataTooLarge.Code, Offset{}
	}
	o := Offset{Offset: offset, LeaderEpoch: leaderEpoch, CommitTime: now.UnixMilli()}
	if c.TopicID != nil {
		o.topicID, _ = c.TopicID(topic)
	}
	if metadata != nil {
		o.Metadata = *metadata
	}
	return 0, o
}

// checkCommit decides whether a commit may go ahead (0) or which error every partition gets. A
// commit with generation -1 and no member id stores offsets for a group that has no members
// (a standalone consumer, an admin reset), creating it if need be. A transactional commit
// (TxnOffsetCommit) is taken while a classic group completes its rebalance, as Kafka's
// validateOffsetCommit does: the Java producer knows no REBALANCE_IN_PROGRESS there, and dies.
func (c *Coordinator) checkCommit(now time.Time, req *kmsg.OffsetCommitRequest, transactional bool) int16 {
	if req.Group == "" && transactional {
		// Plain commits take the empty group id, for backwards compatibility, as Kafka's
		// commitOffsets; transactional ones do not.
		return kerr.InvalidGroupID.Code
	}
	g := c.groups[req.Group]
	if g != nil && g.share != nil { // as Kafka: a share group commits no offsets
		return kerr.GroupIDNotFound.Code
	}
	// Generation -1 comes from an admin client or a consumer outside group management: it
	// may commit while the group has no member, whatever member id it names (as Kafka's
	// validateOffsetCommit of classic, consumer and streams groups).
	if req.Generation < 0 && (req.MemberID == "" || g == nil || g.memberCount() == 0) {
		if g == nil {
			c.simpleGroupFor(now, req.Group, req.Topics)
			return 0
		}
		if g.memberCount() > 0 {
			return kerr.UnknownMemberID.Code
		}
		return 0
	}
	if g == nil {
		// Kafka's validateOffsetCommit: GROUP_ID_NOT_FOUND from OffsetCommit v9 (a consumer of
		// the new protocol then knows the group is gone), ILLEGAL_GENERATION before and for
		// TxnOffsetCommit.
		if !transactional && req.Version >= 9 {
			return kerr.GroupIDNotFound.Code
		}
		return kerr.IllegalGeneration.Code
	}
	if g.consumer != nil {
		return checkConsumerCommit(g.consumer, req)
	}
	if g.streams != nil {
		return checkStreamsCommit(g.streams, req)
	}
	m := g.members[req.MemberID]
	switch {
	case g.fenced(req.InstanceID, req.MemberID):
		return kerr.FencedInstanceID.Code
	case m == nil, g.unknownInstance(req.InstanceID):
		return kerr.UnknownMemberID.Code
	case req.Generation != g.Generation:
		return kerr.IllegalGeneration.Code
	case g.State == CompletingRebalance && !transactional:
		return kerr.RebalanceInProgress.Code
	}
	m.deadline = now.Add(m.SessionTimeout) // a commit shows the member is alive
	return 0
}

// simpleGroupFor creates the group a commit with generation -1 names when it does not exist
// (Kafka's "simple" group), unless no partition committed exists: Kafka's broker answers those
// UNKNOWN_TOPIC_OR_PARTITION without asking the coordinator, which then creates nothing. It
// returns the group, or nil.
func (c *Coordinator) simpleGroupFor(now time.Time, id string, topics []kmsg.OffsetCommitRequestTopic) *Group {
	if g := c.groups[id]; g != nil {
		return g
	}
	exists := c.PartitionExists == nil
	for _, t := range topics {
		for _, p := range t.Partitions {
			exists = exists || c.PartitionExists(t.Topic, p.Partition)
		}
	}
	if !exists {
		return nil
	}
	g := newGroup(id, now)
	c.groups[id] = g
	return g
}

// checkConsumerCommit checks a commit to a consumer group: the member must exist and send its
// current epoch in the generation field (OffsetCommit v9+). The previous epoch is accepted too
// while every partition committed is still assigned to the member (its heartbeat answer may
// not have arrived yet), as Kafka 4.3 allows (KIP-1251: an older epoch, for partitions assigned
// to the member at that epoch or before; Kafka 4.1 takes the current epoch only). Epoch 0, the
// join, is not: the member held nothing then, and KIP-1251 refuses it too.
func checkConsumerCommit(cs *consumerState, req *kmsg.OffsetCommitRequest) int16 {
	m := cs.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case req.Version < 9 && m.classic == nil: // a classic member (migrate.go) may send any version
		return kerr.UnsupportedVersion.Code
	case req.Generation == m.epoch:
		return 0
	case m.classic != nil:
		// A classic-protocol member commits with its generation, and knows only Kafka's
		// classic answer to a wrong one (ConsumerGroup.validateOffsetCommit).
		return kerr.IllegalGeneration.Code
	case req.Generation == m.prevEpoch && m.prevEpoch > 0:
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if !m.assigned.has(t.Topic, p.Partition) {
					return kerr.StaleMemberEpoch.Code
				}
			}
		}
		return 0
	}
	return kerr.StaleMemberEpoch.Code
}

// OffsetFetch handles an OffsetFetch request (one group before v8, several from v8).
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		topics := make([]kmsg.OffsetFetchRequestGroupTopic, len(req.Topics))
		for i, t := range req.Topics {
			topics[i] = kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions}
		}
		if req.Topics == nil {
			topics = nil
		}
		rg := c.fetchGroup(req.Group, topics, req.RequireStable)
		resp.ErrorCode = rg.ErrorCode
		if rg.ErrorCode != 0 && req.Version < 2 {
			// No top-level error before v2: as Kafka, each partition asked for carries it.
			for _, t := range req.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					empty := ""
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p, -1, -1, &empty, rg.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		}
		for _, t := range rg.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, rg := range req.Groups {
		if g := c.groups[rg.Group]; g != nil && (g.consumer != nil || g.streams != nil) && rg.MemberID != nil { // v9: a member asks
			known, epoch := false, int32(0)
			if g.consumer != nil {
				if m := g.consumer.members[*rg.MemberID]; m != nil {
					known, epoch = true, m.epoch
				}
			} else if m := g.streams.members[*rg.MemberID]; m != nil {
				known, epoch = true, m.Epoch
			}
			if !known || epoch != rg.MemberEpoch {
				fg := kmsg.NewOffsetFetchResponseGroup()
				fg.Group, fg.ErrorCode = rg.Group, kerr.StaleMemberEpoch.Code
				if !known {
					fg.ErrorCode = kerr.UnknownMemberID.Code
				}
				resp.Groups = append(resp.Groups, fg)
				continue
			}
		}
		resp.Groups = append(resp.Groups, c.fetchGroup(rg.Group, rg.Topics, req.RequireStable))
	}
	return resp
}

// fetchGroup answers one group's offsets: those asked for (nil: all), -1 where none is committed.
// With requireStable, a partition whose transactional commit is pending gets
// UNSTABLE_OFFSET_COMMIT (the client retries until the transaction ends).
func (c *Coordinator) fetchGroup(id string, topics []kmsg.OffsetFetchRequestGroupTopic, requireStable bool) kmsg.OffsetFetchResponseGroup {
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group = id // "" too: Kafka fetches the empty group's offsets, for backwards compatibility
	g := c.groups[id]
	if g != nil && g.share != nil {
		// As an unknown group: Kafka's OffsetMetadataManager.fetchOffsets takes the share
		// group's GroupIdNotFoundException as no offsets (-1 for each partition asked for).
		g = nil
	}
	part := func(tp TopicPartition) kmsg.OffsetFetchResponseGroupTopicPartition {
		p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = tp.Partition, -1, -1
		empty := ""
		p.Metadata = &empty
		if g != nil {
			if o, ok := g.offsets[tp]; ok {
				md := o.Metadata
				p.Offset, p.LeaderEpoch, p.Metadata = o.Offset, o.LeaderEpoch, &md
			}
		}
		if requireStable && c.hasPending(id, tp) {
			// As Kafka's OffsetMetadataManager.fetchOffsets: no offset with the error (a client
			// that read the row's offset anyway would resume at the one being replaced).
			p.ErrorCode, p.Offset, p.LeaderEpoch, p.Metadata = kerr.UnstableOffsetCommit.Code, -1, -1, &empty
		}
		return p
	}
	if topics == nil { // every committed offset
		if g == nil {
			return rg
		}
		byTopic := map[string]int{}
		for _, tp := range sortedPartitions(g.offsets) {
			i, ok := byTopic[tp.Topic]
			if !ok {
				i = len(rg.Topics)
				byTopic[tp.Topic] = i
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = tp.Topic
				rg.Topics = append(rg.Topics, rt)
			}
			rg.Topics[i].Partitions = append(rg.Topics[i].Partitions, part(tp))
		}
		return rg
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, part(TopicPartition{t.Topic, p}))
		}
		rg.Topics = append(rg.Topics, rt)
	}
	return rg
}

// OffsetDelete handles an OffsetDelete request: offsets of topics the group's members are
// subscribed to cannot be deleted (GROUP_SUBSCRIBED_TO_TOPIC).
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, Output) {
	var out Output
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g := c.groups[req.Group]
	switch {
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, out
	case g == nil || g.share != nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp, out
	}
	subscribed, known := g.subscribedTopics()
	if !known && g.consumer == nil && (g.State == Stable || g.State == PreparingRebalance || g.State == CompletingRebalance) {
		// A live classic group whose subscriptions cannot be read (not the consumer protocol,
		// as a Connect worker group): its offsets may be in use (Kafka's validateOffsetDelete).
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return resp, out
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			tp := TopicPartition{rt.Topic, rp.Partition}
			if subscribed[rt.Topic] {
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			} else if _, ok := g.offsets[tp]; ok || c.hasPending(g.ID, tp) {
				delete(g.offsets, tp)
				c.dropPending(g.ID, tp)
				out.Records = append(out.Records, offsetRecord(g.ID, tp, nil))
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, out
}

// ForgetTopics deletes every group's committed offsets of the deleted topics (name → the
// deleted topic's id), and drops their pending transactional commits, as Kafka's
// OffsetMetadataManager.onPartitionsDeleted does: a topic created again under the name starts
// with no committed offsets, so its consumers do not resume at the old topic's positions. An
// offset known to be committed to another topic of the name (one created again since) stays.
//
// With lookup (the metadata now: a topic's id, or false), it also forgets, in the same pass,
// the offsets of topics that no longer exist or exist under another id than the one the offset
// was committed to: a topic created and deleted between two of the caller's looks at the
// topics, which deleted never names, or deleted while this node was down. lookup must know
// every topic an offset could have been committed to since (the metadata the commits were
// checked against, or newer).
func (c *Coordinator) ForgetTopics(deleted map[string][16]byte, lookup func(topic string) ([16]byte, bool)) Output {
	if len(deleted) == 0 && lookup == nil {
		return Output{}
	}
	return c.forget(func(tp TopicPartition, o Offset) bool {
		if id, ok := deleted[tp.Topic]; ok && (o.topicID == [16]byte{} || o.topicID == id) {
			return true
		}
		if lookup == nil {
			return false
		}
		id, ok := lookup(tp.Topic)
		return !ok || (o.topicID != [16]byte{} && o.topicID != id)
	})
}

// forget deletes the committed offsets gone says are of deleted topics, and their pending
// transactional commits, writing a tombstone for each.
func (c *Coordinator) forget(gone func(TopicPartition, Offset) bool) Output {
	var out Output
	// Committed and pending alike, each once: the tombstone drops a pending commit on replay too
	// (Load), before its transaction's marker, as dropPending does here.
	forget := map[string]map[TopicPartition]bool{}
	add := func(group string, tp TopicPartition) {
		if forget[group] == nil {
			forget[group] = map[TopicPartition]bool{}
		}
		forget[group][tp] = true
	}
	for _, g := range c.groups {
		for tp, o := range g.offsets {
			if gone(tp, o) {
				add(g.ID, tp)
			}
		}
	}
	for _, byEpoch := range c.pending {
		for _, p := range byEpoch {
			for group, tps := range p {
				for tp, o := range tps {
					if gone(tp, o) {
						add(group, tp)
					}
				}
			}
		}
	}
	for _, group := range slices.Sorted(maps.Keys(forget)) {
		for _, tp := range sortedPartitions(forget[group]) {
			if g := c.groups[group]; g != nil {
				delete(g.offsets, tp)
			}
			c.dropPending(group, tp)
			out.Records = append(out.Records, offsetRecord(group, tp, nil))
		}
	}
	return out
}

// subscribedTopics are the topics the members subscribe to, read from their consumer protocol
// metadata (for groups of protocol type "consumer"; others subscribe to nothing known). known
// is false where that cannot be told: another protocol type, or a member's metadata unreadable.
func (g *Group) subscribedTopics() (topics map[string]bool, known bool) {
	out := map[string]bool{}
	if g.streams != nil { // a streams group reads its topology's sources and repartition topics
		if ct := g.streams.configured; ct != nil && len(g.streams.members) > 0 {
			for _, srcs := range ct.sources {
				for _, t := range srcs {
					out[t] = true
				}
			}
		} else if t := g.streams.topology; t != nil && len(g.streams.members) > 0 {
			for _, s := range t.Subtopologies {
				for _, src := range s.Sources {
					out[src] = true
				}
				for _, r := range s.RepartitionSources {
					out[r.Name] = true
				}
			}
		}
		return out, true
	}
	if g.consumer != nil {
		for _, m := range g.consumer.members {
			for _, t := range m.topics {
				out[t] = true
			}
			for tp := range g.offsets {
				if m.subscribes(tp.Topic) {
					out[tp.Topic] = true
				}
			}
		}
		return out, true
	}
	if g.ProtocolType != "consumer" {
		return out, false
	}
	if g.State == Empty {
		return out, true
	}
	known = true
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadata(g.Protocol)); err != nil {
			known = false
			continue
		}
		for _, t := range md.Topics {
			out[t] = true
		}
	}
	return out, known
}

// ExpireOffsets removes offsets past offsets.retention.minutes, as Kafka does since KIP-211: for
// a group with a protocol type, all of them once the group has been Empty that long; for a
// group that only stores offsets, each one that long after its commit. In a live consumer
// group (KIP-848, or a Stable classic one of protocol type "consumer" whose members' metadata
// is readable), the offsets of topics no member subscribes to any more expire that long after
// their commit (KIP-496). A group left Empty with no offsets is deleted.
func (c *Coordinator) ExpireOffsets(now time.Time) Output {
	var out Output
	retention := c.cfg.OffsetsRetention
	if retention <= 0 {
		return out
	}
	for _, g := range c.Groups() {
		if g.share != nil { // share groups never expire, as Kafka's
			continue
		}
		var subscribed map[string]bool // live: these topics' offsets stay
		if g.State != Empty {
			topics, known := g.subscribedTopics()
			if !known || (g.consumer == nil && g.streams == nil && g.State != Stable) {
				continue
			}
			subscribed = topics
		}
		for _, tp := range sortedPartitions(g.offsets) {
			o := g.offsets[tp]
			if subscribed[tp.Topic] || c.hasPending(g.ID, tp) {
				continue // a transactional commit pending for it decides first (as Kafka)
			}
			// A classic group that is empty counts from when it emptied (KIP-211); the others,
			// and consumer (KIP-848) and streams groups always, from each offset's commit (as
			// Kafka's offsetExpirationCondition of ClassicGroup, ConsumerGroup, StreamsGroup).
			since := g.StateSince
			if g.ProtocolType == "" || subscribed != nil || g.consumer != nil || g.streams != nil {
				since = time.UnixMilli(o.CommitTime)
			}
			expired := now.Sub(since) >= retention
			if o.ExpireTime != 0 { // an OffsetCommit v2-v4's own retention
				expired = now.UnixMilli() >= o.ExpireTime
			}
			if expired {
				delete(g.offsets, tp)
				out.Records = append(out.Records, offsetRecord(g.ID, tp, nil))
			}
		}
		if len(g.offsets) == 0 && g.memberCount() == 0 && len(c.pendingPartitions(g.ID)) == 0 {
			delete(c.groups, g.ID)
			out.Records = append(out.Records, Record{Group: g.ID, Key: groupKey(g.ID)}, Record{Group: g.ID, Key: consumerKey(g.ID)})
			if g.streams != nil {
				out.Records = append(out.Records, Record{Group: g.ID, Key: streamsKey(g.ID)})
			}
		}
	}
	return out
}

// DescribeGroups handles a DescribeGroups request.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group, dg.State = id, Dead.String()
		g := c.groups[id] // the empty group id is described, as Kafka does for backwards compatibility
		switch {
		case g == nil:
			if req.Version >= 6 {
				msg := fmt.Sprintf("Group %s not found.", id)
				dg.ErrorCode, dg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
			}
		case g.consumer != nil, g.share != nil, g.streams != nil:
			// Described by ConsumerGroupDescribe, ShareGroupDescribe or StreamsGroupDescribe (a consumer group with
			// classic-protocol members too); Dead here, as Kafka answers, and from v6
			// GROUP_ID_NOT_FOUND, on which Kafka's admin client falls back between the two.
			if req.Version >= 6 {
				msg := fmt.Sprintf("Group %s is not a classic group.", id)
				dg.ErrorCode, dg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
			}
		default:
			dg.State, dg.ProtocolType = g.State.String(), g.ProtocolType
			if g.State == Stable {
				dg.Protocol = g.Protocol
			}
			for _, m := range g.Members() {
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.ClientID, dm.ClientHost = m.ID, m.ClientID, m.ClientHost
				dm.InstanceID = optional(m.InstanceID)
				if g.State == Stable {
					dm.ProtocolMetadata, dm.MemberAssignment = m.metadata(g.Protocol), m.Assignment
				}
				dg.Members = append(dg.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// ListGroups handles a ListGroups request, with the v4 state and v5 type filters.
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	for _, g := range c.Groups() {
		state := g.State.String()
		if g.consumer != nil {
			state = g.consumer.stateName()
		}
		if g.streams != nil {
			state = g.streamsStateName()
		}
		if len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, state) && !containsFold(req.StatesFilter, snakeState(state)) {
			continue
		}
		if len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, g.Type()) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.ID, g.ProtocolType, state, g.Type()
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// snakeState is a state name as Kafka's lower-case form spells it: NotReady is not_ready.
func snakeState(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

// DeleteGroups handles a DeleteGroups request: only groups without members can be deleted.
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsResponse, Output) {
	var out Output
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		g := c.groups[id] // the empty group id is deleted, as Kafka does for backwards compatibility
		switch {
		case g == nil:
			rg.ErrorCode = kerr.GroupIDNotFound.Code
		case g.State != Empty || g.joinedMembers() > 0:
			rg.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			for _, tp := range sortedPartitions(g.offsets) {
				out.Records = append(out.Records, offsetRecord(id, tp, nil))
			}
			for _, tp := range c.pendingPartitions(id) { // their COMMIT must not bring it back
				if _, ok := g.offsets[tp]; !ok {
					out.Records = append(out.Records, offsetRecord(id, tp, nil))
				}
				c.dropPending(id, tp)
			}
			out.Records = append(out.Records, Record{Group: id, Key: groupKey(id)}, Record{Group: id, Key: consumerKey(id)})
			if g.streams != nil {
				out.Records = append(out.Records, Record{Group: id, Key: streamsKey(id)})
			}
			if g.share != nil {
				for _, sp := range g.share.sortedParts() {
					out.Records = append(out.Records, sharePartRecord(id, sp, nil))
				}
				out.Records = append(out.Records, Record{Group: id, Key: shareKey(id)})
			}
			delete(c.groups, id)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, out
}

// --- records ---------------------------------------------------------------------------------

// Record key versions in __consumer_offsets, as in Kafka.
const (
	offsetKeyVersion = 1
	groupKeyVersion  = 2
)

func offsetRecord(group string, tp TopicPartition, o *Offset) Record {
	key := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.Topic, Partition: tp.Partition}
	r := Record{Group: group, Key: key.AppendTo(nil)}
	if o != nil {
		v := kmsg.OffsetCommitValue{Version: 3, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimestamp: o.CommitTime}
		if o.ExpireTime != 0 { // value v1 holds it (and no leader epoch), as Kafka writes it
			v.Version, v.ExpireTimestamp = 1, o.ExpireTime
		}
		r.Value = v.AppendTo(nil)
	}
	return r
}

func groupKey(id string) []byte {
	key := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: id}
	return key.AppendTo(nil)
}

// metadataRecord is the group's membership record: what a restart needs to carry the group on.
func (g *Group) metadataRecord() Record {
	v := g.metadataValue()
	return Record{Group: g.ID, Key: groupKey(g.ID), Value: v.AppendTo(nil)}
}

// metadataValue is the value of the group's membership record.
func (g *Group) metadataValue() kmsg.GroupMetadataValue {
	v := kmsg.GroupMetadataValue{Version: 3, ProtocolType: g.ProtocolType, Generation: g.Generation,
		CurrentStateTimestamp: g.StateSince.UnixMilli()}
	v.Protocol, v.Leader = optional(g.Protocol), optional(g.Leader)
	for _, m := range g.Members() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.ClientID, vm.ClientHost = m.ID, m.ClientID, m.ClientHost
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = int32(m.RebalanceTimeout.Milliseconds()), int32(m.SessionTimeout.Milliseconds())
		vm.Subscription, vm.Assignment = m.metadata(g.Protocol), m.Assignment
		vm.InstanceID = optional(m.InstanceID)
		v.Members = append(v.Members, vm)
	}
	return v
}

// ErrBadRecord is returned by Load for a record it cannot decode.
var ErrBadRecord = errors.New("group: bad __consumer_offsets record")

// Load replays one record of __consumer_offsets (in log order) into the state, at startup.
// Members come back with their sessions restarted at now: those that do not heartbeat within
// their session timeout are removed, as after a coordinator move in Kafka.
func (c *Coordinator) Load(now time.Time, key, value []byte) error {
	if len(key) < 2 {
		return fmt.Errorf("%w: key of %d bytes", ErrBadRecord, len(key))
	}
	switch version := int16(binary.BigEndian.Uint16(key)); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("%w: offset key: %v", ErrBadRecord, err)
		}
		g := c.loadGroup(k.Group, now)
		tp := TopicPartition{k.Topic, k.Partition}
		if value == nil {
			delete(g.offsets, tp)
			c.dropPending(k.Group, tp)
			return nil
		}
		v := kmsg.NewOffsetCommitValue() // a value before v3 has no leader epoch: -1
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("%w: offset value: %v", ErrBadRecord, err)
		}
		o := Offset{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata, CommitTime: v.CommitTimestamp,
			record: c.nextRecord()}
		if v.Version == 1 && v.ExpireTimestamp >= 0 {
			o.ExpireTime = v.ExpireTimestamp
		}
		g.offsets[tp] = o
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("%w: group key: %v", ErrBadRecord, err)
		}
		if value == nil {
			// The classic group is gone: deleted (its offsets' tombstones came before), or
			// converted to another type (its offsets stay, and the new type's record follows).
			if g := c.groups[k.Group]; g != nil {
				c.dropClassic(now, g)
			}
			return nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("%w: group value: %v", ErrBadRecord, err)
		}
		c.loadMetadata(now, c.loadGroup(k.Group, now), &v)
	case consumerKeyVersion:
		return c.loadConsumer(now, key, value)
	case streamsKeyVersion:
		return c.loadStreams(now, key, value)
	case shareKeyVersion:
		return c.loadShare(now, key, value)
	case sharePartKeyVersion:
		return c.loadSharePart(now, key, value)
	default:
		return fmt.Errorf("%w: key version %d", ErrBadRecord, version)
	}
	return nil
}

// dropClassic forgets a loaded group's classic membership (its GroupMetadata record's
// tombstone), and the group itself if nothing else of it is left: no other type's state, no
// committed offsets. (A transactional offset still pending brings the group back if its
// transaction commits, as it does a deleted group live.)
func (c *Coordinator) dropClassic(now time.Time, g *Group) {
	if g.consumer != nil || g.share != nil || g.streams != nil {
		return // the later record decided the group's type
	}
	g.ProtocolType, g.Generation, g.Protocol, g.Leader = "", 0, "", ""
	g.members, g.order, g.static = map[string]*Member{}, nil, map[string]string{}
	if len(g.offsets) == 0 {
		delete(c.groups, g.ID)
		return
	}
	if g.State != Empty {
		g.transition(Empty, now)
	}
}

func (c *Coordinator) loadGroup(id string, now time.Time) *Group {
	g := c.groups[id]
	if g == nil {
		g = newGroup(id, now)
		c.groups[id] = g
	}
	return g
}

func (c *Coordinator) loadMetadata(now time.Time, g *Group, v *kmsg.GroupMetadataValue) {
	g.consumer, g.share, g.streams = nil, nil, nil // the later record decides the group's type
	g.ProtocolType, g.Generation, g.Protocol, g.Leader = v.ProtocolType, v.Generation, "", ""
	if v.Protocol != nil {
		g.Protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.Leader = *v.Leader
	}
	g.members, g.order, g.static = map[string]*Member{}, nil, map[string]string{}
	for _, vm := range v.Members {
		m := &Member{ID: vm.MemberID, ClientID: vm.ClientID, ClientHost: vm.ClientHost,
			SessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			RebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			Protocols:        []Protocol{{Name: g.Protocol, Metadata: vm.Subscription}}, Assignment: vm.Assignment}
		m.deadline = now.Add(m.SessionTimeout)
		if vm.InstanceID != nil {
			m.InstanceID = *vm.InstanceID
			g.static[m.InstanceID] = m.ID
		}
		g.members[m.ID] = m
		g.order = append(g.order, m.ID)
	}
	state := Empty
	if len(g.members) > 0 {
		state = Stable
	}
	g.State, g.StateSince = state, time.UnixMilli(v.CurrentStateTimestamp)
	if len(g.members) > 0 && v.Leader == nil {
		// A downgrade's record (maybeDowngrade): the rebalance it started goes on here, as
		// live, so that the members' heartbeats tell them to rejoin.
		g.State = PreparingRebalance
		g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
		g.joinDeadline = g.rebalanceDeadline
	}
}

func sortedPartitions[V any](m map[TopicPartition]V) []TopicPartition {
	out := slices.Collect(maps.Keys(m))
	slices.SortFunc(out, func(a, b TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}
