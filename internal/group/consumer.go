package group

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The KIP-848 consumer group protocol: members heartbeat (ConsumerGroupHeartbeat) with their
// subscription and the partitions they own; the coordinator computes the target assignment
// with a server-side assignor (uniform or range) whenever the group epoch moves (a member joins
// or leaves, a subscription or a subscribed topic's partition count changes), and moves each
// member toward its target incrementally: first it revokes what the member must give up (the
// member keeps its epoch until its heartbeat shows the partitions released), then it grants the
// target's partitions that no other member still holds, and the member takes the assignment
// epoch. A member that does not heartbeat within the session timeout, or does not revoke within
// its rebalance timeout, is removed.
//
// A group is of one type at a time, as in Kafka: an empty classic group becomes a consumer
// group on the first ConsumerGroupHeartbeat and an empty consumer group a classic one on the
// first JoinGroup. A live group migrates online (migrate.go): a classic group of the consumer
// protocol becomes a consumer group on a member's first ConsumerGroupHeartbeat, its classic
// members staying in it, and a consumer group whose last consumer-protocol member leaves
// becomes classic again.

// Assignors are the server-side assignors of consumer groups, the default first (Kafka's
// group.consumer.assignors).
var Assignors = []string{"uniform", "range"}

// Group types.
const (
	TypeClassic  = "classic"
	TypeConsumer = "consumer"
)

// TopicMeta is what the assignors need of a topic.
type TopicMeta struct {
	ID         [16]byte
	Partitions int32
}

// assignment maps a topic name to its partitions, ascending.
type assignment map[string][]int32

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) has(t string, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

func (a assignment) add(t string, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

func (a assignment) size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// minus returns the partitions of a not in b.
func (a assignment) minus(b assignment) assignment {
	out := assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				out.add(t, p)
			}
		}
	}
	return out
}

// equal reports whether a and b hold the same partitions (empty topics count as absent).
func (a assignment) equal(b assignment) bool {
	if a.size() != b.size() {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func (a assignment) signature() string {
	topics := make([]string, 0, len(a))
	for t := range a {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var sb strings.Builder
	for _, t := range topics {
		fmt.Fprintf(&sb, "%s:%v;", t, a[t])
	}
	return sb.String()
}

type consumerMember struct {
	id, instanceID, clientID, clientHost, rackID string
	epoch, prevEpoch                             int32
	rebalanceTimeout                             time.Duration
	topics                                       []string
	regex                                        *subscriptionRegex
	assignor                                     string
	assigned                                     assignment // owned, as far as the coordinator knows
	revoking                                     assignment // told to give up, not yet confirmed
	revokeDeadline                               time.Time
	deadline                                     time.Time    // session
	sent                                         string       // epoch and assignment last sent
	classic                                      *classicMeta // a classic-protocol member (migrate.go); nil: consumer protocol
	// canDescribe filters the topics its regex matches (its latest heartbeat's principal);
	// nil: every topic. A reloaded member's is its persisted resolution until it heartbeats.
	canDescribe TopicFilter
	// resolved is what its regex resolves to (sorted), as advance last saw it; persisted, as
	// Kafka's ConsumerGroupRegularExpression records, so that a coordinator taking the group
	// over resolves the regex as this one did.
	resolved []string
}

// subscriptionRegex is a member's SubscribedTopicRegex (RE2 syntax, as Kafka's RE2J), matched
// against whole topic names as Kafka matches it (Matcher.matches): "orders" is orders alone,
// not orders_dlq.
type subscriptionRegex struct {
	expr string
	re   *regexp.Regexp
}

func compileSubscription(expr string) (*subscriptionRegex, error) {
	if _, err := regexp.Compile(expr); err != nil { // alone: the anchors could balance a bad one
		return nil, err
	}
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, err
	}
	return &subscriptionRegex{expr, re}, nil
}

func (r *subscriptionRegex) String() string            { return r.expr }
func (r *subscriptionRegex) MatchString(s string) bool { return r.re.MatchString(s) }

// resolveRegexes records what each member's regex resolves to (consumerMember.resolved).
func (cs *consumerState) resolveRegexes(topics map[string]TopicMeta) {
	if topics == nil {
		return // no metadata: nothing to resolve against
	}
	for _, m := range cs.members {
		if m.regex == nil {
			m.resolved = nil
			continue
		}
		var resolved []string
		for t := range topics {
			if m.regex.MatchString(t) && (m.canDescribe == nil || m.canDescribe(t)) {
				resolved = append(resolved, t)
			}
		}
		sort.Strings(resolved)
		m.resolved = resolved
	}
}

// subscribes reports whether m wants topic.
func (m *consumerMember) subscribes(topic string) bool {
	if m.regex != nil && m.regex.MatchString(topic) && (m.canDescribe == nil || m.canDescribe(topic)) {
		return true
	}
	return slices.Contains(m.topics, topic)
}

type consumerState struct {
	epoch, assignmentEpoch int32
	members                map[string]*consumerMember
	target                 map[string]assignment
	metaSig                string // the subscribed topics' metadata the target was computed for
}

// joinedMembers is memberCount without a classic group's pending members (answered
// MEMBER_ID_REQUIRED, never joined): an Empty classic group holding only those is deleted, as
// Kafka's ClassicGroup.validateDeleteGroup looks at the state alone.
func (g *Group) joinedMembers() int {
	if g.Type() == TypeClassic {
		return len(g.members)
	}
	return g.memberCount()
}

func (g *Group) memberCount() int {
	switch {
	case g.consumer != nil:
		return len(g.consumer.members)
	case g.share != nil:
		return len(g.share.members)
	case g.streams != nil:
		return len(g.streams.members)
	}
	return len(g.members) + len(g.pending)
}

// ConsumerGroupHeartbeat handles a ConsumerGroupHeartbeat request. The response goes out once
// Output.Records are durable: a heartbeat that changed the group (a join, a leave, an epoch, an
// assignment) records the group's new state.
func (c *Coordinator) ConsumerGroupHeartbeat(now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) (*kmsg.ConsumerGroupHeartbeatResponse, Output) {
	return c.ConsumerGroupHeartbeatAs(now, req, clientID, clientHost, nil)
}

// TopicFilter reports whether a member may see a topic (its principal's DESCRIBE on it).
type TopicFilter func(topic string) bool

// ConsumerGroupHeartbeatAs is ConsumerGroupHeartbeat from a member whose principal may describe
// the topics canDescribe allows (nil: every topic). A member's regex subscription resolves to
// the matching topics it may describe, as Kafka's does (GroupMetadataManager's
// filterTopicDescribeAuthorizedTopics); its latest heartbeat's filter holds until the next,
// and its answers are kept for that long (an ACL change takes effect at the next heartbeat).
// Explicit topic names are not filtered, as in Kafka: the consumer learns of a topic it may
// not read from Metadata and Fetch.
func (c *Coordinator) ConsumerGroupHeartbeatAs(now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string, canDescribe TopicFilter) (*kmsg.ConsumerGroupHeartbeatResponse, Output) {
	before := c.consumerStateValue(req.Group)
	var out Output
	resp := c.consumerHeartbeat(now, req, clientID, clientHost, cachedFilter(canDescribe), &out)
	c.recordConsumerChange(req.Group, before, &out)
	return resp, out
}

// cachedFilter remembers f's answers (it is asked for every topic at every assignment).
func cachedFilter(f TopicFilter) TopicFilter {
	if f == nil {
		return nil
	}
	seen := map[string]bool{}
	return func(topic string) bool {
		ok, asked := seen[topic]
		if !asked {
			ok = f(topic)
			seen[topic] = ok
		}
		return ok
	}
}

func (c *Coordinator) consumerHeartbeat(now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string, canDescribe TopicFilter, out *Output) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(err *kerr.Error, format string, args ...any) *kmsg.ConsumerGroupHeartbeatResponse {
		msg := fmt.Sprintf(format, args...)
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp
	}
	memberID := req.MemberID
	switch {
	case req.Group == "":
		return fail(kerr.InvalidRequest, "the group id is empty")
	case memberID == "" && (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == -1):
		// Kafka's rule: a v0 static member may leave (epoch -2) without its member id.
		return fail(kerr.InvalidRequest, "the member id is empty")
	case req.MemberEpoch < -2:
		return fail(kerr.InvalidRequest, "member epoch %d is invalid", req.MemberEpoch)
	case req.InstanceID != nil && *req.InstanceID == "":
		return fail(kerr.InvalidRequest, "the instance id is empty")
	case req.RackID != nil && *req.RackID == "":
		return fail(kerr.InvalidRequest, "the rack id is empty")
	case req.MemberEpoch == -2 && req.InstanceID == nil:
		return fail(kerr.InvalidRequest, "member epoch -2 (a static member leaving for a while) needs the instance id")
	case req.MemberEpoch == 0 && req.RebalanceTimeoutMillis == -1:
		return fail(kerr.InvalidRequest, "a joining member must send its rebalance timeout")
	case req.MemberEpoch == 0 && (req.Topics == nil || len(req.Topics) > 0):
		return fail(kerr.InvalidRequest, "a joining member owns no partitions: its owned partitions must be an empty list")
	case req.MemberEpoch == 0 && req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
		return fail(kerr.InvalidRequest, "a joining member must send its subscription")
	case req.ServerAssignor != nil && !slices.Contains(Assignors, *req.ServerAssignor):
		return fail(kerr.UnsupportedAssignor, "server assignor %s is not supported; supported: %s", *req.ServerAssignor, strings.Join(Assignors, ", "))
	}
	// The request is checked before anything changes (Kafka's
	// throwIfConsumerGroupHeartbeatRequestIsInvalid; a request Kafka fails later writes none of
	// its records): a failed join must not upgrade a classic group, or remove a static member
	// it was to replace.
	var regex *subscriptionRegex
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		var err error
		if regex, err = compileSubscription(*req.SubscribedTopicRegex); err != nil {
			return fail(kerr.InvalidRegularExpression, "subscribed topic regex %s is not a valid regular expression: %v", *req.SubscribedTopicRegex, err)
		}
	}
	if memberID == "" { // v0: the coordinator names the member
		memberID = newMemberID(clientID)
	}
	g := c.groups[req.Group]
	created := g == nil
	if g == nil {
		if req.MemberEpoch != 0 { // as Kafka: only a join creates the group
			return fail(kerr.GroupIDNotFound, "Group %s not found.", req.Group)
		}
		g = newGroup(req.Group, now)
		c.groups[req.Group] = g
	}
	if g.share != nil || g.streams != nil || g.consumer == nil && req.MemberEpoch != 0 {
		// Not a consumer group (a classic one is converted by a join only, as Kafka): nothing
		// changes.
		return fail(kerr.GroupIDNotFound, "Group %s is not a consumer group.", req.Group)
	}
	if g.consumer == nil && !created && len(g.members) == 0 {
		// An empty classic group is replaced: its record goes (a tombstone, as Kafka's
		// conversion writes; upgrade writes one for a group with members), so a compacted log
		// keeps no classic record to load back later.
		out.Records = append(out.Records, Record{Group: g.ID, Key: groupKey(g.ID)})
	}
	fresh := false // a consumer group created by this heartbeat
	if g.consumer == nil {
		// A classic group with members migrates; one with none (ids handed out for a first
		// JoinGroup, KIP-394, are not members: it is Empty, as in Kafka) is replaced.
		if len(g.members) > 0 {
			if req.MemberEpoch != 0 {
				return fail(kerr.UnknownMemberID, "group %s has no member %s", req.Group, memberID)
			}
			if err := c.upgrade(now, g, out); err != nil { // online migration (migrate.go)
				return fail(kerr.GroupIDNotFound, "%v", err)
			}
		} else {
			g.consumer = &consumerState{members: map[string]*consumerMember{}, target: map[string]assignment{}, epoch: g.Generation}
			fresh = true
			g.ProtocolType = TypeConsumer
			// Nothing of the classic group stays: its pending ids (Kafka drops them with it),
			// and a rebalance it was preparing (a member left while an id was pending).
			clear(g.pending)
			if g.State != Empty {
				g.transition(Empty, now)
			}
		}
	}
	cs := g.consumer
	m := cs.members[memberID]
	if m != nil && m.classic != nil {
		return fail(kerr.UnknownMemberID, "member %s of group %s uses the classic protocol", memberID, req.Group)
	}
	var static *consumerMember // the member holding the request's instance id
	if req.InstanceID != nil {
		static = cs.staticMember(*req.InstanceID)
		if req.MemberEpoch != 0 { // only the member holding the instance id may use it
			if static == nil {
				return fail(kerr.UnknownMemberID, "group %s has no member with instance id %s", req.Group, *req.InstanceID)
			}
			if static.id != memberID {
				return fail(kerr.FencedInstanceID, "instance id %s is used by member %s, not %s", *req.InstanceID, static.id, memberID)
			}
		}
	}
	bump := false // the group epoch moves at most once per heartbeat
	switch req.MemberEpoch {
	case -2: // a static member leaving for a while: it keeps its assignment for its session
		static.epoch, static.revoking = -2, assignment{}
		resp.MemberID, resp.MemberEpoch = &memberID, req.MemberEpoch
		return resp
	case -1: // leave
		if m == nil {
			return fail(kerr.UnknownMemberID, "group %s has no member %s", req.Group, memberID)
		}
		c.removeConsumer(now, g, m)
		c.maybeDowngrade(now, g, out) // only classic members left: a classic group again
		resp.MemberID, resp.MemberEpoch = &memberID, req.MemberEpoch
		return resp
	case 0:
		// A consumer-protocol member must have left for a while (epoch -2) for another to take
		// its instance id; a classic-protocol one is replaced at once, as Kafka's
		// getOrMaybeSubscribeStaticConsumerGroupMember does: that is a static member's rolling
		// upgrade from the classic protocol, whose old process sends no leave.
		if static != nil && static.classic == nil && static.epoch != -2 {
			return fail(kerr.UnreleasedInstanceID, "instance %s is still used by member %s", *req.InstanceID, static.id)
		}
		if m != nil && m != static { // rejoining after being fenced: start over
			c.removeConsumer(now, g, m)
		}
		if static != nil {
			// The static member comes back within its session: this member takes its place,
			// its assignment and its target, and the group epoch stays (KIP-848).
			m = c.replaceStatic(cs, static, memberID, clientID, clientHost)
			m.classic = nil // it uses the consumer protocol now
			break
		}
		// A new member moves the group epoch by its subscription (updateConsumer: it had none),
		// or if the group is new, as Kafka's consumerGroupHeartbeat.
		m, bump = cs.addMember(memberID, clientID, clientHost, req.InstanceID), fresh || cs.epoch == 0
		if g.State == Empty {
			g.transition(Stable, now)
		}
	default:
		if m == nil {
			return fail(kerr.UnknownMemberID, "group %s has no member %s", req.Group, memberID)
		}
		// The previous epoch is taken (the response with the new one may have been lost) if
		// the member owns no more than it is assigned, as Kafka's
		// throwIfConsumerGroupMemberEpochIsInvalid.
		if req.MemberEpoch > m.epoch || req.MemberEpoch < m.epoch &&
			(req.MemberEpoch != m.prevEpoch || !ownsSubset(req.Topics, m.assigned, c.topics())) {
			return fail(kerr.FencedMemberEpoch, "member %s sent epoch %d; its epoch is %d", memberID, req.MemberEpoch, m.epoch)
		}
	}
	bump = c.updateConsumer(m, req, regex) || bump
	m.canDescribe = canDescribe
	set := c.cfg.groupSettings(req.Group)
	m.deadline = now.Add(set.ConsumerSessionTimeout)
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	topics := c.advance(cs, bump) // a new epoch also when partitions or topics came or went
	owned := ownedPartitions(req.Topics, topics)
	c.reconcile(now, cs, m, owned, topics)
	resp.MemberID, resp.MemberEpoch = &memberID, m.epoch
	resp.HeartbeatIntervalMillis = int32(set.ConsumerHeartbeatInterval.Milliseconds())
	// The assignment goes back on a full request (what a member sends when it joins or after an
	// error: every non-optional field set) or when the member's assignment changed, as in
	// Kafka's consumerGroupHeartbeat; a heartbeat that only names its owned partitions gets none.
	full := req.MemberEpoch == 0 || req.RebalanceTimeoutMillis != -1 &&
		(req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if sent := fmt.Sprint(m.epoch, m.assigned.signature()); sent != m.sent || full {
		m.sent = sent
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, t := range sortedTopics(m.assigned) {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = topics[t].ID, slices.Clone(m.assigned[t])
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp
}

// updateConsumer takes a heartbeat's subscription (regex: its regex, compiled) and assignor,
// both checked already; a change of subscription moves the group epoch (a change of assignor
// counts at the next one, as in Kafka's hasMemberSubscriptionChanged).
func (c *Coordinator) updateConsumer(m *consumerMember, req *kmsg.ConsumerGroupHeartbeatRequest, regex *subscriptionRegex) bool {
	changed := false
	if req.SubscribedTopicNames != nil {
		topics := slices.Clone(req.SubscribedTopicNames)
		sort.Strings(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics, changed = topics, true
		}
	}
	if req.SubscribedTopicRegex != nil {
		cur := "" // "": no regex, as a member without one
		if m.regex != nil {
			cur = m.regex.String()
		}
		if cur != *req.SubscribedTopicRegex {
			m.regex, changed = regex, true // nil for ""
		}
	}
	if req.ServerAssignor != nil {
		m.assignor = *req.ServerAssignor
	}
	return changed
}

func (c *Coordinator) topics() map[string]TopicMeta {
	if c.Topics == nil {
		return nil
	}
	return c.Topics()
}

// metadataSignature describes the subscribed topics as the assignors see them.
func metadataSignature(cs *consumerState, topics map[string]TopicMeta) string {
	var names []string
	for t := range topics {
		for _, m := range cs.members {
			if m.subscribes(t) {
				names = append(names, t)
				break
			}
		}
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, t := range names {
		fmt.Fprintf(&sb, "%s/%x/%d;", t, topics[t].ID, topics[t].Partitions)
	}
	return sb.String()
}

func ownedPartitions(ts []kmsg.ConsumerGroupHeartbeatRequestTopic, topics map[string]TopicMeta) assignment {
	if ts == nil {
		return nil
	}
	byID := map[[16]byte]string{}
	for name, t := range topics {
		byID[t.ID] = name
	}
	out := assignment{}
	for _, t := range ts {
		name, ok := byID[t.TopicID]
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			out.add(name, p)
		}
	}
	return out
}

// reconcile moves m toward its target: revoke first, then grant what nobody else holds. owned
// is what the member's heartbeat says it owns (nil: not said); topics, every topic.
func (c *Coordinator) reconcile(now time.Time, cs *consumerState, m *consumerMember, owned assignment, topics map[string]TopicMeta) {
	if m.revoking.size() > 0 {
		// A topic deleted meanwhile is revoked with the rest (Kafka's CurrentAssignmentBuilder
		// strips what the member no longer subscribes to), so that it is never sent without
		// its topic id.
		for t, ps := range m.assigned {
			if _, ok := topics[t]; !ok && topics != nil {
				for _, p := range ps {
					m.revoking.add(t, p)
				}
				delete(m.assigned, t)
			}
		}
		if owns(owned, m.revoking) {
			return // keep waiting for the revocation
		}
		m.revoking = assignment{}
	}
	target := cs.target[m.id]
	if target == nil {
		target = assignment{}
	}
	if revoke := m.assigned.minus(target); revoke.size() > 0 {
		m.assigned = m.assigned.minus(revoke)
		if owns(owned, revoke) { // else released already: no revocation round, as Kafka
			m.revoking = revoke
			m.revokeDeadline = now.Add(max(m.rebalanceTimeout, time.Second))
			return
		}
	}
	for t, ps := range target.minus(m.assigned) {
		for _, p := range ps {
			if !heldByOther(cs, m, t, p) {
				m.assigned.add(t, p)
			}
		}
	}
	if m.epoch != cs.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, cs.assignmentEpoch
	}
}

// owns reports whether owned, a heartbeat's owned partitions, holds any of a; not saying
// (nil) counts as holding them (Kafka's ownsRevokedPartitions).
func owns(owned, a assignment) bool {
	if owned == nil {
		return true
	}
	for t, ps := range a {
		for _, p := range ps {
			if owned.has(t, p) {
				return true
			}
		}
	}
	return false
}

// ownsSubset reports whether a heartbeat's owned partitions are given and all in a (Kafka's
// isSubset: a topic unknown, or not in a, is not).
func ownsSubset(ts []kmsg.ConsumerGroupHeartbeatRequestTopic, a assignment, topics map[string]TopicMeta) bool {
	if ts == nil {
		return false
	}
	byID := map[[16]byte]string{}
	for name, t := range topics {
		byID[t.ID] = name
	}
	for _, t := range ts {
		name, ok := byID[t.TopicID]
		if !ok || len(a[name]) == 0 {
			return false
		}
		for _, p := range t.Partitions {
			if !a.has(name, p) {
				return false
			}
		}
	}
	return true
}

// addMember adds a new member with nothing assigned (instance: its instance id, or nil).
func (cs *consumerState) addMember(id, clientID, clientHost string, instance *string) *consumerMember {
	m := &consumerMember{id: id, clientID: clientID, clientHost: clientHost, assigned: assignment{},
		revoking: assignment{}} // no assignor named: no vote (computeTarget)
	if instance != nil {
		m.instanceID = *instance
	}
	cs.members[id] = m
	return m
}

// staticMember is the member holding instance id, or nil.
func (cs *consumerState) staticMember(instanceID string) *consumerMember {
	for _, m := range cs.members {
		if m.instanceID == instanceID {
			return m
		}
	}
	return nil
}

// replaceStatic puts a new member id in the place of a static member that left for a while
// (epoch -2): the same subscription, assignment and target, epoch 0 until it reconciles.
func (c *Coordinator) replaceStatic(cs *consumerState, old *consumerMember, memberID, clientID, clientHost string) *consumerMember {
	m := *old
	m.id, m.clientID, m.clientHost = memberID, clientID, clientHost
	m.epoch, m.prevEpoch, m.revoking, m.sent = 0, 0, assignment{}, ""
	m.assigned = old.assigned.clone()
	delete(cs.members, old.id)
	cs.members[memberID] = &m
	if target, ok := cs.target[old.id]; ok {
		delete(cs.target, old.id)
		cs.target[memberID] = target
	}
	return &m
}

func heldByOther(cs *consumerState, m *consumerMember, t string, p int32) bool {
	for _, o := range cs.members {
		if o != m && (o.assigned.has(t, p) || o.revoking.has(t, p)) {
			return true
		}
	}
	return false
}

func (c *Coordinator) removeConsumer(now time.Time, g *Group, m *consumerMember) {
	cs := g.consumer
	delete(cs.members, m.id)
	delete(cs.target, m.id)
	cs.epoch++
	if len(cs.members) == 0 {
		g.transition(Empty, now)
	}
}

// tickConsumer removes members whose session expired or who did not revoke in time and reports
// whether it removed any (each removal bumps the group epoch, so the state changed).
func (c *Coordinator) tickConsumer(now time.Time, g *Group, out *Output) bool {
	removed := false
	for _, m := range sortedMembers(g.consumer) {
		if !now.Before(m.deadline) || (m.revoking.size() > 0 && !now.Before(m.revokeDeadline)) ||
			(m.classic != nil && !m.classic.rejoinDeadline.IsZero() && !now.Before(m.classic.rejoinDeadline)) {
			c.removeConsumer(now, g, m)
			removed = true
		}
	}
	if removed {
		c.maybeDowngrade(now, g, out)
	}
	return removed
}

func sortedMembers(cs *consumerState) []*consumerMember {
	out := make([]*consumerMember, 0, len(cs.members))
	for _, m := range cs.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func sortedTopics(a assignment) []string {
	out := make([]string, 0, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// groupAssignor is the assignor most members name (ties: the configured order); members that
// name none do not vote, as in Kafka; with no vote, the default (Assignors[0]).
func groupAssignor(cs *consumerState) string {
	votes := map[string]int{}
	for _, m := range cs.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	assignor := Assignors[0]
	for _, a := range Assignors {
		if votes[a] > votes[assignor] {
			assignor = a
		}
	}
	return assignor
}

// computeTarget runs the group's assignor over every member's subscription.
func computeTarget(cs *consumerState, topics map[string]TopicMeta) map[string]assignment {
	members := sortedMembers(cs)
	if groupAssignor(cs) == "range" {
		return assignRange(members, topics, cs.target)
	}
	return assignUniform(members, topics, cs.target)
}

// assignRange is Kafka's server-side range assignor, per topic: of the subscribed members
// (sorted by id), each keeps the lowest partitions of its previous target up to the quota
// (partitions / members; one more for the first ones to reach it while some are left over,
// each member one at most), and the partitions left go out in contiguous ranges to the members
// short of their quota, in order. Without a previous target that is the classic range
// assignment; with one, a join or a leave moves only the partitions it must (Kafka's
// RangeAssignor is sticky).
func assignRange(members []*consumerMember, topics map[string]TopicMeta, prev map[string]assignment) map[string]assignment {
	out := map[string]assignment{}
	for _, m := range members {
		out[m.id] = assignment{}
	}
	for _, t := range sortedTopicNames(topics) {
		var subs []*consumerMember
		for _, m := range members {
			if m.subscribes(t) {
				subs = append(subs, m)
			}
		}
		if len(subs) > 0 {
			assignRangeTopic(out, t, topics[t].Partitions, subs, prev)
		}
	}
	return out
}

// assignRangeTopic assigns topic t's n partitions to its subscribers subs (see assignRange).
func assignRangeTopic(out map[string]assignment, t string, n int32, subs []*consumerMember, prev map[string]assignment) {
	quota, extra := int(n)/len(subs), int(n)%len(subs)
	type unfilled struct {
		m    *consumerMember
		want int // short of the quota (negative: above it, with no extra partition left)
	}
	var short []unfilled
	kept := map[int32]bool{}
	for _, m := range subs {
		var had []int32
		for _, p := range prev[m.id][t] { // ascending
			if p < n {
				had = append(had, p)
			}
		}
		for _, p := range had[:min(len(had), quota)] {
			out[m.id].add(t, p)
			kept[p] = true
		}
		if len(had) > quota && extra > 0 { // it keeps one more: one of the extra partitions
			extra--
			out[m.id].add(t, had[quota])
			kept[had[quota]] = true
			continue
		}
		short = append(short, unfilled{m, quota - len(had)})
	}
	var free []int32
	for p := range n {
		if !kept[p] {
			free = append(free, p)
		}
	}
	for _, u := range short {
		if extra > 0 {
			u.want++
			extra--
		}
		for ; u.want > 0 && len(free) > 0; u.want-- {
			out[u.m.id].add(t, free[0])
			free = free[1:]
		}
	}
}

// assignUniform spreads every subscribed partition evenly over the members that subscribe to
// its topic, keeping partitions where the previous target had them as long as that stays
// balanced (Kafka's uniform assignor aims at the same: balance first, then stickiness).
func assignUniform(members []*consumerMember, topics map[string]TopicMeta, prev map[string]assignment) map[string]assignment {
	out := map[string]assignment{}
	count := map[string]int{}
	for _, m := range members {
		out[m.id] = assignment{}
	}
	type tp struct {
		t string
		p int32
	}
	var all []tp
	subs := map[string][]*consumerMember{}
	for _, t := range sortedTopicNames(topics) {
		for _, m := range members {
			if m.subscribes(t) {
				subs[t] = append(subs[t], m)
			}
		}
		if len(subs[t]) > 0 {
			for p := range topics[t].Partitions {
				all = append(all, tp{t, p})
			}
		}
	}
	if len(members) == 0 {
		return out
	}
	quota := (len(all) + len(members) - 1) / len(members) // an upper bound per member
	var rest []tp
	for _, x := range all { // sticky pass: keep the previous owner while under quota
		kept := false
		for id, a := range prev {
			if m, ok := out[id]; ok && a.has(x.t, x.p) && count[id] < quota && slices.ContainsFunc(subs[x.t], func(s *consumerMember) bool { return s.id == id }) {
				m.add(x.t, x.p)
				count[id]++
				kept = true
				break
			}
		}
		if !kept {
			rest = append(rest, x)
		}
	}
	for _, x := range rest { // the rest to the least loaded subscriber
		var best *consumerMember
		for _, m := range subs[x.t] {
			if best == nil || count[m.id] < count[best.id] {
				best = m
			}
		}
		out[best.id].add(x.t, x.p)
		count[best.id]++
	}
	// Even out: move partitions from the most to the least loaded member that can take them.
	for moved := true; moved; {
		moved = false
		for _, x := range all {
			owner := ""
			for id, a := range out {
				if a.has(x.t, x.p) {
					owner = id
					break
				}
			}
			for _, m := range subs[x.t] {
				if count[owner]-count[m.id] > 1 {
					out[owner][x.t] = slices.DeleteFunc(out[owner][x.t], func(p int32) bool { return p == x.p })
					out[m.id].add(x.t, x.p)
					count[owner]--
					count[m.id]++
					moved = true
					break
				}
			}
		}
	}
	return out
}

func sortedTopicNames(topics map[string]TopicMeta) []string {
	out := make([]string, 0, len(topics))
	for t := range topics {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// consumerState reports a consumer group's state as ConsumerGroupDescribe and ListGroups name it.
func (cs *consumerState) stateName() string {
	switch {
	case len(cs.members) == 0:
		return "Empty"
	case cs.epoch > cs.assignmentEpoch:
		return "Assigning"
	}
	// Reconciling while a member is not yet at its target (Kafka: a member not in its STABLE
	// state): behind the assignment epoch, revoking, or waiting for partitions another member
	// still holds (UNRELEASED_PARTITIONS), which used to show as Stable.
	for _, m := range cs.members {
		target := cs.target[m.id]
		if target == nil {
			target = assignment{}
		}
		if m.epoch != cs.assignmentEpoch || m.revoking.size() > 0 || !m.assigned.equal(target) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// ConsumerGroupDescribe handles a ConsumerGroupDescribe request.
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	topics := c.topics()
	toAssignment := func(a assignment) kmsg.Assignment {
		var out kmsg.Assignment
		for _, t := range sortedTopics(a) {
			if _, ok := topics[t]; !ok {
				continue // deleted: Kafka leaves out a topic it cannot name
			}
			out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: topics[t].ID, Topic: t, Partitions: slices.Clone(a[t])})
		}
		return out
	}
	for _, id := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = id
		g := c.groups[id]
		if g == nil || g.consumer == nil {
			// Kafka's consumerGroup lookup words the two cases apart.
			msg := fmt.Sprintf("Group %s not found.", id)
			if g != nil {
				msg = fmt.Sprintf("Group %s is not a consumer group.", id)
			}
			dg.ErrorCode, dg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		cs := g.consumer
		dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = cs.stateName(), cs.epoch, cs.assignmentEpoch, groupAssignor(cs)
		for _, m := range sortedMembers(cs) {
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.epoch, m.clientID, m.clientHost
			dm.SubscribedTopics = slices.Clone(m.topics)
			re := "" // as Kafka's describe of a member without a regex
			if m.regex != nil {
				re = m.regex.String()
			}
			dm.SubscribedTopicRegex = &re
			dm.InstanceID, dm.RackID = optional(m.instanceID), optional(m.rackID)
			dm.MemberType = 1 // v1+ (KIP-1099): 1 the consumer protocol, 0 the classic one
			if m.classic != nil {
				dm.MemberType = 0
			}
			dm.Assignment, dm.TargetAssignment = toAssignment(m.assigned), toAssignment(cs.target[m.id])
			dg.Members = append(dg.Members, dm)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
