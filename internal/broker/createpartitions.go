package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.CreatePartitions, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	b := r.conn.b
	b.adminBarrier(ctx)
	quota := r.mutations(3)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	if aerr := deadlinePassed(req.TimeoutMillis); aerr != nil && slices.ContainsFunc(req.Topics, func(rt kmsg.CreatePartitionsRequestTopic) bool {
		return count[rt.Topic] == 1 && r.allowedTopic(kmsg.ACLOperationAlter, rt.Topic)
	}) {
		for _, rt := range req.Topics { // the whole request, as Kafka's getErrorResponse
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, aerr.code.Code, &aerr.msg
			resp.Topics = append(resp.Topics, st)
		}
		return reply{resp: resp}
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
		if !r.allowedTopic(kmsg.ACLOperationAlter, rt.Topic) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
		} else if aerr := b.createPartitions(ctx, &rt, req.ValidateOnly, quota); aerr != nil {
			st.ErrorCode, st.ErrorMessage = aerr.code.Code, &aerr.msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp, throttle: quota.throttle}
}

// createPartitions grows one topic, with Kafka's checks and messages; the new partitions are
// admitted by quota (controller_mutation_rate) once the change is valid.
func (b *Broker) createPartitions(ctx context.Context, rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool, quota *mutations) *adminError {
	t, ok := b.topics.Get(rt.Topic)
	if !ok {
		return adminErr(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
	}
	have := int32(len(t.Partitions))
	switch {
	case rt.Topic == OffsetsTopic || rt.Topic == TxnStateTopic:
		// Groups and transactional ids are found by hashing over the count: growing it would
		// move them away from their state (Kafka's tools refuse it too, KAFKA-7801).
		return adminErr(kerr.InvalidRequest, "The number of partitions of the internal topic %s cannot be changed: coordinators are found by hashing over it.", rt.Topic)
	case rt.Count == have:
		return adminErr(kerr.InvalidPartitions, "Topic already has %d partition(s).", have)
	case rt.Count < have:
		return adminErr(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", rt.Topic, have, rt.Count)
	case rt.Count > topics.MaxPartitions:
		return adminErr(kerr.InvalidPartitions, "Number of partitions %d is above the limit of %d.", rt.Count, topics.MaxPartitions)
	}
	var assignments [][]int32
	if isObjectTopic(t) { // no replicas: the assignments only count the new partitions
		assignments = make([][]int32, rt.Count-have)
	} else if rt.Assignment != nil {
		if add := rt.Count - have; int32(len(rt.Assignment)) != add {
			return adminErr(kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", add, len(rt.Assignment))
		}
		want := 0 // the topic's replication factor, as Kafka's
		if p := b.imagePartition(t.ID, 0); p != nil {
			want = len(p.Replicas)
		}
		for i, a := range rt.Assignment {
			if aerr := b.checkNewReplicas(a.Replicas, want, int(have)+i); aerr != nil {
				return aerr
			}
			assignments = append(assignments, a.Replicas)
		}
	} else {
		rf := int16(1)
		if p := b.imagePartition(t.ID, 0); p != nil {
			rf = int16(len(p.Replicas))
		}
		var aerr *adminError
		if assignments, aerr = b.assignReplicas(have, rt.Count-have, rf); aerr != nil {
			return aerr
		}
	}
	if validateOnly {
		return nil
	}
	if aerr := quota.admit(rt.Count - have); aerr != nil {
		return aerr
	}
	cp := &controller.CreatePartitions{ID: t.ID, Assignments: assignments}
	if b.cl.Image().Level >= controller.LevelPartitionCount {
		from := int(have)
		cp.From = &from // refused if another change added partitions meanwhile
	}
	_, aerr := b.propose(ctx, &controller.Command{Op: controller.OpCreatePartitions, CreatePartitions: cp})
	return aerr
}
