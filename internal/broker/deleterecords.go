package broker

import (
	"context"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.DeleteRecords, 0, 2, handleDeleteRecords) }

// deleteToHighWatermark is DeleteRecords' offset meaning "up to the high watermark".
const deleteToHighWatermark = -1

// handleDeleteRecords advances partitions' log start offsets on their leaders (followers follow
// from the log start the leader sends them). It runs on the read loop, so a
// request that follows on the connection sees the new start offsets.
func handleDeleteRecords(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	b := r.conn.b
	barrier := sync.OnceValue(func() error { return b.objectBarrier(ctx) })
	for _, rt := range mergeDeleteRecordsTopics(req.Topics) {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t, known := b.topics.Get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			if !r.allowedTopic(kmsg.ACLOperationDelete, rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			var p *topics.Partition
			var err error
			// As Kafka: the partition is looked up (and led here) before its topic's policy is
			// checked; records of a compact-only topic cannot be deleted.
			compactOnly := func() bool {
				policy, _ := t.Effective("cleanup.policy")
				return !strings.Contains(policy, "delete")
			}
			if known && isObjectTopic(t) {
				if _, err := b.objectPartition(t.ID, rp.Partition); err != nil {
					sp.ErrorCode = errorCode(err)
				} else if compactOnly() {
					sp.ErrorCode = kerr.PolicyViolation.Code
				} else if sp.LowWatermark, err = b.deleteObjectRecords(ctx, t, rp.Partition, rp.Offset, barrier); err != nil {
					sp.ErrorCode = errorCode(err)
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if !known {
				err = kerr.UnknownTopicOrPartition
			} else if p, err = b.leader(t, rp.Partition, -1); err == nil && compactOnly() {
				err = kerr.PolicyViolation
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				l, hw := p.Log, p.Replica.HighWatermark()
				off := rp.Offset
				if off == deleteToHighWatermark {
					off = hw
				}
				if off < 0 || off > hw {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
				} else if err := l.AdvanceStartOffset(off); err != nil {
					sp.ErrorCode = errorCode(err)
					b.logger.Error("broker: DeleteRecords could not move the log start", "topic", t.Name, "partition", rp.Partition,
						"offset", off, "err", err)
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

// mergeDeleteRecordsTopics answers a topic named twice in one row and a partition named twice
// once, at the offset its last mention asks, as Kafka's handleDeleteRecordsRequest (a map by
// partition) does.
func mergeDeleteRecordsTopics(in []kmsg.DeleteRecordsRequestTopic) []kmsg.DeleteRecordsRequestTopic {
	var out []kmsg.DeleteRecordsRequestTopic
	topicAt := map[string]int{}
	partAt := map[string]map[int32]int{}
	for _, rt := range in {
		i, ok := topicAt[rt.Topic]
		if !ok {
			i = len(out)
			topicAt[rt.Topic], partAt[rt.Topic] = i, map[int32]int{}
			out = append(out, kmsg.DeleteRecordsRequestTopic{Topic: rt.Topic})
		}
		for _, rp := range rt.Partitions {
			if j, ok := partAt[rt.Topic][rp.Partition]; ok {
				out[i].Partitions[j] = rp
				continue
			}
			partAt[rt.Topic][rp.Partition] = len(out[i].Partitions)
			out[i].Partitions = append(out[i].Partitions, rp)
		}
	}
	return out
}
