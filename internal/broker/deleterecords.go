package broker

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DeleteRecords, 0, 2, handleDeleteRecords) }

// deleteToHighWatermark is DeleteRecords' offset meaning "up to the high watermark".
const deleteToHighWatermark = -1

// handleDeleteRecords advances partitions' log start offsets. It runs on the read loop, so a
// request that follows on the connection sees the new start offsets.
func handleDeleteRecords(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	b := r.conn.b
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t, known := b.topics.Get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			if !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if policy, _ := t.Effective("cleanup.policy"); !strings.Contains(policy, "delete") {
				sp.ErrorCode = kerr.PolicyViolation.Code // as Kafka: records of a compact-only topic cannot be deleted
			} else {
				l := t.Partitions[rp.Partition].Log
				off := rp.Offset
				if off == deleteToHighWatermark {
					off = l.HighWatermark()
				}
				if off < 0 || off > l.HighWatermark() {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
				} else if err := l.AdvanceStartOffset(off); err != nil {
					sp.ErrorCode = errorCode(err)
				} else {
					sp.LowWatermark = l.StartOffset()
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}
}
