package broker

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetForLeaderEpoch, 0, 4, handleOffsetForLeaderEpoch) }

// handleOffsetForLeaderEpoch answers from the partition leader's epoch cache (KIP-101,
// KIP-320): the largest epoch not above the one asked for, and where it ends — the next epoch's
// start, or the log end for the current epoch — as Kafka's LeaderEpochFileCache.endOffsetFor.
func handleOffsetForLeaderEpoch(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	b := r.conn.b
	barrier := sync.OnceValue(func() error { return b.objectBarrier(ctx) })
	// As Kafka's handleOffsetForLeaderEpochRequest: CLUSTER_ACTION on the cluster (a replica's
	// principal) authorizes every partition; else DESCRIBE on each topic.
	clusterAction := r.allowedCluster(kmsg.ACLOperationClusterAction)
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
			if !clusterAction && !r.allowedTopic(kmsg.ACLOperationDescribe, rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if known && isObjectTopic(t) {
				// One epoch, 0, for the partition's whole life: it ends at the log end. A consumer
				// validates its position with this when the partition's "leader" moves to
				// another node (KIP-320): an end older than its position would look like a
				// truncation, so the end comes from a current image (objectBarrier).
				if err := barrier(); err != nil {
					sp.ErrorCode = errorCode(err)
				} else if op, err := b.objectPartition(t.ID, rp.Partition); err != nil {
					sp.ErrorCode = errorCode(err)
				} else if current > 0 {
					sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
				} else if rp.LeaderEpoch >= 0 {
					sp.LeaderEpoch, sp.EndOffset = 0, op.Next
				}
			} else if !known {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if p, err := b.leader(t, rp.Partition, current); err != nil {
				sp.ErrorCode = errorCode(err)
			} else if rp.LeaderEpoch >= 0 {
				sp.LeaderEpoch, sp.EndOffset = p.Replica.EndOffsetFor(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}
}
