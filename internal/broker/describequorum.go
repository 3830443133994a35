package broker

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
)

func init() { register(kmsg.DescribeQuorum, 0, 2, handleDescribeQuorum) }

// metadataTopic is the name Kafka's KRaft quorum goes by in DescribeQuorum: Runnel's controller
// Raft group is its one partition.
const metadataTopic = "__cluster_metadata"

// controllerListener names the voters' Raft endpoints (their cluster addresses) in
// DescribeQuorum v2, as Kafka's default controller listener is named. They serve Raft and
// replication on Runnel's cluster transport, not the Kafka protocol.
const controllerListener = "CONTROLLER"

// handleDescribeQuorum describes the controller quorum (KIP-595, KIP-853) as its leader sees it,
// on any node (as a Kafka broker forwards it to the active controller): the leader, its epoch
// (Raft term) and high watermark (commit index), each voter's and observer's (learner's) log
// end, last contact and last caught-up time. docs/cluster.md §4.6.
func handleDescribeQuorum(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	b := r.conn.b
	var q controller.Quorum
	var qerr error
	asked := false
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeQuorumResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDescribeQuorumResponseTopicPartition()
			sp.Partition, sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = rp.Partition, -1, -1, -1
			if rt.Topic != metadataTopic || rp.Partition != 0 {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if !asked {
				asked = true
				qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				q, qerr = b.cl.DescribeQuorum(qctx)
				cancel()
			}
			if qerr != nil {
				code := kerr.RequestTimedOut
				if !errors.Is(qerr, context.DeadlineExceeded) {
					code = kerr.NotLeaderForPartition
				}
				sp.ErrorCode, sp.ErrorMessage = code.Code, strp(qerr.Error())
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = q.Leader, int32(q.Epoch), q.HighWatermark
			sp.CurrentVoters = quorumReplicas(q.Voters)
			sp.Observers = quorumReplicas(q.Observers)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Version >= 2 && asked && qerr == nil {
		for _, v := range q.Voters {
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = v.Node
			if host, port, err := net.SplitHostPort(b.cl.ClusterAddr(v.Node)); err == nil {
				if p, err := strconv.ParseUint(port, 10, 16); err == nil {
					l := kmsg.NewDescribeQuorumResponseNodeListener()
					l.Name, l.Host, l.Port = controllerListener, host, uint16(p)
					n.Listeners = append(n.Listeners, l)
				}
			}
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	return reply{resp: resp}
}

func quorumReplicas(rs []controller.QuorumReplica) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	out := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, 0, len(rs))
	for _, r := range rs {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID, s.LogEndOffset, s.LastFetchTimestamp, s.LastCaughtUpTimestamp = r.Node, r.LogEnd, r.LastFetch, r.LastCaughtUp
		out = append(out, s)
	}
	return out
}
