package broker

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/share"
	"github.com/runnel-dev/runnel/internal/topics"
)

// The share group APIs (KIP-932, docs/share-groups.md): membership goes to the group's
// coordinator (groups.go) like any group's; ShareFetch and ShareAcknowledge go to the
// partitions' leaders (shares.go), within share sessions.

func init() {
	register(kmsg.ShareGroupHeartbeat, 1, 1, handleShareGroupHeartbeat)
	register(kmsg.ShareGroupDescribe, 1, 1, handleShareGroupDescribe)
	register(kmsg.ShareFetch, 1, 2, handleShareFetch) // v2: acquire modes (KIP-1206), renew (KIP-1222)
	register(kmsg.ShareAcknowledge, 1, 2, handleShareAcknowledge)
}

// call runs a coordinator call of one group that returns records, appends them and waits for
// their commit. If this node does not coordinate the group it returns the error for that.
func (gs *groups) call(ctx context.Context, groupID string, call func(c *group.Coordinator) group.Output) (*kerr.Error, error) {
	gs.mu.Lock()
	sh, code := gs.shardForLocked(groupID)
	if sh == nil {
		gs.mu.Unlock()
		return code, nil
	}
	out := call(sh.c)
	w, err := gs.persistLocked(sh, out.Records)
	gs.mu.Unlock()
	return nil, gs.finish(ctx, w, err, out.Replies)
}

func handleShareGroupHeartbeat(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if !r.allowedGroup(kmsg.ACLOperationRead, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{resp: resp}
	}
	for _, t := range req.SubscribedTopicNames {
		if !r.allowedTopic(kmsg.ACLOperationDescribe, t) {
			resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			return reply{resp: resp}
		}
	}
	gs := r.conn.b.groups
	got, done := gs.immediate(ctx, req.GroupID, func(c *group.Coordinator) (kmsg.Response, group.Output) {
		return c.ShareGroupHeartbeat(timeNow(), req, r.clientID, clientHost(r.conn.remote))
	}, func(code *kerr.Error) kmsg.Response {
		resp.ErrorCode = code.Code
		return resp
	})
	return reply{resp: got, wait: func() {
		if err := done(); err != nil {
			hb := got.(*kmsg.ShareGroupHeartbeatResponse)
			hb.ErrorCode, hb.Assignment = kerr.CoordinatorNotAvailable.Code, nil
		}
	}}
}

func handleShareGroupDescribe(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	var ids []string
	for _, id := range req.GroupIDs {
		if id != "" && r.allowedGroup(kmsg.ACLOperationDescribe, id) {
			ids = append(ids, id)
		}
	}
	gs := r.conn.b.groups
	gs.mu.Lock()
	in, missing := gs.byShardLocked(ids)
	described := map[string]kmsg.ShareGroupDescribeResponseGroup{}
	for sh, group := range in {
		sub := *req
		sub.GroupIDs = group
		for _, g := range sh.c.ShareGroupDescribe(&sub).Groups {
			described[g.GroupID] = g
		}
	}
	gs.mu.Unlock()
	may := r.mayDescribe()
	for id, g := range described {
		if g.ErrorCode == 0 && !mayDescribeShareAssignments(may, g.Members) {
			denied := kmsg.NewShareGroupDescribeResponseGroup()
			denied.GroupID, denied.ErrorCode, denied.ErrorMessage = g.GroupID, kerr.TopicAuthorizationFailed.Code, new(undescribableTopics)
			described[id] = denied
		}
	}
	for _, id := range req.GroupIDs {
		g, ok := described[id]
		switch {
		case id == "": // as Kafka's GroupCoordinatorService.shareGroupDescribe, on any node
			g = kmsg.NewShareGroupDescribeResponseGroup()
			g.ErrorCode = kerr.InvalidGroupID.Code
		case !ok:
			g = kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			if code, ok := missing[id]; ok {
				g.ErrorCode = code.Code
			}
		case g.ErrorCode == 0 && req.IncludeAuthorizedOperations: // KIP-430, as Kafka's handleShareGroupDescribe
			g.AuthorizedOperations = r.authorizedOperations(kmsg.ACLResourceTypeGroup, g.GroupID, groupOps)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply{resp: resp}
}

// nextShareEpoch is the session epoch after n (Kafka's ShareRequestMetadata.nextEpoch).
func nextShareEpoch(n int32) int32 {
	switch {
	case n < 0:
		return -1
	case n == 1<<31-1:
		return 1
	}
	return n + 1
}

// shareSessionUpdate applies a ShareFetch's (or, with fetch false, a ShareAcknowledge's) session
// epoch: it returns the session's partitions to fetch, each fetch starting one partition further
// along (rotated), and the session (at epoch -1, the one that ended, for the caller to release
// once it has applied the request's acknowledgements), or the top-level error.
func (s *shares) sessionUpdate(c *conn, groupID, member string, epoch int32, add []group.SharePartition, forget []group.SharePartition, acks, fetch bool) ([]group.SharePartition, *shareSession, error) {
	k := shareSessionKey{groupID, member}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[k]
	switch {
	case epoch == 0 && !fetch:
		return nil, nil, kerr.InvalidShareSessionEpoch // a ShareAcknowledge never opens a session
	case epoch == 0:
		if acks {
			return nil, nil, kerr.InvalidRequest
		}
		if sess == nil && len(s.sessions) >= shareSessionLimit {
			return nil, nil, kerr.ShareSessionLimitReached
		}
		if sess != nil && sess.conn == c { // the member opens its session again, on the same connection
			sess.epoch, sess.parts = 1, nil
			break
		}
		if !s.groupSessionLocked(groupID) {
			// The group had no member here: what this node holds of its share-partitions
			// may predate an offsets change (the group was empty then): load it again.
			s.dropIdleLocked(groupID)
		}
		sess = &shareSession{id: rand.Uint64(), epoch: 1, conn: c}
		s.sessions[k] = sess
		go func() { // the session ends with the connection that opened it
			<-c.ctx.Done()
			if s.b.stopping.Load() {
				// This node stops, not the member: its records stay as the last snapshot
				// has them (the delivery counted), for the next leader.
				return
			}
			s.mu.Lock()
			if s.sessions[k] == sess {
				delete(s.sessions, k)
			}
			s.mu.Unlock()
			// What it acquired is released, also if another connection's session replaced it
			// (that one's records are its own).
			s.releaseSession(groupID, member, sess)
		}()
	case sess == nil:
		return nil, nil, kerr.ShareSessionNotFound
	case epoch == -1:
		delete(s.sessions, k) // the caller releases the member's records after its acks
		return nil, sess, nil
	case epoch != sess.epoch:
		return nil, nil, kerr.InvalidShareSessionEpoch
	default:
		sess.epoch = nextShareEpoch(epoch)
	}
	if !fetch {
		return nil, sess, nil
	}
	for _, p := range add {
		if !slices.Contains(sess.parts, p) {
			sess.parts = append(sess.parts, p)
		}
	}
	sess.parts = slices.DeleteFunc(sess.parts, func(p group.SharePartition) bool { return slices.Contains(forget, p) })
	if len(sess.parts) == 0 {
		return nil, sess, nil
	}
	// Rotated by a count of the session's own fetches, not by its epoch: a client that
	// alternates ShareFetch and ShareAcknowledge (both move the epoch) would see every fetch
	// start with the same partition of two.
	first := sess.fetches % len(sess.parts)
	sess.fetches++
	return slices.Concat(sess.parts[first:], sess.parts[:first]), sess, nil
}

// shareAck is one partition's acknowledgements in a request.
type shareAck struct {
	part group.SharePartition
	acks []share.AckBatch
}

// sharePartResult is what a request did on one partition.
type sharePartResult struct {
	err, ackErr error
	acked       bool
	records     []byte
	acquired    []share.AcquiredRecords
	leader      int32
	leaderEpoch int32
	node        *controller.Node
}

// ackAll applies a request's acknowledgements, each partition's at once, and waits until they
// are durable: the share-state writes of its partitions are under way together (as Kafka's), so
// the request waits for about one write, not one per partition. acks has one entry per
// partition (addShareAck), so each goroutine has its result to itself.
func (s *shares) ackAll(ctx context.Context, r *request, groupID, member string, acks []shareAck, results map[group.SharePartition]*sharePartResult) {
	var wg sync.WaitGroup
	for _, a := range acks {
		res := resultFor(results, a.part)
		res.acked = true
		if err := s.checkTopic(r, a.part); err != nil {
			res.ackErr = err
			continue
		}
		if owner, ok := s.forwardTo(a.part); ok {
			wg.Go(func() {
				res.ackErr = s.ackRemote(ctx, owner, shareAckPartReq{groupID, member, a.part, a.acks})
			})
			continue
		}
		wg.Go(func() {
			sp, _, err := s.partFor(ctx, groupID, a.part, res, false)
			if err != nil {
				res.ackErr = err
				return
			}
			res.ackErr = s.acknowledge(ctx, member, sp, a.acks)
		})
	}
	wg.Wait()
}

func resultFor(results map[group.SharePartition]*sharePartResult, p group.SharePartition) *sharePartResult {
	res := results[p]
	if res == nil {
		res = &sharePartResult{leader: -1, leaderEpoch: -1}
		results[p] = res
	}
	return res
}

// checkTopic checks a share-partition's topic and partition exist, the principal may read it,
// and it is a local topic.
func (s *shares) checkTopic(r *request, p group.SharePartition) error {
	t, ok := s.b.topics.GetByID(p.Topic)
	switch {
	case !ok:
		return kerr.UnknownTopicID
	case !r.allowedTopic(kmsg.ACLOperationRead, t.Name):
		return kerr.TopicAuthorizationFailed
	case p.Partition < 0 || int(p.Partition) >= len(t.Partitions):
		return kerr.UnknownTopicOrPartition
	}
	return nil
}

// partFor loads a share-partition this node keeps; for another leader (or owner) it fills
// res's hint.
func (s *shares) partFor(ctx context.Context, groupID string, p group.SharePartition, res *sharePartResult, create bool) (*sharePart, shareLog, error) {
	t, ok := s.b.topics.GetByID(p.Topic)
	if !ok || p.Partition < 0 || int(p.Partition) >= len(t.Partitions) { // deleted meanwhile
		return nil, nil, kerr.UnknownTopicID
	}
	lg, err := s.b.shareLogFor(t, p.Partition)
	if err == nil {
		if _, _, leading := lg.owning(); !leading {
			err = kerr.NotLeaderForPartition
		}
	}
	if errors.Is(err, kerr.NotLeaderForPartition) {
		res.leader, res.leaderEpoch, res.node = s.b.shareLeaderHint(t, p.Partition)
	}
	if err != nil {
		return nil, nil, err
	}
	sp, err := s.get(ctx, shareKey{groupID, p.Topic, p.Partition}, lg, create)
	return sp, lg, err
}

// shareLeaderHint is the node a share-partition's requests belong to (KIP-951's hint): a local
// partition's leader, an object partition's share owner (leader epoch 0, as Metadata says).
func (b *Broker) shareLeaderHint(t *topics.Topic, index int32) (int32, int32, *controller.Node) {
	if !isObjectTopic(t) {
		return b.leaderHint(t.ID, index)
	}
	img := b.cl.Image()
	owner := shareOwner(img, t.ID, index)
	if owner < 0 {
		return -1, -1, nil
	}
	return owner, 0, img.Nodes[owner]
}

func toAckBatches[T any](batches []T, get func(T) (int64, int64, []int8)) []share.AckBatch {
	out := make([]share.AckBatch, 0, len(batches))
	for _, b := range batches {
		first, last, types := get(b)
		ab := share.AckBatch{First: first, Last: last, Types: make([]share.AckType, len(types))}
		for i, t := range types {
			ab.Types[i] = share.AckType(t)
		}
		out = append(out, ab)
	}
	return out
}

// validRenew: RENEW (4) only in v2 requests flagged IsRenewAck, as Kafka 4.2.
func validAckTypes(acks []share.AckBatch, renewOK bool) bool {
	for _, a := range acks {
		for _, t := range a.Types {
			if t == share.Renew && !renewOK {
				return false
			}
		}
	}
	return true
}

// shareRequester checks the group and member a ShareFetch or ShareAcknowledge names: both
// given (else INVALID_REQUEST), and the group readable by the requester.
func shareRequester(r *request, groupID, memberID *string) (group, member string, bad *kerr.Error) {
	if groupID == nil || *groupID == "" || memberID == nil || *memberID == "" {
		return "", "", kerr.InvalidRequest
	}
	if !r.allowedGroup(kmsg.ACLOperationRead, *groupID) {
		return "", "", kerr.GroupAuthorizationFailed
	}
	return *groupID, *memberID, nil
}

// ShareFetch v2's acquire modes (KIP-1206): whole log batches, stopping after the one that
// reaches MaxRecords (Kafka's default), or exactly MaxRecords records at most.
const (
	shareBatchOptimized int8 = 0
	shareRecordLimit    int8 = 1
)

func handleShareFetch(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	s := r.conn.b.shares
	fail := func(err *kerr.Error) reply {
		resp.ErrorCode = err.Code
		return reply{resp: resp}
	}
	groupID, member, bad := shareRequester(r, req.GroupID, req.MemberID)
	resp.AcquisitionLockTimeoutMillis = int32(s.lockDuration(groupID).Milliseconds())
	if bad == nil && req.IsRenewAck && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		bad = kerr.InvalidRequest // KIP-1222: a renewal fetches nothing
	}
	if bad == nil && req.Version >= 2 && req.ShareAcquireMode != shareBatchOptimized && req.ShareAcquireMode != shareRecordLimit {
		bad = kerr.InvalidRequest // KIP-1206's two modes
	}
	if bad != nil {
		return fail(bad)
	}
	var add, forget []group.SharePartition
	var acks []shareAck
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			sp := group.SharePartition{Topic: t.TopicID, Partition: p.Partition}
			add = append(add, sp)
			if len(p.AcknowledgementBatches) > 0 {
				batches := toAckBatches(p.AcknowledgementBatches, func(b kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
					return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
				})
				acks = addShareAck(acks, sp, batches)
			}
		}
	}
	for _, ft := range req.ForgottenTopicsData {
		for _, p := range ft.Partitions {
			forget = append(forget, group.SharePartition{Topic: ft.TopicID, Partition: p})
		}
	}
	parts, sess, err := s.sessionUpdate(r.conn, groupID, member, req.ShareSessionEpoch, add, forget, len(acks) > 0, true)
	if errors.Is(err, kerr.ShareSessionLimitReached) {
		// As Kafka: answered after MaxWait, so that a client does not spin on it.
		return reply{resp: resp, wait: func() {
			select {
			case <-time.After(time.Duration(req.MaxWaitMillis) * time.Millisecond):
			case <-ctx.Done():
			}
			resp.ErrorCode = kerr.ShareSessionLimitReached.Code
		}}
	}
	if err != nil {
		var ke *kerr.Error
		errors.As(err, &ke)
		return fail(ke)
	}
	if req.IsRenewAck {
		parts = nil // acknowledgements only
	}
	return reply{resp: resp, wait: func() {
		results := map[group.SharePartition]*sharePartResult{}
		for _, a := range acks {
			if !validAckTypes(a.acks, req.Version >= 2 && req.IsRenewAck) {
				resultFor(results, a.part).acked = true
				resultFor(results, a.part).ackErr = kerr.InvalidRequest
			}
		}
		var valid []shareAck
		for _, a := range acks {
			if res := results[a.part]; res == nil || res.ackErr == nil {
				valid = append(valid, a)
			}
		}
		s.ackAll(ctx, r, groupID, member, valid, results)
		if req.ShareSessionEpoch == -1 {
			s.releaseSession(groupID, member, sess)
		}
		s.fetchAll(ctx, r, req, groupID, member, sess, parts, results)
		order := append(slices.Clone(parts), ackOrder(acks, parts)...)
		for _, p := range order {
			res := results[p]
			if res == nil {
				if req.ShareSessionEpoch != 0 {
					continue // an incremental answer lists what has news
				}
				res = resultFor(results, p)
			}
			rp := kmsg.NewShareFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			if res.err != nil {
				rp.ErrorCode = shareFetchErrorCode(res.err)
				if msg := res.err.Error(); !isKerr(res.err) {
					rp.ErrorMessage = &msg
				}
			}
			if res.ackErr != nil {
				rp.AcknowledgeErrorCode = errorCode(res.ackErr)
			}
			if errors.Is(res.err, kerr.NotLeaderForPartition) || errors.Is(res.ackErr, kerr.NotLeaderForPartition) {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = res.leader, res.leaderEpoch
				shareEndpoint(&resp.NodeEndpoints, res.node, r.conn.listener.Name)
			}
			rp.Records = res.records
			if rp.Records == nil {
				rp.Records = []byte{} // non-nullable from v1: Java refuses a null record set
			}
			for _, a := range res.acquired {
				ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.Count
				rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
			}
			addShareFetchPartition(resp, p.Topic, rp)
		}
	}}
}

// peerGone reports whether c's client can no longer read answers (its read side ended).
func peerGone(c *conn) bool {
	select {
	case <-c.readDone:
		return true
	default:
		return false
	}
}

func isKerr(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke)
}

// ackOrder lists the acknowledged partitions that are not in parts.
func ackOrder(acks []shareAck, parts []group.SharePartition) []group.SharePartition {
	var out []group.SharePartition
	for _, a := range acks {
		if !slices.Contains(parts, a.part) && !slices.Contains(out, a.part) {
			out = append(out, a.part)
		}
	}
	return out
}

func addShareFetchPartition(resp *kmsg.ShareFetchResponse, topic [16]byte, rp kmsg.ShareFetchResponseTopicPartition) {
	if n := len(resp.Topics); n > 0 && resp.Topics[n-1].TopicID == topic {
		resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, rp)
		return
	}
	rt := kmsg.NewShareFetchResponseTopic()
	rt.TopicID, rt.Partitions = topic, []kmsg.ShareFetchResponseTopicPartition{rp}
	resp.Topics = append(resp.Topics, rt)
}

// shareEndpoint adds a node's endpoint on listener to a share response's NodeEndpoints, once.
func shareEndpoint[E kmsg.ShareFetchResponseNodeEndpoint | kmsg.ShareAcknowledgeResponseNodeEndpoint](eps *[]E, n *controller.Node, listener string) {
	if n == nil {
		return
	}
	host, port, ok := n.Endpoint(listener)
	if !ok {
		return
	}
	var rack *string
	if n.Rack != "" {
		rack = &n.Rack
	}
	for _, e := range *eps {
		switch e := any(e).(type) {
		case kmsg.ShareFetchResponseNodeEndpoint:
			if e.NodeID == n.ID {
				return
			}
		case kmsg.ShareAcknowledgeResponseNodeEndpoint:
			if e.NodeID == n.ID {
				return
			}
		}
	}
	var e E
	switch p := any(&e).(type) {
	case *kmsg.ShareFetchResponseNodeEndpoint:
		p.NodeID, p.Host, p.Port, p.Rack = n.ID, host, port, rack
	case *kmsg.ShareAcknowledgeResponseNodeEndpoint:
		p.NodeID, p.Host, p.Port, p.Rack = n.ID, host, port, rack
	}
	*eps = append(*eps, e)
}

// isObject reports whether p is a partition of an object-storage topic.
func (s *shares) isObject(p group.SharePartition) bool {
	t, ok := s.b.topics.GetByID(p.Topic)
	return ok && isObjectTopic(t)
}

// acquiredCount is how many records runs hold.
func acquiredCount(runs []share.AcquiredRecords) int {
	n := 0
	for _, a := range runs {
		n += int(a.Last - a.First + 1)
	}
	return n
}

// fetchAll acquires records of the session's partitions for member, waiting up to MaxWait for
// some when there are none (woken by appends, releases and lock expiry).
func (s *shares) fetchAll(ctx context.Context, r *request, req *kmsg.ShareFetchRequest, groupID, member string, sess *shareSession, parts []group.SharePartition, results map[group.SharePartition]*sharePartResult) {
	if len(parts) == 0 {
		return
	}
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	set := s.b.groupSettings(groupID)
	maxRecords := int(req.MaxRecords)
	if req.Version < 1 || maxRecords <= 0 {
		maxRecords = 500
	}
	exact := req.Version >= 2 && req.ShareAcquireMode == shareRecordLimit
	// polled is each forwarded partition's end (and last stable offset) at its latest poll of
	// the owner: an image change that moved neither asks the owner nothing until the poll
	// interval has passed (every applied command anywhere changes the image).
	type poll struct {
		end, stable int64
		at          time.Time
	}
	polled := map[group.SharePartition]poll{}
	for {
		var wake []<-chan struct{} // the partitions' appends and their share-partitions' wake-ups
		forwarding := false        // some partitions' share state is on other nodes
		budget := int(req.MaxBytes)
		if budget <= 0 {
			budget = 1<<31 - 1
		}
		got := 0
		if peerGone(r.conn) {
			break // nobody reads this answer: records acquired for it would sit locked
		}
		for _, p := range parts { // rotated per fetch (sessionUpdate)
			res := resultFor(results, p)
			res.err = nil
			if err := s.checkTopic(r, p); err != nil {
				res.err = err
				continue
			}
			var take func(budget, want int) ([]byte, []share.AcquiredRecords, error)
			if owner, ok := s.forwardTo(p); ok {
				forwarding = true
				wake = append(wake, s.b.cl.ImageChanged()) // appends to object partitions
				now := time.Now()
				if op, err := s.b.objectPartition(p.Topic, p.Partition); err == nil {
					last, seen := polled[p]
					if seen && last.end == op.Next && last.stable == op.LastStable() && now.Sub(last.at) < shareForwardPoll {
						continue // nothing new to ask the owner yet
					}
					polled[p] = poll{op.Next, op.LastStable(), now}
				}
				fr := shareFetchPartReq{Group: groupID, Member: member, Session: fwdSession{s.b.cfg.NodeID, sess.id}, Part: p, Exact: exact, Run: s.b.cl.Run(), Incarnation: s.b.cl.Incarnation()}
				take = func(budget, want int) ([]byte, []share.AcquiredRecords, error) {
					if !s.held(groupID, member, sess, p, owner) {
						return nil, nil, nil // the session ended: it acquires nothing
					}
					fr.MaxBytes, fr.MaxRecords = budget, want
					records, acquired, err := s.fetchRemote(ctx, owner, time.Until(deadline), fr)
					if errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownTopicID) {
						err = nil // the owner's image is behind or ahead of this one: nothing yet
					}
					return records, acquired, err
				}
			} else {
				sp, lg, err := s.partFor(ctx, groupID, p, res, true)
				if transientShareError(err) || errors.Is(err, kerr.NotLeaderForPartition) && s.isObject(p) {
					// No records yet, no error: the client fetches again (Kafka parks it). An
					// object partition's owner moved here or away since forwardTo looked.
					continue
				}
				if err != nil {
					res.err = err
					continue
				}
				wake = append(wake, lg.changed(), s.wakeChan(sp))
				take = func(budget, want int) ([]byte, []share.AcquiredRecords, error) {
					if !s.held(groupID, member, sess, p, s.b.cfg.NodeID) {
						return nil, nil, nil // the session ended: it acquires nothing
					}
					return s.acquire(ctx, sp, lg, member, fwdSession{s.b.cfg.NodeID, sess.id}, set, exact, budget, want)
				}
			}
			if got >= maxRecords || budget <= 0 {
				continue
			}
			records, acquired, err := take(budget, maxRecords-got)
			if transientShareError(err) {
				continue
			}
			if err != nil {
				res.err = err
				continue
			}
			res.records, res.acquired = records, acquired
			budget -= len(records)
			got += acquiredCount(acquired)
		}
		failed := false
		for _, p := range parts {
			failed = failed || results[p].err != nil
		}
		if got > 0 || failed || !time.Now().Before(deadline) || req.MinBytes == 0 && req.MaxWaitMillis == 0 {
			break // records, or an error to tell, or no more time
		}
		wait := time.Until(deadline)
		if forwarding {
			wait = min(wait, shareForwardPoll) // what the owners release or expire is seen by polling
		}
		if !waitAny(ctx, s.b.stopped, append(wake, r.conn.readDone), wait) && (!forwarding || ctx.Err() != nil || s.b.stopping.Load()) {
			break
		}
	}
	// Partitions with nothing to say are left out of an incremental answer.
	for _, p := range parts {
		if res := results[p]; res != nil && res.err == nil && !res.acked && len(res.acquired) == 0 && req.ShareSessionEpoch != 0 {
			delete(results, p)
		}
	}
}

func handleShareAcknowledge(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	s := r.conn.b.shares
	fail := func(err *kerr.Error) reply {
		resp.ErrorCode = err.Code
		return reply{resp: resp}
	}
	groupID, member, bad := shareRequester(r, req.GroupID, req.MemberID)
	resp.AcquisitionLockTimeoutMillis = int32(s.lockDuration(groupID).Milliseconds())
	if bad != nil {
		return fail(bad)
	}
	_, sess, err := s.sessionUpdate(r.conn, groupID, member, req.ShareSessionEpoch, nil, nil, true, false)
	if err != nil {
		var ke *kerr.Error
		errors.As(err, &ke)
		return fail(ke)
	}
	var acks []shareAck
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			batches := toAckBatches(p.AcknowledgementBatches, func(b kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			})
			acks = addShareAck(acks, group.SharePartition{Topic: t.TopicID, Partition: p.Partition}, batches)
		}
	}
	return reply{resp: resp, wait: func() {
		results := map[group.SharePartition]*sharePartResult{}
		var valid []shareAck
		for _, a := range acks {
			if !validAckTypes(a.acks, req.Version >= 2 && req.IsRenewAck) {
				res := resultFor(results, a.part)
				res.acked, res.ackErr = true, kerr.InvalidRequest
				continue
			}
			if len(a.acks) > 0 {
				valid = append(valid, a)
			}
		}
		s.ackAll(ctx, r, groupID, member, valid, results)
		if req.ShareSessionEpoch == -1 {
			s.releaseSession(groupID, member, sess)
		}
		for _, a := range acks {
			res := resultFor(results, a.part)
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = a.part.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			if res.ackErr != nil {
				rp.ErrorCode = errorCode(res.ackErr)
				if !isKerr(res.ackErr) {
					rp.ErrorCode = kerr.InvalidRequest.Code
				}
			}
			if errors.Is(res.ackErr, kerr.NotLeaderForPartition) {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = res.leader, res.leaderEpoch
				shareEndpoint(&resp.NodeEndpoints, res.node, r.conn.listener.Name)
			}
			if n := len(resp.Topics); n > 0 && resp.Topics[n-1].TopicID == a.part.Topic {
				resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, rp)
				continue
			}
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID, rt.Partitions = a.part.Topic, []kmsg.ShareAcknowledgeResponseTopicPartition{rp}
			resp.Topics = append(resp.Topics, rt)
		}
	}}
}

func init() {
	register(kmsg.DescribeShareGroupOffsets, 0, 1, handleDescribeShareGroupOffsets)
	register(kmsg.AlterShareGroupOffsets, 0, 0, handleAlterShareGroupOffsets)
	register(kmsg.DeleteShareGroupOffsets, 0, 0, handleDeleteShareGroupOffsets)
}

// shareHighWatermark is a partition's high watermark if this node leads it, or the end this
// node's image has of an object partition (for the lag).
func (b *Broker) shareHighWatermark(topic [16]byte, partition int32) (int64, bool) {
	t, ok := b.topics.GetByID(topic)
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return 0, false
	}
	if isObjectTopic(t) {
		p, err := b.objectPartition(t.ID, partition)
		if err != nil {
			return 0, false
		}
		return p.Next, true
	}
	if t.Partitions[partition].Replica == nil {
		return 0, false
	}
	r := t.Partitions[partition].Replica
	if _, ready, leading := r.Leading(); !leading || !ready {
		return 0, false
	}
	return r.HighWatermark(), true
}

func handleDescribeShareGroupOffsets(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	gs := r.conn.b.groups
	for _, rg := range req.Groups {
		if !r.allowedGroup(kmsg.ACLOperationDescribe, rg.GroupID) {
			g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			g.GroupID, g.ErrorCode = rg.GroupID, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		sub := *req
		sub.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{rg}
		gs.mu.Lock()
		sh, code := gs.shardForLocked(rg.GroupID)
		if sh == nil {
			gs.mu.Unlock()
			g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			g.GroupID, g.ErrorCode = rg.GroupID, code.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		got := sh.c.DescribeShareGroupOffsets(&sub, r.conn.b.shareHighWatermark)
		gs.mu.Unlock()
		may := r.mayDescribe()
		for _, g := range got.Groups {
			if rg.Topics == nil {
				// All the group's topics: those the principal may not describe are left out,
				// as Kafka's describeShareGroupAllOffsetsForGroup (named, they leaked).
				g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.DescribeShareGroupOffsetsResponseGroupTopic) bool {
					return !may(t.Topic)
				})
			}
			for i := range g.Topics {
				if !may(g.Topics[i].Topic) {
					for j := range g.Topics[i].Partitions {
						p := &g.Topics[i].Partitions[j]
						p.ErrorCode, p.StartOffset, p.Lag = kerr.TopicAuthorizationFailed.Code, -1, -1
					}
				}
			}
			resp.Groups = append(resp.Groups, g)
		}
	}
	return reply{resp: resp}
}

func handleAlterShareGroupOffsets(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.AlterShareGroupOffsetsRequest)
	var topics []string
	for _, t := range req.Topics {
		topics = append(topics, t.Topic)
	}
	return changeShareOffsets(ctx, r, req.GroupID, kmsg.ACLOperationRead, topics, func(c *group.Coordinator) (kmsg.Response, group.Output) {
		return c.AlterShareGroupOffsets(timeNow(), req)
	}, func(resp kmsg.Response, code int16) { resp.(*kmsg.AlterShareGroupOffsetsResponse).ErrorCode = code })
}

func handleDeleteShareGroupOffsets(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.DeleteShareGroupOffsetsRequest)
	var topics []string
	for _, t := range req.Topics {
		topics = append(topics, t.Topic)
	}
	return changeShareOffsets(ctx, r, req.GroupID, kmsg.ACLOperationDelete, topics, func(c *group.Coordinator) (kmsg.Response, group.Output) {
		return c.DeleteShareGroupOffsets(timeNow(), req)
	}, func(resp kmsg.Response, code int16) { resp.(*kmsg.DeleteShareGroupOffsetsResponse).ErrorCode = code })
}

// changeShareOffsets runs an alteration or deletion of a share group's offsets: groupOp on the
// group and READ on its topics are required (Kafka's checks), and the answer goes out once the
// coordinator's records are committed. setError sets the response's top-level error.
func changeShareOffsets(ctx context.Context, r *request, groupID string, groupOp kmsg.ACLOperation, topics []string,
	call func(*group.Coordinator) (kmsg.Response, group.Output), setError func(kmsg.Response, int16)) reply {
	resp := r.req.ResponseKind()
	if !r.allowedGroup(groupOp, groupID) {
		setError(resp, kerr.GroupAuthorizationFailed.Code)
		return reply{resp: resp}
	}
	for _, t := range topics {
		if !r.allowedTopic(kmsg.ACLOperationRead, t) {
			setError(resp, kerr.TopicAuthorizationFailed.Code)
			return reply{resp: resp}
		}
	}
	got, done := r.conn.b.groups.immediate(ctx, groupID, call, func(code *kerr.Error) kmsg.Response {
		setError(resp, code.Code)
		return resp
	})
	return reply{resp: got, wait: func() {
		if err := done(); err != nil {
			setError(got, kerr.CoordinatorNotAvailable.Code)
		}
	}}
}

// groupSessionLocked reports whether a member of the group has a share session here.
func (s *shares) groupSessionLocked(groupID string) bool {
	for k := range s.sessions {
		if k.group == groupID {
			return true
		}
	}
	return false
}

// dropIdleLocked forgets the loaded share-partitions of a group that hold nothing in flight on
// this node (no acquired record, no write pending or to retry): the next use reads them again.
// A state whose write failed and waits for its retry is kept: dropped, a lock expiry it held
// (a record archived at its delivery limit) was lost, and the record delivered again.
func (s *shares) dropIdleLocked(groupID string) {
	for k, sp := range s.parts {
		if k.group == groupID && sp.p != nil && !sp.persisting && len(sp.waiters) == 0 && sp.p.NextDeadline().IsZero() && !sp.p.Dirty() {
			s.dropLocked(sp, kerr.NotLeaderForPartition)
		}
	}
}

// transientShareError reports a failure to reach a share-partition's state that passes by
// itself (a leader or coordinator settling): the fetch answers no records for it rather than an
// error the Java client does not expect (it takes only a few codes: shareFetchErrorCode).
func transientShareError(err error) bool {
	return errors.Is(err, kerr.LeaderNotAvailable) || errors.Is(err, kerr.CoordinatorNotAvailable) ||
		errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.RequestTimedOut)
}

// shareFetchErrorCode is a ShareFetch partition's error code, among those Kafka's share consumer
// handles (ShareFetchCollector: not leader, unknown topic, authorization, storage errors,
// UNKNOWN_SERVER_ERROR); anything else becomes UNKNOWN_SERVER_ERROR.
func shareFetchErrorCode(err error) int16 {
	switch code := errorCode(err); code {
	case kerr.NotLeaderForPartition.Code, kerr.ReplicaNotAvailable.Code, kerr.KafkaStorageError.Code, kerr.FencedLeaderEpoch.Code,
		kerr.OffsetNotAvailable.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code, kerr.InconsistentTopicID.Code,
		kerr.TopicAuthorizationFailed.Code, kerr.UnknownLeaderEpoch.Code, kerr.CorruptMessage.Code:
		return code
	case kerr.OffsetOutOfRange.Code: // retention moved the log start under the read: try again
		return kerr.OffsetNotAvailable.Code
	}
	return kerr.UnknownServerError.Code
}

// addShareAck adds a partition's acknowledgement batches to a request's, merged with an earlier
// entry for the same partition (a request may name it twice): one result per partition, and
// the batches validated together.
func addShareAck(acks []shareAck, p group.SharePartition, batches []share.AckBatch) []shareAck {
	for i := range acks {
		if acks[i].part == p {
			acks[i].acks = append(acks[i].acks, batches...)
			return acks
		}
	}
	return append(acks, shareAck{p, batches})
}
