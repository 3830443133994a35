package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/logstore"
)

func init() { register(kmsg.ListOffsets, 1, 7, handleListOffsets) }

// ListOffsets special timestamps.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3 // v7+ (KIP-734)
)

// fetchable reports whether a consumer may be told about offset: as in Kafka, a lookup by
// timestamp from a consumer (replica id -1) answers "none" (-1) for an offset at or above the
// high watermark, which without write caching is the durable offset; a debugging client
// (replica id -2) sees the whole log.
func fetchable(replicaID int32, offset int64, l *logstore.Log) bool {
	return replicaID == -2 || offset < l.HighWatermark()
}

func handleListOffsets(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	b := r.conn.b
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t, known := b.topics.Get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Timestamp, sp.Offset, sp.LeaderEpoch = rp.Partition, -1, -1, 0
			switch {
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.CurrentLeaderEpoch > 0:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code // the only epoch on one node is 0
			default:
				l := t.Partitions[rp.Partition].Log
				switch rp.Timestamp {
				case listLatest:
					sp.Offset = l.HighWatermark()
				case listEarliest:
					sp.Offset = l.StartOffset()
				case listMaxTimestamp:
					if off, ts, ok, err := l.MaxTimestamp(); err != nil {
						sp.ErrorCode = errorCode(err)
					} else if ok && fetchable(req.ReplicaID, off, l) {
						sp.Offset, sp.Timestamp = off, ts
					}
				default:
					if rp.Timestamp < 0 {
						sp.ErrorCode = kerr.InvalidRequest.Code
					} else if off, ts, ok, err := l.OffsetForTimestamp(rp.Timestamp); err != nil {
						sp.ErrorCode = errorCode(err)
					} else if ok && fetchable(req.ReplicaID, off, l) {
						sp.Offset, sp.Timestamp = off, ts
					}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}
}
