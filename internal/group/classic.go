package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup handles a JoinGroup request. The reply may come now or in the Output of a later
// call (when the rebalance completes).
func (c *Coordinator) JoinGroup(now time.Time, id RequestID, req *kmsg.JoinGroupRequest, clientID, clientHost string) Output {
	var out Output
	fail := func(err *kerr.Error, memberID string) Output {
		out.joinError(id, req.Version, err, memberID)
		return out
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalance = session
	}
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID, req.MemberID)
	case session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout, req.MemberID)
	}
	protocols := make([]Protocol, len(req.Protocols))
	for i, p := range req.Protocols {
		protocols[i] = Protocol{Name: p.Name, Metadata: p.Metadata}
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return fail(kerr.UnknownMemberID, req.MemberID)
		}
		g = newGroup(req.Group, now)
		c.groups[req.Group] = g
	}
	if g.share != nil { // as Kafka: a share group is no classic group, empty or not
		return fail(kerr.InconsistentGroupProtocol, "")
	}
	if g.streams != nil { // as Kafka: a live streams group is no classic group; an empty one becomes one
		if len(g.streams.members) > 0 {
			return fail(kerr.InconsistentGroupProtocol, "")
		}
		g.streams, g.ProtocolType = nil, ""
		out.Records = append(out.Records, Record{Group: g.ID, Key: streamsKey(g.ID)})
	}
	if g.consumer != nil { // a consumer (KIP-848) group
		if len(g.consumer.members) > 0 { // a classic member in it (migrate.go)
			before := c.consumerStateValue(g.ID)
			c.joinConsumerGroup(now, id, g, req, protocols, session, rebalance, clientID, clientHost, &out)
			c.recordConsumerChange(g.ID, before, &out)
			return out
		}
		// Empty: it becomes a new classic group, as Kafka deletes it and creates one. It has
		// no protocol type until a member joins (its offsets expire by their commit times),
		// as a reload finds it: a compacted log keeps no record of the consumer group.
		g.consumer = nil
		g.ProtocolType, g.Generation, g.Protocol, g.Leader = "", 0, "", ""
		g.transition(Empty, now)
		out.Records = append(out.Records, Record{Group: g.ID, Key: consumerKey(g.ID)})
	}
	if !g.supports(req.ProtocolType, protocols) {
		return fail(kerr.InconsistentGroupProtocol, req.MemberID)
	}
	m := &Member{ClientID: clientID, ClientHost: clientHost, SessionTimeout: session, RebalanceTimeout: rebalance,
		Protocols: protocols, awaitingJoin: true, joinID: id, joinVersion: req.Version}
	if req.InstanceID != nil {
		m.InstanceID = *req.InstanceID
	}
	if req.MemberID == "" {
		return c.joinNew(now, g, m, req.ProtocolType, &out)
	}
	return c.joinKnown(now, g, req.MemberID, m, req.ProtocolType, &out)
}

// supports reports whether a member with these protocols may join: the group's protocol type,
// and at least one protocol every member supports.
func (g *Group) supports(protocolType string, ps []Protocol) bool {
	if protocolType == "" || len(ps) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return g.ProtocolType == "" || g.ProtocolType == protocolType || g.State == Empty
	}
	if protocolType != g.ProtocolType {
		return false
	}
	for _, name := range g.candidates() {
		for _, p := range ps {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

// candidates are the protocols every member supports, in the first member's order.
func (g *Group) candidates() []string {
	var out []string
	for i, id := range g.order {
		m := g.members[id]
		if i == 0 {
			for _, p := range m.Protocols {
				out = append(out, p.Name)
			}
			continue
		}
		kept := out[:0]
		for _, name := range out {
			if slices.ContainsFunc(m.Protocols, func(p Protocol) bool { return p.Name == name }) {
				kept = append(kept, name)
			}
		}
		out = kept
	}
	return out
}

// joinNew handles a join without a member id.
func (c *Coordinator) joinNew(now time.Time, g *Group, m *Member, protocolType string, out *Output) Output {
	if m.InstanceID != "" {
		if oldID, ok := g.static[m.InstanceID]; ok {
			return c.rejoinStatic(now, g, oldID, m, out)
		}
		m.ID = newMemberID(m.InstanceID)
	} else {
		m.ID = newMemberID(m.ClientID)
		// Members given an id and yet to rejoin count toward group.max.size (Kafka's isFull):
		// the id is not handed out past it.
		if c.cfg.MaxGroupSize > 0 && len(g.members)+len(g.pending) >= c.cfg.MaxGroupSize {
			out.joinError(m.joinID, m.joinVersion, kerr.GroupMaxSizeReached, m.ID)
			return *out
		}
		if m.joinVersion >= 4 { // KIP-394: the client must rejoin with the id it is given
			g.pending[m.ID] = now.Add(m.SessionTimeout)
			out.joinError(m.joinID, m.joinVersion, kerr.MemberIDRequired, m.ID)
			return *out
		}
	}
	if c.cfg.MaxGroupSize > 0 && len(g.members) >= c.cfg.MaxGroupSize {
		out.joinError(m.joinID, m.joinVersion, kerr.GroupMaxSizeReached, m.ID)
		return *out
	}
	c.addMember(now, g, m, protocolType, out)
	return *out
}

// joinKnown handles a join with a member id.
func (c *Coordinator) joinKnown(now time.Time, g *Group, memberID string, m *Member, protocolType string, out *Output) Output {
	fail := func(err *kerr.Error) Output {
		out.joinError(m.joinID, m.joinVersion, err, memberID)
		return *out
	}
	if _, ok := g.pending[memberID]; ok {
		delete(g.pending, memberID)
		m.ID = memberID
		c.addMember(now, g, m, protocolType, out)
		return *out
	}
	cur := g.members[memberID]
	var inst *string
	if m.InstanceID != "" {
		inst = &m.InstanceID
	}
	// As Kafka's validateExistingMember: an instance id must be the member's static one (no
	// static member: UNKNOWN_MEMBER_ID; another's: FENCED_INSTANCE_ID); without one, the member
	// id alone is checked, a static member's too (it keeps its instance id).
	switch {
	case g.fenced(inst, memberID):
		return fail(kerr.FencedInstanceID)
	case cur == nil, g.unknownInstance(inst):
		return fail(kerr.UnknownMemberID)
	}
	switch g.State {
	case PreparingRebalance:
		c.updateMember(cur, m, out)
		c.tryCompleteJoin(now, g, out)
	case CompletingRebalance, Stable:
		if cur.sameProtocols(m.Protocols) && (g.State == CompletingRebalance || memberID != g.Leader) {
			// Nothing changed: answer with the current generation (a lost response, a retry).
			cur.deadline = now.Add(cur.SessionTimeout)
			out.reply(m.joinID, g.joinResponseFor(cur, m.joinVersion))
			return *out
		}
		c.updateMember(cur, m, out)
		c.prepareRebalance(now, g, out)
	default:
		return fail(kerr.UnknownMemberID)
	}
	return *out
}

// rejoinStatic handles a static member that joins again without its member id (it restarted):
// it gets a new member id and the old one is fenced. In a stable group whose selected protocol
// the new join does not change, nothing rebalances (KIP-345), whether the member led or not,
// and whatever else its metadata says (a restarted cooperative consumer owns no partitions any
// more, so its metadata always differs): as Kafka, the member is given its previous
// assignment. A leader that knows KIP-814 (JoinGroup v9+) is told it leads, with every
// member's metadata and SkipAssignment set, so that it watches the group's subscriptions
// without computing an assignment; an older one is named as follower (the response's leader
// is its old member id) and takes its assignment from SyncGroup. Mid-sync the assignment being
// computed names the old member id, so the group rebalances (Kafka's rule).
func (c *Coordinator) rejoinStatic(now time.Time, g *Group, oldID string, m *Member, out *Output) Output {
	old := g.members[oldID]
	m.ID = newMemberID(m.InstanceID)
	m.Assignment = old.Assignment
	if old.awaitingJoin {
		out.joinError(old.joinID, old.joinVersion, kerr.FencedInstanceID, oldID)
	}
	if old.awaitingSync {
		out.syncError(old.syncID, old.syncVersion, kerr.FencedInstanceID)
	}
	g.members[m.ID] = m
	delete(g.members, oldID)
	for i, id := range g.order {
		if id == oldID {
			g.order[i] = m.ID
		}
	}
	g.static[m.InstanceID] = m.ID
	wasLeader := g.Leader == oldID
	if wasLeader {
		g.Leader = m.ID
	}
	switch {
	case g.State == Stable && g.selectProtocol() == g.Protocol:
		m.awaitingJoin = false
		m.deadline = now.Add(m.SessionTimeout)
		out.Records = append(out.Records, g.metadataRecord())
		resp := g.joinResponseFor(m, m.joinVersion)
		switch {
		case wasLeader && m.joinVersion >= 9:
			resp.SkipAssignment = true
		case wasLeader:
			resp.LeaderID, resp.Members = oldID, nil
		}
		out.reply(m.joinID, resp)
	case g.State == PreparingRebalance:
		c.tryCompleteJoin(now, g, out)
	default:
		c.prepareRebalance(now, g, out)
	}
	return *out
}

// addMember adds a new member, which waits for the rebalance it starts (or joins).
func (c *Coordinator) addMember(now time.Time, g *Group, m *Member, protocolType string, out *Output) {
	if len(g.members) == 0 {
		g.ProtocolType = protocolType
	}
	g.members[m.ID] = m
	g.order = append(g.order, m.ID)
	if m.InstanceID != "" {
		g.static[m.InstanceID] = m.ID
	}
	if g.State == PreparingRebalance {
		if g.initialDelay { // new members extend the initial delay, up to the rebalance timeout
			g.joinDeadline = minTime(now.Add(c.cfg.InitialRebalanceDelay), g.rebalanceDeadline)
		}
		c.tryCompleteJoin(now, g, out)
		return
	}
	c.prepareRebalance(now, g, out)
}

// updateMember takes a member's new join: its protocols, timeouts and pending request.
func (c *Coordinator) updateMember(cur, m *Member, out *Output) {
	if cur.awaitingJoin { // a second join while one waits: the older one is superseded
		out.joinError(cur.joinID, cur.joinVersion, kerr.RebalanceInProgress, cur.ID)
	}
	cur.Protocols, cur.SessionTimeout, cur.RebalanceTimeout = m.Protocols, m.SessionTimeout, m.RebalanceTimeout
	cur.ClientID, cur.ClientHost = m.ClientID, m.ClientHost
	cur.awaitingJoin, cur.joinID, cur.joinVersion = true, m.joinID, m.joinVersion
}

// prepareRebalance starts a rebalance: every member must join again.
func (c *Coordinator) prepareRebalance(now time.Time, g *Group, out *Output) {
	if g.State == CompletingRebalance { // the assignment being computed is void
		for _, m := range g.members {
			if m.awaitingSync {
				out.syncError(m.syncID, m.syncVersion, kerr.RebalanceInProgress)
				m.awaitingSync = false
			}
		}
	}
	g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
	g.joinDeadline = g.rebalanceDeadline
	g.initialDelay = g.State == Empty && c.cfg.InitialRebalanceDelay > 0
	if g.initialDelay {
		g.joinDeadline = minTime(now.Add(c.cfg.InitialRebalanceDelay), g.rebalanceDeadline)
	}
	g.transition(PreparingRebalance, now)
	c.tryCompleteJoin(now, g, out)
}

// tryCompleteJoin completes the join phase once every member has joined (and any initial delay
// passed), or at the deadline, removing the members that did not join.
func (c *Coordinator) tryCompleteJoin(now time.Time, g *Group, out *Output) {
	if g.State != PreparingRebalance {
		return
	}
	all := len(g.pending) == 0
	for _, m := range g.members {
		all = all && m.awaitingJoin
	}
	due := !now.Before(g.joinDeadline)
	if !due && (!all || g.initialDelay) {
		return
	}
	if due {
		// The dynamic members that did not join are gone. A static member (KIP-345) stays
		// until its session times out, as in Kafka: it may be restarting, and coming back under
		// its instance id must not cost another rebalance.
		for _, id := range append([]string(nil), g.order...) {
			if m := g.members[id]; !m.awaitingJoin && m.InstanceID == "" {
				c.removeMember(g, m, kerr.UnknownMemberID, out)
			}
		}
		clear(g.pending)
	}
	g.initialDelay = false
	g.Generation++
	if len(g.members) == 0 {
		g.Protocol, g.Leader = "", ""
		g.transition(Empty, now)
		out.Records = append(out.Records, g.metadataRecord())
		return
	}
	g.Protocol = g.selectProtocol()
	if l, ok := g.members[g.Leader]; !ok || !l.awaitingJoin {
		// A leader gone, or a static one away: a member that joined leads (Kafka's
		// maybeElectNewJoinedLeader), so the assignment is not left to one that will not answer.
		g.Leader = g.order[0]
		for _, id := range g.order {
			if g.members[id].awaitingJoin {
				g.Leader = id
				break
			}
		}
	}
	g.transition(CompletingRebalance, now)
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	for _, id := range g.order {
		m := g.members[id]
		if !m.awaitingJoin {
			continue // a static member away: its session runs on; it rejoins when it is back
		}
		m.awaitingJoin = false
		m.deadline = now.Add(m.SessionTimeout)
		out.reply(m.joinID, g.joinResponseFor(m, m.joinVersion))
	}
}

func (g *Group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.RebalanceTimeout)
	}
	return d
}

// selectProtocol picks the protocol the most members prefer among those all support, as Kafka
// does (each member votes for its first supported candidate); ties go to the earlier candidate.
func (g *Group) selectProtocol() string {
	cands := g.candidates()
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.Protocols {
			if slices.Contains(cands, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range cands {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// protocolNames are copies of g's protocol type and selected protocol for a response, which the
// connection's writer encodes while the group's next request may change them.
func (g *Group) protocolNames() (protocolType, protocol *string) {
	pt, name := g.ProtocolType, g.Protocol
	return &pt, &name
}

// joinResponseFor is the successful JoinGroup answer for m: the leader gets every member's
// metadata for the selected protocol.
func (g *Group) joinResponseFor(m *Member, version int16) *kmsg.JoinGroupResponse {
	resp := joinResponse(version)
	resp.Generation, resp.LeaderID, resp.MemberID = g.Generation, g.Leader, m.ID
	resp.ProtocolType, resp.Protocol = g.protocolNames()
	if m.ID == g.Leader {
		for _, id := range g.order {
			o := g.members[id]
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID, jm.ProtocolMetadata = o.ID, o.metadata(g.Protocol)
			jm.InstanceID = optional(o.InstanceID)
			resp.Members = append(resp.Members, jm)
		}
	}
	return resp
}

func joinResponse(version int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	return resp
}

func syncResponse(version int16) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = version
	return resp
}

// joinError answers JoinGroup request id with err; a failed join has no generation.
func (o *Output) joinError(id RequestID, version int16, err *kerr.Error, memberID string) {
	resp := joinResponse(version)
	resp.ErrorCode, resp.MemberID, resp.Generation = err.Code, memberID, -1
	o.reply(id, resp)
}

// syncError answers SyncGroup request id with err.
func (o *Output) syncError(id RequestID, version int16, err *kerr.Error) {
	resp := syncResponse(version)
	resp.ErrorCode = err.Code
	o.reply(id, resp)
}

// removeMember takes m out of g; a request it has pending is answered with err.
func (c *Coordinator) removeMember(g *Group, m *Member, err *kerr.Error, out *Output) {
	if m.awaitingJoin {
		out.joinError(m.joinID, m.joinVersion, err, m.ID)
	}
	if m.awaitingSync {
		out.syncError(m.syncID, m.syncVersion, err)
	}
	delete(g.members, m.ID)
	for i, id := range g.order {
		if id == m.ID {
			g.order = append(g.order[:i:i], g.order[i+1:]...)
			break
		}
	}
	if m.InstanceID != "" && g.static[m.InstanceID] == m.ID {
		delete(g.static, m.InstanceID)
	}
	if g.Leader == m.ID {
		g.Leader = ""
	}
}

// memberLeft reacts to a member leaving or expiring.
func (c *Coordinator) memberLeft(now time.Time, g *Group, out *Output) {
	switch g.State {
	case Stable, CompletingRebalance:
		c.prepareRebalance(now, g, out)
	case PreparingRebalance:
		c.tryCompleteJoin(now, g, out)
	}
}

// SyncGroup handles a SyncGroup request; a follower's reply waits for the leader's.
func (c *Coordinator) SyncGroup(now time.Time, id RequestID, req *kmsg.SyncGroupRequest) Output {
	var out Output
	fail := func(err *kerr.Error) Output {
		out.syncError(id, req.Version, err)
		return out
	}
	if req.Group == "" { // as Kafka's GroupCoordinatorService.syncGroup
		return fail(kerr.InvalidGroupID)
	}
	g := c.groups[req.Group]
	if g == nil {
		return fail(kerr.UnknownMemberID)
	}
	if g.consumer != nil {
		c.syncConsumerGroup(now, id, g, req, &out)
		return out
	}
	m := g.members[req.MemberID]
	switch {
	case g.fenced(req.InstanceID, req.MemberID):
		return fail(kerr.FencedInstanceID)
	case m == nil, g.unknownInstance(req.InstanceID):
		return fail(kerr.UnknownMemberID)
	case req.Generation != g.Generation:
		return fail(kerr.IllegalGeneration)
	case (req.ProtocolType != nil && *req.ProtocolType != g.ProtocolType) || (req.Protocol != nil && *req.Protocol != g.Protocol):
		return fail(kerr.InconsistentGroupProtocol)
	}
	switch g.State {
	case PreparingRebalance:
		return fail(kerr.RebalanceInProgress)
	case Stable:
		m.deadline = now.Add(m.SessionTimeout)
		resp := syncResponse(req.Version)
		resp.MemberAssignment = m.Assignment
		resp.ProtocolType, resp.Protocol = g.protocolNames()
		out.reply(id, resp)
		return out
	case CompletingRebalance:
	default:
		return fail(kerr.UnknownMemberID)
	}
	m.awaitingSync, m.syncID, m.syncVersion = true, id, req.Version
	m.deadline = now.Add(m.SessionTimeout)
	if req.MemberID != g.Leader {
		return out
	}
	assigned := map[string][]byte{}
	for _, a := range req.GroupAssignment {
		assigned[a.MemberID] = a.MemberAssignment
	}
	for _, o := range g.members {
		o.Assignment = assigned[o.ID] // members the leader left out get an empty assignment
	}
	g.transition(Stable, now)
	out.Records = append(out.Records, g.metadataRecord())
	for _, id := range g.order {
		o := g.members[id]
		if o.awaitingSync {
			resp := syncResponse(o.syncVersion)
			resp.MemberAssignment = o.Assignment
			resp.ProtocolType, resp.Protocol = g.protocolNames()
			out.reply(o.syncID, resp)
			o.awaitingSync = false
		}
	}
	return out
}

// Heartbeat handles a Heartbeat request; it is answered at once.
func (c *Coordinator) Heartbeat(now time.Time, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" { // as Kafka's GroupCoordinatorService.heartbeat
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	g := c.groups[req.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	if g.consumer != nil {
		resp.ErrorCode = heartbeatConsumerGroup(now, g.consumer, req)
		return resp
	}
	m := g.members[req.MemberID]
	switch {
	case g.fenced(req.InstanceID, req.MemberID):
		resp.ErrorCode = kerr.FencedInstanceID.Code
	case m == nil, g.unknownInstance(req.InstanceID):
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case g.State == Empty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case req.Generation != g.Generation:
		resp.ErrorCode = kerr.IllegalGeneration.Code
	case g.State == PreparingRebalance:
		m.deadline = now.Add(m.SessionTimeout)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	default: // CompletingRebalance (a member may heartbeat before its sync) or Stable
		m.deadline = now.Add(m.SessionTimeout)
	}
	return resp
}

// LeaveGroup handles a LeaveGroup request (one member before v3, a batch from v3).
func (c *Coordinator) LeaveGroup(now time.Time, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, Output) {
	var out Output
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if req.Group == "" { // as Kafka's GroupCoordinatorService.leaveGroup
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, out
	}
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g := c.groups[req.Group]
	left := false
	var before []byte
	if g != nil && g.consumer != nil {
		before = c.consumerStateValue(g.ID)
	}
	for _, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		if g != nil && g.consumer != nil { // classic members of a consumer group (migrate.go)
			rm.ErrorCode = c.leaveConsumerGroup(now, g, lm, &out)
		} else {
			rm.ErrorCode = c.leaveOne(g, lm, &out, &left)
		}
		resp.Members = append(resp.Members, rm)
	}
	if before != nil {
		// Removing the last consumer-protocol member makes it a classic group again, as a
		// leave by heartbeat does: Kafka's classicGroupLeaveToConsumerGroup fences the batch
		// through consumerGroupFenceMembers, which converts. Left a consumer group, its
		// classic members' heartbeats would never bring them the partitions it held.
		c.maybeDowngrade(now, g, &out)
		c.recordConsumerChange(g.ID, before, &out)
	}
	if req.Version < 3 {
		resp.ErrorCode, resp.Members = resp.Members[0].ErrorCode, nil
	}
	switch {
	case left:
		c.memberLeft(now, g, &out)
	case g != nil && g.consumer == nil && g.State == PreparingRebalance:
		c.tryCompleteJoin(now, g, &out)
	}
	return resp, out
}

func (c *Coordinator) leaveOne(g *Group, lm kmsg.LeaveGroupRequestMember, out *Output, left *bool) int16 {
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	id := lm.MemberID
	if lm.InstanceID != nil {
		cur, ok := g.static[*lm.InstanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case id != "" && id != cur:
			return kerr.FencedInstanceID.Code
		}
		id = cur
	}
	if _, ok := g.pending[id]; ok {
		// A member that never joined (MEMBER_ID_REQUIRED) leaves nothing to rebalance; a
		// rebalance that waited for it may complete (Kafka's removePendingMember).
		delete(g.pending, id)
		return 0
	}
	m := g.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	c.removeMember(g, m, kerr.UnknownMemberID, out)
	*left = true
	return 0
}

// Tick applies the timeouts that passed by now: expired sessions, pending member ids that never
// rejoined, the join and sync deadlines.
func (c *Coordinator) Tick(now time.Time) Output {
	var out Output
	for _, g := range c.Groups() {
		if g.streams != nil {
			c.tickStreams(now, g, &out)
			continue
		}
		if g.share != nil {
			if c.tickShare(now, g) {
				out.Records = append(out.Records, Record{Group: g.ID, Key: shareKey(g.ID), Value: c.shareStateValue(g.ID)})
			}
			continue
		}
		if g.consumer != nil {
			for id, deadline := range g.pending { // classic members given an id (migrate.go)
				if !now.Before(deadline) {
					delete(g.pending, id)
				}
			}
			// Only a removal changes the state: encode it then, not on every tick to compare.
			if c.tickConsumer(now, g, &out) {
				c.recordConsumerState(g.ID, c.consumerStateValue(g.ID), &out)
			}
			continue
		}
		left := false
		for id, deadline := range g.pending {
			if !now.Before(deadline) {
				delete(g.pending, id) // never joined: nothing to rebalance (tryCompleteJoin below)
			}
		}
		for _, m := range g.Members() {
			if !m.awaitingJoin && !m.awaitingSync && !now.Before(m.deadline) {
				c.removeMember(g, m, kerr.UnknownMemberID, &out)
				left = true
			}
		}
		if g.State == CompletingRebalance && !now.Before(g.syncDeadline) {
			for _, m := range g.Members() { // they got the join answer but never synced
				if !m.awaitingSync {
					c.removeMember(g, m, kerr.UnknownMemberID, &out)
					left = true
				}
			}
		}
		switch {
		case left:
			c.memberLeft(now, g, &out)
		case g.State == PreparingRebalance:
			c.tryCompleteJoin(now, g, &out)
		}
	}
	return out
}

// fenced reports whether instance names a static member that now has another member id
// (KIP-345): requests from the old id get FENCED_INSTANCE_ID.
func (g *Group) fenced(instance *string, memberID string) bool {
	if instance == nil {
		return false
	}
	cur, ok := g.static[*instance]
	return ok && cur != memberID
}

// unknownInstance reports whether instance names no static member of the group: Kafka's
// ClassicGroup.validateMember (Heartbeat, OffsetCommit) answers UNKNOWN_MEMBER_ID then, even to
// a dynamic member that exists.
func (g *Group) unknownInstance(instance *string) bool {
	if instance == nil {
		return false
	}
	_, ok := g.static[*instance]
	return !ok
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
