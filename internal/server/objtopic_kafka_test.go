package server_test

// Differences between an object-storage topic and an ordinary Kafka 4.1.1 topic found by a
// differential run of raw requests (kmsg) against both. Each test states Kafka's answer; a
// local Runnel topic is checked alongside as the control where it is useful.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
)

func diffBatch(n int, pid int64, epoch int16, seq int32, transactional bool) []byte {
	var body []byte
	for i := range n {
		body = batch.AppendRecord(body, int64(i), int32(i), []byte{'k', byte('0' + i)}, []byte("value"), 0, nil)
	}
	var attrs int16
	if transactional {
		attrs = 0x10
	}
	now := time.Now().UnixMilli()
	return batch.AppendBatch(nil, batch.Header{
		Attributes: attrs, LastOffsetDelta: int32(n - 1), BaseTimestamp: now, MaxTimestamp: now + int64(n-1),
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, RecordCount: int32(n), LeaderEpoch: -1,
	}, body)
}

// diffProduce sends one batch to partition 0. kgo sends the highest Produce version both sides
// support (12 against Runnel), whatever version is asked for.
func diffProduce(t *testing.T, ctx context.Context, cl *kgo.Client, version int16, acks int16, timeoutMillis int32,
	txnID *string, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = timeoutMillis
	req.TransactionID = txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.Topics[0].Partitions[0]
}

func diffInitProducerID(t *testing.T, ctx context.Context, cl *kgo.Client, txnID *string) (int64, int16) {
	t.Helper()
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = txnID
		req.TransactionTimeoutMillis = 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			return resp.ProducerID, resp.ProducerEpoch
		}
		if ctx.Err() != nil {
			t.Fatalf("InitProducerId: %v %v", err, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestObjectProduceAcks1IgnoresRequestTimeout: Kafka answers an acks=1 produce as soon as the
// leader appended it; the request's TimeoutMillis only bounds the wait for the ISR under acks=all
// (ReplicaManager.appendRecords puts only acks=-1 in the produce purgatory). An object topic
// applied TimeoutMillis to every acks and answered REQUEST_TIMED_OUT once it was shorter than
// the flush and commit (250 ms by default), although the records were committed: a client with
// request.timeout.ms below the object latency never got an acks=1 produce acknowledged, and a
// plain producer's retries stored every record again.
func TestObjectProduceAcks1IgnoresRequestTimeout(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	const topic, local = "kd-acks1", "kd-acks1-local"
	createObjectTopic(t, b.addr, topic, 1, nil)
	b.createTopic(local, 1)
	// A client that sends acks=1 (kgo puts its own acks in a request it is given).
	cl := b.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lp := diffProduce(t, ctx, cl, 9, 1, 50, nil, local, diffBatch(1, -1, -1, -1, false))
	if lp.ErrorCode != 0 {
		t.Fatalf("local topic, acks=1, timeout 50 ms: %v (control)", kerr.ErrorForCode(lp.ErrorCode))
	}
	for i := range 3 {
		p := diffProduce(t, ctx, cl, 9, 1, 50, nil, topic, diffBatch(1, -1, -1, -1, false))
		if p.ErrorCode != 0 || p.BaseOffset != int64(i) {
			t.Errorf("object topic, acks=1, timeout 50 ms, produce %d: error %v, base offset %d; Kafka answers no error, base offset %d",
				i, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, i)
		}
	}
	// The records were stored all the same.
	time.Sleep(500 * time.Millisecond)
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl); err == nil {
		t.Logf("object topic end after three produces answered: %d", resp.Topics[0].Partitions[0].Offset)
	}
}

// TestTxnProduceOldEpochV12: a transactional Produce v12 (transaction version 2, the
// partition added by the broker) with an epoch older than the producer's current one. Kafka's
// AddPartitionsToTxnManager turns the coordinator's PRODUCER_FENCED into INVALID_PRODUCER_EPOCH
// ("Producers expect to handle INVALID_PRODUCER_EPOCH in this scenario"), and the partition's
// own check (ProducerStateManager.checkProducerEpoch) throws InvalidProducerEpochException too:
// the Java producer takes it as abortable. Runnel answered PRODUCER_FENCED, which the Java
// producer takes as fatal (ProducerFencedException). Checked on an object and a local topic.
func TestTxnProduceOldEpochV12(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	cl := b.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		object bool
	}{{"object", true}, {"local", false}} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "kd-oldepoch-" + tc.name
			if tc.object {
				createObjectTopic(t, b.addr, topic, 1, nil)
			} else {
				b.createTopic(topic, 1)
			}
			txnID := "kd-tx-" + tc.name
			pid, epoch := diffInitProducerID(t, ctx, cl, &txnID)
			p := diffProduce(t, ctx, cl, 12, -1, 10000, &txnID, topic, diffBatch(2, pid, epoch, 0, true))
			if p.ErrorCode != 0 {
				t.Fatalf("transactional produce v12: %v", kerr.ErrorForCode(p.ErrorCode))
			}
			end := kmsg.NewPtrEndTxnRequest()
			end.Version = 5
			end.TransactionalID = txnID
			end.ProducerID, end.ProducerEpoch = pid, epoch
			end.Commit = true
			er, err := end.RequestWith(ctx, cl)
			if err != nil || er.ErrorCode != 0 {
				t.Fatalf("EndTxn v5: %v %v", err, er)
			}
			if er.ProducerEpoch <= epoch {
				t.Fatalf("EndTxn v5 answered epoch %d after %d; want a bump", er.ProducerEpoch, epoch)
			}
			time.Sleep(300 * time.Millisecond)
			p = diffProduce(t, ctx, cl, 12, -1, 10000, &txnID, topic, diffBatch(1, pid, epoch, 0, true))
			if p.ErrorCode != kerr.InvalidProducerEpoch.Code {
				t.Errorf("transactional produce v12 at the old epoch %d (current %d): %v; Kafka answers INVALID_PRODUCER_EPOCH",
					epoch, er.ProducerEpoch, kerr.ErrorForCode(p.ErrorCode))
			}
		})
	}
}

// TestLastStableOffsetNotBelowLogStart: a transaction open from offset 0, then
// DeleteRecords past its first offset (to 2, the batch after it). Kafka keeps the last stable
// offset at or above the log start (UnifiedLog.maybeIncrementFirstUnstableOffset: the first
// unstable offset becomes max(its offset, logStartOffset)): ListOffsets LATEST under
// read_committed and the Fetch's LastStableOffset answer 2. An object topic answered 0, the
// open transaction's first offset, below the log start: a read_committed consumer that reset
// to the latest offset was sent to 0, got OFFSET_OUT_OF_RANGE, reset to 0 again, until the
// transaction ended.
func TestLastStableOffsetNotBelowLogStart(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	cl := b.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		object bool
	}{{"local", false}, {"object", true}} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "kd-lso-" + tc.name
			if tc.object {
				createObjectTopic(t, b.addr, topic, 1, nil)
			} else {
				b.createTopic(topic, 1)
			}
			txnID := "kd-lso-tx-" + tc.name
			pid, epoch := diffInitProducerID(t, ctx, cl, &txnID)
			add := kmsg.NewPtrAddPartitionsToTxnRequest()
			add.Version = 3
			add.TransactionalID, add.ProducerID, add.ProducerEpoch = txnID, pid, epoch
			at := kmsg.NewAddPartitionsToTxnRequestTopic()
			at.Topic, at.Partitions = topic, []int32{0}
			add.Topics = append(add.Topics, at)
			if ar, err := add.RequestWith(ctx, cl); err != nil || ar.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("AddPartitionsToTxn: %v %v", err, ar)
			}
			if p := diffProduce(t, ctx, cl, 11, -1, 10000, &txnID, topic, diffBatch(2, pid, epoch, 0, true)); p.ErrorCode != 0 || p.BaseOffset != 0 {
				t.Fatalf("transactional produce: %v at %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
			}
			if p := diffProduce(t, ctx, cl, 11, -1, 10000, nil, topic, diffBatch(2, -1, -1, -1, false)); p.ErrorCode != 0 || p.BaseOffset != 2 {
				t.Fatalf("plain produce: %v at %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
			}
			dr := kmsg.NewPtrDeleteRecordsRequest()
			dr.TimeoutMillis = 10000
			dt := kmsg.NewDeleteRecordsRequestTopic()
			dt.Topic = topic
			dp := kmsg.NewDeleteRecordsRequestTopicPartition()
			dp.Offset = 2
			dt.Partitions = append(dt.Partitions, dp)
			dr.Topics = append(dr.Topics, dt)
			if r, err := dr.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[0].LowWatermark != 2 {
				t.Fatalf("DeleteRecords to 2: %v %v", err, r)
			}

			lo := kmsg.NewPtrListOffsetsRequest()
			lo.ReplicaID = -1
			lo.IsolationLevel = 1
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = topic
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Timestamp = -1
			lp.CurrentLeaderEpoch = -1
			lt.Partitions = append(lt.Partitions, lp)
			lo.Topics = append(lo.Topics, lt)
			lr, err := lo.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if got := lr.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.Offset != 2 {
				t.Errorf("ListOffsets LATEST read_committed: %d (%v); Kafka answers 2, the log start (an open transaction's first offset below it does not count)",
					got.Offset, kerr.ErrorForCode(got.ErrorCode))
			}

			f := kmsg.NewPtrFetchRequest()
			f.Version = 12
			f.ReplicaID = -1
			f.MaxWaitMillis = 50
			f.MaxBytes = 1 << 20
			f.IsolationLevel = 1
			f.SessionEpoch = -1
			md := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(topic)
			md.Topics = append(md.Topics, mt)
			mr, err := md.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic = topic
			ft.TopicID = mr.Topics[0].TopicID
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.FetchOffset = 2
			fp.PartitionMaxBytes = 1 << 20
			fp.CurrentLeaderEpoch = -1
			fp.LogStartOffset = -1
			ft.Partitions = append(ft.Partitions, fp)
			f.Topics = append(f.Topics, ft)
			fr, err := f.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if got := fr.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.LastStableOffset < got.LogStartOffset {
				t.Errorf("Fetch read_committed at 2: last stable offset %d, log start %d (%v); Kafka answers a last stable offset of 2, never below the log start",
					got.LastStableOffset, got.LogStartOffset, kerr.ErrorForCode(got.ErrorCode))
			}
		})
	}
}

// TestObjectProduceRefusalCarriesLogStart: a produce an object partition refuses for its
// producer state (here an idempotent batch at an older epoch) answers the partition's log start
// offset, as Kafka's ReplicaManager answers every refusal of its log or producer state
// (processFailedRecord: partition.logStartOffset), and as Runnel's local partitions do; it
// answered -1.
func TestObjectProduceRefusalCarriesLogStart(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	const topic = "kd-logstart"
	createObjectTopic(t, b.addr, topic, 1, nil)
	cl := b.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid, epoch := diffInitProducerID(t, ctx, cl, nil)
	if p := diffProduce(t, ctx, cl, 11, -1, 10000, nil, topic, diffBatch(3, pid, epoch+1, 0, false)); p.ErrorCode != 0 {
		t.Fatalf("first batch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	del := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = topic
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 0, 2
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics, del.TimeoutMillis = append(del.Topics, dt), 10000
	if resp, err := del.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("DeleteRecords: %v %+v", err, resp)
	}
	p := diffProduce(t, ctx, cl, 11, -1, 10000, nil, topic, diffBatch(1, pid, epoch, 3, false))
	if p.ErrorCode != kerr.InvalidProducerEpoch.Code || p.LogStartOffset != 2 {
		t.Errorf("a batch of the older epoch: %v, log start %d; Kafka answers INVALID_PRODUCER_EPOCH with the log start, 2",
			kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
	}
}
