package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/txncoord"
)

// Transactions on object-storage topics (docs/object-topics.md §10). An object partition has no
// leader: any node takes its produce, and its producer state, open transactions and markers
// live in the controller's image. The coordinator's rounds treat it as a partition this node
// serves:
//
//   - prepare: nothing to make durable (a batch is acknowledged once the controller committed
//     its file: the object is written and the commit is a quorum-fsynced Raft entry); only the
//     open transaction's epoch is checked;
//   - marker: a controller command (object-marker) that puts the marker at the partition's
//     next offset (writeMarker);
//   - discovery: the open transactions in an image at least as new as the controller's commit
//     of every acknowledged batch (a barrier);
//   - the partition's own check of transactions left open: run by the active controller's node.

// objectTxnPartition is an object partition a transactional produce writes to.
type objectTxnPartition struct {
	d *txns
	t *topics.Topic
	i int32
}

func (o objectTxnPartition) tp() txncoord.TP { return txncoord.TP{Topic: o.t.Name, Partition: o.i} }

// openTransaction reads this node's image, which may trail the controller's: a marker not seen
// yet is waited for by ensureInTransaction, and a batch written past an open transaction of
// another epoch is refused at its commit (objtopic.ErrPreviousTxnOpen, retriable).
func (o objectTxnPartition) openTransaction(pid int64) (int16, bool) {
	p, err := o.d.b.objectPartition(o.t.ID, o.i)
	if err != nil {
		return 0, false
	}
	_, epoch, ok := p.OpenTransaction(pid)
	return epoch, ok
}

// abortHere has the controller abort the producer's transaction of epoch if it is still open
// (the image this node decided on may be older: controller.ObjectMarker).
func (o objectTxnPartition) abortHere(ctx context.Context, pid int64, epoch int16) error {
	off, err := o.d.proposeObjectMarker(ctx, o.t, o.i, pid, epoch, false, -1)
	if err != nil || off < 0 {
		return err
	}
	o.d.b.logger.Info("broker: aborted a transaction no coordinator can commit", "topic", o.t.Name, "partition", o.i, "producer", pid, "epoch", epoch)
	return nil
}

// proposeObjectMarker has the controller write a marker to an object partition and returns its
// offset.
func (d *txns) proposeObjectMarker(ctx context.Context, t *topics.Topic, index int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) (int64, error) {
	r, err := d.b.cl.Propose(ctx, &controller.Command{Op: controller.OpObjectMarker, ObjectMarker: &controller.ObjectMarker{
		PartitionRef: controller.PartitionRef{Topic: t.ID, Partition: index}, ProducerID: pid, Epoch: epoch, Commit: commit,
		CoordinatorEpoch: coordinatorEpoch, Timestamp: time.Now().UnixMilli()}})
	if err != nil {
		return 0, fmt.Errorf("%w: %v", kerr.NotEnoughReplicas, err)
	}
	if errors.Is(r.Err, controller.ErrUnknownTopic) {
		return 0, kerr.UnknownTopicOrPartition
	}
	return r.Value, r.Err
}

// prepareObject is prepareLocal for an object partition: its committed records are durable
// already; an open transaction of another epoch than the one committing means the partition
// holds records the coordinator does not vouch for.
func (d *txns) prepareObject(t *topics.Topic, req txnPrepareReq) error {
	p, err := d.b.objectPartition(t.ID, req.Partition)
	if err != nil {
		return err
	}
	if _, epoch, open := p.OpenTransaction(req.ProducerID); open && epoch != req.Epoch {
		return fmt.Errorf("%w: the partition's open transaction is of epoch %d, not %d", kerr.InvalidProducerEpoch, epoch, req.Epoch)
	}
	return nil
}

// objectTransactions lists the object partitions holding an open transaction of the producer
// at epoch in img, which the caller's read barrier made current: every batch acknowledged
// before it is in it.
func objectTransactions(img *controller.Image, pid int64, epoch int16) []txncoord.TP {
	var out []txncoord.TP
	for name, t := range img.Topics {
		for i, p := range t.Objects {
			if _, e, ok := p.OpenTransaction(pid); ok && e == epoch {
				out = append(out, txncoord.TP{Topic: name, Partition: int32(i)})
			}
		}
	}
	return out
}

// checkObjectTransactions is checkOpenTransactions for the object partitions, on the active
// controller's node only (one node checks each): a transaction open longer than
// txnPartitionCheck, by the newest timestamp of the extent holding its first batch, is asked
// about and aborted when nothing can commit it.
func (d *txns) checkObjectTransactions(ctx context.Context) {
	if d.b.cl.ControllerID() != d.b.cfg.NodeID {
		return
	}
	img := d.b.cl.Image()
	for name, it := range img.Topics {
		t, ok := d.b.topics.Get(name)
		if !ok || !it.IsObject() {
			continue
		}
		for i, p := range it.Objects {
			for pid, first := range p.OpenTransactions() {
				_, epoch, ok := p.OpenTransaction(pid)
				if exts := p.Find(first); !ok || len(exts) == 0 || time.Since(time.UnixMilli(exts[0].MaxTimestamp)) <= txnPartitionCheck {
					continue
				}
				d.checkStale(ctx, objectTxnPartition{d, t, int32(i)}, pid, epoch)
			}
		}
	}
}
