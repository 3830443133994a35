package group

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Streams groups (KIP-1071, docs/streams-groups.md): Kafka Streams applications with
// group.protocol=streams. Members heartbeat (StreamsGroupHeartbeat) with the application's
// topology; the coordinator configures it against the cluster's topics (streams_topology.go:
// tasks per subtopology, internal topics to create), assigns the tasks with the sticky task
// assignor (streams_assign.go) whenever the group epoch moves, and moves each member toward
// its target as Kafka's CurrentAssignmentBuilder does: tasks to give up first (the member
// keeps its epoch until it reports them gone), then new tasks, an active task only once no
// member owns it any more and no member of the receiver's process holds it as a standby or
// warm-up (its state directory is free), a standby once the receiver's process holds it in no
// other role. A group id belongs to one type: a streams group is never a classic, consumer or
// share group, nor the reverse (GROUP_ID_NOT_FOUND), except that an empty classic group (one
// that only stores offsets) becomes a streams group when a streams member joins, as in Kafka.

// TypeStreams is the type of a streams group (ListGroups).
const TypeStreams = "streams"

// StreamsAssignor is the streams groups' one server-side assignor, as Kafka's default.
const StreamsAssignor = "sticky"

type streamsEndpoint struct {
	Host string `json:"host"`
	Port uint16 `json:"port"`
}

type streamsMember struct {
	ID            string           `json:"id"`
	InstanceID    string           `json:"instance_id,omitempty"`
	RackID        string           `json:"rack_id,omitempty"`
	ClientID      string           `json:"client_id,omitempty"`
	ClientHost    string           `json:"client_host,omitempty"`
	ProcessID     string           `json:"process_id"`
	Epoch         int32            `json:"epoch"`
	PrevEpoch     int32            `json:"prev_epoch"`
	RebalanceMs   int32            `json:"rebalance_timeout_ms"`
	TopologyEpoch int32            `json:"topology_epoch"`
	Endpoint      *streamsEndpoint `json:"endpoint,omitempty"`
	ClientTags    [][2]string      `json:"client_tags,omitempty"`
	// Active, Standby and Warmup are the tasks the member may own, as far as the coordinator
	// knows; Revoking are tasks it was told to give up (of any role) and has not yet
	// reported gone.
	Active   streamsTasks `json:"active,omitempty"`
	Standby  streamsTasks `json:"standby,omitempty"`
	Warmup   streamsTasks `json:"warmup,omitempty"`
	Revoking streamsTasks `json:"revoking,omitempty"`
	// RevokingRoles are Revoking split by role, for the unreleased-task rules.
	RevokingActive  streamsTasks `json:"revoking_active,omitempty"`
	RevokingStandby streamsTasks `json:"revoking_standby,omitempty"`
	// ActiveSince is the assignment epoch at which each of its active tasks (held or being
	// given up) was given: a commit of an older member epoch counts for a task from then on.
	ActiveSince map[string]map[int32]int32 `json:"active_since,omitempty"`

	deadline       time.Time // session
	revokeDeadline time.Time
	sent           string // epoch and tasks last sent
	taskOffsets    []kmsg.TaskOffset
	taskEndOffsets []kmsg.TaskOffset
}

func (m *streamsMember) rebalanceTimeout() time.Duration {
	return max(time.Duration(m.RebalanceMs)*time.Millisecond, time.Second)
}

type streamsState struct {
	epoch, assignmentEpoch int32
	endpointEpoch          int32 // moves when the endpoints' partitions change
	endpointSig            string
	topology               *streamsTopology
	configured             *configuredTopology // of topology against the topics of metaSig; nil until computed
	metaSig                string              // the topology's topics as last configured
	members                map[string]*streamsMember
	target                 map[string]streamsTarget
	validated              bool // the topology was ready when last configured (kept across a load, where configured is not)
	// delayUntil ends the initial rebalance delay of a group a member joined empty: no target
	// is computed before (members wait at assignment epoch 1 with no task). Not kept across a
	// load, as Kafka's timer.
	delayUntil time.Time
	// lastAssigned is when the target was last computed: with an assignment interval, a new
	// group epoch waits for it to pass (Kafka 4.3, KIP-1263). Not kept across a load.
	lastAssigned time.Time
	shutdown     string // the member that asked every member to shut down (cleared when the group empties)
	standbys     int    // the standby replicas the target was computed with
	recorded     []byte // the value of the group's last record: what a new coordinator would load
}

func newStreamsState() *streamsState {
	return &streamsState{members: map[string]*streamsMember{}, target: map[string]streamsTarget{}}
}

// StreamsGroupHeartbeat handles a StreamsGroupHeartbeat request. The response goes out once
// Output.Records are durable; create lists internal topics the driver should create (the
// response tells the member they are missing; a later heartbeat finds them).
func (c *Coordinator) StreamsGroupHeartbeat(now time.Time, req *kmsg.StreamsGroupHeartbeatRequest, clientID, clientHost string) (resp *kmsg.StreamsGroupHeartbeatResponse, out Output, create []InternalTopic) {
	g := c.groups[req.Group]
	classic := g != nil && g.streams == nil && g.consumer == nil && g.share == nil
	resp, create = c.streamsHeartbeat(now, req, clientID, clientHost)
	if g = c.groups[req.Group]; classic && g != nil && g.streams != nil {
		// An empty classic group became this streams group: its record goes (a tombstone, as
		// Kafka's conversion writes), so a compacted log keeps no classic record before it.
		out.Records = append(out.Records, Record{Group: g.ID, Key: groupKey(g.ID)})
	}
	c.recordStreamsChange(req.Group, &out)
	return resp, out, create
}

func (c *Coordinator) streamsHeartbeat(now time.Time, req *kmsg.StreamsGroupHeartbeatRequest, clientID, clientHost string) (*kmsg.StreamsGroupHeartbeatResponse, []InternalTopic) {
	resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
	fail := func(err *kerr.Error, format string, args ...any) (*kmsg.StreamsGroupHeartbeatResponse, []InternalTopic) {
		msg := fmt.Sprintf(format, args...)
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp, nil
	}
	id := req.MemberID
	switch {
	case req.Group == "":
		return fail(kerr.InvalidRequest, "GroupId can't be empty.")
	case id == "":
		return fail(kerr.InvalidRequest, "MemberId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return fail(kerr.InvalidRequest, "InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return fail(kerr.InvalidRequest, "RackId can't be empty.")
	case req.MemberEpoch < -2:
		return fail(kerr.InvalidRequest, "MemberEpoch is %d, but must be greater than or equal to -2.", req.MemberEpoch)
	case req.MemberEpoch == -2 && req.InstanceID == nil:
		return fail(kerr.InvalidRequest, "InstanceId can't be null.")
	case req.MemberEpoch == 0 && req.RebalanceTimeoutMillis <= 0:
		return fail(kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request.")
	case req.MemberEpoch == 0 && req.Topology == nil:
		return fail(kerr.InvalidRequest, "Topology must be non-null when (re-)joining.")
	// No process id is required, as Kafka's GroupCoordinatorService: a member without one is
	// described with "", and the members without one count as one process for placement.
	case req.MemberEpoch == 0 && len(req.ActiveTasks) > 0:
		return fail(kerr.InvalidRequest, "ActiveTasks must be empty when (re-)joining.")
	case req.MemberEpoch == 0 && len(req.StandbyTasks) > 0:
		return fail(kerr.InvalidRequest, "StandbyTasks must be empty when (re-)joining.")
	case req.MemberEpoch == 0 && len(req.WarmupTasks) > 0:
		return fail(kerr.InvalidRequest, "WarmupTasks must be empty when (re-)joining.")
	case req.MemberEpoch != 0 && req.Topology != nil:
		return fail(kerr.InvalidRequest, "Topology can only be provided when (re-)joining.")
	case (req.ActiveTasks == nil) != (req.StandbyTasks == nil) || (req.ActiveTasks == nil) != (req.WarmupTasks == nil):
		return fail(kerr.InvalidRequest, "If one task-type is non-null, all must be non-null.")
	}
	if req.Topology != nil {
		for _, s := range req.Topology.Subtopologies {
			if len(s.SourceTopicRegex) > 0 { // as Kafka 4.3
				return fail(kerr.InvalidRequest, "Regular expressions for source topics are not supported yet.")
			}
		}
	}
	var topology *streamsTopology
	if req.Topology != nil {
		var err error
		if topology, err = newStreamsTopology(req.Topology); err != nil {
			return fail(kerr.StreamsInvalidTopology, "%v", err)
		}
	}
	g := c.groups[req.Group]
	switch {
	case g == nil && req.MemberEpoch != 0:
		return fail(kerr.GroupIDNotFound, "Streams group %s not found.", req.Group)
	case g == nil:
		g = newGroup(req.Group, now)
		c.groups[req.Group] = g
	}
	if g.streams == nil {
		// An empty classic group is replaced; ids handed out for a first JoinGroup (KIP-394)
		// are not members (the group is Empty, as in Kafka), and go with it.
		if g.consumer != nil || g.share != nil || len(g.members) > 0 || req.MemberEpoch != 0 {
			return fail(kerr.GroupIDNotFound, "Group %s is not a streams group.", req.Group)
		}
		g.streams, g.ProtocolType = newStreamsState(), TypeStreams
		clear(g.pending)
		g.transition(Empty, now)
	}
	st := g.streams
	m := st.members[id]
	bump := false
	switch req.MemberEpoch {
	case -2: // a static member leaving for a while: it keeps its tasks for its session
		if m == nil {
			return fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", id, req.Group)
		}
		if m.InstanceID != *req.InstanceID {
			return fail(kerr.FencedInstanceID, "Instance id %s is not used by member %s.", *req.InstanceID, id)
		}
		m.Epoch, m.Revoking, m.RevokingActive, m.RevokingStandby = -2, streamsTasks{}, streamsTasks{}, streamsTasks{}
		m.pruneActiveSince()
		resp.MemberID, resp.MemberEpoch = id, -2
		return resp, nil
	case -1:
		if m == nil {
			return fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", id, req.Group)
		}
		if req.ShutdownApplication && st.shutdown == "" && len(st.members) > 1 {
			st.shutdown = id
		}
		c.removeStreamsMember(now, g, m)
		resp.MemberID, resp.MemberEpoch = id, -1
		return resp, nil
	case 0:
		var static *streamsMember
		if req.InstanceID != nil {
			for _, o := range st.members {
				if o.InstanceID == *req.InstanceID {
					static = o
				}
			}
			if static != nil && static.Epoch != -2 && static.ID != id {
				return fail(kerr.UnreleasedInstanceID, "Instance id %s is still used by member %s.", *req.InstanceID, static.ID)
			}
		}
		others := len(st.members)
		if m != nil {
			others--
		}
		if st.topology != nil && others > 0 {
			switch {
			case topology.Epoch < st.topology.Epoch: // an older instance: it runs, told its topology is stale
			case !topology.equal(st.topology):
				return fail(kerr.InvalidRequest, "Topology updates are not supported yet.")
			}
		}
		switch {
		case static != nil: // the static member comes back: this member takes its place
			delete(st.members, static.ID)
			if t, ok := st.target[static.ID]; ok {
				delete(st.target, static.ID)
				st.target[id] = t
			}
			m = static
			m.ID, m.Epoch, m.PrevEpoch = id, 0, 0
			m.ActiveSince = nil // its former incarnation's commits count for none of its tasks
			st.members[id] = m
		case m != nil:
			// Rejoining after being fenced, having dropped its tasks (its lists are empty): it
			// starts over in place, so the group neither empties nor restarts its delay, and
			// takes its target back at the group's epoch. As in Kafka, the group epoch moves
			// only if what the assignor sees of it changed (below).
			m.Active, m.Standby, m.Warmup = streamsTasks{}, streamsTasks{}, streamsTasks{}
			m.Revoking, m.RevokingActive, m.RevokingStandby, m.ActiveSince = streamsTasks{}, streamsTasks{}, streamsTasks{}, nil
			m.Epoch, m.PrevEpoch = 0, 0
		default:
			m = &streamsMember{ID: id, Active: streamsTasks{}, Standby: streamsTasks{}, Warmup: streamsTasks{},
				Revoking: streamsTasks{}, RevokingActive: streamsTasks{}, RevokingStandby: streamsTasks{}}
			if len(st.members) == 0 {
				// The target of an empty group is empty, so it is current at the group epoch:
				// members of the delay take an epoch above any a former member held.
				st.assignmentEpoch = st.epoch
				st.lastAssigned = time.Time{} // the new life's first target waits for no interval
				if d := c.cfg.groupSettings(req.Group).StreamsInitialRebalanceDelay; d > 0 {
					st.delayUntil = now.Add(d)
				}
			}
			st.members[id] = m
			bump = true
			if g.State == Empty {
				g.transition(Stable, now)
			}
		}
		m.sent = ""
		m.TopologyEpoch = topology.Epoch
		if st.topology == nil || (topology.Epoch >= st.topology.Epoch && !topology.equal(st.topology)) {
			// A new group, or a group whose members all ran another topology and left.
			st.topology, st.configured, bump = topology, nil, true
		}
	default:
		if m == nil {
			return fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", id, req.Group)
		}
		if req.MemberEpoch > m.Epoch {
			return fail(kerr.FencedMemberEpoch, "The streams group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.Epoch)
		}
		if req.MemberEpoch < m.Epoch {
			// Its previous epoch, while it owns nothing it was not given (the answer that moved
			// its epoch may have been lost).
			owned := ownedTasks(req)
			if req.MemberEpoch != m.PrevEpoch || owned == nil || owned.minus(m.Active).minus(m.Standby).minus(m.Warmup).size() > 0 {
				return fail(kerr.FencedMemberEpoch, "The streams group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.Epoch)
			}
		}
		// The tasks it reports must be the topology's, checked before anything changes (as
		// Kafka's throwIfRequestContainsInvalidTasks): a rejected heartbeat changes nothing.
		if err := invalidTasks(req, c.configuredNow(st)); err != "" {
			return fail(kerr.InvalidRequest, "%s", err)
		}
	}
	// The member's metadata; a change of what the assignor sees moves the group epoch.
	if req.ProcessID != nil && *req.ProcessID != m.ProcessID {
		m.ProcessID, bump = *req.ProcessID, true
	}
	if req.RackID != nil && *req.RackID != m.RackID {
		m.RackID, bump = *req.RackID, true
	}
	if req.InstanceID != nil {
		m.InstanceID = *req.InstanceID
	}
	if req.RebalanceTimeoutMillis > 0 {
		m.RebalanceMs = req.RebalanceTimeoutMillis
	}
	if req.UserEndpoint != nil {
		m.Endpoint = &streamsEndpoint{req.UserEndpoint.Host, req.UserEndpoint.Port}
	}
	if req.ClientTags != nil {
		tags := make([][2]string, 0, len(req.ClientTags))
		for _, t := range req.ClientTags {
			tags = append(tags, [2]string{t.Key, t.Value})
		}
		sort.Slice(tags, func(i, j int) bool { return tags[i][0] < tags[j][0] })
		if !slices.Equal(tags, m.ClientTags) {
			m.ClientTags, bump = tags, true
		}
	}
	if req.TaskOffsets != nil {
		m.taskOffsets = slices.Clone(req.TaskOffsets)
	}
	if req.TaskEndOffsets != nil {
		m.taskEndOffsets = slices.Clone(req.TaskEndOffsets)
	}
	m.ClientID, m.ClientHost = clientID, clientHost
	if req.ShutdownApplication && st.shutdown == "" {
		st.shutdown = id
	}
	set := c.cfg.groupSettings(req.Group)
	m.deadline = now.Add(set.StreamsSessionTimeout)
	c.advanceStreams(now, st, set, bump)
	c.reconcileStreams(now, st, m, ownedTasks(req))
	c.updateEndpoints(st)
	resp.MemberID, resp.MemberEpoch = id, m.Epoch
	resp.HeartbeatIntervalMillis = int32(set.StreamsHeartbeatInterval.Milliseconds())
	resp.Status = []kmsg.StreamsGroupHeartbeatResponseStatus{}
	// A delayed assignment comes first, as Kafka adds it while computing the target, before
	// the topology's statuses.
	if why := st.assignmentWait(now, set.StreamsAssignmentInterval); why != "" {
		resp.Status = append(resp.Status, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: streamsAssignmentDelayed,
			StatusDetail: "Assignment delayed due to the configured " + why + "."})
	}
	var create []InternalTopic
	if m.TopologyEpoch < st.topology.Epoch {
		resp.Status = append(resp.Status, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: streamsStaleTopology,
			StatusDetail: fmt.Sprintf("The member's topology epoch %d is behind the group's topology epoch %d.", m.TopologyEpoch, st.topology.Epoch)})
	}
	if ct := st.configured; ct != nil && !ct.ready() {
		for _, s := range ct.status {
			resp.Status = append(resp.Status, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: s.code, StatusDetail: s.detail})
		}
		create = ct.create
	}
	if st.shutdown != "" {
		resp.Status = append(resp.Status, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: streamsShutdownApplication,
			StatusDetail: fmt.Sprintf("Streams group member %s encountered a fatal error and requested a shutdown for the entire application.", st.shutdown)})
	}
	full := req.MemberEpoch == 0 || req.ActiveTasks != nil || req.StandbyTasks != nil || req.WarmupTasks != nil
	if sent := fmt.Sprint(m.Epoch, "a", m.Active.signature(), "s", m.Standby.signature(), "w", m.Warmup.signature()); sent != m.sent || full {
		m.sent = sent
		resp.ActiveTasks, resp.StandbyTasks, resp.WarmupTasks = taskIDs(m.Active), taskIDs(m.Standby), taskIDs(m.Warmup)
	}
	resp.EndpointInformationEpoch = st.endpointEpoch
	if req.EndpointInformationEpoch != st.endpointEpoch {
		resp.PartitionsByUserEndpoint = streamsEndpoints(st)
	}
	return resp, create
}

// ownedTasks is what a heartbeat says the member owns (nil: it did not say), in one set.
func ownedTasks(req *kmsg.StreamsGroupHeartbeatRequest) streamsTasks {
	if req.ActiveTasks == nil && req.StandbyTasks == nil && req.WarmupTasks == nil {
		return nil
	}
	out := streamsTasks{}
	for _, ts := range [][]kmsg.TaskIDs{req.ActiveTasks, req.StandbyTasks, req.WarmupTasks} {
		for _, t := range ts {
			for _, p := range t.Partitions {
				out.add(t.SubtopologyID, p)
			}
		}
	}
	return out
}

func taskIDs(ts streamsTasks) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	for _, s := range sortedTopics(ts) { // subtopologies with tasks, sorted
		out = append(out, kmsg.TaskIDs{SubtopologyID: s, Partitions: slices.Clone(ts[s])})
	}
	return out
}

// configuredNow is the topology as advanceStreams configures it against the topics now,
// without changing the group (nil: no topology).
func (c *Coordinator) configuredNow(st *streamsState) *configuredTopology {
	if st.topology == nil {
		return nil
	}
	topics := c.topics()
	if st.configured != nil && streamsMetadataSignature(st.topology, topics) == st.metaSig {
		return st.configured
	}
	return configure(st.topology, topics)
}

// invalidTasks says why a heartbeat's reported tasks are not tasks of the configured topology
// ct ("": they are, or ct is not ready, when no task is assigned anyway).
func invalidTasks(req *kmsg.StreamsGroupHeartbeatRequest, ct *configuredTopology) string {
	if !ct.ready() {
		return ""
	}
	for _, ts := range [][]kmsg.TaskIDs{req.ActiveTasks, req.StandbyTasks, req.WarmupTasks} {
		for _, t := range ts {
			n, ok := ct.tasks[t.SubtopologyID]
			if !ok {
				return fmt.Sprintf("Subtopology %s does not exist in the topology.", t.SubtopologyID)
			}
			for _, p := range t.Partitions {
				if p < 0 || p >= n {
					return fmt.Sprintf("Task %d for subtopology %s is invalid. Number of tasks for this subtopology: %d", p, t.SubtopologyID, n)
				}
			}
		}
	}
	return ""
}

// advanceStreams configures the topology against the topics when they changed, moves the
// group epoch if bump is set or they changed, and computes the target assignment for a new
// epoch: no task while the topology is not ready (a topic missing or misshapen).
func (c *Coordinator) advanceStreams(now time.Time, st *streamsState, set Settings, bump bool) {
	standbys := set.StreamsStandbyReplicas
	if st.topology == nil {
		return
	}
	topics := c.topics()
	sig := streamsMetadataSignature(st.topology, topics)
	if sig != st.metaSig || st.configured == nil {
		st.configured = configure(st.topology, topics)
		if st.configured.ready() != st.validated {
			st.validated, bump = st.configured.ready(), true
		}
		if sig != st.metaSig {
			st.metaSig, bump = sig, true
		}
	}
	if standbys != st.standbys {
		st.standbys, bump = standbys, true
	}
	if bump {
		st.epoch++
	}
	if st.epoch > st.assignmentEpoch && now.Before(st.delayUntil) {
		// Delayed: the members so far take epoch 1 with nothing; the group epoch stays ahead,
		// so the target is computed when the delay ends.
		if st.assignmentEpoch == 0 {
			st.epoch, st.assignmentEpoch = max(st.epoch, 2), 1
		}
		return
	}
	if st.assignmentWait(now, set.StreamsAssignmentInterval) != "" {
		return // the previous target stands until the interval passes; a tick computes it then
	}
	if st.epoch > st.assignmentEpoch {
		st.lastAssigned = now
		tasks, stateful := map[string]int32{}, map[string]bool{}
		if st.configured.ready() {
			tasks = st.configured.tasks
			for sub, cl := range st.configured.changelogs {
				stateful[sub] = len(cl) > 0
			}
		}
		st.target = assignStreams(sortedStreamsMembers(st.members), tasks, stateful, standbys, st.target)
		st.assignmentEpoch = st.epoch
	}
}

// assignmentWait says why a new group epoch's target is not computed now ("" if it is, or if
// there is none to compute): the initial rebalance delay, or the assignment interval since
// the last one.
func (st *streamsState) assignmentWait(now time.Time, interval time.Duration) string {
	switch {
	case st.epoch <= st.assignmentEpoch:
		return ""
	case now.Before(st.delayUntil):
		return "initial rebalance delay"
	case interval > 0 && !st.lastAssigned.IsZero() && now.Before(st.lastAssigned.Add(interval)):
		return "assignment interval"
	}
	return ""
}

// streamsMetadataSignature describes the topics a topology reads and writes, as configure
// sees them.
func streamsMetadataSignature(t *streamsTopology, topics map[string]TopicMeta) string {
	var names []string
	for name := range topics {
		if streamsTopic(t, name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sb, "%s/%x/%d;", n, topics[n].ID, topics[n].Partitions)
	}
	return sb.String()
}

// streamsTopic reports whether a topology names topic (a source or an internal topic).
func streamsTopic(t *streamsTopology, topic string) bool {
	for _, s := range t.Subtopologies {
		if slices.Contains(s.Sources, topic) {
			return true
		}
		for _, r := range s.RepartitionSources {
			if r.Name == topic {
				return true
			}
		}
		for _, r := range s.Changelogs {
			if r.Name == topic {
				return true
			}
		}
	}
	return false
}

// reconcileStreams moves m toward its target (Kafka's streams CurrentAssignmentBuilder): first
// the tasks to give up, then the new ones as they are released by their other holders.
func (c *Coordinator) reconcileStreams(now time.Time, st *streamsState, m *streamsMember, owned streamsTasks) {
	if m.Revoking.size() > 0 {
		if owned == nil || owned.intersect(m.Revoking).size() > 0 {
			return // the member still owns (or has not said) what it must give up
		}
		m.Revoking, m.RevokingActive, m.RevokingStandby = streamsTasks{}, streamsTasks{}, streamsTasks{}
	}
	target := st.target[m.ID]
	if target.Active == nil {
		target = streamsTarget{Active: streamsTasks{}, Standby: streamsTasks{}}
	}
	revokeActive := m.Active.minus(target.Active)
	revokeStandby := m.Standby.minus(target.Standby)
	revokeWarmup := m.Warmup // warm-up tasks are not assigned: any the member has goes
	revoke := streamsTasks{}
	for _, ts := range []streamsTasks{revokeActive, revokeStandby, revokeWarmup} {
		for s, ps := range ts {
			for _, p := range ps {
				revoke.add(s, p)
			}
		}
	}
	m.Active, m.Standby, m.Warmup = m.Active.intersect(target.Active), m.Standby.intersect(target.Standby), streamsTasks{}
	if revoke.size() > 0 && (owned == nil || owned.intersect(revoke).size() > 0) {
		m.Revoking, m.RevokingActive, m.RevokingStandby = revoke, revokeActive, revokeStandby
		m.revokeDeadline = now.Add(m.rebalanceTimeout())
		m.pruneActiveSince()
		return
	}
	for s, ps := range target.Active.minus(m.Active) {
		for _, p := range ps {
			if !activeHeldElsewhere(st, m, s, p) {
				m.Active.add(s, p)
				if m.ActiveSince == nil {
					m.ActiveSince = map[string]map[int32]int32{}
				}
				if m.ActiveSince[s] == nil {
					m.ActiveSince[s] = map[int32]int32{}
				}
				m.ActiveSince[s][p] = st.assignmentEpoch
			}
		}
	}
	for s, ps := range target.Standby.minus(m.Standby) {
		for _, p := range ps {
			if !heldInProcess(st, m, s, p) {
				m.Standby.add(s, p)
			}
		}
	}
	if m.Epoch != st.assignmentEpoch {
		m.PrevEpoch, m.Epoch = m.Epoch, st.assignmentEpoch
	}
	m.pruneActiveSince()
}

// pruneActiveSince forgets the epochs of active tasks the member neither holds nor gives up.
func (m *streamsMember) pruneActiveSince() {
	for s, byPart := range m.ActiveSince {
		for p := range byPart {
			if !m.Active.has(s, p) && !m.RevokingActive.has(s, p) {
				delete(byPart, p)
			}
		}
		if len(byPart) == 0 {
			delete(m.ActiveSince, s)
		}
	}
	if len(m.ActiveSince) == 0 {
		m.ActiveSince = nil
	}
}

// activeHeldElsewhere reports whether an active task cannot go to m yet: another member owns
// it as active (or is giving it up), or a member of m's process holds it in another role.
func activeHeldElsewhere(st *streamsState, m *streamsMember, s string, p int32) bool {
	for _, o := range st.members {
		if o == m {
			continue
		}
		if o.Active.has(s, p) || o.RevokingActive.has(s, p) {
			return true
		}
		if o.ProcessID == m.ProcessID && (o.Standby.has(s, p) || o.Warmup.has(s, p) || o.Revoking.has(s, p)) {
			return true
		}
	}
	return false
}

// heldInProcess reports whether a member of m's process (m aside) holds a task in any role.
func heldInProcess(st *streamsState, m *streamsMember, s string, p int32) bool {
	for _, o := range st.members {
		if o != m && o.ProcessID == m.ProcessID && (o.Active.has(s, p) || o.Standby.has(s, p) || o.Warmup.has(s, p) || o.Revoking.has(s, p)) {
			return true
		}
	}
	return false
}

// removeStreamsMember removes a member that left, was fenced or whose session expired; the
// group epoch moves.
func (c *Coordinator) removeStreamsMember(now time.Time, g *Group, m *streamsMember) {
	st := g.streams
	delete(st.members, m.ID)
	delete(st.target, m.ID)
	st.epoch++
	if len(st.members) == 0 {
		g.transition(Empty, now)
		st.shutdown = ""
	}
}

// tickStreams removes the members whose session expired or who did not give up their tasks in
// time, and computes the target the initial rebalance delay or the assignment interval held
// back once due; what changed goes into out as the group's record.
func (c *Coordinator) tickStreams(now time.Time, g *Group, out *Output) {
	st := g.streams
	if !st.delayUntil.IsZero() && !now.Before(st.delayUntil) {
		st.delayUntil = time.Time{}
	}
	due := false
	for _, m := range st.members {
		if !now.Before(m.deadline) || (m.Revoking.size() > 0 && !now.Before(m.revokeDeadline)) {
			due = true
			break
		}
	}
	if !due && st.epoch > st.assignmentEpoch { // a held-back target, once neither timer holds it
		due = st.assignmentWait(now, c.cfg.groupSettings(g.ID).StreamsAssignmentInterval) == ""
	}
	if !due {
		return // the common case: no encoding
	}
	for _, m := range sortedStreamsMembers(st.members) {
		if !now.Before(m.deadline) || (m.Revoking.size() > 0 && !now.Before(m.revokeDeadline)) {
			c.removeStreamsMember(now, g, m)
		}
	}
	c.advanceStreams(now, st, c.cfg.groupSettings(g.ID), false)
	c.recordStreamsChange(g.ID, out)
}

// updateEndpoints moves the endpoint epoch when the partitions behind the members' endpoints
// changed.
func (c *Coordinator) updateEndpoints(st *streamsState) {
	var sb strings.Builder
	for _, e := range streamsEndpoints(st) {
		fmt.Fprintf(&sb, "%s:%d %v %v;", e.UserEndpoint.Host, e.UserEndpoint.Port, e.ActivePartitions, e.StandbyPartitions)
	}
	if sig := sb.String(); sig != st.endpointSig {
		st.endpointSig = sig
		st.endpointEpoch++
	}
}

// streamsEndpoints maps each member endpoint (Interactive Queries' application.server) to the
// partitions of its tasks: each task's source topics (repartition topics included) at the
// task's partition, where the topic has it, as Kafka's EndpointToPartitionsManager.
func streamsEndpoints(st *streamsState) []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint {
	out := []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint{}
	ct := st.configured
	if ct == nil || !ct.ready() {
		return out
	}
	type acc struct {
		active, standby map[string][]int32
	}
	byEndpoint := map[streamsEndpoint]*acc{}
	var order []streamsEndpoint
	for _, m := range sortedStreamsMembers(st.members) {
		if m.Endpoint == nil {
			continue
		}
		a := byEndpoint[*m.Endpoint]
		if a == nil {
			a = &acc{map[string][]int32{}, map[string][]int32{}}
			byEndpoint[*m.Endpoint] = a
			order = append(order, *m.Endpoint)
		}
		for s, ps := range m.Active {
			for _, topic := range ct.sources[s] {
				a.active[topic] = append(a.active[topic], ps...)
			}
		}
		for s, ps := range m.Standby {
			for _, topic := range ct.sources[s] {
				a.standby[topic] = append(a.standby[topic], ps...)
			}
		}
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].Host != order[j].Host {
			return order[i].Host < order[j].Host
		}
		return order[i].Port < order[j].Port
	})
	for _, e := range order {
		a := byEndpoint[e]
		pe := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpoint()
		pe.UserEndpoint = kmsg.Endpoint{Host: e.Host, Port: e.Port}
		pe.ActivePartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{}
		pe.StandbyPartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{}
		for _, topic := range slices.Sorted(maps.Keys(a.active)) {
			ps := ct.topicPartitions(topic, a.active[topic])
			pe.ActivePartitions = append(pe.ActivePartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{Topic: topic, Partitions: ps})
		}
		for _, topic := range slices.Sorted(maps.Keys(a.standby)) {
			ps := ct.topicPartitions(topic, a.standby[topic])
			pe.StandbyPartitions = append(pe.StandbyPartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{Topic: topic, Partitions: ps})
		}
		out = append(out, pe)
	}
	return out
}

// stateName is the streams group's state as Kafka names it (StreamsGroupState).
func (g *Group) streamsStateName() string {
	st := g.streams
	switch {
	case len(st.members) == 0:
		return "Empty"
	case st.topology == nil || !st.validated:
		return "NotReady"
	case st.epoch > st.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range st.members {
		if m.Epoch != st.assignmentEpoch || m.Revoking.size() > 0 ||
			!m.Active.equal(st.target[m.ID].Active) || !m.Standby.equal(st.target[m.ID].Standby) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// StreamsGroupDescribe handles a StreamsGroupDescribe request.
func (c *Coordinator) StreamsGroupDescribe(req *kmsg.StreamsGroupDescribeRequest) *kmsg.StreamsGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	toAssignment := func(active, standby, warmup streamsTasks) kmsg.StreamsAssignment {
		var a kmsg.StreamsAssignment
		a.ActiveTasks, a.StandbyTasks, a.WarmupTasks = taskIDs(active), taskIDs(standby), taskIDs(warmup)
		return a
	}
	for _, id := range req.Groups {
		dg := kmsg.NewStreamsGroupDescribeResponseGroup()
		dg.Group = id
		dg.AuthorizedOperations = -2147483648
		g := c.groups[id]
		if g == nil || g.streams == nil {
			msg := fmt.Sprintf("Group %s not found.", id)
			if g != nil {
				msg = fmt.Sprintf("Group %s is not a streams group.", id)
			}
			dg.ErrorCode, dg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		st := g.streams
		dg.State, dg.Epoch, dg.AssignmentEpoch = g.streamsStateName(), st.epoch, st.assignmentEpoch
		assignor := StreamsAssignor
		dg.AssignorName = &assignor
		if t := st.topology; t != nil {
			dt := kmsg.NewStreamsGroupDescribeResponseGroupTopology()
			dt.Epoch = t.Epoch
			for _, s := range t.Subtopologies {
				ds := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
				ds.SubtopologyID, ds.RepartitionSinkTopics = s.ID, slices.Clone(s.RepartitionSinks)
				ds.SourceTopics = slices.Clone(s.Sources)
				if ct := st.configured; ct != nil && ct.ready() {
					ds.SourceTopics = nil
					for _, src := range ct.sources[s.ID] {
						if !slices.ContainsFunc(s.RepartitionSources, func(r streamsInternalTopic) bool { return r.Name == src }) {
							ds.SourceTopics = append(ds.SourceTopics, src)
						}
					}
				}
				ds.StateChangelogTopics = describeTopicInfos(s.Changelogs, st.configured)
				ds.RepartitionSourceTopics = describeTopicInfos(s.RepartitionSources, st.configured)
				dt.Subtopologies = append(dt.Subtopologies, ds)
			}
			dg.Topology = &dt
		}
		for _, m := range sortedStreamsMembers(st.members) {
			dm := kmsg.NewStreamsGroupDescribeResponseGroupMember()
			dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
			dm.InstanceID, dm.RackID = optional(m.InstanceID), optional(m.RackID)
			dm.TopologyEpoch, dm.ProcessID = m.TopologyEpoch, m.ProcessID
			if m.Endpoint != nil {
				dm.UserEndpoint = &kmsg.StreamsGroupDescribeResponseGroupMemberUserEndpoint{Host: m.Endpoint.Host, Port: m.Endpoint.Port}
			}
			for _, t := range m.ClientTags {
				dm.ClientTags = append(dm.ClientTags, kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{Key: t[0], Value: t[1]})
			}
			dm.TaskOffsets, dm.TaskEndOffsets = slices.Clone(m.taskOffsets), slices.Clone(m.taskEndOffsets)
			dm.Assignment = toAssignment(m.Active, m.Standby, m.Warmup)
			t := st.target[m.ID]
			dm.TargetAssignment = toAssignment(t.Active, t.Standby, nil)
			dg.Members = append(dg.Members, dm)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// describeTopicInfos describes internal topics with their configured partition counts.
func describeTopicInfos(ts []streamsInternalTopic, ct *configuredTopology) []kmsg.TopicInfo {
	out := []kmsg.TopicInfo{}
	for _, it := range ts {
		ti := kmsg.NewTopicInfo()
		ti.Topic, ti.NumPartitions, ti.ReplicationFactor = it.Name, it.Partitions, it.Replication
		if n, ok := ct.topicCount(it.Name); ok {
			ti.NumPartitions = n
		}
		for _, kv := range it.Configs {
			ti.Configs = append(ti.Configs, kmsg.TopicInfoConfig{Key: kv[0], Value: kv[1]})
		}
		out = append(out, ti)
	}
	return out
}

// checkStreamsCommit checks a commit to a streams group (Kafka 4.3's
// StreamsGroup.validateOffsetCommit): the member must exist and send its current epoch
// (OffsetCommit v9+ unless transactional), or an older one that is at least the epoch at which
// it was given the active task of every partition committed, a task it still holds or is giving
// up (KIP-1251: its heartbeat answers may be in flight).
func checkStreamsCommit(st *streamsState, req *kmsg.OffsetCommitRequest) int16 {
	m := st.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case req.Version < 9:
		return kerr.UnsupportedVersion.Code
	case req.Generation == m.Epoch:
		return 0
	case req.Generation > m.Epoch || st.topology == nil:
		return kerr.StaleMemberEpoch.Code
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			held := false
			for _, sub := range st.topology.Subtopologies {
				reads := slices.Contains(sub.Sources, t.Topic) ||
					slices.ContainsFunc(sub.RepartitionSources, func(r streamsInternalTopic) bool { return r.Name == t.Topic })
				since, ok := m.ActiveSince[sub.ID][p.Partition]
				if reads && ok && req.Generation >= since && (m.Active.has(sub.ID, p.Partition) || m.RevokingActive.has(sub.ID, p.Partition)) {
					held = true
					break
				}
			}
			if !held {
				return kerr.StaleMemberEpoch.Code
			}
		}
	}
	return 0
}
