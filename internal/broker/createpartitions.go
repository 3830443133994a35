package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.CreatePartitions, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	b := r.conn.b
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	dupReported := map[string]bool{}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if count[rt.Topic] > 1 {
			if !dupReported[rt.Topic] {
				dupReported[rt.Topic] = true
				st.ErrorCode, st.ErrorMessage = kerr.InvalidRequest.Code, strp("Duplicate topic name.")
				resp.Topics = append(resp.Topics, st)
			}
			continue
		}
		if aerr := b.createPartitions(&rt, req.ValidateOnly); aerr != nil {
			st.ErrorCode, st.ErrorMessage = aerr.code.Code, &aerr.msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}
}

// createPartitions grows one topic, with Kafka's checks and messages.
func (b *Broker) createPartitions(rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool) *adminError {
	t, ok := b.topics.Get(rt.Topic)
	if !ok {
		return adminErr(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
	}
	have := int32(len(t.Partitions))
	switch {
	case rt.Count == have:
		return adminErr(kerr.InvalidPartitions, "Topic already has %d partition(s).", have)
	case rt.Count < have:
		return adminErr(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", rt.Topic, have, rt.Count)
	}
	if rt.Assignment != nil {
		if add := rt.Count - have; int32(len(rt.Assignment)) != add {
			return adminErr(kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", add, len(rt.Assignment))
		}
		for _, a := range rt.Assignment {
			if aerr := checkReplicas(a.Replicas, b.cfg.NodeID); aerr != nil {
				return aerr
			}
		}
	}
	if err := b.topics.CreatePartitions(rt.Topic, rt.Count, validateOnly); err != nil {
		return toAdminError(err)
	}
	return nil
}
