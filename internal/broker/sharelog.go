package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objtopic"
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
	owning() (epoch int32, ready, owning bool)
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
	return objectLeader(img.LiveNodes(), id, index)
}

// localShareLog is a local partition's log on its leader.
type localShareLog struct{ p *topics.Partition }

func (l localShareLog) owning() (int32, bool, bool) { return l.p.Replica.Leading() }
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
// LiveEpoch, which moves whenever the live nodes (and so possibly the owner) change, so a
// previous owner's share-state writes are fenced once its successor has read the state.
type objectShareLog struct {
	b     *Broker
	id    [16]byte
	index int32
}

func (o *objectShareLog) owning() (int32, bool, bool) {
	img := o.b.cl.Image()
	return img.LiveEpoch, true, shareOwner(img, o.id, o.index) == o.b.cfg.NodeID
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
		return min(hw, p.LastStable())
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
	data, err := o.b.cfg.ObjectCache.ReadBelow(ctx, p, from, upper, maxBytes, true)
	if err != nil {
		return nil, fmt.Errorf("%w: reading from the object store: %v", kerr.KafkaStorageError, err)
	}
	return data, nil
}
