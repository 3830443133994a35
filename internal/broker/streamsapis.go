package broker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/topics"
)

// Streams groups (KIP-1071, docs/streams-groups.md): the group coordinator (internal/group)
// keeps the group; this node checks the topology's topic names, creates the internal topics
// the coordinator finds missing (repartition and changelog topics, with the configs the
// application sent), and answers.

func init() {
	register(kmsg.StreamsGroupHeartbeat, 0, 0, handleStreamsGroupHeartbeat)
	register(kmsg.StreamsGroupDescribe, 0, 0, handleStreamsGroupDescribe)
}

// streamsRequiredTopics are the topics a topology names: sources, repartition sinks and
// sources, changelogs (Kafka's KafkaApis checks their names and DESCRIBE on them).
func streamsRequiredTopics(t *kmsg.StreamsGroupHeartbeatRequestTopology) []string {
	var out []string
	for _, s := range t.Subtopologies {
		out = append(out, s.SourceTopics...)
		out = append(out, s.RepartitionSinkTopics...)
		for _, ti := range s.RepartitionSourceTopics {
			out = append(out, ti.Topic)
		}
		for _, ti := range s.StateChangelogTopics {
			out = append(out, ti.Topic)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func handleStreamsGroupHeartbeat(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.StreamsGroupHeartbeatRequest)
	b := r.conn.b
	if req.Topology != nil {
		var internal, invalid []string
		for _, t := range streamsRequiredTopics(req.Topology) {
			switch {
			case internalTopic(t):
				internal = append(internal, t)
			case topics.ValidateName(t) != nil:
				invalid = append(invalid, t)
			}
		}
		var msg string
		switch {
		case len(internal) > 0:
			msg = fmt.Sprintf("Use of Kafka internal topics %s in a Kafka Streams topology is prohibited.", strings.Join(internal, ","))
		case len(invalid) > 0:
			msg = fmt.Sprintf("Topic names %s are not valid topic names.", strings.Join(invalid, ","))
		}
		if msg != "" {
			resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
			resp.ErrorCode, resp.ErrorMessage = kerr.StreamsInvalidTopology.Code, &msg
			return reply{resp: resp}
		}
	}
	var create []group.InternalTopic
	resp, done := b.groups.immediate(ctx, req.Group, func(c *group.Coordinator) (kmsg.Response, group.Output) {
		resp, out, topics := c.StreamsGroupHeartbeat(timeNow(), req, r.clientID, clientHost(r.conn.remote))
		create = topics
		return resp, out
	}, func(code *kerr.Error) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
		resp.ErrorCode = code.Code
		return resp
	})
	hb := resp.(*kmsg.StreamsGroupHeartbeatResponse)
	if len(create) > 0 {
		b.streamsTopics.create(r, hb, create)
	}
	return reply{resp: resp, wait: func() {
		if err := done(); err != nil {
			hb.ErrorCode, hb.ActiveTasks, hb.StandbyTasks, hb.WarmupTasks = kerr.CoordinatorNotAvailable.Code, nil, nil, nil
		}
	}}
}

func handleStreamsGroupDescribe(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.StreamsGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	gs := r.conn.b.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var ids []string
	for _, id := range req.Groups {
		if id == "" {
			g := kmsg.NewStreamsGroupDescribeResponseGroup()
			g.ErrorCode, g.AuthorizedOperations = kerr.InvalidGroupID.Code, notRequested
			resp.Groups = append(resp.Groups, g)
			continue
		}
		ids = append(ids, id)
	}
	in, missing := gs.byShardLocked(ids)
	for sh, ids := range in {
		sub := *req
		sub.Groups = ids
		for _, g := range sh.c.StreamsGroupDescribe(&sub).Groups {
			if g.ErrorCode == 0 && g.Topology != nil && !r.mayDescribeTopology(g.Topology) {
				// As Kafka: the group's topics are not shown to whom may not describe them.
				msg := "The described group uses topics that the client is not authorized to describe."
				denied := kmsg.NewStreamsGroupDescribeResponseGroup()
				denied.Group, denied.ErrorCode, denied.ErrorMessage, denied.AuthorizedOperations = g.Group, kerr.TopicAuthorizationFailed.Code, &msg, notRequested
				g = denied
			}
			if g.ErrorCode == 0 && req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = r.authorizedOperations(kmsg.ACLResourceTypeGroup, g.Group, groupOps)
			}
			resp.Groups = append(resp.Groups, g)
		}
	}
	for _, id := range ids {
		if code, ok := missing[id]; ok {
			g := kmsg.NewStreamsGroupDescribeResponseGroup()
			g.Group, g.ErrorCode, g.AuthorizedOperations = id, code.Code, notRequested
			resp.Groups = append(resp.Groups, g)
		}
	}
	return reply{resp: resp}
}

// mayDescribeTopology reports whether the principal may describe every topic of a topology.
func (r *request) mayDescribeTopology(t *kmsg.StreamsGroupDescribeResponseGroupTopology) bool {
	for _, s := range t.Subtopologies {
		var names []string
		names = append(names, s.SourceTopics...)
		names = append(names, s.RepartitionSinkTopics...)
		for _, ti := range append(slices.Clone(s.StateChangelogTopics), s.RepartitionSourceTopics...) {
			names = append(names, ti.Topic)
		}
		for _, n := range names {
			if !r.allowedTopic(kmsg.ACLOperationDescribe, n) {
				return false
			}
		}
	}
	return true
}

// streamsTopicCreator creates streams groups' internal topics in the background, one attempt
// in flight per topic; a failure is remembered for twice the heartbeat interval (as Kafka's
// AutoTopicCreationManager) and reported in the MISSING_INTERNAL_TOPICS status meanwhile.
type streamsTopicCreator struct {
	mu       sync.Mutex
	inFlight map[string]bool
	failed   map[string]streamsCreateFailure
}

type streamsCreateFailure struct {
	msg   string
	until time.Time
}

// create starts creating the topics the principal may create, and adds to the response's
// MISSING_INTERNAL_TOPICS status those it may not and those whose creation failed recently.
func (sc *streamsTopicCreator) create(r *request, resp *kmsg.StreamsGroupHeartbeatResponse, want []group.InternalTopic) {
	b := r.conn.b
	var unauthorized, failed []string
	now := time.Now()
	sc.mu.Lock()
	if sc.inFlight == nil {
		sc.inFlight, sc.failed = map[string]bool{}, map[string]streamsCreateFailure{}
	}
	var start []group.InternalTopic
	for _, it := range want {
		switch f, ok := sc.failed[it.Name]; {
		case !r.allowedCluster(kmsg.ACLOperationCreate) && !r.allowedTopic(kmsg.ACLOperationCreate, it.Name):
			unauthorized = append(unauthorized, it.Name)
		case ok && now.Before(f.until):
			failed = append(failed, fmt.Sprintf("%s (%s)", it.Name, f.msg))
		case sc.inFlight[it.Name]:
		default:
			sc.inFlight[it.Name] = true
			start = append(start, it)
		}
	}
	sc.mu.Unlock()
	if len(unauthorized) > 0 || len(failed) > 0 {
		var extra []string
		if len(unauthorized) > 0 {
			extra = append(extra, "Unauthorized to CREATE on topics "+strings.Join(unauthorized, ", ")+".")
		}
		if len(failed) > 0 {
			extra = append(extra, "Creation failed: "+strings.Join(failed, ", "))
		}
		for i := range resp.Status {
			if resp.Status[i].StatusCode == 3 { // MISSING_INTERNAL_TOPICS
				resp.Status[i].StatusDetail += "; " + strings.Join(extra, "; ")
			}
		}
	}
	retry := 2 * b.cfg.Groups.StreamsHeartbeatInterval
	for _, it := range start {
		go func(it group.InternalTopic) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			aerr := b.createStreamsTopic(ctx, it)
			sc.mu.Lock()
			defer sc.mu.Unlock()
			delete(sc.inFlight, it.Name)
			if aerr != nil && aerr.code != kerr.TopicAlreadyExists {
				b.logger.Warn("broker: creating a streams group's internal topic", "topic", it.Name, "err", aerr.msg)
				sc.failed[it.Name] = streamsCreateFailure{aerr.msg, time.Now().Add(retry)}
			} else {
				delete(sc.failed, it.Name)
			}
		}(it)
	}
}

// createStreamsTopic creates one internal topic with the application's configs, the cluster's
// default replication factor unless it named one.
func (b *Broker) createStreamsTopic(ctx context.Context, it group.InternalTopic) *adminError {
	if err := topics.ValidateName(it.Name); err != nil {
		return adminErr(kerr.InvalidTopicException, "%v", err)
	}
	if _, ok := b.topics.Get(it.Name); ok {
		return nil
	}
	configs := make(map[string]string, len(it.Configs))
	for _, kv := range it.Configs {
		configs[kv[0]] = kv[1]
	}
	if err := b.topics.ValidateConfigs(configs); err != nil {
		return adminErr(kerr.InvalidConfig, "%v", err)
	}
	rf := it.Replication
	if rf <= 0 {
		rf = b.defaultReplicationFactor()
	}
	assignments, aerr := b.assignReplicas(0, it.Partitions, rf)
	if aerr != nil {
		return aerr
	}
	_, aerr = b.createTopicNow(ctx, it.Name, configs, assignments)
	return aerr
}
