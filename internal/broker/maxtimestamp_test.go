package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
)

// ListOffsets MAX_TIMESTAMP (-3, KIP-734) after DeleteRecords removed the record holding the
// segment's max timestamp: records remained, yet the answer was "none".
func TestMaxTimestampAfterDeleteRecords(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "mx", 1, nil)
	now := time.Now().UnixMilli()
	one := func(ts int64) []byte {
		body := batch.AppendRecord(nil, 0, 0, []byte("k"), []byte("v"), 0, nil)
		return batch.AppendBatch(nil, batch.Header{BaseTimestamp: ts, MaxTimestamp: ts,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1}, body)
	}
	ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"mx", 0, one(now)}))        // offset 0: the newest time
	ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"mx", 0, one(now - 5000)})) // offset 1
	ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"mx", 0, one(now - 9000)})) // offset 2
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.TimeoutMillis = 5000
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "mx"
	dt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}}
	dr.Topics = append(dr.Topics, dt)
	if r := ctRoundTrip(t, addr, dr).(*kmsg.DeleteRecordsResponse); r.Topics[0].Partitions[0].LowWatermark != 1 {
		t.Fatalf("DeleteRecords: %+v", r.Topics[0].Partitions[0])
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 7, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "mx"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := ctRoundTrip(t, addr, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.Offset != 1 || p.Timestamp != now-5000 {
		t.Errorf("max timestamp: offset %d at %d (code %d); want offset 1 at %d, the largest timestamp of the records left", p.Offset, p.Timestamp, p.ErrorCode, now-5000)
	}
}
