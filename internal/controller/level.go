package controller

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Command levels: Kafka's metadata.version, finalized without an operator (docs/cluster.md
// §3.2). Every node applies the controller's log itself, so a command whose meaning a version
// changed (or that an older version does not know, and ignores) must not be proposed while a
// node of an older version may apply it: their images would differ from then on. Each node
// registers and heartbeats with the level its code applies (none from versions before levels:
// 0); the active controller raises the cluster's level (Image.Level) once every registered node
// is known to apply it and every Raft member is registered. A registration below the cluster's
// level is refused, and a node that meets a level above its own stops. The level is never
// lowered.
const (
	// Level is the level this version applies.
	Level = 14
	// LevelForgottenWriters (1): forget-writer keeps what the run committed (ForgetWriter.NowMs),
	// and expire-producers forgets object partitions' idle producers.
	LevelForgottenWriters = 1
	// LevelUnregisterNode (2): unregister-node forgets a serve node taken out of service
	// (unregister.go). Below it, the command names the nodes known to apply it.
	LevelUnregisterNode = 2
	// LevelReassignHosts (3): a reassignment to a new target (not a cancel, which always did)
	// drops a leader that is not among the partition's hosts any more, and keeps in the ISR only
	// hosts. Below it the leader stayed, though its node deleted its copy, and the partition was
	// offline until that node was fenced.
	LevelReassignHosts = 3
	// LevelPartitionCount (4): create-partitions names the partition count its assignments
	// extend (CreatePartitions.From) and is refused if the topic has another by then. Below
	// it, two CreatePartitions to the same count, validated against the same image, both
	// added their partitions.
	LevelPartitionCount = 4
	// LevelISRPartitionEpoch (4): a set-isr report names the partition epoch the leader saw
	// (ISRItem.PartitionEpoch) and is skipped if the partition has moved on, as Kafka's
	// AlterPartition. Below it, a late report of the same leader epoch could undo a newer
	// ISR, or mark a reassignment cancelled and asked again synced from the old move's state.
	LevelISRPartitionEpoch = 4
	// LevelObjectEpochStart (4): an object partition takes an idempotent batch that starts its
	// epoch after a later batch of the epoch was committed first (objtopic.Partition's
	// EpochStartFollows). Below it, it was answered OUT_OF_ORDER_SEQUENCE_NUMBER.
	LevelObjectEpochStart = 4
	// LevelObjectEpochs (5): an object partition keeps an idempotent producer's committed
	// sequence ranges of its previous epoch, so a lazy batch journaled twice (both copies
	// acknowledged) is stored once also when the producer's next epoch was committed between
	// the two copies (objtopic.Partition's KeepPrevEpoch; below it the second copy was stored
	// again); and a batch of an epoch a transaction marker began, ahead of that epoch's
	// sequence 0, is refused as ahead (retriable), as when a batch began the epoch
	// (MarkerEpochAhead; below it, OUT_OF_ORDER_SEQUENCE_NUMBER).
	LevelObjectEpochs = 5
	// LevelReplaceBetween (6): replace-extents also checks the extents between its first and
	// last (ReplaceExtents.Between). Below it, a merge planned over a run whose middle extent a
	// compaction pass rewrote meanwhile was applied, and the records compaction had removed
	// came back.
	LevelReplaceBetween = 6
	// LevelAgentRequests (7): unregister (an expired agent's) forgets the request answers of
	// the agent's run, as unregister-node does a serve node's. Below it they stayed in the
	// image and its snapshots for ever: a new run at every agent start, up to 256 answers each.
	LevelAgentRequests = 7
	// LevelObjectReassign (7): a reassignment of an object partition (which has no replicas)
	// is refused. Below it, it was recorded and never finished (the active controller's moves
	// skip object partitions): listed for ever, and its target node could not be unregistered.
	LevelObjectReassign = 7
	// LevelObjectPrevCopies (7): an object partition adds a batch of an idempotent producer's
	// previous epoch, accepted after the next epoch began (a late lazy copy), to that epoch's
	// kept ranges (objtopic.Partition's TrackPrevEpoch): a second late copy is a duplicate.
	// Below it, both copies were stored.
	LevelObjectPrevCopies = 7
	// LevelReorderAtOnce (8): a reassignment whose target holds the same replicas in another
	// order takes effect at once (the new order, whose first is the preferred leader), as
	// Kafka's; with a move in progress, it ends the move. Below it, it ran as a move, finished
	// once the same replicas were reported in sync.
	LevelReorderAtOnce = 8
	// LevelControlledShutdown (8): controlled-shutdown marks a stopping node (Node.ShuttingDown,
	// Kafka's InControlledShutdown) and takes it out of the ISR of every partition it follows;
	// set-isr keeps such a node out of the ISR (Kafka's AlterPartition refuses it as an
	// ineligible replica), and a new partition's first leader is not one. Below it, the op is
	// not proposed (older versions ignore it).
	LevelControlledShutdown = 8
	// LevelClientMetrics (9): set-client-metrics keeps a client-metrics subscription's configs
	// (Image.ClientMetrics, Kafka's ConfigResource CLIENT_METRICS of KIP-714). Below it, the op
	// is not proposed (older versions ignore it) and is refused if applied.
	LevelClientMetrics = 9
	// LevelNewPartitionLiveISR (10): a new partition's ISR is its live replicas not in
	// controlled shutdown (Kafka's active replicas), all of them if none is. Below it the ISR
	// also held fenced replicas (which placement may choose, as Kafka's StripedReplicaPlacer)
	// until the leader's first report.
	LevelNewPartitionLiveISR = 10
	// LevelChunkedSnapshots (11): a controller snapshot message larger than a chunk travels in
	// chunks (raftlog.ChunkSender, transport kind 4) that every node puts back together. Below
	// it, a snapshot goes in one frame, which older versions take only up to 64 MiB.
	LevelChunkedSnapshots = 11
	// LevelElectKeepsISR (12): a clean election keeps the ISR's other live members not in
	// controlled shutdown, as Kafka's PartitionChangeBuilder keeps the ISR over an election
	// (the new leader counts them in sync while they join its epoch). Below it the ISR was the
	// new leader alone until its first report, and Metadata showed the partition
	// under-replicated for that while.
	LevelElectKeepsISR = 12
	// LevelISRNotFenced (13): set-isr drops fenced followers, as Kafka's AlterPartition refuses
	// them (ineligibleReplicasForIsr). Below it a fenced follower whose process hung with its
	// connections up (SIGSTOP, a long pause) was put back by its leader's next report: it
	// stayed in the ISR of idle partitions, and acks=all waited on it instead of refusing.
	LevelISRNotFenced = 13
	// LevelTwoPhaseCommitACLs (13): create-acls takes bindings of Kafka 4's TWO_PHASE_COMMIT
	// operation (15), which older versions drop as invalid.
	LevelTwoPhaseCommitACLs = 13
	// LevelShutdownMovesOwners (14): controlled-shutdown moves the live nodes' index
	// (Image.LiveIndex), and a node in controlled shutdown is no object partition's Metadata
	// leader nor share-partition owner while another live node is not stopping
	// (Image.ObjectNodes). Below it, a stopping node kept them until it was fenced: clients
	// that found its port closed were sent back to it by every other node's Metadata.
	LevelShutdownMovesOwners = 14
)

// OpFinalizeLevel raises the cluster's command level.
const OpFinalizeLevel = "finalize-level"

// LevelFeature is the command level's name among Kafka's features: ApiVersions reports it,
// UpdateFeatures raises it (kafka-features describe, kafka-features upgrade).
const LevelFeature = "runnel.command.level"

// AutoLevelConfig is the cluster-wide broker config that, "false", stops the active controller
// raising the level by itself, as Kafka waits for an operator's kafka-features upgrade: a
// rolling upgrade stays reversible until an operator raises the level (FinalizeTo).
const AutoLevelConfig = "runnel.command.level.auto"

// FinalizeLevel raises Image.Level to Level. Nodes are the registered nodes, with their
// incarnations, that the active controller knew to apply it: it is applied only if they are
// exactly the image's nodes then (a node registered or re-registered since, maybe by an older
// version, cancels it), and those nodes' levels are raised with it. The check reads nothing
// but node ids and incarnations, which every version keeps in its snapshots, so every replica
// decides the same (a node's level is not kept by older versions).
type FinalizeLevel struct {
	Level int              `json:"level"`
	Nodes map[int32]uint64 `json:"nodes"`
}

// ErrLevel refuses the registration of a node whose version applies less than the cluster's
// command level.
var ErrLevel = errors.New("controller: the node's version is older than the cluster's command level")

func applyFinalizeLevel(im *Image, index uint64, c *FinalizeLevel) {
	if c.Level <= im.Level || len(c.Nodes) == 0 || len(c.Nodes) != len(im.Nodes) {
		return
	}
	for id, n := range im.Nodes {
		if inc, ok := c.Nodes[id]; !ok || inc != n.Incarnation {
			return
		}
	}
	from := im.Level
	im.Level = c.Level
	for _, n := range im.Nodes {
		n.Level = max(n.Level, c.Level)
	}
	// Crossing LevelShutdownMovesOwners with a node already stopping moves its object partitions'
	// share owners (ObjectNodes leaves it out from now on): the owners' epoch moves with them.
	if from < LevelShutdownMovesOwners && c.Level >= LevelShutdownMovesOwners {
		for _, n := range im.Nodes {
			if n.ShuttingDown && !n.Fenced {
				im.LiveIndex = index
				break
			}
		}
	}
}

// levelAbove refuses an image at a command level above this version's: a newer version raised
// it, and this one would apply its entries by other rules.
func levelAbove(im *Image) error {
	if im.Level > Level {
		return fmt.Errorf("%w: the metadata is at command level %d, this version applies %d", ErrLevel, im.Level, Level)
	}
	return nil
}

// CheckLevel refuses a registration below the cluster's level (applying it does, and the active
// controller asks first, so that a refused node's retries add nothing to the log).
func CheckLevel(im *Image, r *Register) error {
	if r.Level < im.Level {
		return fmt.Errorf("%w: node %d applies level %d, the cluster is at level %d; run this version or a newer one on it",
			ErrLevel, r.Node, r.Level, im.Level)
	}
	return nil
}

// reportedLevel is the level a node's heartbeats report for one incarnation.
type reportedLevel struct {
	incarnation uint64
	level       int
}

// ReportLevel records the command level a node's heartbeat reports for its incarnation: a node
// registered through an active controller of an older version is in the image at level 0.
func (a *Active) ReportLevel(node int32, incarnation uint64, level int) {
	if a.img.Level >= Level || a.img.Nodes[node] == nil {
		return // nothing left to raise, or a node the image does not have
	}
	if a.levels == nil {
		a.levels = map[int32]reportedLevel{}
	}
	a.levels[node] = reportedLevel{incarnation, level}
}

// SetMembers tells the active controller the controller's Raft voters and learners: one that
// is not registered (a voter not started yet, maybe as an older version; a learner whose
// removal is pending) keeps the level where it is, since it applies the log too.
func (a *Active) SetMembers(members []int32) { a.members = members }

// nodeLevel is the level node's current incarnation is known to apply.
func (a *Active) nodeLevel(id int32, n *Node) int {
	lvl := n.Level
	if r, ok := a.levels[id]; ok && r.incarnation == n.Incarnation {
		lvl = max(lvl, r.level)
	}
	return lvl
}

// finalizeLevel proposes raising the cluster's level once every registered node is known to
// apply a higher one (at most this version's: the active controller proposes nothing it
// cannot apply) and every Raft member is registered, asking again after VoteRetry while the image
// does not have it. A registered node that never returns (a serve node taken out of service
// stays registered) keeps the level where it is.
func (a *Active) finalizeLevel(now time.Time, eff *Effects) {
	if a.img.Level >= Level || a.img.ClusterConfigs[AutoLevelConfig] == "false" || now.Sub(a.levelAsked) < a.cfg.VoteRetry {
		return
	}
	if c, _, _ := a.finalizeCommand(Level); c != nil && c.FinalizeLevel.Level > a.img.Level {
		a.levelAsked = now
		eff.propose(c)
	}
}

// levelCensus is what a command proposed below a level needs to know of the nodes that apply
// the controller's log: the registered ones with their incarnations, the lowest level one of
// them is known to apply (and which node, the lowest id among equals; MaxInt with none), and a
// Raft member of the controller that is not registered (-1: none).
type levelCensus struct {
	nodes        map[int32]uint64
	lowest       int
	lowNode      int32
	unregistered int32
}

// census takes the census of every node but except (-1: none left out).
func (a *Active) census(except int32) levelCensus {
	c := levelCensus{nodes: make(map[int32]uint64, len(a.img.Nodes)), lowest: math.MaxInt, lowNode: -1, unregistered: -1}
	for _, m := range a.members {
		if m != except && a.img.Nodes[m] == nil {
			c.unregistered = m
			break
		}
	}
	for _, id := range a.img.NodeIDs() {
		if id == except {
			continue
		}
		n := a.img.Nodes[id]
		if lvl := a.nodeLevel(id, n); lvl < c.lowest {
			c.lowest, c.lowNode = lvl, id
		}
		c.nodes[id] = n.Incarnation
	}
	return c
}

// finalizeCommand returns the finalize-level that raises the level as far as every registered
// node is known to apply, at most to max, with the census it counted, or why there is none: no
// node registered, or a Raft member not registered (the reason names it).
func (a *Active) finalizeCommand(max int) (*Command, levelCensus, error) {
	c := a.census(-1)
	if len(c.nodes) == 0 {
		return nil, c, errors.New("no node is registered")
	}
	if c.unregistered >= 0 {
		return nil, c, fmt.Errorf("controller member %d is not registered", c.unregistered)
	}
	return &Command{Op: OpFinalizeLevel, FinalizeLevel: &FinalizeLevel{Level: min(max, c.lowest), Nodes: c.nodes}}, c, nil
}

// ErrLevelChange refuses an operator's level change: lower than the cluster's, above what this
// version applies, or above what a node applies.
var ErrLevelChange = errors.New("controller: the command level cannot be set so")

// FinalizeTo makes the command that raises the cluster's level to level, asked by an operator
// (UpdateFeatures), or nil if the cluster is there already. It is refused below the cluster's
// level (a level is never lowered), above this version's, and while a registered node is not
// known to apply it or a Raft member is not registered; the command is applied only if the
// registered nodes are still those it names (else the caller asks again).
func (a *Active) FinalizeTo(level int) (*Command, error) {
	switch {
	case level < a.img.Level:
		return nil, fmt.Errorf("%w: the cluster is at command level %d, and a level is never lowered (the log may hold commands of it)", ErrLevelChange, a.img.Level)
	case level == a.img.Level:
		return nil, nil
	case level > Level:
		return nil, fmt.Errorf("%w: the active controller's version applies command level %d at most", ErrLevelChange, Level)
	}
	c, census, err := a.finalizeCommand(level)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLevelChange, err)
	}
	if census.lowest < level {
		return nil, fmt.Errorf("%w: node %d applies command level %d; run this version or a newer one on it (or unregister it)",
			ErrLevelChange, census.lowNode, census.lowest)
	}
	return c, nil
}

// NodesLevel is the lowest command level of the registered nodes as the image has them (0
// with none; a node registered through an older version's controller counts as 0 here until
// a finalize-level raises it).
func (im *Image) NodesLevel() int {
	lvl := -1
	for _, n := range im.Nodes {
		if lvl < 0 || n.Level < lvl {
			lvl = n.Level
		}
	}
	return max(lvl, 0)
}
