package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/topics"
)

// OffsetsTopic is the internal compacted topic holding committed offsets and group metadata.
const OffsetsTopic = "__consumer_offsets"

// groupTick is how often the coordinator's timeouts are checked; offset expiry runs every
// offsetsExpiryInterval (Kafka's offsets.retention.check.interval.ms is 10 minutes).
const (
	groupTick             = 100 * time.Millisecond
	offsetsExpiryInterval = time.Minute
)

// groups drives the group coordinator (package group, which does no I/O): it owns it behind
// one mutex, feeds it requests and clock ticks, appends the records it returns to
// __consumer_offsets, waits until they are durable, and then delivers its replies, some of
// which answer requests that have been waiting (JoinGroup, SyncGroup).
//
// Lock order: groups.mu → a partition log's append lock. Appends happen under mu so the log
// keeps the order of the state changes; waiting for durability happens outside it.
type groups struct {
	b          *Broker
	partitions int32 // of __consumer_offsets: offsets.topic.num.partitions

	mu      sync.Mutex
	c       *group.Coordinator
	nextID  group.RequestID
	waiting map[group.RequestID]chan kmsg.Response
	topic   *topics.Topic // nil until the first group request creates it

	done chan struct{} // closed when run returns
}

func newGroups(b *Broker) (*groups, error) {
	gs := &groups{b: b, partitions: b.cfg.OffsetsTopicPartitions, c: group.New(b.cfg.Groups),
		waiting: map[group.RequestID]chan kmsg.Response{}, done: make(chan struct{})}
	gs.c.PartitionExists = func(topic string, partition int32) bool {
		t, ok := b.topics.Get(topic)
		return ok && partition >= 0 && int(partition) < len(t.Partitions)
	}
	gs.c.Topics = func() map[string]group.TopicMeta {
		out := map[string]group.TopicMeta{}
		for _, t := range b.topics.List() {
			if t.Name != OffsetsTopic {
				out[t.Name] = group.TopicMeta{ID: t.ID, Partitions: int32(len(t.Partitions))}
			}
		}
		return out
	}
	if t, ok := b.topics.Get(OffsetsTopic); ok {
		gs.topic = t
		if err := gs.load(t); err != nil {
			return nil, err
		}
	}
	return gs, nil
}

// load replays __consumer_offsets into the coordinator.
func (gs *groups) load(t *topics.Topic) error {
	now := time.Now()
	n := 0
	for _, p := range t.Partitions {
		for off := p.Log.StartOffset(); off < p.Log.EndOffset(); {
			data, err := p.Log.Read(nil, off, 1<<20)
			if err != nil {
				return fmt.Errorf("broker: loading %s[%d] at %d: %w", OffsetsTopic, p.Index, off, err)
			}
			if len(data) == 0 {
				break
			}
			for len(data) > 0 {
				h, err := batch.ParseHeader(data)
				if err != nil {
					return err
				}
				b := data[:h.Size()]
				data = data[h.Size():]
				off = h.NextOffset()
				if h.IsControl() {
					continue
				}
				recs, err := batch.Records(&h, b)
				if err != nil {
					return err
				}
				rd := batch.NewRecordReader(recs)
				var rec batch.Record
				for rd.Next(&rec) {
					if err := gs.c.Load(now, rec.Key, rec.Value); err != nil {
						gs.b.logger.Warn("broker: skipping a bad __consumer_offsets record", "partition", p.Index, "err", err)
					}
					n++
				}
				if err := rd.Err(); err != nil {
					return err
				}
			}
		}
	}
	gs.b.logger.Info("loaded consumer groups", "groups", len(gs.c.Groups()), "records", n)
	return nil
}

// run checks timeouts until the broker stops.
func (gs *groups) run(ctx context.Context) {
	defer close(gs.done)
	tick := time.NewTicker(groupTick)
	defer tick.Stop()
	lastExpiry := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			gs.mu.Lock()
			out := gs.c.Tick(now)
			if now.Sub(lastExpiry) >= offsetsExpiryInterval {
				lastExpiry = now
				exp := gs.c.ExpireOffsets(now)
				out.Records = append(out.Records, exp.Records...)
			}
			end, err := gs.persistLocked(out.Records)
			gs.mu.Unlock()
			gs.finish(ctx, end, err, out.Replies)
		}
	}
}

// ensureTopic creates __consumer_offsets if it does not exist yet. Callers hold mu.
func (gs *groups) ensureTopicLocked() error {
	if gs.topic != nil {
		return nil
	}
	t, err := gs.b.topics.Create(OffsetsTopic, gs.partitions, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "104857600", "write.caching": "false"}, false)
	if errors.Is(err, topics.ErrTopicExists) {
		t, _ = gs.b.topics.Get(OffsetsTopic)
		err = nil
	}
	if err != nil {
		return fmt.Errorf("broker: creating %s: %w", OffsetsTopic, err)
	}
	gs.topic = t
	return nil
}

// partitionFor is the __consumer_offsets partition of a group, as Kafka computes it.
func (gs *groups) partitionFor(groupID string) int32 {
	var h int32
	for _, c := range groupID { // Java's String.hashCode (over UTF-16 code units for BMP text)
		h = 31*h + int32(c)
	}
	if h == -2147483648 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return h % gs.partitions
}

// durableEnd is where a write to one partition ends, to wait on.
type durableEnd struct {
	log *logstore.Log
	end int64
}

// persistLocked appends records, one batch per partition, and returns what to wait for.
func (gs *groups) persistLocked(records []group.Record) ([]durableEnd, error) {
	if len(records) == 0 {
		return nil, nil
	}
	if err := gs.ensureTopicLocked(); err != nil {
		return nil, err
	}
	byPart := map[int32][]group.Record{}
	var order []int32
	for _, r := range records {
		p := gs.partitionFor(r.Group)
		if _, ok := byPart[p]; !ok {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], r)
	}
	var ends []durableEnd
	now := time.Now().UnixMilli()
	for _, p := range order {
		var body []byte
		recs := byPart[p]
		for i, r := range recs {
			body = batch.AppendRecord(body, 0, int32(i), r.Key, r.Value, 0, nil)
		}
		b := batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: now, MaxTimestamp: now,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(len(recs))}, body)
		part := gs.topic.Partitions[p]
		_, last, err := part.Log.Append(b, 0)
		if err != nil {
			return ends, err
		}
		part.NotifyAppend()
		ends = append(ends, durableEnd{part.Log, last + 1})
	}
	return ends, nil
}

// finish waits for the appended records to be durable, then delivers the replies. A reply whose
// records could not be made durable is still delivered: the state it reports is the
// coordinator's, only its survival of a crash is in doubt, which the log says. It returns the
// append or durability error, if any.
func (gs *groups) finish(ctx context.Context, ends []durableEnd, err error, replies []group.Reply) error {
	if err == nil {
		err = waitEnds(ctx, ends)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		gs.b.logger.Error("broker: writing consumer group state", "err", err)
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for _, r := range replies {
		if ch, ok := gs.waiting[r.ID]; ok {
			ch <- r.Resp
			delete(gs.waiting, r.ID)
		}
	}
	return err
}

func waitEnds(ctx context.Context, ends []durableEnd) error {
	for _, e := range ends {
		if err := e.log.WaitDurable(ctx, e.end); err != nil {
			return err
		}
	}
	return nil
}

// delayed runs a request whose answer the coordinator may give later (JoinGroup, SyncGroup):
// call gets a request id under the lock; the reply's wait part delivers the answer into resp.
func (gs *groups) delayed(ctx context.Context, resp kmsg.Response, call func(id group.RequestID) group.Output) reply {
	gs.mu.Lock()
	gs.nextID++
	id := gs.nextID
	ch := make(chan kmsg.Response, 1)
	gs.waiting[id] = ch
	out := call(id)
	ends, err := gs.persistLocked(out.Records)
	gs.mu.Unlock()
	go gs.finish(ctx, ends, err, out.Replies) // off the read loop: it may wait for an fsync
	return reply{resp: resp, wait: func() {
		select {
		case got := <-ch:
			copyResponse(resp, got)
		case <-ctx.Done(): // the connection or the broker is going away
			gs.mu.Lock()
			delete(gs.waiting, id)
			gs.mu.Unlock()
			setGroupError(resp, kerr.CoordinatorNotAvailable)
		}
	}}
}

// immediate runs a request answered now, after its records are durable.
func (gs *groups) immediate(ctx context.Context, call func() (kmsg.Response, group.Output)) (kmsg.Response, func() error) {
	gs.mu.Lock()
	resp, out := call()
	ends, err := gs.persistLocked(out.Records)
	gs.mu.Unlock()
	return resp, func() error {
		return gs.finish(ctx, ends, err, out.Replies)
	}
}

// locked answers a request the coordinator answers at once without records.
func (gs *groups) locked(answer func(*group.Coordinator) kmsg.Response) reply {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return reply{resp: answer(gs.c)}
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

// GroupOffsets lists every committed offset of every group, for metrics.
func (b *Broker) GroupOffsets() []GroupOffset {
	gs := b.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var out []GroupOffset
	for _, g := range gs.c.Groups() {
		for tp, o := range g.Offsets() {
			out = append(out, GroupOffset{Group: g.ID, Topic: tp.Topic, Partition: tp.Partition, Offset: o.Offset})
		}
	}
	return out
}
