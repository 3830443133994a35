package controller

import (
	"slices"
	"time"
)

// Active is the active controller's logic: node sessions, partition elections and leadership
// transfers. It does no I/O: events go in (an applied image, a heartbeat, a vote, a tick) and
// Effects come out (commands to propose, requests to send), so its tests are deterministic.
// Only the Raft leader runs one; a new leader starts a fresh one.
type Active struct {
	cfg ActiveConfig
	img *Image

	sessions  map[int32]*session
	elections map[PartitionRef]*election
	transfers map[PartitionRef]*transfer
	// hints names the replica a transfer wants elected, until the election is done.
	hints map[PartitionRef]int32
	// refused: the target a transfer of the partition's leader epoch did not get ready for (it
	// refused, or timed out): a stopping node's next transfer tries another replica first.
	refused     map[PartitionRef]refusal
	lastBalance time.Time
	finishing   map[PartitionRef]time.Time // finish-reassign proposed at
	// uncleanAsked: an automatic unclean election proposed for the partition's epoch, and when.
	uncleanAsked   map[PartitionRef]epochAt
	lastTokenSweep time.Time
	levelAsked     time.Time               // finalize-level proposed at
	levels         map[int32]reportedLevel // what nodes' heartbeats report
	members        []int32                 // the controller's Raft voters and learners
	lastTick       time.Time
	lastForgiven   time.Time // the last stall Tick forgave
}

// tokenSweepInterval is how often the active controller removes expired delegation tokens
// (Kafka's delegation.token.expiry.check.interval.ms is an hour; every node ignores an
// expired token anyway, so this only keeps the metadata small).
const tokenSweepInterval = time.Minute

// sweepTokens proposes the removal of the delegation tokens past their expiry.
func (a *Active) sweepTokens(now time.Time, eff *Effects) {
	if now.Sub(a.lastTokenSweep) < tokenSweepInterval {
		return
	}
	a.lastTokenSweep = now
	var expired []string
	for id, t := range a.img.Tokens {
		if t.ExpiryMs < now.UnixMilli() {
			expired = append(expired, id)
		}
	}
	if len(expired) > 0 {
		slices.Sort(expired)
		eff.propose(&Command{Op: OpRemoveTokens, TokenChange: &TokenChange{Remove: expired, NowMs: now.UnixMilli()}})
	}
}

type epochAt struct {
	epoch int32
	at    time.Time
}

// refusal is a transfer's target that did not get ready, in the partition's leader epoch.
type refusal struct{ epoch, target int32 }

// ActiveConfig holds the active controller's timings.
type ActiveConfig struct {
	// SessionTimeout: a node not heard from for this long is fenced.
	SessionTimeout time.Duration
	// AgentExpiry: an agent not heard from for this long is unregistered (and its Raft learner
	// removed); agents take a new id at every start.
	AgentExpiry time.Duration
	// VoteGrace: an election with votes from a majority (but not every live replica) waits
	// this long for the rest, to prefer the preferred replica among equals.
	VoteGrace time.Duration
	// VoteRetry: vote requests not answered after this long are sent again.
	VoteRetry time.Duration
	// BalanceInterval: how often leaderships are moved back to preferred replicas (0: never).
	BalanceInterval time.Duration
	// ImbalancePercent is Kafka's leader.imbalance.per.broker.percentage: a node's partitions
	// (those it is the preferred replica of) are moved back to it only once more than this
	// share of them is led by another replica (0: any).
	ImbalancePercent int
	// TransferTimeout bounds a leadership transfer's preparation.
	TransferTimeout time.Duration
	// MaxTransfers bounds the transfers in flight.
	MaxTransfers int
}

// DefaultActiveConfig returns the defaults.
func DefaultActiveConfig() ActiveConfig {
	return ActiveConfig{SessionTimeout: 1500 * time.Millisecond, VoteGrace: 100 * time.Millisecond,
		VoteRetry: 500 * time.Millisecond, BalanceInterval: 5 * time.Second, TransferTimeout: 2 * time.Second,
		MaxTransfers: 64, AgentExpiry: 30 * time.Second, ImbalancePercent: 10}
}

type session struct {
	incarnation uint64
	lastSeen    time.Time
	// shuttingDown: the incarnation's heartbeats say it is stopping (Kafka's controlled
	// shutdown): its leaderships move to other replicas, and none moves to it.
	shuttingDown bool
	unregAsked   time.Time // when an agent's unregister was last proposed
	fenceAsked   time.Time // when a fence of the incarnation was last proposed
	stopAsked    time.Time // when its controlled-shutdown was last proposed
	unfenceAsk   time.Time
}

type election struct {
	epoch     int32
	metaIndex uint64
	// replicasSince: the partition's ReplicasSince the votes were asked under. A reassignment
	// since (a move cancelled and asked again, all in one leaderless epoch) may have deleted
	// a target replica's copy and opened an empty one: the votes of the nodes that are not
	// among the replicas are asked again (a replica's copy is kept until a move finishes,
	// which needs a leader).
	replicasSince uint64
	asked         map[int32]time.Time // node → when its vote was requested
	votes         map[int32]Vote
	started       time.Time
	proposed      time.Time // when an elect was proposed (zero: not yet)
}

type transfer struct {
	epoch   int32
	target  int32
	started time.Time
	ready   bool // the leader is ready; begin-election proposed
}

// Vote is a replica's answer to a vote request.
type Vote struct {
	PartitionRef
	Epoch int32 `json:"epoch"`
	// OK: the replica is in Epoch without a leader and can lead. A replica that is ahead
	// (already sees a later epoch) or whose log failed answers !OK.
	OK        bool   `json:"ok"`
	LastEpoch int32  `json:"last_epoch"`
	LogEnd    int64  `json:"log_end"`
	Reason    string `json:"reason,omitempty"`
}

// VoteRequest asks a node for its replicas' votes once its image has reached MetaIndex.
type VoteRequest struct {
	MetaIndex uint64     `json:"meta_index"`
	Items     []EpochRef `json:"items"`
}

// VoteReply answers a VoteRequest.
type VoteReply struct {
	Votes []Vote `json:"votes"`
	// Incarnation is the voter's (0 from versions before it): a reply read only after the
	// voter came back as a new incarnation does not count for the new one.
	Incarnation uint64 `json:"incarnation,omitempty"`
	// MetaIndex echoes the request's (0 from versions before it): a reply to a request older
	// than an election's votes (reset by a reassignment) does not count.
	MetaIndex uint64 `json:"meta_index,omitempty"`
}

// TransferRequest asks a partition's leader to stop appending and wait until Target has its
// whole log, before an election that Target should win.
type TransferRequest struct {
	EpochRef
	Target int32 `json:"target"`
}

// TransferReply answers a TransferRequest: Ready means the leader stopped appending and Target
// holds its log.
type TransferReply struct {
	Ready bool `json:"ready"`
}

// Effects are what the active controller wants done.
type Effects struct {
	Propose   []*Command
	Votes     map[int32]*VoteRequest
	Transfers map[int32][]TransferRequest
}

func (e *Effects) propose(c *Command) { e.Propose = append(e.Propose, c) }

// addTransfers takes sub's transfer requests.
func (e *Effects) addTransfers(sub Effects) {
	if len(sub.Transfers) == 0 {
		return
	}
	if e.Transfers == nil {
		e.Transfers = map[int32][]TransferRequest{}
	}
	for n, rs := range sub.Transfers {
		e.Transfers[n] = append(e.Transfers[n], rs...)
	}
}

func (e *Effects) vote(node int32, metaIndex uint64, ref EpochRef) {
	if e.Votes == nil {
		e.Votes = map[int32]*VoteRequest{}
	}
	r := e.Votes[node]
	if r == nil {
		r = &VoteRequest{MetaIndex: metaIndex}
		e.Votes[node] = r
	}
	r.MetaIndex = max(r.MetaIndex, metaIndex)
	r.Items = append(r.Items, ref)
}

// Empty reports whether there is nothing to do.
func (e *Effects) Empty() bool {
	return len(e.Propose) == 0 && len(e.Votes) == 0 && len(e.Transfers) == 0
}

// NewActive starts the active controller's logic with the image at the moment this node
// became the Raft leader. Every unfenced node gets a full session from now.
func NewActive(cfg ActiveConfig, img *Image, now time.Time) *Active {
	a := &Active{cfg: cfg, img: img, sessions: map[int32]*session{}, elections: map[PartitionRef]*election{},
		transfers: map[PartitionRef]*transfer{}, hints: map[PartitionRef]int32{}, refused: map[PartitionRef]refusal{}, lastBalance: now,
		finishing: map[PartitionRef]time.Time{}, uncleanAsked: map[PartitionRef]epochAt{}}
	for id, n := range img.Nodes {
		a.sessions[id] = &session{incarnation: n.Incarnation, lastSeen: now}
	}
	return a
}

// SetImage takes a newly applied image: elections start for partitions that lost their leader.
func (a *Active) SetImage(img *Image, now time.Time) Effects {
	a.img = img
	for id, r := range a.levels { // reports of incarnations the image no longer has
		if n := img.Nodes[id]; n == nil || n.Incarnation != r.incarnation {
			delete(a.levels, id)
		}
	}
	for id, n := range img.Nodes {
		s := a.sessions[id]
		if s == nil || s.incarnation != n.Incarnation {
			a.sessions[id] = &session{incarnation: n.Incarnation, lastSeen: now}
			if s != nil {
				a.forgetVotes(id)
			}
		}
	}
	for id := range a.sessions { // unregistered
		if img.Nodes[id] == nil {
			delete(a.sessions, id)
		}
	}
	for ref := range a.finishing { // the move finished or was cancelled, or the topic is gone
		if _, p, ok := img.Partition(ref.Topic, ref.Partition); !ok || p.Target == nil {
			delete(a.finishing, ref)
		}
	}
	for ref, t := range a.transfers { // done: its election began (or the leadership moved anyway)
		if _, p, ok := img.Partition(ref.Topic, ref.Partition); !ok || p.LeaderEpoch != t.epoch {
			delete(a.transfers, ref)
		}
	}
	for ref, r := range a.refused {
		if _, p, ok := img.Partition(ref.Topic, ref.Partition); !ok || p.LeaderEpoch != r.epoch {
			delete(a.refused, ref)
		}
	}
	var eff Effects
	a.electAll(now, &eff)
	a.forgetHints()
	return eff
}

// forgetHints drops the hints of transfers whose election never began (the begin-election
// proposal was lost and the transfer timed out): a later, unrelated election would go by them.
func (a *Active) forgetHints() {
	for ref := range a.hints {
		if a.transfers[ref] == nil && a.elections[ref] == nil {
			delete(a.hints, ref)
		}
	}
}

// forgetVotes drops a node's votes in the running elections, and asks it again: a vote of an
// earlier incarnation described a log the node may have lost since (a machine crash loses what
// was appended but not synced), and counted, it could elect the node without committed
// records.
func (a *Active) forgetVotes(node int32) {
	for _, e := range a.elections {
		delete(e.votes, node)
		delete(e.asked, node)
	}
}

// Heartbeat records a node's heartbeat. It returns false if the node must register again (its
// incarnation is not the image's).
func (a *Active) Heartbeat(node int32, incarnation uint64, now time.Time) (bool, Effects) {
	var eff Effects
	n, ok := a.img.Nodes[node]
	if !ok || n.Incarnation != incarnation {
		return false, eff
	}
	s := a.sessions[node]
	if s == nil {
		s = &session{incarnation: incarnation}
		a.sessions[node] = s
	}
	s.lastSeen = now
	if n.Fenced && now.Sub(s.unfenceAsk) > a.cfg.VoteRetry {
		s.unfenceAsk = now
		eff.propose(&Command{Op: OpUnfence, Fence: &Fence{Node: node, Incarnation: incarnation}})
	}
	return true, eff
}

// PeerDown is told that a node's cluster port refused a connection: its process is gone, so it
// is fenced without waiting for its session to expire.
func (a *Active) PeerDown(node int32, now time.Time) Effects {
	var eff Effects
	a.fence(node, now, &eff)
	return eff
}

// ShuttingDown is told, with each heartbeat of the node's current incarnation, that the node
// is stopping (Kafka's controlled shutdown): the partitions it leads are moved to other in-sync
// replicas (transfers, as ElectLeaders does; retried each Tick until none is left), and no
// leadership moves to it. movable is how many partitions it still leads that another replica,
// not stopping too, could take: the node may stop once none is left. ok is false for an
// incarnation the image does not have.
func (a *Active) ShuttingDown(node int32, incarnation uint64, now time.Time) (movable int, ok bool, eff Effects) {
	n, known := a.img.Nodes[node]
	s := a.sessions[node]
	if !known || n.Incarnation != incarnation || s == nil || s.incarnation != incarnation {
		return 0, false, eff
	}
	if !s.shuttingDown {
		s.shuttingDown = true
		a.moveAway(now, &eff)
	}
	if a.img.Level >= LevelControlledShutdown && !n.ShuttingDown && !n.Fenced && !n.Agent && now.Sub(s.stopAsked) >= a.cfg.VoteRetry {
		// Recorded in the image, as Kafka's InControlledShutdown: it leaves the ISRs it
		// follows in, and no new replica is placed on it (asked again if the proposal is lost).
		s.stopAsked = now
		eff.propose(&Command{Op: OpControlledShutdown, Fence: &Fence{Node: node, Incarnation: incarnation}})
	}
	avoid := a.unfitTarget(now)
	a.img.EachPartition(func(t *Topic, index int32, p *Partition) {
		switch {
		case p.Leader == node && a.img.ShutdownTarget(p, avoid) >= 0:
			movable++
		case p.Leader < 0 && slices.Contains(p.Hosts(), node):
			// An election not decided yet: the node waits for it. A transfer's could elect
			// it again, by a successor that does not know it is stopping, were it to hand the
			// controller on now, as Kafka's ShouldShutDown waits for the broker to lead
			// nothing; any other may need its vote (a majority of the replicas), and without
			// it, with another replica down too, the partition would stay leaderless until
			// the node is back, where Kafka keeps a leader on the last one. One that cannot
			// be decided any more (canDecide) is not waited for.
			ref := PartitionRef{Topic: t.ID, Partition: index}
			if _, electing := a.hints[ref]; electing {
				movable++
			} else if e := a.elections[ref]; e != nil && a.canDecide(p, e) {
				movable++
			}
		}
	})
	return movable, true, eff
}

// canDecide reports whether election e of p can still be decided without an unclean election:
// the live replicas that voted OK or have yet to vote make a majority of the replicas.
func (a *Active) canDecide(p *Partition, e *election) bool {
	n := 0
	for _, r := range p.Replicas {
		if v, voted := e.votes[r]; a.img.Live(r) && (!voted || v.OK) {
			n++
		}
	}
	return n >= len(p.Replicas)/2+1
}

// unfitTarget reports the nodes a stopping node's leaderships do not go to: stopping too, or
// silent.
func (a *Active) unfitTarget(now time.Time) func(int32) bool {
	return func(n int32) bool { return a.shuttingDown(n) || a.silent(n, now) }
}

// shuttingDown reports whether node's current incarnation is stopping: its heartbeats say so,
// or the image does (controlled-shutdown, which a new active controller finds there).
func (a *Active) shuttingDown(node int32) bool {
	s := a.sessions[node]
	return s != nil && s.shuttingDown || a.img.stopping(node)
}

// silent reports whether node has not heartbeated for half a session timeout: it is not
// counted on to take a stopping node's leaderships (a whole cluster stopping at once, whose
// nodes the controller cannot fence any more without a quorum, would wait for them).
func (a *Active) silent(node int32, now time.Time) bool {
	s := a.sessions[node]
	return s == nil || now.Sub(s.lastSeen) > a.cfg.SessionTimeout/2
}

// moveAway starts the transfers of the partitions led by nodes that are shutting down, to the
// replica ShutdownTarget names (one that is not stopping too).
func (a *Active) moveAway(now time.Time, eff *Effects) {
	stopping := false
	for _, s := range a.sessions {
		stopping = stopping || s.shuttingDown
	}
	for _, n := range a.img.Nodes {
		stopping = stopping || n.ShuttingDown
	}
	if !stopping {
		return
	}
	avoid := a.unfitTarget(now)
	a.img.EachPartition(func(t *Topic, index int32, p *Partition) {
		if p.Leader < 0 || !a.shuttingDown(p.Leader) || len(a.transfers) >= a.cfg.MaxTransfers {
			return
		}
		ref := PartitionRef{Topic: t.ID, Partition: index}
		if tr, busy := a.transfers[ref]; busy && tr.epoch == p.LeaderEpoch {
			return
		}
		target := a.img.ShutdownTarget(p, func(n int32) bool {
			r, ok := a.refused[ref]
			return avoid(n) || ok && r.epoch == p.LeaderEpoch && r.target == n
		})
		if target < 0 { // the one that refused is the only one left
			target = a.img.ShutdownTarget(p, avoid)
		}
		if target >= 0 {
			_, sub := a.Transfer(ref, target, now)
			eff.addTransfers(sub)
		}
	})
}

func (a *Active) fence(node int32, now time.Time, eff *Effects) {
	n, ok := a.img.Nodes[node]
	if !ok || n.Fenced {
		return
	}
	s := a.sessions[node]
	if s == nil {
		s = &session{incarnation: n.Incarnation, lastSeen: now}
		a.sessions[node] = s
	}
	if now.Sub(s.fenceAsked) < a.cfg.VoteRetry {
		return // proposed; if the proposal was lost, or the node unfenced since, ask again later
	}
	s.fenceAsked = now
	eff.propose(&Command{Op: OpFence, Fence: &Fence{Node: node, Incarnation: n.Incarnation}})
}

// Votes takes a node's vote reply.
func (a *Active) Votes(from int32, reply *VoteReply, now time.Time) Effects {
	if n := a.img.Nodes[from]; reply.Incarnation != 0 && (n == nil || n.Incarnation != reply.Incarnation) {
		return Effects{} // an earlier incarnation's (forgetVotes), or one the image has not yet
	}
	for _, v := range reply.Votes {
		e := a.elections[v.PartitionRef]
		if e == nil || e.epoch != v.Epoch || reply.MetaIndex != 0 && reply.MetaIndex < e.metaIndex {
			continue
		}
		e.votes[from] = v
	}
	var eff Effects
	a.electAll(now, &eff)
	return eff
}

// TransferReady takes a leader's answer to a transfer request.
func (a *Active) TransferReady(ref EpochRef, ready bool, now time.Time) Effects {
	var eff Effects
	t := a.transfers[ref.PartitionRef]
	if t == nil || t.epoch != ref.Epoch || t.ready {
		return eff
	}
	if !ready {
		delete(a.transfers, ref.PartitionRef)
		a.refused[ref.PartitionRef] = refusal{epoch: t.epoch, target: t.target}
		return eff
	}
	t.ready = true
	a.hints[ref.PartitionRef] = t.target
	eff.propose(&Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{ref}}})
	return eff
}

// Transfer starts moving leadership of a partition to target (ElectLeaders, balancing). It
// returns false if the partition has no leader, target cannot lead it (not live, not a
// replica, or shutting down: as Kafka's ClusterControlManager.isActive, a node in controlled
// shutdown takes no leadership), or it is led by target already.
func (a *Active) Transfer(ref PartitionRef, target int32, now time.Time) (bool, Effects) {
	var eff Effects
	_, p, ok := a.img.Partition(ref.Topic, ref.Partition)
	if !ok || p.Leader < 0 || p.Leader == target || !a.img.Live(target) || a.shuttingDown(target) || !slices.Contains(p.Hosts(), target) {
		return false, eff
	}
	if t := a.transfers[ref]; t != nil && t.epoch == p.LeaderEpoch {
		// One transfer per epoch: to another target, this one has not started (an
		// ElectLeaders would otherwise wait for a leader the running transfer never makes).
		return t.target == target, eff
	}
	a.transfers[ref] = &transfer{epoch: p.LeaderEpoch, target: target, started: now}
	if eff.Transfers == nil {
		eff.Transfers = map[int32][]TransferRequest{}
	}
	eff.Transfers[p.Leader] = append(eff.Transfers[p.Leader],
		TransferRequest{EpochRef: EpochRef{PartitionRef: ref, Epoch: p.LeaderEpoch}, Target: target})
	return true, eff
}

// Tick expires sessions, retries votes, times out transfers and balances leadership.
func (a *Active) Tick(now time.Time) Effects {
	var eff Effects
	// A tick this long after the previous one (they come every 50 ms) means this process
	// stalled: paused, starved of CPU. The nodes' heartbeats of that while wait unread in its
	// connections, so every live node's session counts from the stall's end: the controller
	// fences no node for its own silence (a node that died before it is fenced at most a session
	// later). At most one stall per two sessions is forgiven: ticks late all the time (a
	// controller starved for good) must not keep a dead node unfenced for ever.
	if !a.lastTick.IsZero() && now.Sub(a.lastTick) > a.cfg.SessionTimeout/2 && now.Sub(a.lastForgiven) >= 2*a.cfg.SessionTimeout {
		a.lastForgiven = now
		for id, n := range a.img.Nodes {
			if s := a.sessions[id]; s != nil && !n.Fenced && s.lastSeen.Before(now) {
				s.lastSeen = now
			}
		}
	}
	a.lastTick = now
	for id, n := range a.img.Nodes {
		s := a.sessions[id]
		if !n.Fenced && s != nil && now.Sub(s.lastSeen) > a.cfg.SessionTimeout {
			a.fence(id, now, &eff)
		}
		if n.Agent && n.Fenced {
			if s == nil { // fenced before this controller started: count from now
				s = &session{incarnation: n.Incarnation, lastSeen: now}
				a.sessions[id] = s
			}
			if now.Sub(s.lastSeen) > a.cfg.AgentExpiry && now.Sub(s.unregAsked) >= a.cfg.VoteRetry {
				s.unregAsked = now
				eff.propose(&Command{Op: OpUnregister, Fence: &Fence{Node: id, Incarnation: n.Incarnation}})
			}
		}
	}
	for ref, t := range a.transfers {
		if now.Sub(t.started) > a.cfg.TransferTimeout {
			delete(a.transfers, ref)
			if !t.ready {
				a.refused[ref] = refusal{epoch: t.epoch, target: t.target}
			}
		}
	}
	a.uncleanAll(now, &eff)
	a.electAll(now, &eff)
	a.forgetHints()
	a.moveAway(now, &eff)
	a.reassign(now, &eff)
	a.sweepTokens(now, &eff)
	a.finalizeLevel(now, &eff)
	if a.cfg.BalanceInterval > 0 && now.Sub(a.lastBalance) >= a.cfg.BalanceInterval {
		a.lastBalance = now
		a.balance(now, &eff)
	}
	return eff
}

// reassign moves reassignments on: once every target replica is in sync, the partition
// switches to the target set (finish-reassign), after its leadership moved to a target replica
// if the leader is not one.
func (a *Active) reassign(now time.Time, eff *Effects) {
	a.img.EachPartition(func(t *Topic, index int32, p *Partition) {
		if p.Target == nil || p.Leader < 0 {
			return
		}
		ref := PartitionRef{Topic: t.ID, Partition: index}
		if !p.TargetSynced {
			return // still catching up
		}
		for _, n := range p.Target {
			if !slices.Contains(p.ISR, n) {
				return
			}
		}
		if !slices.Contains(p.Target, p.Leader) {
			if _, busy := a.transfers[ref]; !busy {
				// A target that is shutting down takes no leadership: with every target
				// stopping, the move finishes once one is back.
				if i := slices.IndexFunc(p.Target, func(n int32) bool { return !a.shuttingDown(n) }); i >= 0 {
					_, sub := a.Transfer(ref, p.Target[i], now)
					eff.addTransfers(sub)
				}
			}
			return
		}
		if now.Sub(a.finishing[ref]) < a.cfg.VoteRetry {
			return
		}
		a.finishing[ref] = now
		eff.propose(&Command{Op: OpFinishReassign, Reassign: &Reassign{PartitionRef: ref, Target: slices.Clone(p.Target)}})
	})
}

// balance moves leaderships back to preferred replicas that are live and in sync, for the
// nodes whose imbalance ratio (the share of the partitions they are the preferred replica of
// that another replica leads, or none) is above ImbalancePercent, as Kafka's controller does.
func (a *Active) balance(now time.Time, eff *Effects) {
	type share struct{ total, off int }
	shares := map[int32]*share{}
	a.img.EachPartition(func(_ *Topic, _ int32, p *Partition) {
		pref := p.Preferred()
		if pref < 0 {
			return
		}
		sh := shares[pref]
		if sh == nil {
			sh = &share{}
			shares[pref] = sh
		}
		sh.total++
		if p.Leader != pref {
			sh.off++
		}
	})
	a.img.EachPartition(func(t *Topic, index int32, p *Partition) {
		if len(a.transfers) >= a.cfg.MaxTransfers {
			return
		}
		pref := p.Preferred()
		if p.Leader < 0 || p.Leader == pref || !a.img.Live(pref) || !slices.Contains(p.ISR, pref) || a.shuttingDown(pref) {
			return
		}
		if sh := shares[pref]; sh.off*100 <= a.cfg.ImbalancePercent*sh.total {
			return // within leader.imbalance.per.broker.percentage
		}
		ref := PartitionRef{Topic: t.ID, Partition: index}
		if _, busy := a.transfers[ref]; busy {
			return
		}
		_, sub := a.Transfer(ref, pref, now)
		eff.addTransfers(sub)
	})
}

// uncleanAll commits, for every partition of a topic with unclean.leader.election.enable
// (Image.UncleanEnabled) that has lost a majority of its replicas but still has a live one, the
// unclean election an operator would ask for (ElectLeaders of type unclean, docs/cluster.md
// §4.5): Kafka elects an out-of-sync replica as soon as no in-sync one is alive. It is asked
// again after VoteRetry for as long as the partition's epoch does not move (a proposal lost
// with a leader change).
func (a *Active) uncleanAll(now time.Time, eff *Effects) {
	var items []EpochRef
	var seen map[PartitionRef]bool
	a.img.EachPartition(func(t *Topic, index int32, p *Partition) {
		if p.Unclean || !a.img.UncleanEnabled(t) || a.img.MajorityLive(p) || !slices.ContainsFunc(p.Hosts(), a.img.Live) {
			return
		}
		ref := PartitionRef{Topic: t.ID, Partition: index}
		if seen == nil {
			seen = map[PartitionRef]bool{}
		}
		seen[ref] = true
		if asked, ok := a.uncleanAsked[ref]; ok && asked.epoch == p.LeaderEpoch && now.Sub(asked.at) < a.cfg.VoteRetry {
			return
		}
		a.uncleanAsked[ref] = epochAt{p.LeaderEpoch, now}
		items = append(items, EpochRef{PartitionRef: ref, Epoch: p.LeaderEpoch})
	})
	for ref := range a.uncleanAsked { // forget the partitions that no longer need one
		if !seen[ref] {
			delete(a.uncleanAsked, ref)
		}
	}
	if len(items) > 0 {
		eff.propose(&Command{Op: OpUncleanElection, UncleanElection: &BeginElection{Items: items}})
	}
}

// electAll runs the elections of every partition without a leader.
func (a *Active) electAll(now time.Time, eff *Effects) {
	var elect []ElectItem
	seen := map[PartitionRef]bool{}
	a.img.EachPartition(func(t *Topic, index int32, p *Partition) {
		ref := PartitionRef{Topic: t.ID, Partition: index}
		if p.Leader >= 0 {
			return
		}
		seen[ref] = true
		e := a.elections[ref]
		if e == nil || e.epoch != p.LeaderEpoch {
			e = &election{epoch: p.LeaderEpoch, metaIndex: a.img.Index, replicasSince: p.ReplicasSince, asked: map[int32]time.Time{},
				votes: map[int32]Vote{}, started: now}
			a.elections[ref] = e
		}
		if e.replicasSince != p.ReplicasSince {
			e.replicasSince, e.metaIndex = p.ReplicasSince, a.img.Index // asked once its node has this image
			for n := range e.votes {
				if !slices.Contains(p.Replicas, n) {
					delete(e.votes, n)
					delete(e.asked, n)
				}
			}
		}
		if it, ok := a.tally(ref, p, e, now); ok {
			elect = append(elect, it)
			e.proposed = now
			return
		}
		for _, n := range p.Hosts() {
			if _, voted := e.votes[n]; voted || !a.img.Live(n) {
				continue
			}
			if at, asked := e.asked[n]; asked && now.Sub(at) < a.cfg.VoteRetry {
				continue
			}
			e.asked[n] = now
			eff.vote(n, e.metaIndex, EpochRef{PartitionRef: ref, Epoch: e.epoch})
		}
	})
	for ref := range a.elections {
		if !seen[ref] {
			delete(a.elections, ref)
			delete(a.hints, ref)
		}
	}
	if len(elect) > 0 {
		eff.propose(&Command{Op: OpElect, Elect: &Elect{Items: elect}})
	}
}

// tally decides an election if its votes allow: a majority of the replicas has voted OK, and
// either every live replica (of a reassignment's target too) has voted or the grace period has
// passed. A reassignment's target set is not needed (docs/cluster.md §4.7): every commit needs
// a quorum of Replicas until the move finishes, so a majority of them holds every committed
// batch and fences the old epoch, as Kafka elects from the old ISR during a move. Without a
// majority, an unclean election (p.Unclean) elects the most up-to-date live voter all the
// same, and the live voters become the replicas.
func (a *Active) tally(ref PartitionRef, p *Partition, e *election, now time.Time) (ElectItem, bool) {
	if !e.proposed.IsZero() && now.Sub(e.proposed) < a.cfg.VoteRetry {
		return ElectItem{}, false // proposed; wait for it to apply
	}
	ok := func(n int32) bool { v, has := e.votes[n]; return has && v.OK && a.img.Live(n) }
	count := 0
	for _, n := range p.Replicas {
		if ok(n) {
			count++
		}
	}
	unclean := count < len(p.Replicas)/2+1
	if unclean && !p.Unclean {
		return ElectItem{}, false
	}
	hosts := p.Hosts()
	all := true
	for _, n := range hosts {
		if _, voted := e.votes[n]; !voted && a.img.Live(n) {
			all = false
		}
	}
	if !all && now.Sub(e.started) < a.cfg.VoteGrace {
		return ElectItem{}, false
	}
	// Ties go by Kafka's replica list (during a move: the target, then the replicas leaving).
	order := p.KafkaReplicas()
	leader := ChooseLeader(order, e.votes, a.hints[ref], p.Preferred(), ok)
	if leader < 0 {
		return ElectItem{}, false
	}
	if a.shuttingDown(leader) {
		// Another replica as up to date is as safe a choice, and keeps its leadership.
		alt := ChooseLeader(order, e.votes, a.hints[ref], p.Preferred(), func(n int32) bool { return ok(n) && !a.shuttingDown(n) })
		if v, w := e.votes[alt], e.votes[leader]; alt >= 0 && v.LastEpoch == w.LastEpoch && v.LogEnd == w.LogEnd {
			leader = alt
		}
	}
	it := ElectItem{PartitionRef: ref, Epoch: e.epoch, Leader: leader}
	if unclean { // asked for: the live replicas that voted carry on as the replica set
		it.Replicas = slices.DeleteFunc(hosts, func(n int32) bool { return !ok(n) })
	}
	return it, true
}

// ChooseLeader picks the voter with the most up-to-date log — the highest (LastEpoch, LogEnd),
// Raft's rule — preferring hint, then preferred, then the first in hosts (the replica list)
// among equals, as Kafka's PartitionChangeBuilder takes the first valid replica in list order:
// an operator who orders replicas (by rack, say) decides where leadership goes on failover.
// eligible says which voters may lead. It returns -1 if none may.
func ChooseLeader(hosts []int32, votes map[int32]Vote, hint, preferred int32, eligible func(int32) bool) int32 {
	best := int32(-1)
	var bv Vote
	rank := func(n int32) int {
		switch n {
		case hint:
			return 0
		case preferred:
			return 1
		}
		return 2
	}
	for _, n := range hosts {
		if !eligible(n) {
			continue
		}
		v := votes[n]
		switch {
		case best < 0,
			v.LastEpoch > bv.LastEpoch,
			v.LastEpoch == bv.LastEpoch && v.LogEnd > bv.LogEnd,
			v.LastEpoch == bv.LastEpoch && v.LogEnd == bv.LogEnd && rank(n) < rank(best):
			best, bv = n, v
		}
	}
	return best
}
