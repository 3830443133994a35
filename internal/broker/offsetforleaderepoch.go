package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetForLeaderEpoch, 0, 4, handleOffsetForLeaderEpoch) }

// handleOffsetForLeaderEpoch answers from the epoch history of a single node: every batch is
// written in leader epoch 0, which starts at the log start offset and is the latest epoch. The
// answer follows Kafka's LeaderEpochFileCache.endOffsetFor.
func handleOffsetForLeaderEpoch(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	b := r.conn.b
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t, known := b.topics.Get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			current := int32(-1) // v0-v1 carry no current epoch: no check
			if req.Version >= 2 {
				current = rp.CurrentLeaderEpoch
			}
			switch {
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case current > 0:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code // newer than ours
			case current < -1:
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code // older than ours
			default:
				l := t.Partitions[rp.Partition].Log
				switch {
				case rp.LeaderEpoch == -1 || rp.LeaderEpoch > 0:
					// undefined, or newer than the latest epoch: UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
				case rp.LeaderEpoch == 0: // the latest epoch: it ends at the log end
					sp.LeaderEpoch, sp.EndOffset = 0, l.EndOffset()
				default: // older than the first epoch: it ends where epoch 0 starts
					sp.LeaderEpoch, sp.EndOffset = rp.LeaderEpoch, l.StartOffset()
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}
}
