// Package group is the consumer group coordinator of the classic group protocol (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup) and the committed offsets of every group, as an I/O-free
// state machine (STYLE §6): requests and clock ticks go in, responses and records come out.
//
// The driver (internal/broker) owns the Coordinator behind one mutex. For each call it appends
// the returned Records to the internal compacted topic __consumer_offsets, waits until they are
// durable, and only then delivers the returned Replies. Some replies answer requests made
// earlier: a JoinGroup waits until the rebalance completes and a follower's SyncGroup until the
// leader's; each such request carries a RequestID the driver chose, and its Reply names it.
// Timeouts (session, rebalance, initial rebalance delay, sync) are checked by Tick, which the
// driver calls often with the current time. Tests call everything with a fake clock.
//
// Group state follows Kafka's GroupCoordinator: Empty → PreparingRebalance (members join; it
// completes when every known member has rejoined, or at the rebalance timeout, or — for a group
// that was Empty — after group.initial.rebalance.delay.ms, extended while members keep coming) →
// CompletingRebalance (the leader computes the assignment in the client and sends it with its
// SyncGroup) → Stable. Static members (group.instance.id, KIP-345) keep their identity across
// restarts: a rejoin with the same instance id replaces the old member id (fencing it with
// FENCED_INSTANCE_ID) without a rebalance when nothing changed.
//
// The records are Kafka's own (kmsg.OffsetCommitKey/Value, kmsg.GroupMetadataKey/Value), so the
// topic reads like Kafka's; Load replays them at startup.
package group

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state.
type State int8

// Group states, as Kafka names them.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s State) String() string { return stateNames[s] }

// Config holds the coordinator's settings, Kafka's broker configs of the same meaning.
type Config struct {
	MinSessionTimeout     time.Duration // group.min.session.timeout.ms (6 s)
	MaxSessionTimeout     time.Duration // group.max.session.timeout.ms (30 min)
	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms (3 s)
	OffsetsRetention      time.Duration // offsets.retention.minutes (7 days)
	MaxMetadataBytes      int           // offset.metadata.max.bytes (4096)
	MaxGroupSize          int           // group.max.size (0: no limit)

	ConsumerSessionTimeout    time.Duration // group.consumer.session.timeout.ms (45 s)
	ConsumerHeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms (5 s)
	// MigrationPolicy is group.consumer.migration.policy (migrate.go): bidirectional (also
	// for ""), upgrade, downgrade or disabled.
	MigrationPolicy string

	StreamsSessionTimeout    time.Duration // group.streams.session.timeout.ms (45 s)
	StreamsHeartbeatInterval time.Duration // group.streams.heartbeat.interval.ms (5 s)
	// StreamsStandbyReplicas is group.streams.num.standby.replicas (0), the default of the
	// group config streams.num.standby.replicas (at most group.streams.max.standby.replicas, 2).
	StreamsStandbyReplicas int
	// StreamsInitialRebalanceDelay is group.streams.initial.rebalance.delay.ms (3 s): how long a
	// group a member joined empty waits for more members before its first assignment.
	StreamsInitialRebalanceDelay time.Duration
	// StreamsAssignmentInterval is group.streams.assignment.interval.ms (1 s, Kafka 4.3): the
	// least time between two computations of a streams group's target.
	StreamsAssignmentInterval time.Duration

	ShareSessionTimeout    time.Duration // group.share.session.timeout.ms (45 s)
	ShareHeartbeatInterval time.Duration // group.share.heartbeat.interval.ms (5 s)
	MaxShareGroupSize      int           // group.share.max.size (200; 0: no limit)
	// ShareRecordLockDuration is group.share.record.lock.duration.ms (30 s): the default of
	// the group config share.record.lock.duration.ms (the shares use it, configs.go).
	ShareRecordLockDuration time.Duration
	// ShareDeliveryCountLimit and SharePartitionMaxRecordLocks are
	// group.share.delivery.count.limit (5) and group.share.partition.max.record.locks (2000),
	// the defaults of the group configs of those names.
	ShareDeliveryCountLimit      int16
	SharePartitionMaxRecordLocks int64

	// Overrides, if set, returns a group's configs (ConfigResource GROUP, configs.go): its
	// overrides of the defaults above. It must not block.
	Overrides func(groupID string) map[string]string
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{MinSessionTimeout: 6 * time.Second, MaxSessionTimeout: 30 * time.Minute,
		InitialRebalanceDelay: 3 * time.Second, OffsetsRetention: 7 * 24 * time.Hour, MaxMetadataBytes: 4096,
		ConsumerSessionTimeout: 45 * time.Second, ConsumerHeartbeatInterval: 5 * time.Second, MigrationPolicy: MigrationBidirectional,
		StreamsSessionTimeout: 45 * time.Second, StreamsHeartbeatInterval: 5 * time.Second, StreamsInitialRebalanceDelay: 3 * time.Second,
		StreamsAssignmentInterval: time.Second,
		ShareSessionTimeout:       45 * time.Second, ShareHeartbeatInterval: 5 * time.Second, MaxShareGroupSize: 200,
		ShareRecordLockDuration: 30 * time.Second, ShareDeliveryCountLimit: 5, SharePartitionMaxRecordLocks: 2000}
}

// RequestID names a request whose reply may come in a later Output.
type RequestID uint64

// Reply is the response to request ID.
type Reply struct {
	ID   RequestID
	Resp kmsg.Response
}

// Record is a record for __consumer_offsets, in the partition of Group. A nil Value is a
// tombstone. The caller owns the slices.
type Record struct {
	Group      string
	Key, Value []byte
}

// Output is what a call produces: records to make durable, then replies to send.
type Output struct {
	Records []Record
	Replies []Reply
}

func (o *Output) reply(id RequestID, resp kmsg.Response) {
	o.Replies = append(o.Replies, Reply{ID: id, Resp: resp})
}

// Protocol is one assignment protocol a member supports, with its metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

// Member is a member of a classic group.
type Member struct {
	ID               string
	InstanceID       string // "" for a dynamic member
	ClientID         string
	ClientHost       string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	Protocols        []Protocol // in the member's order of preference
	Assignment       []byte
	deadline         time.Time // the session expires here (unless a join or sync is pending)
	awaitingJoin     bool
	joinID           RequestID
	joinVersion      int16
	awaitingSync     bool
	syncID           RequestID
	syncVersion      int16
}

func (m *Member) metadata(protocol string) []byte {
	for _, p := range m.Protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *Member) sameProtocols(ps []Protocol) bool {
	return slices.EqualFunc(m.Protocols, ps, func(a, b Protocol) bool { return a.Name == b.Name && string(a.Metadata) == string(b.Metadata) })
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Offset is a committed offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  int64 // unix ms
	// ExpireTime (unix ms, 0: none) is the expiry an OffsetCommit v2-v4 asked for with its
	// retention_time_ms; it replaces offsets.retention.minutes for this offset, as in Kafka.
	ExpireTime int64

	// topicID is the id of the topic the offset was committed to, when the coordinator was
	// told it (Coordinator.TopicID; not kept in the record: zero after a load).
	topicID [16]byte

	// record is the place of the offset's record in the log (Coordinator.records): a
	// transaction's COMMIT keeps the newest record of a partition (txnoffsets.go), as Kafka
	// compares the records' log offsets.
	record uint64
}

// Group is one consumer group: its members (classic protocol) and committed offsets.
type Group struct {
	ID           string
	State        State
	ProtocolType string // "" for a group that only stores offsets
	Protocol     string // selected in the last rebalance
	Generation   int32
	Leader       string
	StateSince   time.Time

	members map[string]*Member
	order   []string          // member ids in join order
	static  map[string]string // instance id → member id
	pending map[string]time.Time

	joinDeadline      time.Time // PreparingRebalance: complete the join here at the latest
	rebalanceDeadline time.Time // the hard limit for an initial delay's extensions
	initialDelay      bool      // the join waits for joinDeadline even if everyone joined
	syncDeadline      time.Time // CompletingRebalance: members that have not synced by then are removed

	offsets map[TopicPartition]Offset

	consumer *consumerState // non-nil for a consumer (KIP-848) group
	share    *shareState    // non-nil for a share (KIP-932) group
	streams  *streamsState  // non-nil for a streams (KIP-1071) group
}

// Type is the group's protocol: TypeClassic, TypeConsumer, TypeShare or TypeStreams.
func (g *Group) Type() string {
	switch {
	case g.consumer != nil:
		return TypeConsumer
	case g.share != nil:
		return TypeShare
	case g.streams != nil:
		return TypeStreams
	}
	return TypeClassic
}

func newGroup(id string, now time.Time) *Group {
	return &Group{ID: id, StateSince: now, members: map[string]*Member{}, static: map[string]string{},
		pending: map[string]time.Time{}, offsets: map[TopicPartition]Offset{}}
}

// Members returns the group's members in join order. The caller must not modify them.
func (g *Group) Members() []*Member {
	out := make([]*Member, 0, len(g.order))
	for _, id := range g.order {
		out = append(out, g.members[id])
	}
	return out
}

// Offsets returns a copy of the group's committed offsets.
func (g *Group) Offsets() map[TopicPartition]Offset {
	out := make(map[TopicPartition]Offset, len(g.offsets))
	for k, v := range g.offsets {
		out[k] = v
	}
	return out
}

func (g *Group) transition(s State, now time.Time) {
	g.State, g.StateSince = s, now
}

// optional is s as a nullable Kafka string: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s", prefix, hex.EncodeToString(b[:]))
}

// Coordinator is the state of every group. It is not safe for concurrent use.
type Coordinator struct {
	cfg     Config
	groups  map[string]*Group
	pending map[int64]map[int16]pendingOffsets // transactional offset commits by producer id and epoch (txnoffsets.go)
	// records counts the offset records written or read back, in log order: Offset.record.
	records uint64
	// PartitionExists reports whether a topic partition exists (OffsetCommit refuses unknown
	// ones, as Kafka does). Nil accepts every partition.
	PartitionExists func(topic string, partition int32) bool
	// TopicID gives a topic's id, for the offsets committed to it (ForgetTopics tells a topic
	// created again under the name by it). Nil: no ids.
	TopicID func(topic string) ([16]byte, bool)
	// Topics lists every topic with its id and partition count, for the server-side assignors
	// of consumer groups. The caller owns the map.
	Topics func() map[string]TopicMeta
	// orphanParts holds share-partition records replayed before their group's record (the log
	// compacted), by group, until that record comes (share.go).
	orphanParts map[string]map[SharePartition]*storedShare
}

// New returns an empty coordinator.
func New(cfg Config) *Coordinator {
	return &Coordinator{cfg: cfg, groups: map[string]*Group{}}
}

// Group returns a group, if it exists. The caller must not modify it.
func (c *Coordinator) Group(id string) (*Group, bool) {
	g, ok := c.groups[id]
	return g, ok
}

// Groups returns every group, sorted by id. The caller must not modify them.
func (c *Coordinator) Groups() []*Group {
	out := make([]*Group, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *Group) int { return strings.Compare(a.ID, b.ID) })
	return out
}
