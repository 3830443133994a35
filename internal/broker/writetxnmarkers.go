package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.WriteTxnMarkers, 0, 1, handleWriteTxnMarkers) }

// handleWriteTxnMarkers writes the markers a client asks for, as a partition leader does for
// Kafka's coordinators. Runnel's own coordinators write theirs over the cluster's RPCs; what
// sends this is an operator's abort of a hanging transaction (KIP-664: kafka-transactions
// abort, Admin.abortTransaction), with the producer id, epoch and coordinator epoch
// DescribeProducers showed. It needs CLUSTER_ACTION on the cluster, as in Kafka. Each marker is
// answered once a quorum holds it (an object partition's: once the controller committed it).
func handleWriteTxnMarkers(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	allowed := r.allowedCluster(kmsg.ACLOperationClusterAction)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, mt := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			for _, index := range mt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = index
				err := error(kerr.ClusterAuthorizationFailed)
				if allowed {
					err = r.conn.b.txns.writeMarker(ctx, txnMarkerReq{Topic: mt.Topic, Partition: index, ProducerID: m.ProducerID,
						Epoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch})
				}
				if err != nil {
					r.conn.b.logger.Warn("broker: WriteTxnMarkers", "topic", mt.Topic, "partition", index, "producer", m.ProducerID, "err", err)
					rp.ErrorCode = errorCode(err)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return reply{resp: resp}
}
