package broker

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/topics"
)

// OffsetsTopic is the internal compacted topic holding committed offsets and group metadata.
const OffsetsTopic = "__consumer_offsets"

// groupTick is how often the coordinators' timeouts are checked (and leadership of the offsets
// partitions looked at); offset expiry runs every offsetsExpiryInterval (Kafka's
// offsets.retention.check.interval.ms is 10 minutes).
const (
	groupTick             = 100 * time.Millisecond
	offsetsExpiryInterval = time.Minute
)

// groups drives the group coordinators (package group, which does no I/O). A group belongs to
// the __consumer_offsets partition Kafka computes from its id, and this node coordinates the
// groups of the partitions it leads: for each, a shard holds a Coordinator loaded from the
// partition's log once the partition's new leader has committed its epoch's start. The driver
// feeds shards requests and clock ticks, appends the records they return to their partition,
// waits until the partition commits them, and then delivers the replies, some of which answer
// requests that have been waiting (JoinGroup, SyncGroup). A shard is dropped when this node
// stops leading its partition; requests for its groups get NOT_COORDINATOR.
//
// Lock order: groups.mu → a replica's lock (appends happen under mu so the log keeps the order
// of the state changes; waiting for the commit happens outside it).
type groups struct {
	b          *Broker
	partitions int32 // of __consumer_offsets: offsets.topic.num.partitions

	mu      sync.Mutex
	shards  map[int32]*shard
	nextID  group.RequestID
	waiting map[group.RequestID]waiter

	done chan struct{} // closed when run returns
}

type shard struct {
	index int32
	p     *topics.Partition
	epoch int32
	c     *group.Coordinator
}

type waiter struct {
	ch    chan kmsg.Response
	shard int32
}

func newGroups(b *Broker) *groups {
	return &groups{b: b, partitions: b.cfg.OffsetsTopicPartitions, shards: map[int32]*shard{},
		waiting: map[group.RequestID]waiter{}, done: make(chan struct{})}
}

func (gs *groups) newCoordinator() *group.Coordinator {
	cfg := gs.b.cfg.Groups
	cfg.Overrides = gs.b.groupConfigs
	c := group.New(cfg)
	c.PartitionExists = gs.b.partitionExists
	c.TopicID = func(topic string) ([16]byte, bool) {
		t, ok := gs.b.topics.Get(topic)
		if !ok {
			return [16]byte{}, false
		}
		return t.ID, true
	}
	// Every topic, internal ones included: a KIP-848 regex the broker resolves matches
	// __consumer_offsets and __transaction_state as Kafka's does.
	c.Topics = func() map[string]group.TopicMeta {
		out := map[string]group.TopicMeta{}
		for _, t := range gs.b.topics.List() {
			out[t.Name] = group.TopicMeta{ID: t.ID, Partitions: int32(len(t.Partitions))}
		}
		return out
	}
	return c
}

// load replays one __consumer_offsets partition into a new coordinator and returns the offset
// it read up to. Transactional offset commits are pending until their marker.
func (gs *groups) load(p *topics.Partition) (*group.Coordinator, int64, error) {
	c := gs.newCoordinator()
	end, n, err := gs.replay(c, p, p.Log.StartOffset())
	if err != nil {
		return nil, 0, err
	}
	gs.b.logger.Info("loaded consumer groups", "partition", p.Index, "groups", len(c.Groups()), "records", n)
	return c, end, nil
}

// replay applies a partition's batches from offset from to a coordinator.
func (gs *groups) replay(c *group.Coordinator, p *topics.Partition, from int64) (int64, int, error) {
	now := time.Now()
	n := 0
	end, err := forEachBatchFrom(p, from, func(h *batch.Header, b []byte) error {
		if h.IsControl() {
			c2, err := batch.ParseControl(h, b)
			if err != nil {
				return err
			}
			c.CompleteTxn(now, h.ProducerID, h.ProducerEpoch, c2.Type == batch.ControlCommit)
			return nil
		}
		return batch.EachRecord(h, b, func(rec *batch.Record) {
			var err error
			if h.IsTransactional() {
				err = c.LoadTxn(h.ProducerID, h.ProducerEpoch, rec.Key, rec.Value)
			} else {
				err = c.Load(now, rec.Key, rec.Value)
			}
			if err != nil {
				gs.b.logger.Warn("broker: skipping a bad __consumer_offsets record", "partition", p.Index, "err", err)
			}
			n++
		})
	})
	return end, n, err
}

// onMarker applies a transaction marker just written to a __consumer_offsets partition this
// node leads: the producer's pending offsets there become committed, or are dropped.
func (gs *groups) onMarker(p *topics.Partition, pid int64, epoch int16, commit bool) {
	if p.Topic != OffsetsTopic {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if sh := gs.shards[p.Index]; sh != nil && sh.p == p {
		sh.c.CompleteTxn(time.Now(), pid, epoch, commit)
	}
}

// run follows leadership of the offsets partitions and checks timeouts until the broker stops.
func (gs *groups) run(ctx context.Context) {
	defer close(gs.done)
	tick := time.NewTicker(cmp.Or(gs.b.cfg.Hooks.GroupTick, groupTick))
	defer tick.Stop()
	lastExpiry := time.Now()
	var seen map[string][16]byte // the topics at the last tick, by name
	var seenGen uint64           // the registry's generation when seen was taken
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			// A shard loaded now is swept as well: its offsets were read from the log, without
			// the ids of their topics, which may be gone by now.
			changed := gs.refresh()
			var deleted map[string][16]byte
			if gen := gs.b.topics.Generation(); seen == nil || gen != seenGen {
				seen, deleted = gs.deletedTopics(seen)
				seenGen, changed = gen, true
			}
			expire := now.Sub(lastExpiry) >= offsetsExpiryInterval
			if expire {
				lastExpiry = now
			}
			gs.mu.Lock()
			shards := make([]*shard, 0, len(gs.shards))
			for _, sh := range gs.shards {
				shards = append(shards, sh)
			}
			type pending struct {
				w   commitWait
				err error
				out []group.Reply
			}
			var todo []pending
			// The metadata image is taken under gs.mu: a commit taken before was checked against
			// this node's topics, which follow the image, so its topic is in it unless deleted
			// since. The topics seen at ticks miss one created and deleted between two.
			var lookup func(string) ([16]byte, bool)
			if changed {
				img := gs.b.cl.Image()
				lookup = func(name string) ([16]byte, bool) {
					t, ok := img.Topics[name]
					if !ok {
						return [16]byte{}, false
					}
					return t.ID, true
				}
			}
			for _, sh := range shards {
				out := sh.c.Tick(now)
				forgot := sh.c.ForgetTopics(deleted, lookup)
				out.Records = append(out.Records, forgot.Records...)
				if expire {
					exp := sh.c.ExpireOffsets(now)
					out.Records = append(out.Records, exp.Records...)
				}
				w, err := gs.persistLocked(sh, out.Records)
				todo = append(todo, pending{w, err, out.Replies})
			}
			gs.mu.Unlock()
			for _, p := range todo {
				gs.finish(ctx, p.w, p.err, p.out)
			}
		}
	}
}

// deletedTopics compares the topics with those seen at the last tick (nil: none yet) and
// returns them now with the topics deleted since, by name, with their ids: gone, or another
// topic under the name (deleted and created again within a tick). The shards forget those
// topics' committed offsets, as Kafka's coordinator does when its metadata delta deletes
// partitions; an offset committed to the new topic of the name meanwhile is told apart by its
// topic id and stays.
func (gs *groups) deletedTopics(seen map[string][16]byte) (map[string][16]byte, map[string][16]byte) {
	now := map[string][16]byte{}
	for _, t := range gs.b.topics.List() {
		now[t.Name] = t.ID
	}
	var deleted map[string][16]byte
	for name, id := range seen {
		if cur, ok := now[name]; !ok || cur != id {
			if deleted == nil {
				deleted = map[string][16]byte{}
			}
			deleted[name] = id
		}
	}
	return now, deleted
}

// refresh loads a shard for every offsets partition this node leads (once the leader's epoch
// start is committed) and drops those it no longer leads.
// It reports whether it loaded one.
func (gs *groups) refresh() (loaded bool) {
	t, ok := gs.b.topics.Get(OffsetsTopic)
	led := map[int32]bool{}
	if ok {
		for _, p := range t.Partitions {
			if p.Replica == nil {
				continue
			}
			epoch, ready, leading := p.Replica.Leading()
			if !leading || !ready {
				continue
			}
			led[p.Index] = true
			gs.mu.Lock()
			sh := gs.shards[p.Index]
			gs.mu.Unlock()
			if sh != nil && sh.p == p && sh.epoch == epoch {
				continue
			}
			c, end, err := gs.load(p)
			if err != nil {
				gs.b.logger.Error("broker: loading consumer groups", "partition", p.Index, "err", err)
				continue
			}
			gs.mu.Lock()
			// Markers of transactions may have landed since the load read the log (onMarker found
			// no shard for them): read them now, under mu, so none is missed.
			if _, _, err := gs.replay(c, p, end); err != nil {
				gs.mu.Unlock()
				gs.b.logger.Error("broker: loading consumer groups", "partition", p.Index, "err", err)
				continue
			}
			if e, _, still := p.Replica.Leading(); still && e == epoch {
				gs.dropLocked(p.Index)
				gs.shards[p.Index] = &shard{index: p.Index, p: p, epoch: epoch, c: c}
				loaded = true
			}
			gs.mu.Unlock()
		}
	}
	gs.mu.Lock()
	for idx := range gs.shards {
		if !led[idx] {
			gs.dropLocked(idx)
		}
	}
	gs.mu.Unlock()
	return loaded
}

// dropLocked forgets a shard; its waiting requests get NOT_COORDINATOR.
func (gs *groups) dropLocked(idx int32) {
	if _, ok := gs.shards[idx]; !ok {
		return
	}
	delete(gs.shards, idx)
	for id, w := range gs.waiting {
		if w.shard == idx {
			close(w.ch)
			delete(gs.waiting, id)
		}
	}
}

// ensureTopic creates __consumer_offsets if it does not exist yet, as Kafka does on the first
// group lookup.
func (gs *groups) ensureTopic(ctx context.Context) *adminError {
	return gs.b.ensureCoordinatorTopic(ctx, OffsetsTopic, gs.partitions, gs.b.cfg.OffsetsReplicationFactor)
}

// ensureCoordinatorTopic creates a coordinators' internal topic (__consumer_offsets,
// __transaction_state) if it does not exist yet, with coordinatorTopicConfigs and rf replicas (offsets.topic.replication.factor, transaction.state.log.replication.factor; not
// default.replication.factor), or with rf 0, 3 once three storage nodes are registered, else 1.
// Fewer live nodes than rf fail it, and FindCoordinator answers COORDINATOR_NOT_AVAILABLE until
// enough are registered, as Kafka's does.
func (b *Broker) ensureCoordinatorTopic(ctx context.Context, name string, partitions int32, rf int16) *adminError {
	if _, ok := b.topics.Get(name); ok {
		return nil
	}
	if rf <= 0 {
		rf = b.autoReplicationFactor()
	}
	assignments, aerr := b.assignReplicas(0, partitions, rf)
	if aerr != nil {
		return aerr
	}
	_, aerr = b.createTopicNow(ctx, name, coordinatorTopicConfigs(name), assignments)
	if aerr != nil && aerr.code == kerr.TopicAlreadyExists {
		return nil
	}
	return aerr
}

// coordinatorTopicConfigs are the configs a coordinator topic is created with: Kafka's
// (GroupCoordinator's offsetsTopicConfigs, TransactionStateManager's transactionTopicConfigs:
// no unclean election, no compression and transaction.state.log.min.isr for the transaction
// log), and write caching off, whatever the cluster's default.
func coordinatorTopicConfigs(name string) map[string]string {
	configs := map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600", "write.caching": "false"}
	if name == TxnStateTopic {
		configs["unclean.leader.election.enable"] = "false"
		configs["compression.type"] = "uncompressed"
		configs["min.insync.replicas"] = "2"
	} else {
		configs["compression.type"] = "producer"
	}
	return configs
}

// partitionFor is the __consumer_offsets partition of a group, as Kafka computes it.
func (gs *groups) partitionFor(groupID string) int32 {
	return javaHashPartition(groupID, gs.b.coordinatorPartitions(OffsetsTopic, gs.partitions))
}

// coordinatorPartitions is the count a coordinator topic's keys (group and transactional ids)
// are mapped over: the topic's own once it exists, whatever this node was told to create it
// with (every node then maps alike, as Redpanda keeps the count a cluster began with), else
// configured, the count it will be created with.
func (b *Broker) coordinatorPartitions(topic string, configured int32) int32 {
	if t, ok := b.topics.Get(topic); ok && len(t.Partitions) > 0 {
		return int32(len(t.Partitions))
	}
	return configured
}

// shardForLocked returns the shard of a group, or the error for a client asking a node that
// does not coordinate it: COORDINATOR_LOAD_IN_PROGRESS while this node's new leadership is
// loading, else NOT_COORDINATOR. Callers hold mu.
func (gs *groups) shardForLocked(groupID string) (*shard, *kerr.Error) {
	idx := gs.partitionFor(groupID)
	if sh := gs.shards[idx]; sh != nil {
		return sh, nil
	}
	if t, ok := gs.b.topics.Get(OffsetsTopic); ok && int(idx) < len(t.Partitions) {
		if r := t.Partitions[idx].Replica; r != nil {
			if _, _, leading := r.Leading(); leading {
				return nil, kerr.CoordinatorLoadInProgress
			}
		}
	}
	return nil, kerr.NotCoordinator
}

// commitWait is what a persisted change waits for: its partition's commit up to end.
type commitWait struct {
	sh    *shard
	epoch int32
	end   int64
}

// persistLocked appends a shard's records as one batch and returns what to wait for.
func (gs *groups) persistLocked(sh *shard, records []group.Record) (commitWait, error) {
	if len(records) == 0 {
		return commitWait{}, nil
	}
	now := time.Now().UnixMilli()
	var body []byte
	for i, r := range records {
		body = batch.AppendRecord(body, 0, int32(i), r.Key, r.Value, 0, nil)
	}
	b := batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(len(records) - 1), BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(len(records))}, body)
	res, epoch, err := sh.p.Replica.Append(b)
	if err != nil {
		return commitWait{}, err
	}
	sh.p.NotifyAppend()
	sh.p.Log.SyncSoon()
	return commitWait{sh, epoch, res.Last + 1}, nil
}

// finish waits for the appended records to be committed, then delivers the replies. A reply
// whose records could not be committed is still delivered: the state it reports is the
// coordinator's, only its survival of a failure is in doubt, which the log says. It returns the
// append or commit error, if any.
func (gs *groups) finish(ctx context.Context, w commitWait, err error, replies []group.Reply) error {
	if err == nil && w.sh != nil {
		err = w.sh.p.Replica.WaitCommitted(ctx, w.epoch, w.end)
	}
	if err != nil && ctx.Err() == nil {
		gs.b.logger.Error("broker: writing consumer group state", "err", err)
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for _, r := range replies {
		if w, ok := gs.waiting[r.ID]; ok {
			w.ch <- r.Resp
			delete(gs.waiting, r.ID)
		}
	}
	return err
}

// delayed runs a request whose answer the coordinator may give later (JoinGroup, SyncGroup):
// call gets a request id under the lock; the reply's wait part delivers the answer into resp.
func (gs *groups) delayed(ctx context.Context, resp kmsg.Response, groupID string, call func(c *group.Coordinator, id group.RequestID) group.Output) reply {
	gs.mu.Lock()
	sh, kerrCode := gs.shardForLocked(groupID)
	if sh == nil {
		gs.mu.Unlock()
		setGroupError(resp, kerrCode)
		return reply{resp: resp}
	}
	gs.nextID++
	id := gs.nextID
	ch := make(chan kmsg.Response, 1)
	gs.waiting[id] = waiter{ch, sh.index}
	out := call(sh.c, id)
	w, err := gs.persistLocked(sh, out.Records)
	gs.mu.Unlock()
	go gs.finish(ctx, w, err, out.Replies) // off the read loop: it waits for the commit
	return reply{resp: resp, wait: func() {
		select {
		case got, ok := <-ch:
			if !ok { // the shard moved away
				setGroupError(resp, kerr.NotCoordinator)
				return
			}
			copyResponse(resp, got)
		case <-ctx.Done(): // the connection or the broker is going away
			gs.mu.Lock()
			delete(gs.waiting, id)
			gs.mu.Unlock()
			setGroupError(resp, kerr.CoordinatorNotAvailable)
		}
	}}
}

// immediate runs a request of one group that is answered now, after its records are committed.
// If this node does not coordinate the group, miss builds the error answer.
func (gs *groups) immediate(ctx context.Context, groupID string, call func(c *group.Coordinator) (kmsg.Response, group.Output), miss func(*kerr.Error) kmsg.Response) (kmsg.Response, func() error) {
	gs.mu.Lock()
	sh, code := gs.shardForLocked(groupID)
	if sh == nil {
		gs.mu.Unlock()
		return miss(code), func() error { return nil }
	}
	resp, out := call(sh.c)
	w, err := gs.persistLocked(sh, out.Records)
	gs.mu.Unlock()
	return resp, func() error {
		return gs.finish(ctx, w, err, out.Replies)
	}
}

// locked answers a request of one group that the coordinator answers at once without records.
func (gs *groups) locked(groupID string, answer func(*group.Coordinator) kmsg.Response, miss func(*kerr.Error) kmsg.Response) reply {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	sh, code := gs.shardForLocked(groupID)
	if sh == nil {
		return reply{resp: miss(code)}
	}
	return reply{resp: answer(sh.c)}
}

// byShard splits group ids by the shard that coordinates them; ids of groups this node does
// not coordinate are returned with their error. Callers hold mu.
func (gs *groups) byShardLocked(ids []string) (map[*shard][]string, map[string]*kerr.Error) {
	in, out := map[*shard][]string{}, map[string]*kerr.Error{}
	for _, id := range ids {
		if sh, code := gs.shardForLocked(id); sh != nil {
			in[sh] = append(in[sh], id)
		} else {
			out[id] = code
		}
	}
	return in, out
}

func copyResponse(dst, src kmsg.Response) {
	switch d := dst.(type) {
	case *kmsg.JoinGroupResponse:
		*d = *src.(*kmsg.JoinGroupResponse)
	case *kmsg.SyncGroupResponse:
		*d = *src.(*kmsg.SyncGroupResponse)
	default:
		panic(fmt.Sprintf("broker: no delayed group response of type %T", dst))
	}
}

func setGroupError(resp kmsg.Response, err *kerr.Error) {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation = err.Code, -1
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = err.Code
	}
}

// timeNow is the coordinator's clock.
var timeNow = time.Now

// GroupOffset is a committed offset of a consumer group.
type GroupOffset struct {
	Group, Topic string
	Partition    int32
	Offset       int64
}

// GroupOffsets lists every committed offset of every group this node coordinates, for metrics.
func (b *Broker) GroupOffsets() []GroupOffset {
	gs := b.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var out []GroupOffset
	for _, sh := range gs.shards {
		for _, g := range sh.c.Groups() {
			for tp, o := range g.Offsets() {
				out = append(out, GroupOffset{Group: g.ID, Topic: tp.Topic, Partition: tp.Partition, Offset: o.Offset})
			}
		}
	}
	return out
}

// coordinatorNode is the node that coordinates a group: the leader of its offsets partition
// (-1 if there is none now).
func (gs *groups) coordinatorNode(groupID string) *controller.Node {
	t, ok := gs.b.topics.Get(OffsetsTopic)
	if !ok {
		return nil
	}
	p := gs.b.imagePartition(t.ID, gs.partitionFor(groupID))
	if p == nil || p.Leader < 0 {
		return nil
	}
	return gs.b.cl.Image().Nodes[p.Leader]
}
