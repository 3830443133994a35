package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's KafkaApis.handleListOffsetRequest answers
// every row of a partition named more than once in one request INVALID_REQUEST
// (offsetRequest.duplicatePartitions), rather than resolving each.
func TestListOffsetsDuplicatePartition(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "dup", 1, nil)
	ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"dup", 0, ctBatch(2, 10)}))
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 7, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "dup"
	for _, ts := range []int64{-1, -2} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := ctRoundTrip(t, addr, req).(*kmsg.ListOffsetsResponse)
	for i, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("row %d (partition 0 named twice): error %v offset %d; want INVALID_REQUEST", i, kerr.ErrorForCode(p.ErrorCode), p.Offset)
		}
	}
}

// Kafka answers a debugging client (replica id -2,
// ListOffsetsRequest.DEBUGGING_REPLICA_ID) with no isolation level
// (KafkaApis/ReplicaManager: isolationLevelOpt = None unless replica id is -1), so LATEST is
// the log end offset (Partition.fetchOffsetForTimestamp: case None => localLog.logEndOffset),
// not the high watermark; Runnel's own fetchable() already lets replica -2 see the whole log
// for timestamp lookups.
func TestListOffsetsDebugReplicaLatest(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	tp := ctCreate(t, reg, "dbg", 1, nil)
	p := tp.Partitions[0]
	ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"dbg", 0, ctBatch(2, 10)})) // 0-1, committed
	if _, _, err := p.Replica.Append(ctBatch(3, 10)); err != nil {           // 2-4, not yet synced
		t.Fatal(err)
	}
	list := func(replica int32) (int64, int64) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = 7, replica
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "dbg"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return ctRoundTrip(t, addr, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset, p.Replica.HighWatermark()
	}
	got, hw := list(-2)
	if end := p.Log.EndOffset(); hw < end && got != end {
		t.Errorf("replica -2 LATEST = %d (high watermark %d); Kafka answers the log end offset %d", got, hw, end)
	} else if hw >= end {
		t.Skipf("the high watermark (%d) caught up with the log end before the lookup: nothing to tell apart", hw)
	}
}
