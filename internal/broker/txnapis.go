package broker

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/logstore"
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
			// A partition of a topic that does not exist is refused, as Kafka does, and so is a
			// total-order topic's (its shards take no transactions: Produce refuses their
			// batches, and a marker would take a global position); the others then get
			// OPERATION_NOT_ATTEMPTED. A client (v0-3) may not add an internal topic's: Kafka's
			// KafkaApis.handleAddPartitionsToTxnRequest leaves them out of the topics it
			// authorizes, so they are TOPIC_AUTHORIZATION_FAILED whatever the ACLs.
			bad := map[txncoord.TP]int16{}
			for _, tp := range o.tps {
				if req.Version < 4 && internalTopic(tp.Topic) {
					bad[tp] = kerr.TopicAuthorizationFailed.Code
				} else if t, ok := b.topics.Get(tp.Topic); !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
					bad[tp] = kerr.UnknownTopicOrPartition.Code
				} else if isTotalOrder(t) {
					bad[tp] = kerr.InvalidTxnState.Code
				}
			}
			codes := map[txncoord.TP]int16{}
			if len(bad) > 0 {
				for _, tp := range o.tps {
					codes[tp] = kerr.OperationNotAttempted.Code
				}
				maps.Copy(codes, bad)
			} else {
				// A verification is answered per partition, as Kafka's: one coordinator call
				// each (TRANSACTION_ABORTABLE for those not in the transaction only).
				batches := [][]txncoord.TP{o.tps}
				if o.verifyOnly {
					batches = nil
					for _, tp := range o.tps {
						batches = append(batches, []txncoord.TP{tp})
					}
				}
				for _, tps := range batches {
					rep := b.txns.callWaitingOut(ctx, o.id, func(c *txncoord.Coordinator, rid txncoord.ReqID, now int64) txncoord.Effects {
						return c.AddPartitions(txncoord.AddReq{ID: rid, TxnID: o.id, ProducerID: o.pid, Epoch: o.epoch, Partitions: tps,
							VerifyOnly: o.verifyOnly, KnowsFenced: req.Version >= 2}, now)
					})
					for _, tp := range tps {
						codes[tp] = errCode(rep.Err)
					}
					if rep.Err == nil && !o.verifyOnly {
						b.txns.noteAdded(o.id, tps)
					}
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
		rep := b.txns.callWaitingOut(ctx, req.TransactionalID, func(c *txncoord.Coordinator, rid txncoord.ReqID, now int64) txncoord.Effects {
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
	fencedOnAbort := javaClient(r.conn.software)
	return reply{resp: resp, wait: func() {
		// The previous transaction may still be completing (a version-2 producer ends its next
		// one quickly): wait for it here rather than send CONCURRENT_TRANSACTIONS to a client
		// that backs off for its retry.backoff.ms.
		rep := b.txns.callWaitingOut(ctx, req.TransactionalID, func(c *txncoord.Coordinator, rid txncoord.ReqID, now int64) txncoord.Effects {
			return c.EndTxn(txncoord.EndReq{ID: rid, TxnID: req.TransactionalID, ProducerID: req.ProducerID, Epoch: req.ProducerEpoch,
				Commit: req.Commit, V2: req.Version >= 5, KnowsFenced: req.Version >= 2, FencedOnAbort: fencedOnAbort,
				NewPID: b.cfg.ProducerIDs.Next}, now)
		})
		resp.ErrorCode = errCode(rep.Err)
		if rep.Err == nil && req.Version >= 5 {
			resp.ProducerID, resp.ProducerEpoch = rep.ProducerID, rep.Epoch
		}
	}}
}

func init() { register(kmsg.TxnOffsetCommit, 0, 5, handleTxnOffsetCommit) }

// handleTxnOffsetCommit writes a transaction's offsets to the group's __consumer_offsets
// partition as the producer's transactional batch; they count once the transaction commits.
// Version 5 (transaction version 2) adds the partition to the transaction here (KIP-890).
func handleTxnOffsetCommit(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	b := r.conn.b
	fail := func(code int16) { resp.Topics = txnOffsetCommitErrors(req.Topics, code) }
	return reply{resp: resp, wait: func() {
		// As Kafka's handleTxnOffsetCommitRequest, a partition this node does not know is
		// UNKNOWN_TOPIC_OR_PARTITION before the group and the transaction are looked at; the
		// coordinator sees the others, and none if there are none. A topic is one row.
		known, unknownReq := splitPartitions(req.Topics,
			func(t *kmsg.TxnOffsetCommitRequestTopic) *[]kmsg.TxnOffsetCommitRequestTopicPartition {
				return &t.Partitions
			},
			func(t *kmsg.TxnOffsetCommitRequestTopic, p kmsg.TxnOffsetCommitRequestTopicPartition) bool {
				return b.partitionExists(t.Topic, p.Partition)
			})
		unknown := txnOffsetCommitErrors(unknownReq, kerr.UnknownTopicOrPartition.Code)
		defer func() { resp.Topics = mergeTxnOffsetCommitTopics(append(unknown, resp.Topics...)) }()
		if len(unknown) > 0 && len(known) == 0 {
			return
		}
		kreq := *req
		kreq.Topics = known
		req = &kreq
		switch { // as Kafka's GroupCoordinatorService.commitTransactionalOffsets, the group first
		case req.Group == "":
			fail(kerr.InvalidGroupID.Code)
			return
		case req.TransactionalID == "":
			fail(kerr.InvalidRequest.Code)
			return
		}
		gs := b.groups
		gs.mu.Lock()
		sh, code := gs.shardForLocked(req.Group)
		gs.mu.Unlock()
		if sh == nil {
			fail(code.Code)
			return
		}
		// Verify the client added the partition (AddOffsetsToTxn), or add it here from v5; as
		// Kafka's txnOffsetCommitRequestVersionToTransactionSupportedOperation, v4 is the first
		// to be told TRANSACTION_ABORTABLE, as Produce v11.
		produceVersion := int16(10)
		switch {
		case req.Version >= 5:
			produceVersion = 12
		case req.Version == 4:
			produceVersion = 11
		}
		if err := b.txns.ensureInTransaction(ctx, req.TransactionalID, localTxnPartition{b.txns, sh.p}, req.ProducerID, req.ProducerEpoch, produceVersion); err != nil {
			code := errCode(err)
			if code == kerr.NotEnoughReplicas.Code { // retriable for the client as a coordinator error
				code = kerr.CoordinatorLoadInProgress.Code
			}
			fail(code)
			return
		}
		gs.mu.Lock()
		if gs.shards[sh.index] != sh {
			gs.mu.Unlock()
			fail(kerr.NotCoordinator.Code)
			return
		}
		out, records, undo := sh.c.TxnOffsetCommit(timeNow(), req)
		var epoch int32
		var end int64
		var err error
		if len(records) > 0 {
			now := timeNow().UnixMilli()
			var body []byte
			for i, rec := range records {
				body = batch.AppendRecord(body, 0, int32(i), rec.Key, rec.Value, 0, nil)
			}
			bt := batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(len(records) - 1), BaseTimestamp: now, MaxTimestamp: now,
				Attributes: batch.AttrTransactional, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, BaseSequence: -1,
				RecordCount: int32(len(records))}, body)
			var res logstore.AppendResult
			res, epoch, err = sh.p.Replica.AppendCoordinator(bt)
			if err != nil {
				undo() // nothing of it was written: the pending offsets are as before
			} else {
				end = res.Last + 1
				sh.p.NotifyAppend() // not synced on its own: the transaction's prepare does it
			}
		}
		gs.mu.Unlock()
		if err == nil && end > 0 {
			err = sh.p.Replica.WaitReplicated(ctx, epoch, end)
		}
		if err != nil {
			code := errCode(err)
			if isNotLeader(err) {
				code = kerr.NotCoordinator.Code
			}
			fail(code)
			return
		}
		*resp = *out
	}}
}

// txnOffsetCommitErrors answers every partition of topics code.
func txnOffsetCommitErrors(in []kmsg.TxnOffsetCommitRequestTopic, code int16) []kmsg.TxnOffsetCommitResponseTopic {
	var out []kmsg.TxnOffsetCommitResponseTopic
	for _, rt := range in {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		out = append(out, st)
	}
	return out
}

func init() {
	register(kmsg.DescribeTransactions, 0, 0, handleDescribeTransactions)
	register(kmsg.ListTransactions, 0, 2, handleListTransactions)
}

// handleDescribeTransactions describes the transactional ids this node coordinates
// (kafka-transactions describe); the others get NOT_COORDINATOR, an empty one INVALID_REQUEST.
func handleDescribeTransactions(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	d := r.conn.b.txns
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		if id == "" { // on any node, as Kafka's TransactionCoordinator.handleDescribeTransactions
			st.ErrorCode = kerr.InvalidRequest.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		sh, code := d.shardForLocked(id)
		if sh == nil {
			st.ErrorCode = code.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		t, ok := sh.c.Txn(id)
		if !ok {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State, st.TimeoutMillis, st.ProducerID, st.ProducerEpoch = t.State.String(), t.TimeoutMs, t.ProducerID, t.Epoch
		if t.State != txncoord.Empty { // as Kafka, a completed transaction keeps its start
			st.StartTimestamp = t.StartMs
		}
		for _, tp := range sortedTPs(t.Partitions) {
			if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
				tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				tt.Topic = tp.Topic
				st.Topics = append(st.Topics, tt)
			}
			st.Topics[len(st.Topics)-1].Partitions = append(st.Topics[len(st.Topics)-1].Partitions, tp.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply{resp: resp}
}

func sortedTPs(set map[txncoord.TP]bool) []txncoord.TP {
	out := make([]txncoord.TP, 0, len(set))
	for tp := range set {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b txncoord.TP) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// handleListTransactions lists the transactional ids this node coordinates, filtered by state,
// producer id, running time (v1) and id pattern (v2, a regular expression).
func handleListTransactions(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var pattern *regexp.Regexp
	if req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile(*req.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return reply{resp: resp}
		}
		pattern = re
	}
	// As Kafka, a state filter that names no transaction state is reported back.
	known := map[string]bool{}
	for s := txncoord.State(0); s <= txncoord.PrepareEpochFence; s++ {
		known[s.String()] = true
	}
	for _, f := range req.StateFilters {
		if !known[f] && !slices.Contains(resp.UnknownStateFilters, f) {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
		}
	}
	now := timeNow().UnixMilli()
	d := r.conn.b.txns
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, idx := range slices.Sorted(maps.Keys(d.shards)) {
		sh := d.shards[idx]
		for _, id := range sh.c.IDs() {
			t, _ := sh.c.Txn(id)
			switch {
			case len(req.StateFilters) > 0 && !slices.Contains(req.StateFilters, t.State.String()):
				continue
			case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, t.ProducerID):
				continue
			case req.DurationFilterMillis >= 0 && req.Version >= 1 && now-t.StartMs <= req.DurationFilterMillis:
				// As Kafka's TransactionStateManager.listTransactionStates: by the start time
				// alone, whatever the state (an id that never began one, start -1, passes).
				continue
			case pattern != nil && !pattern.MatchString(id):
				continue
			}
			st := kmsg.NewListTransactionsResponseTransactionState()
			st.TransactionalID, st.ProducerID, st.TransactionState = id, t.ProducerID, t.State.String()
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
	}
	return reply{resp: resp}
}

// javaClient reports whether a client's ClientSoftwareName (KIP-511) is Apache Kafka's Java
// client ("apache-kafka-java"), which Kafka Streams and Kafka Connect run on: a commit the
// coordinator aborted is told to it as fenced (txncoord.EndReq.FencedOnAbort).
func javaClient(software string) bool {
	return software == "apache-kafka-java"
}
