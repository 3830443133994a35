package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/runnel-dev/runnel/internal/objtopic"
	"github.com/runnel-dev/runnel/internal/security"
)

// A Command is one entry of the controller log, JSON-encoded: {"op": "...", ...}. Only the
// fields of its op are set. ID, when set, lets the node that proposed it find its result.
type Command struct {
	Op string `json:"op"`
	ID uint64 `json:"id,omitempty"` // proposal id: (proposing node << 40) | sequence
	// Req names the request the command carries out, the same in every attempt to propose it:
	// an attempt after one whose answer was lost (a timeout, a leader change) is answered
	// with the first one's result instead of being applied again (requests.go).
	Req *Request `json:"req,omitempty"`

	Bootstrap        *Bootstrap         `json:"bootstrap,omitempty"`
	Register         *Register          `json:"register,omitempty"`
	Fence            *Fence             `json:"fence,omitempty"`
	CreateTopic      *CreateTopic       `json:"create_topic,omitempty"`
	DeleteTopic      *DeleteTopic       `json:"delete_topic,omitempty"`
	CreatePartitions *CreatePartitions  `json:"create_partitions,omitempty"`
	SetTopicConfigs  *SetTopicConfigs   `json:"set_topic_configs,omitempty"`
	SetNodeConfigs   *SetNodeConfigs    `json:"set_node_configs,omitempty"`
	SetGroupConfigs  *SetGroupConfigs   `json:"set_group_configs,omitempty"`
	SetClientMetrics *SetClientMetrics  `json:"set_client_metrics,omitempty"`
	AllocProducerIDs *AllocProducerIDs  `json:"alloc_producer_ids,omitempty"`
	Elect            *Elect             `json:"elect,omitempty"`
	BeginElection    *BeginElection     `json:"begin_election,omitempty"`
	UncleanElection  *BeginElection     `json:"unclean_election,omitempty"`
	SetISR           *SetISR            `json:"set_isr,omitempty"`
	Reassign         *Reassign          `json:"reassign,omitempty"`
	CommitFile       *CommitFile        `json:"commit_file,omitempty"`
	TrimObjects      *TrimObjects       `json:"trim_objects,omitempty"`
	ExpireProducers  *ExpireProducers   `json:"expire_producers,omitempty"`
	ReplaceExtents   *ReplaceExtents    `json:"replace_extents,omitempty"`
	ForgetWriter     *ForgetWriter      `json:"forget_writer,omitempty"`
	ObjectMarker     *ObjectMarker      `json:"object_marker,omitempty"`
	AlterScram       *AlterScram        `json:"alter_scram,omitempty"`
	ACLs             *ACLChange         `json:"acls,omitempty"`
	ClientQuotas     *AlterClientQuotas `json:"client_quotas,omitempty"`
	CreateToken      *DelegationToken   `json:"create_token,omitempty"`
	TokenChange      *TokenChange       `json:"token_change,omitempty"`
	FinalizeLevel    *FinalizeLevel     `json:"finalize_level,omitempty"`
	UnregisterNode   *UnregisterNode    `json:"unregister_node,omitempty"`
}

// The ops.
const (
	OpBootstrap        = "bootstrap"
	OpRegister         = "register"
	OpFence            = "fence"
	OpUnfence          = "unfence"
	OpCreateTopic      = "create-topic"
	OpDeleteTopic      = "delete-topic"
	OpCreatePartitions = "create-partitions"
	OpSetTopicConfigs  = "set-topic-configs"
	OpSetNodeConfigs   = "set-node-configs"
	OpSetGroupConfigs  = "set-group-configs"
	// OpSetClientMetrics sets a client-metrics subscription's configs (level 9).
	OpSetClientMetrics = "set-client-metrics"
	OpAllocProducerIDs = "alloc-producer-ids"
	OpElect            = "elect"
	OpBeginElection    = "begin-election"
	// OpUncleanElection lets the next elections of partitions that have lost a majority of
	// their replicas elect without one (UncleanElection names them; docs/cluster.md §4.5).
	OpUncleanElection = "unclean-election"
	OpSetISR          = "set-isr"
	OpReassign        = "reassign"
	OpFinishReassign  = "finish-reassign"
	// OpUnregister forgets a fenced agent's incarnation (Fence names it): agents are
	// stateless and never come back under the same id.
	OpUnregister = "unregister"
	// OpControlledShutdown marks the incarnation Fence names as stopping and takes it out of
	// the ISRs of the partitions it follows (applyControlledShutdown; level 8).
	OpControlledShutdown = "controlled-shutdown"
	// OpAlterScram adds, replaces and deletes users' SCRAM credentials (security.go).
	OpAlterScram = "alter-scram"
	// OpCreateACLs and OpDeleteACLs add and remove ACL bindings (ACLs names them exactly).
	OpCreateACLs = "create-acls"
	OpDeleteACLs = "delete-acls"
	// OpAlterClientQuotas sets and removes client quota values (quotas.go).
	OpAlterClientQuotas = "alter-client-quotas"
	// OpCreateToken, OpRenewToken, OpExpireToken and OpRemoveTokens keep the delegation tokens
	// (tokens.go).
	OpCreateToken  = "create-token"
	OpRenewToken   = "renew-token"
	OpExpireToken  = "expire-token"
	OpRemoveTokens = "remove-tokens"
)

// Bootstrap starts the cluster: its id and, when a one-node data dir is upgraded, what that
// node had.
type Bootstrap struct {
	ClusterID      string            `json:"cluster_id"`
	NextProducerID int64             `json:"next_producer_id,omitempty"`
	ClusterConfigs map[string]string `json:"cluster_configs,omitempty"`
	// Imported topics, each led by ImportNode in epoch 0, its only replica.
	Topics      []ImportedTopic   `json:"topics,omitempty"`
	ImportNode  int32             `json:"import_node,omitempty"`
	NodeConfigs map[string]string `json:"node_configs,omitempty"` // ImportNode's
}

// ImportedTopic is a topic of an upgraded one-node data dir.
type ImportedTopic struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// Register is a node's (re)registration. Its incarnation is the command's log index.
type Register struct {
	Node        int32  `json:"node"`
	KafkaHost   string `json:"kafka_host"`
	KafkaPort   int32  `json:"kafka_port"`
	ClusterAddr string `json:"cluster_addr"`
	Rack        string `json:"rack,omitempty"`
	// Run is the registering process run's id: object files written by the node's earlier
	// runs are forgotten.
	Run string `json:"run,omitempty"`
	// Agent registers a `runnel agent` (see Node.Agent).
	Agent bool `json:"agent,omitempty"`
	// SpecLogAddr is the node's SpecLog gRPC address ("" none; docs/speclog.md §6).
	SpecLogAddr string `json:"speclog_addr,omitempty"`
	// AdminAddr is the node's admin HTTP address ("" none): the console gathers other nodes'
	// partition state from it.
	AdminAddr string `json:"admin_addr,omitempty"`
	// Listeners are the node's advertised Kafka listeners, by name (docs/security.md §1);
	// empty for a registration of an older version: one PLAINTEXT listener at KafkaHost:KafkaPort.
	Listeners []security.Endpoint `json:"listeners,omitempty"`
	// KeptFrom is the run of the node's previous registration when this process holds every
	// write that run made to the node's logs (a process restart on the same machine boot, or a
	// registration again by the same process, with no log failure since; docs/cluster.md
	// "boot mark"); "" when it may not (a new boot, a failed log, another data dir).
	KeptFrom string `json:"kept_from,omitempty"`
	// KeptAlso are the runs whose writes KeptFrom's run held when it started: when that run
	// never registered (it died first), the node's previous registration may be one of them.
	KeptAlso []string `json:"kept_also,omitempty"`
	// Level is the command level the node's version applies (level.go; 0 from versions
	// before levels).
	Level int `json:"level,omitempty"`
}

// Fence fences (op fence) or unfences (op unfence) one incarnation of a node.
type Fence struct {
	Node        int32  `json:"node"`
	Incarnation uint64 `json:"incarnation"`
}

// CreateTopic creates a topic with explicit replica assignments.
type CreateTopic struct {
	Name        string            `json:"name"`
	ID          TopicID           `json:"id"`
	Configs     map[string]string `json:"configs,omitempty"`
	Assignments [][]int32         `json:"assignments"`
}

// DeleteTopic deletes a topic by id.
type DeleteTopic struct {
	ID TopicID `json:"id"`
}

// CreatePartitions adds partitions (their assignments) to a topic. From, at LevelPartitionCount
// and above, is the partition count the assignments extend: the command is refused
// (ErrPartitionsChanged) if the topic has another count when it applies, as Kafka refuses a
// CreatePartitions to a count the topic has already.
type CreatePartitions struct {
	ID          TopicID   `json:"id"`
	Assignments [][]int32 `json:"assignments"`
	From        *int      `json:"from,omitempty"`
}

// SetTopicConfigs replaces a topic's explicitly set configs. A Conditional change applies only
// if the topic's configs are still Base, those it was computed from (an incremental change
// made on a node whose image may trail, or raced by another): else ErrConfigsChanged, and the
// proposer computes it again.
type SetTopicConfigs struct {
	ID          TopicID           `json:"id"`
	Configs     map[string]string `json:"configs"`
	Conditional bool              `json:"conditional,omitempty"`
	Base        map[string]string `json:"base,omitempty"`
}

// SetNodeConfigs replaces the dynamic broker configs of a node, or (Node -1) the cluster's.
type SetNodeConfigs struct {
	Node    int32             `json:"node"`
	Configs map[string]string `json:"configs"`
}

// SetGroupConfigs replaces a group's configs (none: the group has no overrides left). The
// proposer validated them (group.Config.CheckGroupConfigs). Conditional sets them only if the
// group's configs are still Base (an incremental change computed from them).
type SetGroupConfigs struct {
	Group       string            `json:"group"`
	Configs     map[string]string `json:"configs,omitempty"`
	Conditional bool              `json:"conditional,omitempty"`
	Base        map[string]string `json:"base,omitempty"`
}

// SetClientMetrics replaces a client-metrics subscription's configs (none: the subscription
// is gone), as SetGroupConfigs a group's. The proposer validated them.
type SetClientMetrics struct {
	Name        string            `json:"name"`
	Configs     map[string]string `json:"configs,omitempty"`
	Conditional bool              `json:"conditional,omitempty"`
	Base        map[string]string `json:"base,omitempty"`
}

// AllocProducerIDs reserves Count producer ids; the result is the first.
type AllocProducerIDs struct {
	Node  int32 `json:"node"`
	Count int64 `json:"count"`
}

// Elect names the leaders of partitions whose elections ran.
type Elect struct {
	Items []ElectItem `json:"items"`
}

// ElectItem is one partition's election result. It applies only if the partition is still in
// Epoch without a leader.
type ElectItem struct {
	PartitionRef
	Epoch  int32 `json:"epoch"`
	Leader int32 `json:"leader"`
	// Replicas: an unclean election's new replica set (the live replicas that voted); nil for
	// a clean one.
	Replicas []int32 `json:"replicas,omitempty"`
}

// BeginElection takes the leader away from partitions that are in the given epochs (a transfer,
// a preferred election, a leader's failing disk): epoch + 1, no leader.
type BeginElection struct {
	Items []EpochRef `json:"items"`
}

// EpochRef is a partition in a leader epoch.
type EpochRef struct {
	PartitionRef
	Epoch int32 `json:"epoch"`
}

// SetISR records the in-sync replicas a partition's leader reports for its epoch.
type SetISR struct {
	Items []ISRItem `json:"items"`
}

// ISRItem is one partition's reported ISR. During a reassignment, Target is the target set
// once a quorum of it holds every committed batch and commits along (the move may finish).
// PartitionEpoch is the partition epoch of the image the leader computed it from (nil: sent
// by a version before LevelISRPartitionEpoch); at that level the report is skipped if the
// partition has another by the time it applies (the leader reports again from the newer
// image).
type ISRItem struct {
	PartitionRef
	Epoch          int32   `json:"epoch"`
	ISR            []int32 `json:"isr"`
	Target         []int32 `json:"target,omitempty"`
	PartitionEpoch *int32  `json:"partition_epoch,omitempty"`
}

// Equal reports whether two reports say the same.
func (it ISRItem) Equal(o ISRItem) bool {
	return it.PartitionRef == o.PartitionRef && it.Epoch == o.Epoch && slices.Equal(it.ISR, o.ISR) && slices.Equal(it.Target, o.Target) &&
		(it.PartitionEpoch == nil) == (o.PartitionEpoch == nil) && (it.PartitionEpoch == nil || *it.PartitionEpoch == *o.PartitionEpoch)
}

// Reassign starts (Target set), cancels (Target nil, op reassign) or finishes (op
// finish-reassign) a partition's move to a new replica set.
type Reassign struct {
	PartitionRef
	Target []int32 `json:"target"`
}

// Errors of Apply, returned to whoever proposed the command.
var (
	ErrTopicExists       = errors.New("controller: topic already exists")
	ErrUnknownTopic      = errors.New("controller: unknown topic")
	ErrUnknownNode       = errors.New("controller: unknown node")
	ErrBadAssignment     = errors.New("controller: invalid replica assignment")
	ErrNoReassignment    = errors.New("controller: no reassignment in progress")
	ErrReassignNotSynced = errors.New("controller: target replicas are not all in sync")
	ErrConfigsChanged    = errors.New("controller: the configs changed since the change was computed")
	ErrPartitionsChanged = errors.New("controller: the topic's partition count changed since the change was computed")
)

// Encode returns the command's log entry.
func (c *Command) Encode() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("controller: encoding a %s command: %v", c.Op, err))
	}
	return b
}

// DecodeCommand parses a log entry.
func DecodeCommand(b []byte) (*Command, error) {
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("controller: bad command: %w", err)
	}
	if c.Op == "" {
		return nil, errors.New("controller: command without op")
	}
	return &c, nil
}

// Result is what applying a command produced for its proposer.
type Result struct {
	Err   error
	Value int64 // alloc-producer-ids: the first id; register: the incarnation
	// Commit is a commit-file's answer: per section, per batch meta.
	Commit [][]BatchOutcome
	// AlreadyCommitted: the commit-file's file was committed before, and its answer is forgotten.
	AlreadyCommitted bool
}

// Apply applies the command at log index to im, in place, and returns its result. Every node
// applies the same commands in the same order and gets the same image. A command that no
// longer applies (its epoch has passed, its topic is gone) changes nothing.
func Apply(im *Image, index uint64, c *Command) Result {
	im.Index = index
	if r, ok := im.appliedRequest(c.Req); ok {
		return r
	}
	res := applyCommand(im, index, c)
	im.recordRequest(c.Req, res)
	return res
}

func applyCommand(im *Image, index uint64, c *Command) Result {
	switch c.Op {
	case OpBootstrap:
		if c.Bootstrap != nil && im.ClusterID == "" {
			applyBootstrap(im, c.Bootstrap)
		}
	case OpRegister:
		if c.Register != nil {
			return applyRegister(im, index, c.Register)
		}
	case OpFinalizeLevel:
		if c.FinalizeLevel != nil {
			applyFinalizeLevel(im, index, c.FinalizeLevel)
		}
	case OpUnregisterNode:
		if c.UnregisterNode != nil {
			return Result{Err: applyUnregisterNode(im, c.UnregisterNode)}
		}
	case OpFence, OpUnfence:
		if f := c.Fence; f != nil {
			n, ok := im.Nodes[f.Node]
			if !ok || n.Incarnation != f.Incarnation {
				return Result{}
			}
			if c.Op == OpUnfence {
				if n.Fenced {
					n.Fenced = false
					im.LiveIndex = index
				}
				break
			}
			if !n.Fenced {
				n.Fenced = true
				im.LiveIndex = index
				loseNode(im, f.Node)
			}
		}
	case OpControlledShutdown:
		if f := c.Fence; f != nil && im.Level >= LevelControlledShutdown {
			applyControlledShutdown(im, index, f)
		}
	case OpUnregister:
		if f := c.Fence; f != nil {
			if n, ok := im.Nodes[f.Node]; ok && n.Agent && n.Fenced && n.Incarnation == f.Incarnation {
				if im.Level >= LevelAgentRequests {
					im.forgetRequests(n.Run, "")
				}
				delete(im.Nodes, f.Node)
				dropWriters(im, f.Node, "")
			}
		}
	case OpCreateTopic:
		if c.CreateTopic != nil {
			return Result{Err: applyCreateTopic(im, c.CreateTopic)}
		}
	case OpDeleteTopic:
		if c.DeleteTopic != nil {
			t, ok := im.byID[c.DeleteTopic.ID]
			if !ok {
				return Result{Err: ErrUnknownTopic}
			}
			delete(im.Topics, t.Name)
			delete(im.byID, t.ID)
		}
	case OpCreatePartitions:
		if c.CreatePartitions != nil {
			return Result{Err: applyCreatePartitions(im, c.CreatePartitions)}
		}
	case OpSetTopicConfigs:
		if s := c.SetTopicConfigs; s != nil {
			t, ok := im.byID[s.ID]
			if !ok {
				return Result{Err: ErrUnknownTopic}
			}
			if s.Conditional && !maps.Equal(t.Configs, s.Base) {
				return Result{Err: ErrConfigsChanged}
			}
			storage, had := t.Configs[StorageConfig]
			t.Configs = maps.Clone(s.Configs)
			if had { // fixed at creation
				if t.Configs == nil {
					t.Configs = map[string]string{}
				}
				t.Configs[StorageConfig] = storage
			} else {
				delete(t.Configs, StorageConfig)
			}
		}
	case OpSetNodeConfigs:
		if s := c.SetNodeConfigs; s != nil {
			if s.Node < 0 {
				im.ClusterConfigs = maps.Clone(s.Configs)
				break
			}
			n, ok := im.Nodes[s.Node]
			if !ok {
				return Result{Err: ErrUnknownNode}
			}
			n.Configs = maps.Clone(s.Configs)
		}
	case OpSetGroupConfigs:
		if s := c.SetGroupConfigs; s != nil {
			if s.Conditional && !maps.Equal(im.GroupConfigs[s.Group], s.Base) {
				return Result{Err: ErrConfigsChanged}
			}
			if len(s.Configs) == 0 {
				delete(im.GroupConfigs, s.Group)
				break
			}
			if im.GroupConfigs == nil {
				im.GroupConfigs = map[string]map[string]string{}
			}
			im.GroupConfigs[s.Group] = maps.Clone(s.Configs)
		}
	case OpSetClientMetrics:
		if s := c.SetClientMetrics; s != nil {
			if im.Level < LevelClientMetrics {
				return Result{Err: ErrLevelPending}
			}
			if s.Conditional && !maps.Equal(im.ClientMetrics[s.Name], s.Base) {
				return Result{Err: ErrConfigsChanged}
			}
			if len(s.Configs) == 0 {
				delete(im.ClientMetrics, s.Name)
				break
			}
			if im.ClientMetrics == nil {
				im.ClientMetrics = map[string]map[string]string{}
			}
			im.ClientMetrics[s.Name] = maps.Clone(s.Configs)
		}
	case OpCreateToken:
		if c.CreateToken != nil {
			return applyCreateToken(im, c.CreateToken)
		}
	case OpRenewToken, OpExpireToken:
		if c.TokenChange != nil {
			return applyTokenChange(im, c.TokenChange, c.Op == OpExpireToken)
		}
	case OpRemoveTokens:
		if c.TokenChange != nil {
			applyRemoveTokens(im, c.TokenChange)
		}
	case OpAlterScram:
		if c.AlterScram != nil {
			applyAlterScram(im, c.AlterScram)
		}
	case OpAlterClientQuotas:
		if c.ClientQuotas != nil {
			applyAlterClientQuotas(im, c.ClientQuotas)
		}
	case OpCreateACLs, OpDeleteACLs:
		if c.ACLs != nil {
			applyACLs(im, index, c.Op == OpCreateACLs, c.ACLs.ACLs)
		}
	case OpAllocProducerIDs:
		if a := c.AllocProducerIDs; a != nil && a.Count > 0 {
			first := im.NextProducerID
			im.NextProducerID += a.Count
			return Result{Value: first}
		}
	case OpElect:
		if c.Elect != nil {
			applyElect(im, c.Elect)
		}
	case OpBeginElection:
		if c.BeginElection != nil {
			for _, it := range c.BeginElection.Items {
				if _, p, ok := im.Partition(it.Topic, it.Partition); ok && p.LeaderEpoch == it.Epoch {
					dropLeader(im, p)
				}
			}
		}
	case OpUncleanElection:
		if c.UncleanElection != nil {
			for _, it := range c.UncleanElection.Items {
				if _, p, ok := im.Partition(it.Topic, it.Partition); ok && p.LeaderEpoch == it.Epoch && !im.MajorityLive(p) {
					if p.Leader >= 0 {
						dropLeader(im, p)
					}
					p.Unclean, p.ReplicasSince = true, im.Index
				}
			}
		}
	case OpSetISR:
		if c.SetISR != nil {
			for _, it := range c.SetISR.Items {
				_, p, ok := im.Partition(it.Topic, it.Partition)
				if !ok || p.LeaderEpoch != it.Epoch || p.Leader < 0 || !slices.Contains(it.ISR, p.Leader) {
					continue
				}
				if it.PartitionEpoch != nil && im.Level >= LevelISRPartitionEpoch && *it.PartitionEpoch != p.PartitionEpoch {
					continue // computed from an older state of the partition
				}
				isr := slices.Clone(it.ISR)
				if im.Level >= LevelControlledShutdown {
					// A follower in controlled shutdown is not eligible (Kafka's AlterPartition
					// refuses it); the leader reports without it once its image says so.
					isr = slices.DeleteFunc(isr, func(n int32) bool { return n != p.Leader && im.stopping(n) })
				}
				if im.Level >= LevelISRNotFenced {
					// Nor is a fenced one (Kafka's ineligibleReplicasForIsr): a paused process
					// keeps its connections, and its leader, which counts an idle follower with
					// the whole log in sync, would put back what the fence took out.
					isr = slices.DeleteFunc(isr, func(n int32) bool { return n != p.Leader && im.fenced(n) })
				}
				if !slices.Equal(p.ISR, isr) {
					p.ISR = isr
					p.PartitionEpoch++
				}
				p.TargetSynced = p.Target != nil && slices.Equal(it.Target, p.Target)
			}
		}
	case OpReassign:
		if c.Reassign != nil {
			return Result{Err: applyReassign(im, c.Reassign)}
		}
	case OpFinishReassign:
		if c.Reassign != nil {
			return Result{Err: applyFinishReassign(im, c.Reassign)}
		}
	case OpCommitFile:
		if c.CommitFile != nil {
			return applyCommitFile(im, c.CommitFile)
		}
	case OpReplaceExtents:
		if c.ReplaceExtents != nil {
			return Result{Err: applyReplaceExtents(im, c.ReplaceExtents)}
		}
	case OpObjectMarker:
		if c.ObjectMarker != nil {
			return applyObjectMarker(im, c.ObjectMarker)
		}
	case OpForgetWriter:
		if c.ForgetWriter != nil {
			applyForgetWriter(im, c.ForgetWriter)
		}
	case OpTrimObjects:
		if c.TrimObjects != nil {
			applyTrimObjects(im, c.TrimObjects)
		}
	case OpExpireProducers:
		if c.ExpireProducers != nil {
			applyExpireProducers(im, c.ExpireProducers)
		}
	default:
		// An op of a later version: ignored, so an older node does not stop applying.
	}
	return Result{}
}

func applyBootstrap(im *Image, b *Bootstrap) {
	im.ClusterID = b.ClusterID
	im.NextProducerID = max(im.NextProducerID, b.NextProducerID)
	if len(b.ClusterConfigs) > 0 {
		im.ClusterConfigs = maps.Clone(b.ClusterConfigs)
	}
	if len(b.Topics) > 0 {
		n, ok := im.Nodes[b.ImportNode]
		if !ok {
			n = &Node{ID: b.ImportNode, Fenced: true}
			im.Nodes[b.ImportNode] = n
		}
		if len(b.NodeConfigs) > 0 {
			n.Configs = maps.Clone(b.NodeConfigs)
		}
	}
	for _, it := range b.Topics {
		if _, ok := im.Topics[it.Name]; ok {
			continue
		}
		t := &Topic{Name: it.Name, ID: it.ID, Configs: maps.Clone(it.Configs)}
		for range it.Partitions {
			// Led by the importing node in epoch 0 (every batch of a one-node log is of epoch 0);
			// if that node is not registered yet, it is elected when it registers.
			p := &Partition{Replicas: []int32{b.ImportNode}, Leader: -1, LeaderEpoch: 0, ISR: []int32{b.ImportNode}, ReplicasSince: im.Index}
			p.noteEpochStart(im.Index)
			if im.Live(b.ImportNode) {
				p.Leader = b.ImportNode
			}
			t.Partitions = append(t.Partitions, p)
		}
		im.Topics[t.Name], im.byID[t.ID] = t, t
	}
}

func applyRegister(im *Image, index uint64, r *Register) Result {
	if err := CheckLevel(im, r); err != nil {
		return Result{Err: err}
	}
	n, ok := im.Nodes[r.Node]
	if !ok {
		n = &Node{ID: r.Node}
		im.Nodes[r.Node] = n
	}
	// The node lost no write since its last registration if this process holds every write of
	// the run that made it (or is that run), directly or through runs that never registered
	// (KeptAlso: such a run opened no log); a node the image did not know may have. A node
	// registered by an older version lost writes at its latest registration, as that version
	// counted (the same whether this image was replayed or loaded from an older snapshot).
	if ok && n.LossIndex == 0 {
		n.LossIndex = n.Incarnation
	}
	if kept := r.KeptFrom != "" && (r.KeptFrom == n.Run || r.Run != "" && r.Run == n.Run || n.Run != "" && slices.Contains(r.KeptAlso, n.Run)); !ok || !kept {
		n.LossIndex = index
	}
	im.forgetRequests(n.Run, r.Run)
	n.KafkaHost, n.KafkaPort, n.ClusterAddr, n.Rack, n.Agent, n.Run = r.KafkaHost, r.KafkaPort, r.ClusterAddr, r.Rack, r.Agent, r.Run
	n.SpecLogAddr, n.AdminAddr, n.Listeners = r.SpecLogAddr, r.AdminAddr, slices.Clone(r.Listeners)
	n.Incarnation, n.Fenced, n.Level, n.ShuttingDown = index, false, r.Level, false
	im.LiveIndex = index
	dropWriters(im, r.Node, r.Run)
	// A new incarnation leads nothing: the restarted process lost its replication state (and,
	// after a power loss, maybe its unsynced tail), so every partition it led gets a new epoch.
	loseNode(im, r.Node)
	return Result{Value: int64(index)}
}

// applyControlledShutdown marks a node's incarnation as stopping (Kafka's
// handleBrokerInControlledShutdown) and takes it out of the ISR of every partition it is in but
// does not lead; the active controller moves those it leads to other replicas first
// (transfers, which elect a leader with the whole log), and the new leader's ISR starts
// without it. As in Kafka before ELR, a partition whose ISR it alone is keeps it. An agent,
// which holds no replica, and a fenced node (in no ISR, leading nothing) are not marked. Since
// LevelShutdownMovesOwners the live nodes' index moves too: the node stops owning the object
// partitions' share-partitions it owned (ObjectNodes leaves it out).
func applyControlledShutdown(im *Image, index uint64, f *Fence) {
	n, ok := im.Nodes[f.Node]
	if !ok || n.Incarnation != f.Incarnation || n.Agent || n.Fenced || n.ShuttingDown {
		return
	}
	n.ShuttingDown = true
	if im.Level >= LevelShutdownMovesOwners {
		im.LiveIndex = index
	}
	for _, t := range im.Topics {
		for _, p := range t.Partitions {
			if i := slices.Index(p.ISR, f.Node); i >= 0 && p.Leader != f.Node && len(p.ISR) > 1 {
				p.ISR = slices.Delete(slices.Clone(p.ISR), i, i+1)
				p.PartitionEpoch++
			}
		}
	}
}

// stopping reports whether node is in controlled shutdown.
func (im *Image) stopping(node int32) bool {
	n, ok := im.Nodes[node]
	return ok && n.ShuttingDown
}

// fenced reports whether node is a registered node the controller fenced.
func (im *Image) fenced(node int32) bool {
	n, ok := im.Nodes[node]
	return ok && n.Fenced
}

// loseNode takes every leadership and ISR membership away from a node.
func loseNode(im *Image, node int32) {
	for _, t := range im.Topics {
		for _, p := range t.Partitions {
			if p.Leader == node {
				dropLeader(im, p)
			}
			if i := slices.Index(p.ISR, node); i >= 0 && len(p.ISR) > 1 {
				p.ISR = slices.Delete(slices.Clone(p.ISR), i, i+1)
				p.PartitionEpoch++
			}
		}
	}
}

// dropLeader starts a new epoch without a leader: an election is due.
func dropLeader(im *Image, p *Partition) {
	p.LeaderEpoch++
	p.noteEpochStart(im.Index)
	p.Leader = -1
	p.TargetSynced = false // the next epoch's leader reports it again
	p.PartitionEpoch++
}

func checkAssignment(im *Image, replicas []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("%w: empty replica list", ErrBadAssignment)
	}
	seen := map[int32]bool{}
	for _, id := range replicas {
		if seen[id] {
			return fmt.Errorf("%w: node %d named twice", ErrBadAssignment, id)
		}
		seen[id] = true
		if n, ok := im.Nodes[id]; !ok {
			return fmt.Errorf("%w: node %d is not registered", ErrBadAssignment, id)
		} else if n.Agent {
			return fmt.Errorf("%w: node %d is an agent, which holds no replicas", ErrBadAssignment, id)
		}
	}
	return nil
}

// newPartition is a partition of a new topic or partition: nothing is written yet, so its
// first live replica leads in epoch 0 without an election. From level 8 a replica in
// controlled shutdown neither leads it nor is in its ISR (Kafka's ISR of a new partition is
// its active replicas), unless no other replica is live; from level 10 nor is a fenced one.
func newPartition(im *Image, replicas []int32) *Partition {
	p := &Partition{Replicas: slices.Clone(replicas), Leader: -1, ISR: slices.Clone(replicas), ReplicasSince: im.Index}
	p.noteEpochStart(im.Index)
	if im.Level >= LevelNewPartitionLiveISR {
		if isr := slices.DeleteFunc(slices.Clone(replicas), func(n int32) bool { return im.stopping(n) || !im.Live(n) }); len(isr) > 0 {
			p.ISR = isr
		}
	} else if im.Level >= LevelControlledShutdown {
		// Unless no replica outside controlled shutdown is live: then the partition keeps
		// them all, so that a live stopping one leads it rather than none.
		if isr := slices.DeleteFunc(slices.Clone(replicas), im.stopping); slices.ContainsFunc(isr, im.Live) {
			p.ISR = isr
		}
	}
	for _, id := range p.ISR {
		if im.Live(id) {
			p.Leader = id
			break
		}
	}
	return p
}

func applyCreateTopic(im *Image, c *CreateTopic) error {
	if _, ok := im.Topics[c.Name]; ok {
		return fmt.Errorf("%w: %s", ErrTopicExists, c.Name)
	}
	if _, ok := im.byID[c.ID]; ok {
		return fmt.Errorf("%w: id %s", ErrTopicExists, c.ID)
	}
	if len(c.Assignments) == 0 {
		return fmt.Errorf("%w: no partitions", ErrBadAssignment)
	}
	for _, a := range c.Assignments {
		if err := checkAssignment(im, a); err != nil && c.Configs[StorageConfig] != StorageObject {
			return err
		}
	}
	t := &Topic{Name: c.Name, ID: c.ID, Configs: maps.Clone(c.Configs)}
	addPartitions(im, t, c.Assignments)
	im.Topics[t.Name], im.byID[t.ID] = t, t
	return nil
}

// addPartitions adds partitions to t: replicated ones with their assignments, or object
// partitions (whose assignments only count them).
func addPartitions(im *Image, t *Topic, assignments [][]int32) {
	for _, a := range assignments {
		if t.IsObject() {
			t.Partitions = append(t.Partitions, &Partition{Leader: -1})
			t.Objects = append(t.Objects, objtopic.NewPartition())
			continue
		}
		t.Partitions = append(t.Partitions, newPartition(im, a))
	}
}

func applyCreatePartitions(im *Image, c *CreatePartitions) error {
	t, ok := im.byID[c.ID]
	if !ok {
		return ErrUnknownTopic
	}
	if c.From != nil && im.Level >= LevelPartitionCount && *c.From != len(t.Partitions) {
		return fmt.Errorf("%w: it has %d partitions, the change was computed for %d", ErrPartitionsChanged, len(t.Partitions), *c.From)
	}
	for _, a := range c.Assignments {
		if err := checkAssignment(im, a); err != nil && !t.IsObject() {
			return err
		}
	}
	addPartitions(im, t, c.Assignments)
	return nil
}

func applyElect(im *Image, e *Elect) {
	for _, it := range e.Items {
		_, p, ok := im.Partition(it.Topic, it.Partition)
		if !ok || p.LeaderEpoch != it.Epoch || p.Leader != -1 || !im.Live(it.Leader) || !slices.Contains(p.Hosts(), it.Leader) {
			continue
		}
		if it.Replicas != nil { // unclean: the voters become the replicas
			hosts := p.Hosts()
			if !p.Unclean || !slices.Contains(it.Replicas, it.Leader) ||
				slices.ContainsFunc(it.Replicas, func(n int32) bool { return !slices.Contains(hosts, n) || !im.Live(n) }) {
				continue
			}
			// The replica set it had (or was moving to) becomes the target of a move back: the
			// lost replicas rejoin when they return, truncating what the voters never had.
			want := p.Target
			if want == nil {
				want = p.Replicas
			}
			p.Replicas, p.Target, p.TargetSynced = slices.Clone(it.Replicas), slices.Clone(want), false
			p.ReplicasSince = im.Index
			if slices.Equal(p.Target, p.Replicas) {
				p.Target = nil
			}
		}
		isr := []int32{it.Leader} // the leader reports the followers as they catch up
		if !p.Unclean && it.Replicas == nil && im.Level >= LevelElectKeepsISR {
			for _, n := range p.ISR {
				if n != it.Leader && im.Live(n) && !im.Nodes[n].ShuttingDown && slices.Contains(p.Hosts(), n) {
					isr = append(isr, n)
				}
			}
			slices.Sort(isr) // as the leader reports it
		}
		if p.Unclean {
			p.Unclean, p.ReplicasSince = false, im.Index
		}
		p.Leader = it.Leader
		p.ISR = isr
		p.TargetSynced = false
		p.PartitionEpoch++
	}
}

func applyReassign(im *Image, r *Reassign) error {
	t, p, ok := im.Partition(r.Topic, r.Partition)
	if !ok {
		return ErrUnknownTopic
	}
	if r.Target != nil && t.IsObject() && im.Level >= LevelObjectReassign {
		return fmt.Errorf("%w: topic %s keeps its partitions in object storage, which have no replicas", ErrBadAssignment, t.Name)
	}
	if r.Target == nil { // cancel: back to the old replicas
		if p.Target == nil {
			return ErrNoReassignment
		}
		lost := p.Leader >= 0 && !slices.Contains(p.Replicas, p.Leader)
		p.Target, p.TargetSynced, p.ReplicasSince = nil, false, im.Index
		p.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(n int32) bool { return !slices.Contains(p.Replicas, n) })
		p.PartitionEpoch++
		if lost {
			dropLeader(im, p)
		}
		return nil
	}
	if err := checkAssignment(im, r.Target); err != nil {
		return err
	}
	if !slices.Equal(r.Target, p.Target) {
		p.TargetSynced = false
	}
	if im.Level >= LevelReorderAtOnce && sameSet(r.Target, p.Replicas) {
		// The same replicas in another order: nothing to copy, so it applies at once, as
		// Kafka completes a reassignment that merely rearranges the replicas; a move in
		// progress ends (its added replicas leave, as when it is cancelled).
		p.Replicas = slices.Clone(r.Target)
		p.Target, p.TargetSynced = nil, false
	} else if slices.Equal(r.Target, p.Replicas) {
		p.Target, p.TargetSynced = nil, false
	} else {
		p.Target = slices.Clone(r.Target)
	}
	p.ReplicasSince = im.Index
	p.PartitionEpoch++
	if im.Level >= LevelReassignHosts {
		hosts := p.Hosts()
		lost := p.Leader >= 0 && !slices.Contains(hosts, p.Leader)
		p.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(n int32) bool { return !slices.Contains(hosts, n) })
		if lost {
			dropLeader(im, p)
		}
	}
	return nil
}

// sameSet reports whether a and b hold the same nodes (each list holds a node once).
func sameSet(a, b []int32) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(n int32) bool { return !slices.Contains(b, n) })
}

func applyFinishReassign(im *Image, r *Reassign) error {
	_, p, ok := im.Partition(r.Topic, r.Partition)
	if !ok {
		return ErrUnknownTopic
	}
	if p.Target == nil || !slices.Equal(p.Target, r.Target) {
		return ErrNoReassignment
	}
	for _, n := range p.Target {
		if !slices.Contains(p.ISR, n) {
			return fmt.Errorf("%w: %d", ErrReassignNotSynced, n)
		}
	}
	if !p.TargetSynced {
		return fmt.Errorf("%w: the target set does not hold every committed batch yet", ErrReassignNotSynced)
	}
	p.Replicas, p.Target, p.TargetSynced = p.Target, nil, false
	p.ReplicasSince = im.Index
	p.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(n int32) bool { return !slices.Contains(p.Replicas, n) })
	p.PartitionEpoch++
	if p.Leader >= 0 && !slices.Contains(p.Replicas, p.Leader) {
		dropLeader(im, p)
	}
	return nil
}
