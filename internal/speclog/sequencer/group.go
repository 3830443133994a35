package sequencer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/runnel-dev/runnel/internal/raftlog"
	"github.com/runnel-dev/runnel/internal/speclog/order"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// Transport kinds of the sequencer group's frames on the cluster transport.
const (
	KindRaft   transport.Kind = 20 // a raftpb.Message of the sequencer group
	KindReport transport.Kind = 21 // a shard's report, to the group's leader (JSON wire)
	KindSignal transport.Kind = 22 // a lag-fix signal, to a shard's node (JSON wire)
	KindJoin   transport.Kind = 23 // a shard asks to take part again (JSON wire)
	KindTrim   transport.Kind = 24 // a node asks the leader to trim a topic (JSON wire)
)

// wire is the body of KindReport, KindSignal, KindJoin and KindTrim frames.
type wire struct {
	Topic  string        `json:"topic"`
	Report *order.Report `json:"report,omitempty"`
	Signal *order.Signal `json:"signal,omitempty"`
	Shard  int32         `json:"shard,omitempty"` // KindJoin
	Trim   uint64        `json:"trim,omitempty"`  // KindTrim: positions below are to be trimmed
}

// Spec is a total-order topic as the metadata has it: what the group's leader keeps its
// state in line with.
type Spec struct {
	ID     string
	Name   string
	Shards int32
	Config order.Config
}

// Config configures a Group.
type Config struct {
	NodeID int32
	// OnWALSync, if set, is told the duration of every fsync of the group's Raft log: a cut
	// commits only after one (the sequencer's share of a confirmation's latency).
	OnWALSync func(time.Duration)
	// Voters are the controller quorum's voters. A node that is not one is a Raft learner of
	// the group: it receives the committed cuts (and snapshots) without voting, so the
	// total-order shards it leads follow the sequencer like those on the voters.
	Voters []int32
	// Members lists the nodes that should follow the group (every registered serve node; the
	// leader adds those that are not voters as learners, one at a time, and removes learners
	// no longer listed). nil: the voters only.
	Members func() []int32
	// TargetVoters lists the voters the group should have: the controller's voters as they
	// change (KIP-853's AddRaftVoter and RemoveRaftVoter). The leader promotes a learner of it
	// once its log has caught up, then removes a voter not in it. nil or empty: the voters stay.
	TargetVoters func() []int32
	FS           vfs.FS
	Dir          string // <data-dir>/sequencer
	// Send sends a frame to a node (the cluster transport's Send); body is the callee's.
	Send func(to int32, kind transport.Kind, body []byte)
	// OnRemoved is called on the loop goroutine when a node is removed from the group, after
	// the messages raft had for it were handed to Send. It must not block.
	OnRemoved func(node int32)
	// OnFailure is called once, on its own goroutine, when the group's member stops because its
	// Raft log could not be made durable: the node should stop (as for the controller's log).
	OnFailure func(err error)
	Logger    *slog.Logger
	// Topics lists the total-order topics the metadata holds, and the index of the metadata
	// image it read them from (called by the leader, on its loop, every ReconcileInterval).
	Topics func() (specs []Spec, metaIndex uint64)
	// OnSignal delivers a lag-fix signal for a shard led on this node.
	OnSignal func(topic string, s order.Signal)
	// Takeover tells whether another replica can take a lagging shard over, or has (the topic
	// by its sequencer key; ran: the node the shard last reported from, -1 none): the leader
	// then waits Config.Takeover for it instead of failing the shard
	// (order.Leader.SetTakeover). nil: never.
	Takeover func(topic string, shard, ran int32) bool

	TickInterval      time.Duration // Raft ticks; default 50 ms
	ElectionTicks     int           // default 10
	OrderInterval     time.Duration // the leader logic's clock; default 500 µs (half the default T_ord)
	ReconcileInterval time.Duration // default 100 ms
	SnapshotEvery     uint64        // entries between snapshots; default 10,000
}

// Group is this node's member of the sequencer group.
type Group struct {
	cfg    Config
	logger *slog.Logger
	rn     *raft.RawNode
	store  *raftlog.Storage

	recvc    chan *pb.Message
	reportc  chan inReport
	joinc    chan wire
	trimc    chan trimReq
	resignc  chan struct{} // Resign's requests
	stop     chan struct{}
	stopOnce sync.Once   // closes stop: Stop, or the loop when it fails
	stopped  sync.Once   // Stop's release of the log
	running  atomic.Bool // Start was called
	done     chan struct{}

	leader  atomic.Int32
	voters  atomic.Pointer[[]int32] // the applied configuration's voters, sorted
	members atomic.Pointer[[]int32] // its voters and learners, sorted
	// The raft index applied, and the one the log is compacted to (a member behind it catches
	// up by a snapshot), as the loop last published them.
	appliedIndex, compactedIndex atomic.Uint64

	mu        sync.Mutex // guards machine (written by the loop) and changed
	machine   *Machine
	changed   chan struct{} // closed and replaced when the machine moves
	confState *pb.ConfState
	applied   uint64
	// pendingConf: a membership change this node proposed as leader (at pendingSince) is not
	// applied yet (raft takes one at a time).
	pendingConf  bool
	pendingSince time.Time

	// The leader's soft state, owned by the loop.
	leaders   map[string]*order.Leader
	shardNode map[string]map[int32]int32 // the node each shard last reported from
	// Decisions are made from the applied state, so only once it has everything the log
	// holds that they depend on: termApplied, this leader's first entry of its term is
	// applied (and with it every entry of its predecessors); logEnd, the last index in this
	// node's log; redecideAt, per topic whose leader logic was dropped (a decision refused or
	// not proposed), the log end then: its successor starts once that is applied, not while
	// the dropped one's proposals are in flight. A decision from a state that trails them
	// would be stale: a Fail after cuts it did not know, a second table for a window, a Join
	// of a shard taken back (State.Apply refuses those it can tell; the others are not made).
	termApplied bool
	logEnd      uint64
	redecideAt  map[string]uint64
}

type inReport struct {
	topic string
	r     order.Report
	from  int32
}

type trimReq struct {
	topic string
	upTo  uint64
	err   chan error
}

// Errors of the group.
var (
	ErrNotLeader = errors.New("sequencer: this node does not lead the sequencer group")
	ErrStopped   = errors.New("sequencer: stopped")
)

var raftID, nodeID = raftlog.RaftID, raftlog.NodeID

// Open loads the group's state from cfg.Dir (a voter's first start bootstraps the voter
// configuration) and returns a group ready to Start.
func Open(cfg Config) (*Group, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if len(cfg.Voters) == 0 {
		cfg.Voters = []int32{cfg.NodeID}
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 50 * time.Millisecond
	}
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.OrderInterval <= 0 {
		cfg.OrderInterval = 500 * time.Microsecond
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = 100 * time.Millisecond
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = 10000
	}
	boot := raftlog.BootVoters(cfg.Voters, cfg.NodeID)
	st, data, err := raftlog.Open(cfg.FS, cfg.Dir, boot, NewMachine().Encode())
	if err != nil {
		return nil, err
	}
	st.ObserveSyncs(cfg.OnWALSync)
	m, err := DecodeMachine(data)
	if err != nil {
		st.Close()
		return nil, err
	}
	snap, _ := st.Snapshot()
	g := &Group{cfg: cfg, logger: cfg.Logger, store: st, recvc: make(chan *pb.Message, 4096), reportc: make(chan inReport, 4096),
		joinc: make(chan wire, 64), trimc: make(chan trimReq, 16), resignc: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		machine: m, changed: make(chan struct{}), confState: pb.EnsureConfState(snap.GetMetadata().GetConfState()),
		applied: snap.GetMetadata().GetIndex(), leaders: map[string]*order.Leader{}, shardNode: map[string]map[int32]int32{}}
	g.leader.Store(-1)
	g.setVoters()
	rn, err := raft.NewRawNode(raftlog.Config(raftID(cfg.NodeID), cfg.ElectionTicks, st, g.applied, cfg.Logger))
	if err != nil {
		st.Close()
		return nil, err
	}
	g.rn = rn
	return g, nil
}

// Start runs the group's loop until Stop.
func (g *Group) Start() {
	g.running.Store(true)
	go g.run()
}

// Stop ends the loop and closes the log.
func (g *Group) Stop() {
	g.stopOnce.Do(func() { close(g.stop) })
	g.stopped.Do(func() {
		if g.running.Load() { // a group that never started has no loop to wait for
			<-g.done
		}
		g.store.Close()
	})
}

// Leader is the node leading the group, or -1.
func (g *Group) Leader() int32 { return g.leader.Load() }

// Resign hands this node's leadership of the group to the voter whose log is furthest along,
// and waits until it no longer leads or ctx ends (a node stopping: the sequencer's successor
// takes over at once, not after an election timeout). Not leading, or the only voter: nothing
// to do.
func (g *Group) Resign(ctx context.Context) error {
	if len(g.Voters()) < 2 {
		return nil
	}
	return raftlog.Resign(ctx, g.isLeader, raftlog.Asker(g.resignc, g.stop, ErrStopped), 100*time.Millisecond)
}

// Indexes returns the raft index this member has applied, and the one its log is compacted to:
// a member that has applied less than the leader's compacted index catches up by a snapshot.
func (g *Group) Indexes() (applied, compacted uint64) {
	return g.appliedIndex.Load(), g.compactedIndex.Load()
}

// Voters returns the group's voters as its applied configuration has them (sorted).
func (g *Group) Voters() []int32 { return slices.Clone(*g.voters.Load()) }

// setVoters publishes the applied configuration's voters (the loop owns confState).
func (g *Group) setVoters() {
	var v []int32
	for _, id := range g.confState.GetVoters() {
		v = append(v, nodeID(id))
	}
	slices.Sort(v)
	g.voters.Store(&v)
	m := slices.Clone(v)
	for _, id := range slices.Concat(g.confState.GetLearners(), g.confState.GetLearnersNext()) {
		m = append(m, nodeID(id))
	}
	slices.Sort(m)
	g.members.Store(&m)
}

// Members returns the group's voters and learners as its applied configuration has them
// (sorted): every node that receives its log.
func (g *Group) Members() []int32 { return slices.Clone(*g.members.Load()) }

// Handle takes a frame of one of the group's kinds from a peer.
func (g *Group) Handle(from int32, kind transport.Kind, body []byte) {
	switch kind {
	case KindRaft:
		m := &pb.Message{}
		if err := proto.Unmarshal(body, m); err != nil || m.GetFrom() != raftID(from) {
			g.logger.Warn("sequencer: dropping a bad raft message", "from", from, "err", err)
			return
		}
		select {
		case g.recvc <- m:
		default: // raft recovers from lost messages
		}
		return
	}
	var w wire
	if err := json.Unmarshal(body, &w); err != nil {
		g.logger.Warn("sequencer: dropping a malformed frame", "from", from, "kind", kind, "err", err)
		return
	}
	switch {
	case kind == KindReport && w.Report != nil:
		select {
		case g.reportc <- inReport{w.Topic, *w.Report, from}:
		default: // the shard re-sends
		}
	case kind == KindSignal && w.Signal != nil:
		if g.cfg.OnSignal != nil {
			g.cfg.OnSignal(w.Topic, *w.Signal)
		}
	case kind == KindJoin:
		select {
		case g.joinc <- w:
		default:
		}
	case kind == KindTrim && w.Trim > 0:
		select {
		case g.trimc <- trimReq{topic: w.Topic, upTo: w.Trim}:
		default: // the asking node asks again until the trim is applied
		}
	}
}

// Report sends a shard's report to the group's leader (dropped if none is known: the shard
// re-sends it).
func (g *Group) Report(topic string, r order.Report) {
	switch l := g.leader.Load(); l {
	case -1:
	case g.cfg.NodeID:
		select {
		case g.reportc <- inReport{topic, r, g.cfg.NodeID}:
		default:
		}
	default:
		g.send(l, KindReport, wire{Topic: topic, Report: &r})
	}
}

// Join asks the leader to take a shard that was failed back into the topic's next table.
func (g *Group) Join(topic string, shard int32) {
	switch l := g.leader.Load(); l {
	case -1:
	case g.cfg.NodeID:
		select {
		case g.joinc <- wire{Topic: topic, Shard: shard}:
		default:
		}
	default:
		g.send(l, KindJoin, wire{Topic: topic, Shard: shard})
	}
}

// Trim asks for a topic's positions below upTo to be trimmed. On the leader it proposes the
// trim and returns once proposed; elsewhere it sends the request to the leader and returns at
// once (the frame may be lost: the caller waits for the trim to be applied and asks again).
// ErrNotLeader: no leader is known.
func (g *Group) Trim(topic string, upTo uint64) error {
	switch l := g.leader.Load(); l {
	case -1:
		return ErrNotLeader
	case g.cfg.NodeID:
	default:
		g.send(l, KindTrim, wire{Topic: topic, Trim: upTo})
		return nil
	}
	req := trimReq{topic, upTo, make(chan error, 1)}
	select {
	case g.trimc <- req:
	case <-g.stop:
		return ErrStopped
	}
	select {
	case err := <-req.err:
		return err
	case <-g.stop:
		return ErrStopped
	}
}

func (g *Group) send(to int32, kind transport.Kind, w wire) {
	b, err := json.Marshal(w)
	if err != nil {
		panic(err)
	}
	g.cfg.Send(to, kind, b)
}

// Changed returns a channel closed the next time the state moves.
func (g *Group) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// Snapshot is a copy of a topic's state and the count of its entries it holds; false if the
// group has no such topic.
func (g *Group) Snapshot(topic string) (st *order.State, seq uint64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	tp := g.machine.Topics[topic]
	if tp == nil {
		return nil, 0, false
	}
	return tp.State.Clone(), tp.Seq, true
}

// Since returns a copy of a topic's entries from seq on; false if the topic is gone or the
// entries are no longer kept (start again from Snapshot).
func (g *Group) Since(topic string, seq uint64) ([]order.Entry, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	tp := g.machine.Topics[topic]
	if tp == nil {
		return nil, false
	}
	e, ok := tp.Since(seq)
	return slices.Clone(e), ok
}

// TrimPoint is a topic's trim point (positions below are trimmed; 0: none) and a shard's log
// start for it (its first slot at or after it).
func (g *Group) TrimPoint(topic string, shard int32) (upTo uint64, start int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if tp := g.machine.Topics[topic]; tp != nil && tp.Trimmed > 0 {
		return tp.Trimmed, tp.State.FirstSlot(shard, tp.Trimmed)
	}
	return 0, 0
}

// SlotEnd is the position after a shard's slot, or after its last committed slot if that one
// is not committed yet; false if the shard has no committed slot or the slot is trimmed.
func (g *Group) SlotEnd(topic string, shard int32, slot int64) (end uint64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	tp := g.machine.Topics[topic]
	if tp == nil {
		return 0, false
	}
	if slot = min(slot, tp.State.Slots[shard]-1); slot < 0 {
		return 0, false
	}
	p, ok := tp.State.Position(shard, slot)
	return p + 1, ok
}

// Read runs f on a topic's state under the group's lock (f must not keep it).
func (g *Group) Read(topic string, f func(t *Topic)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	tp := g.machine.Topics[topic]
	if tp == nil {
		return false
	}
	f(tp)
	return true
}

func (g *Group) run() {
	defer close(g.done)
	raftTick := time.NewTicker(g.cfg.TickInterval)
	defer raftTick.Stop()
	orderTick := time.NewTicker(g.cfg.OrderInterval)
	defer orderTick.Stop()
	reconcile := time.NewTicker(g.cfg.ReconcileInterval)
	defer reconcile.Stop()
	if len(g.cfg.Voters) == 1 && g.cfg.Voters[0] == g.cfg.NodeID && len(g.confState.GetVoters()) == 1 {
		g.rn.Campaign() // a quorum of one need not wait an election timeout
	}
	if !g.ready() {
		return
	}
	for {
		drive := false
		select {
		case <-g.stop:
			return
		case <-raftTick.C:
			g.rn.Tick()
		case m := <-g.recvc:
			g.rn.Step(m)
		drain:
			for range 256 {
				select {
				case m := <-g.recvc:
					g.rn.Step(m)
				default:
					break drain
				}
			}
		case r := <-g.reportc:
			g.takeReport(r)
		drainReports:
			for range 1024 { // every report that has arrived, then one decision
				select {
				case r := <-g.reportc:
					g.takeReport(r)
				default:
					break drainReports
				}
			}
			drive = true
		case <-orderTick.C:
			drive = true
		case w := <-g.joinc:
			g.join(w)
		case t := <-g.trimc:
			err := ErrNotLeader
			if g.isLeader() {
				err = g.propose(&Command{Topic: t.topic, Trim: &t.upTo})
			}
			if t.err != nil {
				t.err <- err
			}
		case <-g.resignc:
			if g.isLeader() {
				raftlog.HandOff(g.rn, raftID(g.cfg.NodeID))
			}
		case <-reconcile.C:
			g.reconcile()
		}
		if drive {
			g.drive(time.Now())
		}
		if !g.ready() {
			return
		}
	}
}

// ready runs handleReady and reports whether the loop may go on. If it failed, the member stops
// for good (STYLE §8): a log that could not be made durable must not be acknowledged as if it
// were, nor this member vote or lead with entries it may not have. Nothing more is persisted,
// sent or applied; callers waiting on the loop get ErrStopped, and OnFailure tells the node,
// which stops. A restart recovers from the WAL.
func (g *Group) ready() bool {
	err := g.handleReady()
	if err == nil {
		return true
	}
	err = fmt.Errorf("sequencer: persisting the raft log: %w", err)
	g.logger.Error("sequencer: stopping", "err", err)
	g.setLeader(raft.None) // leads no more
	g.stopOnce.Do(func() { close(g.stop) })
	if f := g.cfg.OnFailure; f != nil {
		go f(err)
	}
	return false
}

func (g *Group) isLeader() bool { return g.leader.Load() == g.cfg.NodeID }

// IsLeader reports whether this node leads the group.
func (g *Group) IsLeader() bool { return g.isLeader() }

// topicLeader is the leader logic of a topic, started from the applied state when needed.
func (g *Group) topicLeader(topic string) *order.Leader {
	l := g.leaders[topic]
	if l == nil {
		t := g.machine.Topics[topic]
		if t == nil || !g.termApplied || g.applied < g.redecideAt[topic] {
			return nil
		}
		delete(g.redecideAt, topic)
		l = order.NewLeader(t.State)
		if g.cfg.Takeover != nil {
			l.SetTakeover(func(sh int32) bool {
				ran, ok := g.shardNode[topic][sh]
				if !ok {
					ran = -1
				}
				return g.cfg.Takeover(topic, sh, ran)
			})
		}
		g.leaders[topic] = l
	}
	return l
}

func (g *Group) takeReport(r inReport) {
	if !g.isLeader() {
		return
	}
	l := g.topicLeader(r.topic)
	if l == nil {
		return
	}
	l.Report(r.r, time.Now()) // on the loop, the state's only writer: no lock
	nodes := g.shardNode[r.topic]
	if nodes == nil {
		nodes = map[int32]int32{}
		g.shardNode[r.topic] = nodes
	}
	nodes[r.r.Shard] = r.from
}

// drive runs every topic's leader logic and proposes its decisions.
func (g *Group) drive(now time.Time) {
	if !g.isLeader() {
		return
	}
	for _, topic := range slices.Sorted(maps.Keys(g.machine.Topics)) {
		l := g.topicLeader(topic)
		if l == nil {
			continue
		}
		entries, signals := l.Tick(now)
		if len(entries) > 0 {
			if err := g.propose(&Command{Topic: topic, Entries: entries}); err != nil {
				g.redecide(topic) // its decisions were dropped: decide again from the applied state
			}
		}
		for _, s := range signals {
			node, ok := g.shardNode[topic][s.Shard]
			switch {
			case !ok:
			case node == g.cfg.NodeID:
				if g.cfg.OnSignal != nil {
					g.cfg.OnSignal(topic, s)
				}
			default:
				g.send(node, KindSignal, wire{Topic: topic, Signal: &s})
			}
		}
	}
}

// redecide drops a topic's leader logic: its successor starts from the applied state once
// every entry in the log now is applied.
func (g *Group) redecide(topic string) {
	delete(g.leaders, topic)
	if g.redecideAt == nil {
		g.redecideAt = map[string]uint64{}
	}
	g.redecideAt[topic] = g.logEnd
}

func (g *Group) join(w wire) {
	if !g.isLeader() || !g.termApplied {
		return
	}
	t := g.machine.Topics[w.Topic]
	if t == nil || !t.State.Out[w.Shard] || t.State.Joining[w.Shard] {
		return
	}
	g.propose(&Command{Topic: w.Topic, Entries: []order.Entry{{Join: &order.JoinEntry{Shard: w.Shard}}}})
}

// reconcile, on the leader, creates the metadata's total-order topics the group lacks, drops
// those it no longer has, joins partitions added to a topic, and brings the learners in line
// with Members.
func (g *Group) reconcile() {
	if !g.isLeader() || !g.termApplied {
		return
	}
	g.reconcileLearners()
	if g.cfg.Topics == nil {
		return
	}
	specs, metaIndex := g.cfg.Topics()
	want := map[string]bool{}
	for _, s := range specs {
		want[s.ID] = true
		t := g.machine.Topics[s.ID]
		if t == nil {
			shards := make([]int32, s.Shards)
			for i := range shards {
				shards[i] = int32(i)
			}
			g.propose(&Command{Topic: s.ID, Create: &Create{Name: s.Name, Shards: shards, Config: s.Config, MetaIndex: metaIndex}})
			continue
		}
		for sh := range s.Shards {
			if !t.State.Known(sh) && !t.State.Joining[sh] {
				g.propose(&Command{Topic: s.ID, Entries: []order.Entry{{Join: &order.JoinEntry{Shard: sh}}}})
			}
		}
	}
	for id, t := range g.machine.Topics {
		// Gone from an image at least as new as the one it was created from: deleted (a topic
		// id is never used again). From an older image (this node's metadata trails, as just
		// after a restart), it is not known yet: dropping it would lose its order.
		if !want[id] && metaIndex >= t.MetaIndex {
			g.propose(&Command{Topic: id, Drop: true})
		}
	}
}

// promoteLag is how far behind the commit index a learner's log may be for the sequencer's
// leader to make it a voter (cuts commit every millisecond: a follower's acknowledged index
// trails by the appends in flight).
const promoteLag = 256

// reconcileLearners, on the leader, makes one membership change towards Members and
// TargetVoters (raftlog.MembershipChange).
func (g *Group) reconcileLearners() {
	if g.pendingConf && time.Since(g.pendingSince) > 10*time.Second {
		g.pendingConf = false // raft dropped it (it drops a change it cannot take): propose again
	}
	if g.pendingConf || g.cfg.Members == nil {
		return
	}
	var want, voters []uint64
	for _, n := range g.cfg.Members() {
		want = append(want, raftID(n))
	}
	if g.cfg.TargetVoters != nil {
		for _, n := range g.cfg.TargetVoters() {
			voters = append(voters, raftID(n))
		}
	}
	st := g.rn.Status()
	caughtUp := func(id uint64) bool {
		pr, ok := st.Progress[id]
		return ok && pr.RecentActive && pr.State == tracker.StateReplicate && pr.Match+promoteLag >= st.HardState.GetCommit()
	}
	cc := raftlog.MembershipChange(g.confState, want, voters, func(id uint64) bool { return slices.Contains(want, id) }, caughtUp)
	if cc == nil {
		return
	}
	// A voter change must leave voters of which a majority is live; else wait.
	var next []uint64
	switch id := cc.GetNodeId(); {
	case cc.GetType() == pb.ConfChangeType_ConfChangeAddNode:
		next = append(slices.Clone(g.confState.GetVoters()), id)
	case cc.GetType() == pb.ConfChangeType_ConfChangeRemoveNode && slices.Contains(g.confState.GetVoters(), id):
		next = slices.DeleteFunc(slices.Clone(g.confState.GetVoters()), func(v uint64) bool { return v == id })
	}
	if next != nil {
		live := 0
		for _, v := range next {
			if v == st.ID || st.Progress[v].RecentActive {
				live++
			}
		}
		if live <= len(next)/2 {
			return
		}
	}
	if err := g.rn.ProposeConfChange(cc); err == nil {
		g.pendingConf, g.pendingSince = true, time.Now()
		g.logger.Info("sequencer: membership change", "change", cc.GetType().String(), "node", nodeID(cc.GetNodeId()))
	}
}

func (g *Group) propose(c *Command) error {
	err := g.rn.Propose(EncodeCommand(c))
	if errors.Is(err, raft.ErrProposalDropped) {
		return ErrNotLeader
	}
	return err
}

// handleReady persists, sends and applies what raft has ready, in Raft's order.
func (g *Group) handleReady() error {
	for g.rn.HasReady() {
		rd := g.rn.Ready()
		if rd.SoftState != nil {
			g.setLeader(rd.SoftState.Lead)
		}
		if !raft.IsEmptySnap(rd.Snapshot) {
			m, err := DecodeMachine(rd.Snapshot.GetData())
			if err != nil {
				return err
			}
			if err := g.store.InstallSnapshot(rd.Snapshot); err != nil {
				return err
			}
			g.mu.Lock()
			g.machine = m
			g.mu.Unlock()
			g.applied = rd.Snapshot.GetMetadata().GetIndex()
			g.logEnd = max(g.logEnd, g.applied)
			g.appliedIndex.Store(g.applied)
			g.compactedIndex.Store(g.applied)
			g.confState = pb.EnsureConfState(rd.Snapshot.GetMetadata().GetConfState())
			g.setVoters()
			clear(g.leaders)
			g.publish()
		}
		if err := g.store.Save(rd.HardState, rd.Entries, rd.MustSync); err != nil {
			return err
		}
		if n := len(rd.Entries); n > 0 {
			g.logEnd = rd.Entries[n-1].GetIndex() // a follower's log may also end lower now
		}
		snapshotsTo, err := raftlog.SendMessages(rd.Messages, func(to int32, body []byte) { g.cfg.Send(to, KindRaft, body) }, nil)
		if err != nil {
			return err
		}
		if err := g.apply(rd.CommittedEntries); err != nil {
			return err
		}
		g.rn.Advance(rd)
		raftlog.ReportSnapshots(g.rn, snapshotsTo)
	}
	return nil
}

func (g *Group) setLeader(lead uint64) {
	l := int32(-1)
	if lead != raft.None {
		l = nodeID(lead)
	}
	if old := g.leader.Swap(l); old != l {
		g.logger.Info("sequencer: leader changed", "leader", l, "this_node", g.cfg.NodeID)
		clear(g.leaders) // a new leader starts from the applied state; shards re-send reports
		clear(g.shardNode)
		clear(g.redecideAt)
		g.termApplied = false
		g.pendingConf = false // a change proposed before may have been dropped
	}
}

func (g *Group) apply(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	changed, confChanged := false, false
	g.mu.Lock()
	for _, e := range ents {
		switch e.GetType() {
		case pb.EntryType_EntryNormal:
			if len(e.GetData()) == 0 {
				// Raft's entry at a leader's start: applied, so is everything before it.
				if g.isLeader() && e.GetTerm() == g.rn.BasicStatus().HardState.GetTerm() {
					g.termApplied = true
				}
				break
			}
			c, err := DecodeCommand(e.GetData())
			if err != nil {
				g.logger.Error("sequencer: skipping an undecodable command", "index", e.GetIndex(), "err", err)
				break
			}
			ch, err := g.machine.Apply(c)
			if err != nil { // deterministic on every replica; the leader decides again
				g.logger.Debug("sequencer: skipped a stale decision", "err", err)
				g.redecide(c.Topic)
			}
			changed = changed || ch
		case pb.EntryType_EntryConfChange, pb.EntryType_EntryConfChangeV2:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				g.mu.Unlock()
				return err
			}
			g.confState = g.rn.ApplyConfChange(&cc)
			g.setVoters()
			g.pendingConf = false
			confChanged = true
			if id, ok := raftlog.Removed(&cc); ok && g.cfg.OnRemoved != nil {
				g.cfg.OnRemoved(id)
			}
		}
		g.applied = e.GetIndex()
	}
	// A learner can only take a snapshot that names it: after a membership change, snapshot at
	// once, so the leader never offers a new learner an older snapshot it would refuse.
	var snap []byte
	if confChanged || g.applied-g.store.SnapIndex() >= g.cfg.SnapshotEvery {
		snap = g.machine.Encode()
	}
	g.mu.Unlock()
	g.appliedIndex.Store(g.applied)
	if snap != nil {
		if err := g.store.SaveSnapshot(g.applied, g.confState, snap); err != nil {
			return err
		}
		g.compactedIndex.Store(g.applied)
	}
	if changed {
		g.publish()
	}
	return nil
}

func (g *Group) publish() {
	g.mu.Lock()
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}
