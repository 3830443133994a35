package group

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration between the classic and the consumer (KIP-848) protocols, as Kafka 4 does it
// (group.consumer.migration.policy), so that consumers can be upgraded (or downgraded) one at a
// time while the group keeps consuming:
//
//   - Upgrade: the first ConsumerGroupHeartbeat to a classic group of protocol type "consumer"
//     with members turns it into a consumer group. Every classic member becomes a member of it
//     with its subscription (from its JoinGroup metadata), its assignment (from its last
//     SyncGroup), the generation as its epoch, and the classic protocols it supports; a join or
//     sync that was waiting is answered REBALANCE_IN_PROGRESS, so the member joins again.
//   - Classic members in a consumer group go on with JoinGroup, SyncGroup, Heartbeat and
//     LeaveGroup. The server-side assignor includes them. A JoinGroup is answered at once: the
//     member's subscription is taken, and it is moved toward its target as a consumer-protocol
//     member is, its JoinGroup metadata's owned partitions showing what it released (none for an
//     eager member, which released everything before joining). The answer makes it a follower
//     (no leader computes anything) and its SyncGroup gets its partitions. While it has
//     partitions to give up, or partitions of its target to take, its Heartbeat is answered
//     REBALANCE_IN_PROGRESS so that it joins again: a cooperative member releases what its new
//     assignment lacks and rejoins; an eager one releases everything. New classic members may
//     join too (a protocol all classic members share is required).
//   - Downgrade: when the last consumer-protocol member leaves (or is removed) and classic
//     members remain, the group becomes a classic group again with their assignments and starts
//     a rebalance, which its members join as in any classic group.
//   - A static member changes protocol in place (its old process sends no leave): a
//     ConsumerGroupHeartbeat join with the instance id of a classic-protocol member replaces it,
//     and a JoinGroup with the instance id of a consumer-protocol member replaces that one,
//     downgrading the group if it was the last (Kafka's
//     getOrMaybeSubscribeStaticConsumerGroupMember, validateOnlineDowngradeWithReplacedMember).
//
// The policy: "bidirectional" (Kafka's default), "upgrade", "downgrade" or "disabled"; an
// empty group changes type whatever the policy.

// Migration policies (group.consumer.migration.policy).
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

// MigrationPolicies lists the valid policies.
var MigrationPolicies = []string{MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled}

// classicMeta is what a classic-protocol member of a consumer group has beyond a
// consumer-protocol member.
type classicMeta struct {
	protocols      []Protocol // in its order of preference
	sessionTimeout time.Duration
	// rejoinDeadline: told to join again (REBALANCE_IN_PROGRESS), the member must do so
	// within its rebalance timeout or be removed, as Kafka does (zero: not told).
	rejoinDeadline time.Time
}

func (c *Coordinator) upgradeAllowed() bool {
	p := c.cfg.MigrationPolicy
	return p == "" || p == MigrationBidirectional || p == MigrationUpgrade
}

func (c *Coordinator) downgradeAllowed() bool {
	p := c.cfg.MigrationPolicy
	return p == "" || p == MigrationBidirectional || p == MigrationDowngrade
}

// upgrade turns classic group g, which has members, into a consumer group (see above), or
// says why it cannot.
func (c *Coordinator) upgrade(now time.Time, g *Group, out *Output) error {
	if !c.upgradeAllowed() {
		return fmt.Errorf("group %s is a classic group with members, and group.consumer.migration.policy is %s", g.ID, c.cfg.MigrationPolicy)
	}
	if g.ProtocolType != "consumer" {
		return fmt.Errorf("group %s is a classic group of protocol type %q, not of the consumer protocol", g.ID, g.ProtocolType)
	}
	if c.cfg.MaxGroupSize > 0 && len(g.members) >= c.cfg.MaxGroupSize {
		return fmt.Errorf("group %s is full (group.max.size %d)", g.ID, c.cfg.MaxGroupSize)
	}
	cs := &consumerState{members: map[string]*consumerMember{}, target: map[string]assignment{}, epoch: g.Generation, assignmentEpoch: g.Generation}
	for _, m := range g.Members() {
		protocol := g.Protocol
		if protocol == "" && len(m.Protocols) > 0 { // no generation yet: its preferred one
			protocol = m.Protocols[0].Name
		}
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadata(protocol)); err != nil {
			return fmt.Errorf("group %s: member %s's subscription cannot be read: %v", g.ID, m.ID, err)
		}
		assigned := assignment{}
		if len(m.Assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.Assignment); err != nil {
				return fmt.Errorf("group %s: member %s's assignment cannot be read: %v", g.ID, m.ID, err)
			}
			for _, t := range a.Topics {
				for _, p := range t.Partitions {
					assigned.add(t.Topic, p)
				}
			}
		}
		cm := &consumerMember{id: m.ID, instanceID: m.InstanceID, clientID: m.ClientID, clientHost: m.ClientHost,
			epoch: g.Generation, prevEpoch: g.Generation, rebalanceTimeout: m.RebalanceTimeout, topics: sortedSet(md.Topics),
			assigned: assigned, revoking: assignment{}, deadline: now.Add(m.SessionTimeout),
			classic: &classicMeta{protocols: slices.Clone(m.Protocols), sessionTimeout: m.SessionTimeout}}
		cs.members[m.ID] = cm
		cs.target[m.ID] = assigned.clone()
	}
	for _, m := range g.Members() { // their waiting requests: join again, now in a consumer group
		if m.awaitingJoin {
			out.joinError(m.joinID, m.joinVersion, kerr.RebalanceInProgress, m.ID)
		}
		if m.awaitingSync {
			out.syncError(m.syncID, m.syncVersion, kerr.RebalanceInProgress)
		}
	}
	cs.metaSig = metadataSignature(cs, c.topics())
	// The classic group's record goes (a tombstone, as Kafka's conversion writes): the consumer
	// record follows it, and a compacted log must not keep the classic one to load back later.
	out.Records = append(out.Records, Record{Group: g.ID, Key: groupKey(g.ID)})
	g.consumer, g.ProtocolType = cs, TypeConsumer
	g.members, g.order, g.static, g.pending = map[string]*Member{}, nil, map[string]string{}, map[string]time.Time{}
	g.Protocol, g.Leader = "", ""
	g.transition(Stable, now)
	return nil
}

// maybeDowngrade turns consumer group g back into a classic group once only classic members
// are left, and starts the rebalance they join.
func (c *Coordinator) maybeDowngrade(now time.Time, g *Group, out *Output) {
	cs := g.consumer
	if cs == nil || len(cs.members) == 0 || !c.downgradeAllowed() {
		return
	}
	for _, m := range cs.members {
		if m.classic == nil {
			return
		}
	}
	g.consumer = nil
	g.ProtocolType = "consumer"
	// The generation the members hold: the last target's epoch (the leave itself bumped the
	// group epoch), so their heartbeats are answered REBALANCE_IN_PROGRESS, not
	// ILLEGAL_GENERATION (which would make a Java member start over with a new member id).
	g.Generation = cs.assignmentEpoch
	g.members, g.order, g.static, g.pending = map[string]*Member{}, nil, map[string]string{}, map[string]time.Time{}
	for _, cm := range sortedMembers(cs) {
		m := &Member{ID: cm.id, InstanceID: cm.instanceID, ClientID: cm.clientID, ClientHost: cm.clientHost,
			SessionTimeout: cm.classic.sessionTimeout, RebalanceTimeout: cm.rebalanceTimeout,
			Protocols: slices.Clone(cm.classic.protocols), Assignment: encodeAssignment(cm.assigned), deadline: now.Add(cm.classic.sessionTimeout)}
		g.members[m.ID] = m
		g.order = append(g.order, m.ID)
		if m.InstanceID != "" {
			g.static[m.InstanceID] = m.ID
		}
	}
	g.Protocol = g.selectProtocol()
	g.Leader = g.order[0]
	g.transition(Stable, now)
	// The consumer group's tombstone, then the classic group's record, with no leader: that
	// tells a coordinator that loads it to go on with the rebalance started below
	// (loadMetadata). Kafka's record names one (ClassicGroup.fromConsumerGroup), and a
	// coordinator that loads it has a Stable group of the generation the members hold: their
	// heartbeats are answered OK, nobody rejoins, and the partitions of the members that left
	// stay assigned to nobody.
	v := g.metadataValue()
	v.Leader = nil
	out.Records = append(out.Records, Record{Group: g.ID, Key: consumerKey(g.ID)}, Record{Group: g.ID, Key: groupKey(g.ID), Value: v.AppendTo(nil)})
	c.prepareRebalance(now, g, out)
}

// classicProtocols are the protocol names every classic member of cs supports (nil: no classic
// member, so any).
func (cs *consumerState) classicProtocols() []string {
	var names []string
	first := true
	for _, m := range sortedMembers(cs) {
		if m.classic == nil {
			continue
		}
		var mine []string
		for _, p := range m.classic.protocols {
			mine = append(mine, p.Name)
		}
		if first {
			names, first = mine, false
			continue
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(mine, n) })
	}
	if first {
		return nil
	}
	return names
}

// joinConsumerGroup handles a classic member's JoinGroup to a consumer group with members.
func (c *Coordinator) joinConsumerGroup(now time.Time, id RequestID, g *Group, req *kmsg.JoinGroupRequest, protocols []Protocol,
	session, rebalance time.Duration, clientID, clientHost string, out *Output) {
	fail := func(err *kerr.Error, memberID string) { out.joinError(id, req.Version, err, memberID) }
	cs := g.consumer
	if req.ProtocolType != "consumer" || len(protocols) == 0 {
		fail(kerr.InconsistentGroupProtocol, req.MemberID)
		return
	}
	if shared := cs.classicProtocols(); shared != nil && !slices.ContainsFunc(protocols, func(p Protocol) bool { return slices.Contains(shared, p.Name) }) {
		fail(kerr.InconsistentGroupProtocol, req.MemberID)
		return
	}
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(protocols[0].Metadata); err != nil {
		fail(kerr.InconsistentGroupProtocol, req.MemberID)
		return
	}
	memberID := req.MemberID
	var static *consumerMember
	if req.InstanceID != nil {
		static = cs.staticMember(*req.InstanceID)
	}
	m := cs.members[memberID]
	bump, replaced := false, false // replaced: a consumer-protocol member
	switch {
	case memberID == "" && static != nil:
		// A static member back under a new member id, or one of the consumer protocol
		// downgraded (its old process sends no leave): it is replaced at once, as Kafka's
		// getOrMaybeSubscribeStaticConsumerGroupMember does for a classic-protocol join.
		replaced = static.classic == nil
		m = c.replaceStatic(cs, static, newMemberID(*req.InstanceID), clientID, clientHost)
	case memberID == "":
		memberID = newMemberID(clientID)
		if req.InstanceID == nil && req.Version >= 4 { // KIP-394, as for a classic group
			g.pending[memberID] = now.Add(session)
			fail(kerr.MemberIDRequired, memberID)
			return
		}
		fallthrough
	case m == nil:
		if _, ok := g.pending[memberID]; !ok && req.MemberID != "" {
			fail(kerr.UnknownMemberID, memberID)
			return
		}
		if c.cfg.MaxGroupSize > 0 && len(cs.members) >= c.cfg.MaxGroupSize {
			fail(kerr.GroupMaxSizeReached, memberID)
			return
		}
		delete(g.pending, memberID)
		m, bump = cs.addMember(memberID, clientID, clientHost, req.InstanceID), true
	case req.InstanceID != nil && static == nil:
		// As Kafka's throwIfStaticMemberIsUnknown: a known member id with an instance id no
		// static member holds. Without an instance id a static member is found by its member
		// id (getOrMaybeCreateMember), and keeps its instance id.
		fail(kerr.UnknownMemberID, memberID)
		return
	case static != nil && static != m:
		fail(kerr.FencedInstanceID, memberID)
		return
	case m.classic == nil:
		fail(kerr.UnknownMemberID, memberID) // a consumer-protocol member
		return
	}
	m.classic = &classicMeta{protocols: protocols, sessionTimeout: session} // joined: no rejoin deadline
	m.clientID, m.clientHost, m.rebalanceTimeout = clientID, clientHost, rebalance
	m.deadline = now.Add(session)
	if topics := sortedSet(md.Topics); !slices.Equal(topics, m.topics) {
		m.topics, bump = topics, true
	}
	if md.Rack != nil {
		m.rackID = *md.Rack
	}
	topics := c.advance(cs, bump)
	owned := assignment{}
	for _, t := range md.OwnedPartitions {
		if _, ok := topics[t.Topic]; ok {
			for _, p := range t.Partitions {
				owned.add(t.Topic, p)
			}
		}
	}
	// A classic member shows in its join what it released: reconcile twice, so that a
	// revocation the join itself completes (an eager member owns nothing) grants at once.
	c.reconcile(now, cs, m, owned, topics)
	c.reconcile(now, cs, m, owned, topics)
	m.sent = ""
	resp := joinResponse(req.Version)
	pt, name := "consumer", c.classicProtocolFor(cs, m)
	resp.Generation, resp.ProtocolType, resp.Protocol, resp.MemberID = m.epoch, &pt, &name, m.id
	out.reply(id, resp)
	if replaced { // maybe the last consumer-protocol member: a classic group again, as Kafka
		c.maybeDowngrade(now, g, out)
	}
}

// advance moves the group epoch if bump or the subscribed topics' metadata changed, and
// computes the target assignment for a new epoch; it returns the topics.
func (c *Coordinator) advance(cs *consumerState, bump bool) map[string]TopicMeta {
	topics := c.topics()
	cs.resolveRegexes(topics)
	if sig := metadataSignature(cs, topics); sig != cs.metaSig {
		cs.metaSig = sig
		bump = true
	}
	if bump {
		cs.epoch++
	}
	if cs.epoch > cs.assignmentEpoch {
		cs.target = computeTarget(cs, topics)
		cs.assignmentEpoch = cs.epoch
	}
	return topics
}

// classicProtocolFor is the protocol m's join and sync name: its most preferred one that every
// classic member supports.
func (c *Coordinator) classicProtocolFor(cs *consumerState, m *consumerMember) string {
	shared := cs.classicProtocols()
	for _, p := range m.classic.protocols {
		if shared == nil || slices.Contains(shared, p.Name) {
			return p.Name
		}
	}
	return m.classic.protocols[0].Name
}

// syncConsumerGroup answers a classic member's SyncGroup in a consumer group: its partitions.
func (c *Coordinator) syncConsumerGroup(now time.Time, id RequestID, g *Group, req *kmsg.SyncGroupRequest, out *Output) {
	cs := g.consumer
	m := cs.members[req.MemberID]
	var err *kerr.Error
	switch {
	case req.InstanceID != nil && cs.staticMember(*req.InstanceID) == nil:
		err = kerr.UnknownMemberID // Kafka's validateConsumerGroupMember
	case req.InstanceID != nil && cs.staticMember(*req.InstanceID) != m:
		err = kerr.FencedInstanceID
	case m == nil || m.classic == nil:
		err = kerr.UnknownMemberID
	case req.Generation != m.epoch:
		err = kerr.IllegalGeneration
	case req.ProtocolType != nil && *req.ProtocolType != "consumer",
		req.Protocol != nil && !slices.ContainsFunc(m.classic.protocols, func(p Protocol) bool { return p.Name == *req.Protocol }):
		err = kerr.InconsistentGroupProtocol
	}
	if err != nil {
		out.syncError(id, req.Version, err)
		return
	}
	m.deadline = now.Add(m.classic.sessionTimeout)
	resp := syncResponse(req.Version)
	resp.MemberAssignment = encodeAssignment(m.assigned)
	pt, name := "consumer", c.classicProtocolFor(cs, m)
	if req.Protocol != nil {
		name = *req.Protocol
	}
	resp.ProtocolType, resp.Protocol = &pt, &name
	out.reply(id, resp)
}

// heartbeatConsumerGroup answers a classic member's Heartbeat in a consumer group; a member
// that has partitions to give up, or to take that are free now, is asked to join again. One
// whose missing partitions another member still holds waits (Kafka's
// waitingOnUnreleasedPartition): each rejoin would make an eager member give up everything
// again, while nothing new could be assigned.
func heartbeatConsumerGroup(now time.Time, cs *consumerState, req *kmsg.HeartbeatRequest) int16 {
	m := cs.members[req.MemberID]
	switch {
	case req.InstanceID != nil && cs.staticMember(*req.InstanceID) == nil:
		return kerr.UnknownMemberID.Code // Kafka's validateConsumerGroupMember
	case req.InstanceID != nil && cs.staticMember(*req.InstanceID) != m:
		return kerr.FencedInstanceID.Code
	case m == nil || m.classic == nil:
		return kerr.UnknownMemberID.Code
	case req.Generation != m.epoch:
		return kerr.IllegalGeneration.Code
	}
	m.deadline = now.Add(m.classic.sessionTimeout)
	// As Kafka's classicGroupHeartbeatToConsumerGroup: a member behind the group epoch rejoins
	// (a leave or a subscription change bumped it: the rejoin computes the new target), as does
	// one with partitions to give up, or to take that are free.
	if m.revoking.size() > 0 || m.epoch < cs.epoch || m.epoch != cs.assignmentEpoch || canTake(cs, m) || m.assigned.minus(cs.target[m.id]).size() > 0 {
		if m.classic.rejoinDeadline.IsZero() {
			m.classic.rejoinDeadline = now.Add(max(m.rebalanceTimeout, time.Second))
		}
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// canTake reports whether a partition of m's target that m lacks is free to take.
func canTake(cs *consumerState, m *consumerMember) bool {
	for t, ps := range cs.target[m.id].minus(m.assigned) {
		for _, p := range ps {
			if !heldByOther(cs, m, t, p) {
				return true
			}
		}
	}
	return false
}

// leaveConsumerGroup removes a member of a consumer group named by a LeaveGroup, by member id or
// instance id, classic or consumer-protocol alike, as Kafka 4.1's
// classicGroupLeaveToConsumerGroup (Admin.removeMembersFromConsumerGroup, removeAll() too).
// Before, a consumer-protocol member named by its member id was UNKNOWN_MEMBER_ID (Kafka 4.0's
// rule).
func (c *Coordinator) leaveConsumerGroup(now time.Time, g *Group, lm kmsg.LeaveGroupRequestMember, out *Output) int16 {
	cs := g.consumer
	m := cs.members[lm.MemberID]
	if lm.InstanceID != nil {
		s := cs.staticMember(*lm.InstanceID)
		switch {
		case s == nil:
			return kerr.UnknownMemberID.Code
		case lm.MemberID != "" && lm.MemberID != s.id:
			return kerr.FencedInstanceID.Code
		}
		m = s
	}
	if _, ok := g.pending[lm.MemberID]; ok && m == nil {
		delete(g.pending, lm.MemberID)
		return 0
	}
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	c.removeConsumer(now, g, m)
	return 0
}

// encodeAssignment is a's consumer protocol assignment (version 0), what a classic member's
// SyncGroup carries.
func encodeAssignment(a assignment) []byte {
	as := kmsg.NewConsumerMemberAssignment()
	for _, t := range sortedTopics(a) {
		as.Topics = append(as.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: t, Partitions: slices.Clone(a[t])})
	}
	return as.AppendTo(nil)
}

// sortedSet returns the strings sorted, each once.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}
