package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/txncoord"
)

// The transaction APIs clients call (docs/transactions.md §1). Each runs on the transactional
// id's coordinator; a node that does not coordinate the id answers NOT_COORDINATOR (or
// COORDINATOR_LOAD_IN_PROGRESS while it loads), and the client asks FindCoordinator again.

func init() {
	register(kmsg.AddPartitionsToTxn, 0, 5, handleAddPartitionsToTxn)
	register(kmsg.AddOffsetsToTxn, 0, 4, handleAddOffsetsToTxn)
	register(kmsg.EndTxn, 0, 5, handleEndTxn)
}

func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// initTransactional is InitProducerId with a transactional id.
func (b *Broker) initTransactional(ctx context.Context, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) reply {
	id := *req.TransactionalID
	return reply{resp: resp, wait: func() {
		pid, epoch := req.ProducerID, req.ProducerEpoch
		if req.Version < 3 {
			pid, epoch = -1, -1
		}
		r := b.txns.call(ctx, id, func(c *txncoord.Coordinator, rid txncoord.ReqID, now int64) txncoord.Effects {
			return c.InitProducerID(txncoord.InitReq{ID: rid, TxnID: id, TimeoutMs: req.TransactionTimeoutMillis,
				ProducerID: pid, Epoch: epoch, NewPID: b.cfg.ProducerIDs.Next, Version: req.Version}, now)
		})
		resp.ErrorCode = errCode(r.Err)
		if r.Err == nil {
			resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.Epoch
		}
	}}
}

func handleAddPartitionsToTxn(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	b := r.conn.b
	type one struct {
		id         string
		pid        int64
		epoch      int16
		verifyOnly bool
		tps        []txncoord.TP
	}
	var txns []one
	if req.Version < 4 {
		o := one{id: req.TransactionalID, pid: req.ProducerID, epoch: req.ProducerEpoch}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				o.tps = append(o.tps, txncoord.TP{Topic: t.Topic, Partition: p})
			}
		}
		txns = append(txns, o)
	} else {
		for _, t := range req.Transactions {
			o := one{id: t.TransactionalID, pid: t.ProducerID, epoch: t.ProducerEpoch, verifyOnly: t.VerifyOnly}
			for _, tt := range t.Topics {
				for _, p := range tt.Partitions {
					o.tps = append(o.tps, txncoord.TP{Topic: tt.Topic, Partition: p})
				}
			}
			txns = append(txns, o)
		}
	}
	return reply{resp: resp, wait: func() {
		for _, o := range txns {
			// A partition of a topic that does not exist is refused, as Kafka does; the others
			// then get OPERATION_NOT_ATTEMPTED.
			var bad []txncoord.TP
			for _, tp := range o.tps {
				if t, ok := b.topics.Get(tp.Topic); !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
					bad = append(bad, tp)
				}
			}
			codes := map[txncoord.TP]int16{}
			if len(bad) > 0 {
				for _, tp := range o.tps {
					codes[tp] = kerr.OperationNotAttempted.Code
				}
				for _, tp := range bad {
					codes[tp] = kerr.UnknownTopicOrPartition.Code
				}
			} else {
				rep := b.txns.call(ctx, o.id, func(c *txncoord.Coordinator, rid txncoord.ReqID, now int64) txncoord.Effects {
					return c.AddPartitions(txncoord.AddReq{ID: rid, TxnID: o.id, ProducerID: o.pid, Epoch: o.epoch, Partitions: o.tps,
						VerifyOnly: o.verifyOnly, KnowsFenced: req.Version >= 2}, now)
				})
				for _, tp := range o.tps {
					codes[tp] = errCode(rep.Err)
				}
			}
			if req.Version < 4 {
				resp.Topics = addPartitionsResults(o.tps, codes)
				continue
			}
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = o.id
			for _, t := range addPartitionsResults(o.tps, codes) {
				tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				tt.Topic = t.Topic
				for _, p := range t.Partitions {
					tp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					tp.Partition, tp.ErrorCode = p.Partition, p.ErrorCode
					tt.Partitions = append(tt.Partitions, tp)
				}
				rt.Topics = append(rt.Topics, tt)
			}
			resp.Transactions = append(resp.Transactions, rt)
		}
	}}
}

// addPartitionsResults groups per-partition codes by topic, in request order.
func addPartitionsResults(tps []txncoord.TP, codes map[txncoord.TP]int16) []kmsg.AddPartitionsToTxnResponseTopic {
	var out []kmsg.AddPartitionsToTxnResponseTopic
	for _, tp := range tps {
		if n := len(out); n == 0 || out[n-1].Topic != tp.Topic {
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = tp.Topic
			out = append(out, t)
		}
		p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		p.Partition, p.ErrorCode = tp.Partition, codes[tp]
		out[len(out)-1].Partitions = append(out[len(out)-1].Partitions, p)
	}
	return out
}

// handleAddOffsetsToTxn adds the group's __consumer_offsets partition to the transaction, for
// the TxnOffsetCommit that follows.
func handleAddOffsetsToTxn(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	b := r.conn.b
	return reply{resp: resp, wait: func() {
		if aerr := b.groups.ensureTopic(ctx); aerr != nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return
		}
		tp := txncoord.TP{Topic: OffsetsTopic, Partition: b.groups.partitionFor(req.Group)}
		rep := b.txns.call(ctx, req.TransactionalID, func(c *txncoord.Coordinator, rid txncoord.ReqID, now int64) txncoord.Effects {
			return c.AddPartitions(txncoord.AddReq{ID: rid, TxnID: req.TransactionalID, ProducerID: req.ProducerID, Epoch: req.ProducerEpoch,
				Partitions: []txncoord.TP{tp}, KnowsFenced: req.Version >= 2}, now)
		})
		resp.ErrorCode = errCode(rep.Err)
	}}
}

func handleEndTxn(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	b := r.conn.b
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	return reply{resp: resp, wait: func() {
		rep := b.txns.call(ctx, req.TransactionalID, func(c *txncoord.Coordinator, rid txncoord.ReqID, now int64) txncoord.Effects {
			return c.EndTxn(txncoord.EndReq{ID: rid, TxnID: req.TransactionalID, ProducerID: req.ProducerID, Epoch: req.ProducerEpoch,
				Commit: req.Commit, V2: req.Version >= 5, KnowsFenced: req.Version >= 2}, now)
		})
		resp.ErrorCode = errCode(rep.Err)
		if rep.Err == nil && req.Version >= 5 {
			resp.ProducerID, resp.ProducerEpoch = rep.ProducerID, rep.Epoch
		}
	}}
}
