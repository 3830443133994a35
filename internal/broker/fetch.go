package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.Fetch, 4, 16, handleFetch) }

// handleFetch serves a fetch off the read loop: it reads what there is and, while that is less
// than MinBytes, waits for appends to any fetched partition (woken by them, not by polling)
// until MaxWaitMillis.
func handleFetch(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	rep := reply{resp: resp, files: &fileRanges{zeroCopy: r.conn.zeroCopy}}
	acc := fetchAccess{listener: r.conn.listener.Name, read: func(topic string) bool { return r.allowedTopic(kmsg.ACLOperationRead, topic) }}
	if quotas := r.conn.b.cl.Image().ClientQuotas; len(quotas) > 0 {
		acc.quotaCap, acc.capped = r.conn.b.quotas.consumerFetchCap(quotas, quotaUser(r.conn.principal), r.clientID, time.Now())
	}
	rep.wait = func() { r.conn.b.fetch(ctx, req, resp, rep.files, acc) }
	return rep
}

// fetchAccess is what a fetch needs of its connection: the listener (for leader hints) and
// whether its principal may read a topic.
type fetchAccess struct {
	listener string
	read     func(topic string) bool
	denied   map[*sessionPartition]bool // partitions of topics the principal may not read
	// quotaCap, if capped, bounds the bytes read: the client's consumer quota over its window
	// (quotaManager.consumerFetchCap).
	quotaCap int
	capped   bool
}

// fetchBudget is what a fetch reads at most (beyond the first batch, which goes whatever the
// limit): the client's MaxBytes, the node's fetch.max.bytes, and the consumer quota's cap.
func (b *Broker) fetchBudget(req *kmsg.FetchRequest, acc fetchAccess) int {
	budget := max(min(int(req.MaxBytes), int(b.cfg.FetchMaxBytes)), 0)
	if acc.capped {
		budget = min(budget, acc.quotaCap)
	}
	return budget
}

func (b *Broker) fetch(ctx context.Context, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, files *fileRanges, acc fetchAccess) {
	parts, sess, err := b.fetchPartitions(req)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return
	}
	if b.cfg.Security.Authorizer != nil {
		acc.denied = map[*sessionPartition]bool{}
		for _, sp := range parts {
			name := sp.topic
			t, err := b.fetchTopic(sp)
			if errors.Is(err, kerr.UnknownTopicID) {
				continue // UNKNOWN_TOPIC_ID before any permission, as Kafka: the client refreshes its metadata
			}
			if err == nil {
				name = t.Name
			}
			if !acc.read(name) {
				acc.denied[sp] = true
			}
		}
	}
	if sess != nil {
		resp.SessionID = sess.id
		sess.mu.Lock()
		defer sess.mu.Unlock()
	}
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	// A partition whose new leader has not yet committed its epoch's start would show a high
	// watermark that may be below what the old leader showed: wait for it (briefly), else
	// answer OFFSET_NOT_AVAILABLE for it.
	for _, sp := range parts {
		if acc.denied[sp] {
			continue
		}
		if p, follower, err := b.readable(req.Version, sp); err == nil && !follower {
			waitReady(ctx, p.Replica, min(time.Until(deadline), time.Second))
		}
	}
	for {
		var wake []<-chan struct{}
		objects := false
		for _, sp := range parts { // subscribe before reading, so no commit is missed
			if acc.denied[sp] {
				continue
			}
			if t, err := b.fetchTopic(sp); err == nil && isObjectTopic(t) {
				objects = true
			} else if p, _, err := b.readable(req.Version, sp); err == nil {
				wake = append(wake, p.Replica.Changed()) // the high watermark moved
			}
		}
		if objects { // object partitions move with the image: a commit-file wakes the fetch
			wake = append(wake, b.cl.ImageChanged())
		}
		resp.Topics = resp.Topics[:0]
		files.release() // what an earlier, too small read gathered
		incremental := sess != nil && req.SessionEpoch > 0
		sent, total, full := b.fillFetch(ctx, req, resp, parts, incremental, files, acc)
		// As Kafka's fetch, an answer that tells of an error reading a partition or sends the
		// client to another replica (KIP-392) goes at once: waiting for bytes would only delay
		// a failover or a redirect by the client's max wait. Partitions Kafka refuses before
		// reading (not authorized, unknown) do not hurry it.
		urgent := false
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				switch p.ErrorCode {
				case 0, kerr.TopicAuthorizationFailed.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code:
				default:
					urgent = true
				}
				urgent = urgent || p.PreferredReadReplica >= 0
			}
		}
		// MinBytes above what the fetch may read counts as that much, as Kafka's
		// fetchMinBytes = min(MinBytes, MaxBytes); a partition with more records than its
		// limit let in counts as its limit (Kafka's DelayedFetch counts the bytes available).
		done := total >= min(int(req.MinBytes), max(b.fetchBudget(req, acc), 1)) || full || urgent || !time.Now().Before(deadline) || len(wake) == 0
		if !done && waitAny(ctx, b.stopped, wake, time.Until(deadline)) {
			continue // an append: read again
		}
		if !done { // the wait timed out (or the broker stops): answer with what there is now
			resp.Topics = resp.Topics[:0]
			files.release()
			sent, _, _ = b.fillFetch(ctx, req, resp, parts, incremental, files, acc)
		}
		for _, sv := range sent { // only the response that goes out counts as sent
			sv.sp.sentHW, sv.sp.sentLSO, sv.sp.sentStart = sv.hw, sv.lso, sv.start
		}
		if incremental {
			sess.sentLast(sent)
		}
		return
	}
}

// sentValues is what a response tells the client of a session partition.
type sentValues struct {
	sp             *sessionPartition
	hw, lso, start int64
}

// fetchTopicName is the name a fetch means: from v13 on topics are named by id.
func (b *Broker) fetchTopicName(version int16, name string, id [16]byte) string {
	if version >= 13 {
		if t, ok := b.topics.GetByID(id); ok {
			return t.Name
		}
	}
	return name
}

// fetchPartitions resolves the partitions a fetch covers: the request's, or, with a session,
// the session's after applying the request's changes.
func (b *Broker) fetchPartitions(req *kmsg.FetchRequest) ([]*sessionPartition, *fetchSession, error) {
	var parts []*sessionPartition
	for _, rt := range req.Topics {
		name := b.fetchTopicName(req.Version, rt.Topic, rt.TopicID)
		for _, rp := range rt.Partitions {
			// Any negative epoch is none, as Kafka's FetchRequest reads it (optionalEpoch).
			parts = append(parts, &sessionPartition{topic: name, topicID: rt.TopicID, byID: req.Version >= 13,
				partition: rp.Partition, leaderEpoch: max(rp.CurrentLeaderEpoch, -1),
				offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, sentHW: -1, sentLSO: -1, sentStart: -1})
		}
	}
	// A partition asked for twice is fetched once, as its last mention asks (Kafka's
	// FetchRequest.fetchData): a session's put keeps it so; a sessionless fetch, lastMentions.
	switch {
	case req.Version < 7 || (req.SessionID == 0 && req.SessionEpoch == -1):
		return lastMentions(parts), nil, nil // sessionless full fetch
	case req.SessionEpoch == -1: // close the session, then a sessionless full fetch
		b.fetchSessions.remove(req.SessionID)
		return lastMentions(parts), nil, nil
	case req.SessionEpoch == 0: // a new session (closing the named one, if any)
		if req.SessionID != 0 {
			b.fetchSessions.remove(req.SessionID)
		}
		s := b.fetchSessions.create(len(parts), time.Now())
		if s == nil {
			return lastMentions(parts), nil, nil // the cache is full of sessions worth more: sessionless
		}
		s.byID = req.Version >= 13
		for _, p := range parts {
			s.put(p)
		}
		return s.list(), s, nil
	}
	s, err := b.fetchSessions.get(req.SessionID, time.Now())
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.SessionEpoch != s.epoch {
		return nil, nil, kerr.InvalidFetchSessionEpoch
	}
	if s.byID != (req.Version >= 13) {
		// As Kafka's FetchManager: a session keyed by names and a request by topic ids (the Java
		// consumer moves between v12 and v13 as its topics' ids are known) or the other way round
		// would hold a partition twice, and fetch it again at its old offset.
		return nil, nil, kerr.FetchSessionTopicIDError
	}
	s.epoch = nextEpoch(s.epoch)
	for _, p := range parts {
		s.put(p)
	}
	for _, ft := range req.ForgottenTopics {
		for _, idx := range ft.Partitions {
			if req.Version >= 13 {
				s.forget(partKey{id: ft.TopicID, partition: idx})
			} else {
				s.forget(partKey{topic: ft.Topic, partition: idx})
			}
		}
	}
	if len(s.parts) == 0 {
		// As Kafka's FetchManager: a session left with no partition is closed, and the fetch
		// answered sessionless (session id 0), so the client knows and starts a new one.
		b.fetchSessions.remove(s.id)
		return lastMentions(parts), nil, nil
	}
	return s.list(), s, nil
}

// lastMentions is parts with a partition named twice kept once, at its first place, as its last
// mention asks.
func lastMentions(parts []*sessionPartition) []*sessionPartition {
	if len(parts) < 2 {
		return parts
	}
	at := make(map[partKey]int, len(parts))
	out := parts[:0]
	for _, p := range parts {
		if i, ok := at[p.key()]; ok {
			out[i] = p
			continue
		}
		at[p.key()] = len(out)
		out = append(out, p)
	}
	return out
}

// put adds a partition to the session, or updates what the client now asks of it: its offset,
// its byte limit and its current leader epoch.
func (s *fetchSession) put(p *sessionPartition) {
	k := p.key()
	if old, ok := s.parts[k]; ok {
		old.offset, old.maxBytes, old.leaderEpoch = p.offset, p.maxBytes, p.leaderEpoch
		if p.byID {
			old.topic = p.topic // the name it has now, for the log and ACLs
		}
		return
	}
	s.parts[k] = p
	s.order = append(s.order, k)
}

// sentLast moves the partitions a response of an incremental session listed to the end of the
// session's order, as Kafka does: the next responses' byte budget goes first to the others,
// so a consumer with many partitions behind gets all of them in turn, not only the first few.
func (s *fetchSession) sentLast(sent []sentValues) {
	if len(sent) == 0 {
		return
	}
	moved := make(map[partKey]bool, len(sent))
	for _, sv := range sent {
		moved[sv.sp.key()] = true
	}
	order := make([]partKey, 0, len(s.order))
	for _, k := range s.order {
		if !moved[k] {
			order = append(order, k)
		}
	}
	for _, k := range s.order {
		if moved[k] {
			order = append(order, k)
		}
	}
	s.order = order
}

func (s *fetchSession) forget(k partKey) {
	if _, ok := s.parts[k]; !ok {
		return
	}
	delete(s.parts, k)
	for i, o := range s.order {
		if o == k {
			s.order = append(s.order[:i:i], s.order[i+1:]...)
			break
		}
	}
}

func (s *fetchSession) list() []*sessionPartition {
	out := make([]*sessionPartition, len(s.order))
	for i, k := range s.order {
		out[i] = s.parts[k]
	}
	return out
}

// partition resolves a fetched partition, which this node must lead in the epoch the client
// names: by topic id from v13 on (so a topic deleted and created again under the same name is
// not mistaken for the one the session named), else by name.
func (b *Broker) partition(sp *sessionPartition) (*topics.Partition, error) {
	t, err := b.fetchTopic(sp)
	if err != nil {
		return nil, err
	}
	return b.leader(t, sp.partition, sp.leaderEpoch)
}

// readable resolves a fetched partition as partition does, or, for a fetch of version 11 or
// later (KIP-392), one this node follows: a consumer sent here as the preferred read replica
// reads what this replica knows is committed. Only consumers send Kafka fetches here: replicas
// follow over the cluster transport.
func (b *Broker) readable(version int16, sp *sessionPartition) (p *topics.Partition, follower bool, err error) {
	t, err := b.fetchTopic(sp)
	if err != nil {
		return nil, false, err
	}
	p, err = b.leader(t, sp.partition, sp.leaderEpoch)
	if err == nil || !errors.Is(err, replica.ErrNotLeader) || version < 11 {
		return p, false, err
	}
	fp := t.Partitions[sp.partition]
	if fp.Replica == nil {
		return nil, false, err
	}
	switch a := fp.Replica.Assignment(); {
	case a.Role != replica.RoleFollower:
		return nil, false, err
	case sp.leaderEpoch != -1 && sp.leaderEpoch < a.Epoch:
		return nil, false, kerr.FencedLeaderEpoch
	case sp.leaderEpoch > a.Epoch:
		return nil, false, kerr.UnknownLeaderEpoch
	}
	return fp, true, nil
}

// preferredReadReplica is KIP-392's rack-aware choice for a consumer in rack reading from
// offset a partition this node leads: the in-sync follower in that rack that has appended the
// most (ties: the lowest id), or -1 to read here (this node is in the rack, or no follower there
// is in sync with the offset, or the selector is off).
func (b *Broker) preferredReadReplica(p *topics.Partition, offset int64, rack string) int32 {
	if !b.cfg.RackAwareReads || rack == "" {
		return -1
	}
	img := b.cl.Image()
	if self := img.Nodes[b.cfg.NodeID]; self == nil || self.Rack == rack {
		return -1
	}
	best, bestEnd := int32(-1), int64(-1)
	for id, end := range p.Replica.ReadReplicas(offset) {
		n := img.Nodes[id]
		if n == nil || n.Fenced || n.Rack != rack {
			continue
		}
		if end > bestEnd || (end == bestEnd && id < best) {
			best, bestEnd = id, end
		}
	}
	return best
}

func (b *Broker) fetchTopic(sp *sessionPartition) (*topics.Topic, error) {
	var t *topics.Topic
	var ok bool
	if sp.byID {
		if t, ok = b.topics.GetByID(sp.topicID); !ok {
			return nil, kerr.UnknownTopicID
		}
	} else if t, ok = b.topics.Get(sp.topic); !ok {
		return nil, kerr.UnknownTopicOrPartition
	}
	if sp.partition < 0 || int(sp.partition) >= len(t.Partitions) {
		return nil, kerr.UnknownTopicOrPartition
	}
	return t, nil
}

// fillFetch reads every partition into resp and returns the record bytes gathered, and whether
// a local partition had more records than its byte limit let in (full: waiting for MinBytes
// cannot add them). In an incremental response only partitions with news are listed.
func (b *Broker) fillFetch(ctx context.Context, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, parts []*sessionPartition, incremental bool, files *fileRanges, acc fetchAccess) ([]sentValues, int, bool) {
	var sent []sentValues
	total, full := 0, false
	// The node's fetch.max.bytes caps the response whatever the client asks, beyond the first
	// batch, which goes whatever the limit.
	budget := b.fetchBudget(req, acc)
	b.prefetchObjects(parts, budget, acc)
	for _, sp := range parts {
		fp := kmsg.NewFetchResponseTopicPartition()
		fp.Partition, fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = sp.partition, -1, -1, -1
		fp.PreferredReadReplica = -1
		fp.RecordBatches = []byte{} // empty, not null: librdkafka rejects a null record set
		if acc.denied[sp] {
			fp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			addFetchPartition(resp, sp, fp)
			continue
		}
		if req.Version < 10 && b.zstdTopic(sp) {
			// zstd came with Fetch v10 (KIP-110): as Kafka, an older consumer is not handed
			// batches it cannot decode.
			fp.ErrorCode = kerr.UnsupportedCompressionType.Code
			addFetchPartition(resp, sp, fp)
			continue
		}
		if t, err := b.fetchTopic(sp); err == nil && isObjectTopic(t) {
			n, err := b.readObject(ctx, t, sp, &fp, min(int(sp.maxBytes), budget-total), total == 0, req.IsolationLevel == 1)
			if err != nil {
				fetchError(&fp, err)
			}
			total += n
			if news := fp.ErrorCode != 0 || len(fp.RecordBatches) > 0 || fp.HighWatermark != sp.sentHW ||
				fp.LastStableOffset != sp.sentLSO || fp.LogStartOffset != sp.sentStart; incremental && !news {
				continue
			}
			sent = append(sent, sentValues{sp, fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset})
			addFetchPartition(resp, sp, fp)
			continue
		}
		p, follower, perr := b.readable(req.Version, sp)
		preferred := int32(-1)
		if perr == nil && !follower && req.Version >= 11 {
			preferred = b.preferredReadReplica(p, sp.offset, req.Rack)
		}
		switch {
		case perr != nil:
			fp.ErrorCode = errorCode(perr)
			if isNotLeader(perr) && req.Version >= 16 { // Kafka fills it from v16 only
				if t, err := b.fetchTopic(sp); err == nil {
					leader, epoch, node := b.leaderHint(t.ID, sp.partition)
					fp.CurrentLeader.LeaderID, fp.CurrentLeader.LeaderEpoch = leader, epoch
					fetchEndpoint(resp, node, acc.listener)
				}
			}
		case preferred >= 0:
			// KIP-392: no records; the client reads from the replica in its rack.
			fp.PreferredReadReplica = preferred
			fp.HighWatermark = p.Replica.HighWatermark()
			fp.LastStableOffset, fp.LogStartOffset = p.Log.LastStable(fp.HighWatermark), p.Log.StartOffset()
		default:
			n, more, err := readPartition(p, follower, sp, &fp, min(int(sp.maxBytes), budget-total), total == 0, req.IsolationLevel == 1, files)
			if err != nil {
				fetchError(&fp, err)
			}
			total += n
			full = full || more
		}
		news := fp.ErrorCode != 0 || len(fp.RecordBatches) > 0 || fp.PreferredReadReplica >= 0 || fp.HighWatermark != sp.sentHW ||
			fp.LastStableOffset != sp.sentLSO || fp.LogStartOffset != sp.sentStart
		if incremental && !news {
			continue
		}
		sent = append(sent, sentValues{sp, fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset})
		addFetchPartition(resp, sp, fp)
	}
	return sent, total, full
}

// fetchError answers a partition's read error with no offsets, as Kafka's
// ReplicaManager.createLogReadResult: librdkafka takes a log start sent beside
// OFFSET_OUT_OF_RANGE for a cached reset position and waits out its fetch.error.backoff.ms
// (500 ms) before it fetches there, where -1 has it list offsets at once.
func fetchError(fp *kmsg.FetchResponseTopicPartition, err error) {
	fp.ErrorCode = errorCode(err)
	fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset, fp.AbortedTransactions = -1, -1, -1, nil
}

// zstdTopic reports whether sp's topic compresses its batches with zstd (compression.type).
func (b *Broker) zstdTopic(sp *sessionPartition) bool {
	t, err := b.fetchTopic(sp)
	if err != nil {
		return false
	}
	c, _ := t.Effective("compression.type")
	return c == "zstd"
}

// readPartition reads one partition's batches into fp. The first partition with data may exceed
// maxBytes by its first batch (Kafka's KIP-74 rule); later ones may not. A read_committed read
// stops at the last stable offset and reports the aborted transactions of what it read. A
// follower (KIP-392) reads below the high watermark its leader last sent, within its own log;
// an offset past its log end is OFFSET_NOT_AVAILABLE (it has yet to catch up), not out of range.
// more reports that records below the bound were left out for the byte limit.
func readPartition(p *topics.Partition, follower bool, sp *sessionPartition, fp *kmsg.FetchResponseTopicPartition, maxBytes int, first, readCommitted bool, files *fileRanges) (n int, more bool, err error) {
	if follower {
		end := p.Log.EndOffset()
		if sp.offset > end {
			return 0, false, kerr.OffsetNotAvailable
		}
		fp.HighWatermark = min(p.Replica.HighWatermark(), end)
	} else if _, ready, _ := p.Replica.Leading(); !ready {
		return 0, false, kerr.OffsetNotAvailable
	} else {
		fp.HighWatermark = p.Replica.HighWatermark()
	}
	fp.LastStableOffset = p.Log.LastStable(fp.HighWatermark)
	fp.LogStartOffset = p.Log.StartOffset()
	upper := fp.HighWatermark
	if readCommitted {
		upper = fp.LastStableOffset
		fp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	}
	if sp.offset == upper {
		return 0, false, nil
	}
	if maxBytes <= 0 && !first {
		// The response is full: no data, but an offset out of range is still told now, as
		// Kafka reads every partition (the client would otherwise learn it a fetch later).
		if sp.offset < p.Log.StartOffset() || sp.offset > p.Log.EndOffset() {
			return 0, false, kerr.OffsetOutOfRange
		}
		return 0, sp.offset < upper, nil
	}
	// Between the high watermark (or the last stable offset) and the log end the answer is
	// empty, as in Kafka; past the log end it is OFFSET_OUT_OF_RANGE.
	s, err := p.Log.ReadSliceBelow(sp.offset, max(maxBytes, 0), upper)
	if err != nil {
		if errors.Is(err, logstore.ErrOffsetOutOfRange) {
			return 0, false, kerr.OffsetOutOfRange
		}
		return 0, false, err
	}
	if s.Size == 0 || (s.Size > maxBytes && !first) {
		s.Release()
		return 0, s.Size > 0, nil // a batch that does not fit: more than the limit is there
	}
	if readCommitted {
		// The aborted transactions that begin below the returned batches' end, as Kafka's
		// (collectAbortedTransactions up to the fetch's upper bound): not every one up to the
		// last stable offset, which a consumer far behind would be sent with every fetch.
		aborted, err := p.Log.AbortedTransactions(sp.offset, min(upper, s.Next))
		if err != nil {
			s.Release()
			return 0, false, err
		}
		for _, a := range aborted {
			fp.AbortedTransactions = append(fp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.First})
		}
	}
	if marker, ok := files.add(s); ok { // sent with sendfile by the write loop, which releases s
		fp.RecordBatches = marker
		return s.Size, s.Next < upper, nil
	}
	defer s.Release()
	buf := make([]byte, s.Size)
	if _, err := s.File.ReadAt(buf, s.Position); err != nil {
		return 0, false, err
	}
	fp.RecordBatches = buf
	return len(buf), s.Next < upper, nil
}

func addFetchPartition(resp *kmsg.FetchResponse, sp *sessionPartition, fp kmsg.FetchResponseTopicPartition) {
	if n := len(resp.Topics); n > 0 && resp.Topics[n-1].Topic == sp.topic && resp.Topics[n-1].TopicID == sp.topicID {
		resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, fp)
		return
	}
	ft := kmsg.NewFetchResponseTopic()
	ft.Topic, ft.TopicID = sp.topic, sp.topicID
	ft.Partitions = []kmsg.FetchResponseTopicPartition{fp}
	resp.Topics = append(resp.Topics, ft)
}

// waitAny waits until one of chans is closed (true), or d passes, ctx ends or stop closes (false).
func waitAny(ctx context.Context, stopping <-chan struct{}, chans []<-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	woke := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	for _, ch := range chans {
		go func() {
			select {
			case <-ch:
				select {
				case woke <- struct{}{}:
				default:
				}
			case <-stop:
			}
		}()
	}
	select {
	case <-woke:
		return true
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	case <-stopping:
		return false
	}
}
