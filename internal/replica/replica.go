package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/txn"
)

// Role is a replica's part in its partition's current epoch.
type Role int8

// Roles.
const (
	RoleNone     Role = iota // no leader in this epoch yet (an election is running)
	RoleLeader               // this node leads
	RoleFollower             // another node leads
)

func (r Role) String() string { return [...]string{"none", "leader", "follower"}[r] }

// Assignment is what the metadata image says of a partition hosted here.
type Assignment struct {
	Role         Role
	Epoch        int32
	Leader       int32
	Sets         [][]int32 // replica sets: one, or two during a reassignment
	ISR          []int32   // as the image has it
	TargetSynced bool      // as the image has it: the leader reported the target set synced
	// PartitionEpoch as the image has it: the leader's ISR reports name it.
	PartitionEpoch int32
	// ReplicasSince as the image has it: the replica sets were last set (a move asked for or
	// cancelled) at that metadata index.
	ReplicasSince uint64
	WriteCaching  bool
	MinISR        int
	// Ineligible are the replicas in controlled shutdown or fenced, as the image has them
	// (Kafka's ineligible replicas, KIP-841): a leader leaves them out of its ISR reports (the
	// controller keeps them out of the ISR). Fenced, the fenced ones: not counted for acks=all
	// either, though one may still hold its connection (a paused process); a stopping one
	// still replicates until it stops, and its acknowledgements still commit.
	Ineligible, Fenced []int32
}

// Replica is this node's copy of one partition, leader or follower. Its methods are safe for
// concurrent use; mu serialises everything (the log's own locks are taken inside it).
type Replica struct {
	m      *Manager
	Ref    controller.PartitionRef
	Topic  string
	Log    *logstore.Log
	epochs *EpochCache

	mu         sync.Mutex
	a          Assignment
	leader     *Leader // while leading
	frozen     bool    // a leadership transfer is prepared: no appends
	frozenAt   time.Time
	joined     bool // follower: the leader answered Follow in this epoch
	joinSent   time.Time
	joinSeq    int32 // follower: the number of its latest Follow
	epochStart int64 // follower: the leader's epoch start
	knownHW    int64 // the last high watermark known here (own, or the leader's)
	failed     error // the log failed: this replica neither leads nor follows until reopened
	hwCh       chan struct{}
	replCh     chan struct{} // closed when Leader.Replicated or Durable may have moved, if replWait > 0
	replWait   int
	reported   controller.ISRItem // leader: the ISR (and synced target) last reported
	reportedAt time.Time
	lastAck    map[int32]time.Time // leader: when each follower last acknowledged

	// Acknowledgements that came while mu was held (onAck), in order, and whether a goroutine
	// is taking them; under ackMu, which is taken before mu only with TryLock.
	ackMu       sync.Mutex
	acks        []queuedAck
	ackDraining bool
}

type queuedAck struct {
	from int32
	ack  AppendAck
}

// Errors of replica operations, as Kafka errors for clients.
var (
	ErrNotLeader         = kerr.NotLeaderForPartition
	ErrNotEnoughReplicas = kerr.NotEnoughReplicas
	ErrOffsetNotReady    = kerr.OffsetNotAvailable
)

func (r *Replica) notifyLocked() {
	close(r.hwCh)
	r.hwCh = make(chan struct{})
	r.notifyReplicatedLocked()
}

func (r *Replica) notifyReplicatedLocked() {
	// replWait counts waiters from their start to their end (after their last check), so
	// it can be positive while no channel was made yet: a waiter that found its quorum at once.
	if r.replWait > 0 && r.replCh != nil {
		close(r.replCh)
		r.replCh = make(chan struct{})
	}
}

// WaitReplicated waits until a quorum holds the log of epoch up to end in memory (not
// necessarily fsynced): what a transactional produce waits for (docs/transactions.md §3.2). It
// fails with NOT_LEADER_OR_FOLLOWER if the replica stops leading that epoch first.
func (r *Replica) WaitReplicated(ctx context.Context, epoch int32, end int64) error {
	return r.waitQuorum(ctx, epoch, end, (*Leader).Replicated)
}

// WaitDurable waits until a quorum has fsynced the log of epoch up to end, whatever the topic's
// write caching: what a transaction's prepare and its markers wait for.
func (r *Replica) WaitDurable(ctx context.Context, epoch int32, end int64) error {
	return r.waitQuorum(ctx, epoch, end, (*Leader).Durable)
}

func (r *Replica) waitQuorum(ctx context.Context, epoch int32, end int64, quorumEnd func(*Leader) int64) error {
	r.mu.Lock()
	r.replWait++
	defer func() {
		r.mu.Lock()
		r.replWait--
		r.mu.Unlock()
	}()
	for {
		switch {
		case r.failed != nil:
			err := r.failed
			r.mu.Unlock()
			return err
		case r.leader == nil || r.a.Epoch != epoch:
			r.mu.Unlock()
			return ErrNotLeader
		case quorumEnd(r.leader) >= end:
			r.mu.Unlock()
			return nil
		}
		if r.replCh == nil {
			r.replCh = make(chan struct{})
		}
		ch := r.replCh
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
	}
}

// Assignment returns the replica's current assignment.
func (r *Replica) Assignment() Assignment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.a
}

// Leading reports whether this replica leads, in which epoch, and whether its high watermark
// has reached the epoch's start (until then reads and offset lookups must wait).
func (r *Replica) Leading() (epoch int32, ready, leading bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil {
		return r.a.Epoch, false, false
	}
	return r.a.Epoch, r.leader.Ready(), true
}

// EpochStart is where this replica's log ended when its leadership epoch began, if it leads
// (ok=false otherwise): every batch committed before the epoch is below it, in this log; above
// it, only what this leader appended in its epoch (another leader may have been elected since,
// and committed other batches there).
func (r *Replica) EpochStart() (start int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil {
		return -1, false
	}
	return r.leader.EpochStart, true
}

// State describes the replica for status pages.
type State struct {
	Role         Role
	Epoch        int32
	Leader       int32
	HW           int64
	LogStart     int64
	LogEnd       int64
	Durable      int64
	InSync       []int32
	Joined       bool
	Failed       string
	FollowerLags map[int32]int64 // leader: log end minus each follower's acknowledged end
}

// State returns a snapshot of the replica's state.
func (r *Replica) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := State{Role: r.a.Role, Epoch: r.a.Epoch, Leader: r.a.Leader, HW: r.knownHW, LogStart: r.Log.StartOffset(),
		LogEnd: r.Log.EndOffset(), Durable: r.Log.DurableOffset(), Joined: r.joined}
	if r.failed != nil {
		s.Failed = r.failed.Error()
	}
	if r.leader != nil {
		s.HW = r.leader.HW()
		s.InSync = r.leader.InSync(r.m.now())
		s.FollowerLags = map[int32]int64{}
		for _, n := range r.leader.Followers() {
			s.FollowerLags[n] = s.LogEnd - max(r.leader.Follower(n).Appended, 0)
		}
	}
	return s
}

// HighWatermark is the offset below which readers may read (the leader's). A follower returns
// the last one its leader sent.
func (r *Replica) HighWatermark() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader != nil {
		return r.leader.HW()
	}
	return r.knownHW
}

// RetentionBound is the offset this replica's retention may not delete at or past: on a leader
// the smallest end among the replicas in sync (Leader.RetentionBound), on a follower the last
// high watermark its leader sent (a follower deletes further when the leader's log start
// moves). It is called by the log's retention without the log's locks.
func (r *Replica) RetentionBound() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader != nil {
		return r.leader.RetentionBound(r.m.now(), r.m.cfg.JoinGrace)
	}
	return r.knownHW
}

// Changed returns a channel closed the next time the high watermark, the role or the epoch
// changes (for fetch long polls).
func (r *Replica) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hwCh
}

// CheckEpoch checks a client's CurrentLeaderEpoch (-1: none) against the leader's, as Kafka
// does: older gets FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; a replica that does not
// lead gets NOT_LEADER_OR_FOLLOWER.
func (r *Replica) CheckEpoch(clientEpoch int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checkEpochLocked(clientEpoch)
}

func (r *Replica) checkEpochLocked(clientEpoch int32) error {
	switch {
	case clientEpoch != -1 && clientEpoch < r.a.Epoch:
		return kerr.FencedLeaderEpoch
	case clientEpoch > r.a.Epoch:
		return kerr.UnknownLeaderEpoch
	case r.leader == nil:
		return ErrNotLeader
	}
	return nil
}

// ReadReplicas lists the followers a consumer may be sent to for reads from offset (KIP-392's
// preferred read replica), with how far each has appended: those in sync whose log holds
// offset. It is empty unless this replica leads.
func (r *Replica) ReadReplicas(offset int64) map[int32]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil {
		return nil
	}
	out := map[int32]int64{}
	for _, n := range r.leader.InSync(r.m.now()) {
		if f := r.leader.Follower(n); n != r.leader.Self && f != nil && f.Appended >= offset {
			out[n] = f.Appended
		}
	}
	return out
}

// LeadingSince is when this replica's current leadership began (zero if it does not lead).
func (r *Replica) LeadingSince() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil {
		return time.Time{}
	}
	return r.leader.started
}

// CheckAcksAll refuses acks=all produce when fewer replicas are in sync than the ack quorum
// needs (NOT_ENOUGH_REPLICAS): nothing is appended, rather than waiting for a quorum that is
// not there.
func (r *Replica) CheckAcksAll() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil {
		return ErrNotLeader
	}
	if live, need := r.leader.Live(r.m.now(), r.m.cfg.JoinGrace, r.a.Fenced), r.leader.NeedForAcks(); live < need {
		return fmt.Errorf("%w: %d of the %d replicas an acknowledgement needs are in sync", ErrNotEnoughReplicas, live, need)
	}
	return nil
}

// Append appends a producer batch as leader, stamping the epoch, and starts replicating it. It
// returns the epoch it was appended in, for WaitCommitted.
func (r *Replica) Append(b []byte) (logstore.AppendResult, int32, error) {
	return r.append(b, r.Log.AppendBatch)
}

// AppendCoordinator appends a transactional batch a coordinator writes for a producer
// (logstore.Log.AppendCoordinatorBatch) as leader.
func (r *Replica) AppendCoordinator(b []byte) (logstore.AppendResult, int32, error) {
	return r.append(b, r.Log.AppendCoordinatorBatch)
}

// AppendNoOp appends a total-order shard's no-op entry as leader of epoch (logstore.Log.AppendNoOp)
// and starts replicating it. It fails with ErrNotLeader in another epoch: the shard's runner
// that decided the no-op knew the log of its own epoch only.
func (r *Replica) AppendNoOp(epoch int32, n batch.NoOp) (logstore.AppendResult, int32, error) {
	return r.append(nil, func(_ []byte, now int32) (logstore.AppendResult, error) {
		if now != epoch {
			return logstore.AppendResult{}, ErrNotLeader
		}
		first, last, err := r.Log.AppendNoOp(n, epoch, time.Now().UnixMilli())
		return logstore.AppendResult{First: first, Last: last}, err
	})
}

func (r *Replica) append(b []byte, appendTo func([]byte, int32) (logstore.AppendResult, error)) (logstore.AppendResult, int32, error) {
	r.mu.Lock()
	if r.leader == nil || r.frozen {
		r.mu.Unlock()
		return logstore.AppendResult{}, 0, ErrNotLeader
	}
	epoch := r.a.Epoch
	res, err := appendTo(b, epoch)
	if err != nil {
		if errors.Is(err, logstore.ErrPoisoned) {
			r.failLocked(err)
		}
		r.mu.Unlock()
		return res, epoch, err
	}
	if !res.Duplicate {
		r.appendedLocked()
	}
	r.mu.Unlock()
	return res, epoch, nil
}

// appendedLocked publishes a leader's append and starts replicating it.
func (r *Replica) appendedLocked() {
	if r.leader.SetLocal(r.Log.EndOffset(), r.Log.DurableOffset(), true) {
		r.knownHW = r.leader.HW()
		r.notifyLocked()
	} else {
		r.notifyReplicatedLocked()
	}
	for _, n := range r.leader.Followers() {
		r.sendAppendLocked(n) // on the caller's goroutine: no hand-off on the produce path
	}
}

// AppendMarker appends a transaction marker as leader (the coordinator's WriteTxnMarkers) and
// starts replicating it. It returns the marker's offset and the epoch, for WaitCommitted.
func (r *Replica) AppendMarker(m txn.Marker, timestampMs int64) (int64, int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil || r.frozen {
		return 0, 0, ErrNotLeader
	}
	epoch := r.a.Epoch
	off, err := r.Log.AppendMarker(m, epoch, timestampMs)
	if err != nil {
		if errors.Is(err, logstore.ErrPoisoned) {
			r.failLocked(err)
		}
		return 0, epoch, err
	}
	r.appendedLocked()
	return off, epoch, nil
}

// WaitCommitted waits until the high watermark of epoch reaches end. It fails with
// NOT_LEADER_OR_FOLLOWER if the replica stops leading that epoch first: whether the batch
// survives is then up to the next leader (an idempotent producer's retry finds out).
func (r *Replica) WaitCommitted(ctx context.Context, epoch int32, end int64) error {
	for {
		r.mu.Lock()
		switch {
		case r.failed != nil:
			err := r.failed
			r.mu.Unlock()
			return err
		case r.leader == nil || r.a.Epoch != epoch:
			r.mu.Unlock()
			return ErrNotLeader
		case r.leader.HW() >= end:
			r.mu.Unlock()
			return nil
		}
		ch := r.hwCh
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// EndOffsetFor answers OffsetForLeaderEpoch.
func (r *Replica) EndOffsetFor(epoch int32) (int32, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, end := r.epochs.EndOffsetFor(epoch, r.Log.EndOffset())
	// Kafka trims its epoch cache when the log start moves (DeleteRecords, retention): an epoch
	// that ended at or below the log start has no entry any more, and is answered as one older
	// than every entry, (the epoch asked, the log start). The cache here keeps the entries.
	if start := r.Log.StartOffset(); end >= 0 && end <= start {
		return epoch, start
	}
	return e, end
}

// EpochOf is the leader epoch of the batch at offset in the replica's log (-1: unknown).
func (r *Replica) EpochOf(offset int64) int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epochs.EpochOf(offset)
}

// LastEpoch is the newest epoch of the replica's log.
func (r *Replica) LastEpoch() int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epochs.Last()
}

// Vote is the replica's answer to the controller's vote request for epoch.
func (r *Replica) Vote(epoch int32) controller.Vote {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := controller.Vote{PartitionRef: r.Ref, Epoch: epoch, LastEpoch: r.epochs.Last(), LogEnd: r.Log.EndOffset()}
	switch {
	case r.failed != nil:
		v.Reason = "log failed: " + r.failed.Error()
	case r.a.Epoch != epoch:
		v.Reason = fmt.Sprintf("replica is in epoch %d", r.a.Epoch)
	case r.a.Role != RoleNone:
		v.Reason = fmt.Sprintf("replica already has role %s", r.a.Role)
	default:
		v.OK = true
	}
	return v
}

// setAssignment applies what the image says (Manager.Assign).
func (r *Replica) setAssignment(a Assignment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	same := r.a.Role == a.Role && r.a.Epoch == a.Epoch && r.a.Leader == a.Leader
	moved := r.a.ReplicasSince != a.ReplicasSince
	r.a = a
	if same {
		if r.leader != nil {
			r.leader.WriteCaching, r.leader.MinISR = a.WriteCaching, a.MinISR
			r.leader.SetSets(a.Sets, r.m.now())
			if moved {
				r.restartTargetsLocked()
			}
			if r.leader.SetLocal(r.Log.EndOffset(), r.Log.DurableOffset(), true) {
				r.knownHW = r.leader.HW()
				r.notifyLocked()
			}
		}
		return
	}
	if r.leader != nil {
		r.knownHW = max(r.knownHW, r.leader.HW())
		r.leader = nil
	}
	r.frozen, r.joined, r.reported, r.lastAck = false, false, controller.ISRItem{}, nil
	defer r.notifyLocked()
	if r.failed != nil {
		return
	}
	switch a.Role {
	case RoleLeader:
		start := r.Log.EndOffset()
		// The epoch marker: this log, as it is now, is where epoch a.Epoch starts. Durable before
		// the first append of the epoch and before this replica counts for the high watermark.
		if err := r.epochs.Add(a.Epoch, start); err != nil {
			r.failLocked(fmt.Errorf("replica: recording epoch %d as leader: %w", a.Epoch, err))
			return
		}
		now := r.m.now()
		r.leader = NewLeader(r.m.cfg.NodeID, a.Epoch, start, r.knownHW, a.Sets, a.WriteCaching, a.MinISR, r.m.cfg.LagMax, now)
		r.lastAck = map[int32]time.Time{}
		r.leader.SetLocal(start, r.Log.DurableOffset(), true)
		r.knownHW = r.leader.HW()
		r.m.LeadershipsTaken.Add(1)
		r.m.cfg.Logger.Info("replica: leading", "topic", r.Topic, "partition", r.Ref.Partition, "epoch", a.Epoch,
			"epoch_start", start, "hw", r.knownHW)
	case RoleFollower:
		r.sendFollowLocked()
	}
}

func (r *Replica) failLocked(err error) {
	if r.failed != nil {
		return
	}
	r.failed = err
	r.m.cfg.Logger.Error("replica: log failed; the replica stops", "topic", r.Topic, "partition", r.Ref.Partition, "err", err)
	// A failure of the replica's own files (its epoch file on a full disk) poisons the log too,
	// so the node counts the partition offline and opens it again as any poisoned log; a log's
	// own failure has poisoned it already.
	r.Log.Poison("replica", err)
	if r.leader != nil && r.m.cfg.ReportFailed != nil {
		ref := controller.EpochRef{PartitionRef: r.Ref, Epoch: r.a.Epoch}
		go r.m.cfg.ReportFailed(ref)
	}
	r.leader = nil
	r.notifyLocked()
}

func (r *Replica) sendFollowLocked() {
	r.joinSeq++
	r.joined = false
	f := Follow{Ref: r.Ref, Epoch: r.a.Epoch, Seq: r.joinSeq, LogEnd: r.Log.EndOffset(), LogStart: r.Log.StartOffset(), Epochs: r.epochs.Entries()}
	r.joinSent = r.m.now()
	r.m.cfg.Send(r.a.Leader, KindFollow, AppendFollow(nil, &f))
}

// onFollow answers a follower joining this leader's epoch.
func (r *Replica) onFollow(from int32, f *Follow) {
	r.lockTakingAcks()
	defer r.mu.Unlock()
	reply := FollowReply{Ref: r.Ref, Epoch: f.Epoch, Seq: f.Seq, Status: StatusStale}
	var p *Progress
	if r.leader != nil && f.Epoch == r.a.Epoch && r.leader.Follower(from) != nil {
		end, start := r.Log.EndOffset(), r.Log.StartOffset()
		to, common, reset := Divergence(r.epochs.Entries(), end, start, f.Epochs, f.LogEnd)
		reply = FollowReply{Ref: r.Ref, Epoch: f.Epoch, Seq: f.Seq, Status: StatusOK, TruncateTo: to, CommonEpoch: common, Reset: reset,
			EpochStart: r.leader.EpochStart, LeaderLogStart: start}
		p = r.leader.Join(from, to)
		p.JoinSeq = f.Seq
	}
	r.m.cfg.Send(from, KindFollowReply, AppendFollowReply(nil, &reply))
	if p != nil {
		r.sendAppendLocked(from)
	}
}

// onFollowReply makes this follower's log agree with its leader's, then acknowledges.
func (r *Replica) onFollowReply(from int32, fr *FollowReply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.a.Role != RoleFollower || fr.Epoch != r.a.Epoch || from != r.a.Leader || r.failed != nil || fr.Seq != r.joinSeq {
		return // not the answer to this follower's latest Follow
	}
	if fr.Status != StatusOK {
		r.joined = false // asked again by the ticker
		return
	}
	if err := r.truncateLocked(fr); err != nil {
		r.failLocked(err)
		r.ackLocked(StatusFailed)
		return
	}
	r.joined, r.epochStart = true, fr.EpochStart
	if err := r.markLocked(); err != nil {
		r.failLocked(err)
		r.ackLocked(StatusFailed)
		return
	}
	r.ackLocked(StatusOK)
}

// startsInside reports whether this log is empty and starts inside the batch h: it was
// started at the leader's log start, which DeleteRecords may put inside a batch, and the
// leader sends that batch whole.
func (r *Replica) startsInside(h *batch.Header) bool {
	end := r.Log.EndOffset()
	return r.Log.StartOffset() == end && h.BaseOffset < end && h.LastOffset() >= end
}

// restartAtBatchLocked starts the empty log over at the batch's base offset and appends it, as
// Kafka's follower does on an UnexpectedAppendOffsetException (before, the follower answered a
// mismatch, joined again, was sent the same batch, and never caught up). The offsets below the
// leader's log start go when the next append carries it.
func (r *Replica) restartAtBatchLocked(h *batch.Header, b []byte) error {
	r.m.cfg.Logger.Info("replica: the leader's log start is inside a batch; restarting the empty log at the batch", "topic", r.Topic,
		"partition", r.Ref.Partition, "offset", h.BaseOffset, "log_start", r.Log.StartOffset())
	if err := r.Log.ResetTo(h.BaseOffset); err != nil {
		return err
	}
	if err := r.epochs.Reset(); err != nil {
		return err
	}
	if err := r.epochs.Add(h.LeaderEpoch, h.BaseOffset); err != nil {
		return err
	}
	_, _, err := r.Log.AppendReplica(b)
	return err
}

// truncateLocked cuts what the leader's FollowReply says this log has that the leader has not.
// The known high watermark comes down to the cut, as Kafka's truncation lowers it: records
// above it that were committed in an earlier epoch are gone (an unclean election, a power loss
// with write caching), and the new leader's records that take their place are not committed.
func (r *Replica) truncateLocked(fr *FollowReply) error {
	defer func() { r.knownHW = min(r.knownHW, r.Log.EndOffset()) }()
	if fr.Reset {
		r.m.cfg.Logger.Info("replica: restarting the log at the leader's log start", "topic", r.Topic,
			"partition", r.Ref.Partition, "offset", fr.LeaderLogStart, "log_end", r.Log.EndOffset())
		if err := r.Log.ResetTo(fr.LeaderLogStart); err != nil {
			return err
		}
		return r.epochs.Reset()
	}
	if end := r.Log.EndOffset(); fr.TruncateTo < end {
		r.m.cfg.Logger.Info("replica: truncating a suffix the leader does not have", "topic", r.Topic,
			"partition", r.Ref.Partition, "from", fr.TruncateTo, "log_end", end, "epoch", r.a.Epoch)
		if _, err := r.Log.Truncate(fr.TruncateTo); err != nil {
			return err
		}
	}
	return r.epochs.Truncate(r.Log.EndOffset(), fr.CommonEpoch)
}

// markLocked writes the follower's epoch marker once its log reaches the leader's epoch start.
func (r *Replica) markLocked() error {
	if r.Log.EndOffset() >= r.epochStart && r.epochs.Last() < r.a.Epoch {
		return r.epochs.Add(r.a.Epoch, r.epochStart)
	}
	return nil
}

// ackLocked sends the follower's acknowledgement to its leader.
func (r *Replica) ackLocked(status int8) {
	ack := AppendAck{Ref: r.Ref, Epoch: r.a.Epoch, Status: status, Appended: r.Log.EndOffset(), Durable: r.Log.DurableOffset()}
	r.m.cfg.Send(r.a.Leader, KindAppendAck, AppendAcks(nil, []AppendAck{ack}))
}

// onAppend appends what the leader sent and returns the acknowledgement.
func (r *Replica) onAppend(from int32, a *Append) AppendAck {
	r.mu.Lock()
	defer r.mu.Unlock()
	ack := AppendAck{Ref: r.Ref, Epoch: a.Epoch, Status: StatusStale}
	switch {
	case r.a.Role != RoleFollower || a.Epoch != r.a.Epoch || from != r.a.Leader:
		return ack
	case r.failed != nil:
		ack.Status = StatusFailed
		return ack
	case !r.joined:
		ack.Status = StatusMismatch
		return ack
	}
	if end := r.Log.EndOffset(); a.PrevEnd != end {
		r.joined = false
		r.sendFollowLocked()
		ack.Status = StatusMismatch
		return ack
	}
	r.epochStart = a.EpochStart
	for data := a.Batches; len(data) > 0; {
		h, err := batch.ParseHeader(data)
		if err != nil || h.Size() > len(data) {
			r.joined = false
			r.sendFollowLocked()
			ack.Status = StatusMismatch
			return ack
		}
		b := data[:h.Size()]
		data = data[h.Size():]
		if h.LeaderEpoch > r.epochs.Last() {
			if err := r.epochs.Add(h.LeaderEpoch, h.BaseOffset); err != nil {
				r.failLocked(err)
				ack.Status = StatusFailed
				return ack
			}
		}
		_, _, err = r.Log.AppendReplica(b)
		if errors.Is(err, logstore.ErrNotAtEnd) && r.startsInside(&h) {
			err = r.restartAtBatchLocked(&h, b)
		}
		if err != nil {
			if errors.Is(err, logstore.ErrNotAtEnd) || errors.Is(err, batch.ErrCorrupt) {
				r.joined = false
				r.sendFollowLocked()
				ack.Status = StatusMismatch
				return ack
			}
			r.failLocked(err)
			ack.Status = StatusFailed
			return ack
		}
		if err := r.markLocked(); err != nil {
			r.failLocked(err)
			ack.Status = StatusFailed
			return ack
		}
	}
	if err := r.markLocked(); err != nil {
		r.failLocked(err)
		ack.Status = StatusFailed
		return ack
	}
	if a.HW > r.knownHW {
		r.knownHW = a.HW
		r.notifyLocked()
	}
	if a.LogStart > r.Log.StartOffset() {
		r.m.advanceStart(r, min(a.LogStart, r.Log.EndOffset()))
	}
	ack.Status, ack.Appended, ack.Durable = StatusOK, r.Log.EndOffset(), r.Log.DurableOffset()
	if !r.a.WriteCaching && ack.Durable < ack.Appended {
		r.Log.SyncSoon() // the durable end is acknowledged again from onDurable
	}
	return ack
}

// onAck takes a follower's acknowledgement. It does not wait for mu: the follower's
// acknowledgements of all partitions come in order on one goroutine (its connection's reader), and a
// leader's append holds mu through its write, which on a slow disk takes as long as an fsync (on
// FUSE a write waits for an fsync of the same file to end). Waiting there held back the
// acknowledgements of the follower's other partitions, whose leaders took them for lost after
// ResendAfter, resent, and pushed a follower that had the batches to join again, out of the
// ISR meanwhile. An acknowledgement that finds mu held is queued for a goroutine of its own,
// behind the ones queued before it; the tick takes the queued ones first.
func (r *Replica) onAck(from int32, ack *AppendAck) {
	r.ackMu.Lock()
	if len(r.acks) == 0 && r.mu.TryLock() {
		r.ackMu.Unlock()
		r.onAckLocked(from, ack)
		r.mu.Unlock()
		return
	}
	r.acks = append(r.acks, queuedAck{from: from, ack: *ack})
	if !r.ackDraining {
		r.ackDraining = true
		go r.drainAcks()
	}
	r.ackMu.Unlock()
}

// drainAcks takes the queued acknowledgements once mu is free, a batch at a time, letting mu go
// between batches (an acknowledgement sends the follower more, reading the log: appends must
// not wait behind a stream of them). Acknowledgements coming meanwhile queue behind, in order,
// until the queue is found empty. Once the manager is closed they are dropped.
func (r *Replica) drainAcks() {
	for {
		r.mu.Lock()
		select {
		case <-r.m.stop:
			r.ackMu.Lock()
			r.acks, r.ackDraining = nil, false
			r.ackMu.Unlock()
			r.mu.Unlock()
			return
		default:
		}
		more := r.takeQueuedAcksLocked(true)
		r.mu.Unlock()
		if !more {
			return
		}
	}
}

// takeQueuedAcksLocked takes the acknowledgements queued so far and reports whether there were
// any; when there were none and draining, it ends the drain (onAck takes them itself from then
// on).
func (r *Replica) takeQueuedAcksLocked(draining bool) bool {
	r.ackMu.Lock()
	q := r.acks
	r.acks = nil
	if len(q) == 0 && draining {
		r.ackDraining = false
	}
	r.ackMu.Unlock()
	for i := range q {
		r.onAckLocked(q[i].from, &q[i].ack)
	}
	return len(q) > 0
}

// lockTakingAcks locks mu and takes the acknowledgements queued before: what a follower says
// next (its Follow, a broken connection) must not be overtaken by what it said before, nor the
// tick take a follower for silent whose acknowledgements wait in the queue.
func (r *Replica) lockTakingAcks() {
	r.mu.Lock()
	r.takeQueuedAcksLocked(false)
}

func (r *Replica) onAckLocked(from int32, ack *AppendAck) {
	if r.leader == nil || ack.Epoch != r.a.Epoch || r.leader.Follower(from) == nil {
		return
	}
	switch ack.Status {
	case StatusOK:
	case StatusMismatch: // the follower sent Follow before this ack: its join decides
		return
	default:
		r.leader.Stop(from, false)
		return
	}
	now := r.m.now()
	r.lastAck[from] = now
	if r.leader.Ack(from, ack.Appended, ack.Durable, now) {
		r.knownHW = r.leader.HW()
		r.notifyLocked()
	}
	r.notifyReplicatedLocked()
	r.sendAppendLocked(from)
}

// onDurable runs when the log's durable end moves.
func (r *Replica) onDurable() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.Log.Err(); err != nil {
		r.failLocked(err)
		return
	}
	switch {
	case r.leader != nil:
		if r.leader.SetLocal(r.Log.EndOffset(), r.Log.DurableOffset(), true) {
			r.knownHW = r.leader.HW()
			r.notifyLocked()
		} else {
			r.notifyReplicatedLocked()
		}
	case r.a.Role == RoleFollower && r.joined:
		r.ackLocked(StatusOK)
	}
}

// maxAppendBytes bounds one Append of one partition; maxInflightBytes what a follower may have
// unacknowledged.
const (
	maxAppendBytes   = 1 << 20
	maxInflightBytes = 4 << 20
)

// sendAppendLocked sends a follower what it lacks, within the flow-control window. It is
// called with mu held, so an Append is never sent after a FollowReply that voids it.
func (r *Replica) sendAppendLocked(to int32) bool {
	if r.leader == nil {
		return false
	}
	p := r.leader.Follower(to)
	if p == nil || !p.Streaming || p.InflightBytes() >= maxInflightBytes {
		return false
	}
	end := r.Log.EndOffset()
	if p.Next >= end {
		return false
	}
	var buckets []*Bucket // replication quotas (throttle.go): the tick tries again
	now := r.m.now()
	if t := r.m.cfg.Throttle; t != nil {
		if r.leader.Throttleable(to, now) {
			buckets = t.Buckets(r.Topic, r.Ref.Partition, to)
			for _, b := range buckets {
				if !b.Ready(now) {
					return false
				}
			}
		}
	}
	data, err := r.Log.Read(nil, p.Next, maxAppendBytes)
	if errors.Is(err, logstore.ErrOffsetOutOfRange) && p.Next < r.Log.StartOffset() {
		// The follower needs what retention deleted: it restarts at the log start.
		start := r.Log.StartOffset()
		reply := FollowReply{Ref: r.Ref, Epoch: r.a.Epoch, Seq: p.JoinSeq, Status: StatusOK, TruncateTo: start, CommonEpoch: -1,
			Reset: true, EpochStart: r.leader.EpochStart, LeaderLogStart: start}
		seq := p.JoinSeq
		r.leader.Join(to, start).JoinSeq = seq
		r.m.cfg.Send(to, KindFollowReply, AppendFollowReply(nil, &reply))
		return r.sendAppendLocked(to)
	}
	if err != nil || len(data) == 0 {
		if err != nil {
			r.m.cfg.Logger.Warn("replica: reading for a follower", "topic", r.Topic, "partition", r.Ref.Partition, "offset", p.Next, "err", err)
		}
		return false
	}
	newEnd := lastNext(data)
	a := Append{Ref: r.Ref, Epoch: r.a.Epoch, PrevEnd: p.Next, HW: r.leader.HW(), LogStart: r.Log.StartOffset(),
		EpochStart: r.leader.EpochStart, Batches: data}
	r.leader.Sent(to, p.Gen, newEnd, len(data), newEnd >= end, now)
	p.HWSent = a.HW
	r.m.cfg.Send(to, KindAppend, AppendAppends(nil, []Append{a}))
	if len(buckets) > 0 {
		for _, b := range buckets {
			b.Take(len(data), now)
		}
		r.m.ThrottledBytes.Add(int64(len(data)))
	}
	return newEnd < end
}

// restartTargetsLocked: the replica sets were set again (a move asked for, or cancelled and
// asked again, maybe seen here as one image). A target node that is not a current replica may
// have deleted its copy (a cancel) and opened an empty one, while this leader still counts the
// progress of the deleted one: it would report the move synced onto empty replicas. Such
// followers prove their logs again: an Append that cannot start at their log end (PrevEnd -1)
// makes one that is joined answer with a mismatch and join again; an empty copy joins by
// itself. Meanwhile the target set learns again (not joint), so commits do not wait for it.
func (r *Replica) restartTargetsLocked() {
	if len(r.a.Sets) < 2 {
		return
	}
	for _, n := range r.a.Sets[1] {
		if n == r.m.cfg.NodeID || slices.Contains(r.a.Sets[0], n) {
			continue
		}
		if r.leader.Restart(n) {
			a := Append{Ref: r.Ref, Epoch: r.a.Epoch, PrevEnd: -1, HW: r.leader.HW(), LogStart: r.Log.StartOffset(), EpochStart: r.leader.EpochStart}
			r.m.cfg.Send(n, KindAppend, AppendAppends(nil, []Append{a}))
		}
	}
}

// lastNext returns the offset after the last whole batch in data.
func lastNext(data []byte) int64 {
	var next int64
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil || h.Size() > len(data) {
			break
		}
		next = h.NextOffset()
		data = data[h.Size():]
	}
	return next
}

// PrepareTransfer stops appends (clients get NOT_LEADER_OR_FOLLOWER) and waits until target has
// acknowledged the whole log, so that it wins the election that follows. It reports whether
// target caught up in time; if not, appends resume.
func (r *Replica) PrepareTransfer(ctx context.Context, epoch, target int32) bool {
	r.mu.Lock()
	if r.leader == nil || r.a.Epoch != epoch || r.leader.Follower(target) == nil {
		r.mu.Unlock()
		return false
	}
	r.frozen, r.frozenAt = true, r.m.now()
	r.mu.Unlock()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		r.mu.Lock()
		if r.leader == nil || r.a.Epoch != epoch {
			r.mu.Unlock()
			return false
		}
		p := r.leader.Follower(target)
		if p != nil && p.Streaming && p.Appended >= r.Log.EndOffset() {
			r.mu.Unlock()
			return true
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			r.mu.Lock()
			if r.a.Epoch == epoch {
				r.frozen = false
			}
			r.mu.Unlock()
			return false
		case <-tick.C:
		}
	}
}

// tick does a replica's periodic work: a follower asks to join again, a leader resends what
// was not acknowledged in time, ends a transfer that never came, and (with checkISR) reports a
// changed ISR. An idle replica is cheap: a few comparisons under its lock.
func (r *Replica) tick(now time.Time, checkISR, skipBusy bool) *controller.ISRItem {
	if !skipBusy {
		r.lockTakingAcks()
	} else if r.mu.TryLock() {
		r.takeQueuedAcksLocked(false)
	} else {
		return nil // busy: the next tick
	}
	defer r.mu.Unlock()
	if r.failed != nil {
		return nil
	}
	if r.a.Role == RoleFollower && !r.joined && now.Sub(r.joinSent) >= r.m.cfg.JoinRetry {
		r.sendFollowLocked()
	}
	if r.leader == nil {
		return nil
	}
	if r.frozen && now.Sub(r.frozenAt) > 3*time.Second {
		r.frozen = false
	}
	end := r.Log.EndOffset()
	for n, p := range r.leader.followers {
		if !p.Streaming {
			continue
		}
		stale := now.Sub(r.lastAck[n]) > r.m.cfg.ResendAfter
		switch {
		case stale && len(p.Inflight) > 0: // a send or its acknowledgement was lost
			r.leader.Rewind(n)
			r.lastAck[n] = now
			r.sendAppendLocked(n)
		case p.Next < end:
			r.sendAppendLocked(n)
		case stale && (p.Appended < end || !r.a.WriteCaching && p.Durable < end):
			// Nothing to send, but the follower's acknowledgement is missing: probe with an
			// empty append, which it answers with its ends.
			r.lastAck[n] = now
			r.sendHWLocked(p)
		case len(p.Inflight) == 0 && p.Appended == p.Next && p.HWSent < r.leader.HW():
			// The follower has all it was sent, but not the high watermark its acknowledgements
			// moved: an empty append tells it, as Kafka's follower learns it from its next fetch.
			// Else a follower read (KIP-392), and the follower's retention, would stop short of
			// the last records until the next produce.
			r.sendHWLocked(p)
		}
	}
	if !checkISR {
		return nil
	}
	pe := r.a.PartitionEpoch
	isr := r.leader.InSync(now)
	// A follower the election kept in the ISR stays while it joins the epoch (the first
	// JoinGrace), as Kafka's new leader counts its ISR's followers caught up at the election.
	// Not a replica a reassignment adds: Runnel's ISR does not promise the committed records
	// (a quorum commits), and a move must not finish on one that has not caught up (inSync).
	for _, n := range r.a.ISR {
		if p := r.leader.Follower(n); p != nil && !slices.Contains(isr, n) && r.leader.joining(p, now, r.m.cfg.JoinGrace) && !r.leader.adding(n) {
			isr = append(isr, n)
		}
	}
	slices.Sort(isr)
	isr = slices.DeleteFunc(isr, func(n int32) bool { return n != r.leader.Self && slices.Contains(r.a.Ineligible, n) })
	it := controller.ISRItem{PartitionRef: r.Ref, Epoch: r.a.Epoch, ISR: isr, PartitionEpoch: &pe}
	if r.leader.TargetSynced() {
		it.Target = slices.Clone(r.a.Sets[1])
	}
	if slices.Equal(it.ISR, r.a.ISR) && (it.Target != nil) == r.a.TargetSynced ||
		it.Equal(r.reported) && now.Sub(r.reportedAt) < time.Second {
		return nil
	}
	r.reported, r.reportedAt = it, now
	return &it
}

// sendHWLocked sends follower p an empty append (nothing to append after what it was sent), which
// it answers with its ends and which carries the high watermark.
func (r *Replica) sendHWLocked(p *Progress) {
	a := Append{Ref: r.Ref, Epoch: r.a.Epoch, PrevEnd: p.Next, HW: r.leader.HW(), LogStart: r.Log.StartOffset(),
		EpochStart: r.leader.EpochStart}
	p.HWSent = a.HW
	r.m.cfg.Send(p.Node, KindAppend, AppendAppends(nil, []Append{a}))
}

// peerDown is told that the connection to node broke.
func (r *Replica) peerDown(node int32) {
	r.lockTakingAcks()
	defer r.mu.Unlock()
	if r.leader != nil {
		if p := r.leader.Follower(node); p != nil {
			p.Connected = false
			r.leader.Rewind(node)
		}
	}
	if r.a.Role == RoleFollower && r.a.Leader == node {
		r.joined = false
	}
}
