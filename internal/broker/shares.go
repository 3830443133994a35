package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/share"
	"github.com/runnel-dev/runnel/internal/txn"
)

// Share groups on a partition's leader (docs/share-groups.md §4-§5): this node keeps the state
// of the share-partitions of the partitions it leads (share.Partition, loaded from the group's
// coordinator on first use and written back there), and the share sessions of the members that
// fetch from it.
//
// Lock order: shares.mu alone; the coordinator is called with it released.

// shareSessionLimit is group.share.max.share.sessions.
const shareSessionLimit = 2000

type shareKey struct {
	group     string
	topic     [16]byte
	partition int32
}

// part is the key's share-partition, as the coordinator names it.
func (k shareKey) part() group.SharePartition {
	return group.SharePartition{Topic: k.topic, Partition: k.partition}
}

type shareSessionKey struct{ group, member string }

type shareSession struct {
	id    uint64 // random: names the session to the nodes that keep what it acquires
	epoch int32
	parts []group.SharePartition // in the order the member named them
	conn  *conn
	// held are the partitions the member acquired records of through this session (or was
	// about to), with the node that keeps each one's share state (this one or an object
	// partition's owner): where the session's end releases what it acquired.
	held map[group.SharePartition]int32
	// fetches counts the session's fetches: each starts its partitions one further along, so
	// that a partition with many records does not always fill the fetch before the others.
	fetches int
}

// sharePart is one share-partition this node leads.
type sharePart struct {
	key         shareKey
	leaderEpoch int64 // a local partition's leader epoch, or an object partition's owner epoch
	stateEpoch  int32
	loaded      chan struct{} // closed once p is set or err
	p           *share.Partition
	err         error
	persisting  bool
	persistUpTo uint64 // while persisting: the last op the write in flight holds
	waiters     []ackWaiter
	// written is the snapshot the coordinator last confirmed storing (or gave at the load; nil:
	// none). An object share-partition whose owner epoch moves while its owner stays keeps
	// this state only if the coordinator still has exactly it (reclaimLocked).
	written []byte
	// reclaim is the owner epoch this state is to be taken into, above leaderEpoch while a
	// re-claim is wanted; reclaiming: its read of the coordinator is under way.
	reclaim    int64
	reclaiming bool
	// bySession are the runs each share session acquired here that may still be acquired
	// (runs below the start are dropped as new ones come): what its end releases, so that
	// a member's other session (through another node) keeps what it holds.
	bySession map[fwdSession][]share.AcquiredRecords
	// wake is closed (and replaced) when records of this share-partition may have become
	// acquirable (released, expired, rolled back) or it is dropped: the fetches waiting on it
	// look again. Per share-partition, so an acknowledgement wakes only the fetches of its
	// partition's sessions, not every waiting fetch of the node.
	wake chan struct{}
}

// reclaimPending reports whether a re-claim is wanted or under way: no record is acquired
// meanwhile, since another owner may have served the partition in between (reclaimLocked).
func (sp *sharePart) reclaimPending() bool { return sp.reclaim > sp.leaderEpoch }

type ackWaiter struct {
	op uint64
	ch chan error
}

type shares struct {
	b        *Broker
	mu       sync.Mutex
	parts    map[shareKey]*sharePart
	sessions map[shareSessionKey]*shareSession
	counts   map[string]*shareCounts // by group, since the node started
	// known are the share sessions (this node's and those forwarded to it) that acquired or
	// were released here: one that ended acquires nothing more.
	known map[fwdSession]*fwdState
	// liveIndex is the image's LiveIndex when the sessions of gone nodes were last released.
	liveIndex uint64
}

// shareCounts are a share group's records on this node, for metrics.
type shareCounts struct {
	delivered int64           // records acquired (each delivery counts)
	acked     share.AckCounts // records acknowledged (persisted), by type; skipped ones not counted
}

func newShares(b *Broker) *shares {
	s := &shares{b: b, parts: map[shareKey]*sharePart{}, counts: map[string]*shareCounts{},
		sessions: map[shareSessionKey]*shareSession{}, known: map[fwdSession]*fwdState{}}
	b.cl.Handle("share.read", s.handleRead)
	b.cl.Handle("share.write", s.handleWrite)
	b.cl.Handle("share.fetch", s.handleFetchPart)
	b.cl.Handle("share.ack", s.handleAckPart)
	b.cl.Handle("share.release", s.handleRelease)
	return s
}

// wakeLocked tells the fetches waiting on sp that its records may be acquirable.
func (s *shares) wakeLocked(sp *sharePart) {
	close(sp.wake)
	sp.wake = make(chan struct{})
}

// wakeChan returns the channel a fetch waits on for sp.
func (s *shares) wakeChan(sp *sharePart) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sp.wake
}

// run expires acquisition locks and drops the state of partitions this node no longer leads,
// until ctx ends.
func (s *shares) run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		now := time.Now()
		s.pruneKnownLocked(now)
		configs := map[string]share.Config{} // by group, this round
		for k, sp := range s.parts {
			if sp.p == nil {
				continue
			}
			if epoch, leading, keeps := s.leading(k); !leading || epoch < sp.leaderEpoch || epoch > sp.leaderEpoch && !keeps {
				s.dropLocked(sp, kerr.NotLeaderForPartition)
				continue
			} else if epoch > sp.leaderEpoch {
				s.reclaimLocked(sp, epoch)
			}
			for id, runs := range sp.bySession {
				// A session not heard of for ten minutes (its node may be gone) whose runs hold
				// nothing any more (acknowledged, expired, taken again): nothing to release.
				if s.known[id] == nil && !sp.p.Holds(runs) {
					delete(sp.bySession, id)
				}
			}
			cfg, ok := configs[k.group]
			if !ok {
				cfg = shareConfig(s.b.groupSettings(k.group))
				configs[k.group] = cfg
			}
			sp.p.SetConfig(cfg) // the delivery limit an expiry checks is the group's now
			if sp.p.ExpireLocks(now) {
				s.persistLocked(sp)
				s.wakeLocked(sp)
			}
		}
		// After the loop, which starts the re-claims of a new owner epoch: the releases' writes
		// wait for them.
		if img := s.b.cl.Image(); img.LiveIndex != s.liveIndex {
			s.liveIndex = img.LiveIndex
			s.releaseGoneLocked(img)
		}
		s.mu.Unlock()
	}
}

// leading reports whether this node keeps a share-partition (leads its local partition, or
// owns its object partition's share state), in which epoch, and whether its state may be
// kept into a newer epoch (keepsAcrossEpochs).
func (s *shares) leading(k shareKey) (epoch int64, leading, keeps bool) {
	t, ok := s.b.topics.GetByID(k.topic)
	if !ok {
		return 0, false, false
	}
	lg, err := s.b.shareLogFor(t, k.partition)
	if err != nil {
		return 0, false, false
	}
	epoch, _, leading = lg.owning()
	return epoch, leading, keepsAcrossEpochs(lg)
}

// keepsAcrossEpochs reports whether a share-partition's owner that is still its owner in a
// newer epoch may keep its loaded state (reclaimLocked): an object partition's, whose owner
// epoch moves with every change of the live nodes, most of which leave its owner in place.
// A local partition's leader epoch moves with its leadership, so its state is loaded again.
func keepsAcrossEpochs(lg shareLog) bool {
	_, object := lg.(*objectShareLog)
	return object
}

// reclaimLocked takes a loaded share-partition into a newer owner epoch without dropping what
// is in flight (docs/share-groups.md §9). Once no write of it is under way, its state is read
// from the coordinator at the new epoch, which fences every older one. If no owner read or
// wrote it in an epoch after this node's (the coordinator's epoch before this read is at most
// this node's), and the coordinator has exactly what this node last wrote (or loaded) in the
// same state epoch, nobody else served it in between: this state goes on in the new epoch.
// Otherwise it is dropped and loaded again. Writes and acquisitions wait meanwhile.
func (s *shares) reclaimLocked(sp *sharePart, epoch int64) {
	sp.reclaim = max(sp.reclaim, epoch)
	s.persistLocked(sp) // starts the re-claim unless a write (whose end starts it) is under way
}

// errStateMoved: a re-claim found the coordinator's state other than this node last wrote.
var errStateMoved = errors.New("another owner served the share-partition in an earlier epoch, or its state changed")

// reclaimState is a re-claim's read (reclaimLocked).
func (s *shares) reclaimState(sp *sharePart) {
	s.mu.Lock()
	epoch, stateEpoch, written := sp.reclaim, sp.stateEpoch, sp.written
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.b.ctx, 10*time.Second)
	resp, err := s.read(ctx, sp.key, epoch)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	sp.reclaiming = false
	if s.parts[sp.key] != sp || s.b.ctx.Err() != nil {
		return
	}
	if err == nil && (resp.PrevLeaderEpoch > sp.leaderEpoch || resp.StateEpoch != stateEpoch || !bytes.Equal(resp.Snapshot, written)) {
		err = errStateMoved
	}
	switch {
	case err == nil:
		sp.leaderEpoch = epoch
		s.wakeLocked(sp)    // fetches acquire again
		s.persistLocked(sp) // what changed meanwhile, or a re-claim of a still newer epoch
	case transientShareError(err):
		s.persistLater(sp) // the coordinator settles: read again
	default:
		s.b.logger.Info("broker: share-partition loaded again in its new owner epoch", "group", sp.key.group, "partition", sp.key.partition, "epoch", epoch, "reason", err)
		s.dropLocked(sp, kerr.NotLeaderForPartition)
	}
}

// dropLocked forgets a share-partition (a new leader, or a fenced write): acknowledgements
// waiting for its writes fail with err, and the next use loads it again.
func (s *shares) dropLocked(sp *sharePart, err error) {
	if s.parts[sp.key] == sp {
		delete(s.parts, sp.key)
	}
	s.wakeLocked(sp) // its waiting fetches look again, and find it gone
	// The acknowledgements a write in flight holds are answered by its outcome: the write may
	// still be stored (a new leader loads what it stored), and answering them dropped would
	// tell a client its acknowledgement failed while the records are settled for good. Kafka's
	// SharePartition completes them from the write's result too.
	keep := sp.waiters[:0]
	for _, w := range sp.waiters {
		if sp.persisting && w.op <= sp.persistUpTo {
			keep = append(keep, w)
		} else {
			w.ch <- err
		}
	}
	sp.waiters = keep
}

// get returns the loaded state of a share-partition of lg, which this node must keep. Without
// create, one this node does not hold (in this leader epoch) is UNKNOWN_TOPIC_OR_PARTITION, as
// Kafka's SharePartitionManager answers an acknowledgement for a share-partition not in its
// cache: acknowledging must not initialize one (its start offset, for "latest").
func (s *shares) get(ctx context.Context, k shareKey, lg shareLog, create bool) (*sharePart, error) {
	epoch, ready, leading := lg.owning()
	if !leading {
		return nil, kerr.NotLeaderForPartition
	}
	if !ready && !lg.waitReady(ctx, time.Second) {
		return nil, kerr.LeaderNotAvailable
	}
	s.mu.Lock()
	sp := s.parts[k]
	switch {
	case sp == nil || sp.leaderEpoch == epoch:
	case epoch < sp.leaderEpoch: // this view of the log is older than the one sp was kept in
	case sp.p != nil && keepsAcrossEpochs(lg):
		s.reclaimLocked(sp, epoch)
	default:
		s.dropLocked(sp, kerr.NotLeaderForPartition)
		sp = nil
	}
	if sp == nil && !create {
		s.mu.Unlock()
		return nil, kerr.UnknownTopicOrPartition
	}
	if sp == nil {
		sp = &sharePart{key: k, leaderEpoch: epoch, loaded: make(chan struct{}), wake: make(chan struct{})}
		s.parts[k] = sp
		go s.load(sp, lg)
	}
	s.mu.Unlock()
	select {
	case <-sp.loaded:
	case <-ctx.Done():
		return nil, kerr.RequestTimedOut
	}
	if sp.err != nil {
		return nil, sp.err
	}
	return sp, nil
}

// shareReadReq and shareWriteReq are the share-partition leader's calls of the group's
// coordinator.
type shareReadReq struct {
	Group       string               `json:"group"`
	Part        group.SharePartition `json:"part"`
	LeaderEpoch int64                `json:"leader_epoch"`
}

type shareReadResp struct {
	Code       int16  `json:"code"`
	StateEpoch int32  `json:"state_epoch"`
	Snapshot   []byte `json:"snapshot"`
	// PrevLeaderEpoch is the newest epoch the state was read or written at before this read
	// (-1: none): an owner keeping its state into a new epoch checks that nobody came between.
	// A coordinator of an older version sends none (0), and the snapshot check alone decides.
	PrevLeaderEpoch int64 `json:"prev_leader_epoch"`
}

type shareWriteReq struct {
	Group       string               `json:"group"`
	Part        group.SharePartition `json:"part"`
	StateEpoch  int32                `json:"state_epoch"`
	LeaderEpoch int64                `json:"leader_epoch"`
	Snapshot    []byte               `json:"snapshot"`
}

type shareWriteResp struct {
	Code int16 `json:"code"`
}

// shareConfig is a group's share-partition limits.
func shareConfig(set group.Settings) share.Config {
	return share.Config{LockDuration: set.ShareRecordLockDuration, DeliveryLimit: set.ShareDeliveryCountLimit, MaxInFlight: set.SharePartitionMaxRecordLocks}
}

// lockDuration is how long a group's acquired records are locked: its
// share.record.lock.duration.ms, else the node's (--group-share-record-lock-duration).
func (s *shares) lockDuration(groupID string) time.Duration {
	return s.b.groupSettings(groupID).ShareRecordLockDuration
}

// startOffset is where a share-partition with no stored state starts: its group's
// share.auto.offset.reset (latest, Kafka's default: the high watermark; earliest: the log
// start; by_duration: the first record at most that old, else the high watermark).
func (s *shares) startOffset(ctx context.Context, groupID string, lg shareLog) (int64, error) {
	hw := lg.highWatermark()
	reset := s.b.groupSettings(groupID).ShareAutoOffsetReset
	switch {
	case reset.Earliest:
		return lg.logStart(), nil
	case reset.By > 0:
		off, ok, err := lg.offsetForTimestamp(ctx, time.Now().Add(-reset.By).UnixMilli())
		if err != nil {
			return 0, err
		}
		if ok && off < hw {
			return max(off, lg.logStart()), nil
		}
	}
	return hw, nil
}

// load reads a share-partition's state from its group's coordinator; none stored: it starts
// where the group's share.auto.offset.reset says (startOffset).
func (s *shares) load(sp *sharePart, lg shareLog) {
	err := func() error {
		ctx, cancel := context.WithTimeout(s.b.ctx, 10*time.Second)
		defer cancel()
		resp, err := s.read(ctx, sp.key, sp.leaderEpoch)
		if err != nil {
			return err
		}
		part, written := (*share.Partition)(nil), resp.Snapshot
		if resp.Snapshot == nil {
			start, err := s.startOffset(ctx, sp.key.group, lg)
			if err != nil {
				return err
			}
			part = share.New(shareConfig(s.b.groupSettings(sp.key.group)), start)
			// The start is written before anything is delivered from it (Kafka initializes
			// the share group state first, too): a leader failing after a delivery would
			// otherwise leave its successor to choose a start of its own, later with latest.
			if snap, upTo, ok := part.Snapshot(); ok {
				written = snap.AppendTo(nil)
				err := s.write(shareWriteReq{sp.key.group, sp.key.part(), resp.StateEpoch, sp.leaderEpoch, written})
				part.Persisted(upTo, err)
				if err != nil {
					return err
				}
			}
		} else {
			snap, err := share.DecodeSnapshot(resp.Snapshot)
			if err != nil {
				return err
			}
			if part, err = share.Load(shareConfig(s.b.groupSettings(sp.key.group)), snap); err != nil {
				return err
			}
		}
		part.TrimTo(lg.logStart())
		s.mu.Lock()
		sp.p, sp.stateEpoch, sp.written = part, resp.StateEpoch, written
		s.persistLocked(sp) // the start it chose
		s.mu.Unlock()
		return nil
	}()
	if err != nil {
		s.mu.Lock()
		sp.err = shareError(err)
		if s.parts[sp.key] == sp {
			delete(s.parts, sp.key)
		}
		s.mu.Unlock()
		s.b.logger.Warn("broker: loading share-partition state", "group", sp.key.group, "partition", sp.key.partition, "err", err)
	}
	close(sp.loaded)
}

// shareError is what a client is told of a failure to read or write share-partition state: the
// coordinator's fencing means another leader (Kafka maps it alike).
func shareError(err error) error {
	switch {
	case errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.FencedStateEpoch):
		return kerr.NotLeaderForPartition
	case errors.Is(err, kerr.GroupIDNotFound), errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.CoordinatorNotAvailable):
		return err
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return kerr.UnknownServerError
}

// persistLocked writes the share-partition's snapshot to the coordinator if it changed and no
// write is in flight; later changes go in the next write.
// A re-claim wanted (reclaimLocked) goes first, and no write starts while it is under way.
func (s *shares) persistLocked(sp *sharePart) {
	if sp.persisting || sp.reclaiming || sp.p == nil {
		return
	}
	if sp.reclaim > sp.leaderEpoch {
		sp.reclaiming = true
		go s.reclaimState(sp)
		return
	}
	snap, upTo, ok := sp.p.Snapshot()
	if !ok {
		return
	}
	sp.persisting, sp.persistUpTo = true, upTo
	req := shareWriteReq{sp.key.group, sp.key.part(), sp.stateEpoch, sp.leaderEpoch, snap.AppendTo(nil)}
	go func() {
		err := s.write(req)
		s.mu.Lock()
		defer s.mu.Unlock()
		sp.persisting = false
		sp.p.Persisted(upTo, err)
		if err == nil {
			sp.written = req.Snapshot
		}
		keep := sp.waiters[:0]
		for _, w := range sp.waiters {
			if w.op <= upTo {
				w.ch <- err
			} else {
				keep = append(keep, w)
			}
		}
		sp.waiters = keep
		s.wakeLocked(sp)
		if errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.GroupIDNotFound) {
			s.dropLocked(sp, err) // fenced, or the group is gone: load again on next use
			return
		}
		if s.parts[sp.key] != sp || s.b.ctx.Err() != nil {
			return // dropped meanwhile, or this node stops: its next leader loads what was written
		}
		if err != nil {
			s.persistLater(sp)
			return
		}
		s.persistLocked(sp)
	}()
}

// persistLater calls persistLocked for sp in 100 ms (a write, or a re-claim's read, that failed
// is tried again), unless sp is dropped or the node stops meanwhile.
func (s *shares) persistLater(sp *sharePart) {
	time.AfterFunc(100*time.Millisecond, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.parts[sp.key] == sp && s.b.ctx.Err() == nil {
			s.persistLocked(sp)
		}
	})
}

// retrying calls try until it reports no reason to try again, or until budget has passed,
// waiting between calls from 100 ms doubling up to maxWait (or until ctx ends); it returns
// try's last error.
func retrying(ctx context.Context, budget, maxWait time.Duration, try func() (again bool, err error)) error {
	deadline := time.Now().Add(budget)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, maxWait) {
		again, err := try()
		if !again || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// read reads a share-partition's state from its group's coordinator as its owner at epoch.
func (s *shares) read(ctx context.Context, k shareKey, epoch int64) (shareReadResp, error) {
	var resp shareReadResp
	node := s.b.groups.coordinatorNode(k.group)
	if node == nil {
		return resp, kerr.CoordinatorNotAvailable
	}
	req := shareReadReq{k.group, k.part(), epoch}
	if err := s.b.cl.Call(ctx, node.ID, "share.read", req, &resp); err != nil {
		return resp, fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
	}
	if resp.Code != 0 {
		return resp, kerr.ErrorForCode(resp.Code)
	}
	return resp, nil
}

// shareWriteRetry is how long a share-state write is tried again while the group's coordinator
// moves or loads (write).
const shareWriteRetry = 5 * time.Second

// write stores a share-partition's snapshot with its group's coordinator. A coordinator that
// is not available, moving or loading (its node was lost) is asked again for up to
// shareWriteRetry, backing off from 100 ms to 1 s, as Kafka's share-state persister retries:
// the acknowledgements waiting for the write would otherwise fail, their records going back
// to their members until their locks expire (30 s by default). The same snapshot at the same
// epoch may be written twice; a newer owner's read fences it, and that is no retry.
func (s *shares) write(req shareWriteReq) error {
	return retrying(s.b.ctx, shareWriteRetry, time.Second, func() (bool, error) {
		err := s.writeOnce(req)
		return err != nil && transientShareError(err), err
	})
}

func (s *shares) writeOnce(req shareWriteReq) error {
	ctx, cancel := context.WithTimeout(s.b.ctx, 10*time.Second)
	defer cancel()
	node := s.b.groups.coordinatorNode(req.Group)
	if node == nil {
		return kerr.CoordinatorNotAvailable
	}
	var resp shareWriteResp
	if err := s.b.cl.Call(ctx, node.ID, "share.write", req, &resp); err != nil {
		return fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
	}
	if resp.Code != 0 {
		return shareError(kerr.ErrorForCode(resp.Code))
	}
	return nil
}

// handleRead and handleWrite are the group coordinator's side.
func (s *shares) handleRead(ctx context.Context, _ int32, payload []byte) (any, error) {
	var req shareReadReq
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	var resp shareReadResp
	resp.Code = s.coordinatorCall(ctx, req.Group, func(c *group.Coordinator) (*kerr.Error, group.Output) {
		st, e, out := c.ReadShareState(req.Group, req.Part, req.LeaderEpoch)
		resp.StateEpoch, resp.Snapshot, resp.PrevLeaderEpoch = st.StateEpoch, st.Snapshot, st.PrevLeaderEpoch
		return e, out
	})
	return resp, nil
}

func (s *shares) handleWrite(ctx context.Context, _ int32, payload []byte) (any, error) {
	var req shareWriteReq
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	code := s.coordinatorCall(ctx, req.Group, func(c *group.Coordinator) (*kerr.Error, group.Output) {
		return c.WriteShareState(req.Group, req.Part, req.StateEpoch, req.LeaderEpoch, req.Snapshot)
	})
	return shareWriteResp{Code: code}, nil
}

// coordinatorCall runs a share-state call on the group's coordinator shard and waits for its
// records' commit; it returns the answer's error code (0: none).
func (s *shares) coordinatorCall(ctx context.Context, groupID string, call func(*group.Coordinator) (*kerr.Error, group.Output)) int16 {
	var answer *kerr.Error
	code, err := s.b.groups.call(ctx, groupID, func(c *group.Coordinator) group.Output {
		e, out := call(c)
		answer = e
		return out
	})
	switch {
	case code != nil:
		return code.Code
	case err != nil:
		return kerr.CoordinatorNotAvailable.Code
	case answer != nil:
		return answer.Code
	}
	return 0
}

// acknowledge applies a member's acknowledgements to a share-partition and waits until they are
// durable.
func (s *shares) acknowledge(ctx context.Context, member string, sp *sharePart, acks []share.AckBatch) error {
	s.mu.Lock()
	if s.parts[sp.key] != sp {
		s.mu.Unlock()
		return kerr.NotLeaderForPartition
	}
	sp.p.SetConfig(shareConfig(s.b.groupSettings(sp.key.group))) // a renewal's lock, a release's limit
	op, applied, err := sp.p.Acknowledge(member, time.Now(), acks)
	if err != nil || op == 0 {
		s.mu.Unlock()
		if err == nil { // nothing to persist (renewals only): done
			s.count(sp.key.group, func(c *shareCounts) { countAcks(&c.acked, applied) })
		}
		return err
	}
	ch := make(chan error, 1)
	sp.waiters = append(sp.waiters, ackWaiter{op, ch})
	s.persistLocked(sp)
	s.wakeLocked(sp) // releases may have made records available
	s.mu.Unlock()
	select {
	case err := <-ch:
		if err == nil {
			s.count(sp.key.group, func(c *shareCounts) { countAcks(&c.acked, applied) })
		}
		return err
	case <-ctx.Done():
		return kerr.RequestTimedOut
	}
}

// count updates a group's counts.
func (s *shares) count(groupID string, f func(*shareCounts)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts[groupID]
	if c == nil {
		c = &shareCounts{}
		s.counts[groupID] = c
	}
	f(c)
}

// countAcks adds the records acknowledgements applied to counts.
func countAcks(counts *share.AckCounts, applied share.AckCounts) {
	for t, n := range applied {
		counts[t] += n
	}
}

// releaseSession gives back what a member acquired through a share session that ended, here
// and on the owners it forwarded to.
func (s *shares) releaseSession(groupID, member string, sess *shareSession) {
	if sess == nil {
		return
	}
	s.mu.Lock()
	held := sess.held
	sess.held = nil
	s.mu.Unlock()
	id := fwdSession{s.b.cfg.NodeID, sess.id}
	var local []group.SharePartition
	remote := map[int32][]group.SharePartition{}
	for p, node := range held {
		if node == s.b.cfg.NodeID {
			local = append(local, p)
		} else {
			remote[node] = append(remote[node], p)
		}
	}
	s.endSession(groupID, member, id, local)
	for node, parts := range remote {
		go s.releaseRemote(node, shareReleaseReq{groupID, member, id, parts})
	}
}

// endSession ends a share session here: it acquires nothing more, and what it acquired in
// parts and still holds is released.
func (s *shares) endSession(groupID, member string, id fwdSession, parts []group.SharePartition) {
	cfg := shareConfig(s.b.groupSettings(groupID))
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.knownLocked(groupID, member, id, time.Now(), false)
	st.ended = true
	for _, p := range parts {
		sp := s.parts[shareKey{groupID, p.Topic, p.Partition}]
		if sp == nil || sp.p == nil {
			continue
		}
		runs := sp.bySession[id]
		delete(sp.bySession, id)
		if len(runs) > 0 {
			sp.p.SetConfig(cfg)
			sp.p.ReleaseRuns(member, runs)
			s.persistLocked(sp)
			s.wakeLocked(sp)
		}
	}
}

// held notes that sess is about to acquire records of p, kept by node, so that its end
// releases them; false if sess ended already (it must acquire nothing).
func (s *shares) held(groupID, member string, sess *shareSession, p group.SharePartition, node int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[shareSessionKey{groupID, member}] != sess {
		return false
	}
	if sess.held == nil {
		sess.held = map[group.SharePartition]int32{}
	}
	sess.held[p] = node
	return true
}

// acquire reads a share-partition's next records from the log (below the high watermark, or
// the last stable offset) and acquires them for member, as its group's settings say (limits,
// isolation), at most maxRecords of them if exact (record_limit), else whole log batches: it
// returns the log batches that hold the acquired records, and the runs acquired.
// The records are acquired for share session by (of this node or one that forwards), unless it
// ended (checked under s.mu, just before acquiring); its runs are kept for its end.
func (s *shares) acquire(ctx context.Context, sp *sharePart, lg shareLog, member string, by fwdSession, set group.Settings, exact bool, maxBytes, maxRecords int) ([]byte, []share.AcquiredRecords, error) {
	s.mu.Lock()
	if sp.reclaimPending() {
		s.mu.Unlock()
		return nil, nil, nil // until the re-claim tells whether this state is still the one
	}
	sp.p.SetConfig(shareConfig(set))
	if start := lg.logStart(); start > sp.p.Start() {
		sp.p.TrimTo(start)
	}
	from, can := sp.p.FetchOffset(), sp.p.CanAcquire()
	s.mu.Unlock()
	upper := lg.highWatermark()
	if set.ShareReadCommitted {
		upper = lg.lastStable(upper)
	}
	if !can || from >= upper || maxRecords <= 0 {
		return nil, nil, nil
	}
	data, err := lg.read(ctx, from, upper, max(maxBytes, 1))
	if err != nil || len(data) == 0 {
		return nil, nil, err
	}
	type logBatch struct {
		share.LogBatch
		at, size      int  // where in data
		transactional bool // a transactional batch of records (not a marker)
		producer      int64
	}
	var batches []logBatch
	for at := 0; at < len(data); {
		h, err := batch.ParseHeader(data[at:])
		if err != nil || h.Size() > len(data)-at {
			break // a partial batch at the read's end
		}
		batches = append(batches, logBatch{LogBatch: share.LogBatch{First: h.BaseOffset, Last: h.NextOffset() - 1}, at: at, size: h.Size(),
			transactional: h.IsTransactional() && !h.IsControl(), producer: h.ProducerID})
		at += h.Size()
	}
	var aborted []txn.Aborted
	if set.ShareReadCommitted && len(batches) > 0 {
		if aborted, err = lg.aborted(from, batches[len(batches)-1].Last+1); err != nil {
			return nil, nil, err
		}
	}
	lbs := make([]share.LogBatch, len(batches))
	for i, b := range batches {
		lbs[i] = b.LogBatch
	}
	s.mu.Lock()
	if s.parts[sp.key] != sp {
		s.mu.Unlock()
		return nil, nil, kerr.NotLeaderForPartition
	}
	if sp.reclaimPending() {
		s.mu.Unlock()
		return nil, nil, nil
	}
	if st := s.knownLocked(sp.key.group, member, by, time.Now(), false); st.ended {
		s.mu.Unlock()
		return nil, nil, nil
	}
	for i, b := range batches { // read_committed: an aborted transaction's records are archived
		lbs[i].Aborted = b.transactional && slices.ContainsFunc(aborted, func(a txn.Aborted) bool {
			return a.ProducerID == b.producer && a.First <= b.First && b.First <= a.Last
		})
	}
	acquire := sp.p.Acquire
	if exact {
		acquire = sp.p.AcquireRecords
	}
	acquired := acquire(member, time.Now(), from, lbs, maxRecords)
	if len(acquired) > 0 {
		if sp.bySession == nil {
			sp.bySession = map[fwdSession][]share.AcquiredRecords{}
		}
		start := sp.p.Start()
		runs := slices.DeleteFunc(sp.bySession[by], func(a share.AcquiredRecords) bool { return a.Last < start })
		sp.bySession[by] = append(runs, acquired...)
	}
	s.mu.Unlock()
	if len(acquired) > 0 {
		s.count(sp.key.group, func(c *shareCounts) { c.delivered += int64(acquiredCount(acquired)) })
	}
	// The batches that hold acquired records; most often one run of the read, sent as it is.
	var picked []logBatch
	contiguous, size := true, 0
	for _, b := range batches {
		if slices.ContainsFunc(acquired, func(a share.AcquiredRecords) bool { return a.First <= b.Last && a.Last >= b.First }) {
			if n := len(picked); n > 0 && picked[n-1].at+picked[n-1].size != b.at {
				contiguous = false
			}
			picked = append(picked, b)
			size += b.size
		}
	}
	if len(picked) == 0 {
		return nil, acquired, nil
	}
	if contiguous {
		return data[picked[0].at : picked[0].at+size], acquired, nil
	}
	out := make([]byte, 0, size)
	for _, b := range picked {
		out = append(out, data[b.at:b.at+b.size]...)
	}
	return out, acquired, nil
}

// ShareStat is one share-partition this node leads, at a moment (metrics).
type ShareStat struct {
	Group, Topic string
	Partition    int32
	Start        int64 // the share-partition start offset
	Lag          int64 // records from the start to the high watermark still to deliver or in flight
	AcquiredNow  int64 // records locked by consumers
}

// ShareGroupCount is one share group's counts on this node since it started (metrics).
type ShareGroupCount struct {
	Group     string
	Delivered int64
	Acked     map[string]int64 // by type: accept, release, reject, gap, renew
}

// ShareStats returns the share-partitions this node leads and the share groups' counts.
func (b *Broker) ShareStats() ([]ShareStat, []ShareGroupCount) {
	s := b.shares
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []ShareStat
	for k, sp := range s.parts {
		t, ok := b.topics.GetByID(k.topic)
		if sp.p == nil || !ok {
			continue
		}
		lg, err := b.shareLogFor(t, k.partition)
		if err != nil {
			continue
		}
		hw := lg.highWatermark()
		st := sp.p.Stats(hw)
		parts = append(parts, ShareStat{Group: k.group, Topic: t.Name, Partition: k.partition, Start: st.Start,
			Lag: max(hw-st.Start-st.Done, 0), AcquiredNow: st.Acquired})
	}
	names := [...]string{share.Gap: "gap", share.Accept: "accept", share.Release: "release", share.Reject: "reject", share.Renew: "renew"}
	var groups []ShareGroupCount
	for g, c := range s.counts {
		gc := ShareGroupCount{Group: g, Delivered: c.delivered, Acked: map[string]int64{}}
		for t, n := range c.acked {
			gc.Acked[names[t]] = n
		}
		groups = append(groups, gc)
	}
	return parts, groups
}
