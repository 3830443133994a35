package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
)

// TestSequencesAsKafka: request sequences a randomized differential run against Kafka 4.1
// answered otherwise (each a short reproduction of a divergence it found).
func TestSequencesAsKafka(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, _, adm := adminClients(t, addr)

	initTxn := func(t *testing.T, id string, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 5, kmsg.StringPtr(id), 60_000
		req.ProducerID, req.ProducerEpoch = pid, epoch
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			fc := kmsg.NewPtrFindCoordinatorRequest() // as a client does first: creates __transaction_state
			fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{id}
			rawRequest(t, addr, fc)
			r := rawRequest(t, addr, req).(*kmsg.InitProducerIDResponse)
			if (r.ErrorCode != kerr.NotCoordinator.Code && r.ErrorCode != kerr.CoordinatorLoadInProgress.Code) || time.Now().After(deadline) {
				return r
			}
		}
	}
	// produceTxn sends one transactional batch of n records at seq as Produce v12 (transaction
	// version 2: the leader adds the partition to the transaction).
	produceTxn := func(t *testing.T, id, topic string, partition int32, pid int64, epoch int16, seq int32, n int) int16 {
		t.Helper()
		var recs []byte
		for i := range n {
			recs = batch.AppendRecord(recs, 0, int32(i), nil, []byte{byte(i)}, 0, nil)
		}
		now := time.Now().UnixMilli()
		b := batch.AppendBatch(nil, batch.Header{Attributes: batch.AttrTransactional, LastOffsetDelta: int32(n - 1),
			BaseTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, RecordCount: int32(n)}, recs)
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.TransactionID, req.Acks, req.TimeoutMillis = 12, kmsg.StringPtr(id), -1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = partition, b
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rawRequest(t, addr, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	endTxn := func(t *testing.T, id string, pid int64, epoch int16, commit bool) int16 {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = 5, id, pid, epoch, commit
		return rawRequest(t, addr, req).(*kmsg.EndTxnResponse).ErrorCode
	}
	create := func(t *testing.T, topic string, partitions int32) {
		t.Helper()
		mustCreate(t, ctx, adm, partitions, nil, topic)
		t.Cleanup(func() { adm.DeleteTopics(context.Background(), topic) })
	}
	deleteAndCreate := func(t *testing.T, topic string, partitions int32) {
		t.Helper()
		if resps, err := adm.DeleteTopics(ctx, topic); err != nil || resps.Error() != nil {
			t.Fatalf("delete %s: %v %v", topic, err, resps.Error())
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			resps, err := adm.CreateTopics(ctx, partitions, -1, nil, topic)
			if err == nil && resps.Error() == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("create %s again: %v %v", topic, err, resps.Error())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("a producer id without an epoch is INVALID_REQUEST", func(t *testing.T) {
		if r := initTxn(t, "pair", 5, -1); r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("InitProducerId(txn, pid 5, epoch -1) = %s; want INVALID_REQUEST", errName(r.ErrorCode))
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.ProducerID, req.ProducerEpoch = 5, -1, 3
		if r := rawRequest(t, addr, req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("InitProducerId(no txn, pid -1, epoch 3) = %s; want INVALID_REQUEST", errName(r.ErrorCode))
		}
	})

	t.Run("a transaction over a topic created again with fewer partitions ends", func(t *testing.T) {
		// The marker of the partition the topic no longer has was asked for again and again:
		// the id stayed in PrepareAbort, and every InitProducerId got CONCURRENT_TRANSACTIONS.
		for _, commit := range []bool{false, true} {
			id, topic := "fewer-abort", "fewer-a"
			if commit {
				id, topic = "fewer-commit", "fewer-c"
			}
			create(t, topic, 2)
			r := initTxn(t, id, -1, -1)
			if r.ErrorCode != 0 {
				t.Fatalf("InitProducerId: %s", errName(r.ErrorCode))
			}
			if code := produceTxn(t, id, topic, 1, r.ProducerID, r.ProducerEpoch, 0, 2); code != 0 {
				t.Fatalf("transactional produce: %s", errName(code))
			}
			deleteAndCreate(t, topic, 1)
			if code := endTxn(t, id, r.ProducerID, r.ProducerEpoch, commit); code != 0 {
				t.Fatalf("commit=%v: EndTxn = %s; want NONE, as Kafka skips the partition that is gone", commit, errName(code))
			}
			deadline := time.Now().Add(15 * time.Second)
			for {
				again := initTxn(t, id, -1, -1)
				if again.ErrorCode == 0 {
					break
				}
				if again.ErrorCode != kerr.ConcurrentTransactions.Code || time.Now().After(deadline) {
					d, _ := adm.DescribeTransactions(ctx, id)
					t.Fatalf("commit=%v: InitProducerId after the end = %s (%+v); want the id usable again", commit, errName(again.ErrorCode), d)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	})

	t.Run("a version-2 transactional batch starts a new partition at sequence 0", func(t *testing.T) {
		// A partition created again under its name mid-transaction took the transaction's
		// later batch, and the commit lost the earlier ones without an error.
		id, topic := "reseq", "reseq-t"
		create(t, topic, 1)
		r := initTxn(t, id, -1, -1)
		if code := produceTxn(t, id, topic, 0, r.ProducerID, r.ProducerEpoch, 0, 2); code != 0 {
			t.Fatalf("transactional produce: %s", errName(code))
		}
		deleteAndCreate(t, topic, 1)
		if code := produceTxn(t, id, topic, 0, r.ProducerID, r.ProducerEpoch, 2, 1); code != kerr.OutOfOrderSequenceNumber.Code {
			t.Errorf("sequence 2 on the partition created again = %s; want OUT_OF_ORDER_SEQUENCE_NUMBER", errName(code))
		}
		if code := produceTxn(t, id, topic, 0, r.ProducerID, r.ProducerEpoch, 0, 1); code != 0 {
			t.Errorf("sequence 0 on the partition created again = %s; want NONE", errName(code))
		}
	})

	t.Run("a transaction begun during the marker round commits over a topic created again", func(t *testing.T) {
		// The marker round of the previous transaction dropped the leadership notes of the
		// partitions the next one added meanwhile; the new topic's partition then failed the
		// "led since the transaction began" check at the commit (TRANSACTION_ABORTABLE), where
		// Kafka commits and writes the marker to it.
		id := "early"
		create(t, "early-a", 2)
		create(t, "early-b", 1)
		r := initTxn(t, id, -1, -1)
		if code := produceTxn(t, id, "early-b", 0, r.ProducerID, r.ProducerEpoch, 0, 1); code != 0 {
			t.Fatalf("first transaction's produce: %s", errName(code))
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 5, id, r.ProducerID, r.ProducerEpoch, false
		er := rawRequest(t, addr, end).(*kmsg.EndTxnResponse)
		if er.ErrorCode != 0 {
			t.Fatalf("abort: %s", errName(er.ErrorCode))
		}
		// At once: the next transaction, at the epoch the abort answered.
		if code := produceTxn(t, id, "early-a", 1, er.ProducerID, er.ProducerEpoch, 0, 1); code != 0 {
			t.Fatalf("next transaction's produce: %s", errName(code))
		}
		deleteAndCreate(t, "early-a", 2)
		if code := endTxn(t, id, er.ProducerID, er.ProducerEpoch, true); code != 0 {
			t.Errorf("commit after the topic was created again: %s; want NONE, as Kafka", errName(code))
		}
	})

	t.Run("a version-2 batch its record checks refuse still joins the transaction", func(t *testing.T) {
		// Kafka adds the partition (AddPartitionsToTxnManager) before it validates the records:
		// a keyless record on a compacted topic is INVALID_RECORD, and the commit that follows
		// writes the partition's marker. Runnel checked the records first, so the commit was
		// INVALID_TXN_STATE (nothing added).
		id := "keyless"
		mustCreate(t, ctx, adm, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, "keyless-c")
		r := initTxn(t, id, -1, -1)
		if code := produceTxn(t, id, "keyless-c", 0, r.ProducerID, r.ProducerEpoch, 0, 1); code != kerr.InvalidRecord.Code {
			t.Fatalf("a keyless transactional record on a compacted topic: %s; want INVALID_RECORD", errName(code))
		}
		if code := endTxn(t, id, r.ProducerID, r.ProducerEpoch, true); code != 0 {
			t.Fatalf("the commit: %s; want NONE (the partition joined the transaction)", errName(code))
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			ends, err := adm.ListEndOffsets(ctx, "keyless-c")
			if err == nil && ends["keyless-c"][0].Offset == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the partition's end after the commit: %+v %v; want 1 (its marker)", ends, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("a compact topic's missing partition is UNKNOWN_TOPIC_OR_PARTITION in DeleteRecords", func(t *testing.T) {
		mustCreate(t, ctx, adm, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, "compacted-dr")
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version, req.TimeoutMillis = 2, 5000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "compacted-dr"
		for _, p := range []int32{0, 3} {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p, 0
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		got := map[int32]int16{}
		for _, p := range rawRequest(t, addr, req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions {
			got[p.Partition] = p.ErrorCode
		}
		if got[0] != kerr.PolicyViolation.Code || got[3] != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("partition 0: %s, partition 3: %s; want POLICY_VIOLATION, UNKNOWN_TOPIC_OR_PARTITION", errName(got[0]), errName(got[3]))
		}
	})

	t.Run("a missing topic's invalid configs are INVALID_CONFIG", func(t *testing.T) {
		// Kafka's controller validates the values before it checks that the topic exists.
		for _, c := range []struct {
			name, value string
			want        *kerr.Error
		}{{"max.message.bytes", "-5", kerr.InvalidConfig}, {"foo.unknown", "1", kerr.InvalidConfig}, {"retention.ms", "1000", kerr.UnknownTopicOrPartition}} {
			inc, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: c.name, Value: kmsg.StringPtr(c.value)}}, "no-such-topic")
			if err != nil {
				t.Fatal(err)
			}
			leg, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: c.name, Value: kmsg.StringPtr(c.value)}}, "no-such-topic")
			if err != nil {
				t.Fatal(err)
			}
			for what, rs := range map[string]kadm.AlterConfigsResponses{"IncrementalAlterConfigs": inc, "AlterConfigs": leg} {
				if len(rs) != 1 || rs[0].Err != c.want {
					t.Errorf("%s %s=%s of a missing topic: %v; want %v", what, c.name, c.value, rs, c.want)
				}
			}
		}
	})
}
