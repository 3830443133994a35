package broker

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
)

// lsoTxnBatch is a transactional batch of n records from producer pid (epoch 0, sequence 0).
func lsoTxnBatch(pid int64, n int) []byte {
	var body []byte
	ts := time.Now().UnixMilli()
	for i := 0; i < n; i++ {
		body = batch.AppendRecord(body, 0, int32(i), []byte(fmt.Sprintf("k%d", i)), bytes.Repeat([]byte{'t'}, 10), 0, nil)
	}
	return batch.AppendBatch(nil, batch.Header{Attributes: batch.AttrTransactional, LastOffsetDelta: int32(n - 1), BaseTimestamp: ts,
		MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0, RecordCount: int32(n)}, body)
}

// TestLSONotBelowLogStartAfterDeleteRecords: an open transaction begins at offset 0; plain
// records follow; DeleteRecords moves the log start to 4 (below the high watermark, as Kafka
// allows). Kafka clamps the first unstable offset to the log start
// (UnifiedLog.updateFirstUnstableOffset: max(firstUnstable, logStartOffset)), so the last
// stable offset is never below the log start: ListOffsets(LATEST, read_committed) answers 4,
// and a read_committed fetch at offset 0 (< log start) is OFFSET_OUT_OF_RANGE.
func TestLSONotBelowLogStartAfterDeleteRecords(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	tp := ctCreate(t, reg, "lsohunt", 1, nil)
	p := tp.Partitions[0]
	if _, _, err := p.Replica.Append(lsoTxnBatch(77, 2)); err != nil { // 0-1: open transaction of 77
		t.Fatal(err)
	}
	p.Log.SyncSoon()
	resp := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"lsohunt", 0, ctBatch(6, 10)})).(*kmsg.ProduceResponse) // 2-7 plain
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("produce: %s", errName(c))
	}
	if hw := p.Replica.HighWatermark(); hw != 8 {
		t.Fatalf("hw %d; want 8", hw)
	}

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version, dr.TimeoutMillis = 2, 5000
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "lsohunt"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Partition, drp.Offset = 0, 4
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics = append(dr.Topics, drt)
	drr := ctRoundTrip(t, addr, dr).(*kmsg.DeleteRecordsResponse)
	if c := drr.Topics[0].Partitions[0].ErrorCode; c != 0 || drr.Topics[0].Partitions[0].LowWatermark != 4 {
		t.Fatalf("DeleteRecords: %s low watermark %d", errName(c), drr.Topics[0].Partitions[0].LowWatermark)
	}

	list := func(ts int64) int64 { // one request each: a partition named twice is INVALID_REQUEST
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.Version, lo.ReplicaID, lo.IsolationLevel = 7, -1, 1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "lsohunt"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = 0, ts, -1
		lt.Partitions = append(lt.Partitions, lp)
		lo.Topics = append(lo.Topics, lt)
		return ctRoundTrip(t, addr, lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
	}
	earliest, latest := list(-2), list(-1)
	t.Logf("read_committed: earliest %d latest %d", earliest, latest)
	if latest < earliest {
		t.Errorf("ListOffsets read_committed: LATEST %d is below EARLIEST %d (Kafka: the LSO is clamped to the log start, 4)", latest, earliest)
	}

	f := ctFetch(11, 0, 0, "lsohunt", 0, 0)
	f.IsolationLevel = 1
	fr := ctRoundTrip(t, addr, f).(*kmsg.FetchResponse)
	fp := fr.Topics[0].Partitions[0]
	t.Logf("fetch read_committed at 0: %s hw %d lso %d logStart %d bytes %d", errName(fp.ErrorCode), fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset, len(fp.RecordBatches))
	if fp.LastStableOffset >= 0 && fp.LastStableOffset < fp.LogStartOffset {
		t.Errorf("fetch: last stable offset %d below log start %d", fp.LastStableOffset, fp.LogStartOffset)
	}
	if fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch read_committed at 0 < log start 4: %s; want OFFSET_OUT_OF_RANGE (Kafka), the consumer is otherwise parked below the log start", errName(fp.ErrorCode))
	}
}

// huntOldTxnBatch is lsoTxnBatch with records an hour old (a transaction open "long ago").
func huntOldTxnBatch(pid int64, n int) []byte {
	var body []byte
	ts := time.Now().Add(-time.Hour).UnixMilli()
	for i := 0; i < n; i++ {
		body = batch.AppendRecord(body, 0, int32(i), []byte(fmt.Sprintf("k%d", i)), []byte("t"), 0, nil)
	}
	return batch.AppendBatch(nil, batch.Header{Attributes: batch.AttrTransactional, LastOffsetDelta: int32(n - 1), BaseTimestamp: ts,
		MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0, RecordCount: int32(n)}, body)
}

// TestStaleTxnCheckWithItsStartDeleted: the partition-side check of transactions held open
// too long (txns.checkOpenTransactions) aborts one no coordinator can commit, also once
// DeleteRecords (or retention) moved the log start past its first batch: that read failed and
// the transaction was never judged stale, staying open for good and pinning the last stable
// offset. Control: the same transaction without DeleteRecords is aborted.
func TestStaleTxnCheckWithItsStartDeleted(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	var parts [2]*topicsPartitionAlias
	for i, name := range []string{"stalea", "staleb"} {
		tp := ctCreate(t, reg, name, 1, nil)
		p := tp.Partitions[0]
		parts[i] = &topicsPartitionAlias{name, p.Log.FirstUnstableOffset, p.Log.StartOffset}
		if _, _, err := p.Replica.Append(huntOldTxnBatch(int64(500+i), 2)); err != nil {
			t.Fatal(err)
		}
		p.Log.SyncSoon()
		ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{name, 0, ctBatch(6, 10)}))
	}
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version, dr.TimeoutMillis = 2, 5000
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "staleb"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Partition, drp.Offset = 0, 4
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics = append(dr.Topics, drt)
	if c := ctRoundTrip(t, addr, dr).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("DeleteRecords: %s", errName(c))
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && parts[0].fu() >= 0 {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(11 * time.Second) // two more check rounds (every txnPartitionCheck/2) for the other partition
	t.Logf("control %s: first unstable %d; after DeleteRecords %s: first unstable %d (log start %d)",
		parts[0].name, parts[0].fu(), parts[1].name, parts[1].fu(), parts[1].start())
	if parts[0].fu() >= 0 {
		t.Skipf("control transaction not aborted either: the mechanism did not run here")
	}
	if parts[1].fu() >= 0 {
		t.Errorf("the stale transaction whose first batch DeleteRecords removed is still open (first unstable %d < log start %d): never aborted",
			parts[1].fu(), parts[1].start())
	}
}

type topicsPartitionAlias struct {
	name  string
	fu    func() int64
	start func() int64
}
