package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/txncoord"
)

// initTransactional runs InitProducerId for a transactional id, retrying while its coordinator
// loads, and returns the producer id and epoch.
func initTransactional(t *testing.T, addr, id string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 5, kmsg.StringPtr(id), 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := rawRequest(t, addr, req).(*kmsg.InitProducerIDResponse)
		if r.ErrorCode == 0 {
			return r.ProducerID, r.ProducerEpoch
		}
		if !kerr.IsRetriable(kerr.ErrorForCode(r.ErrorCode)) || time.Now().After(deadline) {
			t.Fatalf("InitProducerId(%s) = %s", id, errName(r.ErrorCode))
		}
	}
}

// addPartitionsV3 adds partitions to a transaction as a client does (AddPartitionsToTxn v3) and
// returns each one's code by "topic/partition".
func addPartitionsV3(t *testing.T, addr, id string, pid int64, epoch int16, topics map[string][]int32) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, id, pid, epoch
	for topic, ps := range topics {
		req.Topics = append(req.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: topic, Partitions: ps})
	}
	out := map[string]int16{}
	for _, rt := range rawRequest(t, addr, req).(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	return out
}

// TestAddPartitionsToTxnInternalTopic: a client's AddPartitionsToTxn (v0-3) naming an internal
// topic's partition gets TOPIC_AUTHORIZATION_FAILED for it, whatever the ACLs, and the others
// OPERATION_NOT_ATTEMPTED, as Kafka's KafkaApis.handleAddPartitionsToTxnRequest (it leaves
// internal topics out of those it authorizes). __consumer_offsets used to be added.
func TestAddPartitionsToTxnInternalTopic(t *testing.T) {
	addr, reg := coordinatedBroker(t)
	ctCreate(t, reg, "apt", 1, nil)
	pid, epoch := initTransactional(t, addr, "apt-tx")
	got := addPartitionsV3(t, addr, "apt-tx", pid, epoch, map[string][]int32{OffsetsTopic: {0}, "apt": {0}})
	want := map[string]int16{OffsetsTopic + "/0": kerr.TopicAuthorizationFailed.Code, "apt/0": kerr.OperationNotAttempted.Code}
	if !maps.Equal(got, want) {
		t.Errorf("AddPartitionsToTxn v3(%s/0, apt/0) = %v; want %v", OffsetsTopic, got, want)
	}
}

// TestTxnVerificationNotAddedPartition: a transaction (version 1 flow) added partition 0 only.
// As Kafka's TransactionCoordinator.handleVerifyPartitionsInTransaction, a verification
// (AddPartitionsToTxn v4+ VerifyOnly) answers per partition: NONE for 0,
// TRANSACTION_ABORTABLE for 1 (KIP-890). A transactional batch to partition 1 is
// TRANSACTION_ABORTABLE from Produce v11 and INVALID_TXN_STATE before, and a TxnOffsetCommit
// whose group partition was not added the same from v4 and before it, as Kafka's
// AddPartitionsToTxnManager converts the error for older clients (DEFAULT_ERROR). Every one of
// these used to be INVALID_TXN_STATE, the verified partition included, which a Java 4.x
// producer takes as fatal where it could abort the transaction and go on.
func TestTxnVerificationNotAddedPartition(t *testing.T) {
	addr, reg := coordinatedBroker(t)
	ctCreate(t, reg, "ver", 2, nil)
	pid, epoch := initTransactional(t, addr, "ver-tx")
	if got := addPartitionsV3(t, addr, "ver-tx", pid, epoch, map[string][]int32{"ver": {0}}); !maps.Equal(got, map[string]int16{"ver/0": 0}) {
		t.Fatalf("AddPartitionsToTxn v3(ver/0) = %v; want NONE", got)
	}

	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 5
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "ver-tx", ProducerID: pid, ProducerEpoch: epoch,
		VerifyOnly: true, Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "ver", Partitions: []int32{0, 1}}}}}
	want := map[int32]int16{0: 0, 1: kerr.TransactionAbortable.Code}
	resp := rawRequest(t, addr, req).(*kmsg.AddPartitionsToTxnResponse)
	answered := 0
	for _, rt := range resp.Transactions {
		for _, tt := range rt.Topics {
			for _, p := range tt.Partitions {
				answered++
				if p.ErrorCode != want[p.Partition] {
					t.Errorf("AddPartitionsToTxn v5(verify only, ver/%d) = %s; want %s", p.Partition, errName(p.ErrorCode), errName(want[p.Partition]))
				}
			}
		}
	}
	if resp.ErrorCode != 0 || answered != 2 {
		t.Errorf("AddPartitionsToTxn v5(verify only) = %s with %d partitions; want NONE with 2", errName(resp.ErrorCode), answered)
	}

	// The node-to-node verification: a partition leader of an earlier version, which sends no
	// knows_abortable and passes the coordinator's code on to its client as it is, is told
	// INVALID_TXN_STATE, which its clients know.
	v, _ := testBrokers.Load(reg)
	br := v.(*Broker)
	for _, c := range []struct {
		knows bool
		want  *kerr.Error
	}{{false, kerr.InvalidTxnState}, {true, kerr.TransactionAbortable}} {
		err := br.txns.addToTransaction(context.Background(), txnAddReq{TxnID: "ver-tx", ProducerID: pid, Epoch: epoch,
			TP: txncoord.TP{Topic: "ver", Partition: 1}, VerifyOnly: true, KnowsAbortable: c.knows})
		if !errors.Is(err, c.want) {
			t.Errorf("txn.add(verify ver/1, knows_abortable %v) = %v; want %v", c.knows, err, c.want)
		}
	}

	for _, c := range []struct {
		version int16
		want    *kerr.Error
	}{{10, kerr.InvalidTxnState}, {11, kerr.TransactionAbortable}} {
		pr := ctProduce(c.version, -1, ctPart{"ver", 1, lsoTxnBatch(pid, 1)})
		pr.TransactionID = kmsg.StringPtr("ver-tx")
		if got := rawRequest(t, addr, pr).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; got != c.want.Code {
			t.Errorf("Produce v%d(a transactional batch, partition not in the transaction) = %s; want %s", c.version, errName(got), errName(c.want.Code))
		}
	}

	for _, c := range []struct {
		version int16
		want    *kerr.Error
	}{{3, kerr.InvalidTxnState}, {4, kerr.TransactionAbortable}} {
		toc := kmsg.NewPtrTxnOffsetCommitRequest()
		toc.Version, toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch = c.version, "ver-tx", "ver-g", pid, epoch
		toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "ver",
			Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
		if got := rawRequest(t, addr, toc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; got != c.want.Code {
			t.Errorf("TxnOffsetCommit v%d(group partition not in the transaction) = %s; want %s", c.version, errName(got), errName(c.want.Code))
		}
	}
}

// TestListTransactionsDurationFilterByStartTime: ListTransactions v1's duration filter keeps
// the transactional ids whose last transaction started longer ago than it, whatever their
// state, as Kafka's TransactionStateManager.listTransactionStates: an id that never began one
// (Empty, start time -1) is listed by any filter, an ongoing transaction that began a moment
// ago is not. Only ongoing transactions used to be listed.
func TestListTransactionsDurationFilterByStartTime(t *testing.T) {
	addr, reg := coordinatedBroker(t)
	ctCreate(t, reg, "lt", 1, nil)
	initTransactional(t, addr, "lt-empty")
	pid, epoch := initTransactional(t, addr, "lt-ongoing")
	if got := addPartitionsV3(t, addr, "lt-ongoing", pid, epoch, map[string][]int32{"lt": {0}}); !maps.Equal(got, map[string]int16{"lt/0": 0}) {
		t.Fatalf("AddPartitionsToTxn v3(lt/0) = %v; want NONE", got)
	}
	list := func(durationMillis int64) []string {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version, req.DurationFilterMillis = 1, durationMillis
		var ids []string
		for _, s := range rawRequest(t, addr, req).(*kmsg.ListTransactionsResponse).TransactionStates {
			ids = append(ids, s.TransactionalID+"/"+s.TransactionState)
		}
		slices.Sort(ids)
		return ids
	}
	if got, want := list(3_600_000), []string{"lt-empty/Empty"}; !slices.Equal(got, want) {
		t.Errorf("ListTransactions v1(running longer than 1 h) = %v; want %v", got, want)
	}
	if got, want := list(-1), []string{"lt-empty/Empty", "lt-ongoing/Ongoing"}; !slices.Equal(got, want) {
		t.Errorf("ListTransactions v1(no duration filter) = %v; want %v", got, want)
	}
}
