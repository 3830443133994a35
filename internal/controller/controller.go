package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/runnel-dev/runnel/internal/raftlog"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// Errors of the controller.
var (
	ErrNotLeader = errors.New("controller: this node is not the active controller")
	ErrStopped   = errors.New("controller: stopped")
)

// Config configures a Controller.
type Config struct {
	NodeID int32
	// OnWALSync, if set, is told the duration of every fsync of the controller's Raft log.
	OnWALSync func(time.Duration)
	// Voters are the controller quorum's node ids (the default is NodeID alone). A node that is
	// not a voter is a learner: it receives the log once the active controller adds it.
	Voters []int32
	FS     vfs.FS
	Dir    string // <data-dir>/controller
	// Send delivers a Raft message to a node (over the transport). body is the encoded
	// message; Send copies it.
	Send func(to int32, body []byte)
	// SendChunk delivers a chunk of a snapshot message (raftlog.ChunkSender), and Queued says
	// how many bytes wait to be written to a node. With both set, from command level 11
	// (LevelChunkedSnapshots), a snapshot message larger than ChunkBytes (default 1 MiB)
	// travels in chunks: the transport's 64 MiB frame limit no longer bounds the image.
	SendChunk  func(to int32, chunk []byte)
	Queued     func(to int32) int
	ChunkBytes int
	Logger     *slog.Logger

	TickInterval  time.Duration // default 50 ms
	ElectionTicks int           // default 10: an election after 0.5-1 s without a leader
	SnapshotEvery uint64        // entries between snapshots; default 10,000

	// Bootstrap returns the command a new cluster's first leader proposes (cluster id, and
	// what an upgraded one-node data dir had). Called on the loop goroutine.
	Bootstrap func() *Bootstrap
	// OnApply is called on the loop goroutine after each batch of commands is applied, with
	// the new image. It must not block for long.
	OnApply func(img *Image)
	// OnLeader is called on the loop goroutine when the Raft leader changes (-1: none known).
	OnLeader func(leader int32)
	// OnRemoved is called on the loop goroutine when a node is removed from the group, after
	// the messages raft had for it were handed to Send. It must not block.
	OnRemoved func(node int32)
	// OnFailure is called once, on its own goroutine, when the controller stops because its
	// Raft log could not be made durable (or is at a command level above this version's): the
	// node cannot take part in the quorum any more and should stop (Kafka halts the process on a
	// failed metadata log write). Unset: the controller stops and nothing else is told.
	OnFailure func(err error)
}

// Controller runs this node's member of the controller's Raft group: it persists the log,
// exchanges Raft messages, applies committed commands to the image and lets the active
// controller propose.
type Controller struct {
	cfg    Config
	logger *slog.Logger
	rn     *raft.RawNode
	store  *raftlog.Storage

	recvc    chan *pb.Message
	propc    chan proposal
	readc    chan chan uint64       // ReadIndex's requests
	quorumc  chan chan quorumAnswer // Quorum's requests
	voterc   chan voterChange       // AddVoter's and RemoveVoter's requests
	resignc  chan struct{}          // Resign's requests
	snapc    chan snapshotSent      // chunked snapshots' ends, to report to raft
	chunks   *raftlog.ChunkSender   // nil without SendChunk and Queued
	chunkIn  raftlog.ChunkAssembler
	stop     chan struct{}
	stopOnce sync.Once   // closes stop: Stop, or the loop when it fails
	stopped  sync.Once   // Stop's release of the log and the waiters
	running  atomic.Bool // Start was called
	done     chan struct{}
	failErr  atomic.Pointer[error] // why the loop failed; nil while it has not

	image  atomic.Pointer[Image]
	voters atomic.Pointer[[]int32] // the applied configuration's voters, sorted
	// members: its voters and learners
	members atomic.Pointer[[]int32]
	leader  atomic.Int32
	term    atomic.Uint64

	// Owned by the loop goroutine.
	work         *Image // the image commands are applied to; published as a clone
	confState    *pb.ConfState
	applied      uint64
	pendingConf  bool // a configuration change is proposed and not yet applied
	pendingSince time.Time
	pendingVoter *pendingVoter // the voter change proposed and not yet applied
	leaderSince  time.Time     // when this node last became the leader
	voterSeq     uint64
	bootProposed time.Time
	reading      *pendingRead  // the ReadIndex request raft has not answered (one at a time)
	readNext     []chan uint64 // ReadIndex callers waiting for the next request
	readSeq      uint64
	contact      map[uint64]time.Time // the leader's: when each peer was last heard from
	caughtUp     map[uint64]time.Time // the leader's: when each peer's log was last at its end

	mu        sync.Mutex
	seq       uint64
	waiters   map[uint64]chan applied
	appliedCh chan struct{} // closed and replaced when the image moves
}

// snapshotSent is the end of a snapshot sent in chunks to a peer (a Raft id).
type snapshotSent struct {
	to uint64
	ok bool
}

type proposal struct {
	data []byte
	cc   *pb.ConfChange
	err  chan error
}

// pendingRead is one ReadIndex request raft was asked: every caller that arrived before it was
// asked waits on it.
type pendingRead struct {
	id      uint64
	waiters []chan uint64
	asked   time.Time
}

type applied struct {
	res   Result
	index uint64
}

var raftID, nodeID = raftlog.RaftID, raftlog.NodeID

// Open loads the controller's Raft state from cfg.Dir (creating it: a voter's first start
// bootstraps the voter configuration) and returns a controller ready to Start.
func Open(cfg Config) (*Controller, error) {
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
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = 10000
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = raftlog.DefaultChunkBytes
	}
	boot := raftlog.BootVoters(cfg.Voters, cfg.NodeID)
	st, data, err := raftlog.Open(cfg.FS, cfg.Dir, boot, encodeImage(NewImage()))
	if err != nil {
		return nil, err
	}
	st.ObserveSyncs(cfg.OnWALSync)
	img, err := decodeImage(data)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("controller: snapshot image: %w", err)
	}
	if err := levelAbove(img); err != nil {
		st.Close()
		return nil, err
	}
	snap, _ := st.Snapshot()
	c := &Controller{cfg: cfg, logger: cfg.Logger, store: st, recvc: make(chan *pb.Message, 4096),
		propc: make(chan proposal, 256), readc: make(chan chan uint64, 256), quorumc: make(chan chan quorumAnswer), voterc: make(chan voterChange), resignc: make(chan struct{}), snapc: make(chan snapshotSent, 16), stop: make(chan struct{}), done: make(chan struct{}),
		work: img, confState: pb.EnsureConfState(snap.GetMetadata().GetConfState()),
		applied: snap.GetMetadata().GetIndex(), waiters: map[uint64]chan applied{}, appliedCh: make(chan struct{}),
		contact: map[uint64]time.Time{}, caughtUp: map[uint64]time.Time{}}
	if cfg.SendChunk != nil && cfg.Queued != nil {
		c.chunks = &raftlog.ChunkSender{Send: cfg.SendChunk, Queued: cfg.Queued, Size: cfg.ChunkBytes}
	}
	c.work.Index = c.applied
	c.image.Store(c.work.Clone())
	c.setVoters()
	c.leader.Store(-1)
	rn, err := raft.NewRawNode(raftlog.Config(raftID(cfg.NodeID), cfg.ElectionTicks, st, c.applied, cfg.Logger))
	if err != nil {
		st.Close()
		return nil, err
	}
	c.rn = rn
	if boot != nil && !sameVoters(c.confState, boot) && len(c.confState.GetVoters()) > 0 {
		c.logger.Warn("controller: the persisted voters differ from --controller-voters; keeping the persisted ones",
			"persisted", describeVoters(c.confState), "flag", cfg.Voters)
	}
	return c, nil
}

func sameVoters(a, b *pb.ConfState) bool {
	x, y := slices.Clone(a.GetVoters()), slices.Clone(b.GetVoters())
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func describeVoters(cs *pb.ConfState) []int32 { return describe(cs.GetVoters()) }

// Start runs the controller's loop until Stop. The first image (from the snapshot and the
// replayed log) is applied before Start returns.
func (c *Controller) Start() {
	c.running.Store(true)
	go c.run()
}

// Started reports whether Start was called.
func (c *Controller) Started() bool { return c.running.Load() }

// Stop ends the loop and closes the log. Waiting proposals fail with ErrStopped. After the
// loop failed (Err), Stop still releases the log.
func (c *Controller) Stop() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.stopped.Do(func() {
		if c.running.Load() { // a controller that never started has no loop to wait for
			<-c.done
		}
		c.store.Close()
		c.mu.Lock()
		for id, w := range c.waiters {
			close(w)
			delete(c.waiters, id)
		}
		c.mu.Unlock()
	})
}

// Err is why the controller's loop stopped on its own (its Raft log could not be made durable,
// or is at a command level above this version's); nil while it runs, or if only Stop ended it.
func (c *Controller) Err() error {
	if p := c.failErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Step hands a Raft message received from a peer to the loop. body is the encoded message; a
// message that does not decode is dropped (and logged).
func (c *Controller) Step(from int32, body []byte) { c.step(from, body, false) }

// step decodes and hands a message to the loop; wait: however long the loop takes to take it
// (a snapshot that took many frames to come is not dropped for a moment's full queue).
func (c *Controller) step(from int32, body []byte, wait bool) {
	m := &pb.Message{}
	if err := proto.Unmarshal(body, m); err != nil {
		c.logger.Warn("controller: dropping a malformed raft message", "from", from, "err", err)
		return
	}
	if m.GetFrom() != raftID(from) {
		c.logger.Warn("controller: dropping a raft message whose sender is not its connection's node", "from", from, "claims", nodeID(m.GetFrom()))
		return
	}
	if wait {
		select {
		case c.recvc <- m:
		case <-c.stop:
		}
		return
	}
	select {
	case c.recvc <- m:
	default: // raft recovers from lost messages
	}
}

// Resign hands this node's Raft leadership to the voter whose log is furthest along, and waits
// until it no longer leads or ctx ends (a node stopping: its successor is elected at once,
// not after an election timeout, as Kafka's controller resigns when it shuts down). Not
// leading, or the only voter: nothing to do.
func (c *Controller) Resign(ctx context.Context) error {
	if len(c.Voters()) < 2 {
		return nil
	}
	return raftlog.Resign(ctx, c.IsLeader, raftlog.Asker(c.resignc, c.stop, ErrStopped), 100*time.Millisecond)
}

// Image returns the current image. It must not be modified.
func (c *Controller) Image() *Image { return c.image.Load() }

// Leader returns the active controller's node id, or -1 if none is known.
func (c *Controller) Leader() int32 { return c.leader.Load() }

// IsLeader reports whether this node is the active controller.
func (c *Controller) IsLeader() bool { return c.leader.Load() == c.cfg.NodeID }

// NodeID is this node's id.
func (c *Controller) NodeID() int32 { return c.cfg.NodeID }

// Voters returns the controller quorum's voters, as the applied configuration has them (sorted;
// empty on a learner that has not received the configuration yet).
func (c *Controller) Voters() []int32 { return slices.Clone(*c.voters.Load()) }

// Applied returns a channel closed the next time the image moves.
func (c *Controller) Applied() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appliedCh
}

// WaitApplied waits until the image has reached index.
func (c *Controller) WaitApplied(ctx context.Context, index uint64) error {
	for {
		ch := c.Applied()
		if c.Image().Index >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.stop:
			return ErrStopped
		}
	}
}

// ReadIndex returns an index of the controller's log at least as high as every entry committed
// before the call (Raft's ReadIndex: the leader confirms with a quorum that it still leads). Any
// member can ask, voter or learner; the answer is for WaitApplied. A request raft drops (no
// leader known, a lost message) is asked again after lostReadAfter, until ctx ends.
func (c *Controller) ReadIndex(ctx context.Context) (uint64, error) {
	for {
		w := make(chan uint64, 1)
		select {
		case c.readc <- w:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-c.stop:
			return 0, ErrStopped
		}
		t := time.NewTimer(lostReadAfter)
		select {
		case idx := <-w:
			t.Stop()
			return idx, nil
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-c.stop:
			t.Stop()
			return 0, ErrStopped
		}
	}
}

// Barrier waits until this member's image has applied everything the controller committed
// before the call: what any node answered from its image before, this one's image has too (a
// linearizable read of the image).
func (c *Controller) Barrier(ctx context.Context) error {
	idx, err := c.ReadIndex(ctx)
	if err != nil {
		return err
	}
	return c.WaitApplied(ctx, idx)
}

// lostReadAfter is how long a ReadIndex request goes unanswered before it is taken as lost
// (raft neither retries nor reports a dropped one).
const lostReadAfter = time.Second

// askReadIndex asks raft for a read index for w and every request queued behind it; while one
// is in flight they wait for the next (one quorum round at a time serves every request that
// arrives meanwhile). Runs on the loop goroutine.
func (c *Controller) askReadIndex(w chan uint64) {
	c.readNext = append(c.readNext, w)
	for len(c.readNext) < 4096 {
		select {
		case w := <-c.readc:
			c.readNext = append(c.readNext, w)
			continue
		default:
		}
		break
	}
	c.sendReadIndex()
}

// sendReadIndex asks raft for the requests in readNext unless a request is in flight.
func (c *Controller) sendReadIndex() {
	if c.reading != nil || len(c.readNext) == 0 {
		return
	}
	c.readSeq++
	c.reading = &pendingRead{id: c.readSeq, waiters: c.readNext, asked: time.Now()}
	c.readNext = nil
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], c.readSeq)
	c.rn.ReadIndex(id[:])
}

// answerReads hands raft's read states to their waiters and asks for the next ones. Runs on
// the loop goroutine.
func (c *Controller) answerReads(states []raft.ReadState) {
	for _, rs := range states {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		p := c.reading
		if p == nil || binary.BigEndian.Uint64(rs.RequestCtx) != p.id {
			continue // answered after it was taken as lost: its waiters asked again
		}
		c.reading = nil
		for _, w := range p.waiters {
			w <- rs.Index // buffered, one answer each
		}
	}
	c.sendReadIndex()
}

// forgetLostReads drops a request raft has not answered for lostReadAfter (its callers ask
// again) and asks for the ones waiting behind it. Runs on the loop goroutine.
func (c *Controller) forgetLostReads() {
	if c.reading != nil && time.Since(c.reading.asked) > lostReadAfter {
		c.reading = nil
	}
	c.sendReadIndex()
}

// Propose appends cmd to the log and waits until it is applied here, returning its result and
// log index. Only the active controller proposes; elsewhere it fails with ErrNotLeader. If ctx
// ends first the command may still be applied later.
func (c *Controller) Propose(ctx context.Context, cmd *Command) (Result, uint64, error) {
	select {
	case <-c.stop:
		return Result{}, 0, ErrStopped
	default:
	}
	if !c.IsLeader() {
		return Result{}, 0, ErrNotLeader
	}
	c.mu.Lock()
	c.seq++
	cmd.ID = uint64(c.cfg.NodeID)<<40 | c.seq
	ch := make(chan applied, 1)
	c.waiters[cmd.ID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, cmd.ID)
		c.mu.Unlock()
	}()
	p := proposal{data: cmd.Encode(), err: make(chan error, 1)}
	select {
	case c.propc <- p:
	case <-ctx.Done():
		return Result{}, 0, ctx.Err()
	case <-c.stop:
		return Result{}, 0, ErrStopped
	}
	select {
	case err := <-p.err:
		if err != nil {
			return Result{}, 0, err
		}
	case <-c.stop:
		return Result{}, 0, ErrStopped
	}
	select {
	case a, ok := <-ch:
		if !ok {
			return Result{}, 0, ErrNotLeader
		}
		return a.res, a.index, nil
	case <-ctx.Done():
		return Result{}, 0, ctx.Err()
	case <-c.stop:
		return Result{}, 0, ErrStopped
	}
}

func (c *Controller) run() {
	defer close(c.done)
	ticker := time.NewTicker(c.cfg.TickInterval)
	defer ticker.Stop()
	if len(c.cfg.Voters) == 1 && c.cfg.Voters[0] == c.cfg.NodeID && len(c.confState.GetVoters()) == 1 {
		c.rn.Campaign() // a quorum of one need not wait an election timeout
	}
	if !c.ready() {
		return
	}
	for {
		select {
		case <-c.stop:
			return
		case <-ticker.C:
			c.rn.Tick()
			c.chunkIn.Expire(time.Minute)
			c.forgetLostReads()
			c.trackCaughtUp()
		case w := <-c.readc:
			c.askReadIndex(w)
		case ch := <-c.quorumc:
			ch <- c.quorum()
		case vc := <-c.voterc:
			vc.ans <- c.proposeVoterChange(vc)
		case r := <-c.snapc:
			status := raft.SnapshotFinish
			if !r.ok {
				status = raft.SnapshotFailure
			}
			c.rn.ReportSnapshot(r.to, status)
		case <-c.resignc:
			if c.IsLeader() {
				raftlog.HandOff(c.rn, raftID(c.cfg.NodeID))
			}
		case m := <-c.recvc:
			c.heardFrom(m)
			if err := c.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
				c.logger.Debug("controller: step", "err", err)
			}
		drain:
			for range 256 { // take what else has arrived before the next Ready
				select {
				case m := <-c.recvc:
					c.heardFrom(m)
					c.rn.Step(m)
				default:
					break drain
				}
			}
		case p := <-c.propc:
			var err error
			if p.cc != nil {
				err = c.rn.ProposeConfChange(p.cc)
			} else {
				err = c.rn.Propose(p.data)
			}
			if errors.Is(err, raft.ErrProposalDropped) {
				err = ErrNotLeader
			}
			p.err <- err
		}
		c.maybeBootstrap()
		if !c.ready() {
			return
		}
	}
}

// ready runs handleReady and reports whether the loop may go on. If it failed, the controller
// stops for good (STYLE §8): a log that could not be made durable must not be acknowledged as if
// it were, nor this member vote or lead with entries it may not have, and a log at a command
// level above this version's must not be applied by its rules (a newer version raised it: the
// node was downgraded past the cluster's level). Nothing more is persisted, sent or applied;
// callers waiting on the loop get ErrStopped, and OnFailure tells the node, which stops. A
// restart recovers from the WAL, or stops again.
func (c *Controller) ready() bool {
	err := c.handleReady()
	if err == nil {
		return true
	}
	if errors.Is(err, ErrLevel) {
		err = fmt.Errorf("%w (run this node on a version that applies the cluster's command level)", err)
	} else {
		err = fmt.Errorf("controller: persisting the raft log: %w", err)
	}
	c.logger.Error("controller: stopping", "err", err)
	c.stopOnce.Do(func() { close(c.stop) }) // first: whoever sees Err finds the loop stopped
	c.failErr.Store(&err)
	c.setLeader(raft.None) // leads no more: nothing may take this node for the active controller
	if f := c.cfg.OnFailure; f != nil {
		go f(err)
	}
	return false
}

// handleReady persists, sends and applies everything raft has ready, in Raft's order:
// snapshot, entries and hard state made durable, then messages sent, then committed entries
// applied.
func (c *Controller) handleReady() error {
	for c.rn.HasReady() {
		rd := c.rn.Ready()
		if rd.SoftState != nil {
			c.setLeader(rd.SoftState.Lead)
		}
		if rd.HardState != nil {
			c.term.Store(rd.HardState.GetTerm())
		}
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := c.installSnapshot(rd.Snapshot); err != nil {
				return err
			}
		}
		if err := c.store.Save(rd.HardState, rd.Entries, rd.MustSync); err != nil {
			return err
		}
		snapshotsTo, err := raftlog.SendMessages(rd.Messages, func(to int32, body []byte) { c.cfg.Send(to, body) }, c.streamSnapshot)
		if err != nil {
			return err
		}
		if err := c.apply(rd.CommittedEntries); err != nil {
			return err
		}
		c.answerReads(rd.ReadStates)
		c.rn.Advance(rd)
		raftlog.ReportSnapshots(c.rn, snapshotsTo)
	}
	// After Advance: raft refuses a membership change while the last one is not applied in its
	// own view, which Advance updates (a change proposed from within apply, after the previous
	// one's entry but before Advance, was silently turned into an empty entry, and the learner
	// it was for never added).
	c.maybeChangeLearners()
	return nil
}

// streamSnapshot takes a snapshot message to send in chunks, when it is larger than a chunk and
// every node understands chunks (LevelChunkedSnapshots). raft keeps the peer paused meanwhile
// (it sends it heartbeats, no entries) until the stream's end is reported on the loop; a
// stream still running to the peer stands for a newer snapshot message too. Called on the
// loop goroutine.
func (c *Controller) streamSnapshot(m *pb.Message, body []byte) bool {
	if c.chunks == nil || len(body) <= c.cfg.ChunkBytes || c.work.Level < LevelChunkedSnapshots {
		return false
	}
	to := m.GetTo()
	c.chunks.Stream(c.stop, nodeID(to), body, func(ok bool) {
		if !ok {
			c.logger.Warn("controller: a snapshot sent in chunks was abandoned: the peer's queue did not drain", "node", nodeID(to), "bytes", len(body))
		}
		select {
		case c.snapc <- snapshotSent{to: to, ok: ok}:
		case <-c.stop:
		}
	})
	return true
}

// StepChunk takes a chunk of a snapshot message from node from (a frame of the transport);
// the message, once whole, is stepped as Step's. body is valid only during the call.
func (c *Controller) StepChunk(from int32, body []byte) {
	msg, err := c.chunkIn.Add(from, body)
	if err != nil {
		c.logger.Warn("controller: dropping a snapshot sent in chunks", "from", from, "err", err)
		return
	}
	if msg != nil {
		c.step(from, msg, true)
	}
}

func (c *Controller) setLeader(lead uint64) {
	l := int32(-1)
	if lead != raft.None {
		l = nodeID(lead)
	}
	if old := c.leader.Swap(l); old != l {
		c.logger.Info("controller: leader changed", "leader", l, "this_node", c.cfg.NodeID)
		if l == c.cfg.NodeID {
			c.leaderSince = time.Now()
		}
		if old == c.cfg.NodeID { // proposals in flight may or may not commit: their waiters cannot know
			c.mu.Lock()
			for id, w := range c.waiters {
				close(w)
				delete(c.waiters, id)
			}
			c.mu.Unlock()
			c.pendingConf = false
			c.failPendingVoter()
		}
		if c.cfg.OnLeader != nil {
			c.cfg.OnLeader(l)
		}
	}
}

func (c *Controller) installSnapshot(snap *pb.Snapshot) error {
	img, err := decodeImage(snap.GetData())
	if err != nil {
		return err
	}
	if err := levelAbove(img); err != nil {
		return err
	}
	if err := c.store.InstallSnapshot(snap); err != nil {
		return err
	}
	c.work = img
	c.applied = snap.GetMetadata().GetIndex()
	c.work.Index = c.applied
	c.confState = pb.EnsureConfState(snap.GetMetadata().GetConfState())
	c.setVoters()
	c.publish()
	return nil
}

func (c *Controller) apply(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	confChanged := false
	for _, e := range ents {
		switch e.GetType() {
		case pb.EntryType_EntryNormal:
			c.voterApplied(e.GetIndex(), nil)
			if len(e.GetData()) == 0 { // a new leader's empty entry
				c.work.Index = e.GetIndex()
				break
			}
			cmd, err := DecodeCommand(e.GetData())
			if err != nil {
				c.logger.Error("controller: skipping an undecodable command", "index", e.GetIndex(), "err", err)
				c.work.Index = e.GetIndex()
				break
			}
			res := Apply(c.work, e.GetIndex(), cmd)
			if err := levelAbove(c.work); err != nil {
				return err // applied, not acknowledged: nothing of this version's follows it
			}
			if cmd.ID != 0 {
				c.mu.Lock()
				if w, ok := c.waiters[cmd.ID]; ok {
					w <- applied{res, e.GetIndex()}
					delete(c.waiters, cmd.ID)
				}
				c.mu.Unlock()
			}
		case pb.EntryType_EntryConfChange, pb.EntryType_EntryConfChangeV2:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return err
			}
			c.confState = c.rn.ApplyConfChange(&cc)
			c.pendingConf = false
			confChanged = true
			if id, ok := raftlog.Removed(&cc); ok && c.cfg.OnRemoved != nil {
				c.cfg.OnRemoved(id)
			}
			c.work.Index = e.GetIndex()
			c.setVoters()
			c.voterApplied(e.GetIndex(), &cc)
		}
		c.applied = e.GetIndex()
	}
	// A learner can only take a snapshot that names it: after a membership change, snapshot at
	// once, so the leader never offers a new learner an older snapshot it would refuse.
	if confChanged || c.applied-c.store.SnapIndex() >= c.cfg.SnapshotEvery {
		if err := c.store.SaveSnapshot(c.applied, c.confState, encodeImage(c.work)); err != nil {
			return err
		}
	}
	c.publish()
	return nil
}

func (c *Controller) publish() {
	img := c.work.Clone()
	c.image.Store(img)
	c.mu.Lock()
	close(c.appliedCh)
	c.appliedCh = make(chan struct{})
	c.mu.Unlock()
	if c.cfg.OnApply != nil {
		c.cfg.OnApply(img)
	}
}

// maybeChangeLearners, on the leader, adds one registered node that is not yet a member of the
// Raft group as a learner, or else removes one learner whose node is no longer registered (an
// unregistered agent), so learners do not pile up as agents come and go.
func (c *Controller) maybeChangeLearners() {
	if c.pendingConf && time.Since(c.pendingSince) > 10*time.Second {
		c.pendingConf = false // raft dropped it (it drops a change it cannot take): propose again
	}
	if !c.IsLeader() || c.pendingConf {
		return
	}
	var add []uint64
	for _, id := range c.work.NodeIDs() {
		if c.work.Nodes[id].ClusterAddr != "" {
			add = append(add, raftID(id))
		}
	}
	cc := raftlog.LearnerChange(c.confState, add, func(id uint64) bool { _, ok := c.work.Nodes[nodeID(id)]; return ok })
	if cc == nil {
		return
	}
	if err := c.rn.ProposeConfChange(cc); err == nil {
		c.pendingConf, c.pendingSince = true, time.Now()
		c.logger.Info("controller: membership change", "change", cc.GetType().String(), "node", nodeID(cc.GetNodeId()))
	}
}

// maybeBootstrap, on the leader of a cluster without an id, proposes the bootstrap command.
func (c *Controller) maybeBootstrap() {
	if c.work.ClusterID != "" || c.cfg.Bootstrap == nil || !c.IsLeader() || time.Since(c.bootProposed) < time.Second {
		return
	}
	c.bootProposed = time.Now()
	b := c.cfg.Bootstrap()
	if err := c.rn.Propose((&Command{Op: OpBootstrap, Bootstrap: b}).Encode()); err != nil {
		c.logger.Warn("controller: proposing the bootstrap", "err", err)
	}
}
