// Package controller is the cluster's metadata quorum: a Raft group (go.etcd.io/raft/v3) whose
// log holds commands (command.go) that every node applies, in the same order, to the same
// metadata image (this file). The Raft leader is the active controller (active.go): it tracks
// node sessions and runs partition elections. Design: docs/cluster.md.
//
// The image and Apply do no I/O: Apply(image, command) is a pure function of its inputs, so a
// log gives the same image on every node, and tests drive it directly.
package controller

import (
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/runnel-dev/runnel/internal/objtopic"
	"github.com/runnel-dev/runnel/internal/security"
)

// TopicID is a topic's 16-byte id (hex in JSON).
type TopicID [16]byte

// MarshalText encodes the id as 32 hex digits.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(id[:])), nil }

// UnmarshalText decodes 32 hex digits.
func (id *TopicID) UnmarshalText(b []byte) error {
	if len(b) != 32 {
		return fmt.Errorf("controller: topic id %q is not 32 hex digits", b)
	}
	_, err := hex.Decode(id[:], b)
	return err
}

func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// Image is the cluster metadata at one point of the controller log. An Image handed out by the
// controller is never modified: readers use it without locks.
type Image struct {
	Index     uint64 `json:"index"` // the last applied log index
	ClusterID string `json:"cluster_id"`
	// NextProducerID: every producer id below it may have been handed out.
	NextProducerID int64 `json:"next_producer_id"`
	// ClusterConfigs are the cluster-wide dynamic broker configs (defaults of topic configs,
	// keyed by their broker config name, as kafka-configs --entity-default sets them).
	ClusterConfigs map[string]string `json:"cluster_configs,omitempty"`
	// GroupConfigs are the groups' configs (Kafka's ConfigResource GROUP: overrides of the
	// group coordinator's defaults), by group; an entry is never modified once in an image.
	GroupConfigs map[string]map[string]string `json:"group_configs,omitempty"`
	// ClientMetrics are the client-metrics subscriptions' configs (Kafka's ConfigResource
	// CLIENT_METRICS, KIP-714), by subscription name; an entry is never modified once in an
	// image.
	ClientMetrics map[string]map[string]string `json:"client_metrics,omitempty"`
	Nodes         map[int32]*Node              `json:"nodes"`
	// Level is the cluster's command level (level.go): commands of a higher level are not
	// proposed.
	Level int `json:"level,omitempty"`
	// LiveIndex is the log index of the latest change of the live nodes: a node's
	// registration (a new process), fencing or unfencing. Object partitions' share-partitions
	// are kept by a node chosen among the live ones (broker.shareOwner), whose writes are
	// fenced by it. An index, not a count: a count would differ between nodes that replayed
	// from snapshots of versions before it; every node applies its own registration, so from
	// then on its image holds the true index.
	LiveIndex uint64            `json:"live_index,omitempty"`
	Topics    map[string]*Topic `json:"topics"`
	// ObjWriters are the writers of object files, by process run id (objects.go).
	ObjWriters map[string]*ObjWriter `json:"obj_writers,omitempty"`
	// ForgottenWriters are the writer runs garbage collection forgot, for ForgottenWriterTTL
	// (objects.go). A *ForgottenWriter is never modified once in an image.
	ForgottenWriters map[string]*ForgottenWriter `json:"forgotten_writers,omitempty"`
	// Users are the SASL users with their SCRAM credentials (security.go). A *User is never
	// modified once in an image: changes replace it.
	Users map[string]*User `json:"users,omitempty"`
	// Tokens are the delegation tokens by id (tokens.go); the map is replaced, never
	// modified, once in an image.
	Tokens map[string]*DelegationToken `json:"tokens,omitempty"`
	// ACLs are the ACL bindings, sorted by security.Compare, without duplicates; the slice is
	// never modified once in an image. ACLVersion is the log index of their last change.
	ACLs       []security.ACL `json:"acls,omitempty"`
	ACLVersion uint64         `json:"acl_version,omitempty"`
	// ClientQuotas are the client quotas, sorted by entity key (quotas.go); the slice is never
	// modified once in an image.
	ClientQuotas []*ClientQuota `json:"client_quotas,omitempty"`
	// Requests are the results of the latest requests of each process run (requests.go); an
	// entry is never modified once in an image: changes replace it.
	Requests map[string]*RunRequests `json:"requests,omitempty"`

	byID     map[TopicID]*Topic           // derived
	objOwned map[*objtopic.Partition]bool // object partitions this image may modify in place
}

// Node is a registered node.
type Node struct {
	ID          int32  `json:"id"`
	KafkaHost   string `json:"kafka_host"`
	KafkaPort   int32  `json:"kafka_port"`
	ClusterAddr string `json:"cluster_addr"`
	Rack        string `json:"rack,omitempty"`
	SpecLogAddr string `json:"speclog_addr,omitempty"` // its SpecLog gRPC address ("" none)
	AdminAddr   string `json:"admin_addr,omitempty"`   // its admin HTTP address ("" none)
	// Listeners are its advertised Kafka listeners (empty: one PLAINTEXT listener at
	// KafkaHost:KafkaPort, as registered by older versions).
	Listeners []security.Endpoint `json:"listeners,omitempty"`
	// Incarnation is the log index of the node's latest registration: a restarted node is a
	// new incarnation.
	Incarnation uint64 `json:"incarnation"`
	// LossIndex is the log index of the node's latest registration that may have lost writes
	// an earlier incarnation made to its logs: one whose process did not hold every write of
	// the previous registration's run (Register.KeptFrom). 0 in images of older versions: see
	// LossSince.
	LossIndex uint64 `json:"loss_index,omitempty"`
	// Fenced: the node missed its session or its process is gone; it leads nothing and is not
	// elected until it heartbeats again.
	Fenced bool `json:"fenced"`
	// Configs are this node's dynamic broker configs (kafka-configs --entity-name <id>).
	Configs map[string]string `json:"configs,omitempty"`
	// Agent: a stateless `runnel agent` process. It serves object topics only: it holds no
	// replica of a replicated partition and coordinates no group or transaction.
	Agent bool `json:"agent,omitempty"`
	// Run is the registered process run's id (the writer id of its object files).
	Run string `json:"run,omitempty"`
	// Level is the command level its registered version applies (level.go).
	Level int `json:"level,omitempty"`
	// ShuttingDown: this incarnation is in controlled shutdown (Kafka's InControlledShutdown,
	// command controlled-shutdown): it is in no ISR but of the partitions it still leads, and
	// no new replica is placed on it. A registration clears it.
	ShuttingDown bool `json:"shutting_down,omitempty"`
}

// LossSince is the log index since which the node holds every write it made to its logs:
// LossIndex, or, for a node registered by an older version, its latest registration.
func (n *Node) LossSince() uint64 {
	if n.LossIndex == 0 {
		return n.Incarnation
	}
	return n.LossIndex
}

// Topic is a topic's metadata.
type Topic struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Configs    map[string]string `json:"configs,omitempty"`
	Partitions []*Partition      `json:"partitions"`
	// Objects is an object-storage topic's partition state, one per partition (nil for a
	// topic of replicated logs). See objects.go.
	Objects []*objtopic.Partition `json:"objects,omitempty"`
}

// Partition is one partition's replicas and leadership.
type Partition struct {
	// Replicas, the preferred leader first.
	Replicas []int32 `json:"replicas"`
	// Target is the replica set a reassignment moves to (nil: none). While set, the partition
	// is hosted by Replicas ∪ Target; the target set first catches up, then commits along
	// (joint consensus; docs/cluster.md §4.7).
	Target []int32 `json:"target,omitempty"`
	// TargetSynced: the leader of this epoch reported that a quorum of Target holds every
	// committed batch and commits along, so the move may finish.
	TargetSynced bool `json:"target_synced,omitempty"`
	// Unclean: an unclean election was asked for (ElectLeaders of type unclean): the next
	// election may elect without a majority; the replicas that voted become the replica set,
	// moving back to the set it had (docs/cluster.md §4.5). Cleared by the next election.
	Unclean bool  `json:"unclean,omitempty"`
	Leader  int32 `json:"leader"` // -1: no leader (an election is due)
	// LeaderEpoch is bumped by every command that takes the leader away; the elected leader
	// leads in the epoch its election was for.
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr"`
	// PartitionEpoch is bumped by every change of the partition's replicas, ISR or leader.
	PartitionEpoch int32 `json:"partition_epoch"`
	// EpochStarts holds the log index of the command that began each of the partition's
	// latest leader epochs (oldest first, at most maxEpochStarts; none recorded by older
	// versions), and ReplicasSince the index of the command that last set its replicas, target
	// or unclean flag (0: not recorded). A partition leader vouches for a transaction that began
	// under an earlier leader when no replica registered anew since its epoch began
	// (docs/transactions.md §3.3).
	EpochStarts   []EpochStart `json:"epoch_starts,omitempty"`
	ReplicasSince uint64       `json:"replicas_since,omitempty"`
}

// EpochStart is the log index of the command that began a leader epoch.
type EpochStart struct {
	Epoch int32  `json:"epoch"`
	Index uint64 `json:"index"`
}

// maxEpochStarts bounds Partition.EpochStarts: a transaction lives seconds, not through many
// leader epochs of one partition.
const maxEpochStarts = 8

// EpochStartIndex returns the log index of the command that began leader epoch e, if recorded.
func (p *Partition) EpochStartIndex(e int32) (uint64, bool) {
	for _, s := range p.EpochStarts {
		if s.Epoch == e {
			return s.Index, s.Index > 0
		}
	}
	return 0, false
}

// noteEpochStart records that the partition's current leader epoch began at index.
func (p *Partition) noteEpochStart(index uint64) {
	starts := append(slices.Clone(p.EpochStarts), EpochStart{Epoch: p.LeaderEpoch, Index: index})
	if len(starts) > maxEpochStarts {
		starts = starts[len(starts)-maxEpochStarts:]
	}
	p.EpochStarts = starts
}

// Hosts returns the nodes that hold a replica: Replicas, plus Target during a reassignment.
// The caller owns the result.
func (p *Partition) Hosts() []int32 {
	out := slices.Clone(p.Replicas)
	for _, n := range p.Target {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// KafkaReplicas is the replica list Kafka shows clients for the partition (Metadata,
// DescribeTopicPartitions, ListPartitionReassignments): Replicas, or during a reassignment the
// target followed by the replicas leaving, by ascending id (Kafka's
// PartitionReassignmentReplicas: its removing set is a TreeSet). The caller owns the result.
func (p *Partition) KafkaReplicas() []int32 {
	if p.Target == nil {
		return slices.Clone(p.Replicas)
	}
	return append(slices.Clone(p.Target), p.Leaving()...)
}

// Leaving returns the replicas a reassignment removes, ascending (none without one). The
// caller owns the result.
func (p *Partition) Leaving() []int32 {
	if p.Target == nil {
		return nil
	}
	out := slices.DeleteFunc(slices.Clone(p.Replicas), func(n int32) bool { return slices.Contains(p.Target, n) })
	slices.Sort(out)
	return out
}

// Joining returns the replicas a reassignment adds, ascending (none without one). The caller
// owns the result.
func (p *Partition) Joining() []int32 {
	out := slices.DeleteFunc(slices.Clone(p.Target), func(n int32) bool { return slices.Contains(p.Replicas, n) })
	slices.Sort(out)
	return out
}

// CommitSets returns the replica sets whose quorums commits need: Replicas, and Target during a
// reassignment (once it has caught up: docs/cluster.md §4.7).
func (p *Partition) CommitSets() [][]int32 {
	if p.Target == nil {
		return [][]int32{p.Replicas}
	}
	return [][]int32{p.Replicas, p.Target}
}

// Preferred is the preferred leader: the first of Replicas (of Target during a reassignment).
func (p *Partition) Preferred() int32 {
	if len(p.Target) > 0 {
		return p.Target[0]
	}
	if len(p.Replicas) > 0 {
		return p.Replicas[0]
	}
	return -1
}

func (p *Partition) clone() *Partition {
	c := *p
	c.Replicas, c.Target, c.ISR = slices.Clone(p.Replicas), slices.Clone(p.Target), slices.Clone(p.ISR)
	return &c
}

// NewImage returns the empty image.
func NewImage() *Image {
	return &Image{Nodes: map[int32]*Node{}, Topics: map[string]*Topic{}, byID: map[TopicID]*Topic{}}
}

// Clone returns a deep copy, except for object partitions, which both images share from now:
// the next change of one in im copies it first.
func (im *Image) Clone() *Image {
	c := *im
	im.objOwned, c.objOwned = nil, nil
	c.ObjWriters = cloneWriters(im.ObjWriters)
	c.ForgottenWriters = maps.Clone(im.ForgottenWriters)
	c.ClusterConfigs = maps.Clone(im.ClusterConfigs)
	c.GroupConfigs = maps.Clone(im.GroupConfigs)
	c.ClientMetrics = maps.Clone(im.ClientMetrics)
	c.Users = maps.Clone(im.Users)
	c.Requests = maps.Clone(im.Requests)
	c.Nodes = make(map[int32]*Node, len(im.Nodes))
	for id, n := range im.Nodes {
		nc := *n
		nc.Configs = maps.Clone(n.Configs)
		c.Nodes[id] = &nc
	}
	c.Topics = make(map[string]*Topic, len(im.Topics))
	c.byID = make(map[TopicID]*Topic, len(im.Topics))
	for name, t := range im.Topics {
		tc := *t
		tc.Configs = maps.Clone(t.Configs)
		tc.Partitions = make([]*Partition, len(t.Partitions))
		for i, p := range t.Partitions {
			tc.Partitions[i] = p.clone()
		}
		tc.Objects = slices.Clone(t.Objects)
		c.Topics[name] = &tc
		c.byID[tc.ID] = &tc
	}
	return &c
}

// reindex rebuilds the derived indexes (after decoding a snapshot).
func (im *Image) reindex() {
	if im.Nodes == nil {
		im.Nodes = map[int32]*Node{}
	}
	if im.Topics == nil {
		im.Topics = map[string]*Topic{}
	}
	im.byID = make(map[TopicID]*Topic, len(im.Topics))
	for _, t := range im.Topics {
		im.byID[t.ID] = t
	}
}

// TopicByID returns a topic by id.
func (im *Image) TopicByID(id TopicID) (*Topic, bool) {
	t, ok := im.byID[id]
	return t, ok
}

// Partition returns a partition by topic id and index.
func (im *Image) Partition(id TopicID, index int32) (*Topic, *Partition, bool) {
	t, ok := im.byID[id]
	if !ok || index < 0 || int(index) >= len(t.Partitions) {
		return nil, nil, false
	}
	return t, t.Partitions[index], true
}

// Live reports whether a node is registered and not fenced.
func (im *Image) Live(id int32) bool {
	n, ok := im.Nodes[id]
	return ok && !n.Fenced
}

// ShutdownTarget is the replica a partition's leadership moves to when its leader stops (a
// controlled shutdown): a live, in-sync replica other than the leader and not one avoid names
// (nil: none), the preferred replica first, else the first in replica order; -1 if there is
// none (the partition stays with its leader until it is gone).
func (im *Image) ShutdownTarget(p *Partition, avoid func(int32) bool) int32 {
	ok := func(n int32) bool {
		return n != p.Leader && im.Live(n) && slices.Contains(p.ISR, n) && (avoid == nil || !avoid(n))
	}
	if pref := p.Preferred(); ok(pref) {
		return pref
	}
	for _, n := range p.Hosts() {
		if ok(n) {
			return n
		}
	}
	return -1
}

// MajorityLive reports whether a majority of a partition's replicas are live: enough to elect
// a leader and commit.
func (im *Image) MajorityLive(p *Partition) bool {
	live := 0
	for _, n := range p.Replicas {
		if im.Live(n) {
			live++
		}
	}
	return live >= len(p.Replicas)/2+1
}

// LiveNodes returns the ids of the registered, unfenced nodes, ascending.
func (im *Image) LiveNodes() []int32 {
	var out []int32
	for id, n := range im.Nodes {
		if !n.Fenced {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// ObjectNodes returns the nodes that take object partitions' Metadata leaderships and own
// their share-partitions: the live nodes, less those in controlled shutdown while another is
// not (since LevelShutdownMovesOwners, which moves LiveIndex with the shutdown). Ascending.
func (im *Image) ObjectNodes() []int32 {
	live := im.LiveNodes()
	if im.Level < LevelShutdownMovesOwners {
		return live
	}
	if up := slices.DeleteFunc(slices.Clone(live), im.stopping); len(up) > 0 {
		return up
	}
	return live
}

// PlacementNodes returns the nodes new replicas are placed on (CreateTopics, CreatePartitions):
// the storage nodes not in controlled shutdown, as Kafka's usable brokers. Ascending.
func (im *Image) PlacementNodes() []int32 {
	return slices.DeleteFunc(im.StorageNodes(), func(id int32) bool { return im.Nodes[id].ShuttingDown })
}

// FencedStorageNodes returns the registered nodes that may hold replicas (not agents) but are
// fenced (stopped, or their session expired), ascending: Kafka's placer takes them once the
// unfenced ones run out (StripedReplicaPlacer), never as a partition's first replica.
func (im *Image) FencedStorageNodes() []int32 {
	var out []int32
	for id, n := range im.Nodes {
		if n.Fenced && !n.Agent {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// StorageNodes returns the ids of the live nodes that may hold replicas (not agents), ascending.
func (im *Image) StorageNodes() []int32 {
	var out []int32
	for _, id := range im.LiveNodes() {
		if !im.Nodes[id].Agent {
			out = append(out, id)
		}
	}
	return out
}

// NodeIDs returns every registered node's id, ascending.
func (im *Image) NodeIDs() []int32 {
	out := slices.Collect(maps.Keys(im.Nodes))
	slices.Sort(out)
	return out
}

// TopicNames returns the topic names, sorted.
func (im *Image) TopicNames() []string {
	out := slices.Collect(maps.Keys(im.Topics))
	sort.Strings(out)
	return out
}

// PartitionRef names a partition by topic id.
type PartitionRef struct {
	Topic     TopicID `json:"topic"`
	Partition int32   `json:"partition"`
}

func (r PartitionRef) String() string { return fmt.Sprintf("%s[%d]", r.Topic, r.Partition) }

// EachPartition calls fn for every replicated partition (not those of object topics), in topic
// name order.
func (im *Image) EachPartition(fn func(t *Topic, index int32, p *Partition)) {
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		if t.IsObject() {
			continue
		}
		for i, p := range t.Partitions {
			fn(t, int32(i), p)
		}
	}
}
