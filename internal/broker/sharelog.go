package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/objtopic"
	"github.com/runnel-dev/runnel/internal/share"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/txn"
)

// shareLog is the log a share-partition delivers from, as its owner sees it: a local topic's
// partition on its leader, or an object topic's partition on the node that owns its share
// state (docs/share-groups.md §9).
type shareLog interface {
	// owning reports whether this node keeps the share-partitions of the partition, in which
	// epoch (the leader epoch its share-state reads and writes are fenced with), and whether
	// it may serve them yet.
	owning() (epoch int64, ready, owning bool)
	// waitReady waits up to wait for owning's ready; false if not ready then.
	waitReady(ctx context.Context, wait time.Duration) bool
	highWatermark() int64
	lastStable(hw int64) int64
	logStart() int64
	// offsetForTimestamp is the first record at or after ts (ok false: none).
	offsetForTimestamp(ctx context.Context, ts int64) (offset int64, ok bool, err error)
	// read returns whole log batches from the one holding from, below upper, about maxBytes
	// (at least one batch).
	read(ctx context.Context, from, upper int64, maxBytes int) ([]byte, error)
	// aborted lists the aborted transactions with records in [from, upto).
	aborted(from, upto int64) ([]txn.Aborted, error)
	// changed is closed when the high watermark (or the ownership) may have moved.
	changed() <-chan struct{}
}

// shareLogFor returns the share log of a topic's partition, or an error if there is none.
func (b *Broker) shareLogFor(t *topics.Topic, index int32) (shareLog, error) {
	if index < 0 || int(index) >= len(t.Partitions) {
		return nil, kerr.UnknownTopicOrPartition
	}
	if isObjectTopic(t) {
		if b.cfg.ObjectCache == nil {
			return nil, kerr.KafkaStorageError
		}
		return &objectShareLog{b: b, id: t.ID, index: index}, nil
	}
	tp := t.Partitions[index]
	if tp.Replica == nil {
		return nil, kerr.NotLeaderForPartition
	}
	return localShareLog{tp}, nil
}

// shareOwner is the node that keeps the share-partitions of an object partition in an image:
// the one Metadata names its leader for a client that names no zone (objectLeader over the
// live nodes), so that such a client's share fetches go there first. -1: no live node.
func shareOwner(img *controller.Image, id [16]byte, index int32) int32 {
	return objectLeader(img.ObjectNodes(), id, index)
}

// localShareLog is a local partition's log on its leader.
type localShareLog struct{ p *topics.Partition }

func (l localShareLog) owning() (int64, bool, bool) {
	epoch, ready, leading := l.p.Replica.Leading()
	return int64(epoch), ready, leading
}
func (l localShareLog) waitReady(ctx context.Context, wait time.Duration) bool {
	return waitReady(ctx, l.p.Replica, wait)
}
func (l localShareLog) highWatermark() int64      { return l.p.Replica.HighWatermark() }
func (l localShareLog) lastStable(hw int64) int64 { return l.p.Log.LastStable(hw) }
func (l localShareLog) logStart() int64           { return l.p.Log.StartOffset() }
func (l localShareLog) changed() <-chan struct{}  { return l.p.Replica.Changed() }
func (l localShareLog) aborted(from, upto int64) ([]txn.Aborted, error) {
	return l.p.Log.AbortedTransactions(from, upto)
}

func (l localShareLog) offsetForTimestamp(_ context.Context, ts int64) (int64, bool, error) {
	off, _, ok, err := l.p.Log.OffsetForTimestamp(ts)
	return off, ok, err
}

func (l localShareLog) read(_ context.Context, from, upper int64, maxBytes int) ([]byte, error) {
	sl, err := l.p.Log.ReadSliceBelow(from, maxBytes, upper)
	if err != nil {
		return nil, err
	}
	defer sl.Release()
	if sl.Size == 0 {
		return nil, nil
	}
	data := make([]byte, sl.Size)
	if _, err := sl.File.ReadAt(data, sl.Position); err != nil {
		return nil, err
	}
	return data, nil
}

// objectShareLog is an object partition as this node's metadata image has it. This node owns
// its share-partitions while the image names it shareOwner; the epoch is the image's
// LiveIndex, which moves whenever the live nodes (and so possibly the owner) change, so a
// previous owner's share-state writes are fenced once its successor has read the state.
type objectShareLog struct {
	b     *Broker
	id    [16]byte
	index int32
}

func (o *objectShareLog) owning() (int64, bool, bool) {
	img := o.b.cl.Image()
	return int64(img.LiveIndex), true, shareOwner(img, o.id, o.index) == o.b.cfg.NodeID
}

func (o *objectShareLog) waitReady(context.Context, time.Duration) bool { return true }

// part is the partition in this node's image now (nil: the topic is gone).
func (o *objectShareLog) part() *objtopic.Partition {
	p, err := o.b.objectPartition(o.id, o.index)
	if err != nil {
		return nil
	}
	return p
}

func (o *objectShareLog) highWatermark() int64 {
	if p := o.part(); p != nil {
		return p.Next
	}
	return 0
}

func (o *objectShareLog) lastStable(hw int64) int64 {
	if p := o.part(); p != nil {
		return min(hw, p.ConsumerLastStable())
	}
	return hw
}

func (o *objectShareLog) logStart() int64 {
	if p := o.part(); p != nil {
		return p.Start
	}
	return 0
}

func (o *objectShareLog) changed() <-chan struct{} { return o.b.cl.ImageChanged() }

func (o *objectShareLog) aborted(from, upto int64) ([]txn.Aborted, error) {
	p := o.part()
	if p == nil {
		return nil, kerr.UnknownTopicOrPartition
	}
	var out []txn.Aborted
	for _, a := range p.AbortedIn(from, upto) {
		out = append(out, txn.Aborted{ProducerID: a.ProducerID, First: a.First, Last: a.Last})
	}
	return out, nil
}

func (o *objectShareLog) offsetForTimestamp(ctx context.Context, ts int64) (int64, bool, error) {
	p := o.part()
	if p == nil {
		return 0, false, kerr.UnknownTopicOrPartition
	}
	off, _, err := o.b.cfg.ObjectCache.OffsetForTime(ctx, p, ts)
	if err != nil {
		return 0, false, fmt.Errorf("%w: reading from the object store: %v", kerr.KafkaStorageError, err)
	}
	return off, off >= 0, nil
}

func (o *objectShareLog) read(ctx context.Context, from, upper int64, maxBytes int) ([]byte, error) {
	p := o.part()
	if p == nil {
		return nil, kerr.UnknownTopicOrPartition
	}
	upper = min(upper, p.Next)
	if from < p.Start || from >= upper {
		return nil, nil
	}
	data, err := o.b.cfg.ObjectCache.FetchBelow(ctx, p, from, upper, maxBytes, true)
	if err != nil {
		return nil, fmt.Errorf("%w: reading from the object store: %v", kerr.KafkaStorageError, err)
	}
	return data, nil
}

// Forwarding (docs/share-groups.md §9): a node asked for an object partition whose share
// state another node keeps passes the acquisition or the acknowledgement to that node, as
// any node serves any object partition: a client in a zone is sent to its zone's nodes by
// Metadata, and during an owner's move two images may name different owners. The owner never
// forwards further; a request that reaches a node that is not the owner (in its image) is
// answered NOT_LEADER_OR_FOLLOWER, which the forwarding node takes as "nothing yet".

// shareForwardPoll is how often a fetch waiting for records polls the owners it forwards to
// (appends wake it at once: they change this node's image; releases and lock expiry at the
// owner are seen at the next poll).
const shareForwardPoll = 200 * time.Millisecond

// fwdSession names a share session on the node that forwards it.
type fwdSession struct {
	Node int32  `json:"node"`
	ID   uint64 `json:"id"`
}

// fwdState is what a node knows of a share session that acquires records it keeps.
type fwdState struct {
	group     string
	member    string
	forwarded bool      // another node's session
	seen      time.Time // its latest acquisition (or its end)
	ended     bool      // it acquires nothing more
	// run and incarnation are the forwarding node's process run and its registration, as that
	// node said ("", 0: not known): once another run of the node is registered (a new
	// process), the session is gone with the old one (releaseGoneLocked).
	run         string
	incarnation uint64
}

type shareFetchPartReq struct {
	Group   string               `json:"group"`
	Member  string               `json:"member"`
	Session fwdSession           `json:"session"`
	Part    group.SharePartition `json:"part"`
	Exact   bool                 `json:"exact,omitempty"`
	// Run and Incarnation are the forwarding node's process run and registration (0: not
	// registered yet).
	Run         string `json:"run,omitempty"`
	Incarnation uint64 `json:"incarnation,omitempty"`
	MaxBytes    int    `json:"max_bytes"`
	MaxRecords  int    `json:"max_records"`
}

type shareFetchPartResp struct {
	Code     int16                   `json:"code"`
	Message  string                  `json:"message,omitempty"`
	Records  []byte                  `json:"records,omitempty"`
	Acquired []share.AcquiredRecords `json:"acquired,omitempty"`
}

type shareAckPartReq struct {
	Group  string               `json:"group"`
	Member string               `json:"member"`
	Part   group.SharePartition `json:"part"`
	Acks   []share.AckBatch     `json:"acks"`
}

type shareAckPartResp struct {
	Code    int16  `json:"code"`
	Message string `json:"message,omitempty"`
}

// shareReleaseReq ends a forwarded session on an owner, releasing what its member acquired
// through it in parts.
type shareReleaseReq struct {
	Group   string                 `json:"group"`
	Member  string                 `json:"member"`
	Session fwdSession             `json:"session"`
	Parts   []group.SharePartition `json:"parts"`
}

// forwardTo returns the node that keeps p's share state if p is an object partition that
// another node keeps.
func (s *shares) forwardTo(p group.SharePartition) (int32, bool) {
	t, ok := s.b.topics.GetByID(p.Topic)
	if !ok || !isObjectTopic(t) || p.Partition < 0 || int(p.Partition) >= len(t.Partitions) {
		return 0, false
	}
	owner := shareOwner(s.b.cl.Image(), p.Topic, p.Partition)
	return owner, owner >= 0 && owner != s.b.cfg.NodeID
}

// releaseRemote ends a forwarded session on an owner; one that cannot be reached lets the
// locks expire.
func (s *shares) releaseRemote(node int32, req shareReleaseReq) {
	ctx, cancel := context.WithTimeout(s.b.ctx, 10*time.Second)
	defer cancel()
	var resp struct{}
	if err := s.b.cl.Call(ctx, node, "share.release", req, &resp); err != nil {
		s.b.logger.Debug("broker: releasing a share member's records on their owner", "group", req.Group, "node", node, "err", err)
	}
}

// fetchRemote acquires records for a forwarded session on the owner node. The call is bounded
// by d (at least a second), so that an owner that does not answer holds the fetch about its
// MaxWait, not until the connection breaks.
func (s *shares) fetchRemote(ctx context.Context, node int32, d time.Duration, req shareFetchPartReq) ([]byte, []share.AcquiredRecords, error) {
	ctx, cancel := context.WithTimeout(ctx, max(d, time.Second))
	defer cancel()
	var resp shareFetchPartResp
	if err := s.b.cl.Call(ctx, node, "share.fetch", req, &resp); err != nil {
		return nil, nil, fmt.Errorf("%w: node %d: %v", kerr.LeaderNotAvailable, node, err)
	}
	if resp.Code != 0 {
		return nil, nil, forwardedError(resp.Code, resp.Message)
	}
	return resp.Records, resp.Acquired, nil
}

// ackRemote applies a member's acknowledgements of p on its owner node, which answers once
// they are durable.
// An owner that has not caught up with this node's image yet (it answers LEADER_NOT_AVAILABLE:
// a restarted node that does not know the topic yet) applied nothing, and is asked again for
// up to shareWriteRetry; an answer lost on the way may have been applied, and is not retried
// (a second application would find the records acknowledged, not acquired).
func (s *shares) ackRemote(ctx context.Context, node int32, req shareAckPartReq) error {
	return retrying(ctx, shareWriteRetry, 100*time.Millisecond, func() (bool, error) {
		var resp shareAckPartResp
		if err := s.b.cl.Call(ctx, node, "share.ack", req, &resp); err != nil {
			return false, fmt.Errorf("%w: node %d: %v", kerr.RequestTimedOut, node, err)
		}
		if resp.Code == 0 {
			return false, nil
		}
		return resp.Code == kerr.LeaderNotAvailable.Code, forwardedError(resp.Code, resp.Message)
	})
}

// forwardedPartFor is partFor for a request another node forwarded: a topic this node does
// not know yet is one the forwarding node's image has and this one's does not yet (it
// restarted, and catches up), so the answer is the retriable LEADER_NOT_AVAILABLE.
func (s *shares) forwardedPartFor(ctx context.Context, groupID string, p group.SharePartition, create bool) (*sharePart, shareLog, error) {
	sp, lg, err := s.partFor(ctx, groupID, p, &sharePartResult{}, create)
	if errors.Is(err, kerr.UnknownTopicID) {
		err = kerr.LeaderNotAvailable
	}
	return sp, lg, err
}

func forwardedError(code int16, msg string) error {
	err := kerr.ErrorForCode(code)
	if msg != "" {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// answerError is an error's code and, for one that is not a Kafka error, its text.
func answerError(err error) (int16, string) {
	if err == nil {
		return 0, ""
	}
	if isKerr(err) {
		return errorCode(err), ""
	}
	return kerr.UnknownServerError.Code, err.Error()
}

// knownLocked returns what this node knows of share session id of a group, noting that it is
// seen now. A session forwarded here (forwarded) and not seen before, of a group with no
// session here and no other live forwarded one, may come after an offsets change made while
// the group was empty: the group's idle state is dropped and read again (as a session opening
// here does).
func (s *shares) knownLocked(groupID, member string, id fwdSession, now time.Time, forwarded bool) *fwdState {
	st := s.known[id]
	if st == nil {
		if forwarded && !s.groupSessionLocked(groupID) && !s.groupForwardedLocked(groupID, now) {
			s.dropIdleLocked(groupID)
		}
		st = &fwdState{group: groupID, member: member, forwarded: forwarded}
		s.known[id] = st
	}
	if !st.ended {
		st.seen = now
	}
	return st
}

// fwdLive is how long a forwarded session counts as live after its latest fetch.
const fwdLive = time.Minute

// groupForwardedLocked reports whether a session forwarded to this node for the group is live.
func (s *shares) groupForwardedLocked(groupID string, now time.Time) bool {
	for _, st := range s.known {
		if st.forwarded && st.group == groupID && !st.ended && now.Sub(st.seen) < fwdLive {
			return true
		}
	}
	return false
}

// pruneKnownLocked forgets sessions not heard of for ten minutes (for one that ended: since it
// ended; a late fetch of it cannot come after that, bounded by its request's wait).
func (s *shares) pruneKnownLocked(now time.Time) {
	for id, st := range s.known {
		if now.Sub(st.seen) > 10*time.Minute {
			delete(s.known, id)
		}
	}
}

// releaseGoneLocked releases what the forwarded share sessions of nodes that are gone in img
// acquired here, as their ends would have if their nodes could still tell: the node is fenced,
// unknown, or another process run of it registered since the session was seen. A process
// killed with its sessions tells nobody, and an owner that keeps its state across the change
// (reclaimLocked) would otherwise hold their records until their locks expire. A session whose
// process is gone (another run, or the node unknown) also ends here: a fetch of it still on
// its way acquires nothing. One of a node that is only fenced (cut off) is not ended: it
// acquires again when the node is back, and what it held is delivered again (at least once).
// An image older than the registration the session was seen with judges nothing of it.
func (s *shares) releaseGoneLocked(img *controller.Image) {
	for id, st := range s.known {
		if !st.forwarded || st.ended || st.incarnation > img.LiveIndex {
			continue
		}
		n := img.Nodes[id.Node]
		ended := n == nil || st.run != "" && n.Run != st.run && n.Incarnation > st.incarnation
		if !ended && !n.Fenced {
			continue
		}
		st.ended = ended
		released := 0
		for k, sp := range s.parts {
			runs := sp.bySession[id]
			if k.group != st.group || sp.p == nil || len(runs) == 0 {
				continue
			}
			delete(sp.bySession, id)
			sp.p.SetConfig(shareConfig(s.b.groupSettings(st.group)))
			sp.p.ReleaseRuns(st.member, runs)
			s.persistLocked(sp)
			s.wakeLocked(sp)
			released++
		}
		if released > 0 {
			s.b.logger.Info("broker: released what a share session of a node that is gone held", "group", st.group, "member", st.member, "node", id.Node, "partitions", released)
		}
	}
}

// handleFetchPart, handleAckPart and handleRelease are the owner's side.
func (s *shares) handleFetchPart(ctx context.Context, _ int32, payload []byte) (any, error) {
	var req shareFetchPartReq
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	var resp shareFetchPartResp
	s.mu.Lock()
	st := s.knownLocked(req.Group, req.Member, req.Session, time.Now(), true)
	if req.Incarnation > st.incarnation {
		st.run, st.incarnation = req.Run, req.Incarnation
	}
	ended := st.ended
	s.mu.Unlock()
	if ended {
		return resp, nil
	}
	sp, lg, err := s.forwardedPartFor(ctx, req.Group, req.Part, true)
	if err == nil { // acquire checks the session again, under the lock
		resp.Records, resp.Acquired, err = s.acquire(ctx, sp, lg, req.Member, req.Session, s.b.groupSettings(req.Group), req.Exact, req.MaxBytes, req.MaxRecords)
	}
	resp.Code, resp.Message = answerError(err)
	return resp, nil
}

func (s *shares) handleAckPart(ctx context.Context, _ int32, payload []byte) (any, error) {
	var req shareAckPartReq
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	sp, _, err := s.forwardedPartFor(ctx, req.Group, req.Part, false)
	if err == nil {
		err = s.acknowledge(ctx, req.Member, sp, req.Acks)
	}
	var resp shareAckPartResp
	resp.Code, resp.Message = answerError(err)
	return resp, nil
}

func (s *shares) handleRelease(_ context.Context, _ int32, payload []byte) (any, error) {
	var req shareReleaseReq
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	s.endSession(req.Group, req.Member, req.Session, req.Parts) // a fetch of it still under way acquires nothing now
	return struct{}{}, nil
}
