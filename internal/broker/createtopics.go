package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.CreateTopics, 0, 7, handleCreateTopics) }

// adminError is a per-resource failure of an admin request: a Kafka error and its message.
type adminError struct {
	code *kerr.Error
	msg  string
}

func (e *adminError) Error() string { return e.msg }

func adminErr(code *kerr.Error, format string, args ...any) *adminError {
	return &adminError{code, fmt.Sprintf(format, args...)}
}

// toAdminError maps a registry error to its Kafka error code, keeping the message.
func toAdminError(err error) *adminError {
	var ae *adminError
	if errors.As(err, &ae) {
		return ae
	}
	code, ok := kerr.ErrorForCode(errorCode(err)).(*kerr.Error)
	if !ok {
		code = kerr.UnknownServerError
	}
	return &adminError{code, err.Error()}
}

func strp(s string) *string { return &s }

// collides reports an existing topic whose name equals name once '.' and '_' are identified:
// Kafka forbids such pairs, as their metric names collide.
func collides(reg *topics.Registry, name string) (string, bool) {
	if !strings.ContainsAny(name, "._") {
		return "", false
	}
	norm := strings.ReplaceAll(name, ".", "_")
	for _, t := range reg.List() {
		if t.Name != name && strings.ReplaceAll(t.Name, ".", "_") == norm {
			return t.Name, true
		}
	}
	return "", false
}

func handleCreateTopics(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	b := r.conn.b
	quota := r.mutations(6)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	// As Kafka's validateTotalNumberOfPartitions: more than topics.MaxPartitions partitions in
	// all, over the topics that would go to the controller, refuses every one of them.
	clusterCreate := r.allowedCluster(kmsg.ACLOperationCreate)
	allowed := make([]bool, len(req.Topics)) // CREATE on the cluster or the topic
	total := 0
	for i, rt := range req.Topics {
		allowed[i] = clusterCreate || r.allowedTopic(kmsg.ACLOperationCreate, rt.Topic)
		if count[rt.Topic] > 1 || !allowed[i] {
			continue
		}
		switch {
		case len(rt.ReplicaAssignment) > 0:
			total += len(rt.ReplicaAssignment)
		case rt.NumPartitions == -1:
			total += int(b.cfg.DefaultPartitions)
		case rt.NumPartitions > 0:
			total += int(rt.NumPartitions)
		}
	}
	tooMany := total > topics.MaxPartitions
	if aerr := deadlinePassed(req.TimeoutMillis); aerr != nil && slices.ContainsFunc(req.Topics, func(rt kmsg.CreateTopicsRequestTopic) bool {
		return count[rt.Topic] == 1 && (clusterCreate || r.allowedTopic(kmsg.ACLOperationCreate, rt.Topic))
	}) {
		for _, rt := range req.Topics { // the whole request, as Kafka's getErrorResponse
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, aerr.code.Code, &aerr.msg
			resp.Topics = append(resp.Topics, st)
		}
		return reply{resp: resp}
	}
	dupReported := map[string]bool{}
	for i, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		if count[rt.Topic] > 1 {
			if dupReported[rt.Topic] { // as Kafka: one result per duplicated name
				continue
			}
			dupReported[rt.Topic] = true
			st.ErrorCode, st.ErrorMessage = kerr.InvalidRequest.Code, strp("Duplicate topic name.")
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !allowed[i] {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if tooMany {
			st.ErrorCode, st.ErrorMessage = kerr.PolicyViolation.Code, strp("Excessively large number of partitions per request.")
			resp.Topics = append(resp.Topics, st)
			continue
		}
		t, partitions, rf, aerr := b.createTopic(ctx, &rt, req.ValidateOnly, quota)
		if aerr != nil {
			st.ErrorCode, st.ErrorMessage = aerr.code.Code, &aerr.msg
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !req.ValidateOnly {
			st.TopicID = t.ID
		}
		if !r.allowedTopic(kmsg.ACLOperationDescribeConfigs, rt.Topic) {
			// As Kafka's ReplicationControlManager: created, its configs, partition count and
			// replication factor withheld.
			st.NumPartitions, st.ReplicationFactor = -1, -1
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.NumPartitions, st.ReplicationFactor = partitions, rf
		for _, d := range topics.Defs() {
			v, src := t.EffectiveSource(d.Name)
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.Source = d.Name, strp(v), int8(src)
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp, throttle: quota.throttle}
}

// createTopic validates and (unless validateOnly) creates one topic, in Kafka's order of checks;
// its partitions are admitted by quota (controller_mutation_rate) once it is valid.
func (b *Broker) createTopic(ctx context.Context, rt *kmsg.CreateTopicsRequestTopic, validateOnly bool, quota *mutations) (*topics.Topic, int32, int16, *adminError) {
	if err := topics.ValidateName(rt.Topic); err != nil {
		return nil, 0, 0, adminErr(kerr.InvalidTopicException, "%v", err)
	}
	if _, ok := b.topics.Get(rt.Topic); ok {
		return nil, 0, 0, adminErr(kerr.TopicAlreadyExists, "Topic '%s' already exists.", rt.Topic)
	}
	if other, ok := collides(b.topics, rt.Topic); ok {
		return nil, 0, 0, adminErr(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", rt.Topic, other)
	}
	configs := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value == nil {
			return nil, 0, 0, adminErr(kerr.InvalidConfig, "Null value not supported for topic configs: %s", c.Name)
		}
		configs[c.Name] = topics.NormalizeValue(c.Name, *c.Value)
	}
	partitions, rf := rt.NumPartitions, rt.ReplicationFactor
	var assignments [][]int32
	if len(rt.ReplicaAssignment) > 0 {
		if partitions != -1 {
			return nil, 0, 0, adminErr(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		}
		if rf != -1 {
			return nil, 0, 0, adminErr(kerr.InvalidRequest, "A manual partition assignment was specified, but replicationFactor was not set to -1.")
		}
		assignments = make([][]int32, len(rt.ReplicaAssignment))
		want := len(rt.ReplicaAssignment[0].Replicas) // every partition has the first one's count
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(assignments) || assignments[a.Partition] != nil {
				return nil, 0, 0, adminErr(kerr.InvalidReplicaAssignment, "Partitions in a manual assignment must be numbered 0 to %d, each once; got partition %d.", len(assignments)-1, a.Partition)
			}
			if aerr := b.checkNewReplicas(a.Replicas, want, int(a.Partition)); aerr != nil {
				return nil, 0, 0, aerr
			}
			assignments[a.Partition] = a.Replicas
		}
		partitions, rf = int32(len(assignments)), int16(len(assignments[0]))
	} else {
		switch {
		case rf < -1 || rf == 0:
			return nil, 0, 0, adminErr(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
		case partitions < -1 || partitions == 0:
			return nil, 0, 0, adminErr(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
		case partitions > topics.MaxPartitions:
			return nil, 0, 0, adminErr(kerr.InvalidPartitions, "Number of partitions %d is above the limit of %d.", partitions, topics.MaxPartitions)
		}
		if partitions == -1 {
			partitions = b.cfg.DefaultPartitions
		}
		if rf == -1 {
			rf = b.defaultReplicationFactor()
		}
		var aerr *adminError
		if b.storedInObjects(rt.Topic, configs) {
			assignments = make([][]int32, partitions) // no replicas: any node serves it
		} else if assignments, aerr = b.assignReplicas(0, partitions, rf); aerr != nil {
			return nil, 0, 0, aerr
		}
	}
	if err := b.topics.ValidateConfigs(configs); err != nil {
		return nil, 0, 0, adminErr(kerr.InvalidConfig, "%v", err)
	}
	if validateOnly {
		return b.topics.Preview(rt.Topic, configs), partitions, rf, nil
	}
	if aerr := quota.admit(partitions); aerr != nil {
		return nil, 0, 0, aerr
	}
	t, aerr := b.createTopicNow(ctx, rt.Topic, configs, assignments)
	return t, partitions, rf, aerr
}

// createTopicNow has the controller create a topic and returns it as this node's registry has it.
func (b *Broker) createTopicNow(ctx context.Context, name string, configs map[string]string, assignments [][]int32) (*topics.Topic, *adminError) {
	configs, assignments, aerr := b.resolveStorage(name, configs, assignments)
	if aerr != nil {
		return nil, aerr
	}
	if _, aerr := b.propose(ctx, &controller.Command{Op: controller.OpCreateTopic, CreateTopic: &controller.CreateTopic{
		Name: name, ID: newTopicID(), Configs: configs, Assignments: assignments}}); aerr != nil {
		return nil, aerr
	}
	t, ok := b.topics.Get(name)
	if !ok {
		return nil, adminErr(kerr.UnknownServerError, "Topic %s was created but is not known here.", name)
	}
	return t, nil
}

// deadlinePassed refuses a topic change whose request's timeout is 0 or less, as Kafka's
// controller does: the timeout is its events' deadline (ControllerRequestContext), which has
// passed when they would run, so the request fails whole (its getErrorResponse: every entry
// REQUEST_TIMED_OUT, as named) once it reaches the controller, and nothing is done.
func deadlinePassed(timeoutMillis int32) *adminError {
	if timeoutMillis > 0 {
		return nil
	}
	return adminErr(kerr.RequestTimedOut, "The request's timeout of %d ms had passed before the controller could run it", timeoutMillis)
}
