package broker

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
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
// high watermark; a debugging client (replica id -2) sees the whole log.
func fetchable(replicaID int32, offset, hw int64) bool {
	return replicaID == -2 || offset < hw
}

func handleListOffsets(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	b := r.conn.b
	barrier := sync.OnceValue(func() error { return b.objectBarrier(ctx) })
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t, known := b.topics.Get(rt.Topic)
		allowed := r.allowedTopic(kmsg.ACLOperationDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Timestamp, sp.Offset, sp.LeaderEpoch = rp.Partition, -1, -1, -1
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			var p *topics.Partition
			var err error
			if known && isObjectTopic(t) {
				if err := b.listObjectOffset(ctx, t, req.ReplicaID, req.IsolationLevel == 1, &rp, &sp, barrier); err != nil {
					sp.ErrorCode = errorCode(err)
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if !known {
				err = kerr.UnknownTopicOrPartition
			} else if p, err = b.leader(t, rp.Partition, rp.CurrentLeaderEpoch); err == nil && !waitReady(ctx, p.Replica, time.Second) {
				err = kerr.OffsetNotAvailable // a new leader: its high watermark is not known yet
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				l := p.Log
				hw := p.Replica.HighWatermark()
				if req.IsolationLevel == 1 { // read_committed: nothing at or past the last stable offset
					hw = l.LastStable(hw)
				}
				sp.LeaderEpoch, _, _ = p.Replica.Leading()
				switch rp.Timestamp {
				case listLatest:
					sp.Offset = hw
				case listEarliest:
					sp.Offset = l.StartOffset()
				case listMaxTimestamp:
					if off, ts, ok, err := l.MaxTimestamp(); err != nil {
						sp.ErrorCode = errorCode(err)
					} else if ok && fetchable(req.ReplicaID, off, hw) {
						sp.Offset, sp.Timestamp = off, ts
					}
				default:
					if rp.Timestamp < 0 {
						sp.ErrorCode = kerr.InvalidRequest.Code
					} else if off, ts, ok, err := l.OffsetForTimestamp(rp.Timestamp); err != nil {
						sp.ErrorCode = errorCode(err)
					} else if ok && fetchable(req.ReplicaID, off, hw) {
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
