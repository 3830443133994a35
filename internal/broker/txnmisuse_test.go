package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/txncoord"
)

// TestMarkerForAnUnknownTopicIsNotWritten: the partition side of a marker round answered
// success for a topic this node does not know. A restarted leader's registry is empty until its
// first Sync (topics.Open), so a COMMIT marker sent to it in that window was counted written:
// the coordinator wrote CompleteCommit and forgot the partition, and the partition later
// aborted the committed records itself (txn.check answered "no"). The error now reaches the
// coordinator, whose `gone` check tells a deleted topic from a restarted leader.
func TestMarkerForAnUnknownTopicIsNotWritten(t *testing.T) {
	b, _, _ := ctBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := b.txns.markerLocal(ctx, txnMarkerReq{Topic: "not-synced-yet", Partition: 0, ProducerID: 1, Epoch: 0, Commit: true, CoordinatorEpoch: 1})
	if err == nil {
		t.Errorf("txn.marker for a topic this node does not know = success; the marker was not written, and the coordinator cannot tell")
	}
}

// TestForeignTransactionalIDDoesNotAbortAnother: a Produce naming transactional id "other" with
// another producer's id recorded that mapping (txns.ids) before any coordinator vouched for it;
// the partition's periodic check of the victim's open transaction then asked "other"'s
// coordinator, which does not know the producer, and the partition aborted the victim's
// transaction. The mapping is now taken only from a coordinator's answer.
func TestForeignTransactionalIDDoesNotAbortAnother(t *testing.T) {
	b, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "tx", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	victim, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("victim"), kgo.DefaultProduceTopic("tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	if err := victim.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := victim.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp, _ := reg.Get("tx")
	p := tp.Partitions[0]
	var pid int64 = -1
	for id := range p.Log.OpenTransactions() {
		pid = id
	}
	_, _, epoch, ok := p.Log.OpenTransaction(pid)
	if !ok {
		t.Fatal("victim's transaction is not open")
	}

	// Another client, allowed to write with transactional id "other", names the victim's pid.
	other, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	now := time.Now().UnixMilli()
	body := batch.AppendRecord(nil, 0, 0, nil, []byte("x"), 0, nil)
	bt := batch.AppendBatch(nil, batch.Header{Attributes: batch.AttrTransactional, BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 100, RecordCount: 1}, body)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	tid := "other"
	req.TransactionID = &tid
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "tx"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, bt
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("foreign produce answered %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))

	// The partition's periodic check (run after txnPartitionCheck) of the victim's transaction.
	b.txns.checkStale(ctx, localTxnPartition{b.txns, p}, pid, epoch)
	if _, _, _, open := p.Log.OpenTransaction(pid); !open {
		t.Errorf("the victim's open transaction was aborted by the partition after a foreign produce named its producer id")
		// And the victim's commit still succeeds: its record is aborted, a non-atomic commit.
		if err := victim.EndTransaction(ctx, kgo.TryCommit); err != nil && !errors.Is(err, kerr.InvalidProducerEpoch) {
			t.Logf("victim commit: %v", err)
		} else {
			t.Logf("victim commit: %v (the record it wrote is aborted)", err)
		}
	}
}

// A partition its topic no longer has (deleted and created again under the same name, with
// fewer partitions) needs no marker: the marker round would otherwise retry it for ever, the
// transaction never completing.
func TestMarkerForAPartitionTheTopicNoLongerHasIsDone(t *testing.T) {
	b, _, reg := ctBroker(t, nil)
	ctCreate(t, reg, "shrunk", 1, nil)
	if !b.txns.gone(txncoord.TP{Topic: "shrunk", Partition: 3}, kerr.UnknownTopicOrPartition) {
		t.Error("partition 3 of a topic of one partition: not gone")
	}
	if b.txns.gone(txncoord.TP{Topic: "shrunk", Partition: 0}, kerr.UnknownTopicOrPartition) {
		t.Error("partition 0 of a topic this node knows, answered unknown (a restarted leader): gone")
	}
}
