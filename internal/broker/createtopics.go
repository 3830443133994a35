package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// checkReplicas checks one partition's explicit replica list: on one node it can only be [nodeID].
func checkReplicas(replicas []int32, nodeID int32) *adminError {
	if len(replicas) == 0 {
		return adminErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	seen := map[int32]bool{}
	for _, id := range replicas {
		if seen[id] {
			return adminErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", id)
		}
		seen[id] = true
		if id != nodeID {
			return adminErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
	}
	return nil
}

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

func handleCreateTopics(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	b := r.conn.b
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	dupReported := map[string]bool{}
	for _, rt := range req.Topics {
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
		t, partitions, rf, aerr := b.createTopic(&rt, req.ValidateOnly)
		if aerr != nil {
			st.ErrorCode, st.ErrorMessage = aerr.code.Code, &aerr.msg
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !req.ValidateOnly {
			st.TopicID = t.ID
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
	return reply{resp: resp}
}

// createTopic validates and (unless validateOnly) creates one topic, in Kafka's order of checks.
func (b *Broker) createTopic(rt *kmsg.CreateTopicsRequestTopic, validateOnly bool) (*topics.Topic, int32, int16, *adminError) {
	if err := topics.ValidateName(rt.Topic); err != nil {
		return nil, 0, 0, adminErr(kerr.InvalidTopicException, "%v", err)
	}
	if _, ok := b.topics.Get(rt.Topic); ok {
		return nil, 0, 0, adminErr(kerr.TopicAlreadyExists, "Topic '%s' already exists.", rt.Topic)
	}
	if other, ok := collides(b.topics, rt.Topic); ok {
		return nil, 0, 0, adminErr(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", rt.Topic, other)
	}
	partitions, rf := rt.NumPartitions, rt.ReplicationFactor
	if len(rt.ReplicaAssignment) > 0 {
		if partitions != -1 {
			return nil, 0, 0, adminErr(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		}
		if rf != -1 {
			return nil, 0, 0, adminErr(kerr.InvalidRequest, "A manual partition assignment was specified, but replicationFactor was not set to -1.")
		}
		seen := make([]bool, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(seen) || seen[a.Partition] {
				return nil, 0, 0, adminErr(kerr.InvalidReplicaAssignment, "Partitions in a manual assignment must be numbered 0 to %d, each once; got partition %d.", len(seen)-1, a.Partition)
			}
			seen[a.Partition] = true
			if aerr := checkReplicas(a.Replicas, b.cfg.NodeID); aerr != nil {
				return nil, 0, 0, aerr
			}
		}
		partitions, rf = int32(len(rt.ReplicaAssignment)), 1
	} else {
		switch {
		case rf < -1 || rf == 0:
			return nil, 0, 0, adminErr(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
		case partitions < -1 || partitions == 0:
			return nil, 0, 0, adminErr(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
		}
		if partitions == -1 {
			partitions = b.cfg.DefaultPartitions
		}
		if rf == -1 {
			rf = 1
		}
		if rf > 1 {
			return nil, 0, 0, adminErr(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only 1 broker(s) are registered.", rf, rf)
		}
	}
	configs := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value == nil {
			return nil, 0, 0, adminErr(kerr.InvalidConfig, "Null value not supported for topic configs: %s", c.Name)
		}
		configs[c.Name] = *c.Value
	}
	if err := b.topics.ValidateConfigs(configs); err != nil {
		return nil, 0, 0, adminErr(kerr.InvalidConfig, "%v", err)
	}
	t, err := b.topics.Create(rt.Topic, partitions, configs, validateOnly)
	if err != nil {
		return nil, 0, 0, toAdminError(err)
	}
	return t, partitions, rf, nil
}
