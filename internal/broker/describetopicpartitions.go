package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.DescribeTopicPartitions, 0, 0, handleDescribeTopicPartitions) }

// maxDescribedPartitions is Kafka's max.request.partition.size.limit: the most partitions one
// DescribeTopicPartitions answer holds, whatever the request's limit.
const maxDescribedPartitions = 2000

// handleDescribeTopicPartitions is KIP-966's paged Metadata, which Kafka's admin client (3.9+)
// and kafka-topics --describe use when the broker offers it: topics in name order from the
// cursor's topic and partition, at most max(min(ResponsePartitionLimit, 2000), 1) partitions, and a
// NextCursor at the first partition left out. With no topics named it describes every topic the
// principal may describe (the others are not shown); a named topic it may not describe is
// answered TOPIC_AUTHORIZATION_FAILED, after the others. Partitions are those Metadata gives
// (the same leaders, replicas, ISR and offline replicas); Runnel has no eligible leader
// replicas (KIP-966's ELR), so both ELR lists are empty.
func handleDescribeTopicPartitions(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	b := r.conn.b
	all := len(req.Topics) == 0
	from := ""
	if req.Cursor != nil {
		from = req.Cursor.Topic
	}
	var names []string
	if all {
		for _, t := range b.topics.List() {
			names = append(names, t.Name)
		}
	} else {
		for _, rt := range req.Topics {
			names = append(names, rt.Topic)
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n < from })
	slices.Sort(names)
	names = slices.Compact(names)
	if req.Cursor != nil && (req.Cursor.Partition < 0 || !all && !slices.Contains(names, req.Cursor.Topic)) {
		// Kafka: the cursor's topic must be one of the topics named, its partition not negative.
		for _, rt := range req.Topics {
			t := kmsg.NewDescribeTopicPartitionsResponseTopic()
			t.Topic, t.ErrorCode = kmsg.StringPtr(rt.Topic), kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, t)
		}
		return reply{resp: resp}
	}
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	img := b.cl.Image()
	var rv *ripcordView
	if b.ripcording() {
		rv = b.ripcordView()
	}
	remaining := max(min(int(req.ResponsePartitionLimit), maxDescribedPartitions), 1) // as Kafka: a page has one at least
	for _, name := range names {
		if !r.allowedTopic(kmsg.ACLOperationDescribe, name) {
			if !all {
				t := kmsg.NewDescribeTopicPartitionsResponseTopic()
				t.Topic, t.ErrorCode = kmsg.StringPtr(name), kerr.TopicAuthorizationFailed.Code
				denied = append(denied, t)
			}
			continue
		}
		if remaining == 0 { // the next page starts at this topic
			c := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
			c.Topic, c.Partition = name, 0
			resp.NextCursor = &c
			break
		}
		tp, ok := b.topics.Get(name)
		if !ok {
			if !all {
				t := kmsg.NewDescribeTopicPartitionsResponseTopic()
				t.Topic, t.ErrorCode = kmsg.StringPtr(name), kerr.UnknownTopicOrPartition.Code
				if topics.ValidateName(name) != nil {
					t.ErrorCode = kerr.InvalidTopicException.Code
				}
				resp.Topics = append(resp.Topics, t)
			}
			continue
		}
		first := int32(0)
		if req.Cursor != nil && name == req.Cursor.Topic {
			first = req.Cursor.Partition
		}
		mt := b.metadataTopic(img, rv, tp, clientZone(r.clientID))
		t := kmsg.NewDescribeTopicPartitionsResponseTopic()
		t.Topic, t.TopicID, t.IsInternal = mt.Topic, mt.TopicID, mt.IsInternal
		t.AuthorizedOperations = r.authorizedOperations(kmsg.ACLResourceTypeTopic, name, topicOps)
		n := int32(len(mt.Partitions))
		upper := min(n, first+int32(remaining))
		for _, mp := range mt.Partitions {
			if mp.Partition < first || mp.Partition >= upper {
				continue
			}
			p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			p.Partition, p.LeaderID, p.LeaderEpoch = mp.Partition, mp.Leader, mp.LeaderEpoch
			if mp.ErrorCode == kerr.LeaderNotAvailable.Code { // Kafka: no error, and no leader
				p.LeaderID = -1
			} else {
				p.ErrorCode = mp.ErrorCode
			}
			p.Replicas, p.ISR, p.OfflineReplicas = orEmpty(mp.Replicas), orEmpty(mp.ISR), orEmpty(mp.OfflineReplicas)
			p.EligibleLeaderReplicas, p.LastKnownELR = []int32{}, []int32{} // empty, not null: Java reads them as lists
			t.Partitions = append(t.Partitions, p)
		}
		slices.SortFunc(t.Partitions, func(a, b kmsg.DescribeTopicPartitionsResponseTopicPartition) int {
			return int(a.Partition - b.Partition)
		})
		resp.Topics = append(resp.Topics, t)
		remaining -= len(t.Partitions)
		if upper < n {
			c := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
			c.Topic, c.Partition = name, upper
			resp.NextCursor = &c
			break
		}
	}
	resp.Topics = append(resp.Topics, denied...)
	return reply{resp: resp}
}

// orEmpty returns s, or an empty list for nil (a nullable array field must not read as null).
func orEmpty(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
