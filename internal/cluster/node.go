// Package cluster runs one node of a Runnel cluster: the transport to the other nodes, its member
// of the controller quorum (voter or learner), the replicas of the partitions it hosts, and the
// reconciliation of its topic registry with the controller's image. When its controller member
// is the Raft leader it is the active controller (active.go). The broker asks it for metadata
// and has it propose admin changes. Design: docs/cluster.md.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objtopic"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/speclog/order"
	"github.com/runnel-dev/runnel/internal/speclog/sequencer"
	"github.com/runnel-dev/runnel/internal/speclog/shard"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// Config configures a Node.
type Config struct {
	NodeID int32
	// Listener is the cluster listener (the caller binds --cluster-addr); ClusterAddr is the
	// address other nodes dial, "" for the listener's.
	Listener    net.Listener
	ClusterAddr string
	// Voters maps the controller quorum's node ids to their cluster addresses. Empty: this node
	// alone.
	Voters    map[int32]string
	KafkaHost string // advertised Kafka address, registered for Metadata
	KafkaPort int32
	// SpecLogAddr is the node's SpecLog gRPC address, registered for Describe ("" none).
	SpecLogAddr string
	// AdminAddr is the node's admin HTTP address, registered for the console ("" none).
	AdminAddr string
	// OnWALSync, if set, is told the duration of every fsync of a Raft log this node keeps
	// (group "controller" or "sequencer").
	OnWALSync func(group string, d time.Duration)
	// Listeners are the node's advertised Kafka listeners, registered for Metadata.
	Listeners []security.Endpoint
	// TLS, when set, makes connections to peers TLS with the client config it returns for the
	// peer's host (Listener is then a TLS listener).
	TLS  func(serverName string) *tls.Config
	Rack string
	// Agent: this node is a `runnel agent` (object topics only; it is never a voter).
	Agent bool
	// BeforeRegister, if set, is called once, when an active controller has answered (a
	// heartbeat of no incarnation) and before the node's registration is sent: from the
	// registration on, the metadata names the node live, so the server binds its Kafka
	// listeners there (docs/operating.md). An error fails the node.
	BeforeRegister func() error
	// EmptyDataDir: the data dir held nothing when this process started. If the cluster
	// already knows the node id, the node lost its data: it may not take part in elections
	// (docs/operating.md), so it refuses to start.
	EmptyDataDir bool
	// olderVersion (tests): the node registers as a version before command levels (level 0).
	olderVersion bool
	// maxFrameBytes (tests), if set, is the transport's frame limit (default 64 MiB).
	maxFrameBytes int
	// beforeReconcile (tests), if set, runs before each reconcile: a slow one (many logs to
	// open and recover) is made by blocking in it.
	beforeReconcile func()

	FS       vfs.FS
	DataDir  string
	Registry *topics.Registry
	Logger   *slog.Logger

	// ClusterID is the id a new cluster takes (an upgraded one-node data dir keeps its own);
	// "" makes one up.
	ClusterID string
	// Import returns what a new single-voter cluster imports from an older one-node data dir.
	Import func() *controller.Bootstrap

	HeartbeatInterval time.Duration // default 200 ms
	Active            controller.ActiveConfig
	Replica           replica.Config // NodeID, Send and the reports are filled in
	Controller        controller.Config
}

// Node is one running cluster node.
type Node struct {
	cfg    Config
	logger *slog.Logger
	tr     *transport.Transport
	ctrl   *controller.Controller
	rm     *replica.Manager
	lanes  *lanes // hand rm each peer's replication frames, on a goroutine of the peer's own
	rpc    *rpcLayer
	reg    *topics.Registry
	// seq is this node's member of the total-order sequencer group (a voter on the controller
	// voters, a learner elsewhere) and shards the runners of the total-order partitions it leads
	// (docs/speclog.md); both nil on an agent.
	seq    *sequencer.Group
	shards *shard.Manager

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	run         string        // this process run's id (object files' writer)
	joiningRuns []string      // the runs JoiningFile lists (this one among them) while it marks the data dir
	reqSeq      atomic.Uint64 // the sequence of the requests Propose makes
	// controllerHeard: unix ns of the last heartbeat the active controller answered.
	controllerHeard atomic.Int64
	seed            atomic.Pointer[controller.Image] // StartFromSnapshot's image
	incarnation     atomic.Uint64
	shuttingDown    atomic.Bool   // ControlledShutdown has begun: heartbeats say so
	joinIndex       atomic.Uint64 // index of this incarnation's registration: reconcile from there
	ready           chan struct{} // closed once registered and reconciled up to the registration

	recMu      sync.Mutex
	reconciled uint64
	recCh      chan struct{} // closed and replaced when reconciled moves
	recWake    chan struct{}
	// Of the reconciler goroutine only: the wake-up that opens offline partitions again when
	// their retry is due, and the epochs whose leadership it gave up for an offline log.
	retryTimer   *time.Timer
	offlineEpoch map[controller.PartitionRef]int32      // unopened here in that leader epoch
	offlineAsked map[controller.PartitionRef]offlineAsk // the last request made for it

	activeMu sync.Mutex
	active   *activeDriver

	isrBusy atomic.Bool

	peersMu   sync.Mutex
	refusedAt map[int32]time.Time // when a node's cluster port last refused a connection
	started   chan struct{}       // closed once Start has built the node
	nextVoter atomic.Uint32       // the voter a broker asks next for the active controller
	heardAt   sync.Map            // node id → *atomic.Int64: unix ns of its last frame here

	// emptyDir: registrations say that this process started on an empty data dir, until one
	// succeeds (later ones re-register the same data).
	emptyDir atomic.Bool
	marks    *bootMarks // the boot mark: whether registrations say the node lost no write
	raftOnce sync.Once
	failed   chan struct{} // closed when the node cannot go on (failErr says why)
	failErr  error
	failOnce sync.Once
}

// ErrNotAVoter is the refusal of a node on an empty data dir whose --controller-voters names it
// while the cluster's voters do not (a voter removed, its id used again with the old flags): it
// would start a Raft log of its own as a voter.
var ErrNotAVoter = errors.New("cluster: this node is not a controller voter")

// ErrLostData is the refusal of a node whose data dir is empty while the cluster knows its id.
var ErrLostData = errors.New("cluster: this node's data dir is empty, but the cluster knows its node id")

// ErrNotReady is returned by operations before the node has joined the cluster.
var ErrNotReady = errors.New("cluster: node has not joined the cluster yet")

// Start starts the node: transport, controller member, replica manager. It returns at once;
// WaitReady waits until the node has registered and caught up with the metadata.
func Start(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if cfg.ClusterAddr == "" {
		cfg.ClusterAddr = cfg.Listener.Addr().String()
	}
	if len(cfg.Voters) == 0 {
		cfg.Voters = map[int32]string{cfg.NodeID: cfg.ClusterAddr}
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 200 * time.Millisecond
	}
	if cfg.Active == (controller.ActiveConfig{}) {
		cfg.Active = controller.DefaultActiveConfig()
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{cfg: cfg, logger: cfg.Logger, reg: cfg.Registry, ctx: ctx, cancel: cancel, ready: make(chan struct{}),
		recCh: make(chan struct{}), recWake: make(chan struct{}, 1), refusedAt: map[int32]time.Time{},
		started: make(chan struct{}), run: newRunID(cfg.NodeID), failed: make(chan struct{})}
	if !cfg.Agent && cfg.DataDir != "" && (cfg.EmptyDataDir || joiningMarked(cfg.FS, cfg.DataDir)) {
		cfg.EmptyDataDir = true
		runs, err := markJoining(cfg.FS, cfg.DataDir, n.run)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("cluster: marking the data dir as joining: %w", err)
		}
		n.cfg, n.joiningRuns = cfg, runs
	}
	n.emptyDir.Store(cfg.EmptyDataDir && !cfg.Agent)
	n.marks = &bootMarks{logger: cfg.Logger} // an agent holds no log
	if !cfg.Agent && cfg.DataDir != "" {
		n.marks = openBootMark(cfg.FS, cfg.DataDir, n.run, cfg.Logger)
	}
	if cfg.Registry != nil {
		cfg.Registry.OnLogFailure(func(err error) {
			n.marks.logFailed(err)
			n.wakeReconciler() // the registry opens a poisoned log again after a wait (RetryAt)
		})
	}
	n.tr = transport.New(transport.Config{NodeID: cfg.NodeID, Listener: cfg.Listener, Resolve: n.resolve, Addr: cfg.ClusterAddr,
		Handler: n.receive, PeerDown: n.peerDown, Logger: cfg.Logger, TLS: cfg.TLS, MaxFrameBytes: cfg.maxFrameBytes})
	n.rpc = newRPC(ctx, cfg.NodeID, n.tr.Send)
	rcfg := cfg.Replica
	rcfg.NodeID, rcfg.Send, rcfg.Logger = cfg.NodeID, n.tr.Send, cfg.Logger
	rcfg.ReportISR, rcfg.ReportFailed = n.reportISR, n.reportFailed
	rcfg.Throttle = newReplicationThrottle(cfg.NodeID, n.Image)
	n.rm = replica.NewManager(rcfg)
	n.lanes = newLanes(n.rm.Handle, cfg.Logger)
	ccfg := cfg.Controller
	ccfg.NodeID, ccfg.FS, ccfg.Dir, ccfg.Logger = cfg.NodeID, cfg.FS, cfg.DataDir+"/controller", cfg.Logger
	ccfg.Voters = slices.Sorted(mapsKeys(cfg.Voters))
	ccfg.Send = func(to int32, body []byte) { n.tr.Send(to, kindRaft, body) }
	ccfg.SendChunk = func(to int32, chunk []byte) { n.tr.Send(to, kindRaftChunk, chunk) }
	ccfg.Queued = n.tr.Queued
	ccfg.Bootstrap = n.bootstrap
	ccfg.OnApply = func(*controller.Image) {
		n.wakeReconciler()
		if d := n.activeDriver(); d != nil {
			d.imageApplied()
		}
	}
	ccfg.OnLeader = n.onLeader
	ccfg.OnRemoved = n.forgetRemoved
	ccfg.OnFailure = n.fail // its log cannot be written: the node stops (the server sees Failed)
	walSync := func(group string) func(time.Duration) {
		if cfg.OnWALSync == nil {
			return nil
		}
		return func(d time.Duration) { cfg.OnWALSync(group, d) }
	}
	ccfg.OnWALSync = walSync("controller")
	ctrl, err := controller.Open(ccfg)
	if err != nil {
		cancel() // first: frames already received stop waiting for started
		n.rm.Close()
		n.lanes.close()
		n.tr.Close()
		return nil, err
	}
	n.ctrl = ctrl
	if !cfg.Agent { // voters are the sequencer group's voters; other serve nodes its learners
		n.seq, err = sequencer.Open(sequencer.Config{NodeID: cfg.NodeID, Voters: ccfg.Voters, FS: cfg.FS, Dir: cfg.DataDir + "/sequencer", OnWALSync: walSync("sequencer"),
			Send: n.tr.Send, OnRemoved: n.forgetRemoved, OnFailure: n.fail, Logger: cfg.Logger, Topics: n.totalOrderTopics, Members: n.sequencerMembers, TargetVoters: ctrl.Voters,
			OnSignal: func(topic string, s order.Signal) { n.shards.Signal(topic, s) }, Takeover: n.shardTakeover})
		if err != nil {
			cancel()
			ctrl.Stop()
			n.rm.Close()
			n.tr.Close()
			return nil, err
		}
		n.shards = shard.NewManager(cfg.Registry, n.seq, cfg.Logger)
	}
	if id := ctrl.Image().ClusterID; id != "" {
		n.tr.SetClusterID(id)
	}
	n.registerHandlers()
	close(n.started)
	answered, err := n.checkEmptyDataDir()
	if err != nil {
		cancel()
		if n.seq != nil {
			n.seq.Stop()
		}
		ctrl.Stop()
		n.rm.Close()
		n.lanes.close()
		n.tr.Close()
		return nil, err
	}
	_, voter := cfg.Voters[cfg.NodeID]
	switch {
	case voter && !answered:
		n.wg.Add(1)
		go n.awaitVoterAnswer()
	case voter || !n.emptyDir.Load():
		n.startRaft()
	} // else once the controller has taken its registration (register): a known id is refused first
	n.wg.Add(2)
	go n.reconciler()
	go n.join()
	if n.seq != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.shards.Run(n.ctx)
		}()
	}
	return n, nil
}

// sequencerMembers are the nodes that follow the sequencer group: every registered serve node
// (agents hold no replicas, so they lead no shard).
// forgetRemoved drops what the transport still has queued for a node removed from a Raft
// group once it is no longer registered (unregistered): a process that takes its id later must
// not get what was meant for the old one. A registered node removed from a group (a voter
// removed, which stays a learner) keeps its frames.
func (n *Node) forgetRemoved(node int32) {
	if n.ctrl.Image().Nodes[node] == nil {
		n.tr.Forget(node)
	}
}

func (n *Node) sequencerMembers() []int32 {
	img := n.ctrl.Image()
	var out []int32
	for _, id := range img.NodeIDs() {
		if nd := img.Nodes[id]; !nd.Agent && nd.ClusterAddr != "" {
			out = append(out, id)
		}
	}
	return out
}

func mapsKeys(m map[int32]string) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Close stops the node: heartbeats, the active controller, the controller member, replication
// and the transport. The registry (and its logs) are the caller's to close afterwards.
func (n *Node) Close() {
	n.cancel()
	n.onLeader(-1)
	n.wg.Wait()
	if n.seq != nil {
		n.seq.Stop()
	}
	n.ctrl.Stop()
	n.rm.Close()
	n.lanes.close()
	n.tr.Close()
}

// NodeID is this node's id.
func (n *Node) NodeID() int32 { return n.cfg.NodeID }

// Sequencer is this node's member of the total-order sequencer group: a voter on the
// controller voters, a learner on other serve nodes (nil on an agent).
func (n *Node) Sequencer() *sequencer.Group { return n.seq }

// Shards runs the total-order partitions this node leads (nil on an agent).
func (n *Node) Shards() *shard.Manager { return n.shards }

// PartitionLeader is the node leading a topic's partition by the metadata (-1: none).
func (n *Node) PartitionLeader(topic string, partition int32) int32 {
	t := n.Image().Topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return -1
	}
	return t.Partitions[partition].Leader
}

// SpecLogAddr is a node's registered SpecLog address ("" unknown).
func (n *Node) SpecLogAddr(node int32) string {
	if nd := n.Image().Nodes[node]; nd != nil {
		return nd.SpecLogAddr
	}
	return ""
}

// totalOrderTopics lists the metadata's total-order topics for the sequencer group.
func (n *Node) totalOrderTopics() ([]sequencer.Spec, uint64) {
	img := n.ctrl.Image()
	var out []sequencer.Spec
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		if !shard.Total(t.Configs) {
			continue
		}
		cfg, err := shard.TopicConfig(t.Configs)
		if err != nil {
			n.logger.Error("total order: topic config", "topic", name, "err", err)
			continue
		}
		out = append(out, sequencer.Spec{ID: shard.TopicKey(t.ID), Name: name, Shards: int32(len(t.Partitions)), Config: cfg})
	}
	return out, img.Index
}

// shardTakeover tells the sequencer whether a lagging total-order shard (the topic by its
// sequencer key; ran: the node it last reported from, -1 unknown) is replicated on a live node
// other than its leader, or has been taken over already. Its leader then died or froze (the
// controller elects an in-sync replica, which has every durable record, once the leader's
// session ends, and that replica's runner resumes the shard; it reports once its own writes
// are durable again, when a follower is back in its in-sync set), or is only slow. Either way
// the sequencer waits for it, up to runnel.order.takeover.ms, rather than change the view.
func (n *Node) shardTakeover(key string, shardIndex, ran int32) bool {
	id, ok := shard.KeyTopicID(key)
	if !ok {
		return false
	}
	img := n.ctrl.Image()
	_, p, ok := img.Partition(id, shardIndex)
	return ok && canTakeOver(p, ran, img.Live)
}

// canTakeOver is shardTakeover's rule for partition p, last run on node ran (-1 unknown).
func canTakeOver(p *controller.Partition, ran int32, live func(int32) bool) bool {
	if p.Leader >= 0 && p.Leader != ran && ran >= 0 && live(p.Leader) {
		return true // taken over: the new leader's runner is resuming it
	}
	for _, r := range p.Hosts() {
		if r != p.Leader && live(r) {
			return true
		}
	}
	return false
}

// Image is the current metadata image. It must not be modified.
//
// Before the node has joined, a Ripcord process started from a metadata snapshot
// (StartFromSnapshot) gets that snapshot.
func (n *Node) Image() *controller.Image {
	if n.joinIndex.Load() == 0 {
		if s := n.seed.Load(); s != nil {
			return s
		}
	}
	return n.ctrl.Image()
}

// StartFromSnapshot lets a node that cannot join (the controller is away) serve from a metadata
// snapshot (the one the active controller keeps in the object store): Image returns it and the
// registry knows its topics, hosting none of their partitions, until the node joins. Only for
// a node that hosts no replicas (an agent).
func (n *Node) StartFromSnapshot(img *controller.Image) error {
	n.seed.Store(img)
	specs := make([]topics.TopicSpec, 0, len(img.Topics))
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		specs = append(specs, topics.TopicSpec{Name: t.Name, ID: t.ID, Configs: t.Configs, Partitions: int32(len(t.Partitions)),
			Hosted: func(int32) bool { return false }})
	}
	n.reg.Sync(specs, img.ClusterConfigs, nil, topics.Hooks{})
	return nil
}

// ControllerID is the active controller's node id (-1: none known).
func (n *Node) ControllerID() int32 { return n.ctrl.Leader() }

// Transport is the node's transport (for fault injection and metrics).
func (n *Node) Transport() *transport.Transport { return n.tr }

// Replicas is the node's replica manager.
func (n *Node) Replicas() *replica.Manager { return n.rm }

// Ready returns a channel closed once the node has registered with the controller and its
// registry reflects the metadata as of its registration.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// WaitReady waits until Ready.
func (n *Node) WaitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotReady, ctx.Err())
	}
}

// DescribeQuorum describes the controller's Raft group, as its leader sees it (asking it if this
// node does not lead), until ctx ends.
func (n *Node) DescribeQuorum(ctx context.Context) (controller.Quorum, error) {
	var q controller.Quorum
	err := n.callController(ctx, "describe-quorum", struct{}{}, &q)
	return q, err
}

// ClusterAddr returns a node's cluster (Raft and replication) address, "" if unknown.
func (n *Node) ClusterAddr(node int32) string { return n.resolve(node) }

func (n *Node) resolve(node int32) string {
	if a, ok := n.cfg.Voters[node]; ok {
		return a
	}
	if nd, ok := n.ctrl.Image().Nodes[node]; ok {
		return nd.ClusterAddr
	}
	return ""
}

func (n *Node) receive(from int32, kind transport.Kind, body []byte) {
	select {
	case <-n.started: // the transport accepts before the node is built: peers may be quicker
	case <-n.ctx.Done():
		return
	}
	n.heard(from)
	switch kind {
	case kindRaft:
		n.ctrl.Step(from, body)
	case kindRaftChunk:
		n.ctrl.StepChunk(from, body)
	case kindRPCRequest, kindRPCResponse:
		n.rpc.receive(from, kind, body)
	case replica.KindAppendAck:
		n.rm.Handle(from, kind, body) // here: an acknowledgement never waits (a busy replica queues it)
	case replica.KindAppend, replica.KindFollow, replica.KindFollowReply:
		n.lanes.push(from, kind, body) // not on this goroutine: the frames behind wait for none
	case sequencer.KindRaft, sequencer.KindReport, sequencer.KindSignal, sequencer.KindJoin, sequencer.KindTrim:
		if n.seq != nil {
			n.seq.Handle(from, kind, body)
		}
	}
}

func (n *Node) peerDown(node int32, refused bool) {
	n.rm.PeerDown(node)
	n.rpc.peerDown(node)
	if refused {
		n.peersMu.Lock()
		n.refusedAt[node] = time.Now()
		n.peersMu.Unlock()
		if d := n.activeDriver(); d != nil {
			d.peerDown(node)
		}
	}
}

// heard notes that a frame from node arrived.
func (n *Node) heard(node int32) {
	v, ok := n.heardAt.Load(node)
	if !ok {
		v, _ = n.heardAt.LoadOrStore(node, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(time.Now().UnixNano())
}

// deadPeers lists the nodes whose cluster port refused a connection recently and that have not
// sent anything since: a new active controller fences them at once instead of waiting for their
// sessions to expire (their processes are gone).
func (n *Node) deadPeers() []int32 {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	var out []int32
	for id, at := range n.refusedAt {
		var heard int64
		if v, ok := n.heardAt.Load(id); ok {
			heard = v.(*atomic.Int64).Load()
		}
		if time.Since(at) < 10*time.Second && at.UnixNano() > heard {
			out = append(out, id)
		}
	}
	return out
}

// bootstrap is the command a new cluster's first leader proposes.
func (n *Node) bootstrap() *controller.Bootstrap {
	var b *controller.Bootstrap
	if n.cfg.Import != nil && len(n.cfg.Voters) == 1 {
		b = n.cfg.Import()
	}
	if b == nil {
		b = &controller.Bootstrap{}
	}
	if b.ClusterID == "" {
		b.ClusterID = n.cfg.ClusterID
	}
	if b.ClusterID == "" {
		var raw [16]byte
		rand.Read(raw[:])
		b.ClusterID = base64.RawURLEncoding.EncodeToString(raw[:])
	}
	return b
}

// startRaft starts the node's Raft members (the controller's, the sequencer group's), once.
// A node that is not a voter and started on an empty data dir starts them only after the
// controller took its registration: if the cluster knew its id, a leader would tell its empty
// log a commit index it never had (etcd/raft panics) before the refusal arrived.
func (n *Node) startRaft() {
	n.raftOnce.Do(func() {
		n.ctrl.Start()
		if n.seq != nil {
			n.seq.Start()
		}
	})
}

// Failed is closed when the node cannot go on; Err says why.
func (n *Node) Failed() <-chan struct{} { return n.failed }

// Err is why the node failed (nil while it has not).
func (n *Node) Err() error {
	select {
	case <-n.failed:
		return n.failErr
	default:
		return nil
	}
}

func (n *Node) fail(err error) {
	n.failOnce.Do(func() {
		n.failErr = err
		close(n.failed)
	})
}

// checkEmptyDataDir: a node that starts on an empty data dir asks the controller voters
// whether the cluster knows its id, before its Raft members take part in anything. A node that
// lost its data would vote as if it held what it acknowledged: a voter again in a term it
// voted in, and with a lagging voter or replica it makes a majority that lacks committed
// entries (and etcd/raft panics when the leader tells it a commit index beyond its empty log).
// answered: some voter replied within 3 s (true too when there is nothing to ask). A broker
// that got no reply starts anyway (a new cluster starting, or the quorum down), as registering
// checks again before its Raft members start; a voter waits for a reply (awaitVoterAnswer).
func (n *Node) checkEmptyDataDir() (answered bool, _ error) {
	if !n.emptyDir.Load() {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, 3*time.Second)
	defer cancel()
	type answer struct {
		from int32
		resp nodeKnownResponse
		err  error
	}
	answers := make(chan answer, len(n.cfg.Voters))
	asked := 0
	for id := range n.cfg.Voters {
		if id == n.cfg.NodeID {
			continue
		}
		asked++
		go func() {
			var resp nodeKnownResponse
			err := n.rpc.call(ctx, id, "node-known", nodeKnownRequest{Node: n.cfg.NodeID, Runs: n.ownRuns()}, &resp)
			answers <- answer{id, resp, err}
		}()
	}
	answered = asked == 0
	_, voter := n.cfg.Voters[n.cfg.NodeID]
	for range asked {
		a := <-answers
		if a.err == nil && a.resp.Known && !a.resp.Unregistered { // first: its advice (a new node id) holds whatever the flags
			return true, lostDataError(n.cfg.NodeID, a.from, a.resp.ClusterID)
		}
		if a.err == nil && voter && a.resp.ClusterID != "" && len(a.resp.Voters) > 0 && !slices.Contains(a.resp.Voters, n.cfg.NodeID) {
			return true, fmt.Errorf("%w: %s", ErrNotAVoter, notVoterDetail(n.cfg.NodeID, a.from, a.resp.ClusterID, a.resp.Voters))
		}
		if a.err == nil && a.resp.Known {
			return true, fmt.Errorf("%w: %s", ErrLostData, stillMemberDetail(n.cfg.NodeID, a.from))
		}
		var re *rpcError // a voter that cannot tell (an older version) still answered
		answered = answered || a.err == nil || errors.As(a.err, &re)
	}
	return answered, nil
}

// awaitVoterAnswer keeps asking the other voters whether the cluster knows this voter's id,
// and starts its Raft members once one has replied that it does not, or fails the node if it
// does. A voter started on an empty data dir whose peers are all away could make no quorum
// anyway; started at once, it would wait in Raft with an empty log and, should a peer that
// lacks committed entries come back first, give it the vote that makes it leader.
func (n *Node) awaitVoterAnswer() {
	defer n.wg.Done()
	n.logger.Warn("cluster: this voter's data dir is empty and no other voter answered; its Raft members wait until one confirms that the cluster does not know this node", "node", n.cfg.NodeID)
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(wait):
		}
		answered, err := n.checkEmptyDataDir()
		if err != nil {
			if n.ctx.Err() == nil {
				n.logger.Error("cluster: refusing to start", "err", err)
				n.fail(err)
			}
			return
		}
		if answered {
			n.logger.Info("cluster: another voter confirmed this node is new; starting its Raft members", "node", n.cfg.NodeID)
			n.startRaft()
			return
		}
	}
}

func lostDataError(node, by int32, clusterID string) error {
	return fmt.Errorf("%w: %s", ErrLostData, lostDataDetail(node, by, clusterID))
}

// notVoterDetail explains the refusal of a node on an empty data dir that its flags make a voter
// the cluster does not have.
func notVoterDetail(node, by int32, clusterID string, voters []int32) string {
	return fmt.Sprintf("--controller-voters names node %d, but the voters of cluster %s are %v (node %d says so); "+
		"start it with those as --controller-voters, and it joins as a broker (runnel controller add-voter makes it a voter)",
		node, clusterID, voters, by)
}

// stillMemberDetail explains the refusal of a node id unregistered whose Raft learners are not
// removed yet everywhere.
func stillMemberDetail(node, by int32) string {
	return fmt.Sprintf("node %d is not registered, but still a member of the controller's or the sequencer's Raft group (node %d says so): "+
		"an unregistration whose learner removal has not reached every node yet; start it again in a moment", node, by)
}

func lostDataDetail(node, by int32, clusterID string) string {
	return fmt.Sprintf("node %d is a member of cluster %s (node %d says so). A node that lost its data must not vote "+
		"in its partitions' and the controller's elections as if it held what it acknowledged: restore its data dir "+
		"(a copy taken while it was stopped), or, for a node that is not a controller voter, start it under a new "+
		"--node-id and reassign its partitions to it (docs/operating.md)", node, clusterID, by)
}

// join registers the node with the active controller, waits until its registry reflects the
// metadata as of the registration, and then heartbeats until the node closes.
func (n *Node) join() {
	defer n.wg.Done()
	if n.cfg.BeforeRegister != nil {
		if err := n.awaitController(); err != nil {
			return // closing
		}
		if err := n.cfg.BeforeRegister(); err != nil {
			n.logger.Error("cluster: before registering", "err", err)
			n.fail(err)
			return
		}
	}
	if err := n.register(); err != nil {
		n.refused(err)
		return // closing, or refused
	}
	n.controllerHeard.Store(time.Now().UnixNano())
	close(n.ready)
	n.logger.Info("cluster: joined", "node", n.cfg.NodeID, "incarnation", n.incarnation.Load(), "controller", n.ctrl.Leader())
	t := time.NewTicker(n.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		var resp heartbeatResponse
		ctx, cancel := context.WithTimeout(n.ctx, 2*n.cfg.HeartbeatInterval)
		err := n.callController(ctx, "heartbeat", n.heartbeatRequest(), &resp)
		cancel()
		if err == nil {
			n.controllerHeard.Store(time.Now().UnixNano())
		}
		if err == nil && !resp.OK {
			n.logger.Warn("cluster: the controller does not know this incarnation; registering again")
			if err := n.register(); err != nil {
				n.refused(err)
				return
			}
		} else if n.marks.lossUnsaid() {
			n.logger.Warn("cluster: a log failed after this node registered as one that kept its writes; registering again")
			if err := n.register(); err != nil {
				n.refused(err)
				return
			}
		}
	}
}

// registerRequest is the register RPC: the command, and whether this process started on an
// empty data dir (the controller refuses it if it knows the node id).
type registerRequest struct {
	controller.Register
	EmptyDataDir bool `json:"empty_data_dir,omitempty"`
	// Voter: --controller-voters names this node (checked with EmptyDataDir: a node on an empty
	// data dir boots a Raft log of its own as a voter of those).
	Voter bool `json:"voter,omitempty"`
	// JoiningRuns: nodeKnownRequest.Runs.
	JoiningRuns []string `json:"joining_runs,omitempty"`
}

type nodeKnownRequest struct {
	Node int32 `json:"node"`
	// Runs are the runs of the processes that started on the asking node's data dir since it
	// was empty, this one among them (JoiningFile): a registration of theirs (this process's,
	// made meanwhile: a voter's registration does not wait for the answer; or one whose
	// process died before it removed the mark) does not count.
	Runs []string `json:"runs,omitempty"`
}

// nodeKnownResponse: whether the answering node's image has the node registered, and the
// controller's voters as the answering node has them (none from older versions).
type nodeKnownResponse struct {
	Known bool `json:"known"`
	// Unregistered: known only as a member of a Raft group (an unregistration not finished).
	Unregistered bool    `json:"unregistered,omitempty"`
	ClusterID    string  `json:"cluster_id,omitempty"`
	Voters       []int32 `json:"voters,omitempty"`
}

type registerResponse struct {
	Incarnation uint64 `json:"incarnation"`
	Index       uint64 `json:"index"`
}

type heartbeatRequest struct {
	Node        int32  `json:"node"`
	Incarnation uint64 `json:"incarnation"`
	// Level is the command level the node's version applies (none from versions before
	// levels): a node registered through an older active controller is in the image at 0.
	Level int `json:"level,omitempty"`
	// ShuttingDown: the node is stopping (ControlledShutdown); versions before it leave it out,
	// and an active controller of such a version ignores it.
	ShuttingDown bool `json:"shutting_down,omitempty"`
}

// level is the command level this node registers and heartbeats with.
func (n *Node) level() int {
	if n.cfg.olderVersion {
		return 0
	}
	return controller.Level
}

// refused ends the node if its registration was refused for good (its data dir lost, or its
// version below the cluster's level), at its first or a later one: it would serve without a
// session.
func (n *Node) refused(err error) {
	if errors.Is(err, controller.ErrLevel) || errors.Is(err, ErrLostData) || errors.Is(err, ErrNotAVoter) {
		n.logger.Error("cluster: refused at registration", "err", err)
		n.fail(err)
	}
}

type heartbeatResponse struct {
	OK bool `json:"ok"`
	// To a heartbeat that says the node is shutting down: Stopping, that the active controller
	// moves its leaderships (an older version's does not say so); Movable, how many of the
	// partitions it leads another replica can still take.
	Stopping bool `json:"stopping,omitempty"`
	Movable  int  `json:"movable,omitempty"`
}

// ownRuns are this process's run and those of the processes that started on its data dir since
// it was empty (JoiningFile).
func (n *Node) ownRuns() []string {
	if slices.Contains(n.joiningRuns, n.run) {
		return n.joiningRuns
	}
	return append(slices.Clone(n.joiningRuns), n.run)
}

// awaitRegistered waits until this node has reconciled the image at its registration's index,
// however long its first reconcile takes (it opens and recovers every hosted log): registering
// again would only make new incarnations, each taking the node's leaderships away. It gives up
// (the caller registers again) only if a write failed meanwhile after a registration that said
// none was lost: reconcile waits for a registration that says so.
func (n *Node) awaitRegistered(index uint64) error {
	for {
		ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
		err := n.waitReconciled(ctx, index)
		cancel()
		if err == nil || n.ctx.Err() != nil || n.marks.lossUnsaid() {
			return err
		}
	}
}

// register registers this node's new incarnation and waits until the image has it.
func (n *Node) register() error {
	req := registerRequest{Register: controller.Register{Node: n.cfg.NodeID, KafkaHost: n.cfg.KafkaHost, KafkaPort: n.cfg.KafkaPort,
		ClusterAddr: n.cfg.ClusterAddr, Rack: n.cfg.Rack, Run: n.run, Agent: n.cfg.Agent, SpecLogAddr: n.cfg.SpecLogAddr, AdminAddr: n.cfg.AdminAddr, Listeners: n.cfg.Listeners,
		Level: n.level()}}
	backoff := 20 * time.Millisecond
	for {
		var resp registerResponse
		req.EmptyDataDir = n.emptyDir.Load()
		_, req.Voter = n.cfg.Voters[n.cfg.NodeID]
		req.JoiningRuns = n.ownRuns()
		req.KeptFrom, req.KeptAlso = n.marks.claim()
		ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
		err := n.callController(ctx, "register", req, &resp)
		var re *rpcError
		if errors.As(err, &re) && re.Code == codeLostData {
			cancel()
			return fmt.Errorf("%w: %s", ErrLostData, re.Msg)
		}
		if errors.As(err, &re) && re.Code == codeNotVoter {
			cancel()
			return fmt.Errorf("%w: %s", ErrNotAVoter, re.Msg)
		}
		if errors.As(err, &re) && re.Code == codeLevel {
			cancel()
			return fmt.Errorf("%w (%s)", controller.ErrLevel, strings.TrimPrefix(re.Msg, controller.ErrLevel.Error()+": "))
		}
		if err == nil {
			n.emptyDir.Store(false)
			n.clearJoining()
			n.startRaft()
			n.joinIndex.Store(resp.Index)
			n.marks.registered(req.KeptFrom) // after joinIndex: reconcile reads them the other way
			n.wakeReconciler()
			err = n.awaitRegistered(resp.Index)
		}
		cancel()
		if err == nil {
			n.incarnation.Store(resp.Incarnation)
			return nil
		}
		if n.ctx.Err() != nil {
			return n.ctx.Err()
		}
		n.logger.Debug("cluster: registering", "err", err)
		select {
		case <-n.ctx.Done():
			return n.ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// awaitController waits until an active controller answers, as when the controller quorum is
// lost, none does. It asks with a heartbeat of incarnation 0, which no registration has: every
// version's active controller answers it (not OK, and nothing changes), any other node says
// it is not the controller. It fails only when the node closes.
func (n *Node) awaitController() error {
	backoff := 20 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
		var resp heartbeatResponse
		err := n.callController(ctx, "heartbeat", heartbeatRequest{Node: n.cfg.NodeID}, &resp)
		cancel()
		if err == nil {
			return nil
		}
		n.logger.Debug("cluster: waiting for an active controller", "err", err)
		select {
		case <-n.ctx.Done():
			return n.ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// Handle registers the handler of an RPC method other packages serve between nodes (the
// transaction coordinator's); the request and the answer travel as JSON.
func (n *Node) Handle(method string, h func(ctx context.Context, from int32, payload []byte) (any, error)) {
	n.rpc.handle(method, h)
}

// Call calls an RPC method on node to (this node's handler directly if to is this node) and
// decodes the answer into resp. An error the handler returned comes back with its message.
func (n *Node) Call(ctx context.Context, to int32, method string, req, resp any) error {
	return n.rpc.call(ctx, to, method, req, resp)
}

// HandleActive registers an RPC handler of the active controller: on another node the call is
// answered "not the controller", and CallController goes on to the active one.
func (n *Node) HandleActive(method string, h func(ctx context.Context, from int32, payload []byte) (any, error)) {
	n.rpc.handle(method, func(ctx context.Context, from int32, payload []byte) (any, error) {
		if n.activeDriver() == nil {
			return nil, n.notController()
		}
		return h(ctx, from, payload)
	})
}

// CallController calls an RPC of the active controller (a HandleActive handler), following its
// not-controller answers, until ctx ends.
func (n *Node) CallController(ctx context.Context, method string, req, resp any) error {
	return n.callController(ctx, method, req, resp)
}

// callController calls an RPC of the active controller, following its not-controller answers,
// until ctx ends.
func (n *Node) callController(ctx context.Context, method string, req, resp any) error {
	voters := n.askVoters()
	backoff := 10 * time.Millisecond
	for {
		target := n.ctrl.Leader()
		if target < 0 {
			// A broker learns the leader from the voters' answers: ask them in turn, carrying
			// on from where the last call stopped, so a silent voter is not asked first forever.
			target = voters[int(n.nextVoter.Add(1))%len(voters)]
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := n.rpc.call(cctx, target, method, req, resp)
		cancel()
		var re *rpcError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &re) && re.Code == codeNotController:
			if hint, perr := strconv.Atoi(re.Msg); perr == nil && hint >= 0 && int32(hint) != target {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				err = n.rpc.call(cctx, int32(hint), method, req, resp)
				cancel()
				if err == nil {
					return nil
				}
				if errors.As(err, &re) && re.Code != codeNotController {
					return err // the controller answered: a real failure
				}
			}
		case errors.As(err, &re):
			return err // the controller answered: a real failure
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s: no active controller answered: %w (last: %v)", method, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// reconciler applies each new image to the registry and the replicas.
func (n *Node) reconciler() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.recWake:
		}
		img := n.ctrl.Image()
		if img.ClusterID != "" {
			n.tr.SetClusterID(img.ClusterID)
		}
		if n.cfg.beforeReconcile != nil {
			n.cfg.beforeReconcile()
		}
		if !n.reconcile(img) {
			continue
		}
		n.recMu.Lock()
		n.reconciled = img.Index
		close(n.recCh)
		n.recCh = make(chan struct{})
		n.recMu.Unlock()
	}
}

func (n *Node) wakeReconciler() {
	select {
	case n.recWake <- struct{}{}:
	default:
	}
}

// waitReconciled waits until the registry and replicas reflect the image at index.
func (n *Node) waitReconciled(ctx context.Context, index uint64) error {
	for {
		n.recMu.Lock()
		done, ch := n.reconciled >= index, n.recCh
		n.recMu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reconcile makes the registry and the replicas match img. Until the image has this node's
// registration, it may be older than what the node acted on before a restart, so nothing is
// changed (a stale image could name a topic deleted meanwhile, or miss one created, or say this
// node still leads what it led): applied is false.
func (n *Node) reconcile(img *controller.Image) (applied bool) {
	if n.marks.lossUnsaid() {
		return false // no log opens until the node has registered again (join); register wakes us
	}
	if j := n.joinIndex.Load(); j == 0 || img.Index < j {
		return false
	}
	self := n.cfg.NodeID
	specs := make([]topics.TopicSpec, 0, len(img.Topics))
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		specs = append(specs, topics.TopicSpec{Name: t.Name, ID: t.ID, Configs: t.Configs, Partitions: int32(len(t.Partitions)),
			Hosted: func(i int32) bool { return slices.Contains(t.Partitions[i].Hosts(), self) }})
	}
	var nodeConfigs map[string]string
	if nd := img.Nodes[self]; nd != nil {
		nodeConfigs = nd.Configs
	}
	n.reg.Sync(specs, img.ClusterConfigs, nodeConfigs, topics.Hooks{
		Opened: func(t *topics.Topic, p *topics.Partition, dir string) (*replica.Replica, error) {
			return n.rm.Add(controller.PartitionRef{Topic: t.ID, Partition: p.Index}, t.Name, p.Log, n.cfg.FS, dir)
		},
		Closing: func(t *topics.Topic, p *topics.Partition) {
			n.rm.Remove(controller.PartitionRef{Topic: t.ID, Partition: p.Index})
		},
	})
	n.tendOffline(img)
	for _, rt := range n.reg.List() {
		it, ok := img.Topics[rt.Name]
		if !ok || it.ID != rt.ID {
			continue
		}
		minISR, _ := rt.Effective("min.insync.replicas")
		mi, _ := strconv.Atoi(minISR)
		for _, p := range rt.Partitions {
			if !p.Hosted() || int(p.Index) >= len(it.Partitions) {
				continue
			}
			ip := it.Partitions[p.Index]
			a := replica.Assignment{Epoch: ip.LeaderEpoch, Leader: ip.Leader, Sets: ip.CommitSets(), ISR: ip.ISR, TargetSynced: ip.TargetSynced,
				PartitionEpoch: ip.PartitionEpoch, ReplicasSince: ip.ReplicasSince, WriteCaching: p.Log.WriteCaching(), MinISR: mi,
				Ineligible: hostsWhere(img, ip, func(n *controller.Node) bool { return n.ShuttingDown || n.Fenced }),
				Fenced:     hostsWhere(img, ip, func(n *controller.Node) bool { return n.Fenced })}
			switch {
			case ip.Leader == self:
				a.Role = replica.RoleLeader
			case ip.Leader >= 0:
				a.Role = replica.RoleFollower
			}
			n.rm.Assign(controller.PartitionRef{Topic: rt.ID, Partition: p.Index}, a)
		}
	}
	return true
}

// hostsWhere returns the partition's replicas whose node is registered and has the property
// (nil: none): in controlled shutdown or fenced, which the ISR leaves out; fenced.
func hostsWhere(img *controller.Image, p *controller.Partition, has func(*controller.Node) bool) []int32 {
	var out []int32
	for _, set := range [2][]int32{p.Replicas, p.Target} {
		for _, id := range set {
			if n := img.Nodes[id]; n != nil && has(n) && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// tendOffline looks after the partitions this node should host and has not opened
// (topics.Registry.Unopened: a log that failed to open, a topic whose sync failed, a log a failed
// write poisoned). The reconciler wakes when the registry's next retry is due. A leadership img
// gives this node of one is handed on (begin-election: the other replicas elect; this node has
// no log to vote with), also once it opens while img still names it the leader of the epoch it
// was unopened in. Once it opens, an election that has found no leader since it was unopened
// (with one replica, or the others down, it cannot without this node, whose "not hosted here"
// the controller does not ask again) is begun again. Each request is repeated every
// offlineAskEvery while the image still needs it (a proposal can fail).
//
// The restart is a plain begin-election of the epoch the image shows leaderless: if that
// election finds its leader just before the restart applies, the restart deposes it and one
// more election runs. A flag "only while leaderless" would spare it, but voters of an older
// version would ignore the flag and apply the command differently.
func (n *Node) tendOffline(img *controller.Image) {
	self, now := n.cfg.NodeID, time.Now()
	var handOff, restart []controller.EpochRef
	seen := map[controller.PartitionRef]int32{}
	asked := map[controller.PartitionRef]offlineAsk{}
	var next time.Time
	ask := func(ref controller.PartitionRef, epoch int32, to *[]controller.EpochRef) {
		a, ok := n.offlineAsked[ref]
		if !ok || a.epoch != epoch || now.Sub(a.at) >= offlineAskEvery {
			a = offlineAsk{epoch: epoch, at: now}
			*to = append(*to, controller.EpochRef{PartitionRef: ref, Epoch: epoch})
		}
		asked[ref] = a
		if due := a.at.Add(offlineAskEvery); next.IsZero() || due.Before(next) {
			next = due
		}
	}
	img.EachPartition(func(t *controller.Topic, index int32, p *controller.Partition) {
		if !slices.Contains(p.Hosts(), self) {
			return
		}
		ref := controller.PartitionRef{Topic: t.ID, Partition: index}
		if n.reg.Unopened(t.ID, index) {
			seen[ref] = p.LeaderEpoch
			if p.Leader == self {
				ask(ref, p.LeaderEpoch, &handOff)
			}
			return
		}
		if e, ok := n.offlineEpoch[ref]; ok && p.LeaderEpoch == e {
			switch p.Leader {
			case -1:
				seen[ref] = e // until that election ends
				ask(ref, e, &restart)
			case self:
				// Still its leader in the epoch its log was not open in (or was poisoned in):
				// the replica opened since must not lead that epoch (its followers joined the
				// one before, or none), so the leadership is handed on until the epoch moves.
				seen[ref] = e
				ask(ref, e, &handOff)
			}
		}
	})
	n.offlineEpoch, n.offlineAsked = seen, asked
	for _, req := range []struct {
		items []controller.EpochRef
		what  string
	}{{handOff, "handing on the leadership of partitions whose logs are not open here"},
		{restart, "beginning again the elections of partitions whose logs opened here"}} {
		if len(req.items) == 0 {
			continue
		}
		n.logger.Warn("cluster: "+req.what, "partitions", len(req.items))
		go func() {
			ctx, cancel := context.WithTimeout(n.ctx, offlineAskEvery)
			defer cancel()
			if _, err := n.Propose(ctx, &controller.Command{Op: controller.OpBeginElection,
				BeginElection: &controller.BeginElection{Items: req.items}}); err != nil {
				n.logger.Error("cluster: "+req.what+"; asking again", "err", err)
			}
		}()
	}
	if n.retryTimer != nil {
		n.retryTimer.Stop()
		n.retryTimer = nil
	}
	if at, ok := n.reg.RetryAt(); ok && (next.IsZero() || at.Before(next)) {
		next = at
	}
	if !next.IsZero() {
		n.retryTimer = time.AfterFunc(max(time.Until(next), 0), n.wakeReconciler)
	}
}

// offlineAskEvery is how often tendOffline repeats a request the image does not show done.
const offlineAskEvery = 5 * time.Second

type offlineAsk struct {
	epoch int32
	at    time.Time
}

// Propose has the active controller apply cmd, and waits until this node's registry reflects
// it. The result's error is the command's (controller.ErrTopicExists, ...).
func (n *Node) Propose(ctx context.Context, cmd *controller.Command) (controller.Result, error) {
	if cmd.Req == nil { // every attempt below is the same request (controller/requests.go)
		cmd.Req = &controller.Request{Run: n.run, Seq: n.reqSeq.Add(1)}
	}
	var resp proposeResponse
	if err := n.callController(ctx, "propose", cmd, &resp); err != nil {
		return controller.Result{}, err
	}
	if err := n.waitReconciled(ctx, resp.Index); err != nil {
		return controller.Result{}, err
	}
	return controller.Result{Err: decodeApplyError(resp.Code, resp.Msg), Value: resp.Value}, nil
}

// ControllerReachable reports whether the active controller answered a heartbeat of this node
// within d (and the node has joined).
func (n *Node) ControllerReachable(d time.Duration) bool {
	return time.Since(time.Unix(0, n.controllerHeard.Load())) < d
}

// Incarnation returns this node's current registration (0 before it registered).
func (n *Node) Incarnation() uint64 { return n.incarnation.Load() }

// Run returns this process run's id: the writer id of the object files it writes.
func (n *Node) Run() string { return n.run }

func newRunID(node int32) string {
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("%d-%s", node, hex.EncodeToString(b[:]))
}

// CommitFile has the active controller commit an object file and waits until this node's
// image has the commit (so a fetch here sees what the answer acknowledges). It returns the
// commit's answer per section and batch meta (Result.Commit), or Result.AlreadyCommitted. On an
// error the outcome is unknown: the caller retries the same commit, which is idempotent.
func (n *Node) CommitFile(ctx context.Context, c *controller.CommitFile) (controller.Result, error) {
	var resp proposeResponse
	cmd := &controller.Command{Op: controller.OpCommitFile, CommitFile: c}
	if err := n.callController(ctx, "propose", cmd, &resp); err != nil {
		return controller.Result{}, err
	}
	// Answered: the outcome is known, and ctx ending now (a writer giving up on a controller
	// that went quiet: Ripcord) must not turn it into a failure. This node's image catches up
	// on its own, as long as it gets the entry.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitApplyWait)
	defer cancel()
	if err := n.ctrl.WaitApplied(wctx, resp.Index); err != nil {
		return controller.Result{}, err
	}
	if err := decodeApplyError(resp.Code, resp.Msg); err != nil {
		return controller.Result{}, err
	}
	if !resp.AlreadyCommitted && len(resp.Commit) != len(c.Sections) {
		return controller.Result{}, fmt.Errorf("cluster: commit of %s answered for %d sections of %d", c.Key, len(resp.Commit), len(c.Sections))
	}
	return controller.Result{Commit: resp.Commit, AlreadyCommitted: resp.AlreadyCommitted}, nil
}

// commitApplyWait bounds CommitFile's wait for this node's image to apply an answered commit.
const commitApplyWait = 5 * time.Second

// ProposeApplied has the active controller apply cmd and waits until this node's image has it
// (not its registry: for commands that change no topic or partition set).
func (n *Node) ProposeApplied(ctx context.Context, cmd *controller.Command) error {
	var resp proposeResponse
	if err := n.callController(ctx, "propose", cmd, &resp); err != nil {
		return err
	}
	if err := n.ctrl.WaitApplied(ctx, resp.Index); err != nil {
		return err
	}
	return decodeApplyError(resp.Code, resp.Msg)
}

// Barrier waits until this node's image has everything the controller committed before the
// call (controller.Barrier): an answer given from the image after it is never older than one
// any node gave before.
func (n *Node) Barrier(ctx context.Context) error { return n.ctrl.Barrier(ctx) }

// BarrierReconciled is Barrier, and then waits until the registry and replicas reflect the image
// too (what a topic's lookup by name answers from).
func (n *Node) BarrierReconciled(ctx context.Context) error {
	idx, err := n.ctrl.ReadIndex(ctx)
	if err != nil {
		return err
	}
	if err := n.ctrl.WaitApplied(ctx, idx); err != nil {
		return err
	}
	return n.waitReconciled(ctx, idx)
}

// ImageChanged returns a channel closed the next time this node's image moves.
func (n *Node) ImageChanged() <-chan struct{} { return n.ctrl.Applied() }

type proposeResponse struct {
	Index  uint64                      `json:"index"`
	Value  int64                       `json:"value"`
	Code   string                      `json:"code,omitempty"`
	Msg    string                      `json:"msg,omitempty"`
	Commit [][]controller.BatchOutcome `json:"commit,omitempty"`
	// AlreadyCommitted: see controller.Result.
	AlreadyCommitted bool `json:"already_committed,omitempty"`
}

var applyErrors = map[string]error{
	"topic-exists":        controller.ErrTopicExists,
	"unknown-topic":       controller.ErrUnknownTopic,
	"unknown-node":        controller.ErrUnknownNode,
	"bad-assignment":      controller.ErrBadAssignment,
	"no-reassignment":     controller.ErrNoReassignment,
	"reassign-not-synced": controller.ErrReassignNotSynced,
	"configs-changed":     controller.ErrConfigsChanged,
	"commit-forgotten":    controller.ErrCommitForgotten,
	"stale-writer":        controller.ErrStaleWriter,
	"merge-stale":         objtopic.ErrMergeStale,
	"node-live":           controller.ErrNodeLive,
	"node-hosts-replicas": controller.ErrNodeHostsReplicas,
	"node-is-voter":       controller.ErrNodeIsVoter,
	"level-pending":       controller.ErrLevelPending,
	"nodes-changed":       controller.ErrNodesChanged,
	"level-change":        controller.ErrLevelChange,
	// A transaction marker the producer state refuses (controller.ObjectMarker).
	"invalid-producer-epoch": kerr.InvalidProducerEpoch,
	"coordinator-fenced":     kerr.TransactionCoordinatorFenced,
}

func encodeApplyError(err error) (string, string) {
	if err == nil {
		return "", ""
	}
	for code, e := range applyErrors {
		if errors.Is(err, e) {
			return code, err.Error()
		}
	}
	return "failed", err.Error()
}

func decodeApplyError(code, msg string) error {
	if code == "" {
		return nil
	}
	if e, ok := applyErrors[code]; ok {
		return &applyError{e, msg}
	}
	return errors.New(msg)
}

type applyError struct {
	sentinel error
	msg      string
}

func (e *applyError) Error() string { return e.msg }
func (e *applyError) Unwrap() error { return e.sentinel }

func (n *Node) reportISR(items []controller.ISRItem) {
	if !n.isrBusy.CompareAndSwap(false, true) {
		return // one report at a time; the replicas report again if the image still differs
	}
	go func() {
		defer n.isrBusy.Store(false)
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		defer cancel()
		if _, err := n.Propose(ctx, &controller.Command{Op: controller.OpSetISR, SetISR: &controller.SetISR{Items: items}}); err != nil {
			n.logger.Debug("cluster: reporting in-sync replicas", "err", err)
		}
	}()
}

func (n *Node) reportFailed(ref controller.EpochRef) {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	n.logger.Warn("cluster: the log of a partition led here failed; asking for another leader", "partition", ref.PartitionRef.String(), "epoch", ref.Epoch)
	if _, err := n.Propose(ctx, &controller.Command{Op: controller.OpBeginElection,
		BeginElection: &controller.BeginElection{Items: []controller.EpochRef{ref}}}); err != nil {
		n.logger.Error("cluster: asking for another leader", "partition", ref.PartitionRef.String(), "err", err)
	}
}

// WaitLeaders waits until every partition hosted here that can have a leader has one: a
// restarted node's partitions get new leaders (new epochs) once it registers, and clients that
// come right away should find them. A partition without a live majority of replicas cannot
// have a leader and is not waited for.
func (n *Node) WaitLeaders(ctx context.Context) error {
	for {
		ch := n.ctrl.Applied()
		if n.leaderless() == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("cluster: %d partitions hosted here still have no leader: %w", n.leaderless(), ctx.Err())
		}
	}
}

func (n *Node) leaderless() int {
	img := n.ctrl.Image()
	count := 0
	img.EachPartition(func(t *controller.Topic, index int32, p *controller.Partition) {
		if p.Leader >= 0 || !slices.Contains(p.Hosts(), n.cfg.NodeID) {
			return
		}
		offline := n.reg.Unopened(t.ID, index) // here: this node cannot vote
		live := 0
		for _, id := range p.Replicas { // an election needs a majority of them (controller.Active.tally)
			if img.Live(id) && !(offline && id == n.cfg.NodeID) {
				live++
			}
		}
		if live >= len(p.Replicas)/2+1 {
			count++
		}
	})
	return count
}
